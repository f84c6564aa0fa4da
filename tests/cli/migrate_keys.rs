//! What `chute migrate` keeps besides the rows: the table's foreign keys to
//! other tables (re-created on the new parent and on every leaf, enforced
//! after the swap and after the split), its row-level security and
//! policies, and `--dry-run`'s account of each object; what it refuses
//! before it starts (a foreign key that is NOT VALID, a split the server's
//! lock table cannot hold), with the fix.

use chute_testkit::shared;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::common::{chute, run_expect};

async fn make_tables(c: &Client, role: &str) {
    c.batch_execute(&format!(
        "CREATE TABLE customers (id int PRIMARY KEY, name text);
         INSERT INTO customers SELECT i, 'c' || i FROM generate_series(1, 100) i;
         CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, customer_id int NOT NULL REFERENCES customers ON DELETE CASCADE,
                              owner text NOT NULL, note text, PRIMARY KEY (id, time));
         INSERT INTO orders SELECT i, now() - interval '1 hour' - i * interval '5 minutes', 1 + i % 100,
                                   CASE WHEN i % 4 = 0 THEN '{role}' ELSE 'other' END, 'n' || i
           FROM generate_series(1, 2000) i;
         ALTER TABLE orders ENABLE ROW LEVEL SECURITY;
         CREATE POLICY mine ON orders FOR SELECT USING (owner = current_user);
         CREATE ROLE \"{role}\";
         GRANT SELECT ON orders TO \"{role}\""
    ))
    .await
    .unwrap();
}

/// Inserts an order of a customer that does not exist, `age` ago.
async fn orphan(c: &Client, id: i64, age: &str) -> Result<u64, tokio_postgres::Error> {
    c.execute(&format!("INSERT INTO orders VALUES ($1, now() - interval '{age}', 999, 'x', 'orphan')"), &[&id]).await
}

fn is_fk_violation(r: Result<u64, tokio_postgres::Error>) -> bool {
    matches!(r, Err(e) if e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION))
}

/// Rows `role` sees through the table's policy.
async fn visible_to(c: &Client, role: &str) -> i64 {
    c.batch_execute(&format!("SET ROLE \"{role}\"")).await.unwrap();
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    c.batch_execute("RESET ROLE").await.unwrap();
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_keys_and_row_level_security_survive_the_swap_and_the_split() {
    let db = shared().fresh_db("cli_migrate_fk").await;
    let url = db.url();
    let c = db.client().await;
    let role = format!("{}_reader", db.name);
    make_tables(&c, &role).await;
    assert_eq!(visible_to(&c, &role).await, 500);
    assert!(is_fk_violation(orphan(&c, -1, "1 hour").await));

    let (plan, _) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--dry-run"]), 0);
    for want in [
        "-- note: foreign key orders_customer_id_fkey (FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE): \
         added to the new parent while it is empty (no scan)",
        "ADD CONSTRAINT \"orders_customer_id_fkey\" FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE",
        "-- note: row-level security (enabled): the same on the new parent",
        "-- note: policy mine (permissive SELECT to public)",
        "CREATE POLICY \"mine\" ON \"public\".\"orders_chute_new\" AS PERMISSIVE FOR SELECT TO PUBLIC USING ((owner = CURRENT_USER))",
        "-- note: grants (",
        "-- note: primary key orders_pkey (id, time)",
        "-- note: keys before the oldest interval: in public.orders_pmin",
    ] {
        assert!(plan.contains(want), "{want:?} missing from the dry run:\n{plan}");
    }

    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    // After the swap: enforced for new rows (a premade partition) and old ones (the old table).
    assert!(is_fk_violation(orphan(&c, -1, "0 hours").await), "the swap dropped the foreign key");
    assert!(is_fk_violation(orphan(&c, -2, "3 days").await));
    assert_eq!(visible_to(&c, &role).await, 500, "the swap dropped the row-level security");

    let (out, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "500"]), 0);
    let text = format!("{out}{err}");
    assert!(text.contains("foreign keys NOT VALID to leaves") && text.contains("validate "), "{text}");
    assert!(is_fk_violation(orphan(&c, -1, "0 hours").await), "the split dropped the foreign key");
    assert!(is_fk_violation(orphan(&c, -2, "3 days").await));
    assert!(is_fk_violation(orphan(&c, -3, "400 days").await), "the partition for older keys lacks it");
    assert_eq!(visible_to(&c, &role).await, 500);
    // Every partition carries the table's key as its own, validated.
    let r = c
        .query_one(
            "SELECT count(*), count(k.oid) FILTER (WHERE k.convalidated AND k.conparentid = p.oid)
             FROM pg_inherits i
             JOIN pg_constraint p ON p.conrelid = i.inhparent AND p.contype = 'f'
             LEFT JOIN pg_constraint k ON k.conrelid = i.inhrelid AND k.contype = 'f' AND k.confrelid = p.confrelid
             WHERE i.inhparent = 'orders'::regclass",
            &[],
        )
        .await
        .unwrap();
    let (partitions, keyed): (i64, i64) = (r.get(0), r.get(1));
    assert!(partitions >= 9, "{partitions}");
    assert_eq!(keyed, partitions, "partitions without the table's validated foreign key");
    // ON DELETE CASCADE reaches every partition.
    c.execute("DELETE FROM customers WHERE id = 7", &[]).await.unwrap();
    let left: i64 = c.query_one("SELECT count(*) FROM orders WHERE customer_id = 7", &[]).await.unwrap().get(0);
    assert_eq!(left, 0);
    let n: i64 = c.query_one("SELECT count(*) FROM orders", &[]).await.unwrap().get(0);
    assert_eq!(n, 2000 - 20);
}

#[tokio::test]
async fn a_not_valid_foreign_key_and_a_split_past_the_lock_table_are_refused_before_anything_changes() {
    let db = shared().fresh_db("cli_migrate_refuse").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE customers (id int PRIMARY KEY);
         INSERT INTO customers VALUES (1);
         CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, customer_id int NOT NULL, PRIMARY KEY (id, time));
         INSERT INTO orders VALUES (1, now() - interval '300 days', 1), (2, now(), 1);
         ALTER TABLE orders ADD CONSTRAINT to_customers FOREIGN KEY (customer_id) REFERENCES customers NOT VALID",
    )
    .await
    .unwrap();
    let (_, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 2);
    assert!(err.contains("the foreign key to_customers of public.orders is NOT VALID"), "{err}");
    assert!(err.contains("fix: validate it first: ALTER TABLE \"public\".\"orders\" VALIDATE CONSTRAINT \"to_customers\""), "{err}");
    c.batch_execute("ALTER TABLE orders VALIDATE CONSTRAINT to_customers").await.unwrap();
    // 300 days of hourly partitions: 7,200 leaves the cutover would attach in
    // one transaction, more than a quarter of this server's lock table.
    let (lock_table, budget): (i64, i64) = {
        let r = c
            .query_one(
                "SELECT current_setting('max_locks_per_transaction')::int8 * (current_setting('max_connections')::int8
                        + current_setting('autovacuum_max_workers')::int8 + 1 + current_setting('max_worker_processes')::int8
                        + current_setting('max_wal_senders')::int8 + current_setting('max_prepared_transactions')::int8)",
                &[],
            )
            .await
            .unwrap();
        let n: i64 = r.get(0);
        (n, n / 4)
    };
    assert!(budget < 7_200, "this test needs a lock table under 28,800 entries, not {lock_table}");
    let (_, err) = run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1h"]), 2);
    assert!(err.contains("attaches its 72") && err.contains(&format!("this server's lock table holds {lock_table}")), "{err}");
    assert!(err.contains("fix: raise max_locks_per_transaction to at least") && err.contains("wider --interval than 1h"), "{err}");
    let kind: String = c.query_one("SELECT relkind::text FROM pg_class WHERE oid = 'orders'::regclass", &[]).await.unwrap().get(0);
    assert_eq!(kind, "r", "refused before anything changed");
    // Daily partitions fit.
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--split"]), 0);
    let (st, _) = run_expect(chute().args(["--url", &url, "migrate", "--status", "orders", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&st).unwrap();
    assert_eq!(v["phase"], "done", "{st}");
    let most = v["max_step_locks"].as_i64().unwrap();
    assert!(most > 300 && most <= v["lock_budget"].as_i64().unwrap(), "{st}");
}
