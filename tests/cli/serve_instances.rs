//! Several `chute serve` processes writing the same tables (issue 48):
//! each runs lanes of its own, so none waits for another's; an
//! `Idempotency-Key` holds across them (a retry on another instance waits
//! for the first one's attempt, or its death, and writes nothing twice).

use chute_testkit::shared;

use super::serve::{Server, post};
use crate::common::create_time_partitioned;

const CPU: &str = "time timestamptz not null, host text, id bigint, v float8";

async fn count(c: &tokio_postgres::Client, sql: &str) -> (i64, i64) {
    let r = c.query_one(sql, &[]).await.unwrap();
    (r.get(0), r.get(1))
}

/// Line protocol rows `from..to` of the `cpu` table (one `id` each).
fn lines(from: u64, to: u64) -> String {
    (from..to).map(|id| format!("cpu,host=h{} id={id}i,v={id}.5 {}\n", id % 7, 1_700_000_000 + id * 37 % 200_000)).collect()
}

#[tokio::test]
async fn three_instances_write_the_same_table_at_once() {
    let db = shared().fresh_db("serve_instances").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    // Before issue 48 the second instance's lane waited for the first one's
    // lock: its requests got 503 after --request-timeout.
    let servers: Vec<Server> = (0..3).map(|_| Server::start(&url, &["--request-timeout", "20s"])).collect();
    let mut sent = Vec::new();
    for round in 0..3u64 {
        let clients: Vec<_> = servers
            .iter()
            .enumerate()
            .flat_map(|(i, s)| {
                let base = s.base.clone();
                let at = (round * 3 + i as u64) * 2_000;
                sent.push((at, at + 2_000));
                let write = format!("{base}/write?db=public&precision=s");
                let csv = format!("{base}/v1/tables/cpu?header=true");
                let body: String = std::iter::once("time,host,id,v\n".to_owned())
                    .chain((at + 1_000..at + 2_000).map(|id| format!("2023-11-15T00:00:{:02}Z,h{},{id},{id}.5\n", id % 60, id % 7)))
                    .collect();
                [
                    std::thread::spawn(move || post(&write, &[], lines(at, at + 1_000).as_bytes())),
                    std::thread::spawn(move || post(&csv, &[("Content-Type", "text/csv")], body.as_bytes())),
                ]
            })
            .collect();
        for c in clients {
            let (status, body) = c.join().unwrap();
            assert_eq!(status, 204, "round {round}: {body}");
        }
    }
    let c = db.client().await;
    let (n, distinct) = count(&c, "SELECT count(*), count(DISTINCT id) FROM cpu").await;
    assert_eq!((n, distinct), (sent.len() as i64 * 2_000, sent.len() as i64 * 2_000));
    // Each instance loads under a journal of its own.
    let (loads, _) = count(&c, "SELECT count(DISTINCT load_id), 0::int8 FROM chute.load_journal WHERE load_id LIKE 'serve cpu%'").await;
    assert!(loads >= 3, "{loads} loads in the journal");
    for s in servers {
        let (code, log) = s.terminate();
        assert_eq!(code, Some(143), "{log}");
    }
}

#[tokio::test]
async fn the_same_key_sent_to_two_instances_at_once_is_written_once_or_refused() {
    let db = shared().fresh_db("serve_instances_key").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let (a, b) = (Server::start(&url, &[]), Server::start(&url, &[]));
    let c = db.client().await;
    let both = |key: &'static str, bodies: [String; 2]| {
        let [x, y] = bodies;
        let (wa, wb) = (format!("{}/write?db=public&precision=s", a.base), format!("{}/write?db=public&precision=s", b.base));
        let ta = std::thread::spawn(move || post(&wa, &[("Idempotency-Key", key)], x.as_bytes()));
        let tb = std::thread::spawn(move || post(&wb, &[("Idempotency-Key", key)], y.as_bytes()));
        [ta.join().unwrap(), tb.join().unwrap()]
    };
    // The same request on both at once: one copy of its rows, 204 from each.
    for round in 0..5u64 {
        let body = lines(round * 10_000, round * 10_000 + 5_000);
        let key: &'static str = Box::leak(format!("same-{round}").into_boxed_str());
        let answers = both(key, [body.clone(), body]);
        assert!(answers.iter().all(|(status, _)| *status == 204), "{answers:?}");
    }
    let (n, distinct) = count(&c, "SELECT count(*), count(DISTINCT id) FROM cpu").await;
    assert_eq!((n, distinct), (25_000, 25_000), "a key sent to two instances at once is written once");
    // Another request under the same key at once: one is written, the other gets 422 and writes nothing.
    for round in 0..5u64 {
        let (x, y) = (round * 10_000 + 100_000, round * 10_000 + 105_000);
        let key: &'static str = Box::leak(format!("other-{round}").into_boxed_str());
        let answers = both(key, [lines(x, x + 1_000), lines(y, y + 1_000)]);
        let mut statuses: Vec<u16> = answers.iter().map(|a| a.0).collect();
        statuses.sort();
        assert_eq!(statuses, [204, 422], "{answers:?}");
        let written: i64 = c
            .query_one(
                "SELECT count(*) FROM cpu WHERE id >= $1 AND id < $2",
                &[&((round * 10_000 + 100_000) as i64), &((round * 10_000 + 110_000) as i64)],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(written, 1_000, "round {round}: the rows of one body only ({answers:?})");
    }
}

/// Rows of one request in the chaos test below, and its requests' bodies.
const ROWS: u64 = 2_000;

fn request(client: u64, n: u64) -> String {
    let first = (client * 10_000 + n) * ROWS;
    (first..first + ROWS).map(|id| format!("cpu,host=c{client} id={id}i,v=1 {}\n", 1_700_000_000 + id * 7919 % 432_000)).collect()
}

/// Waits until `n` more requests than `from` are acknowledged; the count then.
async fn until_acked(acked: &std::sync::Mutex<Vec<i64>>, from: usize, n: usize, after: &str) -> usize {
    let began = std::time::Instant::now();
    loop {
        let now = acked.lock().unwrap().len();
        if now >= from + n {
            return now;
        }
        assert!(began.elapsed() < std::time::Duration::from_secs(40), "no {n} requests acknowledged within 40 s after {after}");
        // Polling pace; the deadline is above.
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn clients_retrying_on_another_instance_after_a_kill_write_every_request_once() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::{Arc, Mutex};
    const CLIENTS: u64 = 24;
    let db = shared().fresh_db("serve_instances_kill").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let start = |i: usize, listen: &str| {
        Server::start(
            &url,
            &["--listen", listen, "--instance-id", &format!("i{i}"), "--request-timeout", "20s", "--workers", "1", "--batch-rows", "300"],
        )
    };
    let mut servers: Vec<Option<Server>> = (0..3).map(|i| Some(start(i, "127.0.0.1:0"))).collect();
    let bases: Vec<String> = servers.iter().map(|s| s.as_ref().unwrap().base.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let (acked, retries): (Arc<Mutex<Vec<i64>>>, Arc<AtomicU64>) = Default::default();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (stop, acked, retries, bases) = (stop.clone(), acked.clone(), retries.clone(), bases.clone());
            std::thread::spawn(move || {
                let agent = super::serve::agent();
                let (mut n, mut at) = (0, client as usize);
                while !stop.load(Ordering::Relaxed) {
                    let (body, key) = (request(client, n), format!("c{client}-r{n}"));
                    let began = std::time::Instant::now();
                    loop {
                        // Round robin, and a failed attempt's retry goes to the next instance.
                        at += 1;
                        let write = format!("{}/write?db=public&precision=s", bases[at % bases.len()]);
                        match agent.post(&write).header("Idempotency-Key", &key).send(body.as_bytes()) {
                            Ok(r) if r.status().as_u16() == 204 => break,
                            Ok(mut r) if r.status().as_u16() != 503 => {
                                panic!("{key}: {} {}", r.status(), r.body_mut().read_to_string().unwrap_or_default())
                            }
                            _ => {
                                retries.fetch_add(1, Ordering::Relaxed);
                                assert!(began.elapsed() < std::time::Duration::from_secs(60), "{key} never acknowledged");
                                // A client's pause before its retry.
                                std::thread::sleep(std::time::Duration::from_millis(100));
                            }
                        }
                    }
                    acked.lock().unwrap().push((client * 10_000 + n) as i64);
                    n += 1;
                }
            })
        })
        .collect();
    let mut at = until_acked(&acked, 0, 30, "the start").await;
    // kill -9 of an instance while requests are in flight on it, some partly
    // committed (a request's rows span five leaves); then it starts again, where it listened.
    for i in [1, 0] {
        let mut killed = servers[i].take().unwrap();
        killed.child.kill();
        drop(killed);
        at = until_acked(&acked, at, 30, &format!("the kill of instance {i}")).await;
        servers[i] = Some(start(i, bases[i].strip_prefix("http://").unwrap()));
        at = until_acked(&acked, at, 30, &format!("the restart of instance {i}")).await;
    }
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.join().unwrap();
    }
    let acked = acked.lock().unwrap().clone();
    // Rows of retries that an attempt on a killed instance had committed.
    let skipped: f64 = bases.iter().map(|b| super::serve::metric(b, "chute_rows_skipped_total")).sum();
    let c = db.client().await;
    let (n, distinct) = count(&c, "SELECT count(*), count(DISTINCT id) FROM cpu").await;
    assert_eq!(n, distinct, "rows written twice ({} retries)", retries.load(Ordering::Relaxed));
    let present: i64 = c.query_one("SELECT count(*) FROM cpu WHERE id / $1 = ANY($2)", &[&(ROWS as i64), &acked]).await.unwrap().get(0);
    assert_eq!(present, acked.len() as i64 * ROWS as i64, "acknowledged rows missing");
    // Every request was retried until acknowledged: nothing else is there.
    assert_eq!(n, present);
    eprintln!(
        "serve_instances: {} requests of {ROWS} rows acknowledged by 3 instances, two of them killed and restarted; {} retries, {skipped} rows of them skipped",
        acked.len(),
        retries.load(Ordering::Relaxed)
    );
}

/// Each session of the database: what it waits for, its last statement, the locks it holds or waits for.
const WAITS: &str = "SELECT pid, wait_event_type || ':' || wait_event, left(query, 120),
        (SELECT string_agg(l.locktype || ' ' || coalesce(l.relation::regclass::text, l.objid::text, '') || ' ' || l.mode
                           || CASE WHEN l.granted THEN '' ELSE ' (waiting)' END, ', ')
         FROM pg_locks l WHERE l.pid = a.pid AND l.locktype IN ('advisory', 'relation'))
     FROM pg_stat_activity a WHERE datname = current_database() AND pid <> pg_backend_pid()";

// Ignored: about one run in five to ten, one request waits out
// --request-timeout (503). It is not about instances: with both rounds sent
// to one instance, on main as well, a lane made for new columns waits for
// the lock of the lane it replaces (the same load id), and that one's load
// never returns although its `Lane` was dropped (its feed disconnected):
// prints in `LaneRun::run` showed "lane serial 2 dropped" and never "run of
// serial 2 ended", its control connection idle after the journal's open. To
// be fixed in the engine's end of a feed's load; this test shows it
// (`cargo test --workspace --test cli -- --ignored serve_instances::two`).
#[ignore = "a lane replaced for new columns sometimes never gets its predecessor's lock, in one process too"]
#[tokio::test]
async fn two_instances_making_a_table_and_adding_columns_at_once_converge() {
    let db = shared().fresh_db("serve_instances_columns").await;
    let url = db.url();
    let args = ["--create-tables", "--lock-timeout", "500ms", "--request-timeout", "30s"];
    let (a, b) = (Server::start(&url, &args), Server::start(&url, &args));
    // The table does not exist yet: the first requests on both make it at once, and
    // every request brings a field of its own for one instance or the other to add.
    for round in 0..2u64 {
        let clients: Vec<_> = (1..=16u64)
            .map(|i| {
                let f = round * 100 + i;
                let write = format!("{}/write?db=public&precision=s", if i % 2 == 0 { &a.base } else { &b.base });
                let tag = if i % 4 == 1 { format!(",t{f}=x") } else { String::new() };
                std::thread::spawn(move || post(&write, &[], format!("m,host=h{f}{tag} f{f}={f}i {}\n", 1_700_000_000 + f).as_bytes()))
            })
            .collect();
        for c in clients {
            let (status, body) = c.join().unwrap();
            if status != 204 {
                // What every session of the database waits for, to see where it hangs.
                for r in db.client().await.query(WAITS, &[]).await.unwrap() {
                    eprintln!(
                        "{:?}",
                        (r.get::<_, i32>(0), r.get::<_, Option<String>>(1), r.get::<_, Option<String>>(2), r.get::<_, Option<String>>(3))
                    );
                }
            }
            assert_eq!(status, 204, "round {round}: {body}\n{}\n{}", a.log(), b.log());
        }
    }
    let c = db.client().await;
    for f in (1..=16u64).chain(101..=116) {
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM m WHERE f{f} = {f} AND host = 'h{f}'"), &[]).await.unwrap().get(0);
        assert_eq!(n, 1, "field f{f}: no lost column, no lost row");
    }
    let (rows, columns) = count(
        &c,
        "SELECT (SELECT count(*) FROM m), (SELECT count(*) FROM information_schema.columns WHERE table_name = 'm' AND table_schema = 'public')",
    )
    .await;
    // time, host, 32 fields, 8 tags.
    assert_eq!((rows, columns), (32, 2 + 32 + 8));
}
