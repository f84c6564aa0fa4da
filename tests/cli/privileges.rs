//! Loading as a role with fewer privileges than the owner: row-level
//! security (COPY is refused there, rows go in as INSERTs the policies
//! check), INSERT on the parent only, no privileges on schema `chute`, and
//! a table the role does not own (no just-in-time partitions).

use std::io::Write;

use chute_testkit::{TestDb, shared};

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value};

const COLS: &str = "time timestamptz not null, dev int not null, addr inet, note text";

/// A login role unique to this test database (roles are cluster-wide).
async fn make_role(db: &TestDb, c: &tokio_postgres::Client, suffix: &str) -> String {
    let role = format!("{}_{suffix}", db.name);
    c.batch_execute(&format!("CREATE ROLE \"{role}\" LOGIN; GRANT CREATE ON SCHEMA public TO \"{role}\"")).await.unwrap();
    role
}

/// The journal's grants, as chute's error message prints them.
async fn grant_journal(c: &tokio_postgres::Client, role: &str) {
    c.batch_execute(&format!(
        "GRANT USAGE ON SCHEMA chute TO \"{role}\"; GRANT SELECT ON chute.meta, chute.partition_config TO \"{role}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON chute.loads, chute.load_journal TO \"{role}\";"
    ))
    .await
    .unwrap();
}

fn url_as(db: &TestDb, role: &str) -> String {
    format!("host={} port={} user={role} dbname={}", shared().socket_dir().display(), shared().port(), db.name)
}

/// `n` rows over the next 20 hours (partitions made ahead hold them): `dev` is `i % 200`, every 10th row's
/// address is NULL, and notes carry a tab, a backslash and a newline escape.
fn write_csv(path: &std::path::Path, n: u64) {
    let now = jiff::Timestamp::now();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..n {
        let t = now + jiff::SignedDuration::from_secs(60 + (i * 20 * 3600 / n) as i64);
        let addr = if i % 10 == 0 { String::new() } else { format!("10.0.{}.{}", i / 250 % 250, i % 250) };
        writeln!(f, "{},{},{addr},\"n{i}\ta\\b\"", t.strftime("%Y-%m-%d %H:%M:%S%.6f+00"), i % 200).unwrap();
    }
    f.flush().unwrap();
}

/// Every row of `table` as text, in a stable order.
async fn rows(c: &tokio_postgres::Client, table: &str) -> Vec<String> {
    c.query(&format!("SELECT t::text FROM {table} t ORDER BY time, dev, note"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

#[tokio::test]
async fn row_level_security_loads_through_insert_rejects_what_policies_refuse_and_loads_once() {
    let db = shared().fresh_db("priv_rls").await;
    let c = db.client().await;
    create_time_partitioned(&db.url(), "p", COLS, "1d", &["--premake", "2"]);
    // The same rows loaded by the owner (COPY) into a table without a policy: the reference.
    create_time_partitioned(&db.url(), "reference", COLS, "1d", &["--premake", "2"]);
    let role = make_role(&db, &c, "rls").await;
    c.batch_execute(&format!(
        "ALTER TABLE p ENABLE ROW LEVEL SECURITY; CREATE POLICY small_devs ON p USING (true) WITH CHECK (dev < 190);
         GRANT SELECT, INSERT ON p TO \"{role}\";"
    ))
    .await
    .unwrap();
    grant_journal(&c, &role).await;
    let dir = open_tempdir();
    let csv = dir.path().join("r.csv");
    write_csv(&csv, 2000);
    let csv = csv.to_str().unwrap();

    let (out, err) =
        run_expect(chute().args(["--url", &url_as(&db, &role), "load", "p", csv, "--reject-file", &format!("{csv}.rejects")]), 1);
    assert!(err.contains("row-level security") && err.contains("0A000") && err.contains("INSERT"), "says why and how: {err}");
    assert_eq!(summary_value(&out, "rows loaded"), "1900", "{out}");
    assert!(summary_value(&out, "rows rejected").starts_with("100 "), "{out}");
    let rejects = std::fs::read_to_string(format!("{csv}.rejects")).unwrap();
    let reasons: Vec<&str> = rejects.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(reasons.len(), 100);
    assert!(reasons.iter().all(|l| l.contains("row-level security policy") && l.contains("42501")), "{}", reasons[0]);
    // The rejected rows are exactly those with dev >= 190, each with its own line.
    let line_of = |l: &str| l.split(':').nth(1).unwrap().parse::<u64>().unwrap();
    assert!(reasons.iter().all(|l| (line_of(l) - 1) % 200 >= 190), "{}", reasons[0]);

    // The values are what COPY makes of them (binary rows and text rows alike).
    run_expect(chute().args(["--url", &db.url(), "load", "reference", csv, "--reject-file", "/dev/null"]), 0);
    c.batch_execute("DELETE FROM reference WHERE dev >= 190").await.unwrap();
    assert_eq!(rows(&c, "p").await, rows(&c, "reference").await);

    // Exactly once: the same load again adds nothing.
    let (out, _) = run_expect(chute().args(["--url", &url_as(&db, &role), "load", "p", csv]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{out}");
    let n: i64 = c.query_one("SELECT count(*) FROM p", &[]).await.unwrap().get(0);
    assert_eq!(n, 1900);

    // The owner, to whom the policy does not apply, still loads with COPY.
    let (out, err) = run_expect(chute().args(["--url", &db.url(), "load", "p", csv, "--load-id", "as-owner"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "2000", "{out}");
    assert!(!err.contains("INSERT"), "the owner's load is a COPY: {err}");
}

#[tokio::test]
async fn insert_on_the_parent_only_goes_through_the_parent() {
    let db = shared().fresh_db("priv_parent_only").await;
    let c = db.client().await;
    create_time_partitioned(&db.url(), "p", COLS, "1d", &["--premake", "2"]);
    let role = make_role(&db, &c, "parent").await;
    c.batch_execute(&format!("GRANT INSERT ON p TO \"{role}\"")).await.unwrap();
    grant_journal(&c, &role).await;
    let dir = open_tempdir();
    let csv = dir.path().join("r.csv");
    write_csv(&csv, 1000);
    let (out, err) = run_expect(chute().args(["--url", &url_as(&db, &role), "load", "p", csv.to_str().unwrap()]), 0);
    assert!(err.contains("not directly into") && err.contains("through the parent"), "{err}");
    assert_eq!(summary_value(&out, "rows loaded"), "1000", "{out}");
    let n: i64 = c.query_one("SELECT count(*) FROM p", &[]).await.unwrap().get(0);
    assert_eq!(n, 1000);
}

#[tokio::test]
async fn missing_privileges_are_named_with_the_grant_that_fixes_them() {
    let db = shared().fresh_db("priv_missing").await;
    let c = db.client().await;
    create_time_partitioned(&db.url(), "p", COLS, "1d", &["--premake", "2"]);
    let role = make_role(&db, &c, "none").await;
    let dir = open_tempdir();
    let csv = dir.path().join("r.csv");
    write_csv(&csv, 100);
    let csv = csv.to_str().unwrap();
    let url = url_as(&db, &role);

    // No INSERT on the table at all.
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "p", csv]), 2);
    assert!(err.contains(&format!("GRANT INSERT ON \"public\".\"p\" TO \"{role}\"")) && err.contains("42501"), "{err}");

    // INSERT, but nothing on schema chute: the journal's GRANTs, no "db error".
    c.batch_execute(&format!("GRANT INSERT ON ALL TABLES IN SCHEMA public TO \"{role}\"")).await.unwrap();
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "p", csv]), 2);
    assert!(err.contains(&format!("GRANT USAGE ON SCHEMA chute TO \"{role}\"")) && err.contains("42501"), "{err}");
    assert!(!err.contains("db error"), "{err}");
    // Following the message's advice is enough.
    grant_journal(&c, &role).await;
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "p", csv]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "100", "{out}");

    // Storing a policy needs more than a load: refused before anything is created.
    let (_, err) =
        run_expect(chute().args(["--url", &url, "partition", "create", "q", "--columns", COLS, "--key", "time", "--interval", "1d"]), 2);
    assert!(err.contains("GRANT SELECT, INSERT, UPDATE, DELETE ON chute.partition_config"), "{err}");
    let exists: bool = c.query_one("SELECT to_regclass('public.q') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(!exists, "nothing was created");
}

#[tokio::test]
async fn a_role_that_does_not_own_the_table_gets_no_just_in_time_partitions() {
    let db = shared().fresh_db("priv_not_owner").await;
    let c = db.client().await;
    create_time_partitioned(&db.url(), "p", COLS, "1d", &["--premake", "1", "--max-future", "30d"]);
    let role = make_role(&db, &c, "jit").await;
    // INSERT everywhere, SELECT nowhere: reading a partition's newest key would fail.
    c.batch_execute(&format!("GRANT INSERT ON ALL TABLES IN SCHEMA public TO \"{role}\"")).await.unwrap();
    grant_journal(&c, &role).await;
    let dir = open_tempdir();
    let csv = dir.path().join("r.csv");
    let now = jiff::Timestamp::now();
    let at = |days: i64| (now + jiff::SignedDuration::from_hours(24 * days)).strftime("%Y-%m-%d %H:%M:%S+00").to_string();
    std::fs::write(&csv, format!("{},1,,now\n{},2,,in ten days\n", at(0), at(10))).unwrap();
    let rejects = format!("{}.rejects", csv.display());
    let (out, err) =
        run_expect(chute().args(["--url", &url_as(&db, &role), "load", "p", csv.to_str().unwrap(), "--reject-file", &rejects]), 1);
    assert!(err.contains("does not own") && err.contains("chute partition maintain"), "{err}");
    assert!(!err.contains("permission denied"), "{err}");
    assert_eq!(summary_value(&out, "rows loaded"), "1", "{out}");
    let rejects = std::fs::read_to_string(&rejects).unwrap();
    assert!(rejects.contains(":2: no partition"), "{rejects}");
    let leaves: i64 = c.query_one("SELECT count(*) FROM pg_partition_tree('p') WHERE isleaf", &[]).await.unwrap().get(0);
    assert_eq!(leaves, 2, "no partition was made");
}
