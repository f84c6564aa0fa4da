//! The maintainer never gets stuck: no table name can break the SQL it
//! runs.

use chute_testkit::shared;

use crate::common::{chute, run_expect};

/// A name holding the DO block's dollar quote or a RAISE `%` is only a name.
#[tokio::test]
async fn create_converts_a_table_whose_name_holds_a_dollar_quote_or_percent() {
    let db = shared().fresh_db("cli_partition_odd_name").await;
    let c = db.client().await;
    c.batch_execute(r#"CREATE TABLE "we$chute$ird%" (time timestamptz not null, v int)"#).await.unwrap();
    run_expect(chute().args(["--url", &db.url(), "partition", "create", "we$chute$ird%", "--key", "time", "--interval", "1d"]), 0);
    let kind: String = c.query_one(r#"SELECT relkind::text FROM pg_class WHERE relname = 'we$chute$ird%'"#, &[]).await.unwrap().get(0);
    assert_eq!(kind, "p", "the empty table became a partitioned parent");
}

/// `partition create` on an existing table takes the lock `maintain` and
/// the loaders take, waits for it a bounded time and names the holder.
#[tokio::test]
async fn a_held_table_lock_is_waited_for_a_bounded_time_and_its_holder_named() {
    let db = shared().fresh_db("cli_lock_holder").await;
    let url = db.url();
    run_expect(
        chute().args([
            "--url",
            &url,
            "partition",
            "create",
            "m",
            "--columns",
            "time timestamptz not null, v int",
            "--key",
            "time",
            "--interval",
            "1h",
        ]),
        0,
    );
    let holder = db.client().await;
    holder.batch_execute("SET application_name = 'long_report'").await.unwrap();
    let pid: i32 = holder
        .query_one("SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(1667790196, 'm'::regclass::oid::int8::int4)) l", &[])
        .await
        .unwrap()
        .get(0);
    let started = std::time::Instant::now();
    for args in [
        &["partition", "maintain", "m", "--retry-for", "2s"][..],
        &["partition", "create", "m", "--key", "time", "--interval", "1h", "--premake", "9", "--retry-for", "2s"],
    ] {
        let (_, err) = run_expect(chute().args(["--url", &url]).args(args), 2);
        assert!(err.contains(&format!("pid {pid}")) && err.contains("long_report"), "{args:?}: {err}");
    }
    assert!(started.elapsed() < std::time::Duration::from_secs(60), "the waits were bounded");
    let n: i64 = db.client().await.query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 'm'::regclass", &[]).await.unwrap().get(0);
    assert!(n < 10, "create did not change the table while another session held its lock");
}
