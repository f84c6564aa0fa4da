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

const NOW: &str = "2026-11-10T12:00:00Z";

/// A daily table from 1 November with two days' retention, made on 3
/// November so that at [`NOW`] its first days are past retention; its
/// partitions, oldest first.
async fn old_partitions(db: &chute_testkit::TestDb, c: &tokio_postgres::Client) -> Vec<String> {
    run_expect(
        chute().args([
            "--url",
            &db.url(),
            "partition",
            "create",
            "m",
            "--columns",
            "time timestamptz not null, v int",
            "--key",
            "time",
            "--interval",
            "1d",
            "--start",
            "2026-11-01T00:00:00Z",
            "--retention",
            "2d",
            "--now",
            "2026-11-03T12:00:00Z",
        ]),
        0,
    );
    leaves(c).await
}

async fn leaves(c: &tokio_postgres::Client) -> Vec<String> {
    c.query("SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'm'::regclass ORDER BY 1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// A run that dies between the detach and the drop leaves a detached table;
/// the next run finishes the drop.
#[tokio::test]
async fn a_retention_step_cut_short_after_the_detach_is_completed_by_the_next_run() {
    let db = shared().fresh_db("cli_retention_inflight").await;
    let c = db.client().await;
    let before = old_partitions(&db, &c).await;
    let oldest = before[0].clone();
    // The drop fails after the detach committed: a view depends on the table.
    c.batch_execute(&format!("CREATE VIEW keep_it AS SELECT * FROM {oldest}")).await.unwrap();
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "partition", "maintain", "m", "--now", NOW]), 2);
    assert!(err.contains("keep_it") || err.contains("2BP01"), "{err}");
    assert!(!leaves(&c).await.contains(&oldest), "the detach happened");
    c.batch_execute("DROP VIEW keep_it").await.unwrap();
    run_expect(chute().args(["--url", &db.url(), "partition", "maintain", "m", "--now", NOW]), 0);
    let left: bool = c.query_one(&format!("SELECT to_regclass('{oldest}') IS NOT NULL"), &[]).await.unwrap().get(0);
    assert!(!left, "{oldest} was detached by the first run and must be dropped by the second");
    let records: i64 = c.query_one("SELECT count(*) FROM chute.retention_inflight", &[]).await.unwrap().get(0);
    assert_eq!(records, 0);
}

/// `DETACH … CONCURRENTLY` whose second phase hits lock_timeout leaves the
/// partition detach-pending; the same run finishes it with FINALIZE.
#[tokio::test]
async fn a_detach_left_pending_by_lock_timeout_is_finalized_in_the_same_run() {
    let db = shared().fresh_db("cli_detach_pending").await;
    let c = db.client().await;
    let before = old_partitions(&db, &c).await;
    // A reader whose transaction saw the parent: the second phase waits for it.
    let mut reader = db.client().await;
    let tx = reader.transaction().await.unwrap();
    tx.batch_execute("SELECT count(*) FROM m").await.unwrap();
    let url = db.url();
    let maintain = tokio::task::spawn_blocking(move || {
        crate::common::run(chute().args([
            "--url",
            &url,
            "partition",
            "maintain",
            "m",
            "--now",
            NOW,
            "--lock-timeout",
            "200ms",
            "--retry-for",
            "60s",
        ]))
    });
    tokio::time::sleep(std::time::Duration::from_secs(4)).await;
    tx.commit().await.unwrap();
    let out = maintain.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let after = leaves(&c).await;
    assert!(!after.contains(&before[0]), "{after:?}");
    let pending: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get(0);
    assert_eq!(pending, 0);
}
