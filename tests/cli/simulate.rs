//! `chute simulate`: short simulations against real servers whose numbers
//! are checked against the table and against the server's own statistics:
//! every operation the simulator counts is a row inserted or updated in the
//! table, and the block counters of its samples add up to what the server
//! counted over the same interval. Also: a migration while the workload
//! runs (its phases marked, nothing lost), a rate it cannot reach (said,
//! with why), a server restart in the middle, `--create` killed and run
//! again (twice at once), and what it refuses.

use std::collections::HashMap;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::{TestCluster, TestDb, shared};

use crate::common::{chute, open_tempdir, read_csv, run, run_expect, wait_for};

fn sum(rows: &[HashMap<String, String>], col: &str) -> i64 {
    rows.iter().map(|r| r[col].parse::<f64>().unwrap_or_else(|_| panic!("{col} = {:?}", r[col])) as i64).sum()
}

/// `--create` a small orders history, and only that.
fn create(url: &str, rows: u64, extra: &[&str]) {
    let rows = rows.to_string();
    run_expect(
        chute()
            .args(["--url", url, "simulate", "--create", "--rows", &rows, "--history", "20d", "--columns", "2", "--duration", "0"])
            .args(extra),
        0,
    );
}

/// Rows inserted by the simulation (ids past the history) and the updates
/// their statuses show: each status past `placed` is one update more.
async fn table_counts(c: &tokio_postgres::Client, history: i64) -> (i64, i64) {
    let row = c
        .query_one(
            "SELECT count(*), coalesce(sum(CASE status WHEN 'placed' THEN 0 WHEN 'paid' THEN 1 WHEN 'shipped' THEN 2 WHEN 'delivered' THEN 3 END), 0)::int8
             FROM orders WHERE id > $1",
            &[&history],
        )
        .await
        .unwrap();
    (row.get(0), row.get(1))
}

/// Waits until no other session is connected to the test database (the
/// simulator's have ended and flushed their statistics).
async fn quiet(c: &tokio_postgres::Client) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let others: i64 = c
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        if others == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{others} sessions still connected");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The table's block and row counters, and each index's blocks, from the server.
async fn server_counters(c: &tokio_postgres::Client) -> ([i64; 6], HashMap<String, (i64, i64)>) {
    let t = c
        .query_one(
            "SELECT s.heap_blks_read, s.heap_blks_hit, s.idx_blks_read, s.idx_blks_hit, u.n_tup_ins, u.n_tup_upd
             FROM pg_statio_user_tables s JOIN pg_stat_user_tables u USING (relid) WHERE s.relid = 'orders'::regclass",
            &[],
        )
        .await
        .unwrap();
    let idx = c
        .query("SELECT indexrelname::text, idx_blks_read, idx_blks_hit FROM pg_statio_user_indexes WHERE relid = 'orders'::regclass", &[])
        .await
        .unwrap();
    (std::array::from_fn(|i| t.get(i)), idx.iter().map(|r| (r.get(0), (r.get(1), r.get(2)))).collect())
}

/// Database-wide blocks, read from another database so reading them adds nothing.
async fn db_blocks(db: &TestDb) -> (i64, i64) {
    let admin = shared().options("postgres").connect().await.unwrap();
    let r = admin.query_one("SELECT blks_read, blks_hit FROM pg_stat_database WHERE datname = $1", &[&db.name]).await.unwrap();
    (r.get(0), r.get(1))
}

#[tokio::test]
async fn samples_add_up_to_the_table_and_to_the_servers_counters() {
    let db = shared().fresh_db("cli_simulate_counts").await;
    let url = db.url();
    create(&url, 3000, &[]);
    let c = db.client().await;
    // Only the simulator may touch the table between the two readings.
    c.batch_execute("ALTER TABLE orders SET (autovacuum_enabled = false)").await.unwrap();
    quiet(&c).await;
    let (before, idx_before) = server_counters(&c).await;
    let db_before = db_blocks(&db).await;
    let lsn_before: String = c.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.unwrap().get(0);

    let dir = open_tempdir();
    let out = dir.path().join("out");
    let (stdout, _) = run_expect(
        chute().args(["--url", &url, "simulate", "--duration", "4s", "--writes-per-s", "160", "--reads-per-s", "300"]).args([
            "--update-after",
            "300ms",
            "--wave",
            "2s",
            "--out",
            out.to_str().unwrap(),
            "--json",
        ]),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();

    quiet(&c).await;
    let (after, idx_after) = server_counters(&c).await;
    let db_after = db_blocks(&db).await;
    let wal: i64 =
        c.query_one("SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::text::pg_lsn)::int8", &[&lsn_before]).await.unwrap().get(0);
    let samples = read_csv(&out.join("samples.csv"));
    assert!(samples.len() >= 4, "a sample a second, and the last after the sessions ended: {}", samples.len());
    let t: Vec<f64> = samples.iter().map(|r| r["t_s"].parse().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] < w[1]), "{t:?}");
    assert!(samples.iter().all(|r| r["phase"] == "run"));

    // Operations counted are rows inserted and updated in the table, and
    // the server counted the same.
    let (inserted, updated) = (sum(&samples, "insert_done"), sum(&samples, "update_done"));
    assert!(inserted > 100 && updated > 100, "{inserted} inserts, {updated} updates in 4 s");
    assert_eq!(table_counts(&c, 3000).await, (inserted, updated), "rows the simulator inserted and updated");
    assert_eq!(sum(&samples, "tup_ins"), inserted);
    assert_eq!(sum(&samples, "tup_upd"), updated);
    assert_eq!((after[4] - before[4], after[5] - before[5]), (inserted, updated), "n_tup_ins, n_tup_upd");
    for kind in ["insert", "update", "read_id", "read_customer", "read_count"] {
        assert_eq!(sum(&samples, &format!("{kind}_errors")), 0, "{kind}");
        assert!(sum(&samples, &format!("{kind}_done")) > 0, "{kind}");
        assert_eq!(json["periods"][0]["ops"][kind]["done"].as_i64().unwrap(), sum(&samples, &format!("{kind}_done")), "{kind}");
    }
    // Block counters: the samples hold exactly what the server counted.
    for (i, col) in ["heap_blks_read", "heap_blks_hit", "idx_blks_read", "idx_blks_hit"].iter().enumerate() {
        assert_eq!(sum(&samples, col), after[i] - before[i], "{col}");
    }
    assert!(sum(&samples, "idx_blks_hit") > 1000, "the workload hit the indexes");
    let indexes = read_csv(&out.join("indexes.csv"));
    assert_eq!(idx_after.len(), 3, "{idx_after:?}");
    for (name, (read, hit)) in &idx_after {
        let rows: Vec<_> = indexes.iter().filter(|r| &r["index"] == name).cloned().collect();
        assert_eq!(
            (sum(&rows, "idx_blks_read"), sum(&rows, "idx_blks_hit")),
            (read - idx_before[name].0, hit - idx_before[name].1),
            "{name}"
        );
    }
    // The database's counters include the table's and the simulator's own
    // catalog reads; the samples miss only its set-up before the first one.
    let (db_read, db_hit) = (sum(&samples, "db_blks_read"), sum(&samples, "db_blks_hit"));
    assert!(db_read + db_hit >= sum(&samples, "heap_blks_hit") + sum(&samples, "idx_blks_hit"));
    assert!(db_read <= db_after.0 - db_before.0 && db_hit <= db_after.1 - db_before.1);
    assert!(db_hit as f64 >= 0.8 * (db_after.1 - db_before.1) as f64, "{db_hit} of {}", db_after.1 - db_before.1);
    let wal_sampled = sum(&samples, "wal_bytes");
    assert!(wal_sampled > 0 && wal_sampled <= wal, "{wal_sampled} of {wal}");

    // The files a person reads.
    let summary = read_csv(&out.join("summary.csv"));
    assert_eq!(summary.len(), 1);
    assert_eq!(summary[0]["period"], "all");
    assert_eq!(summary[0]["layout"], "one table");
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let svgs = std::fs::read_dir(&out).unwrap().filter(|e| e.as_ref().unwrap().path().extension().is_some_and(|x| x == "svg")).count();
    assert_eq!(svgs, 7);
    assert_eq!(html.matches("<svg").count(), svgs, "every chart inline");
    assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"));
    assert!(html.contains("<th>shared_buffers</th>"));

    // The same workload again, drawn beside the first run.
    let out2 = dir.path().join("out2");
    let (text, _) = run_expect(
        chute().args(["--url", &url, "simulate", "--duration", "2s", "--writes-per-s", "80", "--reads-per-s", "100"]).args([
            "--out",
            out2.to_str().unwrap(),
            "--compare",
            out.to_str().unwrap(),
        ]),
        0,
    );
    assert!(text.contains(&format!("compared with {} (one table):", out.display())), "{text}");
    assert!(text.contains("table blocks read/s"), "{text}");
    let html = std::fs::read_to_string(out2.join("report.html")).unwrap();
    assert_eq!(html.matches("<svg").count(), 9, "seven charts and two side by side");
    assert!(html.contains("before (one table): table indexes"));
    // The runs are named, never by a machine's path (charts get committed).
    assert!(html.contains("<td>before: out</td>"), "the earlier run by its directory's name");
    no_machine_path(&out2, dir.path());
}

/// No chart or report in `out` holds `machine_path` (the runs' temporary
/// directory), in any form a chart could show it.
pub fn no_machine_path(out: &std::path::Path, machine_path: &std::path::Path) {
    let path = machine_path.display().to_string();
    let escaped = path.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;");
    let mut checked = 0;
    for entry in std::fs::read_dir(out).unwrap() {
        let file = entry.unwrap().path();
        if file.extension().is_some_and(|x| x == "svg" || x == "html") {
            let text = std::fs::read_to_string(&file).unwrap();
            assert!(!text.contains(&path) && !text.contains(&escaped), "{} holds the path {path}", file.display());
            checked += 1;
        }
    }
    assert!(checked > 1, "no charts in {}", out.display());
}

#[tokio::test]
async fn a_migration_during_the_workload_is_marked_and_loses_nothing() {
    let db = shared().fresh_db("cli_simulate_migrate").await;
    let url = db.url();
    create(&url, 6000, &[]);
    let dir = open_tempdir();
    let out = dir.path().join("out");
    // The split is paced (6 batches of 1000 rows at 2000 rows/s) so that the
    // migration spans a few of the one-second windows however fast the machine.
    let (stdout, stderr) = run_expect(
        chute()
            .args(["--url", &url, "simulate", "--during-migrate", "--migrate-after", "2s", "--duration", "3s", "--batch-rows", "1000"])
            .args(["--split-rows-per-s", "2000"])
            .args(["--writes-per-s", "120", "--reads-per-s", "200", "--update-after", "300ms", "--out", out.to_str().unwrap(), "--json"]),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}\n{stderr}"));
    assert!(json["migration_error"].is_null(), "{json}");
    let phases: Vec<&str> = json["markers"].as_array().unwrap().iter().map(|m| m["phase"].as_str().unwrap()).collect();
    let at = |p: &str| phases.iter().position(|x| *x == p).unwrap_or_else(|| panic!("no {p} in {phases:?}"));
    assert!(at("extend-primary-key") < at("swap") && at("swap") < at("split-setup"), "{phases:?}");
    assert!(at("split-setup") < at("copy") && at("copy") < at("cutover") && at("cutover") < at("migrated"), "{phases:?}");
    let marks: Vec<f64> = json["markers"].as_array().unwrap().iter().map(|m| m["seconds"].as_f64().unwrap()).collect();
    assert!(marks.windows(2).all(|w| w[0] <= w[1]) && marks[0] >= 2.0, "{marks:?}");

    // Nothing the application did was lost or failed across the swap and the split.
    let periods: Vec<&str> = json["periods"].as_array().unwrap().iter().map(|p| p["period"].as_str().unwrap()).collect();
    assert_eq!(periods, ["all", "before", "during", "after"]);
    for kind in ["insert", "update", "read_id", "read_customer", "read_count"] {
        assert_eq!(json["periods"][0]["ops"][kind]["errors"], 0, "{kind}: {}", json["notes"]);
    }
    let samples = read_csv(&out.join("samples.csv"));
    let c = db.client().await;
    assert_eq!(table_counts(&c, 6000).await, (sum(&samples, "insert_done"), sum(&samples, "update_done")));
    let total: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(total, 6000 + sum(&samples, "insert_done"));
    // Daily partitions now, and the samples saw the leaves appear.
    let (kind, leaves): (String, i64) = {
        let r = c
            .query_one(
                "SELECT relkind::text, (SELECT count(*) FROM pg_partition_tree('orders') WHERE isleaf) FROM pg_class WHERE oid = 'orders'::regclass",
                &[],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(kind, "p");
    assert!(leaves >= 21, "20 days of history and the days ahead: {leaves}");
    assert_eq!(samples[0]["phase"], "before");
    assert_eq!(samples[0]["leaves"], "1");
    assert_eq!(samples.last().unwrap()["phase"], "after");
    assert_eq!(samples.last().unwrap()["leaves"], leaves.to_string());
    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    assert!(html.matches("class=\"marker\"").count() >= 7 * phases.len(), "each phase marked on every time chart");
    assert!(html.contains(">swap</text>"));
}

#[tokio::test]
async fn a_rate_it_cannot_reach_is_reported_with_the_reason() {
    let db = shared().fresh_db("cli_simulate_short").await;
    let url = db.url();
    create(&url, 2000, &[]);
    // One connection cannot run 50,000 reads a second.
    let (stdout, _) = run_expect(
        chute().args(["--url", &url, "simulate", "--duration", "2s", "--writes-per-s", "0", "--reads-per-s", "50000"]).args([
            "--connections",
            "1",
            "--out",
            open_tempdir().path().join("o").to_str().unwrap(),
            "--json",
        ]),
        0,
    );
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let by_id = &json["periods"][0]["ops"]["read_id"];
    let (asked, done) = (by_id["requested_per_s"].as_f64().unwrap(), by_id["achieved_per_s"].as_f64().unwrap());
    assert!(asked > 30_000.0 && done < 0.95 * asked, "asked {asked}, done {done}");
    let notes: Vec<&str> = json["notes"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    let note = notes.iter().find(|n| n.starts_with("read by id:")).unwrap_or_else(|| panic!("{notes:?}"));
    assert!(note.contains(&format!("{done:.1}/s done of {asked:.1}/s asked")), "{note}");
    assert!(note.contains("all 1 connections were busy (pool exhausted)") || note.contains("pacer ran late"), "{note}");
}

#[tokio::test]
async fn a_server_restart_is_survived_and_counted() {
    // An owned cluster: this test stops and starts its server.
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("cli_simulate_restart").await;
    let url = db.url();
    create(&url, 2000, &[]);
    let dir = open_tempdir();
    let out = dir.path().join("out");
    let child = spawn(
        chute()
            .args([
                "--url",
                &url,
                "simulate",
                "--duration",
                "7s",
                "--writes-per-s",
                "100",
                "--reads-per-s",
                "100",
                "--update-after",
                "300ms",
            ])
            .args(["--out", out.to_str().unwrap(), "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // The server goes once the workload runs: its inserts and updates reach the table.
    let watcher = db.client().await;
    wait_for("the simulation's first inserts and updates", Duration::from_secs(60), || async {
        let (inserted, updated) = table_counts(&watcher, 2000).await;
        inserted > 0 && updated > 0
    })
    .await;
    drop(watcher);
    cluster.cluster.stop(chute_engine::local::StopMode::Fast).unwrap();
    // The outage is the test's subject: long enough for operations to fail.
    tokio::time::sleep(Duration::from_millis(700)).await;
    cluster.cluster.start().unwrap();
    let output = exit_within(child, Duration::from_secs(120), "chute simulate");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}\n{}", String::from_utf8_lossy(&output.stderr));
    let json: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let errors: i64 = ["insert", "update", "read_id", "read_customer", "read_count"]
        .iter()
        .map(|k| json["periods"][0]["ops"][k]["errors"].as_i64().unwrap())
        .sum();
    assert!(errors > 0, "operations failed while the server was down: {json}");
    let notes = json["notes"].to_string();
    assert!(notes.contains("failed (first:"), "{notes}");
    // Work went on after the restart.
    let samples = read_csv(&out.join("samples.csv"));
    let late: i64 =
        samples.iter().filter(|r| r["t_s"].parse::<f64>().unwrap() > 5.0).map(|r| r["insert_done"].parse::<i64>().unwrap()).sum();
    assert!(late > 0, "inserts after the restart");
    // An insert whose answer was lost may have committed: the table holds at
    // least what was counted, and at most that plus the failed inserts.
    let c = db.client().await;
    let (rows, _) = table_counts(&c, 2000).await;
    let (done, failed) = (sum(&samples, "insert_done"), sum(&samples, "insert_errors"));
    assert!(rows >= done && rows <= done + failed, "{rows} rows, {done} counted, {failed} failed");
}

#[tokio::test]
async fn create_killed_half_way_is_finished_by_running_it_again_once() {
    let db = shared().fresh_db("cli_simulate_kill").await;
    let url = db.url();
    // Big enough that the load is still running when the kill comes.
    let args = ["--url", &url, "simulate", "--create", "--rows", "300000", "--history", "30d", "--columns", "2", "--duration", "0"];
    let mut child = spawn(chute().args(args).stdout(Stdio::null()).stderr(Stdio::null()));
    let c = db.client().await;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let rows: i64 = c.query_one("SELECT coalesce((SELECT count(*) FROM orders), 0)", &[]).await.map(|r| r.get(0)).unwrap_or(0);
        if rows > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "no rows within a minute");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill();
    let done: bool =
        c.query_one("SELECT obj_description('orders'::regclass, 'pg_class') LIKE '%\"complete\":true%'", &[]).await.unwrap().get(0);
    assert!(!done, "the kill came after the table was finished");
    // Other sizes would make another history: refused, with the command that finishes this one.
    let out = run(chute().args(["--url", &url, "simulate", "--create", "--rows", "1000", "--duration", "0"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("half made by an earlier --create with --rows 300000"), "{err}");

    // The same command twice at once: one finishes, the other waits and then refuses.
    let start = || spawn(chute().args(args).stdout(Stdio::piped()).stderr(Stdio::piped()));
    let (a, b) = (start(), start());
    let (a, b) =
        (exit_within(a, Duration::from_secs(300), "the first --create"), exit_within(b, Duration::from_secs(300), "the second --create"));
    let mut codes = [a.status.code(), b.status.code()];
    codes.sort();
    assert_eq!(codes, [Some(0), Some(2)], "{}\n{}", String::from_utf8_lossy(&a.stderr), String::from_utf8_lossy(&b.stderr));
    let loser = if a.status.code() == Some(2) { &a } else { &b };
    assert!(String::from_utf8_lossy(&loser.stderr).contains("exists with its history already"));
    let r = c.query_one("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM orders", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1), r.get::<_, i64>(2), r.get::<_, i64>(3)), (300_000, 300_000, 1, 300_000));
    let indexes: i64 = c.query_one("SELECT count(*) FROM pg_indexes WHERE tablename = 'orders'", &[]).await.unwrap().get(0);
    assert_eq!(indexes, 3, "primary key, created_at, (customer_id, created_at)");
    // New orders continue the ids.
    let next: i64 = c.query_one("INSERT INTO orders (status, customer_id) VALUES ('placed', 1) RETURNING id", &[]).await.unwrap().get(0);
    assert_eq!(next, 300_001);
}

#[tokio::test]
async fn what_it_cannot_run_is_refused_with_the_fix() {
    let db = shared().fresh_db("cli_simulate_refuse").await;
    let url = db.url();
    let refuse = |args: &[&str], want: &str| {
        let out = run(chute().args(["--url", &url, "simulate"]).args(args));
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(want), "{args:?}: wanted {want:?} in:\n{err}");
    };
    refuse(&["--duration", "1s"], "does not exist: make an orders table with chute simulate --create");
    refuse(&["--read-mix", "70,30"], "three shares");
    refuse(&["--floor", "2"], "--floor is a fraction");
    refuse(&["--writes-per-s", "0", "--reads-per-s", "0"], "nothing to simulate");
    refuse(&["--duration", "0"], "only makes sense with --create");
    refuse(&["--compare", "/nonexistent"], "no summary.csv there");
    refuse(&["--create", "--key", "placed_at", "--duration", "0"], "--create makes an orders table keyed by created_at");

    let c = db.client().await;
    c.batch_execute("CREATE TABLE notes (id bigint GENERATED ALWAYS AS IDENTITY, created_at timestamptz NOT NULL, body text)")
        .await
        .unwrap();
    refuse(&["--table", "notes", "--duration", "1s"], "has no column \"status\"");
    refuse(&["--table", "notes", "--create", "--duration", "0"], "exists and chute simulate --create did not make it");

    create(&url, 500, &[]);
    refuse(&["--create", "--rows", "500", "--history", "20d", "--columns", "2", "--duration", "0"], "exists with its history already");
    let role = format!("{}_reader", db.name);
    c.batch_execute(&format!("CREATE ROLE \"{role}\" LOGIN; GRANT SELECT ON orders TO \"{role}\"")).await.unwrap();
    let as_reader = format!("host={} port={} user={role} dbname={}", shared().socket_dir().display(), shared().port(), db.name);
    let out = run(chute().args(["--url", &as_reader, "simulate", "--duration", "1s"]));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("role {role} may not INSERT, UPDATE public.orders")) && err.contains("GRANT INSERT, UPDATE ON"), "{err}");
}

#[tokio::test]
async fn the_orders_generator_loads_the_same_rows_from_csv_and_in_process() {
    let db = shared().fresh_db("cli_gen_orders").await;
    let url = db.url();
    let c = db.client().await;
    for t in ["gen_orders", "csv_orders"] {
        let (sql, _) = run_expect(chute().args(["gen", "orders", &format!("--create={t}"), "--fields", "3"]), 0);
        c.batch_execute(&sql).await.unwrap();
    }
    run_expect(
        chute().args(["--url", &url, "load", "gen_orders", "--gen", "orders", "--rows", "500", "--fields", "3", "--scale", "40"]),
        0,
    );
    let dir = open_tempdir();
    let csv = dir.path().join("orders.csv");
    run_expect(chute().args(["gen", "orders", "--rows", "500", "--fields", "3", "--scale", "40", "--out", csv.to_str().unwrap()]), 0);
    run_expect(chute().args(["--url", &url, "load", "csv_orders", csv.to_str().unwrap()]), 0);
    let r = c
        .query_one(
            "SELECT (SELECT count(*) FROM gen_orders), (SELECT count(*) FROM (SELECT * FROM gen_orders EXCEPT SELECT * FROM csv_orders) d),
                    (SELECT count(DISTINCT customer_id) FROM gen_orders), (SELECT max(customer_id) FROM gen_orders),
                    (SELECT count(*) FROM gen_orders WHERE status NOT IN ('delivered', 'cancelled') OR length(note3) < 30 OR updated_at <= created_at)",
            &[],
        )
        .await
        .unwrap();
    let (rows, differ, customers, max_customer, odd): (i64, i64, i64, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
    assert_eq!((rows, differ, odd), (500, 0, 0), "the same 500 rows both ways, all of the documented shape");
    assert!(customers > 30 && max_customer <= 40, "{customers} customers up to {max_customer}");
}
