//! What a failure means for a retry, against a real server: a statement
//! whose answer the client cannot take (no row for `query_one`, a value of
//! another type) is not a lost connection, so it is not retried for
//! `--retry-for` on new connections that would give the same answer; a
//! terminated backend is; a server error is fatal, a lock not granted
//! within `lock_timeout` is a lock wait, a cancelled statement is fatal,
//! and a write refused as read-only (what a standby answers) sends the
//! work to find the primary again.

use chute_engine::retry::{Fault, classify, connection_lost};
use chute_testkit::shared;

#[tokio::test]
async fn an_answer_the_client_cannot_take_is_not_a_lost_connection_and_a_terminated_backend_is() {
    let db = shared().fresh_db("retry_kinds").await;
    let c = db.client().await;
    let none = c.query_one("SELECT 1 WHERE false", &[]).await.unwrap_err();
    assert!(!connection_lost(&none), "{none}");
    assert_eq!(classify(&none), Fault::Fatal, "{none}");
    let row = c.query_one("SELECT 'text'::text", &[]).await.unwrap();
    let wrong = row.try_get::<_, i64>(0).unwrap_err();
    assert!(!connection_lost(&wrong), "{wrong}");
    let missing = row.try_get::<_, String>("no_such_column").unwrap_err();
    assert!(!connection_lost(&missing), "{missing}");
    let server = c.query_one("SELECT 1/0", &[]).await.unwrap_err();
    assert!(!connection_lost(&server), "{server}");
    assert_eq!(classify(&server), Fault::Fatal, "{server}");

    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    db.client().await.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    let gone = c.query_one("SELECT 1", &[]).await.unwrap_err();
    assert!(connection_lost(&gone), "{gone}");
    assert_eq!(classify(&gone), Fault::Reconnect, "{gone}");
}

#[tokio::test]
async fn a_lock_timeout_is_a_lock_wait_a_cancel_is_fatal_and_a_read_only_refusal_reconnects() {
    let db = shared().fresh_db("retry_faults").await;
    let holder = db.client().await;
    holder.batch_execute("CREATE TABLE held (id int)").await.unwrap();
    holder.batch_execute("BEGIN; LOCK TABLE held IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let c = db.client().await;
    let waited = c.batch_execute("SET lock_timeout = '50ms'; SELECT * FROM held").await.unwrap_err();
    assert_eq!(waited.code().map(|s| s.code()), Some("55P03"), "{waited}");
    assert_eq!(classify(&waited), Fault::LockWait, "{waited}");
    holder.batch_execute("ROLLBACK").await.unwrap();

    let cancelled = c.batch_execute("SET statement_timeout = '50ms'; SELECT pg_sleep(5)").await.unwrap_err();
    assert_eq!(cancelled.code().map(|s| s.code()), Some("57014"), "{cancelled}");
    assert_eq!(classify(&cancelled), Fault::Fatal, "{cancelled}");
    c.batch_execute("RESET statement_timeout").await.unwrap();

    let read_only = c.batch_execute("BEGIN READ ONLY; CREATE TABLE made (id int)").await.unwrap_err();
    assert_eq!(read_only.code().map(|s| s.code()), Some("25006"), "{read_only}");
    assert_eq!(classify(&read_only), Fault::Reconnect, "{read_only}");
    c.batch_execute("ROLLBACK").await.unwrap();
}
