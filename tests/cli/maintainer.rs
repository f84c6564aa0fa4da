//! The maintainer never gets stuck: no table name can break the SQL it
//! runs.

use chute_testkit::shared;

use crate::common::{chute, column, run_expect};

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

/// Waits up to `limit` for `child` to exit; kills it (and fails) otherwise.
fn exit_within(child: &mut std::process::Child, limit: std::time::Duration, what: &str) -> std::process::Output {
    let began = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if began.elapsed() > limit {
            child.kill().unwrap();
            panic!("{what}: still running {limit:?} after the signal");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let mut out = std::process::Output { status: child.wait().unwrap(), stdout: vec![], stderr: vec![] };
    use std::io::Read;
    if let Some(mut e) = child.stderr.take() {
        e.read_to_end(&mut out.stderr).unwrap();
    }
    out
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
    let mut child = chute()
        .args(["--url", &url, "partition", "maintain", "m", "--every", "1h", "--retry-for", "10min"])
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The pass is under way: its session waits for the lock.
    let began = std::time::Instant::now();
    loop {
        let waiting: i64 = holder
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'chute' AND datname = current_database()", &[])
            .await
            .unwrap()
            .get(0);
        if waiting > 0 {
            break;
        }
        assert!(began.elapsed() < std::time::Duration::from_secs(30), "maintain never connected");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let out = exit_within(&mut child, std::time::Duration::from_secs(15), "maintain --every");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
}

/// The first Ctrl-C asks a load to stop after its batches in flight; a
/// second one, while it still waits (here for input that never ends), stops
/// it at once with 130.
#[tokio::test]
async fn a_second_ctrl_c_during_a_load_is_heard() {
    let db = shared().fresh_db("cli_second_sigint").await;
    db.client().await.batch_execute("CREATE TABLE t (time timestamptz, v int)").await.unwrap();
    let mut child = chute()
        .args(["--url", &db.url(), "load", "t", "-", "--load-id", "second-sigint"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let stdin = child.stdin.as_mut().unwrap();
        stdin.write_all(b"2026-11-23 10:00:00+00,1\n").unwrap();
        stdin.flush().unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    tokio::time::sleep(std::time::Duration::from_millis(700)).await;
    if child.try_wait().unwrap().is_none() {
        // SAFETY: as above.
        unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    }
    let out = exit_within(&mut child, std::time::Duration::from_secs(15), "load");
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
}
