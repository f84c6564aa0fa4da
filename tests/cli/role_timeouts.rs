//! A DBA's settings on chute's role: `statement_timeout`,
//! `idle_in_transaction_session_timeout`, `idle_session_timeout` and
//! `lock_timeout` of one second and `default_transaction_read_only = on`.
//! chute turns all but `lock_timeout` off in its own sessions (see
//! `connect/own_settings.rs`), so a COPY that takes longer than a second, a
//! migration's split and a serve run whose sessions sit idle past a second
//! all succeed.

use std::io::Write;

use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value, wait_for};
use crate::serve::{Server, post};

/// A role that owns `db`, with a DBA's tight settings.
async fn tight_role(c: &tokio_postgres::Client, db: &str, role: &str) -> String {
    c.batch_execute(&format!(
        "CREATE ROLE \"{role}\" LOGIN;
         ALTER DATABASE \"{db}\" OWNER TO \"{role}\";
         ALTER ROLE \"{role}\" SET statement_timeout = '1s';
         ALTER ROLE \"{role}\" SET idle_in_transaction_session_timeout = '1s';
         ALTER ROLE \"{role}\" SET lock_timeout = '1s';
         ALTER ROLE \"{role}\" SET idle_session_timeout = '1s';
         ALTER ROLE \"{role}\" SET default_transaction_read_only = on"
    ))
    .await
    .unwrap();
    format!("host={} port={} user={role} dbname={db}", shared().socket_dir().display(), shared().port())
}

async fn one_i64(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn a_role_with_one_second_timeouts_and_read_only_default_loads_splits_and_serves() {
    let db = shared().fresh_db("role_timeouts").await;
    let c = db.client().await;
    let url = tight_role(&c, &db.name, "tight").await;
    // The role's settings hold in a session of its own: a plain write fails, a long statement is cancelled.
    let (probe, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    let e = probe.batch_execute("CREATE TABLE probe (x int)").await.unwrap_err();
    assert_eq!(e.code(), Some(&tokio_postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION), "{e}");
    let e = probe.batch_execute("SELECT pg_sleep(1.5)").await.unwrap_err();
    assert_eq!(e.code(), Some(&tokio_postgres::error::SqlState::QUERY_CANCELED), "{e}");

    create_time_partitioned(&url, "m", "time timestamptz not null, dev int not null, v bigint", "1 day", &[]);
    // Every row costs a fifth of a millisecond: one COPY of 20,000 rows takes four seconds.
    c.batch_execute(
        "CREATE FUNCTION slow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(0.0002); RETURN NEW; END $$;
         CREATE TRIGGER slow BEFORE INSERT ON m FOR EACH ROW EXECUTE FUNCTION slow()",
    )
    .await
    .unwrap();
    let dir = open_tempdir();
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.path().join("a.csv")).unwrap());
        // Within the next hour: partitions `partition create` made ahead of now.
        let now = jiff::Timestamp::now();
        for k in 0..20_000i64 {
            let t = now + jiff::SignedDuration::from_secs(k % 3_600);
            writeln!(f, "{},{},{k}", t.strftime("%Y-%m-%d %H:%M:%S+00"), k % 7).unwrap();
        }
    }
    let out =
        chute().current_dir(dir.path()).args(["--url", &url, "load", "m", "a.csv", "--batch-mb", "8", "--workers", "1"]).output().unwrap();
    let (text, err) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let rejects = std::fs::read_to_string(dir.path().join("a.csv.rejects")).unwrap_or_default();
    assert!(out.status.success(), "{text}\n{err}\n{}", &rejects[..rejects.len().min(2000)]);
    assert_eq!(summary_value(&text, "rows loaded"), "20000", "{text}\n{err}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_000);
    c.batch_execute("DROP TRIGGER slow ON m").await.unwrap();

    // A migration and its split, as the role.
    c.batch_execute(
        "CREATE TABLE orders (id bigserial PRIMARY KEY, time timestamptz NOT NULL, note text);
         INSERT INTO orders (time, note) SELECT now() - i * interval '1 minute', 'n' || i FROM generate_series(1, 50000) i;
         ALTER TABLE orders OWNER TO tight",
    )
    .await
    .unwrap();
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--key", "time", "--interval", "1d", "--extend-primary-key"]), 0);
    run_expect(chute().args(["--url", &url, "migrate", "orders", "--split", "--batch-rows", "5000"]), 0);
    assert_eq!(one_i64(&c, "SELECT count(*) FROM orders").await, 50_000);

    // serve: a request, its sessions idle past the role's timeouts, another request.
    let s = Server::start(&url, &["--schema", "public"]);
    let soon = (jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60)).strftime("%Y-%m-%d %H:%M:%S+00").to_string();
    let csv = |v: u32| format!("time,dev,v\n{soon},1,{v}\n");
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &[("Content-Type", "text/csv")], csv(1).as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    wait_for("serve's sessions idle for longer than the role's timeouts", std::time::Duration::from_secs(30), || async {
        one_i64(
            &c,
            "SELECT count(*) FROM pg_stat_activity WHERE usename = 'tight' AND state LIKE 'idle%'
               AND state_change < now() - interval '1.5 s'",
        )
        .await
            > 0
    })
    .await;
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &[("Content-Type", "text/csv")], csv(2).as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_002);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    assert!(!log.contains("statement timeout") && !log.contains("idle-in-transaction") && !log.contains("idle-session"), "{log}");
}
