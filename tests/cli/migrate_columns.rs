//! `chute migrate` carries identity and generated columns: the new parent's
//! identity goes on from the old table's last value, and the split copies
//! every row with its own id while the server computes generated values.
//! And names: a table whose name holds the dollar-quote tag chute uses.

use chute_testkit::shared;

use crate::common::{chute, run_expect, start_paced_split_of};

/// `m$chute$"q`: `$chute$` ended the trigger function's dollar quote (the
/// split failed with a syntax error), and the `"` needs its quote doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_named_with_the_dollar_quote_tag_is_migrated_and_split() {
    let db = shared().fresh_db("cli_migrate_dollar").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE \"m$chute$\"\"q\" (id bigint NOT NULL, time timestamptz NOT NULL, v int NOT NULL DEFAULT 0, PRIMARY KEY (id, time));
         INSERT INTO \"m$chute$\"\"q\" SELECT i, now() - interval '1 hour' - i * interval '2 minutes', 0 FROM generate_series(1, 3000) i",
    )
    .await
    .unwrap();
    let table = "\"m$chute$\"\"q\"";
    run_expect(chute().args(["--url", &url, "migrate", table, "--key", "time", "--interval", "1d"]), 0);
    // Writes while the trigger (whose body names the table) carries them.
    let split = start_paced_split_of(&url, &c, table).await;
    let updated = c.execute("UPDATE \"m$chute$\"\"q\" SET v = 1 WHERE id <= 100", &[]).await.unwrap();
    assert_eq!(updated, 100);
    c.execute("INSERT INTO \"m$chute$\"\"q\" VALUES (-1, now(), 2)", &[]).await.unwrap();
    split.join().unwrap();
    let r = c
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE v = 1), count(*) FILTER (WHERE v = 2),
                    (SELECT count(*) FROM pg_inherits WHERE inhparent = '\"m$chute$\"\"q\"'::regclass),
                    (SELECT count(*) FROM pg_class WHERE relname LIKE 'm$chute$\"q\\_chute\\_%' AND relkind IN ('r', 'p'))
             FROM \"m$chute$\"\"q\"",
            &[],
        )
        .await
        .unwrap();
    let (rows, updated, inserted, partitions, left): (i64, i64, i64, i64, i64) = (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
    assert_eq!((rows, updated, inserted, left), (3001, 100, 1, 0));
    assert!(partitions >= 6, "{partitions} partitions");
}

#[tokio::test]
async fn identity_and_generated_columns_are_carried_through_migrate_and_split() {
    let db = shared().fresh_db("cli_migrate_columns").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE ev (id bigint GENERATED ALWAYS AS IDENTITY, time timestamptz NOT NULL, v int NOT NULL,
                          doubled int GENERATED ALWAYS AS (v * 2) STORED, PRIMARY KEY (id, time));
         INSERT INTO ev (time, v) SELECT now() - interval '1 hour' - i * interval '1 minute' * 4, i FROM generate_series(1, 3000) i",
    )
    .await
    .unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "ev", "--key", "time", "--interval", "1d"]), 0);
    // A new row takes the next id, not 1.
    let id: i64 = c.query_one("INSERT INTO ev (time, v) VALUES (now(), 7) RETURNING id", &[]).await.unwrap().get(0);
    assert_eq!(id, 3001);
    run_expect(chute().args(["--url", &url, "migrate", "ev", "--split", "--batch-rows", "700"]), 0);
    let id: i64 = c.query_one("INSERT INTO ev (time, v) VALUES (now(), 8) RETURNING id", &[]).await.unwrap().get(0);
    assert_eq!(id, 3002);
    let r = c
        .query_one(
            "SELECT count(*), count(DISTINCT id), min(id), max(id), count(*) FILTER (WHERE doubled <> v * 2),
                    count(*) FILTER (WHERE tableoid::regclass::text <> 'ev_p' || to_char(time AT TIME ZONE 'UTC', 'YYYYMMDD'))
             FROM ev",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(r.get::<_, i64>(0), 3002);
    assert_eq!(r.get::<_, i64>(1), 3002, "ids are unique");
    assert_eq!((r.get::<_, i64>(2), r.get::<_, i64>(3)), (1, 3002));
    assert_eq!(r.get::<_, i64>(4), 0, "generated values are the server's");
    assert_eq!(r.get::<_, i64>(5), 0, "every row sits in its interval partition");
    let leaves: i64 = c.query_one("SELECT count(*) FROM pg_partition_tree('ev') WHERE isleaf", &[]).await.unwrap().get(0);
    assert!(leaves >= 9, "{leaves} leaves for about 8 days of rows and the premade ones");
}

/// Storage parameters of the migrated table: a partitioned parent cannot
/// hold them, so every leaf gets them, from the swap's premade leaves and
/// the split's interval leaves to the leaves `partition maintain` makes later.
#[tokio::test]
async fn storage_parameters_go_to_every_leaf_then_and_later() {
    let db = shared().fresh_db("cli_migrate_storage").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE st (id bigint NOT NULL, time timestamptz NOT NULL, PRIMARY KEY (id, time))
             WITH (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01);
         INSERT INTO st SELECT i, now() - interval '1 hour' - i * interval '1 hour' FROM generate_series(1, 100) i",
    )
    .await
    .unwrap();
    let options = async |c: &tokio_postgres::Client| -> Vec<(String, Option<Vec<String>>)> {
        c.query(
            "SELECT i.inhrelid::regclass::text, r.reloptions::text[] FROM pg_inherits i JOIN pg_class r ON r.oid = i.inhrelid
             WHERE i.inhparent = 'st'::regclass ORDER BY 1",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
    };
    let want = Some(vec!["fillfactor=70".to_owned(), "autovacuum_vacuum_scale_factor=0.01".to_owned()]);
    run_expect(chute().args(["--url", &url, "migrate", "st", "--key", "time", "--interval", "1d", "--premake", "2"]), 0);
    let after_swap = options(&c).await;
    assert!(after_swap.len() >= 3, "{after_swap:?}");
    for (leaf, opts) in &after_swap {
        assert_eq!(opts, &want, "{leaf}");
    }
    run_expect(chute().args(["--url", &url, "migrate", "st", "--split"]), 0);
    let after_split = options(&c).await;
    assert!(after_split.len() >= 6, "four days of rows and the premade leaves: {after_split:?}");
    for (leaf, opts) in &after_split {
        assert_eq!(opts, &want, "{leaf}");
    }
    // A week on, maintain makes the leaves ahead of the new now with them too.
    let later = jiff::Timestamp::now().checked_add(jiff::SignedDuration::from_hours(24 * 7)).unwrap().to_string();
    run_expect(chute().args(["--url", &url, "partition", "maintain", "st", "--now", &later]), 0);
    let after_maintain = options(&c).await;
    assert!(after_maintain.len() > after_split.len(), "{after_maintain:?}");
    for (leaf, opts) in &after_maintain {
        assert_eq!(opts, &want, "{leaf}");
    }
}
