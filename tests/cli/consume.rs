//! `chute consume` against a real Apache Kafka broker (KRaft, the fixture's)
//! and a real PostgreSQL server: every message once, also across kill -9,
//! a broker restart and a rebalance between two consumers of one group;
//! poison messages to the reject file with their offset; offsets the
//! broker's own consumer-group tool sees; no secret in any output.

use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::kafka::{self, Message};
use chute_testkit::process::{ChildGuard, exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect};

/// `n` JSON messages from `first`, ids `first..first+n`, spread over `partitions`,
/// times over the last two days (hourly partitions: ~48 leaves).
fn produce(broker: &kafka::Broker, topic: &str, first: u64, n: u64, partitions: i32) -> Vec<String> {
    let p = broker.producer();
    let now = jiff::Timestamp::now().as_second();
    let mut lines = Vec::with_capacity(n as usize);
    for i in first..first + n {
        let t = jiff::Timestamp::from_second(now - 3600 - (i as i64 * 7919) % (47 * 3600)).unwrap();
        let line = format!(r#"{{"id": {i}, "time": "{}", "v": {}}}"#, t.strftime("%Y-%m-%dT%H:%M:%SZ"), i as f64 * 0.25);
        p.send(topic, &Message { partition: Some((i % partitions as u64) as i32), payload: line.as_bytes(), ..Message::default() });
        lines.push(line);
    }
    p.flush();
    lines
}

/// The reject file a consumer of `topic` wrote in `dir` (its default name).
fn rejects_of(dir: &tempfile::TempDir, topic: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(dir.path().join(format!("{topic}.rejects"))).unwrap()).into_owned()
}

fn table(url: &str, name: &str) {
    create_time_partitioned(url, name, "id bigint, time timestamptz not null, v float8", "1h", &[]);
}

/// (rows, distinct ids, a checksum of every row's values in id order).
async fn contents(c: &tokio_postgres::Client, table: &str) -> (i64, i64, String) {
    let r = c
        .query_one(
            &format!("SELECT count(*), count(DISTINCT id), coalesce(md5(string_agg(format('%s|%s|%s', id, time, v), ',' ORDER BY id)), '') FROM {table}"),
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

pub(crate) async fn count(c: &tokio_postgres::Client, table: &str) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM {table}"), &[]).await.unwrap().get(0)
}

/// Waits until `table` holds at least `n` rows.
pub(crate) async fn until_rows(c: &tokio_postgres::Client, table: &str, n: i64, limit: Duration) {
    if let Err(e) = rows_reached(c, table, n, limit).await {
        panic!("{e}");
    }
}

/// Waits until `table` holds at least `n` rows; when it does not, the
/// consumers are killed and what they printed is in the panic.
async fn until_rows_of(c: &tokio_postgres::Client, table: &str, n: i64, limit: Duration, consumers: &mut [&mut ChildGuard]) {
    let Err(e) = rows_reached(c, table, n, limit).await else { return };
    let mut said = String::new();
    for (i, child) in consumers.iter_mut().enumerate() {
        child.kill();
        let mut err = String::new();
        if let Some(mut s) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut s, &mut err);
        }
        said.push_str(&format!("\n--- stderr of consumer {i}:\n{err}"));
    }
    panic!("{e}{said}");
}

async fn rows_reached(c: &tokio_postgres::Client, table: &str, n: i64, limit: Duration) -> Result<(), String> {
    let began = Instant::now();
    loop {
        let now = count(c, table).await;
        if now >= n {
            return Ok(());
        }
        if began.elapsed() >= limit {
            return Err(format!("{table}: {now} rows after {limit:?}, waiting for {n}"));
        }
        // Polling pace; the deadline is `limit`.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub(crate) fn consume(url: &str, brokers: &str, table: &str, topic: &str, extra: &[&str]) -> std::process::Command {
    let mut cmd = chute();
    cmd.args(["--url", url, "consume", table, "--brokers", brokers, "--topic", topic]).args(extra);
    cmd
}

/// `chute consume` started with its output piped, killed if the test ends first.
pub(crate) fn start(cmd: &mut std::process::Command) -> ChildGuard {
    spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()))
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_on_six_partitions_load_once_with_the_values_of_chute_load() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_messages_on_six_part").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_basic", 6);
    let lines = produce(broker, "consume_basic", 0, 100_000, 6);
    table(&url, "consume_basic");
    table(&url, "consume_basic_file");
    let dir = open_tempdir();
    let file = dir.path().join("rows.jsonl");
    std::fs::write(&file, lines.join("\n") + "\n").unwrap();
    run_expect(chute().args(["--url", &url, "load", "consume_basic_file", file.to_str().unwrap(), "--format", "jsonl"]), 0);
    let (out, _) = run_expect(
        consume(&url, &broker.bootstrap(), "consume_basic", "consume_basic", &["--until-end", "--json"]).current_dir(dir.path()),
        0,
    );
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["rows_loaded"], 100_000, "{out}");
    let (rows, ids, sum) = contents(&c, "consume_basic").await;
    assert_eq!((rows, ids), (100_000, 100_000));
    assert_eq!(sum, contents(&c, "consume_basic_file").await.2, "the consumed rows differ from chute load's");
    let leaves: i64 =
        c.query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 'consume_basic'::regclass", &[]).await.unwrap().get(0);
    assert!(leaves >= 40, "hourly partitions made just in time: {leaves}");
    // Each partition's position in the journal is its end.
    let positions = report["positions"].as_array().unwrap();
    assert_eq!(positions.len(), 6, "{out}");
    let total: u64 = positions.iter().map(|p| p["offset"].as_u64().unwrap()).sum();
    assert_eq!(total, 100_000, "{out}");
    // Again: nothing new, nothing twice.
    let (out, _) = run_expect(
        consume(&url, &broker.bootstrap(), "consume_basic", "consume_basic", &["--until-end", "--json"]).current_dir(dir.path()),
        0,
    );
    assert_eq!(serde_json::from_str::<serde_json::Value>(&out).unwrap()["rows_loaded"], 0, "{out}");
    assert_eq!(count(&c, "consume_basic").await, 100_000);
    // The broker's own tool sees the group's offsets: at the end, no lag.
    let (ok, text) = broker.tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", &["--describe", "--group", "chute"]);
    assert!(ok, "{text}");
    let described: Vec<&str> = text.lines().filter(|l| l.contains("consume_basic")).collect();
    assert_eq!(described.len(), 6, "{text}");
    for l in described {
        let f: Vec<&str> = l.split_whitespace().collect();
        // GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG …
        assert_eq!(f[3], f[4], "committed offset is not the end: {l}");
        assert_eq!(f[5], "0", "lag: {l}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_at_five_points_loses_and_doubles_nothing() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_kill_9_at_five_point").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_kill", 3);
    table(&url, "consume_kill");
    let dir = open_tempdir();
    let mut produced = 0u64;
    for round in 0..5u64 {
        let before = count(&c, "consume_kill").await;
        let child = start(
            // A static member: the next one takes the killed one's place at once, not after its session times out.
            consume(
                &url,
                &broker.bootstrap(),
                "consume_kill",
                "consume_kill",
                &["--batch-rows", "300", "--workers", "2", "--kafka-option", "group.instance.id=kill-test"],
            )
            .current_dir(dir.path()),
        );
        // A different point each round: some rows of this round in, not all.
        let at = before + 1 + (round as i64 * 3271) % 15_000;
        // A live stream: messages come in bursts while the consumer runs, and
        // it is killed between two bursts once it passed that point (the
        // bursts after the kill are for the next round's consumer).
        let mut child = Some(child);
        for _ in 0..10 {
            produce(broker, "consume_kill", produced, 2_000, 3);
            produced += 2_000;
            if child.is_some() && count(&c, "consume_kill").await >= at {
                child.take().unwrap().kill();
            }
        }
        if let Some(mut child) = child {
            until_rows(&c, "consume_kill", at, Duration::from_secs(60)).await;
            child.kill();
        }
        let now = count(&c, "consume_kill").await;
        assert!(now < produced as i64 || round == 4, "round {round}: the consumer was killed only after it loaded every row ({now})");
    }
    let (out, _) = run_expect(
        consume(
            &url,
            &broker.bootstrap(),
            "consume_kill",
            "consume_kill",
            &["--until-end", "--kafka-option", "group.instance.id=kill-test"],
        )
        .current_dir(dir.path()),
        0,
    );
    let (rows, ids, _) = contents(&c, "consume_kill").await;
    assert_eq!((rows, ids), (produced as i64, produced as i64), "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_broker_restart_and_a_rebalance_lose_and_double_nothing_and_sigterm_exits_143() {
    let pg = shared().fresh_db("c_a_broker_restart_and").await;
    let broker = kafka::Broker::start(&kafka::BrokerSetup::default());
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_rebalance", 4);
    table(&url, "consume_rebalance");
    let dir = open_tempdir();
    let session = [
        ["--batch-rows", "500", "--kafka-option", "session.timeout.ms=6000", "--kafka-option", "heartbeat.interval.ms=500"].as_slice(),
        &["--report-every", "1s"],
    ]
    .concat();
    let mut a = start(consume(&url, &broker.bootstrap(), "consume_rebalance", "consume_rebalance", &session).current_dir(dir.path()));
    produce(&broker, "consume_rebalance", 0, 20_000, 4);
    until_rows_of(&c, "consume_rebalance", 5_000, Duration::from_secs(60), &mut [&mut a]).await;
    // A second consumer joins the group mid-run: the partitions are shared out again.
    let mut b = start(consume(&url, &broker.bootstrap(), "consume_rebalance", "consume_rebalance", &session).current_dir(dir.path()));
    produce(&broker, "consume_rebalance", 20_000, 20_000, 4);
    until_rows_of(&c, "consume_rebalance", 30_000, Duration::from_secs(90), &mut [&mut a, &mut b]).await;
    // The broker restarts under both.
    broker.restart();
    produce(&broker, "consume_rebalance", 40_000, 20_000, 4);
    until_rows_of(&c, "consume_rebalance", 50_000, Duration::from_secs(120), &mut [&mut a, &mut b]).await;
    // The second leaves (SIGTERM: it finishes its batches and exits 143).
    b.terminate();
    let out = exit_within(b, Duration::from_secs(60), "the second consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    produce(&broker, "consume_rebalance", 60_000, 20_000, 4);
    until_rows_of(&c, "consume_rebalance", 80_000, Duration::from_secs(120), &mut [&mut a]).await;
    a.terminate();
    let out = exit_within(a, Duration::from_secs(60), "the first consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let (rows, ids, _) = contents(&c, "consume_rebalance").await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!((rows, ids), (80_000, 80_000), "stderr of the first consumer:\n{stderr}");
    // Its progress counts the consumer's rows over every run the rebalances
    // made: never back to 0 (a run's own count starts there; subtracting
    // the last line's count from it panicked the consumer).
    let counts: Vec<u64> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("chute: at ")?.split_once(": ")?.1.split_once(" rows loaded")?.0.parse().ok())
        .collect();
    assert!(counts.len() >= 2, "too few progress lines to compare:\n{stderr}");
    assert!(counts.windows(2).all(|w| w[0] <= w[1]), "the progress went back: {counts:?}\n{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_poison_message_goes_to_the_reject_file_or_the_dead_letter_topic_with_its_offset() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_a_poison_message_goe").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_poison", 1);
    table(&url, "consume_poison");
    produce(broker, "consume_poison", 0, 10, 1);
    let p = broker.producer();
    p.send("consume_poison", &Message { partition: Some(0), payload: b"{\"id\": 10, \"time\": \"not a time\"}", ..Message::default() });
    p.send("consume_poison", &Message { partition: Some(0), payload: b"\xff\xfe not json", ..Message::default() });
    p.flush();
    produce(broker, "consume_poison", 11, 10, 1);
    let dir = open_tempdir();
    let (out, err) =
        run_expect(consume(&url, &broker.bootstrap(), "consume_poison", "consume_poison", &["--until-end"]).current_dir(dir.path()), 1);
    assert_eq!(count(&c, "consume_poison").await, 20, "{out}{err}");
    let rejects = rejects_of(&dir, "consume_poison");
    // Each with its partition and offset, and the reason.
    assert!(rejects.contains("# consume_poison/0:10: ") && rejects.contains("# consume_poison/0:11: "), "{rejects}");
    assert!(rejects.contains("\"not a time\"") && rejects.contains("expected a JSON object"), "{rejects}");
    // Or to a dead-letter topic: each bad message with its partition, offset and reason in headers.
    broker.create_topic("consume_poison_dlt", 1);
    table(&url, "consume_poison_dlt");
    run_expect(
        consume(
            &url,
            &broker.bootstrap(),
            "consume_poison_dlt",
            "consume_poison",
            &["--until-end", "--group", "dlt", "--dead-letter-topic", "consume_poison_dlt"],
        )
        .current_dir(dir.path()),
        1,
    );
    assert_eq!(count(&c, "consume_poison_dlt").await, 20);
    let dead = dead_letters(broker, "consume_poison_dlt", 2);
    assert_eq!(dead.len(), 2, "{dead:?}");
    assert_eq!((dead[0].0.as_str(), dead[0].1.as_str()), ("consume_poison/0", "10"), "{dead:?}");
    assert!(dead[0].2.contains("not a time") && dead[0].3.contains("not a time"), "{dead:?}");
    assert_eq!((dead[1].0.as_str(), dead[1].1.as_str()), ("consume_poison/0", "11"), "{dead:?}");
    // --max-rejects stops a consumer that rejects more than that.
    table(&url, "consume_poison_limit");
    let (_, err) = run_expect(
        consume(
            &url,
            &broker.bootstrap(),
            "consume_poison_limit",
            "consume_poison",
            &["--until-end", "--max-rejects", "1", "--group", "limit"],
        )
        .current_dir(dir.path()),
        2,
    );
    assert!(err.contains("more than 1 rows were rejected"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_json_key_the_table_lacks_is_rejected_with_its_offset_unless_ignored() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_unknown_keys").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_keys", 1);
    produce(broker, "consume_keys", 0, 5, 1);
    let p = broker.producer();
    let time = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(7200)).strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    for bad in [format!(r#"{{"id": 5, "time": "{time}", "vv": 1}}"#), format!(r#"{{"ID": 6, "time": "{time}"}}"#)] {
        p.send("consume_keys", &Message { partition: Some(0), payload: bad.as_bytes(), ..Message::default() });
    }
    p.flush();
    produce(broker, "consume_keys", 7, 5, 1);
    let dir = open_tempdir();
    for t in ["consume_keys", "consume_keys_ignored", "consume_keys_limit"] {
        table(&url, t);
    }
    let (out, err) =
        run_expect(consume(&url, &broker.bootstrap(), "consume_keys", "consume_keys", &["--until-end"]).current_dir(dir.path()), 1);
    assert_eq!(count(&c, "consume_keys").await, 10, "{out}{err}");
    let rejects = rejects_of(&dir, "consume_keys");
    assert!(
        rejects.contains(
            "# consume_keys/0:5: unknown column \"vv\": the table has no such column; add it, or load with --ignore-unknown to drop such keys"
        ),
        "{rejects}"
    );
    assert!(rejects.contains("# consume_keys/0:6: unknown column \"ID\": the table has no such column (did you mean id?"), "{rejects}");
    // --ignore-unknown: every message loads, the unknown keys dropped.
    let args = ["--until-end", "--group", "ignoring", "--ignore-unknown"];
    run_expect(consume(&url, &broker.bootstrap(), "consume_keys_ignored", "consume_keys", &args).current_dir(dir.path()), 0);
    assert_eq!(count(&c, "consume_keys_ignored").await, 12);
    // --max-rejects counts rows, a chunk at a time (docs/consume.md): the chunk
    // that passed the limit is filed whole, its good rows committed, its bad
    // ones in the reject file, and the consumer stops after it.
    let args = ["--until-end", "--group", "limit", "--max-rejects", "0", "--reject-file", "limit.rejects"];
    let (out, err) = run_expect(consume(&url, &broker.bootstrap(), "consume_keys_limit", "consume_keys", &args).current_dir(dir.path()), 2);
    let limited = std::fs::read_to_string(dir.path().join("limit.rejects")).unwrap();
    assert_eq!((count(&c, "consume_keys_limit").await, limited.matches("# consume_keys/0:").count()), (10, 2), "{out}{err}");
    assert!(out.contains("committed through   consume_keys/0 offset 12"), "{out}");
    let (_, err) =
        run_expect(&mut consume(&url, &broker.bootstrap(), "consume_keys", "consume_keys", &["--format", "csv", "--ignore-unknown"]), 2);
    assert!(err.contains("--ignore-unknown") && err.contains("--format json"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_topic_is_refused_and_no_secret_is_shown() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_a_missing_topic_is_r").await;
    let url = pg.url();
    table(&url, "consume_refused");
    let (_, err) = run_expect(&mut consume(&url, &broker.bootstrap(), "consume_refused", "no_such_topic", &["--until-end"]), 2);
    assert!(err.contains("\"no_such_topic\" does not exist"), "{err}");
    // A bad librdkafka setting: the error names the setting, never the password given with it.
    let (out, err) = run_expect(
        &mut consume(
            &url,
            &broker.bootstrap(),
            "consume_refused",
            "no_such_topic",
            &["--kafka-option", "sasl.password=hunter2-secret", "--kafka-option", "security.protocol=bogus"],
        ),
        2,
    );
    assert!(!out.contains("hunter2") && !err.contains("hunter2"), "{out}{err}");
    assert!(err.contains("security.protocol"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_running_consumer_shows_its_offsets_to_lag_tools_and_on_metrics() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_lag").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_lag", 2);
    table(&url, "consume_lag");
    let dir = open_tempdir();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let listen = format!("127.0.0.1:{port}");
    let mut child = start(
        consume(&url, &broker.bootstrap(), "consume_lag", "consume_lag", &["--group", "lag", "--metrics-listen", &listen])
            .current_dir(dir.path()),
    );
    produce(broker, "consume_lag", 0, 1_000, 2);
    until_rows(&c, "consume_lag", 1_000, Duration::from_secs(60)).await;
    // While it runs, the broker's own tool sees each partition committed to its end.
    let began = Instant::now();
    loop {
        let (ok, text) = broker.tool("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", &["--describe", "--group", "lag"]);
        let lags: Vec<String> =
            text.lines().filter(|l| l.contains("consume_lag")).map(|l| l.split_whitespace().nth(5).unwrap_or("?").to_owned()).collect();
        if ok && lags.len() == 2 && lags.iter().all(|l| l == "0") {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(60), "the group's offsets did not reach the end while the consumer ran:\n{text}");
        // Polling pace (each look starts a JVM); the deadline is above.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // And chute's journal has each partition's position at its end while the
    // run goes on (a kill -9 now would read nothing again).
    let positions: i64 = c
        .query_one("SELECT sum(position)::int8 FROM chute.load_positions WHERE load_id = 'kafka:lag:consume_lag:consume_lag'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(positions, 1_000);
    // GET /metrics: rows, bytes, batch commit times and the lag of each partition.
    let began = Instant::now();
    loop {
        let text = ureq::get(&format!("http://{listen}/metrics"))
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default();
        let has = |line: &str| text.lines().any(|l| l == line);
        if has("chute_consume_rows_total 1000")
            && has("chute_consume_lag{partition=\"consume_lag/0\"} 0")
            && has("chute_consume_lag{partition=\"consume_lag/1\"} 0")
            && text.contains("chute_batch_commit_seconds_count")
            && text.contains("chute_consume_bytes_total")
        {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "/metrics:\n{text}");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    child.terminate();
    let out = exit_within(child, Duration::from_secs(60), "the consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test(flavor = "multi_thread")]
async fn tls_with_sasl_plain_and_no_password_in_any_output() {
    let key = rcgen::KeyPair::generate().unwrap();
    // The brokers are reached (and advertise themselves) at 127.0.0.1: the certificate names it.
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap().self_signed(&key).unwrap();
    let secure = kafka::Secure {
        cert_chain: cert.pem(),
        key: key.serialize_pem(),
        plain_users: vec![("plainuser".into(), "plain-pw-4711".into())],
        scram_users: vec![("scramuser".into(), "scram-pw-0815".into())],
    };
    let broker = kafka::Broker::start(&kafka::BrokerSetup { secure: Some(secure) });
    let pg = shared().fresh_db("c_tls_sasl").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_tls", 2);
    produce(&broker, "consume_tls", 0, 500, 2);
    table(&url, "consume_tls");
    let dir = open_tempdir();
    std::fs::write(dir.path().join("ca.pem"), cert.pem()).unwrap();
    let conf = |mechanism: &str, user: &str, password: &str| {
        let file = dir.path().join(format!("{mechanism}.conf"));
        let text = format!(
            "# SASL over TLS\nsecurity.protocol=SASL_SSL\nsasl.mechanism={mechanism}\nsasl.username={user}\nsasl.password={password}\nssl.ca.location={}\n",
            dir.path().join("ca.pem").display()
        );
        std::fs::write(&file, text).unwrap();
        file.to_str().unwrap().to_owned()
    };
    // SASL/PLAIN over TLS, given on the command line.
    table(&url, "consume_tls_plain");
    let (out, err) = run_expect(
        consume(
            &url,
            &broker.secure_bootstrap(),
            "consume_tls_plain",
            "consume_tls",
            &[
                "--until-end",
                "--group",
                "plain",
                "--kafka-option",
                "security.protocol=SASL_SSL",
                "--kafka-option",
                "sasl.mechanism=PLAIN",
                "--kafka-option",
                "sasl.username=plainuser",
                "--kafka-option",
                "sasl.password=plain-pw-4711",
                "--kafka-option",
                &format!("ssl.ca.location={}", dir.path().join("ca.pem").display()),
            ],
        )
        .current_dir(dir.path()),
        0,
    );
    assert_eq!(count(&c, "consume_tls_plain").await, 500);
    assert!(!out.contains("plain-pw") && !err.contains("plain-pw"), "{out}{err}");
    // SASL/SCRAM-SHA-256 over TLS, from an option file (librdkafka before
    // 2.6.1, Debian 12's included, is refused by Kafka 4 brokers here).
    table(&url, "consume_tls_scram");
    let scram = conf("SCRAM-SHA-256", "scramuser", "scram-pw-0815");
    let (out, err) = run_expect(
        consume(
            &url,
            &broker.secure_bootstrap(),
            "consume_tls_scram",
            "consume_tls",
            &["--until-end", "--group", "scram", "--kafka-option-file", &scram],
        )
        .current_dir(dir.path()),
        0,
    );
    assert_eq!(count(&c, "consume_tls_scram").await, 500);
    assert!(!out.contains("scram-pw") && !err.contains("scram-pw"), "{out}{err}");
    // A wrong password is refused, and shown nowhere.
    let wrong = conf("PLAIN", "plainuser", "wrong-pw-9999");
    let mut cmd = consume(&url, &broker.secure_bootstrap(), "consume_tls", "consume_tls", &["--until-end", "--kafka-option-file", &wrong]);
    let out = exit_within(start(cmd.current_dir(dir.path())), Duration::from_secs(90), "a consumer with a wrong password");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(2), "{stdout}{stderr}");
    assert!(!stdout.contains("wrong-pw") && !stderr.contains("wrong-pw"), "{stdout}{stderr}");
    assert!(stderr.to_lowercase().contains("authentication"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread")]
async fn key_headers_and_timestamp_fill_columns_of_json_messages() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_fields").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_fields", 1);
    create_time_partitioned(
        &url,
        "consume_fields",
        "id bigint, time timestamptz not null, dev text, region text, sent timestamptz",
        "1h",
        &[],
    );
    let p = broker.producer();
    let now = jiff::Timestamp::now();
    let time = (now - jiff::SignedDuration::from_secs(7200)).strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let sent_ms = now.as_millisecond() - 3_600_000;
    let one = format!(r#"{{"id": 1, "time": "{time}"}}"#);
    p.send(
        "consume_fields",
        &Message {
            partition: Some(0),
            key: Some(b"dev-7"),
            payload: one.as_bytes(),
            headers: &[("region", b"eu-west")],
            timestamp: Some(sent_ms),
        },
    );
    // Two rows in one message, no key and no header: those columns are null.
    let two = format!("{{\"id\": 2, \"time\": \"{time}\"}}\n{{\"id\": 3, \"time\": \"{time}\"}}");
    p.send("consume_fields", &Message { partition: Some(0), payload: two.as_bytes(), timestamp: Some(sent_ms), ..Message::default() });
    p.flush();
    let args = ["--until-end", "--key-column", "dev", "--header-column", "region=region", "--timestamp-column", "sent"];
    let dir = open_tempdir();
    run_expect(consume(&url, &broker.bootstrap(), "consume_fields", "consume_fields", &args).current_dir(dir.path()), 0);
    let rows =
        c.query("SELECT id, dev, region, (extract(epoch FROM sent) * 1000)::int8 FROM consume_fields ORDER BY id", &[]).await.unwrap();
    let got: Vec<(i64, Option<String>, Option<String>, i64)> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect();
    assert_eq!(got, vec![(1, Some("dev-7".into()), Some("eu-west".into()), sent_ms), (2, None, None, sent_ms), (3, None, None, sent_ms),]);
    // Only JSON messages can have them.
    let (_, err) = run_expect(
        &mut consume(&url, &broker.bootstrap(), "consume_fields", "consume_fields", &["--format", "csv", "--key-column", "dev"]),
        2,
    );
    assert!(err.contains("JSON messages"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_json_array_message_is_one_row_an_element_each_with_the_message_fields() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_arrays").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_arrays", 1);
    create_time_partitioned(&url, "consume_arrays", "id bigint, time timestamptz not null, dev text", "1h", &[]);
    let time = (jiff::Timestamp::now() - jiff::SignedDuration::from_secs(7200)).strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    let row = |id: &str| format!(r#"{{"id": {id}, "time": "{time}"}}"#);
    let messages = [
        // Offset 0: two rows, the array spread over lines, with the message's key.
        (Some(&b"dev-9"[..]), format!("[\n  {},\n  {}\n]", row("10"), row("11"))),
        // Offset 1: a bad element is rejected alone; the others load.
        (None, format!("[{}, {}, {}]", row("12"), row("\"twelve\""), row("13"))),
        // Offset 2: an array left open is one bad message.
        (None, format!("[{}", row("14"))),
        // Offset 3: an empty array holds no row; offset 4: an object, as before.
        (None, "[]".to_owned()),
        (None, row("15")),
    ];
    let p = broker.producer();
    for (key, payload) in &messages {
        p.send("consume_arrays", &Message { partition: Some(0), key: *key, payload: payload.as_bytes(), ..Message::default() });
    }
    p.flush();
    let dir = open_tempdir();
    let (out, err) = run_expect(
        consume(&url, &broker.bootstrap(), "consume_arrays", "consume_arrays", &["--until-end", "--key-column", "dev"])
            .current_dir(dir.path()),
        1,
    );
    let rows = c.query("SELECT id, dev FROM consume_arrays ORDER BY id", &[]).await.unwrap();
    let got: Vec<(i64, Option<String>)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    let dev9 = Some("dev-9".to_owned());
    assert_eq!(got, vec![(10, dev9.clone()), (11, dev9), (12, None), (13, None), (15, None)], "{out}{err}");
    let rejects = rejects_of(&dir, "consume_arrays");
    assert!(rejects.contains("# consume_arrays/0:1: ") && rejects.contains("twelve"), "{rejects}");
    assert!(rejects.contains("# consume_arrays/0:2: ") && rejects.contains("\"id\": 14"), "{rejects}");
    assert_eq!(rejects.matches("# consume_arrays/0:").count(), 2, "{rejects}");
}

#[tokio::test(flavor = "multi_thread")]
async fn line_protocol_messages_fill_the_table_of_their_measurement() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_lineproto").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_lp", 1);
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8, n int8, ok bool, note text", "1h", &[]);
    // Two hours ago, with nanoseconds the server rounds to microseconds.
    let t0 = (jiff::Timestamp::now().as_second() - 7200) * 1_000_000_000 + 123_456_789;
    let messages = [
        // Offset 0: two lines; an integer into the float column is fine.
        format!("cpu,host=a usage=1.5,n=3i,ok=t,note=\"x y\" {t0}\ncpu,host=b usage=2i {}", t0 + 1000),
        // Offsets 1-3: another measurement, a key with no column, a bad value.
        format!("mem,host=a used=1 {t0}"),
        format!("cpu,host=c nosuch=1 {t0}"),
        format!("cpu,host=d usage=bad {t0}"),
        // Offset 4: a comment, then a line.
        format!("# telegraf\ncpu,host=e usage=-0.25,ok=false {}", t0 + 2000),
    ];
    let p = broker.producer();
    for m in &messages {
        p.send("consume_lp", &Message { partition: Some(0), payload: m.as_bytes(), ..Message::default() });
    }
    p.flush();
    let dir = open_tempdir();
    let args = ["--until-end", "--format", "line-protocol"];
    let (out, err) = run_expect(consume(&url, &broker.bootstrap(), "cpu", "consume_lp", &args).current_dir(dir.path()), 1);
    let rows =
        c.query("SELECT host, usage, n, ok, note, (extract(epoch FROM time) * 1000000)::int8 FROM cpu ORDER BY host", &[]).await.unwrap();
    type Row = (String, Option<f64>, Option<i64>, Option<bool>, Option<String>, i64);
    let got: Vec<Row> = rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5))).collect();
    let us = |ns: i64| (ns + 500) / 1000;
    let want: Vec<Row> = vec![
        ("a".into(), Some(1.5), Some(3), Some(true), Some("x y".into()), us(t0)),
        ("b".into(), Some(2.0), None, None, None, us(t0 + 1000)),
        ("e".into(), Some(-0.25), None, Some(false), None, us(t0 + 2000)),
    ];
    assert_eq!(got, want, "{out}{err}");
    let rejects = rejects_of(&dir, "consume_lp");
    for (offset, why) in [(1, "measurement \"mem\" is not table"), (2, "no column \"nosuch\""), (3, "usage")] {
        let at = rejects.find(&format!("# consume_lp/0:{offset}: ")).unwrap_or_else(|| panic!("offset {offset}: {rejects}"));
        assert!(rejects[at..].lines().next().unwrap().contains(why), "offset {offset}: {rejects}");
    }
    assert_eq!(rejects.matches("# consume_lp/0:").count(), 3, "{rejects}");
    // The unit of the timestamps is the consumer's to say, and only for line protocol.
    let (_, err) = run_expect(&mut consume(&url, &broker.bootstrap(), "cpu", "consume_lp", &["--precision", "ms"]), 2);
    assert!(err.contains("--format line-protocol"), "{err}");
}

#[tokio::test(flavor = "multi_thread")]
async fn line_protocol_into_the_tables_its_measurements_name() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_lineproto_dash").await;
    let url = pg.url();
    let c = pg.client().await;
    broker.create_topic("consume_lp_dash", 2);
    c.batch_execute("CREATE SCHEMA telegraf; CREATE TABLE telegraf.notes (id int)").await.unwrap();
    create_time_partitioned(&url, "telegraf.cpu", "time timestamptz not null, host text, usage float8", "1h", &[]);
    // A plain table, and a column type only the server parses (inet): its rows go as text.
    c.batch_execute("CREATE TABLE telegraf.mem (time timestamptz not null, host text, addr inet, used bigint)").await.unwrap();
    let t0 = (jiff::Timestamp::now().as_second() - 3 * 3600) * 1000;
    let p = broker.producer();
    for i in 0..40i64 {
        let lines = format!(
            "cpu,host=h{} usage={i}.5 {}\nmem,host=h{},addr=10.0.0.{i} used={i}i {}",
            i % 3,
            t0 + i * 60_000,
            i % 3,
            t0 + i * 60_000
        );
        p.send("consume_lp_dash", &Message { partition: Some((i % 2) as i32), payload: lines.as_bytes(), ..Message::default() });
    }
    p.send(
        "consume_lp_dash",
        &Message { partition: Some(0), payload: format!("disk,host=h0 free=1 {t0}").as_bytes(), ..Message::default() },
    );
    p.flush();
    let dir = open_tempdir();
    let args = ["--until-end", "--format", "line-protocol", "--precision", "ms"];
    for run in 0..2 {
        // The second run finds every offset committed (the rejected line's too): nothing twice.
        let code = if run == 0 { 1 } else { 0 };
        let (out, err) =
            run_expect(consume(&url, &broker.bootstrap(), "telegraf.-", "consume_lp_dash", &args).current_dir(dir.path()), code);
        let cpu: (i64, f64) = {
            let r = c.query_one("SELECT count(*), sum(usage) FROM telegraf.cpu", &[]).await.unwrap();
            (r.get(0), r.get(1))
        };
        assert_eq!(cpu, (40, (0..40).map(|i| i as f64 + 0.5).sum::<f64>()), "run {run}: {out}{err}");
        let mem: (i64, i64, i64) = {
            let r = c.query_one("SELECT count(*), count(DISTINCT addr), sum(used)::int8 FROM telegraf.mem", &[]).await.unwrap();
            (r.get(0), r.get(1), r.get(2))
        };
        assert_eq!(mem, (40, 40, (0..40).sum::<i64>()), "run {run}: {out}{err}");
        let r = c.query_one("SELECT host(addr) FROM telegraf.mem WHERE used = 7", &[]).await.unwrap();
        assert_eq!(r.get::<_, String>(0), "10.0.0.7");
        if run == 0 {
            let rejects = rejects_of(&dir, "consume_lp_dash");
            assert!(rejects.contains("# consume_lp_dash/0:20: no table telegraf.disk for measurement \"disk\""), "{rejects}");
        } else {
            assert!(out.contains("rows loaded         0"), "{out}");
        }
    }
    // Only line protocol names its tables.
    let (_, err) = run_expect(&mut consume(&url, &broker.bootstrap(), "-", "consume_lp_dash", &["--until-end"]), 2);
    assert!(err.contains("--format line-protocol"), "{err}");
}

/// The first `n` messages of a dead-letter topic: (chute.partition, chute.offset, chute.reason, payload).
fn dead_letters(broker: &kafka::Broker, topic: &str, n: usize) -> Vec<(String, String, String, String)> {
    use rdkafka::Message as _;
    use rdkafka::consumer::{BaseConsumer, Consumer};
    use rdkafka::message::Headers;
    let consumer: BaseConsumer =
        broker.client_config().set("group.id", "dead-letter-reader").set("auto.offset.reset", "earliest").create().unwrap();
    consumer.subscribe(&[topic]).unwrap();
    let mut out = Vec::new();
    let began = Instant::now();
    while out.len() < n && began.elapsed() < Duration::from_secs(60) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            let header = |name: &str| {
                m.headers()
                    .and_then(|h| h.iter().find(|h| h.key == name).and_then(|h| h.value).map(|v| String::from_utf8_lossy(v).into_owned()))
                    .unwrap_or_default()
            };
            out.push((
                header("chute.partition"),
                header("chute.offset"),
                header("chute.reason"),
                String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned(),
            ));
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn a_postgresql_restart_mid_stream_loses_and_doubles_nothing() {
    let broker = kafka::shared();
    let cluster = chute_testkit::TestCluster::start();
    let db = cluster.fresh_db("c_pg_restart").await;
    let url = db.url();
    broker.create_topic("consume_pg_restart", 3);
    table(&url, "consume_pg_restart");
    let dir = open_tempdir();
    let mut child = start(
        consume(&url, &broker.bootstrap(), "consume_pg_restart", "consume_pg_restart", &["--batch-rows", "500"]).current_dir(dir.path()),
    );
    produce(broker, "consume_pg_restart", 0, 20_000, 3);
    {
        let c = db.client().await;
        until_rows(&c, "consume_pg_restart", 2_000, Duration::from_secs(60)).await;
    }
    cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
    produce(broker, "consume_pg_restart", 20_000, 20_000, 3);
    let c = db.client().await;
    until_rows(&c, "consume_pg_restart", 40_000, Duration::from_secs(120)).await;
    child.terminate();
    let out = exit_within(child, Duration::from_secs(60), "the consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let (rows, ids, _) = contents(&c, "consume_pg_restart").await;
    assert_eq!((rows, ids), (40_000, 40_000), "{}", String::from_utf8_lossy(&out.stderr));
}
