//! `chute consume` at its edges (issue 46), against a real Kafka broker
//! and a real PostgreSQL server: a message is a record boundary; positions
//! belong to one topic and one table (a topic or a table made again under
//! its name is read from the start); a consumer says what it waits for; a
//! hostile producer and a kill -9 lose and double nothing; a stopped
//! consumer whose server is gone exits at once.

use std::time::{Duration, Instant};

use chute_testkit::kafka::{self, Message};
use chute_testkit::process::{Lines, exit_within};
use chute_testkit::shared;

use crate::common::{create_time_partitioned, open_tempdir, run_expect, summary_value};
use crate::consume::{consume, start, until_rows};

fn send_all(broker: &kafka::Broker, topic: &str, partition: i32, payloads: &[&[u8]]) {
    let p = broker.producer();
    for payload in payloads {
        p.send(topic, &Message { partition: Some(partition), payload, ..Message::default() });
    }
    p.flush();
}

fn rejects_of(dir: &tempfile::TempDir, topic: &str) -> String {
    String::from_utf8_lossy(&std::fs::read(dir.path().join(format!("{topic}.rejects"))).unwrap_or_default()).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bad_message_never_takes_the_next_ones_with_it() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_edges_boundary").await;
    let (url, c) = (pg.url(), pg.client().await);
    c.batch_execute("CREATE TABLE bound_csv (t text, name text, n int); CREATE TABLE bound_text (t text, name text)").await.unwrap();
    // CSV: an unterminated quote took messages 2-4 into one reject at offset 1.
    broker.create_topic("edges_csv", 1);
    send_all(broker, "edges_csv", 0, &[b"T,a,1", b"T,\"b,2", b"T,c,3", b"T,d,4"]);
    let dir = open_tempdir();
    let (out, err) = run_expect(
        consume(&url, &broker.bootstrap(), "bound_csv", "edges_csv", &["--format", "csv", "--until-end", "--json"]).current_dir(dir.path()),
        1,
    );
    let names: Vec<String> = c.query("SELECT name FROM bound_csv ORDER BY n", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(names, ["a", "c", "d"], "{out}{err}");
    let rejects = rejects_of(&dir, "edges_csv");
    assert_eq!(rejects.matches("# edges_csv/0:").count(), 1, "{rejects}");
    assert!(rejects.contains("# edges_csv/0:1: unterminated CSV quoted field\nT,\"b,2\n"), "{rejects}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!((report["rows_loaded"].as_u64(), report["rows_rejected"].as_u64()), (Some(3), Some(1)), "{out}");
    assert_eq!(report["positions"][0]["offset"], 4, "{out}");
    // Text: a message ending in a backslash joined the next one.
    broker.create_topic("edges_text", 1);
    send_all(broker, "edges_text", 0, &[b"T\ta", b"T\tb\\", b"T\tc", b"T\td\n"]);
    let (out, err) = run_expect(
        consume(&url, &broker.bootstrap(), "bound_text", "edges_text", &["--format", "text", "--until-end"]).current_dir(dir.path()),
        0,
    );
    let names: Vec<String> = c.query("SELECT name FROM bound_text ORDER BY name", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    // The backslash escapes nothing past its message (as at the end of a file).
    assert_eq!(names, ["a", "b", "c", "d"], "{out}{err}");
}

/// `n` JSON rows from id `first`, round-robin over `partitions`, times in the last day.
fn produce(broker: &kafka::Broker, topic: &str, first: u64, n: u64, partitions: i32) {
    let p = broker.producer();
    let now = jiff::Timestamp::now().as_second();
    for i in first..first + n {
        let t = jiff::Timestamp::from_second(now - 3600 - (i as i64 * 7919) % (20 * 3600)).unwrap();
        let line = format!(r#"{{"id": {i}, "time": "{}", "v": {}}}"#, t.strftime("%Y-%m-%dT%H:%M:%SZ"), i as f64 * 0.5);
        p.send(topic, &Message { partition: Some((i % partitions as u64) as i32), payload: line.as_bytes(), ..Message::default() });
    }
    p.flush();
}

fn table(url: &str, name: &str) {
    create_time_partitioned(url, name, "id bigint, time timestamptz not null, v float8", "1h", &[]);
}

/// (rows, distinct ids, smallest id, largest id)
async fn ids(c: &tokio_postgres::Client, table: &str) -> (i64, i64, Option<i64>, Option<i64>) {
    let r = c.query_one(&format!("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {table}"), &[]).await.unwrap();
    (r.get(0), r.get(1), r.get(2), r.get(3))
}

/// Deletes `topic` and makes it again with `partitions` (its offsets start at 0 again).
async fn make_topic_again(broker: &kafka::Broker, topic: &str, partitions: i32) {
    use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
    use rdkafka::client::DefaultClientContext;
    let admin: AdminClient<DefaultClientContext> = broker.client_config().create().unwrap();
    let deleted = admin.delete_topics(&[topic], &AdminOptions::new()).await.unwrap();
    assert!(deleted.iter().all(Result::is_ok), "{deleted:?}");
    let began = Instant::now();
    // The broker takes a moment to forget a deleted topic: until then "already exists".
    loop {
        let made =
            admin.create_topics(&[NewTopic::new(topic, partitions, TopicReplication::Fixed(1))], &AdminOptions::new()).await.unwrap();
        if made.iter().all(Result::is_ok) {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "{topic} not made again: {made:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_topic_or_a_table_made_again_is_read_from_the_start() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_edges_again").await;
    let (url, c) = (pg.url(), pg.client().await);
    broker.create_topic("edges_again", 2);
    table(&url, "again");
    let dir = open_tempdir();
    let run =
        |code: i32| run_expect(consume(&url, &broker.bootstrap(), "again", "edges_again", &["--until-end"]).current_dir(dir.path()), code);
    produce(broker, "edges_again", 0, 1000, 2);
    let (out, _) = run(0);
    assert_eq!(ids(&c, "again").await, (1000, 1000, Some(0), Some(999)), "{out}");
    // A journal of schema version 10 (no topic id, no table oid): upgraded
    // in place, its positions kept for the topic and table there are now.
    c.batch_execute(
        "ALTER TABLE chute.load_positions DROP COLUMN source_id, DROP COLUMN rel;
         UPDATE chute.meta SET value = '10' WHERE key = 'schema_version'",
    )
    .await
    .unwrap();
    let (out, _) = run(0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{out}");
    let kept: i64 = c
        .query_one("SELECT count(*) FROM chute.load_positions WHERE rel = 'again'::regclass AND source_id IS NOT NULL", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(kept, 2);
    // The topic deleted and made again: its offsets start at 0, and its
    // 600 new messages load (the positions were 500; the old code loaded none).
    make_topic_again(broker, "edges_again", 2).await;
    produce(broker, "edges_again", 1000, 600, 2);
    let (out, err) = run(0);
    assert_eq!(summary_value(&out, "rows loaded"), "600", "{out}{err}");
    assert!(err.contains("edges_again/0, edges_again/1 belong to a topic deleted and made again"), "{err}");
    assert_eq!(ids(&c, "again").await, (1600, 1600, Some(0), Some(1599)));
    // The table dropped and made again: the topic's messages load into it again, as `chute load` loads a file again.
    c.batch_execute("DROP TABLE again").await.unwrap();
    table(&url, "again");
    let (out, err) = run(0);
    assert_eq!(summary_value(&out, "rows loaded"), "600", "{out}{err}");
    assert!(err.contains("again was dropped and made again"), "{err}");
    assert_eq!(ids(&c, "again").await, (600, 600, Some(1000), Some(1599)));
    // And then nothing twice.
    let (out, _) = run(0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{out}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_restart_after_kill_9_says_what_it_waits_for_then_loads_every_row_once() {
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_edges_waiting").await;
    let (url, c) = (pg.url(), pg.client().await);
    broker.create_topic("edges_waiting", 2);
    table(&url, "waiting");
    let dir = open_tempdir();
    // A short session: the killed member is dropped after 10 s (the broker's floor is 6 s).
    let args = ["--batch-rows", "200", "--kafka-option", "session.timeout.ms=10000", "--kafka-option", "heartbeat.interval.ms=500"];
    let mut first = start(consume(&url, &broker.bootstrap(), "waiting", "edges_waiting", &args).current_dir(dir.path()));
    produce(broker, "edges_waiting", 0, 5000, 2);
    until_rows(&c, "waiting", 1000, Duration::from_secs(60)).await;
    first.kill();
    produce(broker, "edges_waiting", 5000, 5000, 2);
    let mut second = start(consume(&url, &broker.bootstrap(), "waiting", "edges_waiting", &args).current_dir(dir.path()));
    let mut said = Lines::new(second.stderr.take().unwrap());
    // The group waits for the killed member's session to time out: the consumer says so.
    said.wait_until("the line saying what the consumer waits for", Duration::from_secs(30), |s| {
        s.contains("waiting for the group's partitions") && s.contains("session.timeout.ms=10000")
    });
    until_rows(&c, "waiting", 10_000, Duration::from_secs(60)).await;
    second.terminate();
    let out = exit_within(second, Duration::from_secs(30), "the consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", said.rest());
    assert_eq!(ids(&c, "waiting").await, (10_000, 10_000, Some(0), Some(9999)));
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_while_postgresql_is_gone_exits_within_seconds_and_loses_nothing() {
    let broker = kafka::shared();
    let cluster = chute_testkit::TestCluster::start();
    let db = cluster.fresh_db("c_edges_pg_gone").await;
    let url = db.url();
    broker.create_topic("edges_pg_gone", 2);
    table(&url, "pg_gone");
    let dir = open_tempdir();
    let mut child = start(consume(&url, &broker.bootstrap(), "pg_gone", "edges_pg_gone", &["--batch-rows", "200"]).current_dir(dir.path()));
    let mut said = Lines::new(child.stderr.take().unwrap());
    produce(broker, "edges_pg_gone", 0, 3000, 2);
    until_rows(&db.client().await, "pg_gone", 3000, Duration::from_secs(60)).await;
    cluster.cluster.stop(chute_engine::local::StopMode::Fast).unwrap();
    // Rows come while the server is gone: their batch retries.
    produce(broker, "edges_pg_gone", 3000, 2000, 2);
    said.wait_until("a batch retrying", Duration::from_secs(30), |s| s.contains("retrying"));
    child.terminate();
    // (Was: the retries went on for --retry-for, 5 minutes.)
    let out = exit_within(child, Duration::from_secs(10), "the consumer after SIGTERM with PostgreSQL gone");
    let err = said.rest();
    assert_ne!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("the load was stopped while this batch was being retried") && err.contains("reads its rows again"), "{err}");
    // Nothing is lost: the next run loads the rest, once.
    cluster.cluster.start().unwrap();
    run_expect(consume(&url, &broker.bootstrap(), "pg_gone", "edges_pg_gone", &["--until-end"]).current_dir(dir.path()), 0);
    assert_eq!(ids(&db.client().await, "pg_gone").await, (5000, 5000, Some(0), Some(4999)));
}

/// Message `k` of partition `p` in the soak: good CSV, or one of six kinds
/// of bad message every 50th (`None`: good).
fn soak_message(p: i32, k: u64, now: i64) -> (Vec<u8>, Option<usize>) {
    let id = k * 4 + p as u64;
    let t = jiff::Timestamp::from_second(now - 3600 - (id as i64 * 7919) % (10 * 3600)).unwrap().strftime("%Y-%m-%dT%H:%M:%SZ").to_string();
    if k % 50 != 7 {
        return (format!("{id},{t},{},good", id as f64 * 0.5).into_bytes(), None);
    }
    let kind = (k / 50) as usize % 6;
    let bad = match kind {
        0 => format!("{id},{t},1.5,\"an unterminated quote").into_bytes(),
        1 => format!("{id},{t},1.5,a NUL \0 byte").into_bytes(),
        2 => format!("{id},{t},1.5,{}", "x".repeat(200)).into_bytes(),
        3 => format!("{{\"id\": {id}, \"nosuch\": 1}}").into_bytes(),
        4 => format!("{id},{t},not a number,x").into_bytes(),
        _ => format!("{id},{t},1.5,{}", "y".repeat(500_000)).into_bytes(),
    };
    (bad, Some(kind))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hostile_producer_and_a_kill_9_lose_and_double_nothing() {
    const PARTITIONS: i32 = 4;
    const PER_PARTITION: u64 = 3000;
    let broker = kafka::shared();
    let pg = shared().fresh_db("c_edges_soak").await;
    let (url, c) = (pg.url(), pg.client().await);
    broker.create_topic("edges_soak", PARTITIONS as u32);
    create_time_partitioned(&url, "soak", "id bigint, time timestamptz not null, v float8, note varchar(64)", "1h", &[]);
    let dir = open_tempdir();
    let now = jiff::Timestamp::now().as_second();
    // The producer writes while the consumer runs, is killed and runs again.
    let producer = std::thread::spawn(move || {
        let p = broker.producer();
        for burst in 0..30 {
            for k in burst * PER_PARTITION / 30..(burst + 1) * PER_PARTITION / 30 {
                for part in 0..PARTITIONS {
                    let (payload, _) = soak_message(part, k, now);
                    p.send("edges_soak", &Message { partition: Some(part), payload: &payload, ..Message::default() });
                }
            }
            p.flush();
        }
    });
    let args = ["--format", "csv", "--batch-rows", "300", "--kafka-option", "group.instance.id=soak"];
    let mut first = start(consume(&url, &broker.bootstrap(), "soak", "edges_soak", &args).current_dir(dir.path()));
    until_rows(&c, "soak", 2000, Duration::from_secs(60)).await;
    first.kill();
    let mut second = start(consume(&url, &broker.bootstrap(), "soak", "edges_soak", &args).current_dir(dir.path()));
    producer.join().unwrap();
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for part in 0..PARTITIONS {
        for k in 0..PER_PARTITION {
            match soak_message(part, k, now).1 {
                None => good.push((k * 4 + part as u64) as i64),
                Some(kind) => bad.push((part, k, kind)),
            }
        }
    }
    until_rows(&c, "soak", good.len() as i64, Duration::from_secs(60)).await;
    // Every bad message is on file with its partition and offset (before its offsets commit).
    let began = Instant::now();
    while rejects_of(&dir, "edges_soak").matches("# edges_soak/").count() < bad.len() && began.elapsed() < Duration::from_secs(30) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    second.terminate();
    let out = exit_within(second, Duration::from_secs(30), "the second consumer after SIGTERM");
    assert_eq!(out.status.code(), Some(143), "{}", String::from_utf8_lossy(&out.stderr));
    let mut loaded: Vec<i64> = c.query("SELECT id FROM soak", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    loaded.sort_unstable();
    good.sort_unstable();
    assert_eq!(loaded.len(), good.len(), "rows loaded, once each");
    assert!(loaded == good, "the loaded ids are not the good messages' ids");
    let rejects = rejects_of(&dir, "edges_soak");
    assert_eq!(rejects.matches("# edges_soak/").count(), bad.len(), "each bad message once");
    for (part, k, kind) in bad {
        assert!(rejects.contains(&format!("# edges_soak/{part}:{k}: ")), "bad message of kind {kind} at {part}:{k} is not on file");
    }
}
