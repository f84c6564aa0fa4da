//! The tsbs sample files in tests/data load with the counts its README gives.

use std::path::PathBuf;

use chute_testkit::shared;

use crate::common::{chute, run_expect};

fn data(name: &str) -> String {
    let dir = std::env::var_os("CHUTE_TEST_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data"));
    let p = dir.join(name);
    assert!(p.is_file(), "test data {} is missing (set CHUTE_TEST_DATA to the folder with the tsbs files)", p.display());
    p.to_string_lossy().into_owned()
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn iot_loads_with_the_published_counts_and_reruns_add_no_tags() {
    let db = shared().fresh_db("tsbs_iot").await;
    let file = data("tsbs_iot_s50_2h.tsbs.gz");
    run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &file]), 0);
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(*) FROM readings").await, 32_478);
    assert_eq!(count(&c, "SELECT count(*) FROM readings WHERE latitude IS NULL").await, 435);
    assert_eq!(count(&c, "SELECT count(*) FROM diagnostics").await, 32_385);
    assert_eq!(count(&c, "SELECT count(*) FROM diagnostics WHERE fuel_state IS NULL").await, 1_206);
    assert_eq!(
        count(&c, "SELECT count(*) FROM readings r JOIN tags t ON t.id = r.tags_id WHERE r.name IS NOT DISTINCT FROM t.name").await,
        32_478
    );
    let indexes = count(&c, "SELECT count(*) FROM pg_indexes WHERE tablename = 'readings'").await;
    assert_eq!(indexes, 2, "(tags_id, time DESC) and (time DESC)");
    let tags = count(&c, "SELECT count(*) FROM tags").await;
    // The same command again loads nothing: every row is journaled.
    let (out, _) = run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &file]), 0);
    assert!(out.contains("already loaded      64863"), "{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM readings").await, 32_478);
    // A new load of the same file (another load id) reuses the tables and
    // every tag set (NULLS NOT DISTINCT), and adds the rows again.
    run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &file, "--load-id", "second"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, tags);
    assert_eq!(count(&c, "SELECT count(*) FROM readings").await, 2 * 32_478);
}

#[tokio::test]
async fn devops_extra_tags_go_to_additional_tags() {
    let db = shared().fresh_db("tsbs_devops").await;
    run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &data("tsbs_devops_s5_1h.tsbs.gz")]), 0);
    let c = db.client().await;
    for t in ["cpu", "disk", "diskio", "kernel", "mem", "net", "nginx", "postgresl", "redis"] {
        assert_eq!(count(&c, &format!("SELECT count(*) FROM {t}")).await, 1_800, "{t}");
        let extra = count(&c, &format!("SELECT count(*) FROM {t} WHERE additional_tags IS NOT NULL")).await;
        let want = if ["disk", "diskio", "net", "nginx", "redis"].contains(&t) { 1_800 } else { 0 };
        assert_eq!(extra, want, "{t}");
    }
    assert_eq!(count(&c, "SELECT count(*) FROM redis WHERE additional_tags ? 'server' AND additional_tags ? 'port'").await, 1_800);
}

#[tokio::test]
async fn cpu_only_loads_and_a_mismatched_tags_table_is_a_clear_error() {
    let db = shared().fresh_db("tsbs_cpu").await;
    run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &data("tsbs_cpuonly_s20_2h.tsbs.gz")]), 0);
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(*) FROM cpu").await, 14_400);
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, 20);
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &data("tsbs_iot_s50_2h.tsbs.gz")]), 2);
    assert!(err.contains("exists with other tag columns") && err.contains("its own database or schema"), "{err}");
}
