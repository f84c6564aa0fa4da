//! A hostile-client soak of `chute serve`'s table doors (issue 46): clients
//! send line protocol, CSV and JSON lines with bad records among good ones
//! (a value of the wrong type, a column the table lacks, a NUL byte, an
//! unterminated quote, a row too far ahead), some requests keyed and sent
//! twice. Every row a 2xx or a partial write answered for is in the table
//! once, no refused row is, and every refusal names its line.

use std::collections::HashSet;

use chute_testkit::shared;

use super::serve::{Server, post};
use crate::common::create_time_partitioned;

const COLS: &str = "time timestamptz not null, host text, usage float8";

/// One request's body and the hosts of its good rows; bad rows get host `bad-…`.
fn request(format: usize, client: usize, n: usize) -> (String, &'static str, Vec<String>, usize) {
    let t = |i: usize| 1_700_000_000u64 + (client * 1000 + n * 10 + i) as u64;
    let mut good = Vec::new();
    let mut bad = 0;
    let mut body = String::new();
    for i in 0..10 {
        let host = format!("c{client}-r{n}-{i}");
        let poison = (client + n + i).is_multiple_of(5);
        match (format, poison) {
            (0, false) => body.push_str(&format!("soak,host={host} usage={i} {}\n", t(i) * 1_000_000_000)),
            (0, true) => body.push_str(&match i % 3 {
                0 => format!("soak,host=bad-{host} usage=1 99999999999999999999\n"),
                1 => format!("soak,host=bad-{host} nosuch=1 {}\n", t(i) * 1_000_000_000),
                _ => format!("soak,host=bad-{host}\0x usage=1 {}\n", t(i) * 1_000_000_000),
            }),
            (1, false) => body.push_str(&format!("{},{host},{i}\n", t(i))),
            (1, true) => body.push_str(&match i % 2 {
                0 => format!("{},bad-{host},not-a-number\n", t(i)),
                _ => format!("{},bad-{host},1,extra\n", t(i)),
            }),
            (_, false) => body.push_str(&format!("{{\"time\": {}, \"host\": \"{host}\", \"usage\": {i}}}\n", t(i))),
            (_, true) => body.push_str(&match i % 2 {
                0 => format!("{{\"time\": {}, \"host\": \"bad-{host}\", \"usgae\": 1}}\n", t(i)),
                _ => format!("{{\"time\": {}, \"host\": \"bad-{host}\", \"usage\": \"x\"}}\n", t(i)),
            }),
        }
        if poison {
            bad += 1;
        } else {
            good.push(host);
        }
    }
    let content_type = ["text/plain", "text/csv", "application/x-ndjson"][format.min(2)];
    (body, content_type, good, bad)
}

#[tokio::test]
async fn bad_records_among_good_ones_from_many_clients_each_good_row_once_each_bad_one_named() {
    let db = shared().fresh_db("serve_soak").await;
    let url = db.url();
    create_time_partitioned(&url, "soak", COLS, "1 day", &[]);
    let s = Server::start(&url, &[]);
    let clients: Vec<_> = (0..6)
        .map(|client| {
            let base = s.base.clone();
            std::thread::spawn(move || {
                let mut acknowledged = Vec::new();
                for n in 0..8 {
                    let format = (client + n) % 3;
                    let (body, content_type, good, bad) = request(format, client, n);
                    let url = match format {
                        0 => format!("{base}/write?db=public&precision=ns"),
                        1 => format!("{base}/v1/tables/soak?columns=time,host,usage&epoch=s"),
                        _ => format!("{base}/v1/tables/soak?epoch=s"),
                    };
                    let key = format!("soak-{client}-{n}");
                    let headers = [("Content-Type", content_type), ("Idempotency-Key", key.as_str())];
                    // Keyed, and every other request sent twice: the second answer is the first's.
                    let tries = if n.is_multiple_of(2) { 2 } else { 1 };
                    let mut answers = Vec::new();
                    for _ in 0..tries {
                        answers.push(post(&url, &headers, body.as_bytes()));
                    }
                    let (status, text) = answers[0].clone();
                    assert!(answers.iter().all(|a| *a == answers[0]), "a retry got another answer: {answers:?}");
                    match bad {
                        0 => assert_eq!(status, 204, "{text}"),
                        _ => {
                            assert_eq!(status, 400, "{text}");
                            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                            let named = v["rejected"].as_array().map_or(0, |r| r.len());
                            assert_eq!(named, bad, "every bad record named: {text}");
                            assert!(v["rejected"].as_array().unwrap().iter().all(|r| r["reason"].as_str().is_some_and(|s| !s.is_empty())));
                            assert_eq!(v["rows_committed"], good.len(), "{text}");
                        }
                    }
                    acknowledged.extend(good);
                }
                acknowledged
            })
        })
        .collect();
    let acknowledged: Vec<String> =
        clients.into_iter().flat_map(|c| c.join().unwrap_or_else(|_| panic!("a client failed; serve's log:\n{}", s.log()))).collect();
    let c = db.client().await;
    let hosts: Vec<String> = c.query("SELECT host FROM soak", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let distinct: HashSet<&String> = hosts.iter().collect();
    assert_eq!(distinct.len(), hosts.len(), "no row twice");
    assert!(hosts.iter().all(|h| !h.starts_with("bad-")), "no refused row was written");
    let want: HashSet<&String> = acknowledged.iter().collect();
    assert_eq!(distinct, want, "every acknowledged row, and only those");
    assert!(!s.log().contains("panicked"), "{}", s.log());
}
