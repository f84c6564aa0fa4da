//! `chute serve --prometheus`, the holes of issue 46: a sample sent twice
//! (an HA pair, a resend), samples past retention in a request, -0.0 on
//! remote read, remote read of years of samples, and hostile clients.

use chute_serve::prom::wire::{self, ReadRequest, WriteRequest};
use chute_testkit::shared;
use prost::Message;

use super::serve::{Server, agent};
use super::serve_prometheus::{matcher, now_ms, query, read_samples, read_streamed, series, write};

/// POSTs a remote write body (snappy-compressed here): status, answer and
/// the `X-Prometheus-Remote-Write-Samples-Written` header.
pub fn write_counted(base: &str, req: &WriteRequest) -> (u16, String, Option<String>) {
    let body = snap::raw::Encoder::new().compress_vec(&req.encode_to_vec()).unwrap();
    let mut resp = agent()
        .post(format!("{base}/api/v1/write"))
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .send(&body[..])
        .unwrap();
    let written = resp.headers().get("x-prometheus-remote-write-samples-written").and_then(|v| v.to_str().ok()).map(str::to_owned);
    (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default(), written)
}

/// Every stored sample: (job label, time in ms, the value's bits), in that order.
async fn stored(c: &tokio_postgres::Client) -> Vec<(String, i64, u64)> {
    c.query(
        "SELECT r.labels->>'job', (extract(epoch FROM s.time) * 1000)::int8, float8send(s.value)
         FROM prometheus.samples s JOIN prometheus.series r ON r.id = s.series_id ORDER BY 1, 2",
        &[],
    )
    .await
    .unwrap()
    .iter()
    .map(|r| (r.get(0), r.get(1), u64::from_be_bytes(r.get::<_, Vec<u8>>(2).try_into().unwrap())))
    .collect()
}

#[tokio::test]
async fn a_sample_written_twice_is_stored_once_the_last_write_winning_by_its_bits_and_read_back_with_its_sign() {
    let db = shared().fresh_db("prom_dup").await;
    let s = Server::start(&db.url(), &["--prometheus"]);
    let t0 = now_ms() / 1000 * 1000 - 600_000;
    let (a, b) = ([("__name__", "ha_up"), ("job", "a")], [("__name__", "ha_up"), ("job", "b")]);
    let stale = f64::from_bits(wire::STALE_NAN);
    let other_nan = f64::from_bits(0x7ff8_0000_0000_0001);
    let first = WriteRequest {
        timeseries: vec![series(&a, &[(t0, 1.0), (t0 + 15_000, stale), (t0 + 30_000, -0.0)]), series(&b, &[(t0, 0.0), (t0 + 15_000, 5.0)])],
        metadata: vec![],
    };
    // The other replica of an HA pair, or a resend with new values: other bytes, the same series and times.
    let second = WriteRequest {
        timeseries: vec![
            series(&a, &[(t0, 2.0), (t0 + 15_000, other_nan), (t0 + 30_000, 0.0), (t0 + 45_000, 3.0)]),
            series(&b, &[(t0, -0.0), (t0 + 15_000, 5.0), (t0 + 15_000, 6.0)]),
        ],
        metadata: vec![],
    };
    for req in [&first, &second] {
        let (status, text) = write(&s.base, req);
        assert_eq!(status, 204, "{text}\n{}", s.log());
    }
    let want: Vec<(String, i64, u64)> = [
        ("a", t0, 2.0f64.to_bits()),
        ("a", t0 + 15_000, other_nan.to_bits()),
        ("a", t0 + 30_000, 0.0f64.to_bits()),
        ("a", t0 + 45_000, 3.0f64.to_bits()),
        ("b", t0, (-0.0f64).to_bits()),
        ("b", t0 + 15_000, 6.0f64.to_bits()),
    ]
    .iter()
    .map(|(j, t, v)| ((*j).to_owned(), *t, *v))
    .collect();
    let c = db.client().await;
    assert_eq!(stored(&c).await, want, "one sample per series and time, the last written, compared by its bits (NaN payloads, -0.0)");
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.samples_labeled WHERE metric = 'ha_up'", &[]).await.unwrap().get(0);
    assert_eq!(n, 6, "SQL counts each sample once");

    // Remote read, both answers: the same samples, -0.0 with its sign.
    let by_series = |job: &str| want.iter().filter(|w| w.0 == job).map(|w| (w.1, w.2)).collect::<Vec<_>>();
    let q = vec![query(t0 - 1, t0 + 60_000, vec![matcher(0, "__name__", "ha_up")])];
    let read = format!("{}/api/v1/read", s.base);
    for (how, got) in [("SAMPLES", read_samples(&read, q.clone())), ("STREAMED_XOR_CHUNKS", read_streamed(&read, q.clone()))] {
        let got: Vec<Vec<(i64, u64)>> = got[0].iter().map(|(_, samples)| samples.clone()).collect();
        assert_eq!(got, [by_series("a"), by_series("b")], "{how}");
    }
}

#[tokio::test]
async fn a_samples_table_of_an_older_chute_is_deduplicated_keeping_the_last_and_made_unique() {
    let db = shared().fresh_db("prom_migrate").await;
    let t0 = now_ms() / 1000 * 1000 - 600_000;
    let req = |job: &str, samples: &[(i64, f64)]| WriteRequest {
        timeseries: vec![series(&[("__name__", "m"), ("job", job)], samples)],
        metadata: vec![],
    };
    {
        let s = Server::start(&db.url(), &["--prometheus"]);
        let (status, text) = write(&s.base, &req("a", &[(t0, 1.0), (t0 + 15_000, 2.0)]));
        assert_eq!(status, 204, "{text}");
    }
    // As an older chute left it: a plain index, and every sample twice (the copy written last holds value + 10).
    let c = db.client().await;
    c.batch_execute(
        "DROP INDEX prometheus.samples_series_time;
         CREATE INDEX samples_series_time ON prometheus.samples (series_id, time);
         INSERT INTO prometheus.samples SELECT time, series_id, value + 10 FROM prometheus.samples;",
    )
    .await
    .unwrap();
    let s = Server::start(&db.url(), &["--prometheus"]);
    let (status, text) = write(&s.base, &req("a", &[(t0 + 30_000, 3.0), (t0 + 15_000, 20.0)]));
    assert_eq!(status, 204, "{text}\n{}", s.log());
    let want = [
        ("a".to_owned(), t0, 11.0f64.to_bits()),
        ("a".to_owned(), t0 + 15_000, 20.0f64.to_bits()),
        ("a".to_owned(), t0 + 30_000, 3.0f64.to_bits()),
    ];
    assert_eq!(stored(&c).await, want, "{}", s.log());
    let unique: bool = c
        .query_one("SELECT indisunique FROM pg_index WHERE indexrelid = 'prometheus.samples_series_time'::regclass", &[])
        .await
        .unwrap()
        .get(0);
    assert!(unique);
    assert!(s.log().contains("keeping the last of each"), "{}", s.log());
}

#[tokio::test]
async fn samples_past_retention_are_refused_without_their_series_and_the_answer_says_what_was_written() {
    let db = shared().fresh_db("prom_retention").await;
    let s = Server::start(&db.url(), &["--prometheus", "--prometheus-retention", "2d"]);
    let now = now_ms() / 1000 * 1000;
    let old = now - 10 * 86_400_000;
    let job = |j: &'static str| [("__name__", "r"), ("job", j)];
    let req = WriteRequest {
        timeseries: vec![
            series(&job("good"), &[(now - 60_000, 1.0), (now, 2.0)]),
            series(&job("gone"), &[(old, 1.0)]),
            series(&job("mixed"), &[(old, 3.0), (now, 4.0)]),
        ],
        metadata: vec![],
    };
    let (status, text, written) = write_counted(&s.base, &req);
    assert_eq!(status, 400, "Prometheus drops a 4xx batch, which would be refused again: {text}");
    assert!(text.contains("partial write: 3 of 5 samples written, 2 refused"), "{text}");
    assert!(text.contains("older than the retention of 2d"), "{text}");
    assert_eq!(written.as_deref(), Some("3"), "{text}");
    let c = db.client().await;
    let jobs: Vec<String> =
        c.query("SELECT labels->>'job' FROM prometheus.series ORDER BY 1", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(jobs, ["good", "mixed"], "a series with no sample kept is not made");
    let want = [
        ("good".to_owned(), now - 60_000, 1.0f64.to_bits()),
        ("good".to_owned(), now, 2.0f64.to_bits()),
        ("mixed".to_owned(), now, 4.0f64.to_bits()),
    ];
    assert_eq!(stored(&c).await, want);

    let (status, text, written) =
        write_counted(&s.base, &WriteRequest { timeseries: vec![series(&job("late"), &[(old, 1.0)])], metadata: vec![] });
    assert_eq!((status, written.as_deref()), (400, Some("0")), "{text}");
    assert!(text.contains("nothing was written: 0 of 1 samples written, 1 refused"), "{text}");
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.series", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    let (status, _, written) =
        write_counted(&s.base, &WriteRequest { timeseries: vec![series(&job("good"), &[(now + 1000, 1.0)])], metadata: vec![] });
    assert_eq!((status, written.as_deref()), (204, Some("1")));
}

/// The peak resident memory of process `pid` (VmHWM), in bytes.
fn peak_rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status.lines().find_map(|l| l.strip_prefix("VmHWM:")).unwrap().trim().trim_end_matches("kB").trim().parse().unwrap();
    kb * 1024
}

/// What a streamed remote read may add to serve's peak memory, whatever the range.
const STREAM_BOUND: u64 = 64 << 20;

#[tokio::test]
async fn a_remote_read_of_ten_years_streams_in_bounded_memory_and_a_samples_answer_is_refused_early_saying_why() {
    let db = shared().fresh_db("prom_big").await;
    let c = db.client().await;
    // Ten years of three series, 10 M samples, made in SQL: the samples table as serve makes it,
    // unpartitioned here (serve reads any samples table with these columns).
    let per_series: i64 = 3_333_334;
    let end = now_ms() / 1000 * 1000 - 3_600_000;
    let step = 10 * 365 * 86_400_000 / per_series;
    let start = end - step * (per_series - 1);
    c.batch_execute(&format!(
        "CREATE SCHEMA prometheus;
         CREATE TABLE prometheus.samples (time timestamptz NOT NULL, series_id bigint NOT NULL, value float8 NOT NULL);
         INSERT INTO prometheus.samples
             SELECT timestamptz 'epoch' + ({start} + g * {step}::int8) * interval '1 millisecond', s, (g % 1000)::float8
             FROM generate_series(1, 3) s, generate_series(0, {per_series} - 1) g;
         CREATE UNIQUE INDEX samples_series_time ON prometheus.samples (series_id, time);"
    ))
    .await
    .unwrap();
    let mut s = Server::start(&db.url(), &["--prometheus"]);
    let read = format!("{}/api/v1/read", s.base);
    let all = || vec![query(start, end, vec![matcher(0, "__name__", "big")])];
    // The first request makes the series table.
    assert!(read_samples(&read, all())[0].is_empty());
    c.batch_execute(
        "INSERT INTO prometheus.series (id, metric, labels, key)
         SELECT i, 'big', jsonb_build_object('__name__', 'big', 'i', i::text), int4send(i) FROM generate_series(1, 3) i",
    )
    .await
    .unwrap();
    let pid = s.child.id();
    let before = peak_rss(pid);
    let began = std::time::Instant::now();
    let got = read_streamed(&read, all());
    let streamed_in = began.elapsed();
    let after = peak_rss(pid);
    eprintln!(
        "streamed {} samples in {streamed_in:?}; serve's peak RSS {} MiB before, {} MiB after",
        per_series * 3,
        before >> 20,
        after >> 20
    );
    assert_eq!(got[0].len(), 3);
    for (i, (labels, samples)) in got[0].iter().enumerate() {
        assert_eq!(labels[1], ("i".to_owned(), (i + 1).to_string()));
        assert_eq!(samples.len() as i64, per_series, "every sample, once");
        assert_eq!((samples[0].0, samples[samples.len() - 1].0), (start, end));
        assert!(samples.windows(2).all(|w| w[1].0 == w[0].0 + step));
    }
    drop(got);
    assert!(after < before + STREAM_BOUND, "serve's peak RSS grew from {} to {} MiB", before >> 20, after >> 20);

    // SAMPLES: refused as soon as the answer would pass what serve may hold, with the way out.
    let req = ReadRequest { queries: all(), accepted_response_types: vec![] };
    let (status, body, _) = super::serve_prometheus::post_snappy(&read, &req.encode_to_vec(), &[]);
    let body = String::from_utf8_lossy(&body);
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("the answer would hold more than") && body.contains("ask for STREAMED_XOR_CHUNKS"), "{body}");
    let refused = peak_rss(pid);
    eprintln!("serve's peak RSS after the refused SAMPLES read: {} MiB", refused >> 20);
    // The SAMPLES answer may hold what --memory-mb (256) leaves a request, no more.
    assert!(refused < before + (256 << 20), "serve's peak RSS grew from {} to {} MiB", before >> 20, refused >> 20);
    assert!(s.child.running());
}

/// A soak request: body, extra headers, the status and words its answer
/// must have, and the samples it writes (client, series, time, bits).
type Attempt<'a> = (Vec<u8>, Vec<(&'a str, &'a str)>, u16, &'a str, Vec<(String, String, i64, u64)>);

/// One hostile client's requests (see the soak below): the samples it was
/// told were written, as (client, series, time, bits).
fn hostile_client(client: u32, rounds: u32, base: &str, now: i64) -> Vec<(String, String, i64, u64)> {
    use super::serve_prometheus::{post_raw, post_snappy};
    let url = format!("{base}/api/v1/write");
    let mut kept = Vec::new();
    let mut rng = 0x9e37_79b9_u64.wrapping_mul(u64::from(client) + 1);
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let c = client.to_string();
    for round in 0..rounds {
        let name = |k: &str| format!("{round}-{k}");
        let (good, gone, mixed) = (name("good"), name("gone"), name("mixed"));
        let labels =
            |s: &str| vec![("__name__".to_owned(), "soak".to_owned()), ("client".to_owned(), c.clone()), ("s".to_owned(), s.to_owned())];
        let ts = |l: &[(String, String)], samples: &[(i64, f64)]| {
            let refs: Vec<(&str, &str)> = l.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            series(&refs, samples)
        };
        let t = now - i64::from(round) * 60_000;
        let good_samples: Vec<(i64, f64)> = (0..5).map(|i| (t + i * 1000, (next() % 1000) as f64 - 500.0)).collect();
        let keep = |s: &str, samples: &[(i64, f64)]| {
            // The last of a time wins.
            let mut by_time = std::collections::BTreeMap::new();
            for (t, v) in samples {
                by_time.insert(*t, v.to_bits());
            }
            by_time.into_iter().map(|(t, bits)| (c.clone(), s.to_owned(), t, bits)).collect::<Vec<_>>()
        };
        let kind = next() % 7;
        let (body, headers, want_status, want_text, written): Attempt<'_> = match kind {
            0 => (
                WriteRequest { timeseries: vec![ts(&labels(&good), &good_samples)], metadata: vec![] }.encode_to_vec(),
                vec![],
                204,
                "",
                keep(&good, &good_samples),
            ),
            1 => {
                let bad = vec![("__name__".to_owned(), "soak".to_owned()), ("v".to_owned(), "a\0b".to_owned())];
                let req = WriteRequest { timeseries: vec![ts(&labels(&good), &good_samples), ts(&bad, &[(t, 1.0)])], metadata: vec![] };
                (req.encode_to_vec(), vec![], 400, "NUL byte", vec![])
            }
            2 => {
                let mut bad = labels(&name("long"));
                bad.push(("n".repeat(300), "x".to_owned()));
                let req = WriteRequest { timeseries: vec![ts(&labels(&good), &good_samples), ts(&bad, &[(t, 1.0)])], metadata: vec![] };
                (req.encode_to_vec(), vec![], 400, "label name of 300 bytes", vec![])
            }
            3 => {
                let old = now - 10 * 86_400_000 - i64::from(round);
                let req = WriteRequest {
                    timeseries: vec![
                        ts(&labels(&good), &good_samples),
                        ts(&labels(&gone), &[(old, 1.0)]),
                        ts(&labels(&mixed), &[(old, 2.0), (t, 3.0)]),
                    ],
                    metadata: vec![],
                };
                let mut w = keep(&good, &good_samples);
                w.extend(keep(&mixed, &[(t, 3.0)]));
                (req.encode_to_vec(), vec![], 400, "older than the retention of 2d", w)
            }
            4 => {
                // The same sample twice in a request, and a series every client sends the same samples of (an HA pair).
                let twice = [good_samples[0], good_samples[1], good_samples[0]];
                let shared = [("__name__", "soak"), ("client", "all"), ("s", "shared")];
                let ha = [(t, f64::from(round))];
                let req = WriteRequest { timeseries: vec![ts(&labels(&good), &twice), series(&shared, &ha)], metadata: vec![] };
                let mut w = keep(&good, &twice);
                w.push(("all".to_owned(), "shared".to_owned(), t, f64::from(round).to_bits()));
                (req.encode_to_vec(), vec![], 204, "", w)
            }
            5 => {
                // Bytes that are no snappy block, or no protobuf once decompressed.
                let garbage: Vec<u8> = (0..64 + next() % 256).map(|_| next() as u8).collect();
                let raw = if round % 2 == 0 { "raw" } else { "" };
                (garbage, vec![("Garbage", raw)], 400, "", vec![])
            }
            _ => {
                let req = WriteRequest { timeseries: vec![ts(&labels(&good), &good_samples)], metadata: vec![] }.encode_to_vec();
                (req, vec![("Content-Type", "text/plain")], 415, "Content-Type \\\"text/plain\\\"", vec![])
            }
        };
        let times = if next() % 3 == 0 { 2 } else { 1 };
        for attempt in 0..times {
            let (status, answer, _) = if headers.is_empty() {
                post_snappy(&url, &body, &[])
            } else if headers[0] == ("Garbage", "raw") {
                post_raw(&url, &body, &[("Content-Encoding", "snappy"), ("Content-Type", "application/x-protobuf")], &[])
            } else if headers[0].0 == "Garbage" {
                post_snappy(&url, &body, &[])
            } else {
                let compressed = snap::raw::Encoder::new().compress_vec(&body).unwrap();
                post_raw(&url, &compressed, &[("Content-Encoding", "snappy")], &headers)
            };
            let answer = String::from_utf8_lossy(&answer).into_owned();
            // Garbage may also decompress to more than the body may hold: 413.
            let ok = status == want_status || (kind == 5 && status == 413);
            assert!(ok, "client {client} round {round} kind {kind} attempt {attempt}: {status} {answer}");
            if status >= 400 {
                let v: serde_json::Value = serde_json::from_str(&answer).unwrap_or_else(|_| panic!("not JSON: {answer}"));
                let message = v["message"].as_str().unwrap_or_default();
                assert!(!message.is_empty() && answer.contains(want_text), "kind {kind}: {want_text:?} not in {answer}");
            }
        }
        kept.extend(written);
    }
    kept
}

#[tokio::test]
async fn hostile_remote_write_clients_leave_every_acknowledged_sample_once_and_no_refused_one() {
    let db = shared().fresh_db("prom_soak").await;
    let s = Server::start(&db.url(), &["--prometheus", "--prometheus-retention", "2d"]);
    let now = now_ms() / 1000 * 1000;
    let clients: Vec<_> = (0..5u32)
        .map(|c| {
            let base = s.base.clone();
            std::thread::spawn(move || hostile_client(c, 30, &base, now))
        })
        .collect();
    let mut want: Vec<(String, String, i64, u64)> = clients.into_iter().flat_map(|h| h.join().unwrap()).collect();
    want.sort();
    want.dedup();
    assert!(want.len() > 100, "{} samples acknowledged", want.len());
    let c = db.client().await;
    let got: Vec<(String, String, i64, u64)> = c
        .query(
            "SELECT r.labels->>'client', r.labels->>'s', (extract(epoch FROM s.time) * 1000)::int8, float8send(s.value)
             FROM prometheus.samples s JOIN prometheus.series r ON r.id = s.series_id ORDER BY 1, 2, 3",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), u64::from_be_bytes(r.get::<_, Vec<u8>>(3).try_into().unwrap())))
        .collect();
    assert_eq!(got.len(), want.len(), "every acknowledged sample once, no refused one\n{}", s.log());
    assert_eq!(got, want);
    let made: i64 = c
        .query_one(
            "SELECT count(*) FROM prometheus.series WHERE labels->>'s' LIKE '%-gone' OR labels->>'s' LIKE '%-long' OR labels ? 'v'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(made, 0, "no series made for refused samples");
}
