//! `chute doctor` and `chute status` against real servers: each condition is
//! made for real, reported with its fix, and gone after the fix is run as
//! printed; a healthy database gets no finding and exit 0.

use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::{ClusterSetup, TestCluster, shared};
use serde_json::Value;
use tokio_postgres::Client;

use crate::common::{chute, create_time_partitioned, run, run_expect, wait_for};

const COLS: &str = "time timestamptz not null, dev_id int, value float8";

/// `chute doctor ARGS --json`: the report and the exit code.
fn doctor(url: &str, args: &[&str]) -> (Value, i32) {
    let out = run(chute().args(["--url", url, "doctor", "--json", "--wal-sample", "0.2"]).args(args));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}):\n{stdout}\n--- stderr\n{}", String::from_utf8_lossy(&out.stderr)));
    (v, out.status.code().expect("exit code"))
}

fn findings(v: &Value) -> Vec<Value> {
    v["findings"].as_array().expect("findings").clone()
}

/// The finding of `kind` about `object`, which must exist.
fn finding(v: &Value, kind: &str, object: &str) -> Value {
    findings(v)
        .into_iter()
        .find(|f| f["kind"] == kind && f["object"] == object)
        .unwrap_or_else(|| panic!("no {kind} finding about {object} in:\n{}", serde_json::to_string_pretty(&v["findings"]).unwrap()))
}

fn has(v: &Value, kind: &str, object: &str) -> bool {
    findings(v).iter().any(|f| f["kind"] == kind && f["object"] == object)
}

/// Runs each fix of `f` exactly as printed: SQL through a session, `chute …`
/// through the binary (with the test's --url).
async fn apply(url: &str, c: &Client, f: &Value) {
    for fix in f["fix"].as_array().expect("fix") {
        let fix = fix.as_str().unwrap();
        if let Some(args) = fix.strip_prefix("chute ") {
            run_expect(chute().args(["--url", url]).args(args.split_whitespace()), 0);
        } else {
            c.batch_execute(fix).await.unwrap_or_else(|e| panic!("the printed fix {fix:?} failed: {e}"));
        }
    }
}

/// Makes this session's statistics visible to other sessions now.
async fn flush_stats(c: &Client) {
    c.batch_execute("SELECT pg_stat_force_next_flush()").await.unwrap();
}

/// Runs `before` (SQL, its statistics flushed), then `chute doctor ARGS
/// --json`, until `done` holds for the report; fails after a minute.
async fn doctor_until(url: &str, c: &Client, before: &str, args: &[&str], done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if !before.is_empty() {
            c.batch_execute(before).await.unwrap();
            flush_stats(c).await;
        }
        let (v, _) = doctor(url, args);
        if done(&v) {
            return v;
        }
        assert!(Instant::now() < deadline, "the doctor's report never got there:\n{v:#}");
        // Polling pace (each look runs the doctor); the deadline is above.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

#[tokio::test]
async fn a_healthy_database_gets_no_finding_and_exit_0() {
    // Its own cluster: the checkpoint counters are server-wide, and other
    // tests load gigabytes into the shared one.
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("doctor_healthy").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "m", COLS, "1h", &[]);
    c.batch_execute(
        "CREATE TABLE dev (id int PRIMARY KEY, serial text UNIQUE);
         CREATE TABLE reading (id bigserial PRIMARY KEY, dev_id int REFERENCES dev, at timestamptz);
         CREATE INDEX reading_dev ON reading (dev_id);
         INSERT INTO dev SELECT g, 's' || g FROM generate_series(1, 100) g;
         INSERT INTO reading (dev_id, at) SELECT 1 + g % 100, now() FROM generate_series(1, 1000) g;
         INSERT INTO m SELECT now(), g, g FROM generate_series(1, 1000) g;",
    )
    .await
    .unwrap();
    flush_stats(&c).await;

    let (v, code) = doctor(&url, &[]);
    // Server-wide advice (info) depends on the machine; anything else is a finding.
    let serious: Vec<Value> = findings(&v)
        .into_iter()
        .filter(|f| f["severity"] != "info" || !["setting", "round_trip"].contains(&f["kind"].as_str().unwrap()))
        .collect();
    assert!(serious.is_empty(), "a healthy database has findings:\n{}", serde_json::to_string_pretty(&serious).unwrap());
    assert_eq!(code, 0);
    assert_eq!(v["healthy"], true);
    assert_eq!(v["tables"][0]["table"], "public.m");
    let (text, _) = run_expect(chute().args(["--url", &url, "doctor", "--wal-sample", "0"]), 0);
    assert!(text.contains("no problems found"), "{text}");

    let (text, _) = run_expect(chute().args(["--url", &url, "status", "--wal-sample", "0"]), 0);
    for want in [
        "server       PostgreSQL 15",
        "max_wal_size=",
        "public.m",
        "4/4",
        "loads        none in progress",
        "health       no problems found",
    ] {
        assert!(text.contains(want), "no {want:?} in:\n{text}");
    }
}

#[tokio::test]
async fn unused_duplicate_and_prefix_indexes_are_found_and_their_fixes_work() {
    let db = shared().fresh_db("doctor_indexes").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "m", COLS, "1h", &[]);
    // Indexes a scan must use are scanned before their twin or prefix exists,
    // so dropping the twin or prefix leaves an index that is in use.
    c.batch_execute(
        "CREATE TABLE dev (id int PRIMARY KEY, serial text UNIQUE);
         CREATE TABLE t (id int PRIMARY KEY, dev int REFERENCES dev, k int, v int, ts timestamptz);
         CREATE INDEX t_dev ON t (dev);
         CREATE INDEX t_v ON t (v);
         CREATE INDEX t_k_ts ON t (k, ts);
         CREATE INDEX t_ts_a ON t (ts);
         CREATE INDEX m_value ON m (value);
         INSERT INTO dev SELECT g, 's' || g FROM generate_series(1, 10) g;
         INSERT INTO t SELECT g, 1 + g % 10, g % 7, g, now() - g * interval '1 s' FROM generate_series(1, 2000) g;
         INSERT INTO m SELECT now(), g, g FROM generate_series(1, 500) g;
         ANALYZE t;
         SET enable_seqscan = off; SET enable_bitmapscan = off;
         SELECT count(*) FROM t WHERE k = 3 AND ts < now();
         SELECT count(*) FROM t WHERE ts > now() - interval '10 s';
         RESET enable_seqscan; RESET enable_bitmapscan;
         CREATE INDEX t_k ON t (k);
         CREATE INDEX t_ts_b ON t (ts);",
    )
    .await
    .unwrap();
    flush_stats(&c).await;
    // Unused means no scan over a window (1 s here): the indexes the
    // duplicate and the prefix are dropped for are scanned between runs
    // (their twin and prefix dropped for the scans only, so that the
    // planner takes them; a scan counts though it is rolled back).
    let keep_using = "BEGIN; DROP INDEX IF EXISTS t_k, t_ts_b;
         SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off;
         SELECT count(*) FROM t WHERE k = 3 AND ts < now();
         SELECT count(*) FROM t WHERE ts > now() - interval '10 s';
         ROLLBACK;";
    let args = ["--index-window", "1s"];
    let v = doctor_until(&url, &c, keep_using, &args, |v| has(v, "unused_index", "public.t_v") && has(v, "unused_index", "public.m_value"))
        .await;
    assert_eq!(v["healthy"], false, "warnings make the report unhealthy (exit 1)");
    let unused = finding(&v, "unused_index", "public.t_v");
    assert_eq!(unused["fix"][0], "DROP INDEX CONCURRENTLY \"public\".\"t_v\";");
    let evidence = unused["evidence"].to_string();
    assert!(evidence.contains("pg_stat_user_indexes") && evidence.contains("idx_scan = 0") && evidence.contains("replica"), "{evidence}");
    assert!(evidence.contains("2000 rows written"), "the write cost from pg_stat_user_tables: {evidence}");
    let partitioned = finding(&v, "unused_index", "public.m_value");
    assert_eq!(partitioned["fix"][0], "DROP INDEX \"public\".\"m_value\";", "a partitioned index cannot be dropped concurrently");
    let dup = finding(&v, "duplicate_index", "public.t_ts_b");
    assert!(dup["summary"].as_str().unwrap().contains("t_ts_a"), "{dup}");
    let prefix = finding(&v, "prefix_index", "public.t_k");
    assert!(prefix["summary"].as_str().unwrap().contains("t_k_ts"), "{prefix}");
    // Never the primary keys, the unique index, the foreign key's index, or
    // the index a duplicate or prefix is dropped in favour of.
    for f in findings(&v) {
        for kept in ["t_pkey", "dev_pkey", "dev_serial_key", "t_dev", "t_k_ts", "t_ts_a"] {
            let quoted = format!("\"public\".\"{kept}\"");
            assert!(
                f["object"] != format!("public.{kept}")
                    && !f["fix"].as_array().unwrap().iter().any(|x| x.as_str().unwrap().contains(&quoted)),
                "proposes dropping {kept}: {f}"
            );
        }
    }

    for f in [&unused, &partitioned, &dup, &prefix] {
        apply(&url, &c, f).await;
    }
    c.batch_execute(keep_using).await.unwrap();
    flush_stats(&c).await;
    let (v, code) = doctor(&url, &args);
    for (kind, object) in [
        ("unused_index", "public.t_v"),
        ("unused_index", "public.m_value"),
        ("duplicate_index", "public.t_ts_b"),
        ("prefix_index", "public.t_k"),
    ] {
        assert!(!has(&v, kind, object), "{kind} {object} still reported after its fix:\n{v:#}");
    }
    let left: Vec<Value> = findings(&v).into_iter().filter(|f| f["kind"].as_str().unwrap().contains("index")).collect();
    assert!(left.is_empty(), "{left:#?}");
    // The shared cluster's checkpoint counters belong to every test using it.
    assert!(code == 0 || has(&v, "checkpoints_by_wal", "max_wal_size"), "{v:#}");
}

#[tokio::test]
async fn checkpoints_forced_by_a_tiny_max_wal_size_get_a_max_wal_size_that_fixes_them() {
    let cluster = TestCluster::start_with(&ClusterSetup {
        settings: &[("max_wal_size", "'32MB'"), ("min_wal_size", "'32MB'")],
        ..Default::default()
    });
    let db = cluster.fresh_db("doctor_wal").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE w (g int, pad text)").await.unwrap();
    for _ in 0..4 {
        c.batch_execute("INSERT INTO w SELECT g, repeat('x', 200) FROM generate_series(1, 150000) g").await.unwrap();
    }
    flush_stats(&c).await;
    let (requested, timed): (i64, i64) =
        c.query_one("SELECT checkpoints_req, checkpoints_timed FROM pg_stat_bgwriter", &[]).await.map(|r| (r.get(0), r.get(1))).unwrap();
    assert!(requested >= 2, "the load forced checkpoints ({requested} requested, {timed} timed)");

    let (v, code) = doctor(&url, &[]);
    assert_eq!(code, 1);
    let f = finding(&v, "checkpoints_by_wal", "max_wal_size");
    let evidence = f["evidence"].to_string();
    let reported: i64 =
        evidence.split("checkpoints_req = ").nth(1).and_then(|r| r.split(',').next()).and_then(|n| n.parse().ok()).unwrap_or(0);
    assert!(evidence.contains("pg_stat_bgwriter") && reported >= 2, "{evidence}");
    let set = f["fix"][0].as_str().unwrap();
    assert!(set.starts_with("ALTER SYSTEM SET max_wal_size = '") && set.ends_with("B';"), "{set}");
    assert_eq!(f["fix"][1], "SELECT pg_reload_conf();");

    apply(&url, &c, &f).await;
    // The postmaster reloads asynchronously; new sessions see the new value.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let fresh = db.client().await;
        let v: String = fresh.query_one("SHOW max_wal_size", &[]).await.unwrap().get(0);
        if v != "32MB" {
            break;
        }
        assert!(Instant::now() < deadline, "max_wal_size never changed");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let (v, _) = doctor(&url, &[]);
    assert!(!has(&v, "checkpoints_by_wal", "max_wal_size"), "still reported after {set}:\n{v:#}");
}

/// Leaves a `DETACH … CONCURRENTLY` of `partition` half done, as a cancelled
/// one does when a reader held a snapshot through its second phase.
async fn leave_detach_pending(db: &chute_testkit::TestDb, table: &str, partition: &str) {
    let c = db.client().await;
    let reader = db.client().await;
    reader.batch_execute(&format!("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM {table}")).await.unwrap();
    let detacher = db.client().await;
    let pid: i32 = detacher.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let sql = format!("ALTER TABLE {table} DETACH PARTITION \"{partition}\" CONCURRENTLY");
    let detach = tokio::spawn(async move { detacher.batch_execute(&sql).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pending: bool = c
            .query_one(
                &format!("SELECT coalesce(bool_or(inhdetachpending), false) FROM pg_inherits WHERE inhrelid = '\"{partition}\"'::regclass"),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if pending {
            break;
        }
        assert!(Instant::now() < deadline, "the detach never reached its second phase");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.execute("SELECT pg_cancel_backend($1)", &[&pid]).await.unwrap();
    assert!(detach.await.unwrap().is_err(), "the detach was cancelled");
    reader.batch_execute("COMMIT").await.unwrap();
}

async fn partition_names(url: &str, table: &str) -> Vec<String> {
    let (out, _) = run_expect(chute().args(["--url", url, "partition", "status", table, "--json"]), 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    v[0]["partitions"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap().trim_start_matches("public.").to_owned()).collect()
}

#[tokio::test]
async fn partition_findings_are_reported_and_their_fixes_work() {
    let db = shared().fresh_db("doctor_partitions").await;
    let url = db.url();
    let c = db.client().await;
    // Rows in DEFAULT: an hour with no partition (older than the first one).
    create_time_partitioned(&url, "dflt", COLS, "1h", &["--default"]);
    c.batch_execute("INSERT INTO dflt VALUES (date_trunc('hour', now()) - interval '150 min', 1, 1), (now(), 2, 2)").await.unwrap();
    // Coverage shorter than premake: the newest partition is gone.
    create_time_partitioned(&url, "short", COLS, "1h", &["--premake", "4"]);
    let newest = partition_names(&url, "short").await.pop().unwrap();
    c.batch_execute(&format!("DROP TABLE \"{newest}\"")).await.unwrap();
    // A detach left pending: retention's detach of an old partition, interrupted.
    let start = c
        .query_one(
            "SELECT to_char(date_trunc('hour', now() AT TIME ZONE 'UTC') - interval '6 hours', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"')",
            &[],
        )
        .await
        .unwrap()
        .get::<_, String>(0);
    create_time_partitioned(&url, "pend", COLS, "1h", &["--start", &start, "--retention", "3h", "--retention-mode", "detach"]);
    let oldest = partition_names(&url, "pend").await.remove(0);
    leave_detach_pending(&db, "pend", &oldest).await;
    // The same on a table chute does not manage: the fix is FINALIZE.
    c.batch_execute(
        "CREATE TABLE plain (id int NOT NULL) PARTITION BY RANGE (id);
         CREATE TABLE plain_a PARTITION OF plain FOR VALUES FROM (0) TO (10);
         CREATE TABLE plain_b PARTITION OF plain FOR VALUES FROM (10) TO (20);",
    )
    .await
    .unwrap();
    leave_detach_pending(&db, "plain", "plain_a").await;
    // Maintenance overdue: the policy was set two hours ago and never maintained.
    create_time_partitioned(&url, "late", COLS, "1h", &[]);
    c.batch_execute("UPDATE chute.partition_config SET updated_at = now() - interval '2 hours' WHERE parent_table = 'late'").await.unwrap();
    // A table named like a partition, attached to nothing (an interrupted create).
    create_time_partitioned(&url, "stray", COLS, "1h", &[]);
    c.batch_execute(
        "CREATE TABLE stray_p20200101_0000 (LIKE stray);
         CREATE TABLE stray_p20200102_0000 (LIKE stray); INSERT INTO stray_p20200102_0000 VALUES (now(), 7, 7);",
    )
    .await
    .unwrap();
    // A large time-keyed table that is not partitioned.
    c.batch_execute(
        "CREATE TABLE big (id bigserial PRIMARY KEY, time timestamptz NOT NULL, v float8);
         INSERT INTO big (time, v) SELECT now() - g * interval '1 min', g FROM generate_series(1, 30000) g;
         CREATE INDEX big_time ON big (time);
         CREATE TABLE nopk (time timestamptz NOT NULL, v float8);
         INSERT INTO nopk SELECT now() - g * interval '1 min', g FROM generate_series(1, 30000) g;",
    )
    .await
    .unwrap();

    let (v, code) = doctor(&url, &["--large-table-mb", "1"]);
    assert_eq!(code, 1);
    let dflt = finding(&v, "default_rows", "public.dflt");
    assert!(dflt["summary"].as_str().unwrap().starts_with("1 rows"), "{dflt}");
    let short = finding(&v, "coverage_short", "public.short");
    assert!(short["summary"].as_str().unwrap().contains("3 intervals ready ahead of now, fewer than its premake of 4"), "{short}");
    let pend = finding(&v, "detach_pending", "public.pend");
    assert!(pend["summary"].as_str().unwrap().contains(&oldest), "{pend}");
    let late = finding(&v, "maintenance_overdue", "public.late");
    let plain = finding(&v, "detach_pending", "public.plain");
    assert_eq!(plain["fix"][0], "ALTER TABLE \"public\".\"plain\" DETACH PARTITION \"public\".\"plain_a\" FINALIZE;");
    let stray = finding(&v, "stray_partition", "public.stray_p20200101_0000");
    assert_eq!(stray["fix"][0], "DROP TABLE \"public\".\"stray_p20200101_0000\";");
    let full = finding(&v, "stray_partition", "public.stray_p20200102_0000");
    assert_eq!(
        full["fix"][0],
        "BEGIN; INSERT INTO \"public\".\"stray\" SELECT * FROM \"public\".\"stray_p20200102_0000\"; DROP TABLE \"public\".\"stray_p20200102_0000\"; COMMIT;"
    );
    let big = finding(&v, "unpartitioned_table", "public.big");
    assert_eq!(big["fix"][0], "chute migrate public.big --key time --interval 1mon --extend-primary-key");
    // What migrate would refuse comes first, then the command.
    let nopk = finding(&v, "unpartitioned_table", "public.nopk");
    let steps = nopk["fix"].as_array().unwrap();
    assert!(steps[0].as_str().unwrap().starts_with("first, public.nopk has no primary key"), "{nopk}");
    assert_eq!(steps.last().unwrap(), "chute migrate public.nopk --key time --interval 1d");
    for f in [&dflt, &short, &pend, &late] {
        assert_eq!(f["fix"][0], format!("chute partition maintain {}", f["object"].as_str().unwrap()), "{f}");
    }
    // Nothing else is wrong with these tables.
    let tables = ["public.dflt", "public.short", "public.pend", "public.late", "public.stray"];
    let extra: Vec<Value> = findings(&v)
        .into_iter()
        .filter(|f| tables.contains(&f["object"].as_str().unwrap()) && ![&dflt, &short, &pend, &late].contains(&f))
        .collect();
    assert!(extra.is_empty(), "{extra:#?}");
    let (text, _) = run_expect(chute().args(["--url", &url, "status", "--wal-sample", "0"]), 1);
    assert!(text.contains("health       ") && text.contains("warning public.short: coverage_short"), "{text}");

    for f in [&dflt, &short, &pend, &plain, &late, &stray, &full, &big] {
        apply(&url, &c, f).await;
    }
    let (v, _) = doctor(&url, &["--large-table-mb", "1"]);
    for f in [&dflt, &short, &pend, &plain, &late, &stray, &full, &big] {
        assert!(!has(&v, f["kind"].as_str().unwrap(), f["object"].as_str().unwrap()), "still reported after its fix: {f}\n{v:#}");
    }
    let rows: i64 = c.query_one("SELECT count(*) FROM dflt", &[]).await.unwrap().get(0);
    assert_eq!(rows, 2, "maintain moved the DEFAULT rows, it did not lose them");
    let rows: i64 = c.query_one("SELECT count(*) FROM stray WHERE dev_id = 7", &[]).await.unwrap().get(0);
    assert_eq!(rows, 1, "the stray table's row moved into the table");
    let rows: i64 = c.query_one("SELECT count(*) FROM big", &[]).await.unwrap().get(0);
    assert_eq!(rows, 30000, "chute migrate kept every row of big");
    let serious: Vec<Value> = findings(&v)
        .into_iter()
        .filter(|f| f["severity"] != "info" && f["object"] != "public.nopk" && f["kind"] != "checkpoints_by_wal")
        .collect();
    assert!(serious.is_empty(), "{serious:#?}");
}

#[tokio::test]
async fn an_unsorted_sample_is_measured_and_its_sort_command_fixes_it() {
    let db = shared().fresh_db("doctor_sample").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "s", COLS, "1h", &[]);
    c.batch_execute("CREATE INDEX s_time ON s (time)").await.unwrap();
    // 24 hours of rows, shuffled deterministically.
    let dir = crate::common::open_tempdir();
    let file = dir.path().join("sample.csv");
    let n = 20_000u64;
    let mut text = String::from("time,dev_id,value\n");
    let t0 = jiff::Timestamp::from_second(1_794_999_600).unwrap();
    for i in 0..n {
        let j = (i * 7919) % n;
        let t = t0 + jiff::SignedDuration::from_millis((j * 86_400_000 / n) as i64);
        text.push_str(&format!("{},{},{}\n", t.strftime("%Y-%m-%d %H:%M:%S%.3f+00"), j % 100, j));
    }
    std::fs::write(&file, text).unwrap();
    let path = file.to_str().unwrap();

    let (v, _) = doctor(&url, &["s", "--sample", path, "--header"]);
    let f = finding(&v, "unsorted_input", path);
    let evidence = f["evidence"].to_string();
    assert!(evidence.contains("20000 rows") && evidence.contains("switches between 24 partitions"), "{evidence}");
    assert!(evidence.contains("trial load") && evidence.contains("x\""), "a ratio: {evidence}");
    let left: i64 = c.query_one("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'chute_doctor_%'", &[]).await.unwrap().get(0);
    assert_eq!(left, 0, "the scratch schema is removed");

    let sort = f["fix"][0].as_str().unwrap();
    let out = std::process::Command::new("sh").args(["-c", sort]).output().unwrap();
    assert!(out.status.success(), "{sort}: {out:?}");
    let sorted = format!("{path}.sorted");
    let (v, _) = doctor(&url, &["s", "--sample", &sorted, "--header"]);
    assert!(!has(&v, "unsorted_input", &sorted), "{v:#}");
    let lines = std::fs::read_to_string(&sorted).unwrap();
    assert!(lines.starts_with("time,dev_id,value\n") && lines.lines().count() == n as usize + 1);

    let out = run(chute().args(["--url", &url, "doctor", "--sample", path]));
    assert_eq!(out.status.code(), Some(2), "--sample needs its table");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--sample needs exactly one TABLE"));
}

#[tokio::test]
async fn status_shows_a_load_in_progress_from_the_journal() {
    use std::io::Write;
    // Its own cluster, so the exit status depends on this database alone.
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("doctor_status_load").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "live", COLS, "1h", &[]);
    let mut child = spawn(
        chute()
            .args(["--url", &url, "load", "live", "-", "--load-id", "stream-1"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    let now = jiff::Timestamp::now();
    for i in 0..10 {
        writeln!(stdin, "{},{i},{i}", now.strftime("%Y-%m-%d %H:%M:%S+00")).unwrap();
    }
    stdin.flush().unwrap();
    wait_for("the rows to arrive", Duration::from_secs(15), || async {
        c.query_one("SELECT count(*) FROM live", &[]).await.unwrap().get::<_, i64>(0) >= 10
    })
    .await;
    let (text, _) = run_expect(chute().args(["--url", &url, "status", "--wal-sample", "0"]), 0);
    let line = text.lines().find(|l| l.starts_with("stream-1 ")).unwrap_or_else(|| panic!("no load line in:\n{text}"));
    assert!(line.contains("public.live") && line.split_whitespace().nth(2) == Some("10"), "{line}");
    let out = run(chute().args(["--url", &url, "status", "--json", "--wal-sample", "0"]));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["loads_in_progress"][0]["load_id"], "stream-1");
    assert_eq!(v["loads_in_progress"][0]["rows_committed"], 10);
    drop(stdin);
    let out = exit_within(child, Duration::from_secs(60), "the load once its stdin closed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (text, _) = run_expect(chute().args(["--url", &url, "status", "--wal-sample", "0"]), 0);
    assert!(text.contains("loads        none in progress"), "a finished load is not in progress:\n{text}");
}

#[tokio::test]
async fn settings_findings_are_fixed_by_their_printed_statements() {
    let cluster = TestCluster::start_with(&ClusterSetup {
        settings: &[
            ("full_page_writes", "on"),
            ("wal_compression", "off"),
            ("synchronous_commit", "on"),
            ("autovacuum_vacuum_insert_threshold", "-1"),
            ("maintenance_work_mem", "'64MB'"),
            ("max_locks_per_transaction", "10"),
        ],
        ..Default::default()
    });
    let db = cluster.fresh_db("doctor_settings").await;
    let url = db.url();
    let start = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(20);
    create_time_partitioned(&url, "lk", COLS, "1h", &["--start", &start.strftime("%Y-%m-%dT%H:00:00Z").to_string()]);

    let (v, code) = doctor(&url, &[]);
    assert_eq!(code, 1, "inserts that never trigger autovacuum are a warning");
    let settings: Vec<Value> = findings(&v).into_iter().filter(|f| f["kind"] == "setting").collect();
    let objects: Vec<&str> = settings.iter().map(|f| f["object"].as_str().unwrap()).collect();
    for want in [
        "wal_compression",
        "synchronous_commit",
        "maintenance_work_mem",
        "shared_buffers",
        "autovacuum_vacuum_insert_threshold",
        "max_locks_per_transaction",
    ] {
        assert!(objects.contains(&want), "no {want} finding in {objects:?}");
    }
    let locks = settings.iter().find(|f| f["object"] == "max_locks_per_transaction").unwrap();
    assert!(locks["summary"].as_str().unwrap().contains("public.lk locks"), "{locks}");

    let c = db.client().await;
    let mut restart = false;
    for f in &settings {
        apply(&url, &c, f).await;
        restart |= f["fix"].to_string().contains("restart the server");
    }
    assert!(restart, "shared_buffers and max_locks_per_transaction need a restart");
    drop(c);
    cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
    let (v, code) = doctor(&url, &[]);
    let left: Vec<Value> = findings(&v).into_iter().filter(|f| f["kind"] == "setting").collect();
    assert!(left.is_empty(), "{left:#?}");
    assert_eq!(code, 0, "{v:#}");
}

#[tokio::test]
async fn a_partition_far_larger_than_the_ones_before_it_gets_a_shorter_interval() {
    let db = shared().fresh_db("doctor_oversized").await;
    let url = db.url();
    let c = db.client().await;
    let start = (jiff::Timestamp::now() - jiff::SignedDuration::from_hours(4 * 24)).strftime("%Y-%m-%dT00:00:00Z").to_string();
    create_time_partitioned(&url, "ov", COLS, "1d", &["--start", &start]);
    // Three days of 30,000 rows, then a day of 400,000.
    c.batch_execute(
        "INSERT INTO ov SELECT date_trunc('day', now()) - d * interval '1 day' + g * interval '1 s', g, g
           FROM generate_series(2, 4) d, generate_series(1, 30000) g;
         INSERT INTO ov SELECT date_trunc('day', now()) - interval '1 day' + g * interval '0.2 s', g, g
           FROM generate_series(1, 400000) g;",
    )
    .await
    .unwrap();
    let (v, code) = doctor(&url, &["ov", "--large-table-mb", "1"]);
    assert_eq!(code, 1);
    let yesterday: String = c
        .query_one("SELECT 'public.ov_p' || to_char(date_trunc('day', now() AT TIME ZONE 'UTC') - interval '1 day', 'YYYYMMDD')", &[])
        .await
        .unwrap()
        .get(0);
    let f = finding(&v, "oversized_partition", &yesterday);
    assert_eq!(f["fix"][0], "chute partition create public.ov --key time --interval 1h");
    assert_eq!(findings(&v).iter().filter(|f| f["kind"] == "oversized_partition").count(), 1, "{v:#}");

    apply(&url, &c, &f).await;
    let (v, _) = doctor(&url, &["ov", "--large-table-mb", "1"]);
    assert!(!has(&v, "oversized_partition", &yesterday), "{v:#}");
    let left: Vec<Value> = findings(&v)
        .into_iter()
        .filter(|f| f["severity"] != "info" && f["object"] != "public.nopk" && f["kind"] != "checkpoints_by_wal")
        .collect();
    assert!(left.is_empty(), "{left:#?}");
}

/// Issue 27 item 7: on a fresh database every index is new, and one the
/// application will need has no scan yet: no index is called unused until
/// chute has watched it go a whole window (`--index-window`) without a
/// scan, and the report says there is not enough history yet.
#[tokio::test]
async fn an_index_is_called_unused_only_after_a_whole_window_without_a_scan() {
    let db = shared().fresh_db("doctor_window").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE app (id int PRIMARY KEY, account int, at timestamptz);
         CREATE INDEX app_account ON app (account);
         CREATE INDEX app_at ON app (at);
         INSERT INTO app SELECT g, g % 50, now() - g * interval '1 min' FROM generate_series(1, 2000) g;
         ANALYZE app;",
    )
    .await
    .unwrap();
    flush_stats(&c).await;
    let started = Instant::now();
    let (v, _) = doctor(&url, &[]);
    for index in ["public.app_account", "public.app_at"] {
        assert!(!has(&v, "unused_index", index), "{index} is called unused minutes after it was made:\n{v:#}");
    }
    assert_eq!(v["index_history"]["window"], "7d");
    assert!(v["index_history"]["waiting"].as_u64().unwrap() >= 2, "{:#}", v["index_history"]);
    assert!(v["index_history"]["not_recorded"].is_null(), "{:#}", v["index_history"]);
    // Only this database's tables: server-wide findings depend on the other
    // tests sharing the server (checkpoints forced by their loads), so the
    // exit status says nothing about indexes here.
    let out = crate::common::run(chute().args(["--url", &url, "doctor", "app", "--wal-sample", "0"]));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("index advice: not enough history yet for 2 index(es)"), "{text}");
    assert!(!text.contains("unused_index"), "{text}");

    // A window of 2 s: app_at is scanned between runs, app_account never.
    let scan_at = "SET enable_seqscan = off; SET enable_bitmapscan = off;
         SELECT count(*) FROM app WHERE at > now() - interval '1 hour'; RESET enable_seqscan; RESET enable_bitmapscan;";
    let v = doctor_until(&url, &c, scan_at, &["--index-window", "2s"], |v| has(v, "unused_index", "public.app_account")).await;
    assert!(started.elapsed() >= Duration::from_secs(2), "called unused before the window had passed");
    assert!(!has(&v, "unused_index", "public.app_at"), "an index scanned within the window is not unused:\n{v:#}");
    let f = finding(&v, "unused_index", "public.app_account");
    assert!(
        f["summary"].as_str().unwrap().contains("has not been scanned since") && f["summary"].as_str().unwrap().contains("(2s or more)"),
        "{f}"
    );
    assert_eq!(f["fix"][0], "DROP INDEX CONCURRENTLY \"public\".\"app_account\";");
    let watched: i64 =
        c.query_one("SELECT count(*) FROM chute.index_watch WHERE indexrelid = 'app_account'::regclass", &[]).await.unwrap().get(0);
    assert_eq!(watched, 1, "chute keeps its record of the index");
    let (_, err) = run_expect(chute().args(["--url", &url, "doctor", "--index-window", "soon"]), 2);
    assert!(err.contains("--index-window \"soon\""), "{err}");
}

/// Issue 27 item 7: rows in the DEFAULT partition of a table pg_partman
/// keeps (made by its `create_parent`) are reported, for the table named and
/// in the whole report, with pg_partman's own fix, which works as printed.
#[tokio::test]
async fn rows_in_the_default_of_a_pg_partman_table_are_found_and_partition_data_proc_moves_them() {
    let db = shared().fresh_db("doctor_partman").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE SCHEMA partman; CREATE EXTENSION pg_partman SCHEMA partman;
         CREATE TABLE public.readings (time timestamptz NOT NULL, dev int, v float8) PARTITION BY RANGE (time);
         SELECT partman.create_parent('public.readings', 'time', 'native', 'daily');
         INSERT INTO readings VALUES (now() - interval '40 days', 1, 1), (now(), 2, 2);",
    )
    .await
    .unwrap();
    let in_default: i64 = c.query_one("SELECT count(*) FROM readings_default", &[]).await.unwrap().get(0);
    assert_eq!(in_default, 1, "the old row is in pg_partman's DEFAULT");
    let (text, _) = run_expect(chute().args(["--url", &url, "doctor", "readings", "--wal-sample", "0"]), 1);
    assert!(!text.contains("no problems found") && text.contains("public.readings [default_rows]"), "{text}");
    for args in [&["readings"][..], &[]] {
        let (v, code) = doctor(&url, args);
        assert_eq!(code, 1);
        let f = finding(&v, "default_rows", "public.readings");
        assert!(
            f["summary"].as_str().unwrap().starts_with("1 rows of public.readings sit in its DEFAULT partition public.readings_default"),
            "{f}"
        );
        assert_eq!(f["fix"], serde_json::json!(["CALL \"partman\".partition_data_proc('public.readings');"]));
    }
    let (v, _) = doctor(&url, &["readings"]);
    apply(&url, &c, &finding(&v, "default_rows", "public.readings")).await;
    let (v, _) = doctor(&url, &["readings"]);
    assert!(!has(&v, "default_rows", "public.readings"), "still reported after its fix:\n{v:#}");
    let (total, in_default): (i64, i64) = c
        .query_one("SELECT (SELECT count(*) FROM readings), (SELECT count(*) FROM readings_default)", &[])
        .await
        .map(|r| (r.get(0), r.get(1)))
        .unwrap();
    assert_eq!((total, in_default), (2, 0), "the row moved into a partition of its own, none lost");
}

/// Issue 27 item 7: the same for partitioned tables made by hand (range by
/// time and by integer, list, and a partition that is itself partitioned):
/// the fix makes the partitions the rows need, in the interval the table's
/// partitions have, and moves the rows into them.
#[tokio::test]
async fn rows_in_the_default_of_hand_made_tables_move_into_new_partitions() {
    let db = shared().fresh_db("doctor_hand_default").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE hm (time timestamptz NOT NULL, v int) PARTITION BY RANGE (time);
         CREATE TABLE hm_a PARTITION OF hm FOR VALUES FROM ('2026-01-01 00:00+00') TO ('2026-01-02 00:00+00');
         CREATE TABLE hm_b PARTITION OF hm FOR VALUES FROM ('2026-01-02 00:00+00') TO ('2026-01-03 00:00+00');
         CREATE TABLE hm_d PARTITION OF hm DEFAULT;
         INSERT INTO hm VALUES ('2025-06-15 12:00+00', 1), ('2026-01-02 05:00+00', 2), ('2030-01-01 23:59+00', 3), ('2030-01-01 00:00+00', 4);
         CREATE TABLE ids (id int8 NOT NULL, v int) PARTITION BY RANGE (id);
         CREATE TABLE ids_0 PARTITION OF ids FOR VALUES FROM (0) TO (1000);
         CREATE TABLE ids_1 PARTITION OF ids FOR VALUES FROM (1000) TO (2000);
         CREATE TABLE ids_d PARTITION OF ids DEFAULT;
         INSERT INTO ids VALUES (5, 1), (-7, 2), (12345, 3);
         CREATE TABLE sites (site text, v int) PARTITION BY LIST (site);
         CREATE TABLE sites_a PARTITION OF sites FOR VALUES IN ('a');
         CREATE TABLE sites_d PARTITION OF sites DEFAULT;
         INSERT INTO sites VALUES ('a', 1), ('b''s', 2), (NULL, 3);
         CREATE TABLE nested (time timestamptz NOT NULL, dev int NOT NULL) PARTITION BY RANGE (time);
         CREATE TABLE nested_2026 PARTITION OF nested FOR VALUES FROM ('2026-01-01 00:00+00') TO ('2027-01-01 00:00+00') PARTITION BY RANGE (dev);
         CREATE TABLE nested_2026_low PARTITION OF nested_2026 FOR VALUES FROM (0) TO (100);
         CREATE TABLE nested_2026_d PARTITION OF nested_2026 DEFAULT;
         INSERT INTO nested VALUES ('2026-03-01 00:00+00', 5), ('2026-03-01 00:00+00', 250);",
    )
    .await
    .unwrap();
    let (v, code) = doctor(&url, &[]);
    assert_eq!(code, 1);
    let hm = finding(&v, "default_rows", "public.hm");
    assert!(hm["summary"].as_str().unwrap().starts_with("3 rows of public.hm sit in its DEFAULT partition public.hm_d"), "{hm}");
    assert_eq!(hm["fix"].as_array().unwrap().len(), 2, "one new day for 2025-06-15, one for 2030-01-01: {hm}");
    assert!(hm["evidence"].to_string().contains("new partitions of 1d in UTC"), "{hm}");
    let ids = finding(&v, "default_rows", "public.ids");
    let sites = finding(&v, "default_rows", "public.sites");
    // A partition that is itself partitioned, named by itself or by its root.
    let nested = finding(&v, "default_rows", "public.nested_2026");
    let (named, _) = doctor(&url, &["nested"]);
    assert!(has(&named, "default_rows", "public.nested_2026") && !has(&named, "default_rows", "public.hm"), "{named:#}");
    for f in [&hm, &ids, &sites, &nested] {
        apply(&url, &c, f).await;
    }
    let (v, _) = doctor(&url, &[]);
    for f in [&hm, &ids, &sites, &nested] {
        assert!(!has(&v, "default_rows", f["object"].as_str().unwrap()), "still reported after its fix: {f}\n{v:#}");
    }
    let placed: Vec<String> =
        c.query("SELECT tableoid::regclass::text || ' ' || v FROM hm ORDER BY v", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(placed, ["hm_p20250615 1", "hm_b 2", "hm_p20300101 3", "hm_p20300101 4"]);
    let placed: Vec<String> =
        c.query("SELECT tableoid::regclass::text || ' ' || v FROM ids ORDER BY v", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(placed, ["ids_0 1", "ids_pm1000 2", "ids_p12000 3"]);
    let counts: (i64, i64, i64) = c
        .query_one("SELECT (SELECT count(*) FROM sites), (SELECT count(*) FROM sites_d), (SELECT count(*) FROM nested)", &[])
        .await
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .unwrap();
    assert_eq!(counts, (3, 0, 2), "no row lost, none left in DEFAULT");
}

#[tokio::test]
async fn a_policy_whose_table_was_dropped_is_skipped_by_maintain_found_by_doctor_and_forgotten() {
    let db = shared().fresh_db("doctor_orphan").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "gone", COLS, "1h", &[]);
    create_time_partitioned(&url, "kept", COLS, "1h", &[]);
    create_time_partitioned(&url, "gone_too", COLS, "1h", &[]);
    c.batch_execute("DROP TABLE gone; DROP TABLE gone_too").await.unwrap();
    let maintain = |args: &[&str], code: i32| run_expect(chute().args(["--url", &url, "partition", "maintain"]).args(args), code);
    // Every table: the others are maintained, the orphan is skipped with what to do.
    let (_, err) = maintain(&[], 0);
    assert!(err.contains("skipped public.gone") && err.contains("chute partition forget public.gone"), "{err}");
    assert!(err.contains("maintained public.kept"), "{err}");
    let (out, _) = maintain(&["--json"], 0);
    let skipped: Value = out.lines().find(|l| l.contains("\"public.gone\"")).map(|l| serde_json::from_str(l).unwrap()).expect(&out);
    assert_eq!(skipped["fix"], "chute partition forget public.gone", "{out}");
    // Named, it is an error that says the same.
    let (_, err) = maintain(&["gone"], 2);
    assert!(err.contains("chute partition forget gone"), "{err}");

    let (v, code) = doctor(&url, &[]);
    assert_eq!(code, 1, "{v}");
    let f = finding(&v, "policy_orphaned", "public.gone");
    assert_eq!(f["severity"], "warning");
    assert_eq!(f["fix"][0], "chute partition forget public.gone", "{f}");
    // --dry-run prints the plan and changes nothing; a table that exists is refused.
    let (plan, _) = run_expect(chute().args(["--url", &url, "partition", "forget", "gone", "--dry-run"]), 0);
    assert!(plan.contains("DELETE FROM chute.partition_config WHERE parent_schema = 'public' AND parent_table = 'gone'"), "{plan}");
    assert!(has(&doctor(&url, &[]).0, "policy_orphaned", "public.gone"));
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "forget", "kept"]), 2);
    assert!(err.contains("chute partition undo public.kept"), "{err}");

    apply(&url, &c, &f).await;
    // A name without its schema: the message names the policy it found.
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "forget", "gone_too"]), 0);
    assert!(err.contains("forgot the partition policy of public.gone_too;"), "{err}");
    let (v, _) = doctor(&url, &[]);
    assert!(!findings(&v).iter().any(|f| f["kind"] == "policy_orphaned"), "{v}");
    let (_, err) = maintain(&[], 0);
    assert!(!err.contains("gone"), "{err}");
    let kept: i64 = c.query_one("SELECT count(*) FROM chute.partition_config WHERE parent_table = 'kept'", &[]).await.unwrap().get(0);
    assert_eq!(kept, 1, "only the orphan's policy is forgotten");
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "forget", "gone"]), 2);
    assert!(err.contains("no chute policy for gone"), "{err}");
}
