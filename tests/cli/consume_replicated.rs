//! `chute consume` against a three-node Kafka cluster (the fixture's
//! `kafka::Cluster`: each partition has a copy on every node, a write is
//! acknowledged by all copies in sync) and a real PostgreSQL server: the
//! node that leads a partition is killed while the consumer reads, the
//! leadership moves to another copy, the node comes back, and every
//! message is in the table once.

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::kafka::{self, Message};
use chute_testkit::process::{ChildGuard, exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect};

const TOPIC: &str = "consume_replicated";
const PARTITIONS: u64 = 6;
const MESSAGES: u64 = 200_000;

/// Message `i`'s time: within the last two days (hourly partitions: ~48 leaves).
fn seconds_of(now: i64, i: u64) -> i64 {
    now - 3600 - (i as i64 * 7919) % (47 * 3600)
}

/// Messages `0..MESSAGES` as JSON rows (id, time, v: the rows of consume.rs),
/// message `i` on partition `i % PARTITIONS`, acknowledged by every copy in sync.
fn produce(cluster: &kafka::Cluster, now: i64) {
    let p = cluster.producer();
    for i in 0..MESSAGES {
        let t = jiff::Timestamp::from_second(seconds_of(now, i)).unwrap();
        let line = format!(r#"{{"id": {i}, "time": "{}", "v": {}}}"#, t.strftime("%Y-%m-%dT%H:%M:%SZ"), i as f64 * 0.25);
        p.send(TOPIC, &Message { partition: Some((i % PARTITIONS) as i32), payload: line.as_bytes(), ..Message::default() });
    }
    p.flush();
}

/// (rows, distinct ids, a checksum of every row's values in id order): of
/// the table, and of the messages produced, computed by PostgreSQL from
/// the same formulas.
async fn contents(c: &tokio_postgres::Client, now: i64) -> ((i64, i64, String), (i64, i64, String)) {
    let sum = "count(*), count(DISTINCT id), md5(string_agg(format('%s|%s|%s', id, time, v), ',' ORDER BY id))";
    let table = c.query_one(&format!("SELECT {sum} FROM {TOPIC}"), &[]).await.unwrap();
    let produced = c.query_one(&format!("SELECT {sum} FROM {PRODUCED}"), &[&now, &(MESSAGES as i64)]).await.unwrap();
    ((table.get(0), table.get(1), table.get(2)), (produced.get(0), produced.get(1), produced.get(2)))
}

/// The messages produced (`$2` of them, `$1` the producer's clock in
/// seconds) as rows, computed by PostgreSQL from the producer's formulas.
pub(crate) const PRODUCED: &str =
    "(SELECT i AS id, to_timestamp($1::int8 - 3600 - (i * 7919) % (47 * 3600)) AS time, (i * 0.25)::float8 AS v
     FROM generate_series(0, $2::int8 - 1) i) produced";

/// The ids missing from the table and those in it more than once (ten of each at most).
async fn differences(c: &tokio_postgres::Client) -> String {
    let missing: Vec<i64> = c
        .query(
            &format!(
                "SELECT i FROM generate_series(0, $1::int8 - 1) i WHERE NOT EXISTS (SELECT FROM {TOPIC} WHERE id = i) ORDER BY i LIMIT 10"
            ),
            &[&(MESSAGES as i64)],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let doubled: Vec<(i64, i64)> = c
        .query(&format!("SELECT id, count(*) FROM {TOPIC} GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 10"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    format!("missing ids (first 10): {missing:?}; doubled (id, times; first 10): {doubled:?}")
}

/// The rows of partition `p` in the table.
async fn partition_rows(c: &tokio_postgres::Client, p: u64) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM {TOPIC} WHERE id % {PARTITIONS} = {p}"), &[]).await.unwrap().get(0)
}

/// Partition `p`'s end: how many messages it holds.
fn expected_offset(p: u64) -> u64 {
    MESSAGES / PARTITIONS + u64::from(p < MESSAGES % PARTITIONS)
}

async fn count(c: &tokio_postgres::Client) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM {TOPIC}"), &[]).await.unwrap().get(0)
}

fn consume(url: &str, cluster: &kafka::Cluster, dir: &std::path::Path) -> std::process::Command {
    let mut cmd = chute();
    cmd.args(["--url", url, "consume", TOPIC, "--brokers", &cluster.bootstrap(), "--topic", TOPIC, "--until-end"]);
    // One record batch a partition a fetch (a node gives a whole batch even past the limit).
    cmd.args(["--kafka-option", "max.partition.fetch.bytes=65536"]);
    cmd.current_dir(dir);
    cmd
}

/// Waits until the table holds at least `n` rows while `child` runs; when
/// it does not, the consumer is killed and what it printed and the nodes'
/// logs are in the panic.
async fn until_rows(c: &tokio_postgres::Client, n: i64, child: &mut ChildGuard, cluster: &kafka::Cluster) -> i64 {
    let began = Instant::now();
    loop {
        let now = count(c).await;
        if now >= n {
            return now;
        }
        let exited = child.try_wait().unwrap();
        if exited.is_some() || began.elapsed() > Duration::from_secs(60) {
            child.kill();
            let mut said = String::new();
            for stream in [child.stdout.take().map(|s| Box::new(s) as Box<dyn Read>), child.stderr.take().map(|s| Box::new(s) as _)] {
                let _ = stream.map(|mut s| s.read_to_string(&mut said));
            }
            panic!("{now} rows (waiting for {n}); the consumer ({exited:?}) said:\n{said}\n{}", cluster.log_tails());
        }
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each partition's "committed through" line of a consumer's summary: (partition, offset).
fn committed(stdout: &str) -> Vec<(String, u64)> {
    let mut at: Vec<(String, u64)> = stdout
        .lines()
        .filter_map(|l| {
            let (partition, offset) = l.strip_prefix("committed through")?.trim().split_once(" offset ")?;
            Some((partition.to_owned(), offset.parse().ok()?))
        })
        .collect();
    at.sort();
    at
}

#[tokio::test(flavor = "multi_thread")]
async fn the_leader_of_a_partition_killed_mid_run_loses_and_doubles_nothing() {
    let began = Instant::now();
    // The three JVMs start while PostgreSQL does.
    let cluster = std::thread::spawn(|| kafka::Cluster::start(3));
    let pg = shared().fresh_db("c_replicated").await;
    let (url, c) = (pg.url(), pg.client().await);
    let cluster = cluster.join().unwrap();
    cluster.create_topic(TOPIC, PARTITIONS as u32);
    // Each node serves the consumer 200 kB/s (a node leads two partitions,
    // 1.4 MB of compressed messages): it reads for seconds, not at once,
    // and most of partition 0 is still to fetch when its leader dies.
    cluster.throttle_consumers(200_000);
    create_time_partitioned(&url, TOPIC, "id bigint, time timestamptz not null, v float8", "1h", &[]);
    let now = jiff::Timestamp::now().as_second();
    produce(&cluster, now);
    eprintln!("cluster up, {MESSAGES} messages produced after {:?}", began.elapsed());
    let dir = open_tempdir();
    let leader = cluster.leader(TOPIC, 0);
    let mut child = spawn(consume(&url, &cluster, dir.path()).stdout(Stdio::piped()).stderr(Stdio::piped()));
    // The consumer's first rows are in (it fetches on): the node leading partition 0 dies.
    let at_kill = until_rows(&c, 1, &mut child, &cluster).await;
    cluster.kill(leader);
    let p0_at_kill = partition_rows(&c, 0).await;
    assert!(child.try_wait().unwrap().is_none(), "the consumer ended before the leader was killed: nothing was tested");
    assert!(p0_at_kill < expected_offset(0) as i64, "partition 0 was loaded before its leader was killed: nothing was tested");
    // The cluster fences the killed node and makes a copy in sync leader.
    let moved_to = cluster.leader(TOPIC, 0);
    assert_ne!(moved_to, leader);
    let p0_at_move = partition_rows(&c, 0).await;
    assert!(child.try_wait().unwrap().is_none(), "the consumer ended before the leadership moved");
    eprintln!(
        "node {leader} (leading partition 0) killed at {at_kill} rows ({p0_at_kill} of partition 0); node {moved_to} leads it \
         after {:?} ({p0_at_move} rows of partition 0 in)",
        began.elapsed()
    );
    // The node comes back (a follower catching up) while the consumer runs.
    cluster.restart(leader);
    eprintln!("node {leader} back after {:?}; {} rows in", began.elapsed(), count(&c).await);
    let out = exit_within(child, Duration::from_secs(90), "the consumer");
    let (mut stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    // In every run so far the consumer rode out the kill and exited 0 in
    // one run. Should the cluster be unavailable to it for too long, it
    // exits with an error (2); a user runs it again, and it goes on from
    // the journal's positions: the promise is every message once over both.
    if out.status.code() != Some(0) {
        assert_eq!(out.status.code(), Some(2), "the consumer failed otherwise than with an error:\n{stdout}\n{stderr}");
        eprintln!("the consumer exited {:?} after the kill; running it again. It said:\n{stderr}", out.status.code());
        stdout = run_expect(&mut consume(&url, &cluster, dir.path()), 0).0;
    }
    let (table, produced) = contents(&c, now).await;
    assert_eq!(produced.0, MESSAGES as i64);
    assert!(table == produced, "table {table:?}, produced {produced:?}: {}\n{stdout}\n{stderr}", differences(&c).await);
    // The summary says where each partition is committed: at its end.
    let expected: Vec<(String, u64)> = (0..PARTITIONS).map(|p| (format!("{TOPIC}/{p}"), expected_offset(p))).collect();
    assert_eq!(committed(&stdout), expected, "{stdout}");
    // Run again: nothing to load, and the partitions come at once, since the
    // first consumer left the group on its way out (a member that does not
    // leave holds them until its session times out, 45 s).
    let again = Instant::now();
    let (out, _) = run_expect(&mut consume(&url, &cluster, dir.path()), 0);
    assert!(out.contains("rows loaded         0"), "{out}");
    assert!(again.elapsed() < Duration::from_secs(30), "the second consumer waited {:?} for its partitions", again.elapsed());
    eprintln!("done after {:?}", began.elapsed());
}
