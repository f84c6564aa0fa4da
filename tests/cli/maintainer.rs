//! The maintainer never gets stuck: no table name can break the SQL it
//! runs.

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, column, run_expect, wait_for, waits_for_lock};

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
    column(c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'm'::regclass ORDER BY 1").await
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
    // The second phase timed out waiting for the reader, and the same run
    // went on to FINALIZE (which waits for the reader too).
    wait_for("maintain to finalize the detach it left pending", std::time::Duration::from_secs(60), || async {
        let n: i64 = c
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE query ~ 'DETACH PARTITION .* FINALIZE' AND pid <> pg_backend_pid()",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        n > 0
    })
    .await;
    let pending: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get(0);
    assert_eq!(pending, 1, "the reader kept the detach pending");
    tx.commit().await.unwrap();
    let out = maintain.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let after = leaves(&c).await;
    assert!(!after.contains(&before[0]), "{after:?}");
    let pending: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get(0);
    assert_eq!(pending, 0);
}

/// A SIGTERM that arrives during a pass (here, while it waits for a
/// table's lock) ends the pass and the run with 143.
#[tokio::test]
async fn maintain_every_hears_sigterm_during_a_pass() {
    let db = shared().fresh_db("cli_every_sigterm").await;
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
    holder.batch_execute("SELECT pg_advisory_lock(1667790196, 'm'::regclass::oid::int8::int4)").await.unwrap();
    // Sessions of earlier commands may linger a moment after they exit: this
    // run's session is one that starts later.
    let before: String = holder.query_one("SELECT clock_timestamp()::text", &[]).await.unwrap().get(0);
    let mut child = spawn(
        chute()
            .args(["--url", &url, "partition", "maintain", "m", "--every", "1h", "--retry-for", "10min"])
            .stderr(std::process::Stdio::piped()),
    );
    // The pass is under way: its session has asked for the table's lock,
    // which it keeps asking for while the holder has it.
    wait_for("maintain to ask for the table's lock", std::time::Duration::from_secs(30), || async {
        let asking: i64 = holder
            .query_one(
                &format!(
                    "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'chute' AND datname = current_database() \
                     AND backend_start > '{before}' AND query ~ 'pg_try_advisory_lock'"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        asking > 0
    })
    .await;
    child.terminate();
    let out = exit_within(child, std::time::Duration::from_secs(15), "maintain --every");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The first Ctrl-C asks a load to stop after its batches in flight; a
/// second one stops it at once with 130. Here the load's one batch cannot
/// finish (its COPY waits for a lock the test holds), so the first signal
/// alone cannot end the load: Ctrl-C is pressed again until it does, and
/// the load must say the second one ended it.
#[tokio::test]
async fn a_second_ctrl_c_during_a_load_is_heard() {
    let db = shared().fresh_db("cli_second_sigint").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t (time timestamptz, v int)").await.unwrap();
    let mut holder = db.client().await;
    let lock = holder.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE t IN SHARE MODE").await.unwrap();
    let mut child = spawn(
        chute()
            .args(["--url", &db.url(), "load", "t", "-", "--load-id", "second-sigint"])
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"2026-11-23 10:00:00+00,1\n").unwrap();
        stdin.flush().unwrap();
    }
    // The batch's transaction locks its target before its COPY, and waits there.
    wait_for("the load's batch to wait for the table's lock", std::time::Duration::from_secs(60), || {
        waits_for_lock(&c, "^COPY|chute_targets")
    })
    .await;
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        assert!(began.elapsed() < std::time::Duration::from_secs(30), "the load ignored Ctrl-C pressed again and again for 30 s");
        child.interrupt();
        // Ctrl-C pressed again and again, every 100 ms: the test's subject.
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let out = exit_within(child, std::time::Duration::from_secs(15), "load");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("chute: second signal; stopping now"), "a second signal ended the load, not the first:\n{stderr}");
    lock.rollback().await.unwrap();
}
