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
