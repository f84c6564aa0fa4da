//! `chute migrate` carries identity and generated columns: the new parent's
//! identity goes on from the old table's last value, and the split copies
//! every row with its own id while the server computes generated values.

use chute_testkit::shared;

use crate::common::{chute, run_expect};

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
