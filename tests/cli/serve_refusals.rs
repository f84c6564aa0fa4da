//! A client fault is a 4xx, decided before any row moves (issue 46 #7-#10,
//! #17): a NUL byte in a table, schema or label name, a schema name longer
//! than PostgreSQL keeps, CSV parameters COPY would refuse, a body whose
//! Content-Encoding lies, several codings, a transfer coding serve does not
//! decode, and a remote read regex too large to run. Each answer names the
//! cause and what to do; nothing is written or created; the good request
//! after them is written as usual.

use std::io::{Read, Write};

use chute_serve::prom::wire::{ReadRequest, TimeSeries, WriteRequest};
use chute_testkit::shared;
use prost::Message;

use super::serve::{Server, agent, gzip, post};
use super::serve_hostile::connect;
use super::serve_prometheus::{matcher, now_ms, post_snappy, query, series, write};
use crate::common::{chute, create_time_partitioned, run_expect};

const CPU: &str = "time timestamptz not null, host text, usage float8";

/// The status and body of `response` if it is `want`, else a panic showing it.
fn expect(response: (u16, String), want: u16, says: &str) {
    let (status, body) = response;
    assert_eq!(status, want, "{body}");
    assert!(body.contains(says), "{says:?} not in {body}");
    assert!(body.len() < 2000, "an answer echoes at most a short piece of what was sent: {} bytes", body.len());
}

/// A request written by hand on a socket (headers hyper's clients would not send): the status line's code and the rest.
fn raw(base: &str, request: &[u8]) -> (u16, String) {
    let mut s = connect(base);
    s.write_all(request).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30))).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    (status, text)
}

#[tokio::test]
async fn names_parameters_and_bodies_a_client_got_wrong_are_4xx_before_any_row_moves() {
    let db = shared().fresh_db("serve_refusals").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &["--create-tables", "--allow-table", "public.cpu"]);
    let csv = |q: &str, body: &[u8]| post(&format!("{}/v1/tables/cpu?{q}", s.base), &[("Content-Type", "text/csv")], body);
    let row = b"2024-01-01 00:00:00+00,a,1\n";

    // #7: a NUL byte in a table name, a db= or bucket=.
    expect(post(&format!("{}/v1/tables/cp%00u", s.base), &[("Content-Type", "text/csv")], row), 400, "NUL");
    expect(post(&format!("{}/write?db=pub%00lic", s.base), &[], b"cpu,host=a usage=1 1700000000000000000\n"), 400, "NUL byte");
    expect(post(&format!("{}/api/v2/write?bucket=x%00y", s.base), &[], b"cpu,host=a usage=1 1700000000000000000\n"), 400, "NUL byte");
    // A NUL in a measurement refuses its line only; the good line of the request is written.
    expect(
        post(
            &format!("{}/write?db=public", s.base),
            &[],
            b"cp\x00u,host=a usage=1 1700000000000000000\ncpu,host=b usage=2 1700000000000000000\n",
        ),
        400,
        "NUL byte",
    );
    // #8: a schema name longer than PostgreSQL keeps, with --create-tables: refused, nothing made.
    let long = "s".repeat(70);
    expect(post(&format!("{}/write?db={long}", s.base), &[], b"m,host=a usage=1 1700000000000000000\n"), 400, "at most 63 bytes");
    expect(post(&format!("{}/api/v2/write?bucket={long}", s.base), &[], b"m,host=a usage=1 1700000000000000000\n"), 400, "at most 63");
    // #9: CSV parameters COPY would refuse.
    expect(csv("columns=time,time", row), 400, "columns= names column");
    expect(csv("header=true", b"time,host,host\n2024-01-01 00:00:00+00,a,b\n"), 400, "the header names column");
    expect(csv("delimiter=%22", row), 400, "delimiter");
    expect(csv("delimiter=%0A", row), 400, "newline");
    expect(csv("null=,", row), 400, "delimiter");
    expect(post(&format!("{}/v1/tables/cpu?delimiter=;", s.base), &[("Content-Type", "application/x-ndjson")], b"{}\n"), 400, "for CSV");
    // #10: bodies whose coding is not what they say.
    let gz = |headers: &[(&str, &str)], body: &[u8]| post(&format!("{}/v1/tables/cpu", s.base), headers, body);
    let csv_gz = [("Content-Type", "text/csv"), ("Content-Encoding", "gzip")];
    expect(gz(&csv_gz, row), 400, "not gzip");
    let mut trailing = gzip(row);
    trailing.extend_from_slice(b"garbage after the member");
    // Refused: 400 when the bytes after the member are found, 413 when they
    // read as a size trailer past the limit (refused before decompressing).
    let (status, body) = gz(&csv_gz, &trailing);
    assert!(status == 400 || status == 413, "{body}");
    let mut trailing = gzip(row);
    trailing.extend_from_slice(&[0, 0, 0, 0]);
    expect(gz(&csv_gz, &trailing), 400, "gzip body");
    let (status, text) = raw(
        &s.base,
        format!(
            "POST /v1/tables/cpu HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\nContent-Encoding: gzip\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            row.len()
        )
        .as_bytes()
        .iter()
        .chain(row.iter())
        .copied()
        .collect::<Vec<u8>>()
        .as_slice(),
    );
    assert_eq!(status, 415, "two Content-Encoding headers: {text}");
    let chunk = gzip(row);
    let mut te = format!(
        "POST /v1/tables/cpu HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n{:x}\r\n",
        chunk.len()
    )
    .into_bytes();
    te.extend_from_slice(&chunk);
    te.extend_from_slice(b"\r\n0\r\n\r\n");
    let (status, text) = raw(&s.base, &te);
    assert!((400..500).contains(&status), "Transfer-Encoding gzip: {text}");

    // Nothing of those was written, and no schema or table was made for them.
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 1, "only the good line of the partial write is in");
    let made: i64 =
        c.query_one("SELECT count(*) FROM pg_namespace WHERE nspname LIKE 'sss%' OR nspname LIKE '%x%y%'", &[]).await.unwrap().get(0);
    assert_eq!(made, 0, "no schema was made for a refused name");
    // The doctor and the status of the database are untouched by them.
    run_expect(chute().args(["--url", &url, "status"]), 0);
    // The good request afterwards is written.
    let (status, body) = csv("", row);
    assert_eq!(status, 204, "{body}\n{}", s.log());
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    assert!(!s.log().contains(" 500 "), "no refusal counted as the operator's fault:\n{}", s.log());
}

#[tokio::test]
async fn a_nul_in_a_label_and_a_regex_too_large_are_400_with_a_short_answer() {
    let db = shared().fresh_db("prom_refusals").await;
    let url = db.url();
    let s = Server::start(&url, &["--prometheus"]);
    let t = now_ms();
    let good = series(&[("__name__", "up"), ("job", "a")], &[(t, 1.0)]);
    let with = |bad: TimeSeries| WriteRequest { timeseries: vec![good.clone(), bad], metadata: vec![] };
    let (status, body) = write(&s.base, &with(series(&[("__name__", "up"), ("job", "b\0c")], &[(t, 2.0)])));
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("NUL byte"), "{body}");
    let (status, body) = write(&s.base, &with(series(&[("__name__", "up"), ("jo\0b", "c")], &[(t, 2.0)])));
    assert_eq!(status, 400, "{body}");
    // A regex of 1.7 MB: refused, the answer does not echo it.
    let huge = format!("({})", (0..200_000).map(|i| format!("v{i}")).collect::<Vec<_>>().join("|"));
    let read = ReadRequest { queries: vec![query(0, t, vec![matcher(2, "job", &huge)])], accepted_response_types: vec![] };
    let (status, body, _) = post_snappy(&format!("{}/api/v1/read", s.base), &read.encode_to_vec(), &[]);
    let body = String::from_utf8_lossy(&body).into_owned();
    assert_eq!(status, 400, "{}", &body[..body.len().min(500)]);
    assert!(body.len() < 2000, "the answer echoes the regex: {} bytes", body.len());
    assert!(body.contains("bytes)"), "it says how long the regex was: {body}");
    // Nothing was written by the refused writes.
    let (status, body) = write(&s.base, &WriteRequest { timeseries: vec![good], metadata: vec![] });
    assert_eq!(status, 204, "{body}");
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.samples", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
}

/// `n` lines of measurement `m`, one a day for `n` days from `first_day` days since 1970.
fn days(m: &str, first_day: i64, n: i64) -> String {
    (0..n).map(|d| format!("{m},host=a usage={d} {}\n", (first_day + d) * 86_400 * 1_000_000_000)).collect()
}

#[tokio::test]
async fn a_request_cannot_make_thousands_of_partitions_and_rows_too_old_or_too_far_ahead_make_none() {
    let db = shared().fresh_db("serve_new_parts").await;
    let url = db.url();
    let s = Server::start(&url, &["--create-tables", "--max-new-partitions-per-minute", "30", "--max-age", "400d"]);
    let write = format!("{}/write?db=public", s.base);
    let today = now_ms() / 86_400_000;
    let c = db.client().await;
    // One request of 200 scattered old days (within --max-age): refused, none of its partitions made.
    let (status, body) = post(&write, &[], days("m", today - 300, 200).as_bytes());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("new partitions, more than the 16 one request may make (--max-new-partitions)"), "{body}");
    let made = partitions(&c).await;
    assert!(made <= 16, "a request whose rows need 200 partitions made {made}");
    // Ten days in one request: made.
    let (status, body) = post(&write, &[], days("m", today - 20, 10).as_bytes());
    assert_eq!(status, 204, "{body}");
    // Then over the minute's 30: refused, to be sent again later.
    for first in [today - 40, today - 60] {
        let _ = post(&write, &[], days("m", first, 10).as_bytes());
    }
    let (status, body) = post(&write, &[], days("m", today - 80, 10).as_bytes());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("new partitions a minute the service makes") && body.contains("send it again in a minute"), "{body}");
    assert!(partitions(&c).await <= 30 + 16 + 8, "the minute's limit (and the premade partitions ahead) hold");
    // Too old for --max-age, and further ahead than --max-future (1d by default): no partition for either.
    let before = partitions(&c).await;
    let old = format!("m,host=old usage=1 {}\n", (today - 500) * 86_400 * 1_000_000_000);
    let (status, body) = post(&write, &[], old.as_bytes());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("older than 400d (--max-age)"), "{body}");
    let ahead = format!("m,host=ahead usage=1 {}\n", (today + 10) * 86_400 * 1_000_000_000);
    let (status, body) = post(&write, &[], ahead.as_bytes());
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("further ahead than 1d of this server's clock (--max-future)"), "{body}");
    assert_eq!(partitions(&c).await, before, "no partition was made for the refused rows");
    // The table is still cheap to ask about.
    let n: i64 = c.query_one("SELECT count(*) FROM m", &[]).await.unwrap().get(0);
    assert!(n >= 10, "{n}");
}

/// The partitions of table m.
async fn partitions(c: &tokio_postgres::Client) -> i64 {
    c.query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = to_regclass('public.m')", &[]).await.unwrap().get::<_, i64>(0)
}

/// A keyed request retried after its table gained a column between the
/// attempts (issue 46 #4): its rows encode to other bytes now, but each is
/// found at its place in the journal, so none is written twice.
#[tokio::test]
async fn a_key_holds_when_the_table_gained_a_column_between_attempts() {
    let db = shared().fresh_db("serve_key_shape").await;
    let url = db.url();
    create_time_partitioned(&url, "kone", CPU, "1 day", &[]);
    create_time_partitioned(&url, "ktwo", CPU, "1 day", &[]);
    let c = db.client().await;
    // ktwo is locked: the first attempt commits kone's rows and waits for ktwo's.
    let mut locker = db.client().await;
    let lock = locker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE ktwo IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let body: String = (0..100)
        .flat_map(|i| {
            [
                format!("kone,host=h{i} usage={i} {}\n", 1_700_000_000_000_000_000u64 + i),
                format!("ktwo,host=h{i} usage={i} {}\n", 1_700_000_000_000_000_000u64 + i),
            ]
        })
        .collect();
    let mut s = Server::start(&url, &["--request-timeout", "120s"]);
    let write = format!("{}/write?db=public", s.base);
    let first = {
        let (write, body) = (write.clone(), body.clone());
        std::thread::spawn(move || {
            // The answer is lost with the server: what this attempt did is unknown to its client.
            let _ = agent().post(&write).header("Idempotency-Key", "shape-1").send(body.as_bytes());
        })
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let n: i64 = c.query_one("SELECT count(*) FROM kone", &[]).await.unwrap().get(0);
        if n == 100 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "kone's rows were not committed within 60 s:\n{}", s.log());
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    s.child.kill();
    let _ = first.join();
    lock.rollback().await.unwrap();
    c.batch_execute("ALTER TABLE kone ADD COLUMN site text").await.unwrap();
    // The retry, to a new serve: the same key, the same request.
    let s = Server::start(&url, &[]);
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[("Idempotency-Key", "shape-1")], body.as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    for table in ["kone", "ktwo"] {
        let r = c.query_one(&format!("SELECT count(*), count(DISTINCT host) FROM {table}"), &[]).await.unwrap();
        assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (100, 100), "{table}: every row once");
    }
}
