//! What counts as a lost connection, against a real server: a statement
//! whose answer the client cannot take (no row for `query_one`, a value of
//! another type) is not one, so it is not retried for `--retry-for` on new
//! connections that would give the same answer; a terminated backend is.

use chute_engine::retry::connection_lost;
use chute_testkit::shared;

#[tokio::test]
async fn an_answer_the_client_cannot_take_is_not_a_lost_connection_and_a_terminated_backend_is() {
    let db = shared().fresh_db("retry_kinds").await;
    let c = db.client().await;
    let none = c.query_one("SELECT 1 WHERE false", &[]).await.unwrap_err();
    assert!(!connection_lost(&none), "{none}");
    let row = c.query_one("SELECT 'text'::text", &[]).await.unwrap();
    let wrong = row.try_get::<_, i64>(0).unwrap_err();
    assert!(!connection_lost(&wrong), "{wrong}");
    let missing = row.try_get::<_, String>("no_such_column").unwrap_err();
    assert!(!connection_lost(&missing), "{missing}");
    let server = c.query_one("SELECT 1/0", &[]).await.unwrap_err();
    assert!(!connection_lost(&server), "{server}");

    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    db.client().await.execute("SELECT pg_terminate_backend($1)", &[&pid]).await.unwrap();
    let gone = c.query_one("SELECT 1", &[]).await.unwrap_err();
    assert!(connection_lost(&gone), "{gone}");
}
