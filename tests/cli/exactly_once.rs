//! Exactly once across what happens to a table between runs (TRUNCATE, DROP
//! and CREATE, a journal from an older chute), across two runs of one load
//! at the same time, and across versions (load ids do not depend on `Debug`).

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value};

/// `n` rows `id,time` over the last three days, one file.
fn write_csv(path: &std::path::Path, n: u64) {
    let now = jiff::Timestamp::now();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..n {
        let t = now - jiff::SignedDuration::from_secs(3600 + (i * 3 * 86_400 / n) as i64);
        writeln!(f, "{i},{}", t.strftime("%Y-%m-%d %H:%M:%S+00")).unwrap();
    }
    f.flush().unwrap();
}

async fn counts(c: &tokio_postgres::Client, table: &str) -> (i64, i64) {
    let r = c.query_one(&format!("SELECT count(*), count(DISTINCT id) FROM {table}"), &[]).await.unwrap();
    (r.get(0), r.get(1))
}

fn load_id(stdout: &str) -> String {
    let v: serde_json::Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: not JSON:\n{stdout}"));
    v["load_id"].as_str().unwrap_or_else(|| panic!("no load_id in {stdout}")).to_owned()
}

/// `chute ARGS…` run in `dir`.
fn chute_in(dir: &std::path::Path, args: &[&str]) -> std::process::Command {
    let mut cmd = chute();
    cmd.current_dir(dir).args(args);
    cmd
}

/// The figure of a summary line (`20000 (committed by …)`).
fn figure(v: &str) -> &str {
    v.split_whitespace().next().unwrap_or("")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Polls `sql` (one bool) until it is true.
async fn until(c: &tokio_postgres::Client, sql: &str, what: &str) {
    let began = Instant::now();
    loop {
        if c.query_one(sql, &[]).await.unwrap().get::<_, bool>(0) {
            return;
        }
        if began.elapsed() > Duration::from_secs(60) {
            // What the server was doing, so that a failure on a busy machine can be read.
            let seen = c
                .query(
                    "SELECT format('pid %s %s %s granted=%s / %s: %s', l.pid, l.locktype, coalesce(l.relation::regclass::text, l.objid::text),
                                   l.granted, a.wait_event, left(a.query, 80))
                     FROM pg_locks l JOIN pg_stat_activity a USING (pid) WHERE a.datname = current_database()",
                    &[],
                )
                .await
                .map(|rows| rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<_>>().join("\n"))
                .unwrap_or_default();
            panic!("waited 60 s for {what}; locks in this database:\n{seen}");
        }
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pid holding a load's advisory lock (chute's one-bigint lock) in this database.
const LOCK_HOLDER: &str = "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND granted
     AND database = (SELECT oid FROM pg_database WHERE datname = current_database())";

#[tokio::test]
async fn reload_after_drop_loads_again_and_after_truncate_is_refused() {
    let db = shared().fresh_db("once_truncate").await;
    let url = db.url();
    let c = db.client().await;
    let cols = "id int not null, time timestamptz not null";
    create_time_partitioned(&url, "p", cols, "1d", &[]);
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 20_000);
    let load = |extra: &[&str]| chute_in(dir.path(), &[&["--url", &url, "load", "p", "c.csv"], extra].concat());

    let (out, _) = run_expect(&mut load(&["--json"]), 0);
    let id = load_id(&out);
    assert_eq!(counts(&c, "p").await, (20_000, 20_000));
    let (out, _) = run_expect(&mut load(&[]), 0);
    assert_eq!(figure(summary_value(&out, "already loaded")), "20000", "{out}");

    // DROP and CREATE of the same name: the journal's entries describe a
    // table that is gone, so every row loads again.
    c.batch_execute("DROP TABLE p").await.unwrap();
    create_time_partitioned(&url, "p", cols, "1d", &[]);
    let (out, _) = run_expect(&mut load(&[]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}");
    assert_eq!(counts(&c, "p").await, (20_000, 20_000));
    // The entries of the dropped table were pruned.
    let (status, _) = run_expect(chute().args(["--url", &url, "load", "--status", &id, "--json"]), 0);
    assert!(status.contains("\"rows_committed\": 20000"), "{status}");

    // TRUNCATE: refused, naming a leaf and the way out; nothing is loaded.
    c.batch_execute("TRUNCATE p").await.unwrap();
    let (_, err) = run_expect(&mut load(&[]), 2);
    assert!(err.contains("truncated or rewritten") && err.contains(&format!("chute load --forget {id}")), "{err}");
    assert!(err.contains("public.p_"), "names the leaf: {err}");
    assert_eq!(counts(&c, "p").await, (0, 0));
    let (status, _) = run_expect(chute().args(["--url", &url, "load", "--status", &id, "--json"]), 0);
    assert!(status.contains("\"status\": \"done\""), "a refused run leaves the status as it was: {status}");
    run_expect(chute().args(["--url", &url, "load", "--forget", &id]), 0);
    let (out, _) = run_expect(&mut load(&[]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}");
    assert_eq!(counts(&c, "p").await, (20_000, 20_000));

    // VACUUM FULL rewrites a leaf (new relfilenode): refused too.
    let leaf: String = c.query_one("SELECT min(relid::text) FROM pg_partition_tree('p') WHERE isleaf", &[]).await.unwrap().get(0);
    c.batch_execute(&format!("VACUUM FULL {leaf}")).await.unwrap();
    let (_, err) = run_expect(&mut load(&[]), 2);
    assert!(err.contains(&leaf) && err.contains("truncated or rewritten"), "{err}");
    assert_eq!(counts(&c, "p").await, (20_000, 20_000));
}

#[tokio::test]
async fn via_the_parent_truncate_is_refused_and_drop_loads_again() {
    let db = shared().fresh_db("once_parent").await;
    let url = db.url();
    let c = db.client().await;
    let cols = "id int not null, time timestamptz not null";
    // Through the parent no partition is made for the rows: all exist.
    let start = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(24 * 5)).strftime("%Y-%m-%d").to_string();
    create_time_partitioned(&url, "vp", cols, "1d", &["--start", &start]);
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 5_000);
    let load = || chute_in(dir.path(), &["--url", &url, "load", "vp", "c.csv", "--via-parent"]);
    run_expect(&mut load(), 0);
    assert_eq!(counts(&c, "vp").await, (5_000, 5_000));
    c.batch_execute("TRUNCATE vp").await.unwrap();
    let (_, err) = run_expect(&mut load(), 2);
    assert!(err.contains("vp") && err.contains("truncated or rewritten") && err.contains("--forget"), "{err}");
    c.batch_execute("DROP TABLE vp").await.unwrap();
    create_time_partitioned(&url, "vp", cols, "1d", &["--start", &start]);
    let (out, _) = run_expect(&mut load(), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "5000", "{out}");
    assert_eq!(counts(&c, "vp").await, (5_000, 5_000));
}

#[tokio::test]
async fn a_journal_from_schema_version_2_keeps_working() {
    let db = shared().fresh_db("once_v2").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE v (id int, time timestamptz); CREATE TABLE gone (id int, time timestamptz)").await.unwrap();
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 3_000);
    let load = |t: &str| chute_in(dir.path(), &["--url", &url, "load", t, "c.csv"]);
    run_expect(&mut load("v"), 0);
    run_expect(&mut load("gone"), 0);
    // Back to what version 2 wrote: no physical identity, no owner.
    c.batch_execute(
        "ALTER TABLE chute.load_journal DROP COLUMN rel, DROP COLUMN relfilenode;
         ALTER TABLE chute.loads DROP COLUMN owner;
         UPDATE chute.meta SET value = '2' WHERE key = 'schema_version';
         DROP TABLE gone",
    )
    .await
    .unwrap();
    // The upgrade: the table that is still there keeps its journal; the
    // entries of the one dropped before it describe no table, and a table
    // made again under its name loads every row.
    let (out, _) = run_expect(&mut load("v"), 0);
    assert_eq!(figure(summary_value(&out, "already loaded")), "3000", "{out}");
    assert_eq!(counts(&c, "v").await, (3_000, 3_000));
    c.batch_execute("CREATE TABLE gone (id int, time timestamptz)").await.unwrap();
    let (out, _) = run_expect(&mut load("gone"), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "3000", "{out}");
    // Upgraded in place to the current version (4 added how far a load got,
    // 5 chute serve's idempotency keys, 6 the table each key belongs to,
    // 7 chute doctor's record of indexes, 8 the digest of each key's request,
    // 9 a table's upsert setting, 10 the positions of inputs several runs
    // share: Kafka partitions, 11 the topic and table each position is kept for).
    let v: String = c.query_one("SELECT value FROM chute.meta WHERE key = 'schema_version'", &[]).await.unwrap().get(0);
    assert_eq!(v, "11");
    let upsert: i64 = c
        .query_one("SELECT count(*) FROM pg_attribute WHERE attrelid = 'chute.partition_config'::regclass AND attname = 'on_conflict'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(upsert, 1, "version 9 adds partition_config.on_conflict");
    let positions: bool = c.query_one("SELECT to_regclass('chute.load_positions') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(positions, "version 10 adds chute.load_positions");
    let keys: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_attribute WHERE attrelid = 'chute.serve_requests'::regclass AND attname IN ('key', 'rel', 'digest')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(keys, 3);
}

#[tokio::test]
async fn the_demo_loads_its_rows_every_run() {
    let db = shared().fresh_db("once_demo").await;
    for _ in 0..2 {
        let (out, _) = run_expect(chute().args(["--url", &db.url(), "demo", "--rows", "20000", "--days", "3"]), 0);
        assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}");
        assert_eq!(summary_value(&out, "partitions used"), "3 of 3", "{out}");
    }
}

#[tokio::test]
async fn the_same_load_started_twice_at_once_loads_each_row_once() {
    let db = shared().fresh_db("once_twice").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t2 (id int, time timestamptz)").await.unwrap();
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 300_000);
    let start = || {
        spawn(
            chute()
                .current_dir(dir.path())
                .args(["--url", &url, "load", "t2", "c.csv", "--batch-mb", "1"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        )
    };
    let (a, b) = (start(), start());
    let (a, b) = (exit_within(a, Duration::from_secs(300), "the first run"), exit_within(b, Duration::from_secs(300), "the second run"));
    let mut refused = 0;
    for o in [&a, &b] {
        match o.status.code() {
            Some(0) => {}
            Some(2) => {
                refused += 1;
                let err = text(&o.stderr);
                assert!(err.contains("is already running") && err.contains("backend pid"), "{err}");
            }
            other => panic!("exit {other:?}:\n{}\n{}", text(&o.stdout), text(&o.stderr)),
        }
    }
    assert!(refused <= 1);
    assert_eq!(counts(&c, "t2").await, (300_000, 300_000), "a: {}\nb: {}", text(&a.stdout), text(&b.stdout));
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "--status", "--json"]), 0);
    assert!(out.contains("\"rows_committed\": 300000"), "{out}");
}

#[tokio::test]
async fn a_second_run_is_refused_with_the_holders_pid_or_waits_with_wait() {
    let db = shared().fresh_db("once_busy").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t3 (id int, time timestamptz)").await.unwrap();
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 200_000);
    let cmd = |extra: &[&str]| {
        let mut cmd = chute();
        cmd.current_dir(dir.path())
            .args(["--url", &url, "load", "t3", "c.csv", "--batch-mb", "1", "--workers", "1"])
            .args(extra.to_vec())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    // Our lock stops the first run's COPY while it holds the load.
    let mut holder = db.client().await;
    let txn = holder.transaction().await.unwrap();
    txn.batch_execute("LOCK TABLE t3 IN SHARE MODE").await.unwrap();
    let first = spawn(&mut cmd(&[]));
    until(&c, &format!("SELECT EXISTS ({LOCK_HOLDER})"), "the first run's lock").await;
    let pid: i32 = c.query_one(LOCK_HOLDER, &[]).await.unwrap().get(0);
    let second = exit_within(spawn(&mut cmd(&[])), Duration::from_secs(60), "the second run");
    assert_eq!(second.status.code(), Some(2), "{}", text(&second.stderr));
    let err = text(&second.stderr);
    assert!(err.contains(&format!("backend pid {pid}")) && err.contains("--wait"), "{err}");
    let third = spawn(&mut cmd(&["--wait"]));
    until(&c, "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event = 'advisory'", "the waiting run").await;
    txn.commit().await.unwrap();
    let (first, third) =
        (exit_within(first, Duration::from_secs(300), "the first run"), exit_within(third, Duration::from_secs(300), "the waiting run"));
    assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
    assert_eq!(third.status.code(), Some(0), "{}", text(&third.stderr));
    assert!(text(&third.stderr).contains("waiting for it to finish"), "{}", text(&third.stderr));
    assert_eq!(summary_value(&text(&third.stdout), "rows loaded"), "0");
    assert_eq!(figure(summary_value(&text(&third.stdout), "already loaded")), "200000");
    assert_eq!(counts(&c, "t3").await, (200_000, 200_000));
}

#[tokio::test]
async fn a_run_that_lost_its_lock_stops_when_another_takes_over() {
    let db = shared().fresh_db("once_fence").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t4 (id int, time timestamptz)").await.unwrap();
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 200_000);
    let cmd = |extra: &[&str]| {
        let mut cmd = chute();
        cmd.current_dir(dir.path())
            .args(["--url", &url, "load", "t4", "c.csv", "--batch-mb", "1", "--workers", "1"])
            .args(extra.to_vec())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd
    };
    let mut holder = db.client().await;
    let txn = holder.transaction().await.unwrap();
    txn.batch_execute("LOCK TABLE t4 IN SHARE MODE").await.unwrap();
    let first = spawn(&mut cmd(&[]));
    until(&c, &format!("SELECT EXISTS ({LOCK_HOLDER})"), "the first run's lock").await;
    let first_pid: i32 = c.query_one(LOCK_HOLDER, &[]).await.unwrap().get(0);
    until(&c, "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE relation = 't4'::regclass AND NOT granted)", "the first run's COPY").await;
    // The second run queues for the load's lock first, so that it, and not
    // the first run reconnecting, is given the lock the moment it is free.
    let second = spawn(&mut cmd(&["--wait"]));
    until(
        &c,
        "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted)",
        "the second run to queue",
    )
    .await;
    // The first run's control connection drops: its lock is gone, its COPY worker is not.
    c.execute("SELECT pg_terminate_backend($1)", &[&first_pid]).await.unwrap();
    until(&c, &format!("SELECT EXISTS ({LOCK_HOLDER} AND pid <> {first_pid})"), "the second run's lock").await;
    // The second run's claim of the load waits for the first run's batch in
    // flight (it holds the load's row): once our lock goes, that batch
    // commits, the claim follows, and the first run's next batch finds the load taken.
    until(
        &c,
        "SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ~ 'INSERT INTO chute\\.loads'
                         AND pid <> pg_backend_pid())",
        "the second run's claim to wait for the first run's batch",
    )
    .await;
    txn.commit().await.unwrap();
    let (first, second) =
        (exit_within(first, Duration::from_secs(300), "the first run"), exit_within(second, Duration::from_secs(300), "the second run"));
    assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
    assert_eq!(first.status.code(), Some(2), "{}\n{}", text(&first.stdout), text(&first.stderr));
    assert!(text(&first.stderr).contains("took it over"), "{}", text(&first.stderr));
    assert_eq!(counts(&c, "t4").await, (200_000, 200_000));
}

#[tokio::test]
async fn generated_load_ids_are_built_from_named_parameters() {
    let db = shared().fresh_db("once_ids").await;
    let url = db.url();
    db.client()
        .await
        .batch_execute(
            "CREATE TABLE g (time timestamptz, dev_id int, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8)",
        )
        .await
        .unwrap();
    // Pinned: a new field in a parameter struct must not change these (the
    // old ids came from `Debug` output and changed with every such field).
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "g", "--gen", "conditions", "--rows", "1000", "--json"]), 0);
    assert_eq!(load_id(&out), "gen-200d55f50206ad73");
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "--gen", "iot", "--rows", "1000", "--json"]), 0);
    assert_eq!(load_id(&out), "gen-63b48e756eb65873");
}

/// Rows in the iot tables (readings, diagnostics).
async fn iot_rows(c: &tokio_postgres::Client) -> (i64, i64) {
    let r = c.query_one("SELECT (SELECT count(*) FROM ts.readings), (SELECT count(*) FROM ts.diagnostics)", &[]).await.unwrap();
    (r.get(0), r.get(1))
}

#[tokio::test]
async fn tsbs_tables_are_each_checked_on_reload() {
    let db = shared().fresh_db("once_tsbs").await;
    let url = db.url();
    let c = db.client().await;
    let load = || chute_in(std::path::Path::new("/"), &["--url", &url, "load", "--gen", "iot", "--rows", "20000", "--schema", "ts"]);
    let (out, _) = run_expect(&mut load(), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}");
    let first = iot_rows(&c).await;
    let (out, _) = run_expect(&mut load(), 0);
    assert_eq!(figure(summary_value(&out, "already loaded")), "20000", "{out}");
    assert_eq!(iot_rows(&c).await, first);
    // One of the tables emptied: refused, naming it; the others are untouched.
    c.batch_execute("TRUNCATE ts.diagnostics").await.unwrap();
    let (_, err) = run_expect(&mut load(), 2);
    assert!(err.contains("diagnostics") && err.contains("truncated or rewritten") && !err.contains("readings"), "{err}");
    assert_eq!(iot_rows(&c).await, (first.0, 0));
    // Every table dropped and made again by the load: every row loads again.
    c.batch_execute("DROP SCHEMA ts CASCADE").await.unwrap();
    let (out, _) = run_expect(&mut load(), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}");
    assert_eq!(iot_rows(&c).await, first);
}

/// A run that waited for another run of its load reads the partitions as
/// they are after that run: the partitions the first run made hold rows the
/// journal says are committed, and the waiting run skips them all. (It read
/// the tree before waiting, and the rows of partitions it had not seen were
/// loaded again: 2x the rows.)
#[tokio::test]
async fn a_run_that_waited_skips_what_the_other_run_loaded_into_new_partitions() {
    let db = shared().fresh_db("once_wait_new").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "t6", "id int, time timestamptz", "1 hour", &[]);
    let before: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 't6'::regclass", &[]).await.unwrap().get(0);
    let dir = open_tempdir();
    write_csv(&dir.path().join("c.csv"), 100_000);
    for backfill in ["auto", "off"] {
        c.batch_execute("TRUNCATE t6; DELETE FROM chute.load_journal; DELETE FROM chute.loads").await.ok();
        let cmd = |extra: &[&str]| {
            let mut cmd = chute_in(dir.path(), &["--url", &url, "load", "t6", "c.csv", "--backfill", backfill, "--batch-mb", "1"]);
            cmd.args(extra.to_vec()).stdout(Stdio::piped()).stderr(Stdio::piped());
            cmd
        };
        // Our lock holds the first run before it makes a partition: a new partition's ATTACH needs it.
        let mut holder = db.client().await;
        let txn = holder.transaction().await.unwrap();
        txn.batch_execute("LOCK TABLE t6 IN SHARE UPDATE EXCLUSIVE MODE").await.unwrap();
        let first = spawn(&mut cmd(&[]));
        until(&c, &format!("SELECT EXISTS ({LOCK_HOLDER})"), "the first run's lock").await;
        // The second run reads the tree as it is now, then queues for the load.
        let second = spawn(&mut cmd(&["--wait"]));
        until(
            &c,
            "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 AND NOT granted)",
            "the second run to queue",
        )
        .await;
        txn.commit().await.unwrap();
        let (first, second) = (
            exit_within(first, Duration::from_secs(300), "the first run"),
            exit_within(second, Duration::from_secs(300), "the waiting run"),
        );
        assert_eq!(first.status.code(), Some(0), "{}", text(&first.stderr));
        assert_eq!(second.status.code(), Some(0), "{}", text(&second.stderr));
        let made: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 't6'::regclass", &[]).await.unwrap().get(0);
        assert!(made > before, "the first run made no partition ({made}): the case is not tested");
        assert_eq!(summary_value(&text(&second.stdout), "rows loaded"), "0", "--backfill {backfill}:\n{}", text(&second.stdout));
        assert_eq!(counts(&c, "t6").await, (100_000, 100_000), "--backfill {backfill}");
        assert!(!text(&second.stderr).contains("could not be backfilled"), "{}", text(&second.stderr));
    }
}
