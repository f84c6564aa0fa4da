//! The backfill path into partitions that exist: an empty partition made
//! ahead (by pg_partman's premake, by chute's, by hand) is filled as a new
//! table with COPY FREEZE, its indexes built after the rows, and swapped in
//! for the empty one under a short lock. The rows are those of the normal
//! path, the partition keeps its name, grants and indexes, writers into it
//! lose nothing and wait no longer than --lock-timeout, and a kill at any
//! point leaves the old partition or the new one, never a stray table.

use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use chute_testkit::process::{ChildGuard, exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, column, open_tempdir, run_expect, summary_value};

/// Seed 000's tables (tsbs on RDS): readings with four indexes, diagnostics,
/// tags; hourly partitions made by pg_partman 4.7 with a premake of 24 (a
/// day behind now and a day ahead) and its DEFAULT partition.
const PARTMAN_DDL: &str = "
CREATE EXTENSION IF NOT EXISTS pg_visibility;
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE TABLE tags (id serial PRIMARY KEY, name text, fleet text, driver text, model text, device_version text,
    load_capacity double precision, fuel_capacity double precision, nominal_fuel_consumption double precision);
CREATE UNIQUE INDEX uniq1 ON tags (name, fleet, driver, model, device_version, load_capacity, fuel_capacity, nominal_fuel_consumption);
CREATE TABLE readings (time timestamptz NOT NULL, tags_id integer, name text, latitude double precision, longitude double precision,
    elevation double precision, velocity double precision, heading double precision, grade double precision,
    fuel_consumption double precision, additional_tags jsonb) PARTITION BY RANGE (time);
CREATE TABLE diagnostics (time timestamptz NOT NULL, tags_id integer, name text, fuel_state double precision,
    current_load double precision, status double precision, additional_tags jsonb) PARTITION BY RANGE (time);
CREATE INDEX ON readings (tags_id, time DESC);
CREATE INDEX ON readings (time DESC);
CREATE INDEX ON readings USING brin (time);
CREATE INDEX ON readings (velocity, time DESC);
CREATE INDEX ON diagnostics (tags_id, time DESC);
CREATE INDEX ON diagnostics (time DESC);
SELECT partman.create_parent('public.readings', 'time', 'native', '1 hour', p_premake => 24);
SELECT partman.create_parent('public.diagnostics', 'time', 'native', '1 hour', p_premake => 24);
";

/// Per partition of `parent` holding rows: (name, rows, pages, all-frozen pages, index names).
async fn filled(c: &tokio_postgres::Client, parent: &str) -> Vec<(String, i64, i64, i64, String)> {
    c.query(
        &format!(
            "SELECT c.relname::text, (SELECT count(*) FROM {parent} t WHERE t.tableoid = c.oid),
                    (pg_relation_size(c.oid) / 8192)::int8, (v).all_frozen::int8,
                    (SELECT string_agg(ic.relname, ',' ORDER BY ic.relname) FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid
                     WHERE i.indrelid = c.oid)
             FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid, pg_visibility_map_summary(c.oid) v
             WHERE h.inhparent = '{parent}'::regclass AND EXISTS (SELECT 1 FROM {parent} t WHERE t.tableoid = c.oid) ORDER BY 1"
        ),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// Each partition of `parent` with its index names, in name order.
async fn partitions(c: &tokio_postgres::Client, parent: &str) -> Vec<String> {
    column(
        c,
        &format!(
            "SELECT c.relname || ':' || coalesce((SELECT string_agg(ic.relname, ',' ORDER BY ic.relname) FROM pg_index i
                                                  JOIN pg_class ic ON ic.oid = i.indexrelid WHERE i.indrelid = c.oid), '')
             FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid WHERE h.inhparent = '{parent}'::regclass ORDER BY 1"
        ),
    )
    .await
}

async fn digest(c: &tokio_postgres::Client, table: &str) -> (i64, String) {
    let r = c
        .query_one(&format!("SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t::text)) FROM {table} t"), &[])
        .await
        .unwrap_or_else(|e| panic!("{table}: {e}"));
    (r.get(0), r.get(1))
}

/// Standalone tables a swap makes: what no run may leave behind.
async fn strays(c: &tokio_postgres::Client) -> Vec<String> {
    column(c, "SELECT relname::text FROM pg_class WHERE relname LIKE 'chute_swap%'").await
}

/// pg_partman's configuration of its tables.
async fn config(c: &tokio_postgres::Client) -> Vec<String> {
    column(c, "SELECT parent_table || ' ' || partition_interval || ' ' || premake FROM partman.part_config ORDER BY 1").await
}

/// An hour boundary `hours` before now, as `chute gen --from` takes it.
async fn hours_ago(c: &tokio_postgres::Client, hours: i32) -> String {
    c.query_one(
        "SELECT to_char((date_trunc('hour', now()) - make_interval(hours => $1)) AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
        &[&hours],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn pg_partman_s_premade_partitions_are_swapped_with_the_normal_path_s_rows_frozen_and_keep_names_grants_and_indexes() {
    let swap_db = shared().fresh_db("swap_partman").await;
    let off_db = shared().fresh_db("swap_partman_off").await;
    let (c, off) = (swap_db.client().await, off_db.client().await);
    for db in [&c, &off] {
        db.batch_execute(PARTMAN_DDL).await.unwrap();
    }
    c.batch_execute("DO $$BEGIN CREATE ROLE swap_reader; EXCEPTION WHEN duplicate_object THEN NULL; END$$").await.unwrap();
    // 16 hours of 20 trucks, ending two hours ago: every hour premade, empty, older than one interval.
    let (from, to) = (hours_ago(&c, 18).await, hours_ago(&c, 2).await);
    let dir = open_tempdir();
    let file = dir.path().join("iot.tsbs");
    run_expect(chute().args(["gen", "iot", "--scale", "20", "--from", &from, "--to", &to, "-o"]).arg(&file), 0);
    let hour: String = c
        .query_one(
            "SELECT c.relname::text FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid
             WHERE h.inhparent = 'readings'::regclass AND c.relname = 'readings_p' || to_char((date_trunc('hour', now()) - interval '10 hours') AT TIME ZONE 'UTC', 'YYYY_MM_DD_HH24MI')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!("GRANT SELECT ON {hour} TO swap_reader; COMMENT ON TABLE {hour} IS 'ten hours ago'")).await.unwrap();
    let before = (partitions(&c, "readings").await, partitions(&c, "diagnostics").await);

    let load = |url: &str, extra: &[&str]| run_expect(chute().args(["--url", url, "load", "--format", "tsbs"]).arg(&file).args(extra), 0).0;
    let out = load(&swap_db.url(), &[]);
    let normal = load(&off_db.url(), &["--backfill", "off"]);
    // 16 hours of readings and of diagnostics.
    assert_eq!(summary_value(&out, "partitions created"), "0", "{out}");
    assert!(out.contains("swapped in        32 "), "{out}");
    assert!(!normal.contains("swapped"), "{normal}");
    for t in ["tags", "readings", "diagnostics"] {
        assert_eq!(digest(&c, t).await, digest(&off, t).await, "{t}: the same rows as the normal path's");
    }
    // The same partitions, by name, with the same index names.
    assert_eq!((partitions(&c, "readings").await, partitions(&c, "diagnostics").await), before);
    for t in ["readings", "diagnostics"] {
        let leaves = filled(&c, t).await;
        assert_eq!(leaves.len(), 16, "{t}: {leaves:?}");
        for (name, rows, pages, frozen, indexes) in &leaves {
            assert!(*rows > 0, "{name}");
            assert_eq!(frozen, pages, "every heap page of {name} is all-frozen (COPY FREEZE)");
            assert_eq!(indexes.split(',').count(), if t == "readings" { 4 } else { 2 }, "{name}: {indexes}");
        }
        // Not frozen on the normal path: the difference is real.
        assert!(filled(&off, t).await.iter().all(|l| l.3 < l.2), "{t}");
    }
    let kept: (Option<String>, bool) = c
        .query_one(
            &format!("SELECT obj_description('{hour}'::regclass, 'pg_class'), has_table_privilege('swap_reader', '{hour}', 'SELECT')"),
            &[],
        )
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!(kept, (Some("ten hours ago".into()), true), "{hour} keeps its comment and grants");
    assert_eq!(strays(&c).await, Vec::<String>::new());

    // pg_partman finds nothing to fix: no row in a DEFAULT partition, every
    // partition it made still there, its configuration unchanged.
    let config_before = config(&c).await;
    c.batch_execute("SELECT partman.run_maintenance(); ").await.unwrap();
    let defaults: i64 = c.query_one("SELECT count(*) FROM partman.check_default(false)", &[]).await.unwrap().get(0);
    assert_eq!(defaults, 0, "no row went to a DEFAULT partition");
    let after = partitions(&c, "readings").await;
    assert!(before.0.iter().all(|p| after.contains(p)), "run_maintenance dropped or renamed a partition: {after:?}");
    assert_eq!(config(&c).await, config_before);

    // The same load again: everything committed, nothing loaded twice.
    let again = load(&swap_db.url(), &[]);
    assert_eq!(summary_value(&again, "rows loaded"), "0", "{again}");
    assert_eq!(digest(&c, "readings").await, digest(&off, "readings").await);
}

const COLS: &str = "time timestamptz not null, dev_id int not null, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8";

/// `chute gen conditions` rows of `devices` devices from 2021-06-01 into `path`.
fn write_rows(path: &std::path::Path, devices: u32, rows: u64) {
    run_expect(chute().args(["gen", "conditions", "--devices", &devices.to_string(), "--rows", &rows.to_string(), "-o"]).arg(path), 0);
}

/// `name` partitioned hourly by chute, with `hours` partitions from
/// 2021-06-01 made ahead (all empty), a primary key and an index on time.
async fn premade(url: &str, c: &tokio_postgres::Client, name: &str, hours: u32) {
    run_expect(
        chute().args(["--url", url, "partition", "create", name, "--columns", COLS, "--key", "time", "--interval", "1h"]).args([
            "--premake",
            &(hours - 1).to_string(),
            "--now",
            "2021-06-01T00:00:00Z",
        ]),
        0,
    );
    c.batch_execute(&format!("ALTER TABLE {name} ADD PRIMARY KEY (dev_id, time); CREATE INDEX ON {name} (time)")).await.unwrap();
}

/// A swap is filling its table: a relation locked that the catalog does not
/// show yet (created in a transaction not committed).
async fn swap_in_progress(c: &tokio_postgres::Client) -> bool {
    c.query_one(
        "SELECT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
                          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                          AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = l.relation))",
        &[],
    )
    .await
    .unwrap()
    .get(0)
}

#[tokio::test]
async fn writers_into_a_partition_being_swapped_lose_no_row_fail_no_statement_and_wait_no_longer_than_the_lock_timeout() {
    let db = shared().fresh_db("swap_writers").await;
    let (url, c) = (db.url(), db.client().await);
    premade(&url, &c, "sww", 4).await;
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    // Three hours of 500 devices.
    write_rows(&file, 500, 540_000);
    let mut child = spawn(chute().args(["--url", &url, "load", "sww", "--lock-timeout", "300ms"]).arg(&file).stdout(Stdio::piped()));
    let began = Instant::now();
    while !swap_in_progress(&c).await {
        assert!(child.running(), "the load ended before a swap was seen");
        assert!(began.elapsed() < Duration::from_secs(60), "no swap was seen in progress");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    // Two writers insert one row per statement into the first hour (being
    // swapped now) until the load ends.
    let done = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2i32 {
        let (wc, done) = (db.client().await, done.clone());
        writers.push(tokio::spawn(async move {
            let (mut n, mut worst) = (0i32, Duration::ZERO);
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                wc.execute(
                    "INSERT INTO sww (time, dev_id, data1) VALUES ('2021-06-01 00:00:00+00'::timestamptz + make_interval(secs => $2::int / 1000.0), $1, 1)",
                    &[&(100_000 + w), &n],
                )
                .await
                .unwrap_or_else(|e| panic!("writer {w}'s insert {n} failed: {e}"));
                worst = worst.max(t.elapsed());
                n += 1;
            }
            (n, worst)
        }));
    }
    let out = tokio::task::spawn_blocking(move || exit_within(child, Duration::from_secs(300), "the load")).await.unwrap();
    done.store(true, Ordering::Relaxed);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}");
    let mut written = 0i64;
    let mut worst = Duration::ZERO;
    for w in writers {
        let (n, wait) = w.await.unwrap();
        written += i64::from(n);
        worst = worst.max(wait);
    }
    assert!(stdout.contains("swapped in        3 "), "{stdout}");
    assert!(written > 0);
    let r = c
        .query_one("SELECT count(*) FILTER (WHERE dev_id >= 100000), count(*) FILTER (WHERE dev_id < 100000) FROM sww", &[])
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), written, "every row a writer inserted is there after the swap");
    assert_eq!(r.get::<_, i64>(1), 540_000);
    // The locked step gives way after --lock-timeout (300 ms), and holds its
    // locks only for the moves and the catalog changes.
    assert!(worst < Duration::from_millis(300 + 1000), "a writer waited {worst:?}");
    eprintln!("writers: {written} rows, the longest insert took {worst:?}");
    assert_eq!(strays(&c).await, Vec::<String>::new());
}

#[tokio::test]
async fn kills_during_swapping_loads_then_the_same_command_load_every_row_once_and_leave_no_table_behind() {
    let db = shared().fresh_db("swap_kill").await;
    let (url, c) = (db.url(), db.client().await);
    premade(&url, &c, "swk", 21).await;
    let names: Vec<String> =
        column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'swk'::regclass ORDER BY 1").await;
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    let n = 720_000u64; // 20 hours of 100 devices
    write_rows(&file, 100, n);
    let cmd = || {
        let mut cmd = chute();
        cmd.args(["--url", &url, "load", "swk", "--json"]).arg(&file);
        cmd
    };
    let seed = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().subsec_nanos();
    eprintln!("kill points from seed {seed}");
    for round in 0..3u32 {
        let mut child = spawn(cmd().stdout(Stdio::piped()).stderr(Stdio::piped()));
        let began = Instant::now();
        while !swap_in_progress(&c).await {
            if !child.running() {
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(60), "no swap was seen in progress");
            // Polling pace; the deadline is above.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // Somewhere in the swap: filling, building indexes, or in the locked
        // step. The kill point, drawn from the printed seed, is the test's subject.
        let delay = (seed.rotate_left(round * 7) % 600) as u64;
        tokio::time::sleep(Duration::from_millis(delay)).await;
        child.kill();
        let began = Instant::now();
        while !strays(&c).await.is_empty() && began.elapsed() < Duration::from_secs(20) {
            // Polling pace; the deadline is the loop's, the assertion below says what is left.
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(strays(&c).await, Vec::<String>::new(), "round {round}: a killed swap left its table");
        let now: Vec<String> =
            column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'swk'::regclass ORDER BY 1").await;
        assert_eq!(now, names, "round {round}: every partition is there, by its name (the old one or its successor)");
    }
    let out = run_expect(&mut cmd(), 0).0;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows_loaded"].as_u64().unwrap() + v["rows_skipped"].as_u64().unwrap(), n, "{out}");
    let r = c.query_one("SELECT count(*), count(DISTINCT (dev_id, time)) FROM swk", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (n as i64, n as i64), "every row once");
    assert_eq!(strays(&c).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_partition_that_cannot_be_swapped_safely_takes_the_normal_path_and_backfill_on_says_why() {
    let db = shared().fresh_db("swap_refused").await;
    let (url, c) = (db.url(), db.client().await);
    premade(&url, &c, "swr", 3).await;
    c.batch_execute(
        "CREATE TABLE swr_seen (n int8);
         CREATE FUNCTION swr_count() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO swr_seen VALUES (1); RETURN NULL; END$$;
         CREATE TRIGGER seen AFTER INSERT ON swr_p20210601_0100 FOR EACH ROW EXECUTE FUNCTION swr_count();
         CREATE TABLE swr_statements (n int8);
         CREATE FUNCTION swr_statement() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN INSERT INTO swr_statements VALUES (1); RETURN NULL; END$$;
         CREATE TRIGGER once AFTER INSERT ON swr_p20210601_0000 FOR EACH STATEMENT EXECUTE FUNCTION swr_statement();
         CREATE TABLE swr_refs (dev_id int, time timestamptz, FOREIGN KEY (dev_id, time) REFERENCES swr_p20210601_0200);",
    )
    .await
    .unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 100, 108_000); // three hours
    let (out, err) = run_expect(chute().args(["--url", &url, "load", "swr", "--backfill", "on"]).arg(&file), 0);
    assert!(out.contains("backfilled          0 "), "no partition was swapped: {out}");
    assert!(err.contains("swr_p20210601_0100 is not swapped (an INSERT trigger on it must fire for these rows)"), "{err}");
    // A statement-level trigger too: the swap's successor is filled before its triggers exist.
    assert!(err.contains("swr_p20210601_0000 is not swapped (an INSERT trigger on it must fire for these rows)"), "{err}");
    assert!(err.contains("swr_p20210601_0200 is not swapped (a foreign key points at it or its parent)"), "{err}");
    let seen: i64 = c.query_one("SELECT count(*) FROM swr_seen", &[]).await.unwrap().get(0);
    assert_eq!(seen, 36_000, "the trigger saw every row of its hour");
    let statements: i64 = c.query_one("SELECT count(*) FROM swr_statements", &[]).await.unwrap().get(0);
    assert!(statements >= 1, "the statement-level trigger fired for the COPYs into its partition");
    let rows: i64 = c.query_one("SELECT count(*) FROM swr", &[]).await.unwrap().get(0);
    assert_eq!(rows, 108_000);
}

#[tokio::test]
async fn two_loads_filling_the_same_empty_partitions_at_once_and_the_same_command_twice_with_wait_land_every_row_once() {
    let db = shared().fresh_db("swap_twice").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 100, 144_000); // four hours
    // Even and odd devices: the same hours in both files.
    let text = std::fs::read_to_string(&file).unwrap();
    let (even, odd): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.split(',').nth(1).and_then(|d| d.parse::<i64>().ok()).is_some_and(|d| d % 2 == 0));
    let (a, b) = (dir.path().join("even.csv"), dir.path().join("odd.csv"));
    std::fs::write(&a, even.join("\n") + "\n").unwrap();
    std::fs::write(&b, odd.join("\n") + "\n").unwrap();
    let start = |table: &str, f: &std::path::Path, extra: &[&str]| {
        spawn(chute().args(["--url", &url, "load", table]).arg(f).args(extra).stdout(Stdio::piped()).stderr(Stdio::piped()))
    };
    let finish = |x: ChildGuard, y: ChildGuard| {
        (exit_within(x, Duration::from_secs(300), "the first load"), exit_within(y, Duration::from_secs(300), "the second load"))
    };
    let ok = |o: &std::process::Output| {
        assert!(o.status.success(), "{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    // Two loads, each wanting to swap the same four hours: the one whose
    // swap commits second finds the partition replaced and loads into it.
    premade(&url, &c, "swt", 5).await;
    let (x, y) = finish(start("swt", &a, &[]), start("swt", &b, &[]));
    let (x, y) = (ok(&x), ok(&y));
    let loaded: u64 = [&x, &y].iter().map(|o| summary_value(o, "rows loaded").parse::<u64>().unwrap()).sum();
    assert_eq!(loaded, 144_000, "{x}{y}");
    let r = c.query_one("SELECT count(*), count(DISTINCT (dev_id, time)) FROM swt", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (144_000, 144_000));
    assert_eq!(strays(&c).await, Vec::<String>::new());

    // The same command twice at once, with --wait: the second waits for the
    // first, then finds every row committed.
    premade(&url, &c, "sww2", 5).await;
    let (x, y) = finish(start("sww2", &file, &["--wait"]), start("sww2", &file, &["--wait"]));
    let (x, y) = (ok(&x), ok(&y));
    let loaded: Vec<String> = [&x, &y].iter().map(|o| summary_value(o, "rows loaded").to_owned()).collect();
    assert!(loaded.contains(&"144000".to_owned()) && loaded.contains(&"0".to_owned()), "{x}{y}");
    assert!([&x, &y].iter().any(|o| o.contains("swapped in        4 ")), "{x}{y}");
    let r = c.query_one("SELECT count(*), count(DISTINCT (dev_id, time)) FROM sww2", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (144_000, 144_000));
}

#[tokio::test]
async fn a_server_restart_while_swaps_wait_for_their_locks_is_retried_and_every_row_lands_once() {
    let cluster = chute_testkit::TestCluster::start();
    let db = cluster.fresh_db("swap_restart").await;
    let (url, c) = (db.url(), db.client().await);
    premade(&url, &c, "swx", 4).await;
    let names: Vec<String> =
        column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'swx'::regclass ORDER BY 1").await;
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 100, 108_000); // three hours
    // A reader of the table: the swaps fill their tables, then their locked
    // step waits for it (giving way every --lock-timeout and trying again)…
    let holder = db.client().await;
    holder.batch_execute("BEGIN; LOCK TABLE ONLY swx IN ACCESS SHARE MODE").await.unwrap();
    let child = spawn(
        chute()
            .args(["--url", &url, "load", "swx", "--lock-timeout", "2s", "--retry-for", "2min"])
            .arg(&file)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let watcher = db.client().await;
    crate::common::wait_for("a swap to wait for its locks", Duration::from_secs(60), || {
        crate::common::waits_for_lock(&watcher, "^LOCK TABLE ONLY")
    })
    .await;
    // …when the server restarts under them.
    cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
    drop((holder, watcher));
    let out = exit_within(child, Duration::from_secs(300), "the load through the restart");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stderr.contains("backfill of") && stderr.contains("retrying"), "the swap was retried: {stderr}");
    assert!(stdout.contains("swapped in        3 "), "{stdout}");
    let c = db.client().await;
    let r = c.query_one("SELECT count(*), count(DISTINCT (dev_id, time)) FROM swx", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (108_000, 108_000), "{stdout}{stderr}");
    let after: Vec<String> =
        column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'swx'::regclass ORDER BY 1").await;
    assert_eq!(after, names);
    assert_eq!(strays(&c).await, Vec::<String>::new());
}

#[tokio::test]
async fn a_swapped_partition_keeps_its_policies_triggers_storage_and_comments() {
    let db = shared().fresh_db("swap_keeps").await;
    let (url, c) = (db.url(), db.client().await);
    premade(&url, &c, "swp", 3).await;
    c.batch_execute(
        "CREATE FUNCTION swp_touch() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN NEW.data5 := -1; RETURN NEW; END$$;
         CREATE TRIGGER touch BEFORE UPDATE ON swp_p20210601_0100 FOR EACH ROW EXECUTE FUNCTION swp_touch();
         ALTER TABLE swp_p20210601_0100 ENABLE ROW LEVEL SECURITY;
         CREATE POLICY low_devices ON swp_p20210601_0100 FOR SELECT TO PUBLIC USING (dev_id < 50);
         ALTER TABLE swp_p20210601_0100 ALTER COLUMN data1 SET STATISTICS 500;
         ALTER TABLE swp_p20210601_0100 SET (fillfactor = 90);
         COMMENT ON COLUMN swp_p20210601_0100.data2 IS 'second reading';
         ALTER TABLE swp_p20210601_0000 SET (autovacuum_enabled = false);",
    )
    .await
    .unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 100, 72_000); // two hours
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "swp"]).arg(&file), 0);
    assert!(out.contains("swapped in        2 "), "{out}");
    let r = c
        .query_one(
            "SELECT (SELECT count(*) FROM pg_trigger WHERE tgrelid = 'swp_p20210601_0100'::regclass AND tgname = 'touch'),
                    (SELECT relrowsecurity FROM pg_class WHERE oid = 'swp_p20210601_0100'::regclass),
                    (SELECT count(*) FROM pg_policies WHERE tablename = 'swp_p20210601_0100' AND policyname = 'low_devices'
                       AND qual = '(dev_id < 50)'),
                    (SELECT attstattarget FROM pg_attribute WHERE attrelid = 'swp_p20210601_0100'::regclass AND attname = 'data1'),
                    (SELECT reloptions::text FROM pg_class WHERE oid = 'swp_p20210601_0100'::regclass),
                    col_description('swp_p20210601_0100'::regclass, 4)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 1, "the trigger of its own");
    assert!(r.get::<_, bool>(1), "row-level security stays enabled");
    assert_eq!(r.get::<_, i64>(2), 1, "the policy, with its condition");
    assert_eq!(r.get::<_, i32>(3), 500);
    assert_eq!(r.get::<_, Option<String>>(4).as_deref(), Some("{fillfactor=90}"));
    assert_eq!(r.get::<_, Option<String>>(5).as_deref(), Some("second reading"));
    // Statistics: of the key alone where autovacuum analyzes the rest after
    // the load (not yet, or done by it), of everything where it is off.
    let stats = |t: &str| {
        format!(
            "SELECT (SELECT array_agg(attname::text ORDER BY attname) FROM pg_stats WHERE tablename = '{t}' AND attname IN ('time', 'data1')),
                    (SELECT last_autoanalyze IS NOT NULL FROM pg_stat_user_tables WHERE relname = '{t}')"
        )
    };
    let on = c.query_one(&stats("swp_p20210601_0100"), &[]).await.unwrap();
    let off = c.query_one(&stats("swp_p20210601_0000"), &[]).await.unwrap();
    let on_columns: Vec<String> = on.get(0);
    assert!(on_columns == ["time"] || on.get::<_, bool>(1), "chute analyzed only the key: {on_columns:?}");
    assert_eq!(off.get::<_, Vec<String>>(0), ["data1", "time"], "without autovacuum, every column at once");
    // The trigger works on the new table.
    c.batch_execute("UPDATE swp_p20210601_0100 SET data1 = 0 WHERE dev_id = 1").await.unwrap();
    let touched: i64 = c.query_one("SELECT count(*) FROM swp_p20210601_0100 WHERE data5 = -1", &[]).await.unwrap().get(0);
    assert_eq!(touched, 360);
}
