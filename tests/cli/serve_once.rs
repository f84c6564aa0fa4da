//! Exactly once through `chute serve`: 100 concurrent clients post
//! 1,000-row line-protocol batches, each retrying a request that
//! was not answered 204 with the same `Idempotency-Key`; meanwhile
//! PostgreSQL is restarted (`pg_ctl restart -m fast`), chute gets SIGTERM
//! and is started again, and then SIGKILL (rows committed but not yet
//! answered are retried: the journal makes them skipped) and is started
//! again; each event comes once 20 more batches were acknowledged since
//! the last. Every acknowledged row is in the table, and no row is there twice.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chute_testkit::TestCluster;

use super::serve::{Server, agent};
use crate::common::create_time_partitioned;

const CLIENTS: u64 = 100;
const ROWS: u64 = 1_000;

fn body(client: u64, batch: u64) -> String {
    let mut out = String::with_capacity(ROWS as usize * 60);
    for r in 0..ROWS {
        let id = (client * 100_000 + batch) * ROWS + r;
        // Three days of seconds: rows of a batch spread over several leaves.
        out.push_str(&format!("cpu,client=c{client} id={id}i,v={r}.5 {}\n", 1_700_000_000 + (id * 7919) % 259_200));
    }
    out
}

/// Waits until `n` more batches than `from` are acknowledged: the clients
/// are writing through whatever happened last. Returns the count then.
async fn until_acknowledged(acked: &Mutex<Vec<i64>>, from: usize, n: usize, after: &str) -> usize {
    let began = Instant::now();
    loop {
        let now = acked.lock().unwrap().len();
        if now >= from + n {
            return now;
        }
        assert!(began.elapsed() < Duration::from_secs(120), "no {n} batches acknowledged within 120 s after {after} ({now} in all)");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn retried_requests_are_exactly_once_through_a_server_restart_a_sigterm_and_a_kill() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("serve_once").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, client text, id bigint, v float8", "1 day", &[]);
    let first = Server::start(&url, &["--listen", "127.0.0.1:0", "--retry-for", "2min", "--request-timeout", "30s"]);
    // Every later server listens where the first one did: the clients keep their URL.
    let listen = first.base.strip_prefix("http://").unwrap().to_owned();
    let args = ["--listen", listen.as_str(), "--retry-for", "2min", "--request-timeout", "30s"];
    let mut server = Some(first);
    let write = format!("http://{listen}/write?db=public&precision=s");

    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<i64>>> = Arc::default();
    let retries = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (stop, acked, retries, write) = (stop.clone(), acked.clone(), retries.clone(), write.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let mut batch = 0;
                while !stop.load(Ordering::Relaxed) {
                    let body = body(client, batch);
                    let key = format!("c{client}-b{batch}");
                    let began = Instant::now();
                    loop {
                        let r = agent.post(&write).header("Idempotency-Key", &key).send(body.as_bytes());
                        match r {
                            Ok(resp) if resp.status().as_u16() == 204 => break,
                            Ok(mut resp) if resp.status().as_u16() == 400 => {
                                panic!("batch {key} refused: {}", resp.body_mut().read_to_string().unwrap_or_default())
                            }
                            _ => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                assert!(began.elapsed() < Duration::from_secs(180), "batch {key} never acknowledged");
                                // A client's pause before its retry.
                                std::thread::sleep(Duration::from_millis(200));
                            }
                        }
                    }
                    acked.lock().unwrap().push((client * 100_000 + batch) as i64);
                    batch += 1;
                }
            })
        })
        .collect();

    // Each event waits for 20 batches acknowledged since the last one: the
    // clients are writing, through the restart, the new server, the kill.
    let before_restart = until_acknowledged(&acked, 0, 20, "the start").await;
    cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
    let after_restart = until_acknowledged(&acked, before_restart, 20, "PostgreSQL's restart").await;
    let (code, log) = server.take().unwrap().terminate();
    assert_eq!(code, Some(143), "{log}");
    let before_sigterm = acked.lock().unwrap().len().max(after_restart);
    server = Some(Server::start(&url, &args));
    until_acknowledged(&acked, before_sigterm, 20, "SIGTERM and a new server").await;
    // kill -9: requests in flight get no answer, some of them committed.
    let mut killed = server.take().unwrap();
    killed.child.kill();
    drop(killed);
    let before_kill = acked.lock().unwrap().len();
    server = Some(Server::start(&url, &args));
    until_acknowledged(&acked, before_kill, 20, "the kill and a new server").await;
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let base = server.as_ref().unwrap().base.clone();
    let (_, metrics) = super::serve::get(&format!("{base}/metrics"));
    let skipped = metrics.lines().find_map(|l| l.strip_prefix("chute_rows_skipped_total ")).unwrap_or("0").to_owned();
    let acked = acked.lock().unwrap().clone();

    let c = db.client().await;
    let (n, distinct): (i64, i64) = {
        let r = c.query_one("SELECT count(*), count(DISTINCT id) FROM cpu", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(n, distinct, "rows stored twice ({} retries)", retries.load(Ordering::Relaxed));
    let present: i64 = c.query_one("SELECT count(*) FROM cpu WHERE id / 1000 = ANY($1)", &[&acked]).await.unwrap().get(0);
    assert_eq!(present, acked.len() as i64 * ROWS as i64, "acknowledged rows missing");
    // Every request was retried until acknowledged: nothing else is there.
    assert_eq!(n, present);
    eprintln!(
        "serve_once: {} batches acknowledged ({} rows in the table), {} retries; {before_restart} before the server restart, \
         {before_sigterm} before SIGTERM, {before_kill} before SIGKILL; {skipped} rows of retries skipped after it",
        acked.len(),
        n,
        retries.load(Ordering::Relaxed)
    );
}
