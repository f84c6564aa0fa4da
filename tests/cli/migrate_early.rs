//! Keys before the oldest interval of the old data: the application wrote
//! them before the migration (the table took any key) and after the swap
//! (the old partition is `[MINVALUE, hi)`), so it may go on writing them
//! during and after the split. Such writes during the split land in the
//! staging parent's DEFAULT partition, which the cutover attaches to the
//! table for `[MINVALUE, oldest interval)`; after the split every such key
//! is taken, however old, with every other row in place and nothing left
//! behind.

use chute_testkit::shared;
use tokio_postgres::Client;

use crate::common::{chute, run_expect, start_paced_split};

/// The partition holding the row `id` and its bounds as `pg_get_expr` prints them.
async fn home(c: &Client, id: i64) -> (String, String) {
    let r = c
        .query_one(
            "SELECT c.relname::text, pg_get_expr(c.relpartbound, c.oid) FROM orders o JOIN pg_class c ON c.oid = o.tableoid WHERE o.id = $1",
            &[&id],
        )
        .await
        .unwrap_or_else(|e| panic!("row {id}: {e}"));
    (r.get(0), r.get(1))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_before_the_oldest_interval_keep_working_during_and_after_the_split() {
    const ROWS: i64 = 4_000;
    let db = shared().fresh_db("cli_migrate_early").await;
    let url = db.url();
    let c = db.client().await;
    // Rows one minute apart ending an hour ago: about three days of history.
    c.batch_execute(&format!(
        "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - interval '1 hour' - i * interval '1 minute', 0 FROM generate_series(1, {ROWS}) i"
    ))
    .await
    .unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    let split = start_paced_split(&url, &c).await;
    // Thirty and sixty days before any row: no staging leaf covers them.
    let moved = c.execute("UPDATE orders SET time = time - interval '30 days', status = 7 WHERE id = 10", &[]).await.unwrap();
    assert_eq!(moved, 1, "the application's update of a key to before the oldest interval failed");
    c.execute("INSERT INTO orders VALUES (-1, now() - interval '60 days', 8)", &[]).await.unwrap();
    // And one that leaves again: moved early, then back into the data's range.
    c.execute("UPDATE orders SET time = time - interval '40 days' WHERE id = 20", &[]).await.unwrap();
    c.execute("UPDATE orders SET time = time + interval '40 days', status = 9 WHERE id = 20", &[]).await.unwrap();
    let (out, err) = split.join().unwrap();
    assert!(format!("{out}{err}").contains("attach public.orders_pmin for the keys before"), "{out}{err}");

    // After the split: keys older than the history are taken, however old,
    // also between the rows written during the split and the history.
    for (id, age) in [(-2i64, "10 days"), (-3, "45 days"), (-4, "20000 days")] {
        c.execute(&format!("INSERT INTO orders VALUES ($1, now() - interval '{age}', 5)"), &[&id])
            .await
            .unwrap_or_else(|e| panic!("an insert {age} back after the split: {e}"));
    }
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, ROWS + 4);
    let oldest_leaf: String = c
        .query_one(
            "SELECT min(c.relname::text) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'orders'::regclass AND c.relname ~ '^orders_p[0-9]+$'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    for (id, status) in [(10i64, 7i32), (-1, 8), (-2, 5), (-3, 5), (-4, 5)] {
        let (part, bound) = home(&c, id).await;
        assert_eq!(part, "orders_pmin", "row {id}");
        assert!(bound.starts_with("FOR VALUES FROM (MINVALUE) TO ("), "{bound}");
        let s: i32 = c.query_one("SELECT status FROM orders WHERE id = $1", &[&id]).await.unwrap().get(0);
        assert_eq!(s, status, "row {id}");
    }
    // orders_pmin ends where the oldest interval partition begins: no gap, no overlap.
    let (_, bound) = home(&c, 10).await;
    let day = &oldest_leaf["orders_p".len()..];
    assert!(bound.contains(&format!("TO ('{}-{}-{} 00:00:00+00')", &day[..4], &day[4..6], &day[6..8])), "{bound} vs {oldest_leaf}");
    let (part, _) = home(&c, 20).await;
    assert!(part.starts_with("orders_p2"), "row 20 went back into an interval partition: {part}");
    let back: i32 = c.query_one("SELECT status FROM orders WHERE id = 20", &[]).await.unwrap().get(0);
    assert_eq!(back, 9);
    let left: i64 = c
        .query_one("SELECT count(*) FROM pg_class WHERE relname LIKE 'orders\\_chute\\_%' AND relkind IN ('r', 'p')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the split left tables behind");
    // The MINVALUE partition is an ordinary partition: chute's own status sees no gap or stray.
    let (st, _) = run_expect(chute().args(["--url", &url, "partition", "status", "orders"]), 0);
    assert!(!st.contains("stray") && st.contains("orders_pmin"), "{st}");
}

/// The case without concurrent writes: before the migration and
/// after the swap a row older than the oldest interval is taken, and after
/// the split it still is (it failed with "no partition of relation … found
/// for row").
#[tokio::test]
async fn an_old_key_is_taken_before_after_the_swap_and_after_the_split() {
    let db = shared().fresh_db("cli_migrate_old_key").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - i * interval '1 hour', 0 FROM generate_series(1, 200) i",
    )
    .await
    .unwrap();
    let old = "INSERT INTO orders VALUES ($1, now() - interval '400 days', 1)";
    c.execute(old, &[&-1i64]).await.unwrap();
    c.execute("DELETE FROM orders WHERE id = -1", &[]).await.unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    c.execute(old, &[&-2i64]).await.expect("after the swap");
    c.execute("DELETE FROM orders WHERE id = -2", &[]).await.unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--split"]), 0);
    c.execute(old, &[&-3i64]).await.expect("after the split");
    assert_eq!(home(&c, -3).await.0, "orders_pmin");
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, 201);
}

/// Rows sharing one key (a bulk insert stamped with one `now()`) are still
/// copied in batches of about `--batch-rows`: the copy goes by heap block, not
/// by key range, so no batch holds the whole table locked FOR SHARE.
#[tokio::test]
async fn rows_sharing_one_key_are_still_copied_in_small_batches() {
    const ROWS: i64 = 30_000;
    let db = shared().fresh_db("cli_migrate_one_key").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(&format!(
        "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - interval '1 day' FROM generate_series(1, {ROWS}) i; ANALYZE orders"
    ))
    .await
    .unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    let (out, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "2000"]), 0);
    let batches = format!("{out}{err}").lines().filter(|l| l.contains("done: copy the rows")).count();
    assert!((10..=20).contains(&batches), "{batches} copy batches for {ROWS} rows of one key at --batch-rows 2000:\n{out}{err}");
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, ROWS);
}
