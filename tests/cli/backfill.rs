//! The backfill path: partitions a load creates are filled before anyone
//! can see them (COPY FREEZE into a standalone table, indexes built by the
//! ATTACH, one commit), with the same rows as the normal path, frozen, all
//! or nothing across a kill, and never visible half filled.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, column, create_time_partitioned, open_tempdir, run_expect, summary_value};

const COLS: &str = "time timestamptz not null, dev_id int not null, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8";

/// `chute gen conditions` rows of 100 devices (36,000 rows an hour) into `path`.
fn write_rows(path: &std::path::Path, rows: u64) {
    let out = chute().args(["gen", "conditions", "--devices", "100", "--rows", &rows.to_string()]).output().unwrap();
    assert!(out.status.success());
    std::fs::write(path, out.stdout).unwrap();
}

/// The table with a primary key and an index on time, partitioned hourly,
/// no partition for 2021 yet.
async fn table(url: &str, c: &tokio_postgres::Client, name: &str) {
    create_time_partitioned(url, name, COLS, "1h", &["--premake", "1"]);
    c.batch_execute(&format!("ALTER TABLE {name} ADD PRIMARY KEY (dev_id, time); CREATE INDEX ON {name} (time)")).await.unwrap();
}

/// Per leaf of `parent` dated 2021: (name, rows, pages, all-frozen pages, indexes).
async fn leaves(c: &tokio_postgres::Client, parent: &str) -> Vec<(String, i64, i64, i64, i64)> {
    c.query(
        &format!(
            "SELECT c.relname::text, (SELECT count(*) FROM {parent} t WHERE t.tableoid = c.oid),
                    (pg_relation_size(c.oid) / 8192)::int8, (v).all_frozen::int8,
                    (SELECT count(*) FROM pg_index i WHERE i.indrelid = c.oid)
             FROM pg_inherits h JOIN pg_class c ON c.oid = h.inhrelid, pg_visibility_map_summary(c.oid) v
             WHERE h.inhparent = '{parent}'::regclass AND c.relname LIKE '{parent}_p2021%' ORDER BY 1"
        ),
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

async fn digest(c: &tokio_postgres::Client, table: &str) -> (i64, String) {
    let r =
        c.query_one(&format!("SELECT count(*), md5(string_agg(t::text, '|' ORDER BY time, dev_id)) FROM {table} t"), &[]).await.unwrap();
    (r.get(0), r.get(1))
}

/// Tables of the load's name that are not attached: what a killed backfill must not leave.
async fn strays(c: &tokio_postgres::Client, parent: &str) -> Vec<String> {
    column(c, &format!("SELECT relname::text FROM pg_class WHERE relname LIKE '{parent}_p%' AND relkind = 'r' AND NOT relispartition"))
        .await
}

#[tokio::test]
async fn a_backfilled_table_equals_the_normal_path_row_for_row_with_its_rows_frozen_and_indexed() {
    let db = shared().fresh_db("backfill_equal").await;
    let (url, c) = (db.url(), db.client().await);
    c.batch_execute("CREATE EXTENSION pg_visibility").await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 200_000);
    table(&url, &c, "bf_on").await;
    table(&url, &c, "bf_off").await;
    let load = |t: &str, mode: &str| run_expect(chute().args(["--url", &url, "load", t]).arg(&file).args(["--backfill", mode]), 0).0;
    let on = load("bf_on", "on");
    let off = load("bf_off", "off");
    assert_eq!(summary_value(&on, "rows loaded"), "200000");
    assert_eq!(summary_value(&off, "rows loaded"), "200000");
    // 200,000 rows of 100 devices every 10 s: 5.6 hours, 6 partitions.
    assert_eq!(summary_value(&on, "partitions created"), "6", "{on}");
    assert!(summary_value(&on, "backfilled").starts_with("6 "), "{on}");
    assert!(off.contains("normal path       6 partitions: --backfill off"), "{off}");
    assert_eq!(digest(&c, "bf_on").await, digest(&c, "bf_off").await, "the same rows, value for value");

    let (on_leaves, off_leaves) = (leaves(&c, "bf_on").await, leaves(&c, "bf_off").await);
    assert_eq!(on_leaves.len(), 6);
    for (name, rows, pages, frozen, indexes) in &on_leaves {
        assert!(*rows > 0 && *pages > 0, "{name}");
        assert_eq!(frozen, pages, "every page of {name} is all-frozen: written by COPY FREEZE");
        // The primary key and the index on time, built by the ATTACH.
        assert_eq!(*indexes, 2, "{name}");
    }
    // Their key's statistics were gathered in the backfill's transaction, the
    // rest left to autoanalyze (which has not run yet, or has).
    let analyzed: i64 = c
        .query_one("SELECT count(DISTINCT tablename) FROM pg_stats WHERE tablename LIKE 'bf_on_p2021%' AND attname = 'time'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(analyzed, 6);
    let left: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_user_tables s WHERE relname LIKE 'bf_on_p2021%' AND (last_autoanalyze IS NOT NULL
                OR NOT EXISTS (SELECT 1 FROM pg_stats p WHERE p.tablename = s.relname AND p.attname <> 'time'))",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 6, "only the key analyzed by chute; the rest is autoanalyze's");
    // The normal path's rows wait for a vacuum to be frozen.
    assert!(off_leaves.iter().all(|l| l.3 == 0 && l.4 == 2), "{off_leaves:?}");
    // The constraint used to attach without a scan is gone; the primary key works.
    let checks: i64 = c.query_one("SELECT count(*) FROM pg_constraint WHERE conname = 'chute_bounds'", &[]).await.unwrap().get(0);
    assert_eq!(checks, 0);
    let dup = c.batch_execute("INSERT INTO bf_on SELECT * FROM bf_on LIMIT 1").await.unwrap_err();
    assert_eq!(dup.code().unwrap().code(), "23505");

    // The same load again is committed already: nothing is loaded twice.
    let again = load("bf_on", "on");
    assert_eq!(summary_value(&again, "rows loaded"), "0", "{again}");
    assert_eq!(digest(&c, "bf_on").await.0, 200_000);
}

#[tokio::test]
async fn a_kill_during_a_backfill_leaves_no_stray_table_and_the_rerun_loads_every_row_once() {
    let db = shared().fresh_db("backfill_kill").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    let n = 720_000; // 20 hours
    write_rows(&file, n);
    table(&url, &c, "bk").await;
    let cmd = || {
        let mut cmd = chute();
        cmd.args(["--url", &url, "load", "bk"]).arg(&file).args(["--backfill", "on", "--json"]);
        cmd
    };
    let mut child = spawn(cmd().stdout(Stdio::piped()).stderr(Stdio::piped()));
    // Wait until a backfill holds a partition nobody else can see yet (its
    // table's lock is held, its catalog row is not committed), and at least
    // one partition is attached, then kill -9.
    let began = Instant::now();
    loop {
        let r = c
            .query_one(
                "SELECT (SELECT count(*) FROM pg_locks l WHERE l.locktype = 'relation' AND l.mode = 'AccessExclusiveLock'
                          AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                          AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = l.relation)),
                        (SELECT count(*) FROM pg_inherits WHERE inhparent = 'bk'::regclass AND inhrelid::regclass::text LIKE 'bk_p2021%')",
                &[],
            )
            .await
            .unwrap();
        let (hidden, attached): (i64, i64) = (r.get(0), r.get(1));
        if hidden > 0 && attached > 0 {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the load ended before it could be killed mid-backfill");
        assert!(began.elapsed() < Duration::from_secs(120), "no backfill was seen in progress");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill();
    // The killed session's transaction is rolled back: its table is gone with it.
    let began = Instant::now();
    while !strays(&c, "bk").await.is_empty() && began.elapsed() < Duration::from_secs(20) {
        // Polling pace; the deadline is the loop's, the assertion below says what is left.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(strays(&c, "bk").await, Vec::<String>::new(), "a killed backfill left a standalone table");
    let committed: i64 = c.query_one("SELECT count(*) FROM bk", &[]).await.unwrap().get(0);
    assert!(committed < n as i64, "the kill came before the end");

    let out = run_expect(&mut cmd(), 0).0;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["rows_loaded"].as_u64().unwrap() + v["rows_skipped"].as_u64().unwrap(), n, "{out}");
    assert_eq!(v["rows_skipped"].as_i64().unwrap(), committed, "what the first run committed is skipped, nothing else: {out}");
    let r = c.query_one("SELECT count(*), count(DISTINCT (dev_id, time)) FROM bk", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (n as i64, n as i64));
    assert_eq!(strays(&c, "bk").await, Vec::<String>::new());
}

#[tokio::test]
async fn a_reader_never_sees_a_backfilled_partition_with_part_of_its_rows() {
    let db = shared().fresh_db("backfill_reader").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 400_000);
    table(&url, &c, "br").await;
    let mut child = spawn(chute().args(["--url", &url, "load", "br"]).arg(&file).args(["--backfill", "on"]).stdout(Stdio::piped()));
    let reader = db.client().await;
    let mut seen: Vec<HashMap<String, i64>> = Vec::new();
    while child.running() {
        let rows = reader.query("SELECT tableoid::regclass::text, count(*) FROM br GROUP BY 1", &[]).await.unwrap();
        seen.push(rows.iter().map(|r| (r.get(0), r.get(1))).collect());
    }
    assert!(child.wait_within(Duration::from_secs(60), "the load").success());
    let last: HashMap<String, i64> = reader
        .query("SELECT tableoid::regclass::text, count(*) FROM br GROUP BY 1", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    assert_eq!(last.values().sum::<i64>(), 400_000);
    assert!(seen.len() > 1, "the reader ran during the load");
    for (i, s) in seen.iter().enumerate() {
        for (leaf, count) in s {
            assert_eq!(Some(count), last.get(leaf), "read {i} saw {leaf} with {count} rows, part of its {:?}", last.get(leaf));
        }
    }
}

#[tokio::test]
async fn rows_the_server_refuses_send_their_partition_the_normal_way_and_the_bad_row_to_the_rejects() {
    let db = shared().fresh_db("backfill_refused").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 100_000);
    // One row in hour 1 breaks the table's CHECK: COPY FREEZE cannot skip
    // one row, so its partition takes the normal path, which can.
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines: Vec<String> = text.lines().map(str::to_owned).collect();
    let bad = 50_000;
    let mut fields: Vec<&str> = lines[bad - 1].split(',').collect();
    fields[2] = "-5";
    lines[bad - 1] = fields.join(",");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    table(&url, &c, "bc").await;
    c.batch_execute("ALTER TABLE bc ADD CONSTRAINT data1_positive CHECK (data1 >= 0)").await.unwrap();
    let rejects = dir.path().join("bc.rejects");
    let (out, err) =
        run_expect(chute().args(["--url", &url, "load", "bc"]).arg(&file).args(["--backfill", "on", "--reject-file"]).arg(&rejects), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "99999", "{out}{err}");
    assert!(summary_value(&out, "backfilled").starts_with("2 "), "{out}");
    assert!(out.contains("the server refused the backfill"), "{out}");
    assert!(err.contains("could not be backfilled") && err.contains("23514"), "{err}");
    let r = std::fs::read_to_string(&rejects).unwrap();
    assert!(r.contains(&format!(":{bad}: ")) && r.contains("data1_positive"), "{r}");
    let n: i64 = c.query_one("SELECT count(*) FROM bc", &[]).await.unwrap().get(0);
    assert_eq!(n, 99_999);
}

#[tokio::test]
async fn two_loads_backfilling_the_same_hours_at_once_both_land_every_row_once() {
    let db = shared().fresh_db("backfill_twice").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 200_000);
    // Even and odd devices: the same hours in both files.
    let text = std::fs::read_to_string(&file).unwrap();
    let (even, odd): (Vec<&str>, Vec<&str>) =
        text.lines().partition(|l| l.split(',').nth(1).and_then(|d| d.parse::<i64>().ok()).is_some_and(|d| d % 2 == 0));
    let (a, b) = (dir.path().join("even.csv"), dir.path().join("odd.csv"));
    std::fs::write(&a, even.join("\n") + "\n").unwrap();
    std::fs::write(&b, odd.join("\n") + "\n").unwrap();
    // Both backfilling; then one backfilling while the other makes the
    // same partitions the normal way (it waits for the backfill's commit
    // and finds the partition made).
    for (table_name, other) in [("bt", "on"), ("bt_mixed", "off")] {
        table(&url, &c, table_name).await;
        let start = |f: &std::path::Path, mode: &str| {
            spawn(
                chute()
                    .args(["--url", &url, "load", table_name])
                    .arg(f)
                    .args(["--backfill", mode])
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped()),
            )
        };
        let (x, y) = (start(&a, "on"), start(&b, other));
        let (x, y) =
            (exit_within(x, Duration::from_secs(300), "the first load"), exit_within(y, Duration::from_secs(300), "the second load"));
        for o in [&x, &y] {
            assert!(o.status.success(), "{other}: {}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
            // The race is told in words: never the server's catalog index.
            let err = String::from_utf8_lossy(&o.stderr);
            assert!(!err.contains("_nsp_index") && !err.contains("duplicate key"), "{other}: {err}");
        }
        let noticed =
            [&x, &y].iter().any(|o| String::from_utf8_lossy(&o.stderr).contains("another session made a table of that name first"));
        if other == "on" {
            assert!(noticed, "two backfills of the same hours: one must find its partitions made by the other");
        }
        let loaded: u64 =
            [&x, &y].iter().map(|o| summary_value(&String::from_utf8_lossy(&o.stdout), "rows loaded").parse::<u64>().unwrap()).sum();
        assert_eq!(loaded, 200_000);
        let r = c.query_one(&format!("SELECT count(*), count(DISTINCT (dev_id, time)) FROM {table_name}"), &[]).await.unwrap();
        assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (200_000, 200_000), "{other}");
        assert_eq!(strays(&c, table_name).await, Vec::<String>::new());
    }
}

#[tokio::test]
async fn backfill_on_refuses_a_layout_it_cannot_take_and_says_what_to_run() {
    let db = shared().fresh_db("backfill_layout").await;
    let (url, _c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let file = dir.path().join("c.csv");
    write_rows(&file, 1_000);
    create_time_partitioned(&url, "bh", COLS, "1h", &["--premake", "1", "--hash", "dev_id:4"]);
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "bh"]).arg(&file).args(["--backfill", "on"]), 2);
    assert!(err.contains("--backfill on") && err.contains("sub-partitioned by hash") && err.contains("--backfill auto"), "{err}");
    // auto takes the normal path and says why.
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "bh"]).arg(&file), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1000");
    assert!(out.contains("sub-partitioned by hash"), "{out}");
}
