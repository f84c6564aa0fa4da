//! Failover during `chute consume` (issue 47): a primary and its streaming
//! standby, a consumer reading a Kafka topic through both hosts
//! (`target_session_attrs=read-write`), the primary stopped with
//! `-m immediate` at a random point (the seed is printed; set
//! CHUTE_TEST_SEED to replay it) and the standby promoted. The consumer
//! must end with exit 0 and the new primary must hold every message's row
//! once: commits the old primary acknowledged and never streamed (with the
//! positions chute kept for them) are read from Kafka again and loaded once.

use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_core::generate::SplitMix64;
use chute_engine::connect::SessionAttrs;
use chute_testkit::kafka::{self, Message};
use chute_testkit::process::{exit_within, spawn};
use chute_testkit::replicated::{PairSetup, ReplicatedPair};

use crate::common::{chute, create_time_partitioned, summary_value, wait_for};
use crate::consume_replicated::PRODUCED;
use crate::failover::{journaled, seed};

const PARTITIONS: u64 = 4;
const MESSAGES: u64 = 200_000;

/// Message `i`'s time: within the last two days (hourly partitions: ~48 leaves).
fn seconds_of(now: i64, i: u64) -> i64 {
    now - 3600 - (i as i64 * 7919) % (47 * 3600)
}

/// Messages `0..MESSAGES` as JSON rows (id, time, v), message `i` on partition `i % PARTITIONS`.
fn produce(broker: &kafka::Broker, topic: &str, now: i64) {
    let p = broker.producer();
    for i in 0..MESSAGES {
        let t = jiff::Timestamp::from_second(seconds_of(now, i)).unwrap();
        let line = format!(r#"{{"id": {i}, "time": "{}", "v": {}}}"#, t.strftime("%Y-%m-%dT%H:%M:%SZ"), i as f64 * 0.25);
        p.send(topic, &Message { partition: Some((i % PARTITIONS) as i32), payload: line.as_bytes(), ..Message::default() });
    }
    p.flush();
}

/// (rows, distinct ids, a hash sum of every row) of the table and of the
/// messages produced, computed by PostgreSQL from the same formulas.
async fn fingerprints(c: &tokio_postgres::Client, table: &str, now: i64) -> ((i64, i64, i64), (i64, i64, i64)) {
    let sum = "count(*), count(DISTINCT id), coalesce(sum(hashtext(format('%s|%s|%s', id, time, v))::int8), 0)::int8";
    let got = c.query_one(&format!("SELECT {sum} FROM {table}"), &[]).await.unwrap();
    let want = c.query_one(&format!("SELECT {sum} FROM {PRODUCED}"), &[&now, &(MESSAGES as i64)]).await.unwrap();
    ((got.get(0), got.get(1), got.get(2)), (want.get(0), want.get(1), want.get(2)))
}

/// Consumes MESSAGES messages through both hosts, fails over when the
/// primary's journal holds a random share of them, and checks the new
/// primary holds each message's row once. Returns the consumer's stderr.
async fn consume_through_a_failover(test: &str, setup: PairSetup, point: Option<i64>) -> String {
    let mut rng = SplitMix64::new(seed(test));
    // Within the first half: the consumer is still well inside the topic when the primary stops.
    let point = point.unwrap_or(5_000 + (rng.next_u64() % (MESSAGES / 2)) as i64);
    eprintln!("{test}: the primary stops once its journal holds {point} rows");
    let broker = kafka::shared();
    broker.create_topic(test, PARTITIONS as u32);
    let now = jiff::Timestamp::now().as_second();
    produce(broker, test, now);
    let pair = ReplicatedPair::start(setup);
    let db = pair.fresh_db(test).await;
    let primary = db.client().await;
    create_time_partitioned(&db.url(), test, "id bigint, time timestamptz not null, v float8", "1h", &[]);
    let standby = pair.standby.options(&db.name);
    let in_recovery = standby.with_session_attrs(SessionAttrs::Any);
    wait_for("the standby to have the table", Duration::from_secs(30), || async {
        let c = in_recovery.connect().await.unwrap();
        c.query_one(&format!("SELECT to_regclass('{test}') IS NOT NULL"), &[]).await.unwrap().get::<_, bool>(0)
    })
    .await;
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    let dir = crate::common::open_tempdir();
    let mut child = spawn(
        chute()
            .args(["--url", &both, "consume", test, "--brokers", &broker.bootstrap(), "--topic", test, "--group", test])
            .args(["--until-end", "--batch-mb", "1", "--flush-every", "50ms", "--retry-for", "60s"])
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    while journaled(&primary).await < point {
        assert!(child.running(), "the consumer ended before the failover point {point}");
        assert!(Instant::now() < deadline, "timed out waiting for the primary's journal to reach {point} rows");
        // The polling pace.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    let out = exit_within(child, Duration::from_secs(120), "the consumer through the failover");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let new_primary = standby.connect().await.unwrap();
    let (got, want) = fingerprints(&new_primary, test, now).await;
    assert_eq!(want.0, MESSAGES as i64);
    assert_eq!(got, want, "count, distinct ids, hash sum on the new primary after the failover\n{stdout}\n{stderr}");
    assert_eq!(
        summary_value(&stdout, "rows loaded"),
        MESSAGES.to_string(),
        "the summary counts what the new primary holds\n{stdout}\n{stderr}"
    );
    // The positions the new primary keeps are each partition's end.
    let total: u64 = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("committed through"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(total, MESSAGES, "{stdout}");
    eprintln!("{test}: {stderr}");
    stderr
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failover_mid_consume_loses_nothing_and_doubles_nothing() {
    consume_through_a_failover("consume_failover", PairSetup::default(), None).await;
}

/// Early in the topic most leaves are new: they are backfilled (filled,
/// then attached) when the primary stops, and the standby never saw them.
/// Rows of a leaf the old server attached used to be routed to it again
/// and again (the consumer never ended); they are read from Kafka again.
#[tokio::test(flavor = "multi_thread")]
async fn a_failover_while_new_partitions_are_backfilled_loses_nothing_and_ends() {
    consume_through_a_failover("consume_failover_early", PairSetup::default(), Some(5_620)).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failover_mid_consume_with_synchronous_replication_reads_nothing_again_for_lost_commits() {
    let stderr = consume_through_a_failover("consume_failover_sync", PairSetup { synchronous: true }, None).await;
    assert!(!stderr.contains("not on the server now"), "{stderr}");
}
