//! A load survives what happens around it: a server restarted at any
//! statement (not only COPY), a clock that moves past a day while a stream
//! runs, and retention dropping partitions while rows are on their way.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use chute_engine::local::StopMode;
use chute_testkit::process::{ChildGuard, Lines, exit_within, spawn};
use chute_testkit::{TestCluster, shared};

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value, wait_for, waits_for_lock};

/// Waits for the load to exit (at most five minutes): its exit code and what it printed.
fn finish(child: ChildGuard) -> (Option<i32>, String) {
    let out = exit_within(child, Duration::from_secs(300), "the load");
    (
        out.status.code(),
        format!("--- stdout\n{}\n--- stderr\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)),
    )
}

fn spawn_load(dir: &std::path::Path, args: &[&str]) -> ChildGuard {
    spawn(chute().current_dir(dir).args(args).stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()))
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

/// UTC midnight `days` days from today, as a timestamp literal.
fn midnight(days: i64) -> jiff::Timestamp {
    let today = jiff::Timestamp::now().as_second().div_euclid(86_400) * 86_400;
    jiff::Timestamp::from_second(today + days * 86_400).unwrap()
}

fn lit(t: jiff::Timestamp) -> String {
    t.strftime("%Y-%m-%d %H:%M:%S+00").to_string()
}

#[tokio::test]
async fn a_restart_while_partitions_are_created_just_in_time_is_retried() {
    restart_while_partitions_are_made("off").await;
}

/// The same with the partitions backfilled: the backfill session's CREATE
/// waits, the restart drops it, and a new session redoes the partition.
#[tokio::test]
async fn a_restart_while_partitions_are_backfilled_is_retried() {
    restart_while_partitions_are_made("on").await;
}

async fn restart_while_partitions_are_made(backfill: &str) {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("retry_jit").await;
    let url = db.url();
    create_time_partitioned(&url, "j", "time timestamptz not null, v int", "1d", &[]);
    // 20 past days, none with a partition yet: every row waits for one.
    let dir = open_tempdir();
    let mut csv = String::new();
    for d in 1..=20 {
        for i in 0..500 {
            csv.push_str(&format!("{},{}\n", lit(midnight(-d) + jiff::SignedDuration::from_secs(i * 60)), d * 1000 + i));
        }
    }
    std::fs::write(dir.path().join("j.csv"), csv).unwrap();
    // Partition creation waits behind this lock (and retries its lock timeout)…
    let holder = db.client().await;
    holder.batch_execute("BEGIN; LOCK TABLE ONLY j IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let child = spawn_load(dir.path(), &["--url", &url, "load", "j", "j.csv", "--retry-for", "2min", "--backfill", backfill]);
    let watcher = db.client().await;
    wait_for("chute to wait for its partition", Duration::from_secs(60), || waits_for_lock(&watcher, "^CREATE TABLE")).await;
    // …when the server restarts under it.
    cluster.cluster.restart(StopMode::Fast).unwrap();
    drop((holder, watcher));
    let (code, out) = finish(child);
    assert_eq!(code, Some(0), "{out}");
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(*) FROM j").await, 10_000, "{out}");
    assert_eq!(count(&c, "SELECT count(DISTINCT v) FROM j").await, 10_000, "{out}");
    let parts = count(&c, "SELECT count(*) FROM pg_inherits WHERE inhparent = 'j'::regclass").await;
    assert!(parts >= 20, "{parts} partitions\n{out}");
    if backfill == "on" {
        assert!(out.contains("backfill of") && out.contains("retrying"), "the backfill was retried:\n{out}");
        let frozen = count(&c, "SELECT count(*) FROM pg_class WHERE relname LIKE 'j_p%' AND relkind = 'r' AND NOT relispartition").await;
        assert_eq!(frozen, 0, "no stray table\n{out}");
    }
}

#[tokio::test]
async fn a_load_started_while_the_server_is_down_waits_for_it() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("retry_startup").await;
    let url = db.url();
    db.client().await.batch_execute("CREATE TABLE d (id int, note text)").await.unwrap();
    let dir = open_tempdir();
    let csv: String = (0..20_000).map(|i| format!("{i},row {i}\n")).collect();
    std::fs::write(dir.path().join("d.csv"), csv).unwrap();
    cluster.cluster.stop(StopMode::Fast).unwrap();
    let mut child = spawn_load(dir.path(), &["--url", &url, "load", "d", "d.csv", "--retry-for", "1min"]);
    let mut err = Lines::new(child.stderr.take().unwrap());
    err.wait_until("the load to wait for the server", Duration::from_secs(60), |seen| seen.contains("retrying"));
    cluster.cluster.start().unwrap();
    let (code, out) = finish(child);
    let out = format!("{out}{}", err.rest());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("retrying"), "says it waits for the server:\n{out}");
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(DISTINCT id) FROM d").await, 20_000, "{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM d").await, 20_000, "{out}");
}

#[tokio::test]
async fn a_restart_while_the_journal_is_opened_is_retried() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("retry_journal").await;
    let url = db.url();
    db.client().await.batch_execute("CREATE TABLE warm (id int); CREATE TABLE jo (id int, note text)").await.unwrap();
    let dir = open_tempdir();
    std::fs::write(dir.path().join("warm.csv"), "1\n").unwrap();
    // A first load makes the chute schema and its journal tables.
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "warm", "warm.csv"]), 0);
    let csv: String = (0..20_000).map(|i| format!("{i},row {i}\n")).collect();
    std::fs::write(dir.path().join("jo.csv"), csv).unwrap();
    let holder = db.client().await;
    holder.batch_execute("BEGIN; LOCK TABLE chute.loads IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let child = spawn_load(dir.path(), &["--url", &url, "load", "jo", "jo.csv", "--retry-for", "1min"]);
    let watcher = db.client().await;
    wait_for("chute to open its journal", Duration::from_secs(60), || waits_for_lock(&watcher, "chute\\.loads")).await;
    cluster.cluster.restart(StopMode::Fast).unwrap();
    drop((holder, watcher));
    let (code, out) = finish(child);
    assert_eq!(code, Some(0), "{out}");
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(*) FROM jo").await, 20_000, "{out}");
    assert_eq!(count(&c, "SELECT count(DISTINCT id) FROM jo").await, 20_000, "{out}");
    let done = count(&c, "SELECT count(*) FROM chute.loads WHERE table_name LIKE '%jo' AND status = 'done'").await;
    assert_eq!(done, 1, "the journal says the load is done\n{out}");
}

#[tokio::test]
async fn a_stream_over_a_day_boundary_takes_rows_that_became_valid() {
    let db = shared().fresh_db("retry_clock").await;
    let url = db.url();
    create_time_partitioned(&url, "c", "time timestamptz not null, v int", "1h", &["--retention", "1d"]);
    let dir = open_tempdir();
    let clock = dir.path().join("clock");
    let t0: jiff::Timestamp = "2030-01-01T12:00:00Z".parse().unwrap();
    let at = |hours: i64| lit(t0 + jiff::SignedDuration::from_hours(hours));
    std::fs::write(&clock, t0.to_string()).unwrap();
    let rejects = dir.path().join("c.rejects");
    let mut child = spawn(
        chute()
            .env("CHUTE_TEST_CLOCK_FILE", &clock)
            .args(["--url", &url, "load", "c", "-", "--reject-file", rejects.to_str().unwrap()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    let c = db.client().await;
    let comments = || std::fs::read_to_string(&rejects).unwrap_or_default().lines().filter(|l| l.starts_with('#')).count();
    // At t0: two hours ago and an hour ahead load; 30 hours ahead is past --max-future (1d).
    for i in 0..5 {
        writeln!(stdin, "{},{i}", at(-2)).unwrap();
        writeln!(stdin, "{},{}", at(1), 10 + i).unwrap();
    }
    stdin.flush().unwrap();
    wait_for("the first rows", Duration::from_secs(30), || async { count(&c, "SELECT count(*) FROM c").await == 10 }).await;
    for i in 0..5 {
        writeln!(stdin, "{},{}", at(30), 20 + i).unwrap();
    }
    stdin.flush().unwrap();
    wait_for("the rows too far ahead to be refused", Duration::from_secs(30), || {
        let n = comments();
        async move { n == 5 }
    })
    .await;
    // A day passes: 30 hours after t0 is 6 hours ahead now, and t0's 10:00
    // hour is past the 1 day retention although its partition still exists.
    std::fs::write(&clock, (t0 + jiff::SignedDuration::from_hours(24)).to_string()).unwrap();
    for i in 0..5 {
        writeln!(stdin, "{},{}", at(30), 30 + i).unwrap();
        writeln!(stdin, "{},{}", at(-2), 40 + i).unwrap();
    }
    drop(stdin);
    let (code, out) = finish(child);
    assert_eq!(code, Some(1), "rows were refused\n{out}");
    let text = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(text.matches("--max-future").count(), 5, "{text}");
    assert_eq!(text.matches("retention").count(), 5, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM c").await, 15, "{out}");
    let late: i64 = c.query_one("SELECT count(*) FROM c WHERE v BETWEEN 30 AND 34", &[]).await.unwrap().get(0);
    assert_eq!(late, 5, "the rows that became valid are loaded\n{out}");
    let made = count(&c, "SELECT count(*) FROM pg_class WHERE relname = 'c_p20300102_1800'").await;
    assert_eq!(made, 1, "their partition was made\n{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM c WHERE v >= 40").await, 0, "nothing past retention lands\n{out}");
}

#[tokio::test]
async fn rows_past_retention_are_refused_even_where_their_partition_exists() {
    let db = shared().fresh_db("retry_retention").await;
    let url = db.url();
    create_time_partitioned(&url, "r", "time timestamptz not null, v int", "1d", &["--retention", "3d"]);
    let c = db.client().await;
    // A partition older than retention that maintain has not dropped yet.
    let (from, to) = (midnight(-10), midnight(-9));
    c.batch_execute(&format!("CREATE TABLE r_old PARTITION OF r FOR VALUES FROM ('{}') TO ('{}')", lit(from), lit(to))).await.unwrap();
    let dir = open_tempdir();
    let mut csv = String::new();
    for i in 0..5 {
        csv.push_str(&format!("{},{i}\n", lit(from + jiff::SignedDuration::from_hours(1))));
    }
    for i in 0..10 {
        csv.push_str(&format!("{},{}\n", lit(jiff::Timestamp::now()), 100 + i));
    }
    std::fs::write(dir.path().join("r.csv"), csv).unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "r", "r.csv"]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "10", "{out}");
    let rejects = std::fs::read_to_string(dir.path().join("r.csv.rejects")).unwrap();
    assert_eq!(rejects.matches("older than the retention of 3d").count(), 5, "{rejects}");
    assert_eq!(count(&c, "SELECT count(*) FROM r_old").await, 0);
    // maintain agrees: it drops exactly that partition.
    run_expect(chute().args(["--url", &url, "partition", "maintain"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM pg_class WHERE relname = 'r_old'").await, 0);
    assert_eq!(count(&c, "SELECT count(*) FROM r").await, 10);
}

/// Starts a stdin load into `v`, sends `first` and waits until it is in,
/// so the load has read the partition tree.
async fn stream_into_v(
    url: &str,
    c: &tokio_postgres::Client,
    rejects: &std::path::Path,
    first: &str,
) -> (ChildGuard, std::process::ChildStdin) {
    let mut child = spawn(
        chute()
            .args([
                "--url",
                url,
                "load",
                "v",
                "-",
                "--reject-file",
                rejects.to_str().unwrap(),
                "--flush-every",
                "200ms",
                "--retry-for",
                "10s",
            ])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    let before = count(c, "SELECT count(*) FROM v").await;
    stdin.write_all(first.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let want = before + first.lines().count() as i64;
    wait_for("the first rows", Duration::from_secs(30), || async move { count(c, "SELECT count(*) FROM v").await == want }).await;
    (child, stdin)
}

#[tokio::test]
async fn a_leaf_dropped_between_routing_and_copy_is_routed_again() {
    let db = shared().fresh_db("retry_vanished").await;
    let url = db.url();
    create_time_partitioned(&url, "v", "time timestamptz not null, n int", "1d", &[]);
    let c = db.client().await;
    let today = format!("v_p{}", midnight(0).strftime("%Y%m%d"));
    let (lo, hi) = (lit(midnight(0)), lit(midnight(1)));
    let dir = open_tempdir();
    let rows = |base: i64, day: i64| -> String {
        (0..50).map(|i| format!("{},{}\n", lit(midnight(day) + jiff::SignedDuration::from_secs(3600 + i)), base + i)).collect()
    };
    let holder = db.client().await;

    // 1. Today's leaf is dropped and another takes its bounds while its COPY
    //    waits: the rows go to the new leaf.
    let (child, mut stdin) = stream_into_v(&url, &c, &dir.path().join("a.rejects"), &rows(0, 1)).await;
    holder
        .batch_execute(&format!("BEGIN; LOCK TABLE ONLY v IN ACCESS EXCLUSIVE MODE; LOCK TABLE {today} IN ACCESS EXCLUSIVE MODE"))
        .await
        .unwrap();
    stdin.write_all(rows(100, 0).as_bytes()).unwrap();
    stdin.flush().unwrap();
    wait_for("the COPY to wait", Duration::from_secs(30), || waits_for_lock(&c, "^COPY|chute_targets")).await;
    holder
        .batch_execute(&format!(
            "DROP TABLE {today}; CREATE TABLE v_new (LIKE v); ALTER TABLE v ATTACH PARTITION v_new FOR VALUES FROM ('{lo}') TO ('{hi}'); COMMIT"
        ))
        .await
        .unwrap();
    drop(stdin);
    let (code, out) = finish(child);
    assert_eq!(code, Some(0), "{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM v_new WHERE n BETWEEN 100 AND 149").await, 50, "{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM v").await, 100, "{out}");

    // 2. The leaf is dropped and nothing replaces it: its rows are refused
    //    with the reason, and the load goes on.
    let rejects = dir.path().join("b.rejects");
    let (child, mut stdin) = stream_into_v(&url, &c, &rejects, &rows(1000, 1)).await;
    holder.batch_execute("BEGIN; LOCK TABLE ONLY v IN ACCESS EXCLUSIVE MODE; LOCK TABLE v_new IN ACCESS EXCLUSIVE MODE").await.unwrap();
    stdin.write_all(rows(1100, 0).as_bytes()).unwrap();
    stdin.flush().unwrap();
    wait_for("the COPY to wait", Duration::from_secs(30), || waits_for_lock(&c, "^COPY|chute_targets")).await;
    holder.batch_execute("DROP TABLE v_new; COMMIT").await.unwrap();
    stdin.write_all(rows(1200, 1).as_bytes()).unwrap();
    drop(stdin);
    let (code, out) = finish(child);
    assert_eq!(code, Some(1), "{out}");
    let text = std::fs::read_to_string(&rejects).unwrap();
    assert_eq!(text.matches("42P01").count(), 50, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM v WHERE n >= 1000").await, 100, "{out}");
}

#[tokio::test]
async fn when_retries_run_out_the_last_error_is_named() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("retry_last_error").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE g (id int)").await.unwrap();
    let mut child = spawn(
        chute()
            .args(["--url", &url, "load", "g", "-", "--flush-every", "200ms", "--retry-for", "3s"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"1\n2\n").unwrap();
    stdin.flush().unwrap();
    wait_for("the first rows", Duration::from_secs(30), || async { count(&c, "SELECT count(*) FROM g").await == 2 }).await;
    drop(c);
    // The server goes away for good: the next batch retries for 3 s, then gives up.
    cluster.cluster.stop(StopMode::Fast).unwrap();
    stdin.write_all(b"3\n4\n").unwrap();
    drop(stdin);
    let (code, out) = finish(child);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("could not be reached again within --retry-for 3s (last error: "), "{out}");
}
