//! `chute serve --prometheus`: remote write and remote read, spoken by a
//! client here (the `prost` messages of `chute_serve::prom::wire`,
//! snappy) and by real Prometheus servers (`serve_prometheus_real.rs`).

use std::time::Duration;

use chute_serve::prom::wire::{
    self, ChunkedReadResponse, Label, LabelMatcher, MetricMetadata, Query, ReadRequest, ReadResponse, Sample, TimeSeries, WriteRequest,
};
use chute_serve::prom::xor;
use chute_testkit::shared;
use prost::Message;

use super::serve::{Server, agent};

pub fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64
}

pub fn series(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> TimeSeries {
    TimeSeries {
        labels: labels.iter().map(|(n, v)| Label { name: (*n).into(), value: (*v).into() }).collect(),
        samples: samples.iter().map(|(t, v)| Sample { timestamp: *t, value: *v }).collect(),
        exemplars: vec![],
    }
}

/// POSTs `body` snappy-compressed with remote write's headers (and `extra`): status and answer.
pub fn post_snappy(url: &str, body: &[u8], extra: &[(&str, &str)]) -> (u16, Vec<u8>, Option<String>) {
    let compressed = snap::raw::Encoder::new().compress_vec(body).unwrap();
    post_raw(url, &compressed, &[("Content-Encoding", "snappy"), ("Content-Type", "application/x-protobuf")], extra)
}

pub fn post_raw(url: &str, body: &[u8], headers: &[(&str, &str)], extra: &[(&str, &str)]) -> (u16, Vec<u8>, Option<String>) {
    let mut req = agent().post(url).header("X-Prometheus-Remote-Write-Version", "0.1.0");
    for (k, v) in headers.iter().chain(extra) {
        req = req.header(*k, *v);
    }
    let mut resp = req.send(body).unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    let content_type = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).map(str::to_owned);
    // No limit of the client's own: a streamed read of years is hundreds of MiB.
    (status, resp.body_mut().with_config().limit(u64::MAX).read_to_vec().unwrap_or_default(), content_type)
}

pub fn write(base: &str, req: &WriteRequest) -> (u16, String) {
    let (status, body, _) = post_snappy(&format!("{base}/api/v1/write"), &req.encode_to_vec(), &[]);
    (status, String::from_utf8_lossy(&body).into_owned())
}

pub fn matcher(t: i32, name: &str, value: &str) -> LabelMatcher {
    LabelMatcher { r#type: t, name: name.into(), value: value.into() }
}

pub fn query(start: i64, end: i64, matchers: Vec<LabelMatcher>) -> Query {
    Query { start_timestamp_ms: start, end_timestamp_ms: end, matchers, hints: None }
}

/// A series as compared here: its labels and (time, value bits) samples.
pub type Got = Vec<(Vec<(String, String)>, Vec<(i64, u64)>)>;

fn got_of(ts: &[TimeSeries]) -> Got {
    ts.iter()
        .map(|t| {
            (
                t.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect(),
                t.samples.iter().map(|s| (s.timestamp, s.value.to_bits())).collect(),
            )
        })
        .collect()
}

/// Remote read of `queries` as SAMPLES: each query's series.
pub fn read_samples(url: &str, queries: Vec<Query>) -> Vec<Got> {
    let req = ReadRequest { queries, accepted_response_types: vec![] };
    let (status, body, content_type) = post_snappy(url, &req.encode_to_vec(), &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(content_type.as_deref(), Some("application/x-protobuf"));
    let plain = snap::raw::Decoder::new().decompress_vec(&body).expect("a snappy answer");
    ReadResponse::decode(&plain[..]).expect("a ReadResponse").results.iter().map(|r| got_of(&r.timeseries)).collect()
}

/// Remote read of `queries` as STREAMED_XOR_CHUNKS: each query's series, chunks decoded.
pub fn read_streamed(url: &str, queries: Vec<Query>) -> Vec<Got> {
    let n = queries.len();
    let req = ReadRequest { queries, accepted_response_types: vec![wire::STREAMED_XOR_CHUNKS, wire::SAMPLES] };
    let (status, body, content_type) = post_snappy(url, &req.encode_to_vec(), &[]);
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    assert!(
        content_type.as_deref().is_some_and(|t| t.starts_with("application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse")),
        "{content_type:?}"
    );
    let mut out: Vec<Got> = vec![Vec::new(); n];
    for frame in xor::unframe(&body).expect("frames with good checksums") {
        let r = ChunkedReadResponse::decode(frame).expect("a ChunkedReadResponse");
        let got = &mut out[r.query_index as usize];
        for s in r.chunked_series {
            let labels: Vec<(String, String)> = s.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
            if got.last().is_none_or(|(l, _)| *l != labels) {
                got.push((labels, Vec::new()));
            }
            for c in s.chunks {
                assert_eq!(c.r#type, wire::CHUNK_XOR);
                got.last_mut().unwrap().1.extend(xor::read_chunk(&c.data).expect("an XOR chunk"));
            }
        }
    }
    out
}

fn labels(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pairs.iter().map(|(n, v)| ((*n).to_owned(), (*v).to_owned())).collect();
    v.sort();
    v
}

#[tokio::test]
async fn samples_written_are_read_back_by_matchers_and_time_with_staleness_markers_kept() {
    let db = shared().fresh_db("prom_rw").await;
    let url = db.url();
    let s = Server::start(&url, &["--prometheus"]);
    let t0 = now_ms() / 1000 * 1000 - 3_600_000;
    let stale = f64::from_bits(wire::STALE_NAN);
    let old = t0 - 3 * 86_400_000;
    let a = [("__name__", "up"), ("job", "node"), ("instance", "a:1")];
    let b = [("instance", "b:1"), ("__name__", "up"), ("job", "node"), ("zone", "")];
    let c = [("__name__", "http_requests_total"), ("job", "api"), ("code", "200"), ("path", "/x")];
    let d = [("__name__", "http_requests_total"), ("job", "api"), ("code", "500")];
    let e = [("__name__", "node_temp"), ("job", "node"), ("zone", "é")];
    let req = WriteRequest {
        timeseries: vec![
            series(&a, &[(t0, 1.0), (t0 + 15_000, 1.0), (t0 + 30_000, stale)]),
            series(&b, &[(old, 1.0), (t0, 0.0), (t0 + 15_000, 1.0)]),
            series(&c, &[(t0, 10.0), (t0 + 15_000, 12.5), (t0 + 30_000, 20.0)]),
            series(&d, &[(t0, 1.0)]),
            series(&e, &[(t0, -1.5e-300), (t0 + 15_000, f64::INFINITY)]),
        ],
        metadata: vec![MetricMetadata {
            r#type: 2,
            metric_family_name: "up".into(),
            help: "1 if the target is up".into(),
            unit: String::new(),
        }],
    };
    let (status, text) = write(&s.base, &req);
    assert_eq!(status, 204, "{text}\n{}", s.log());
    // Sent again (Prometheus retries what it got no answer for): written once.
    let (status, text) = write(&s.base, &req);
    assert_eq!(status, 204, "{text}\n{}", s.log());

    let cl = db.client().await;
    let n: i64 = cl.query_one("SELECT count(*) FROM prometheus.samples", &[]).await.unwrap().get(0);
    assert_eq!(n, 12, "every sample once");
    let n: i64 = cl.query_one("SELECT count(*) FROM prometheus.series", &[]).await.unwrap().get(0);
    assert_eq!(n, 5);
    let r = cl.query_one("SELECT type, help FROM prometheus.metadata WHERE metric = 'up'", &[]).await.unwrap();
    assert_eq!((r.get::<_, String>(0), r.get::<_, String>(1)), ("gauge".into(), "1 if the target is up".into()));
    // SQL for people: labels as jsonb, staleness markers left out.
    let rows = cl
        .query("SELECT labels->>'instance', count(*) FROM prometheus.samples_labeled WHERE metric = 'up' GROUP BY 1 ORDER BY 1", &[])
        .await
        .unwrap();
    let by_instance: Vec<(String, i64)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(by_instance, [("a:1".to_owned(), 2), ("b:1".to_owned(), 3)]);
    let policy: i64 = cl
        .query_one("SELECT count(*) FROM chute.partition_config WHERE parent_schema = 'prometheus' AND parent_table = 'samples'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(policy, 1, "the samples table has a chute policy: chute partition maintain ages it out");

    let bits = |v: &[(i64, f64)]| v.iter().map(|(t, x)| (*t, x.to_bits())).collect::<Vec<_>>();
    let all = (old - 1, t0 + 60_000);
    let queries = vec![
        query(all.0, all.1, vec![matcher(0, "__name__", "up")]),
        query(all.0, all.1, vec![matcher(0, "__name__", "http_requests_total"), matcher(1, "code", "200")]),
        query(all.0, all.1, vec![matcher(2, "__name__", "up|node_.*"), matcher(0, "job", "node"), matcher(2, "instance", "")]),
        query(all.0, all.1, vec![matcher(2, "job", "a.i")]),
        query(all.0, all.1, vec![matcher(0, "__name__", "up"), matcher(3, "instance", "a.*")]),
        query(t0 + 10_000, t0 + 20_000, vec![matcher(0, "__name__", "up")]),
        query(all.0, all.1, vec![matcher(0, "__name__", "nothing")]),
    ];
    let want: Vec<Got> = vec![
        vec![
            (labels(&a), bits(&[(t0, 1.0), (t0 + 15_000, 1.0), (t0 + 30_000, stale)])),
            (labels(&b[..3]), bits(&[(old, 1.0), (t0, 0.0), (t0 + 15_000, 1.0)])),
        ],
        vec![(labels(&d), bits(&[(t0, 1.0)]))],
        vec![(labels(&e), bits(&[(t0, -1.5e-300), (t0 + 15_000, f64::INFINITY)]))],
        vec![(labels(&c), bits(&[(t0, 10.0), (t0 + 15_000, 12.5), (t0 + 30_000, 20.0)])), (labels(&d), bits(&[(t0, 1.0)]))],
        vec![(labels(&b[..3]), bits(&[(old, 1.0), (t0, 0.0), (t0 + 15_000, 1.0)]))],
        vec![(labels(&a), bits(&[(t0 + 15_000, 1.0)])), (labels(&b[..3]), bits(&[(t0 + 15_000, 1.0)]))],
        vec![],
    ];
    let read = format!("{}/api/v1/read", s.base);
    let mut sorted_want = want.clone();
    for w in &mut sorted_want {
        w.sort();
    }
    let mut got = read_samples(&read, queries.clone());
    for g in &mut got {
        g.sort();
    }
    assert_eq!(got, sorted_want, "SAMPLES");
    // Streamed: the series of each query sorted by labels, as Prometheus streams them.
    assert_eq!(read_streamed(&read, queries.clone()), sorted_want, "STREAMED_XOR_CHUNKS");

    // Time pruning: a read of the last hour does not touch the partition of three days ago,
    // even while a lock on it would block anything that did.
    let old_leaf: String = cl
        .query_one(
            "SELECT c.oid::regclass::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
             WHERE i.inhparent = 'prometheus.samples'::regclass AND EXISTS (SELECT 1 FROM prometheus.samples s WHERE s.tableoid = c.oid AND s.time < now() - interval '2 days')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    let mut locker = db.client().await;
    let tx = locker.transaction().await.unwrap();
    tx.batch_execute(&format!("LOCK TABLE {old_leaf} IN ACCESS EXCLUSIVE MODE")).await.unwrap();
    let recent = vec![query(t0 - 1, t0 + 60_000, vec![matcher(0, "__name__", "up")])];
    let reader = read.clone();
    let pruned = tokio::time::timeout(Duration::from_secs(20), tokio::task::spawn_blocking(move || read_samples(&reader, recent))).await;
    let pruned = pruned.expect("a read of the last hour waited for the lock on the partition of three days ago").unwrap();
    assert_eq!(pruned[0].iter().map(|(_, s)| s.len()).sum::<usize>(), 5);
    tx.rollback().await.unwrap();
    let index: i64 = cl
        .query_one("SELECT count(*) FROM pg_indexes WHERE schemaname = 'prometheus' AND indexname = 'samples_series_time'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(index, 1);

    let (_, metrics) = super::serve::get(&format!("{}/metrics", s.base));
    for (name, want) in [
        ("chute_prometheus_samples_received_total", 24.0),
        ("chute_prometheus_samples_committed_total", 24.0),
        ("chute_prometheus_series_created_total", 5.0),
    ] {
        let v: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .unwrap_or_else(|| panic!("no {name} in\n{metrics}"))
            .parse()
            .unwrap();
        assert_eq!(v, want, "{name}");
    }
    assert!(metrics.contains("chute_prometheus_read_queries_total{outcome=\"ok\"} 3"), "{metrics}");
    assert!(metrics.contains("chute_prometheus_read_seconds_count"), "{metrics}");
}

#[tokio::test]
async fn bad_remote_writes_get_a_4xx_naming_the_cause_and_write_nothing() {
    let db = shared().fresh_db("prom_bad").await;
    let url = db.url();
    let s = Server::start(&url, &["--prometheus"]);
    let w = format!("{}/api/v1/write", s.base);
    let t = now_ms();
    let good = series(&[("__name__", "up"), ("job", "a")], &[(t, 1.0)]);
    let request = |extra: TimeSeries| WriteRequest { timeseries: vec![good.clone(), extra], metadata: vec![] }.encode_to_vec();
    let expect = |(status, body, _): (u16, Vec<u8>, Option<String>), want_status: u16, want: &str| {
        let body = String::from_utf8_lossy(&body).into_owned();
        assert_eq!(status, want_status, "{body}");
        assert!(body.contains(want), "{want:?} not in {body}");
    };
    let snappy_headers = [("Content-Encoding", "snappy"), ("Content-Type", "application/x-protobuf")];
    expect(post_raw(&w, b"not snappy at all", &snappy_headers, &[]), 400, "not snappy-compressed");
    let whole = request(series(&[("__name__", "x")], &[(t, 2.0)]));
    expect(post_snappy(&w, &whole[..whole.len() - 3], &[]), 400, "truncated");
    expect(post_snappy(&w, &request(series(&[("job", "b")], &[(t, 2.0)])), &[]), 400, "series 2: a series has no metric name");
    let long = "v".repeat(20_000);
    expect(
        post_snappy(&w, &request(series(&[("__name__", "x"), ("big", &long)], &[(t, 2.0)])), &[]),
        400,
        "more than the 16384 chute takes",
    );
    let many: Vec<(String, String)> = (0..200).map(|i| (format!("l{i}"), "v".to_owned())).collect();
    let mut many_refs: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    many_refs.push(("__name__", "x"));
    expect(post_snappy(&w, &request(series(&many_refs, &[(t, 2.0)])), &[]), 400, "201 labels, more than the 128");
    expect(post_snappy(&w, &request(series(&[("__name__", "x"), ("a", "1"), ("a", "2")], &[(t, 2.0)])), &[]), 400, "appears twice");
    expect(
        post_snappy(&w, &request(series(&[("__name__", "x")], &[(i64::MAX, 2.0)])), &[]),
        400,
        "outside what PostgreSQL's timestamptz holds",
    );
    // Not snappy-encoded, or remote write 2.0: 415, which Prometheus does not retry.
    expect(post_raw(&w, &request(good.clone()), &[("Content-Type", "application/x-protobuf")], &[]), 415, "Content-Encoding");
    let v2 = [("Content-Encoding", "snappy"), ("Content-Type", "application/x-protobuf;proto=io.prometheus.write.v2.Request")];
    expect(post_raw(&w, &snap::raw::Encoder::new().compress_vec(&request(good.clone())).unwrap(), &v2, &[]), 415, "remote write 2.0");
    // Reads: a regex RE2 would refuse is refused too.
    let r = format!("{}/api/v1/read", s.base);
    let bad_re = ReadRequest { queries: vec![query(0, t, vec![matcher(2, "job", "(")])], accepted_response_types: vec![] };
    expect(post_snappy(&r, &bad_re.encode_to_vec(), &[]), 400, "query 0: matcher job=~\\\"(\\\": not a regular expression");

    // Nothing of those was written: the schema is made by the first good request.
    let c = db.client().await;
    let made: Option<String> = c.query_one("SELECT to_regclass('prometheus.samples')::text", &[]).await.unwrap().get(0);
    assert_eq!(made, None, "a refused request made nothing");
    let (status, body) = write(&s.base, &WriteRequest { timeseries: vec![good.clone()], metadata: vec![] });
    assert_eq!(status, 204, "{body}");
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.samples", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
    let (_, metrics) = super::serve::get(&format!("{}/metrics", s.base));
    assert!(metrics.contains("chute_prometheus_requests_refused_total 6"), "{metrics}");

    // Without --prometheus: 404, saying how to turn it on.
    let plain = Server::start(&url, &[]);
    expect(post_snappy(&format!("{}/api/v1/write", plain.base), &request(good.clone()), &[]), 404, "--prometheus");
}

#[tokio::test]
async fn while_postgres_is_down_a_write_is_answered_503_with_retry_after_and_its_retry_is_written_once() {
    let cluster = chute_testkit::TestCluster::start();
    let db = cluster.fresh_db("prom_down").await;
    let s = Server::start(&db.url(), &["--prometheus", "--request-timeout", "3s"]);
    let t = now_ms();
    let first = WriteRequest { timeseries: vec![series(&[("__name__", "up"), ("job", "a")], &[(t, 1.0)])], metadata: vec![] };
    assert_eq!(write(&s.base, &first).0, 204, "{}", s.log());
    cluster.cluster.stop(chute_engine::local::StopMode::Fast).unwrap();
    let second = WriteRequest {
        timeseries: vec![
            series(&[("__name__", "up"), ("job", "a")], &[(t + 15_000, 1.0)]),
            series(&[("__name__", "up"), ("job", "b")], &[(t, 0.0)]),
        ],
        metadata: vec![],
    };
    let body = snap::raw::Encoder::new().compress_vec(&second.encode_to_vec()).unwrap();
    let send = || {
        agent()
            .post(format!("{}/api/v1/write", s.base))
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .send(&body[..])
            .unwrap()
    };
    let mut r = send();
    let status = r.status().as_u16();
    let retry_after = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let text = r.body_mut().read_to_string().unwrap_or_default();
    assert_eq!(status, 503, "Prometheus retries a 5xx: {text}\n{}", s.log());
    assert!(retry_after.is_some_and(|v| v.parse::<u64>().is_ok()), "no Retry-After: {text}");
    // Back up: the same body (as Prometheus resends it) is written once, however often it is sent.
    cluster.cluster.start().unwrap();
    let began = std::time::Instant::now();
    while send().status().as_u16() != 204 {
        assert!(began.elapsed() < Duration::from_secs(60), "never written after PostgreSQL came back:\n{}", s.log());
        // A sender's pause before it sends again, as Prometheus's own backoff does.
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(send().status().as_u16(), 204);
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.samples", &[]).await.unwrap().get(0);
    assert_eq!(n, 3, "the first request's sample and the second's two, each once");
}
