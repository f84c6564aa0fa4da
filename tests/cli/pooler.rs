//! chute behind PgBouncer (Debian's package, started by the fixture like the
//! clusters): through a session-mode pool everything works as direct, and
//! the same load twice is exactly once (never a false "already running");
//! through a transaction- or statement-mode pool every writer is refused
//! before anything moves, with the pool mode and the fix named, as often as
//! it is run. `chute consume` through a session pool loads a topic once,
//! also when a consumer is killed mid-topic and another finishes it.

use std::io::Write;

use std::process::Stdio;
use std::time::Duration;

use chute_testkit::kafka::{self, Message};
use chute_testkit::pgbouncer::{PgBouncer, PoolMode};
use chute_testkit::process::spawn;
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value, wait_for};
use crate::serve::{Server, post};

/// `n` rows `time,dev,v` a minute apart from 2024-01-01, with `v = k * scale`.
fn write_rows(path: &std::path::Path, n: u64, scale: i64) {
    let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for k in 0..n {
        let t = base + jiff::SignedDuration::from_secs(60 * k as i64);
        writeln!(f, "{},{},{}", t.strftime("%Y-%m-%d %H:%M:%S+00"), k % 10, k as i64 * scale).unwrap();
    }
    f.flush().unwrap();
}

async fn one_i64(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn a_session_pool_loads_upserts_and_serves_exactly_once() {
    let db = shared().fresh_db("pool_session").await;
    let c = db.client().await;
    let bouncer = PgBouncer::start(shared(), PoolMode::Session);
    let url = bouncer.options(&db.name).display_url();
    create_time_partitioned(&url, "m", "time timestamptz not null, dev int not null, v bigint", "1 day", &[]);
    c.batch_execute("ALTER TABLE m ADD PRIMARY KEY (dev, time)").await.unwrap();
    let dir = open_tempdir();
    write_rows(&dir.path().join("a.csv"), 20_000, 1);
    let load = |file: &str, extra: &[&str]| {
        let mut cmd = chute();
        cmd.current_dir(dir.path()).args(["--url", &url, "load", "m", file]).args(extra);
        cmd
    };
    let (out, err) = run_expect(&mut load("a.csv", &[]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "20000", "{out}\n{err}");
    // The same command again, through a pooled server session the first run used: not "already running", nothing twice.
    for _ in 0..3 {
        let (_, err) = run_expect(&mut load("a.csv", &[]), 0);
        assert!(!err.contains("already running"), "{err}");
        assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_000);
    }
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_000);
    // An upsert through the pool: every row's value replaced once.
    write_rows(&dir.path().join("b.csv"), 20_000, -1);
    run_expect(&mut load("b.csv", &["--on-conflict", "update"]), 0);
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m WHERE v > 0").await, 0);
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_000);
    // serve through the pool.
    let s = Server::start(&url, &["--schema", "public"]);
    let csv = "time,dev,v\n2025-01-01 00:00:00+00,1,5\n2025-01-02 00:00:00+00,2,6\n";
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &[("Content-Type", "text/csv")], csv.as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 20_002);
}

/// `n` messages `time,dev,v` (the rows of [`write_rows`], `v = k`) on `partitions` partitions of `topic`.
fn produce_rows(broker: &kafka::Broker, topic: &str, n: u64, partitions: u64) {
    let base: jiff::Timestamp = "2024-01-01T00:00:00Z".parse().unwrap();
    let p = broker.producer();
    for k in 0..n {
        let t = base + jiff::SignedDuration::from_secs(60 * k as i64);
        let line = format!("{},{},{k}", t.strftime("%Y-%m-%d %H:%M:%S+00"), k % 10);
        p.send(topic, &Message { partition: Some((k % partitions) as i32), payload: line.as_bytes(), ..Message::default() });
    }
    p.flush();
}

fn consume(url: &str, broker: &kafka::Broker, topic: &str, extra: &[&str]) -> std::process::Command {
    let mut cmd = chute();
    cmd.args(["--url", url, "consume", "m", "--brokers", &broker.bootstrap(), "--topic", topic, "--format", "csv"]).args(extra);
    cmd
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_through_a_session_pool_is_exactly_once_across_a_kill_9() {
    const N: u64 = 100_000;
    const TOPIC: &str = "pool_session_consume";
    let db = shared().fresh_db("pool_consume").await;
    let c = db.client().await;
    let bouncer = PgBouncer::start(shared(), PoolMode::Session);
    let url = bouncer.options(&db.name).display_url();
    create_time_partitioned(&url, "m", "time timestamptz not null, dev int not null, v bigint", "1 day", &[]);
    let broker = kafka::shared();
    broker.create_topic(TOPIC, 3);
    produce_rows(broker, TOPIC, N, 3);
    // A static member: the next consumer takes the killed one's place at once, not after its session times out.
    let args = ["--until-end", "--batch-rows", "1000", "--kafka-option", "group.instance.id=pool-kill"];
    let mut first = spawn(consume(&url, broker, TOPIC, &args).stdout(Stdio::null()).stderr(Stdio::null()));
    wait_for("the first consumer to commit rows", Duration::from_secs(60), || async {
        one_i64(&c, "SELECT count(*) FROM m").await >= 10_000
    })
    .await;
    first.kill();
    let killed_at = one_i64(&c, "SELECT count(*) FROM m").await;
    assert!(killed_at < N as i64, "killed mid-topic: {killed_at} rows were in by then");
    // Through the same pool (the server sessions the killed consumer had): not "already running", nothing twice.
    let (out, err) = run_expect(&mut consume(&url, broker, TOPIC, &args), 0);
    assert!(!err.contains("already running"), "{err}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, N as i64, "{out}\n{err}");
    assert_eq!(one_i64(&c, "SELECT count(DISTINCT v) FROM m").await, N as i64, "{out}\n{err}");
    assert_eq!(one_i64(&c, "SELECT sum(v)::int8 FROM m").await, (N * (N - 1) / 2) as i64);
    // Once more: nothing new, nothing twice.
    let (out, err) = run_expect(&mut consume(&url, broker, TOPIC, &args), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{out}\n{err}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, N as i64);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_transaction_or_statement_pool_is_refused_before_anything_moves() {
    let db = shared().fresh_db("pool_transaction").await;
    let c = db.client().await;
    let dir = open_tempdir();
    write_rows(&dir.path().join("a.csv"), 1_000, 1);
    let broker = kafka::shared();
    broker.create_topic("pool_refused_consume", 1);
    produce_rows(broker, "pool_refused_consume", 1_000, 1);
    // The table is made straight on the server: chute refuses to make it through such a pool.
    create_time_partitioned(&db.url(), "m", "time timestamptz not null, dev int not null, v bigint", "1 day", &[]);
    for mode in [PoolMode::Transaction, PoolMode::Statement] {
        let bouncer = PgBouncer::start(shared(), mode);
        let url = bouncer.options(&db.name).display_url();
        let refused = |what: &str, err: &str| {
            assert!(err.contains("transaction or statement pooling mode"), "{mode:?}, {what}: {err}");
            assert!(err.contains("pool_mode = session"), "{mode:?}, {what}: the fix is named: {err}");
            assert!(!err.contains("already running"), "{mode:?}, {what}: {err}");
        };
        // Twice: the second run finds no lock left behind by the first.
        for _ in 0..2 {
            let out = chute().current_dir(dir.path()).args(["--url", &url, "load", "m", "a.csv"]).output().unwrap();
            assert!(!out.status.success(), "{mode:?}: load must fail");
            refused("load", &String::from_utf8_lossy(&out.stderr));
        }
        let out = chute()
            .args([
                "--url",
                &url,
                "partition",
                "create",
                "n",
                "--columns",
                "time timestamptz not null",
                "--key",
                "time",
                "--interval",
                "1 day",
            ])
            .output()
            .unwrap();
        assert!(!out.status.success(), "{mode:?}: partition create must fail");
        refused("partition create", &String::from_utf8_lossy(&out.stderr));
        let out = chute().args(["--url", &url, "serve", "--listen", "127.0.0.1:0"]).output().unwrap();
        assert!(!out.status.success(), "{mode:?}: serve must not start");
        refused("serve", &String::from_utf8_lossy(&out.stderr));
        let out = consume(&url, broker, "pool_refused_consume", &["--until-end"]).output().unwrap();
        assert!(!out.status.success(), "{mode:?}: consume must fail");
        refused("consume", &String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 0, "nothing was written");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM chute.load_positions").await, 0, "no position was kept");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM chute.loads").await, 0, "no load was registered");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM pg_class WHERE relname = 'n'").await, 0, "nothing was made");
    // And directly, the same command loads.
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "m", "a.csv"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1000", "{out}");
}
