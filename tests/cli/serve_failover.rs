//! Failover under `chute serve` (issue 47): a primary and its standby under
//! synchronous replication, serve given both hosts, clients of three doors
//! (CSV with an Idempotency-Key, line protocol with one, Prometheus remote
//! write, which needs none: a sample is unique per series and time) each
//! sending their requests one after another, resending one until it is
//! answered 204, as a client following serve's 503 + Retry-After does. The
//! primary is stopped with `-m immediate` once a random number of requests
//! (the seed is printed; CHUTE_TEST_SEED replays it) were acknowledged, and
//! the standby promoted. Under synchronous replication an acknowledgement
//! means the standby has the rows: the new primary must hold every
//! acknowledged row, and every request exactly once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chute_core::generate::SplitMix64;
use chute_engine::connect::SessionAttrs;
use chute_serve::prom::wire::WriteRequest;
use chute_testkit::replicated::{PairSetup, ReplicatedPair};

use crate::common::wait_for;
use crate::failover::seed;
use crate::serve::{Server, agent};
use crate::serve_prometheus::{now_ms, post_snappy, series};
use prost::Message;

/// Requests per door, and rows (or samples) per request.
const REQUESTS: u64 = 40;
const ROWS: u64 = 500;

/// One door's requests: its URL, headers and body for request `r`.
struct Door {
    name: &'static str,
    url: String,
    headers: Vec<(&'static str, &'static str)>,
    /// Request `r`'s body, its rows from `t0` (milliseconds) on.
    body: fn(u64, i64) -> Vec<u8>,
    keyed: bool,
}

fn csv_body(r: u64, _t0: i64) -> Vec<u8> {
    // A millisecond apart in one minute of a fixed day (every k is under 60,000).
    (r * ROWS..(r + 1) * ROWS)
        .map(|k| format!("2024-01-01 00:00:{:02}.{:03}+00,{k},{}\n", k / 1_000, k % 1_000, k as f64 / 4.0))
        .collect::<String>()
        .into_bytes()
}

fn line_body(r: u64, t0: i64) -> Vec<u8> {
    (r * ROWS..(r + 1) * ROWS)
        .map(|k| format!("lp,host=h{} k={k}i {}\n", k % 7, (t0 + k as i64) * 1_000_000))
        .collect::<String>()
        .into_bytes()
}

fn prom_body(r: u64, t0: i64) -> Vec<u8> {
    let samples: Vec<(i64, f64)> = (r * ROWS..(r + 1) * ROWS).map(|k| (t0 + k as i64, k as f64)).collect();
    WriteRequest { timeseries: vec![series(&[("__name__", "fo_metric"), ("job", "fo")], &samples)], metadata: vec![] }.encode_to_vec()
}

/// Sends the door's requests in order, each until it is answered 204;
/// counts the acknowledged ones in `acked`. Returns the answers other than
/// 204 it saw (503s while the primary is gone, which must name a retry).
fn client(door: Door, t0: i64, acked: Arc<AtomicU64>) -> Vec<String> {
    let mut other = Vec::new();
    for r in 0..REQUESTS {
        let body = (door.body)(r, t0);
        let key = format!("{}-{r}", door.name);
        let began = Instant::now();
        loop {
            let status = if door.name == "prometheus" {
                post_snappy(&door.url, &body, &[]).0
            } else {
                let mut req = agent().post(&door.url);
                for (k, v) in &door.headers {
                    req = req.header(*k, *v);
                }
                if door.keyed {
                    req = req.header("Idempotency-Key", &key);
                }
                match req.send(&body[..]) {
                    Ok(mut resp) => {
                        let status = resp.status().as_u16();
                        if status != 204 {
                            other.push(format!("{status} {}", resp.body_mut().read_to_string().unwrap_or_default()));
                        }
                        status
                    }
                    Err(e) => {
                        other.push(format!("no answer: {e}"));
                        0
                    }
                }
            };
            if status == 204 {
                break;
            }
            assert!(matches!(status, 0 | 503), "{}: request {r} answered {status}: a client fault? {other:?}", door.name);
            assert!(began.elapsed() < Duration::from_secs(120), "{}: request {r} never acknowledged: {other:?}", door.name);
            // What Retry-After asks of a client.
            std::thread::sleep(Duration::from_millis(200));
        }
        acked.fetch_add(1, Ordering::SeqCst);
    }
    other
}

#[tokio::test]
async fn under_synchronous_replication_every_acknowledged_row_of_every_door_survives_a_failover_once() {
    let test = "serve_failover";
    let mut rng = SplitMix64::new(seed(test));
    let point = 3 + rng.next_u64() % (REQUESTS * 3 - 6);
    eprintln!("{test}: the primary stops once {point} of {} requests are acknowledged", REQUESTS * 3);
    let pair = ReplicatedPair::start(PairSetup { synchronous: true });
    let db = pair.fresh_db(test).await;
    let primary = db.client().await;
    primary
        .batch_execute(
            "CREATE TABLE m (time timestamptz not null, k int8 not null, v float8); \
             CREATE TABLE lp (time timestamptz not null, host text, k int8)",
        )
        .await
        .unwrap();
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    let args = [
        "--schema",
        "public",
        "--allow-table",
        "public.m",
        "--allow-table",
        "public.lp",
        "--prometheus",
        "--retry-for",
        "60s",
        "--request-timeout",
        "20s",
    ];
    let s = Server::start(&both, &args);
    let acked: Arc<AtomicU64> = Arc::default();
    // A millisecond apart, from an hour ago (inside Prometheus's retention).
    let t0 = now_ms() - 3_600_000;
    let doors = [
        Door {
            name: "csv",
            url: format!("{}/v1/tables/m", s.base),
            headers: vec![("Content-Type", "text/csv")],
            body: csv_body,
            keyed: true,
        },
        Door {
            name: "line",
            url: format!("{}/api/v2/write?bucket=public&precision=ns", s.base),
            headers: vec![],
            body: line_body,
            keyed: true,
        },
        Door { name: "prometheus", url: format!("{}/api/v1/write", s.base), headers: vec![], body: prom_body, keyed: false },
    ];
    let clients: Vec<_> = doors
        .into_iter()
        .map(|d| {
            let acked = acked.clone();
            std::thread::spawn(move || client(d, t0, acked))
        })
        .collect();
    wait_for("the failover point", Duration::from_secs(120), || {
        let n = acked.load(Ordering::SeqCst);
        async move { n >= point }
    })
    .await;
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    let answers: Vec<Vec<String>> = clients.into_iter().map(|c| c.join().expect("a client panicked")).collect();
    eprintln!("{test}: answers other than 204: {answers:?}\n{}", s.log());
    let c = pair.standby.options(&db.name).with_session_attrs(SessionAttrs::ReadWrite).connect().await.unwrap();
    let all = (REQUESTS * ROWS) as i64;
    for (table, key) in [("m", "k"), ("lp", "k")] {
        let r = c.query_one(&format!("SELECT count(*), count(DISTINCT {key}) FROM {table}"), &[]).await.unwrap();
        let (rows, distinct): (i64, i64) = (r.get(0), r.get(1));
        assert_eq!((rows, distinct), (all, all), "{table}: every row of every request once, on the new primary\n{}", s.log());
    }
    let r = c.query_one("SELECT count(*), count(DISTINCT time) FROM prometheus.samples", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (all, all), "samples on the new primary\n{}", s.log());
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
}
