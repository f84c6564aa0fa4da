//! What `chute migrate --status` reports: rows moved never passes the rows
//! to move, and once the copy is done both are the rows the old partition
//! holds, also those the sync trigger carried (updated or inserted during the
//! split); the longest lock is the longest single attempt, not the attempts
//! and pauses of a retried step.

use std::process::Stdio;
use std::time::Duration;

use chute_testkit::process::{Lines, spawn};
use chute_testkit::shared;
use tokio_postgres::Client;

use crate::common::{chute, run_expect, start_paced_split, wait_for};

async fn make_orders(c: &Client, rows: i64) {
    c.batch_execute(&format!(
        "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - interval '1 hour' - i * interval '1 minute', 0 FROM generate_series(1, {rows}) i"
    ))
    .await
    .unwrap();
}

fn status(url: &str) -> serde_json::Value {
    let (out, _) = run_expect(chute().args(["--url", url, "migrate", "--status", "orders", "--json"]), 0);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_moved_never_pass_the_total_and_end_equal_to_it() {
    const ROWS: i64 = 6_000;
    let db = shared().fresh_db("cli_migrate_status_moved").await;
    let url = db.url();
    let c = db.client().await;
    make_orders(&c, ROWS).await;
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    // While the copy runs, update 1,000 rows (their new versions land in
    // later blocks, some the copy reads again) and insert 300 (at the end of
    // the old partition, which the copy reaches last).
    let split = start_paced_split(&url, &c).await;
    let updated = c.execute("UPDATE orders SET status = 1 WHERE id <= 1000", &[]).await.unwrap();
    assert_eq!(updated, 1000);
    let mut polls = 0;
    for i in 0..300i64 {
        c.execute("INSERT INTO orders VALUES ($1, now(), 2)", &[&(ROWS + 1 + i)]).await.unwrap();
        if i % 20 == 0 && !split.is_finished() {
            let s = status(&url);
            if let (Some(moved), Some(total)) = (s["rows_moved"].as_i64(), s["rows_total"].as_i64()) {
                assert!(moved <= total, "more rows moved than the total: {s}");
                polls += 1;
            }
        }
    }
    split.join().unwrap();
    assert!(polls > 0, "the split ended before it could be watched");
    let s = status(&url);
    let (moved, total) = (s["rows_moved"].as_i64().unwrap(), s["rows_total"].as_i64().unwrap());
    assert_eq!(moved, total, "{s}");
    // The split dropped the old partition at its cutover (no --keep-old): the status says so.
    assert_eq!((s["old_partition"].as_str(), s["old_partition_exists"].as_bool()), (Some("public.orders_chute_old"), Some(false)), "{s}");
    let (text, _) = run_expect(chute().args(["--url", &url, "migrate", "--status", "orders"]), 0);
    assert!(text.contains("old partition  public.orders_chute_old (dropped)"), "{text}");
    let (n, carried, inserted): (i64, i64, i64) = {
        let r = c
            .query_one("SELECT count(*), count(*) FILTER (WHERE status = 1), count(*) FILTER (WHERE status = 2) FROM orders", &[])
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2))
    };
    assert_eq!((n, carried, inserted), (ROWS + 300, 1000, 300));
    // Counted once the copy was done: every row but those inserted after that.
    assert!((ROWS..=ROWS + 300).contains(&total), "{s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_longest_lock_is_one_attempt_not_the_retries() {
    let db = shared().fresh_db("cli_migrate_status_lock").await;
    let url = db.url();
    let c = db.client().await;
    make_orders(&c, 1_000).await;
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    // A paced split (about 0.7 s of copying); its cutover needs the staging parent alone.
    let mut split = spawn(
        chute()
            .args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "100", "--rows-per-s", "1500"])
            .args(["--lock-timeout", "200ms", "--retry-for", "30s"])
            .stdout(Stdio::null())
            .stderr(Stdio::piped()),
    );
    let mut err = Lines::new(split.stderr.take().unwrap());
    wait_for("the split to make its staging parent", Duration::from_secs(30), || async {
        c.query_one("SELECT to_regclass('orders_chute_split') IS NOT NULL", &[]).await.unwrap().get::<_, bool>(0)
    })
    .await;
    // A reader of the staging parent until the cutover's attempts (200 ms each) time out and are retried.
    let mut blocker = db.client().await;
    let tx = blocker.transaction().await.unwrap();
    tx.query("SELECT count(*) FROM orders_chute_split", &[]).await.unwrap();
    err.wait_until("the cutover to time out and be retried", Duration::from_secs(60), |seen| {
        seen.contains("lock not granted within the timeout; retry")
    });
    tx.rollback().await.unwrap();
    let exit = split.wait_within(Duration::from_secs(120), "the split");
    let err = err.rest();
    assert_eq!(exit.code(), Some(0), "{err}");
    let s = status(&url);
    let ms = s["longest_lock_ms"].as_i64().unwrap_or_else(|| panic!("{s}"));
    // One attempt waits at most lock_timeout (200 ms) plus the cutover's own catalog work.
    assert!(ms < 1_000, "longest lock {ms} ms, over about 2 s of retries: {s}");
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, 1_000);
}

/// Hundreds of leaves: the cutover attaches the staging parent whole and the
/// leaves move up in several short steps, so no step holds its lock long
/// (one by one in one transaction, the lock grew with the square of the
/// leaves); the table ends flat, every row in its interval partition.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_leaves_move_up_in_short_steps() {
    const ROWS: i64 = 7_200;
    let db = shared().fresh_db("cli_migrate_flatten").await;
    let url = db.url();
    let c = db.client().await;
    // One row an hour for 300 days: 300 daily leaves.
    c.batch_execute(&format!(
        "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - interval '1 hour' - i * interval '1 hour', 0 FROM generate_series(1, {ROWS}) i"
    ))
    .await
    .unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    let (out, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "2000"]), 0);
    let text = format!("{out}{err}");
    // 300 days and the one before them (the partial first day).
    assert!(text.contains("attach public.orders_chute_split with its 30"), "{text}");
    let steps = text.lines().filter(|l| l.contains("done: move ")).count();
    assert!(steps >= 2, "the leaves moved up in {steps} step(s):\n{text}");
    let s = status(&url);
    assert_eq!(s["phase"], "done", "{s}");
    assert!(s["longest_lock_ms"].as_i64().unwrap() < 2_000, "{s}");
    // Flat: every partition of orders is a plain table holding its own interval's rows.
    let r = c
        .query_one(
            "SELECT count(*) FILTER (WHERE c.relkind <> 'r'), count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'orders'::regclass",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 0, "a partitioned partition is left");
    assert!(r.get::<_, i64>(1) >= 301);
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, ROWS);
    let staging: bool = c.query_one("SELECT to_regclass('orders_chute_split') IS NULL", &[]).await.unwrap().get(0);
    assert!(staging, "the staging parent is left");
}

#[tokio::test]
async fn every_value_of_the_status_starts_in_one_column() {
    let db = shared().fresh_db("cli_migrate_status_columns").await;
    let url = db.url();
    make_orders(&db.client().await, 100).await;
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    let (text, _) = run_expect(chute().args(["--url", &url, "migrate", "--status", "orders"]), 0);
    let labels = ["table", "phase", "rows moved", "rate", "longest lock", "lock footprint", "old partition"];
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), labels.len(), "{text}");
    for (line, label) in lines.iter().zip(labels) {
        let value = line.strip_prefix(label).unwrap_or_else(|| panic!("{line:?} is not the {label} row:\n{text}"));
        // The value starts right after the labels' column: one space after the longest label.
        assert_eq!(value.len() - value.trim_start().len(), 15 - label.len(), "{line:?}:\n{text}");
    }
}
