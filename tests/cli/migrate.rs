//! `chute migrate` against a real server, with a writer inserting and
//! updating by primary key during the whole migration and split.
//!
//! The tables have 200 k rows (the issue's 2 M figure belongs in
//! docs/benchmarks.md): the test suite runs on 2 shared cores and must stay well
//! under 30 minutes; 200 k rows still make the split take tens of batches
//! while the writer runs, which is what the checks need.

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chute_testkit::process::spawn;
use chute_testkit::shared;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::common::{chute, run_expect, wait_for};

/// Everything in the catalog a migration could touch, hashed.
const CATALOG_HASH: &str = "
SELECT md5(string_agg(x, ',' ORDER BY x)) FROM (
    SELECT c.oid::regclass::text || ':' || c.relkind::text || ':' || c.relispartition::text FROM pg_class c
        JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
    UNION ALL SELECT conname::text || ':' || conrelid::regclass::text || ':' || convalidated::text FROM pg_constraint WHERE conrelid <> 0 AND conrelid >= 16384
    UNION ALL SELECT nspname::text FROM pg_namespace
    UNION ALL SELECT tgname::text || ':' || tgrelid::regclass::text FROM pg_trigger
    UNION ALL SELECT inhrelid::regclass::text || '<' || inhparent::regclass::text FROM pg_inherits
    UNION ALL SELECT indexrelid::regclass::text || ':' || indisvalid::text FROM pg_index WHERE indrelid >= 16384
) t(x)";

async fn make_orders(c: &Client, rows: i64) {
    c.batch_execute(&format!(
        "CREATE TABLE orders (id bigserial PRIMARY KEY, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, note text);
         CREATE INDEX ON orders (time);
         INSERT INTO orders (time, status, note)
           SELECT now() - i * interval '1 microsecond' * (864000000000 / {rows}), 0, 'n' || i FROM generate_series(1, {rows}) i;
         GRANT SELECT ON orders TO PUBLIC;
         COMMENT ON TABLE orders IS 'the orders';
         ANALYZE orders"
    ))
    .await
    .unwrap();
}

#[tokio::test]
async fn refuses_a_primary_key_without_the_key_then_extends_it_and_dry_run_changes_nothing() {
    let db = shared().fresh_db("cli_migrate_pk").await;
    let url = db.url();
    let c = db.client().await;
    make_orders(&c, 5_000).await;
    c.batch_execute("CREATE VIEW busy AS SELECT id, status FROM orders WHERE status > 0").await.unwrap();
    c.batch_execute("CREATE TABLE plain_null (time timestamptz, v int)").await.unwrap();

    let (_, err) = run_expect(chute().args(["--url", &url, "migrate", "plain_null", "--key", "time", "--interval", "1d"]), 2);
    assert!(err.contains("may be NULL") && err.contains("CHECK (\"time\" IS NOT NULL) NOT VALID") && err.contains("SET NOT NULL"), "{err}");

    let (_, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 2);
    assert!(err.contains("the primary key (id) does not include the partition key \"time\""), "{err}");
    assert!(err.contains("run again with --extend-primary-key") && err.contains("unique index on (id, time) CONCURRENTLY"), "{err}");

    let before: String = c.query_one(CATALOG_HASH, &[]).await.unwrap().get(0);
    let (plan, _) = run_expect(
        chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key", "--dry-run"]),
        0,
    );
    assert!(plan.contains("CREATE UNIQUE INDEX CONCURRENTLY \"orders_chute_pk\""), "{plan}");
    assert!(plan.contains("ATTACH PARTITION \"public\".\"orders_chute_old\" FOR VALUES FROM (MINVALUE)"), "{plan}");
    let after: String = c.query_one(CATALOG_HASH, &[]).await.unwrap().get(0);
    assert_eq!(before, after, "--dry-run changed the catalog");

    let (out, err) = run_expect(
        chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key", "--premake", "3"]),
        0,
    );
    assert!(err.contains("move its old rows with: chute migrate public.orders --split"), "{out}{err}");
    let row = c
        .query_one(
            "SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'orders'::regclass),
                    (SELECT count(*) FROM pg_inherits WHERE inhparent = 'orders'::regclass),
                    (SELECT count(*) FROM orders),
                    (SELECT array_agg(a.attname::text ORDER BY k.n) FROM pg_index i, unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                       JOIN pg_attribute a ON a.attnum = k.attnum WHERE i.indrelid = 'orders'::regclass AND i.indisprimary AND a.attrelid = i.indrelid),
                    obj_description('orders'::regclass, 'pg_class'),
                    has_table_privilege('public', 'orders', 'SELECT'),
                    (SELECT count(*) FROM chute.partition_config WHERE parent_table = 'orders'),
                    pg_get_serial_sequence('orders', 'id')",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "p");
    assert_eq!(row.get::<_, i64>(1), 4, "the old table plus 3 premade partitions");
    assert_eq!(row.get::<_, i64>(2), 5_000);
    assert_eq!(row.get::<_, Vec<String>>(3), ["id", "time"]);
    assert_eq!(row.get::<_, Option<String>>(4).as_deref(), Some("the orders"));
    assert!(row.get::<_, bool>(5));
    assert_eq!(row.get::<_, i64>(6), 1);
    assert_eq!(row.get::<_, Option<String>>(7).as_deref(), Some("public.orders_id_seq"), "the serial sequence moved with the table");
    let view_on_parent: bool = c
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
                            WHERE r.ev_class = 'busy'::regclass AND d.refobjid = 'orders'::regclass)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert!(view_on_parent, "the dependent view reads the new parent");
    // The new parent's indexes carry the names the table's had, so what names
    // an index or constraint keeps working; the old table's are renamed away.
    let names = |table: &'static str| {
        let c = &c;
        async move {
            let rows = c
                .query("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = $1::text::regclass ORDER BY 1", &[&table])
                .await
                .unwrap();
            rows.iter().map(|r| r.get::<_, String>(0)).collect::<Vec<String>>()
        }
    };
    assert_eq!(names("orders").await, ["orders_pkey", "orders_time_idx"]);
    assert_eq!(names("orders_chute_old").await, ["orders_chute_pk", "orders_pkey_co", "orders_time_idx_co"]);
    let pk: String = c
        .query_one("SELECT conname::text FROM pg_constraint WHERE conrelid = 'orders'::regclass AND contype = 'p'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(pk, "orders_pkey");
    let before: String = c.query_one(CATALOG_HASH, &[]).await.unwrap().get(0);
    let (plan, _) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--split", "--dry-run"]), 0);
    assert!(plan.contains("CREATE TRIGGER chute_sync AFTER INSERT OR UPDATE OR DELETE ON \"public\".\"orders_chute_old\""), "{plan}");
    assert!(
        plan.contains("FOR SHARE), copied AS (INSERT INTO")
            && plan.contains("ON CONFLICT DO NOTHING")
            && plan.contains("DETACH PARTITION \"public\".\"orders_chute_old\""),
        "{plan}"
    );
    let after: String = c.query_one(CATALOG_HASH, &[]).await.unwrap().get(0);
    assert_eq!(before, after, "--split --dry-run changed the catalog");
    // The same command again only stores the policy again.
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key"]), 0);
    let (status, _) = run_expect(chute().args(["--url", &url, "migrate", "--status", "orders", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["phase"], "swapped", "{status}");
}

/// What the writer did: the last value it wrote per id, and its latencies.
#[derive(Default)]
struct WriterLog {
    last: HashMap<i64, i32>,
    inserted: Vec<i64>,
    latencies: Vec<Duration>,
    retried: u64,
    /// When the longest operation started, and what it was.
    worst: Option<(Instant, Duration, &'static str)>,
}

/// The application's writer running beside a migration ([`writer`]).
struct Writing {
    stop: Arc<AtomicBool>,
    /// Operations done so far (each an insert or an update that succeeded).
    ops: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<WriterLog>,
}

impl Writing {
    fn start(c: Client, old_rows: i64) -> Writing {
        let (stop, ops) = (Arc::new(AtomicBool::new(false)), Arc::new(AtomicU64::new(0)));
        let task = tokio::spawn(writer(c, old_rows, stop.clone(), ops.clone()));
        Writing { stop, ops, task }
    }

    /// Waits until the writer has done `n` more operations (what it writes
    /// from now on is checked too).
    async fn more(&self, n: u64, what: &str) {
        let until = self.ops.load(Ordering::Relaxed) + n;
        wait_for(&format!("{n} writes {what}"), Duration::from_secs(120), || async { self.ops.load(Ordering::Relaxed) >= until }).await;
    }

    async fn stop(self) -> WriterLog {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap()
    }
}

/// Inserts new orders and updates random existing ones (old and new) by
/// primary key until `stop`, retrying lock timeouts and deadlocks only;
/// counts what it has done in `ops`.
async fn writer(c: Client, old_rows: i64, stop: Arc<AtomicBool>, ops: Arc<AtomicU64>) -> WriterLog {
    let mut log = WriterLog::default();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut counter = 0i32;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let r = next();
        let began = Instant::now();
        loop {
            let result = if r % 3 == 0 {
                c.query_one("INSERT INTO orders (time, status) VALUES (now(), $1) RETURNING id", &[&counter]).await.map(|row| {
                    let id: i64 = row.get(0);
                    log.inserted.push(id);
                    log.last.insert(id, counter);
                })
            } else {
                let id = if r % 3 == 1 || log.inserted.is_empty() {
                    1 + (next() % old_rows as u64) as i64
                } else {
                    log.inserted[(next() % log.inserted.len() as u64) as usize]
                };
                c.execute("UPDATE orders SET status = $2 WHERE id = $1", &[&id, &counter]).await.map(|n| {
                    assert_eq!(n, 1, "the update of id {id} found no row");
                    log.last.insert(id, counter);
                })
            };
            match result {
                Ok(()) => break,
                Err(e) if matches!(e.code(), Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE || *c == SqlState::T_R_DEADLOCK_DETECTED) => {
                    log.retried += 1;
                }
                Err(e) => panic!("the writer got an error: {e:?}"),
            }
        }
        let took = began.elapsed();
        if log.worst.is_none_or(|w| w.1 < took) {
            log.worst = Some((began, took, if r % 3 == 0 { "insert" } else { "update" }));
        }
        log.latencies.push(took);
        ops.fetch_add(1, Ordering::Relaxed);
    }
    log
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

/// Checks the table against the writer's log: every row is there with its
/// last written value, nothing else, every row in its day's partition.
async fn check_against_log(c: &Client, old_rows: i64, log: &WriterLog) {
    let total: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(total, old_rows + log.inserted.len() as i64, "rows lost or duplicated");
    let distinct: i64 = c.query_one("SELECT count(DISTINCT id) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(distinct, total, "an id appears twice");
    let rows = c.query("SELECT id, status FROM orders WHERE status <> 0", &[]).await.unwrap();
    let found: HashMap<i64, i32> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let expected: HashMap<i64, i32> = log.last.iter().filter(|(_, v)| **v != 0).map(|(k, v)| (*k, *v)).collect();
    let wrong = expected.iter().filter(|(k, v)| found.get(k) != Some(v)).count();
    assert_eq!(wrong, 0, "{wrong} rows lack their last written value");
    assert_eq!(found.len(), expected.len(), "rows carry values the writer never wrote");
    let misplaced: i64 = c
        .query_one(
            "SELECT count(*) FROM orders WHERE tableoid::regclass::text <> 'orders_p' || to_char(time AT TIME ZONE 'UTC', 'YYYYMMDD')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(misplaced, 0, "rows outside their interval partition");
    let old: bool = c
        .query_one("SELECT to_regclass('orders_chute_old') IS NULL AND to_regclass('orders_chute_split') IS NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert!(old, "the old table and the staging parent are gone");
}

fn spawn_blocking_run(cmd: Command) -> tokio::task::JoinHandle<(String, String)> {
    let mut cmd = cmd;
    tokio::task::spawn_blocking(move || run_expect(&mut cmd, 0))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writer_keeps_writing_through_migrate_and_split() {
    // 200 K rows in the suite; the issue's 2 M with CHUTE_TEST_MIGRATE_ROWS=2000000
    // (about four minutes here), as run for the record in docs/benchmarks.md.
    let rows: i64 = std::env::var("CHUTE_TEST_MIGRATE_ROWS").ok().and_then(|v| v.parse().ok()).unwrap_or(200_000);
    let db = shared().fresh_db("cli_migrate_writer").await;
    let url = db.url();
    let c = db.client().await;
    make_orders(&c, rows).await;

    // The writer's latency without a migration, for comparison.
    let baseline = Writing::start(db.client().await, rows);
    baseline.more(1_000, "without a migration").await;
    let base_log = baseline.stop().await;

    let w = Writing::start(db.client().await, rows);
    let began = Instant::now();
    let mut cmd = chute();
    cmd.args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key", "--lock-timeout", "200ms"]);
    spawn_blocking_run(cmd).await.unwrap();
    let swapped = began.elapsed();
    let mut cmd = chute();
    cmd.args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "5000", "--lock-timeout", "200ms"]);
    spawn_blocking_run(cmd).await.unwrap();
    let split = began.elapsed() - swapped;
    w.more(100, "after the split").await;
    let log = w.stop().await;
    // Keep the logged values exact: replay the baseline's writes first.
    let mut merged = base_log.last.clone();
    merged.extend(log.last.iter().map(|(k, v)| (*k, *v)));
    let all = WriterLog {
        last: merged,
        inserted: base_log.inserted.iter().chain(&log.inserted).copied().collect(),
        latencies: vec![],
        retried: log.retried,
        worst: None,
    };
    check_against_log(&c, rows, &all).await;
    let new_rows: i64 = c
        .query_one("SELECT count(*) FROM orders WHERE id = ANY($1) AND tableoid::regclass::text LIKE 'orders_p%'", &[&log.inserted])
        .await
        .unwrap()
        .get(0);
    assert_eq!(new_rows, log.inserted.len() as i64, "new rows land in the new partitions");

    let mut base = base_log.latencies.clone();
    base.sort();
    let mut during = log.latencies.clone();
    during.sort();
    let max = *during.last().unwrap();
    if let Some((at, took, what)) = log.worst {
        println!(
            "longest writer operation: an {what} of {took:?}, starting {:.1}s after the migration began (swap phase took {:.1}s)",
            at.saturating_duration_since(began).as_secs_f64(),
            swapped.as_secs_f64()
        );
    }
    println!(
        "migrate {rows} rows: swap phase {:.1}s, split {:.1}s ({:.0} rows/s); writer ops {} (retried {}); latency p50/p99/max without {:?}/{:?}/{:?}, during {:?}/{:?}/{:?}",
        swapped.as_secs_f64(),
        split.as_secs_f64(),
        rows as f64 / split.as_secs_f64(),
        during.len(),
        log.retried,
        percentile(&base, 0.5),
        percentile(&base, 0.99),
        base.last().unwrap(),
        percentile(&during, 0.5),
        percentile(&during, 0.99),
        max
    );
    // How long the writer waited is a figure for the benchmarks page
    // (docs/benchmarks.md, Migrate), not a pass mark on a shared machine;
    // what must hold is above: no write failed (the writer panics on any
    // error but a lock timeout, which it retries) and none was lost.
    assert!(!during.is_empty(), "the writer did nothing while chute migrate ran");
}

const MIGRATE: [&str; 9] = ["migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key", "--lock-timeout", "200ms"];
const SPLIT: [&str; 7] = ["migrate", "orders", "--split", "--batch-rows", "1000", "--lock-timeout", "200ms"];
/// The killed split runs are paced so that each is still copying when its
/// kill comes, however fast the machine (60,000 rows take at least 4 s).
const SPLIT_PACED: [&str; 9] = ["migrate", "orders", "--split", "--batch-rows", "1000", "--lock-timeout", "200ms", "--rows-per-s", "15000"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_9_at_random_moments_then_rerun_completes() {
    const ROWS: i64 = 60_000;
    let db = shared().fresh_db("cli_migrate_kill").await;
    let url = db.url();
    let c = db.client().await;
    make_orders(&c, ROWS).await;
    let w = Writing::start(db.client().await, ROWS);

    // Kill points (ms after start), drawn at random: three during the swap
    // phase, then (after a run that finishes the swap) three during the
    // split. CHUTE_TEST_SEED=N replays a run; the seed is printed (and shown
    // when the test fails).
    let seed: u64 = std::env::var("CHUTE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64);
    println!("kill points from CHUTE_TEST_SEED={seed}");
    let mut state = seed | 1;
    let mut draw = |lo: u64, hi: u64| {
        // xorshift64: enough to spread kill points, and replayable.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        lo + state % (hi - lo)
    };
    // The first swap-phase kill comes early enough to land in the first run
    // (which takes about 100 ms here); the reruns finish sooner.
    let mut swap_points: Vec<u64> = vec![draw(5, 40), draw(5, 150), draw(5, 150)];
    let mut split_points: Vec<u64> = (0..3).map(|_| draw(100, 1500)).collect();
    swap_points.sort();
    split_points.sort();
    println!("kill points: swap phase {swap_points:?} ms, split {split_points:?} ms");
    let mut killed = 0;
    let kill_at = |args: &'static [&'static str], after: u64, url: String| async move {
        let mut child = spawn(chute().args(["--url", &url]).args(args).stdout(Stdio::null()).stderr(Stdio::null()));
        // The kill point is the test's subject: drawn from the printed seed.
        tokio::time::sleep(Duration::from_millis(after)).await;
        let running = child.running();
        child.kill();
        running
    };
    for after in swap_points {
        killed += kill_at(&MIGRATE, after, url.clone()).await as u32;
    }
    let mut cmd = chute();
    cmd.args(["--url", &url]).args(MIGRATE);
    spawn_blocking_run(cmd).await.unwrap();
    for after in split_points {
        killed += kill_at(&SPLIT_PACED, after, url.clone()).await as u32;
    }
    assert!(killed >= 4, "only {killed} runs were killed before they finished (CHUTE_TEST_SEED={seed})");
    let mut cmd = chute();
    cmd.args(["--url", &url]).args(SPLIT);
    let out = tokio::task::spawn_blocking(move || {
        let o = cmd.output().unwrap();
        (o.status.code(), String::from_utf8_lossy(&o.stderr).into_owned())
    })
    .await
    .unwrap();
    // The split may have been finished by a killed run already.
    assert!(out.0 == Some(0) || out.1.contains("is split already"), "{out:?}");
    w.more(100, "after the split").await;
    let log = w.stop().await;
    check_against_log(&c, ROWS, &log).await;
    let (status, _) = run_expect(chute().args(["--url", &url, "migrate", "--status", "orders", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v["phase"], "done", "{status}");
    println!("killed {killed} runs; writer retried {} times", log.retried);
}

#[tokio::test]
async fn a_failure_before_the_swap_leaves_the_table_as_it_was() {
    let db = shared().fresh_db("cli_migrate_abort").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE ev (id bigint, time timestamptz NOT NULL, v int, PRIMARY KEY (id, time));
         INSERT INTO ev SELECT i, now() - i * interval '1 min', i FROM generate_series(1, 1000) i",
    )
    .await
    .unwrap();
    // A long reader: the CHECK needs a lock it never gets.
    let mut blocker = db.client().await;
    let tx = blocker.transaction().await.unwrap();
    tx.query("SELECT count(*) FROM ev", &[]).await.unwrap();
    let (_, err) = run_expect(
        chute().args(["--url", &url, "migrate", "ev", "--key", "time", "--interval", "1d", "--lock-timeout", "100ms", "--retry-for", "1s"]),
        2,
    );
    tx.rollback().await.unwrap();
    assert!(err.contains("could not get its locks"), "{err}");
    // The last error is named, with its SQLSTATE.
    assert!(err.contains("last error: canceling statement due to lock timeout (SQLSTATE 55P03)"), "{err}");
    assert!(err.contains("the table is as it was before the migration: removed: the new parent public.ev_chute_new"), "{err}");
    let row = c
        .query_one(
            "SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'ev'::regclass), to_regclass('ev_chute_new') IS NULL,
                    (SELECT count(*) FROM pg_constraint WHERE conrelid = 'ev'::regclass), (SELECT count(*) FROM ev),
                    (SELECT count(*) FROM chute.migrations)",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, String>(0), "r");
    assert!(row.get::<_, bool>(1));
    assert_eq!(row.get::<_, i64>(2), 1, "only the primary key");
    assert_eq!(row.get::<_, i64>(3), 1000);
    assert_eq!(row.get::<_, i64>(4), 0);
    // Without the reader it works.
    run_expect(chute().args(["--url", &url, "migrate", "ev", "--key", "time", "--interval", "1d"]), 0);
    let kind: String = c.query_one("SELECT relkind::text FROM pg_class WHERE oid = 'ev'::regclass", &[]).await.unwrap().get(0);
    assert_eq!(kind, "p");
}
