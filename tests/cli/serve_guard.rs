//! `chute serve` against careless and hostile requests (issue 26): where it
//! may write (never a system schema or chute's own, by default only tables
//! with a chute policy), `chute serve --check` and a least-privilege role,
//! an `Idempotency-Key` reused for another request, names PostgreSQL would
//! cut, duplicate tags, and bodies that are not text.

use chute_testkit::{TestDb, shared};

use super::serve::{Server, post};
use crate::common::{chute, create_time_partitioned, run};

const CPU: &str = "time timestamptz not null, host text, usage float8";

/// The body's JSON, or a panic showing it.
fn json(text: &str) -> serde_json::Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn system_catalogs_chutes_schema_and_unmanaged_tables_are_refused_before_any_row_moves() {
    let db = shared().fresh_db("serve_guard").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    c.batch_execute("CREATE TABLE plain (time timestamptz not null, usage float8)").await.unwrap();
    let role = format!("evil_{}", db.name);
    // Even told to write everywhere, serve never writes to a system schema or to chute's own.
    let s = Server::start(&url, &["--create-tables", "--allow-table", "*", "--allow-table", "pg_catalog.*", "--allow-table", "chute.*"]);
    let csv = [("Content-Type", "text/csv")];
    let evil = format!("99999,{role},t,t,t,t,t,f,f,-1,,\n");
    for target in ["pg_catalog.pg_authid", "pg_authid", "chute.load_journal", "information_schema.sql_features", "pg_toast.x"] {
        let (status, text) = post(&format!("{}/v1/tables/{target}", s.base), &csv, evil.as_bytes());
        assert_eq!(status, 403, "{target}: {text}");
        let v = json(&text);
        let message = v["message"].as_str().unwrap();
        assert!(message.contains("chute serve does not write to") && message.contains("schema"), "{target}: {text}");
        assert_eq!(v["rows_committed"], 0, "{text}");
    }
    assert_eq!(count(&c, &format!("SELECT count(*) FROM pg_roles WHERE rolname = '{role}'")).await, 0, "no role was made");
    // Line protocol into information_schema (db=): refused, and nothing is created there.
    let (status, text) = post(&format!("{}/write?db=information_schema", s.base), &[], b"m1 f=1 1700000000000000000\n");
    assert_eq!(status, 400, "{text}");
    assert!(json(&text)["rejected"][0]["reason"].as_str().unwrap().contains("information_schema"), "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM pg_class WHERE relname = 'm1'").await, 0, "information_schema.m1 was made");
    let (status, text) = post(&format!("{}/write?db=chute", s.base), &[], b"evil f=1 1700000000000000000\n");
    assert_eq!(status, 400, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM pg_class WHERE relname = 'evil'").await, 0);
    drop(s);

    // By default: only tables with a chute policy; a hand-made one is refused, naming itself and the flag.
    let s = Server::start(&url, &[]);
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[], b"plain usage=1 1700000000000000000\n");
    assert_eq!(status, 400, "{text}");
    let reason = json(&text)["rejected"][0]["reason"].as_str().unwrap().to_owned();
    assert!(reason.contains("public.plain") && reason.contains("--allow-table public.plain"), "{reason}");
    let (status, text) = post(&format!("{}/v1/tables/plain", s.base), &csv, b"2023-11-14 22:13:20+00,1\n");
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("--allow-table"), "{text}");
    assert_eq!(post(&format!("{}/write?db=public", s.base), &[], b"cpu,host=a usage=1 1700000000000000000\n").0, 204);
    assert_eq!(count(&c, "SELECT count(*) FROM plain").await, 0);
    drop(s);
    // Admitted by a pattern, it is written.
    let s = Server::start(&url, &["--allow-table", "public.pl*"]);
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[], b"plain usage=1 1700000000000000000\n");
    assert_eq!(status, 204, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM plain").await, 1);
}

/// A login role unique to this test database (roles are cluster-wide).
async fn make_role(db: &TestDb, c: &tokio_postgres::Client) -> String {
    let role = format!("{}_ingest", db.name);
    c.batch_execute(&format!("CREATE ROLE \"{role}\" LOGIN")).await.unwrap();
    role
}

fn url_as(db: &TestDb, role: &str) -> String {
    format!("host={} port={} user={role} dbname={}", shared().socket_dir().display(), shared().port(), db.name)
}

/// `chute serve --check` as `url`: (exit code, stdout).
fn check(url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let out = run(chute().args(["--url", url, "serve", "--check"]).args(extra));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

#[tokio::test]
async fn serve_check_verifies_an_insert_only_role_and_serve_writes_as_it() {
    let db = shared().fresh_db("serve_check").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "cpu", CPU, "1 day", &["--premake", "2"]);
    // The owner (a superuser here) has far more than serve needs.
    let (code, out) = check(&url, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("warn  role") && out.contains("superuser"), "{out}");
    assert!(out.contains("public.cpu: the role owns it"), "{out}");

    let role = make_role(&db, &c).await;
    let as_role = url_as(&db, &role);
    let (code, out) = check(&as_role, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("fail  schema chute") && out.contains("GRANT USAGE ON SCHEMA chute TO"), "{out}");
    // What docs/serve.md recommends: chute's journal and keys, and INSERT on the table (chute copies it to the partitions it makes).
    c.batch_execute(&format!(
        "GRANT USAGE ON SCHEMA chute TO \"{role}\"; GRANT SELECT ON chute.meta, chute.partition_config TO \"{role}\";
         GRANT SELECT, INSERT, UPDATE, DELETE ON chute.loads, chute.load_journal, chute.serve_requests TO \"{role}\";
         GRANT USAGE ON SEQUENCE chute.serve_offsets TO \"{role}\";"
    ))
    .await
    .unwrap();
    let (code, out) = check(&as_role, &[]);
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains(&format!("fail  public.cpu: no INSERT: GRANT INSERT ON \"public\".\"cpu\" TO \"{role}\"")), "{out}");
    assert!(out.contains("ok    schema chute"), "{out}");
    c.batch_execute(&format!("GRANT INSERT ON cpu TO \"{role}\"")).await.unwrap();
    let leaves: Vec<String> = crate::common::column(&c, "SELECT relid::regclass::text FROM pg_partition_tree('cpu') WHERE isleaf").await;
    for leaf in &leaves {
        c.batch_execute(&format!("GRANT INSERT ON {leaf} TO \"{role}\"")).await.unwrap();
    }
    let (code, out) = check(&as_role, &[]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains(&format!("ok    public.cpu: INSERT on it and its {} partitions", leaves.len())), "{out}");
    assert!(out.contains("ok    role") && out.contains("ok    schema chute"), "{out}");
    assert!(out.contains("has what chute serve needs, and nothing more"), "{out}");
    // Serve writes as that role: a row in a partition made ahead.
    let s = Server::start(&as_role, &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let (status, text) =
        post(&format!("{}/write?db=public", s.base), &[("Idempotency-Key", "k")], format!("cpu,host=least usage=1 {now}\n").as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    assert_eq!(count(&c, "SELECT count(*) FROM cpu WHERE host = 'least'").await, 1);
    drop(s);
    // One privilege too many is reported with the REVOKE that takes it back.
    c.batch_execute(&format!("GRANT UPDATE, DELETE ON cpu TO \"{role}\"")).await.unwrap();
    let (code, out) = check(&as_role, &[]);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains(&format!(
            "also UPDATE, DELETE: more than chute serve needs; REVOKE UPDATE, DELETE ON \"public\".\"cpu\" FROM \"{role}\""
        )),
        "{out}"
    );
}

#[tokio::test]
async fn an_idempotency_key_reused_with_another_request_gets_422_and_writes_nothing() {
    let db = shared().fresh_db("serve_reuse").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    create_time_partitioned(&url, "mem", CPU, "1 day", &[]);
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    let key = [("Idempotency-Key", "batch-7")];
    let first = b"cpu,host=a usage=1 1700000000000000000\n";
    assert_eq!(post(&write, &key, first).0, 204);
    // The same key with another body: refused, nothing written.
    let (status, text) = post(&write, &key, b"cpu,host=b usage=2 1700000000000000000\n");
    assert_eq!(status, 422, "{text}");
    let v = json(&text);
    assert!(v["message"].as_str().unwrap().contains("was already used for another request"), "{text}");
    assert_eq!(v["rows_committed"], 0, "{text}");
    // ... or another target (another table, another precision).
    assert_eq!(post(&write, &key, b"mem,host=a usage=1 1700000000000000000\n").0, 422);
    assert_eq!(post(&format!("{write}&precision=ns"), &key, first).0, 422);
    assert_eq!(post(&format!("{}/v1/tables/cpu", s.base), &key, b"2023-11-14 22:13:20+00,c,3\n").0, 422);
    // The same request again: its answer, and its rows once.
    assert_eq!(post(&write, &key, first).0, 204);
    let hosts: Vec<String> = crate::common::column(&c, "SELECT host FROM cpu UNION ALL SELECT host FROM mem ORDER BY 1").await;
    assert_eq!(hosts, vec!["a"]);
    // A key still in flight with one body, then reused: the same (after the first is answered).
    let key2 = [("Idempotency-Key", "batch-8")];
    let (s1, s2) = std::thread::scope(|scope| {
        let a = scope.spawn(|| post(&write, &key2, b"cpu,host=c usage=1 1700000000000000000\n").0);
        let b = scope.spawn(|| post(&write, &key2, b"cpu,host=d usage=1 1700000000000000000\n").0);
        (a.join().unwrap(), b.join().unwrap())
    });
    let mut got = [s1, s2];
    got.sort();
    assert_eq!(got, [204, 422]);
    assert_eq!(count(&c, "SELECT count(*) FROM cpu WHERE host IN ('c', 'd')").await, 1);
}

#[tokio::test]
async fn long_names_duplicate_tags_and_bytes_that_are_not_text_are_refused_line_by_line() {
    let db = shared().fresh_db("serve_small").await;
    let url = db.url();
    let c = db.client().await;
    let s = Server::start(&url, &["--create-tables"]);
    let write = format!("{}/write?db=public", s.base);
    let long = "k".repeat(64);
    let body = format!(
        "m,host=a v=1 1700000000000000000\nm,{long}=x v=2 1700000000000000001\nm,host=b {long}=3 1700000000000000002\n\
         m,host=c,host=d v=4 1700000000000000003\n{long} v=5 1700000000000000004\nm,host=e v=6 1700000000000000005\n"
    );
    let (status, text) = post(&write, &[], body.as_bytes());
    assert_eq!(status, 400, "{text}");
    let v = json(&text);
    let reasons: Vec<(u64, String)> =
        v["rejected"].as_array().unwrap().iter().map(|r| (r["line"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_owned())).collect();
    assert_eq!(reasons.iter().map(|r| r.0).collect::<Vec<_>>(), vec![2, 3, 4, 5], "{text}");
    for (line, reason) in &reasons[..2] {
        assert!(reason.contains("64 bytes long") && reason.contains("at most 63 bytes"), "line {line}: {reason}");
        assert!(!reason.contains("--create-tables"), "line {line}: a hint that cannot help: {reason}");
    }
    assert!(reasons[2].1.contains("tag \"host\" appears twice"), "{text}");
    assert!(reasons[3].1.contains("measurement") && reasons[3].1.contains("63 bytes"), "{text}");
    assert_eq!(v["rows_committed"], 2, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'm'::regclass AND attname LIKE 'kkk%'").await, 0);

    // A line that is not UTF-8 is rejected like any bad line; the answer has every field.
    let mut body = b"m,host=f v=7 1700000000000000006\nm,host=".to_vec();
    body.extend_from_slice(b"\xff\xfe v=8 1700000000000000007\nm,host=g v=9 1700000000000000008\n");
    let (status, text) = post(&write, &[], &body);
    assert_eq!(status, 400, "{text}");
    let v = json(&text);
    for field in ["code", "message", "error", "line", "rejected", "rows_committed"] {
        assert!(v.get(field).is_some(), "no {field}: {text}");
    }
    assert_eq!(v["line"], 2, "{text}");
    assert!(v["rejected"][0]["reason"].as_str().unwrap().contains("not UTF-8"), "{text}");
    assert_eq!(v["rows_committed"], 2, "{text}");
    let hosts: Vec<String> = crate::common::column(&c, "SELECT host FROM m ORDER BY time").await;
    assert_eq!(hosts, vec!["a", "e", "f", "g"]);
    // Refusals made before a body is read carry the same fields.
    let (status, text) = post(&format!("{write}&precision=d"), &[], b"m v=1\n");
    assert_eq!(status, 400);
    let v = json(&text);
    assert!(v["rejected"].is_array() && v["rows_committed"] == 0 && v.get("line").is_some(), "{text}");
}

/// What a request gets when chute serve itself cannot do the work (a login
/// refused, a privilege missing) is an error its operator must act on: 500,
/// naming the cause, never 503 "PostgreSQL is unreachable" (which promises
/// that waiting helps). PostgreSQL that is really gone is still 503.
#[tokio::test]
async fn a_login_refused_or_a_privilege_missing_is_not_called_unreachable() {
    use chute_testkit::{ClusterSetup, TestCluster};
    let cluster = TestCluster::start_with(&ClusterSetup {
        tcp: true,
        hba: &["host all pw_user 127.0.0.1/32 scram-sha-256", "host all all 127.0.0.1/32 trust"],
        ..Default::default()
    });
    let db = cluster.fresh_db("guard_login").await;
    let admin = db.client().await;
    admin
        .batch_execute(
            "SET password_encryption = 'scram-sha-256'; CREATE ROLE pw_user LOGIN PASSWORD 'right';
             CREATE ROLE weak LOGIN; CREATE TABLE public.m (time timestamptz not null, v float8);
             GRANT INSERT, SELECT ON public.m TO weak;
             -- The chute schema exists, owned by the superuser: `weak` may not use it.
             CREATE SCHEMA chute",
        )
        .await
        .unwrap();
    let port = cluster.port();
    let line = b"m v=1 1700000000000000000\n";
    for (who, url, expect) in [
        (
            "a wrong password",
            format!("postgresql://pw_user:wrong@127.0.0.1:{port}/{}?sslmode=disable", db.name),
            "password authentication failed",
        ),
        ("no privilege on chute", format!("postgresql://weak@127.0.0.1:{port}/{}?sslmode=disable", db.name), "permission denied"),
    ] {
        let s = Server::start(&url, &["--allow-table", "public.m", "--request-timeout", "10s"]);
        let (status, text) = post(&format!("{}/write?db=public", s.base), &[("Idempotency-Key", "k1")], line);
        assert_eq!(status, 500, "{who}: {text}\n{}", s.log());
        assert!(text.contains(expect) && !text.contains("unreachable"), "{who}: {text}");
        let (status, text) = post(&format!("{}/write?db=public", s.base), &[], line);
        assert_eq!(status, 500, "{who}, without a key: {text}\n{}", s.log());
        assert!(text.contains(expect) && !text.contains("unreachable"), "{who}: {text}");
    }
}
