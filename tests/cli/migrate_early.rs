//! Writes during `chute migrate --split` with a key before the oldest
//! interval of the old data: an update that moves a row's key there and an
//! insert of such a row succeed for the application, and after the cutover
//! both sit in interval partitions of their own, with every other row in
//! place and nothing left behind.

use chute_testkit::shared;

use crate::common::{chute, run_expect, start_paced_split};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keys_moved_before_the_oldest_interval_during_the_split_get_their_own_partitions() {
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
    assert!(format!("{out}{err}").contains("into 2 new leaves"), "the cutover did not make leaves for the early rows:\n{out}{err}");

    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, ROWS + 1);
    // Each early row is in a leaf of orders whose bounds hold it, and only there.
    for (id, status) in [(10i64, 7i32), (-1, 8)] {
        let r = c
            .query_one(
                "SELECT o.status, c.relname::text, p.relname::text,
                        o.time >= (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''([^'']+)''\\)'))[1]::timestamptz
                    AND o.time <  (regexp_match(pg_get_expr(c.relpartbound, c.oid), 'TO \\(''([^'']+)''\\)'))[1]::timestamptz
                 FROM orders o JOIN pg_class c ON c.oid = o.tableoid JOIN pg_inherits i ON i.inhrelid = c.oid
                 JOIN pg_class p ON p.oid = i.inhparent WHERE o.id = $1",
                &[&id],
            )
            .await
            .unwrap();
        assert_eq!(r.get::<_, i32>(0), status);
        assert_eq!(r.get::<_, String>(2), "orders", "row {id} is in {}, not a partition of orders", r.get::<_, String>(1));
        assert!(r.get::<_, bool>(3), "row {id} is in {}, whose bounds do not hold it", r.get::<_, String>(1));
        assert!(!r.get::<_, String>(1).contains("chute"), "row {id} is in {}", r.get::<_, String>(1));
    }
    let back: i32 = c.query_one("SELECT status FROM orders WHERE id = 20", &[]).await.unwrap().get(0);
    assert_eq!(back, 9);
    let left: i64 = c
        .query_one("SELECT count(*) FROM pg_class WHERE relname LIKE 'orders\\_chute\\_%' AND relkind IN ('r', 'p')", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(left, 0, "the split left tables behind");
    // The early partitions are ordinary leaves: chute's own status sees no gap or stray.
    let (st, _) = run_expect(chute().args(["--url", &url, "partition", "status", "orders"]), 0);
    assert!(!st.contains("stray"), "{st}");
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
