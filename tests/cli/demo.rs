use chute_testkit::shared;

use crate::common::{chute, run_expect, summary_value};

async fn count(db: &chute_testkit::TestDb) -> (i64, i64) {
    let c = db.client().await;
    let row = c.query_one("SELECT count(*), count(DISTINCT tableoid) FROM chute_demo.conditions", &[]).await.unwrap();
    (row.get(0), row.get(1))
}

#[tokio::test]
async fn demo_against_a_given_url() {
    let db = shared().fresh_db("demo_url").await;
    let (out, _) = run_expect(chute().args(["--url", &db.url(), "demo", "--rows", "30000", "--days", "3"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "30000");
    assert_eq!(summary_value(&out, "partitions used"), "3 of 3");
    assert_eq!(count(&db).await, (30000, 3));
    // A second run starts from scratch: no duplicates.
    run_expect(chute().args(["--url", &db.url(), "demo", "--rows", "5000", "--days", "2"]), 0);
    assert_eq!(count(&db).await, (5000, 2));
}

#[tokio::test]
async fn demo_through_pg_environment_variables() {
    let db = shared().fresh_db("demo_env").await;
    let (out, _) = run_expect(
        chute()
            .env("PGHOST", shared().socket_dir())
            .env("PGPORT", "5432")
            .env("PGUSER", "postgres")
            .env("PGDATABASE", &db.name)
            .args(["demo", "--rows", "1234", "--json"]),
        0,
    );
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: not JSON:\n{out}"));
    assert_eq!(v["rows"], 1234);
    assert!(v["rows_per_second"].as_f64().unwrap() > 0.0);
    assert_eq!(count(&db).await.0, 1234);
}
