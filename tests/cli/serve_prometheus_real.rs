//! `chute serve --prometheus` as the long-term storage of real Prometheus
//! servers (the distribution's package, `chute_testkit::prometheus`): one
//! scrapes itself and chute serve's `/metrics` every second and remote-writes
//! to chute; a second one, with nothing of its own, reads through remote
//! read. For a set of PromQL queries (instant and range) the second answers
//! from chute exactly what the first answers from its own storage, values and
//! label sets, every raw sample included; also after PostgreSQL is restarted
//! and chute serve killed with SIGKILL while Prometheus writes.

use std::time::{Duration, Instant};

use chute_testkit::TestCluster;
use chute_testkit::prometheus::{Prometheus, free_port};
use serde_json::Value;

use super::serve::Server;
use crate::common::wait_for_blocking;

/// The writer, before its scrapes begin: remote write only, so that its
/// queue is reading the WAL before the first sample is appended (a queue
/// skips samples older than its own start). One shard: samples are sent in
/// the order they were appended, so "sent up to T" means "everything before
/// T, minus a scrape's length, is written".
fn writer_config(serve: &str, scrapes: bool) -> String {
    let scrape = if scrapes {
        format!(
            "scrape_configs:
  - job_name: prometheus
    static_configs: [{{targets: ['{{self}}']}}]
  - job_name: chute
    static_configs: [{{targets: ['{serve}']}}]
"
        )
    } else {
        String::new()
    };
    format!(
        "global:
  scrape_interval: 1s
  scrape_timeout: 900ms
  evaluation_interval: 1s
remote_write:
  - url: http://{serve}/api/v1/write
    remote_timeout: 10s
    queue_config: {{min_shards: 1, max_shards: 1, batch_send_deadline: 500ms, min_backoff: 50ms, max_backoff: 500ms}}
    metadata_config: {{send_interval: 2s}}
{scrape}"
    )
}

fn reader_config(serve: &str) -> String {
    format!(
        "global:
  scrape_interval: 1s
remote_read:
  - url: http://{serve}/api/v1/read
    read_recent: true
    remote_timeout: 30s
"
    )
}

pub fn encode(q: &str) -> String {
    q.bytes()
        .map(|b| if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) { (b as char).to_string() } else { format!("%{b:02X}") })
        .collect()
}

/// The `data` of a query of `p`'s API, its series sorted by their labels.
fn api(p: &Prometheus, path: &str, params: &[(&str, String)]) -> Value {
    let query: Vec<String> = params.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let (status, body) = p.get(&format!("{path}?{}", query.join("&"))).unwrap_or_else(|| panic!("prometheus did not answer {path}"));
    assert_eq!(status, 200, "{path} {params:?}: {body}");
    let mut v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
    let mut data = v["data"].take();
    if let Some(series) = data["result"].as_array_mut() {
        series.sort_by_key(|s| s["metric"].to_string());
    }
    data
}

fn instant(p: &Prometheus, q: &str, at: f64) -> Value {
    api(p, "/api/v1/query", &[("query", q.to_owned()), ("time", format!("{at:.3}"))])
}

fn range(p: &Prometheus, q: &str, from: f64, to: f64) -> Value {
    api(
        p,
        "/api/v1/query_range",
        &[("query", q.to_owned()), ("start", format!("{from:.3}")), ("end", format!("{to:.3}")), ("step", "1".into())],
    )
}

/// How many series and points (or raw samples) an answer holds.
fn size(data: &Value) -> (usize, usize) {
    let series = data["result"].as_array().map_or(0, Vec::len);
    let points = data["result"].as_array().map_or(0, |r| r.iter().map(|s| s["values"].as_array().map_or(1, Vec::len)).sum());
    (series, points)
}

fn now_s() -> f64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs_f64()
}

/// A number the writer reports about itself (its own API, over its latest scrape).
fn own_metric(p: &Prometheus, q: &str) -> Option<f64> {
    let data = api(p, "/api/v1/query", &[("query", q.to_owned())]);
    data["result"].get(0)?["value"][1].as_str()?.parse().ok()
}

/// Waits until the writer has sent chute every sample up to `t` (plus a
/// margin for samples appended out of time order by concurrent scrapes).
fn wait_sent(writer: &Prometheus, t: f64, limit: Duration) {
    let began = Instant::now();
    loop {
        let sent = own_metric(writer, "prometheus_remote_storage_queue_highest_sent_timestamp_seconds").unwrap_or(0.0);
        if sent >= t + 4.0 {
            return;
        }
        assert!(began.elapsed() < limit, "the writer sent samples up to {sent} only, not {t} + 4 s:\n{}", writer.log());
        // Polling pace; the deadline is `limit`.
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The PromQL queries compared: instant (at `to`) and range (`from`..`to`, 1 s steps).
const QUERIES: [&str; 8] = [
    "up",
    "rate(prometheus_http_requests_total[1m])",
    "sum by (job) (scrape_samples_scraped)",
    "sum by (job, handler) (rate(prometheus_http_requests_total[1m]))",
    "histogram_quantile(0.9, sum by (le) (rate(prometheus_http_request_duration_seconds_bucket[1m])))",
    "{__name__=~\"chute_(requests|prometheus_samples)_.*\", job!=\"prometheus\"}",
    "prometheus_tsdb_head_series{job=~\"prom.*\", instance!~\"nothing.*\"}",
    "rate(chute_prometheus_samples_committed_total[30s])",
];

/// Every raw sample of every series from `from` to `to`, staleness markers
/// aside (PromQL leaves them out of range vectors; the SQL check keeps them).
fn raw_samples(from: f64, to: f64) -> String {
    let window = format!("{}s", (to - from).ceil() as i64 + 120);
    format!("{{__name__=~\".+\"}}[{window}]")
}

/// Enough for a comparison to prove something: an instant answer with a
/// series, a range answer with more than 3 points…
fn enough(instant: &Value, range: &Value) -> bool {
    size(instant).0 > 0 && size(range).1 > 3
}

/// …and raw samples of over 100 series, over 1,000 of them.
fn enough_raw(raw: &Value) -> bool {
    let (series, samples) = size(raw);
    series > 100 && samples > 1000
}

/// Whether the writer's own storage holds, between `from` and `to`, what
/// [`compare`] needs of it.
fn enough_to_compare(writer: &Prometheus, from: f64, to: f64) -> bool {
    to > from
        && QUERIES.iter().all(|q| enough(&instant(writer, q, to), &range(writer, q, from, to)))
        && enough_raw(&instant(writer, &raw_samples(from, to), to))
}

/// Compares what `reader` answers (through chute) with what `writer` answers
/// (from its own storage) between `from` and `to`; returns how many raw
/// samples were compared.
fn compare(writer: &Prometheus, reader: &Prometheus, from: f64, to: f64) -> usize {
    for q in QUERIES {
        let (w, r) = (instant(writer, q, to), instant(reader, q, to));
        assert!(size(&w).0 > 0, "instant {q}: the writer has no answer, so the comparison would prove nothing: {w}");
        assert_eq!(r, w, "instant {q} at {to}: chute's answer (left) differs from Prometheus's own");
        let (w, r) = (range(writer, q, from, to), range(reader, q, from, to));
        assert!(size(&w).1 > 3, "range {q}: too little to compare: {w}");
        assert_eq!(r, w, "range {q} {from}..{to}: chute's answer (left) differs from Prometheus's own");
    }
    let all = raw_samples(from, to);
    let (w, r) = (instant(writer, &all, to), instant(reader, &all, to));
    let (series, samples) = size(&w);
    assert!(enough_raw(&w), "too few raw samples to compare: {series} series, {samples} samples");
    assert_eq!(size(&r), (series, samples), "raw samples: chute's count (left) differs from Prometheus's own");
    assert!(r == w, "raw samples: chute's differ from Prometheus's own");
    samples
}

/// chute serve on `listen` for `url`, with `--prometheus`.
fn serve(url: &str, listen: &str) -> Server {
    Server::start(url, &["--prometheus", "--listen", listen, "--retry-for", "2min", "--request-timeout", "30s"])
}

async fn run(crash: bool) {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("prom_real").await;
    let url = db.url();
    let listen = format!("127.0.0.1:{}", free_port());
    let mut server = Some(serve(&url, &listen));
    let writer = Prometheus::start(free_port(), &writer_config(&listen, false));
    writer.reload(&writer_config(&listen, true));
    let from = now_s().ceil() + 4.0;

    if crash {
        // While Prometheus writes: PostgreSQL restarted, then chute serve killed with SIGKILL.
        wait_sent(&writer, from + 3.0, Duration::from_secs(60));
        cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
        wait_sent(&writer, now_s(), Duration::from_secs(60));
        let mut killed = server.take().unwrap();
        killed.child.kill();
        let killed_log = killed.log();
        drop(killed);
        // Down for a few scrapes: chute's target is down, Prometheus retries.
        let down = Instant::now();
        while own_metric(&writer, "up{job=\"chute\"}") != Some(0.0) {
            assert!(down.elapsed() < Duration::from_secs(30), "chute's target never seen down:\n{killed_log}");
            // Polling pace; the deadline is above.
            std::thread::sleep(Duration::from_millis(100));
        }
        server = Some(serve(&url, &listen));
    } else {
        // Until the writer has stored what the comparison needs.
        wait_for_blocking("the writer to store enough to compare", Duration::from_secs(120), || {
            enough_to_compare(&writer, from, now_s().floor() - 1.0)
        });
    }
    let to = now_s().floor() - 1.0;
    wait_sent(&writer, to, Duration::from_secs(90));
    // Prometheus dropped nothing (a 4xx would make it), and in the crash run it retried.
    let failed = own_metric(&writer, "sum(prometheus_remote_storage_samples_failed_total)");
    assert_eq!(failed, Some(0.0), "{}", writer.log());
    let retried = own_metric(&writer, "sum(prometheus_remote_storage_samples_retried_total)").unwrap_or(0.0);
    assert!(!crash || retried > 0.0, "no retries: the crash did not happen while Prometheus wrote");
    let reader = Prometheus::start(free_port(), &reader_config(&listen));
    let samples = compare(&writer, &reader, from, to);

    // In SQL: nothing twice (PromQL would hide a doubled sample), staleness markers kept.
    let c = db.client().await;
    let r = c.query_one("SELECT count(*), count(DISTINCT (series_id, time)) FROM prometheus.samples", &[]).await.unwrap();
    let (n, distinct): (i64, i64) = (r.get(0), r.get(1));
    assert_eq!(n, distinct, "samples stored twice");
    assert!(n as usize >= samples, "{n} samples in PostgreSQL, {samples} compared");
    if crash {
        let stale: i64 = c.query_one("SELECT count(*) FROM prometheus.samples WHERE value::text = 'NaN'", &[]).await.unwrap().get(0);
        assert!(stale > 0, "the staleness markers of chute's scrapes while it was down are kept");
    }
    let log = server.as_ref().map(Server::log).unwrap_or_default();
    eprintln!(
        "serve_prometheus_real (crash: {crash}): {samples} raw samples compared, {n} rows in PostgreSQL, {:.0} s of data, {retried} samples retried by Prometheus\n{log}",
        to - from
    );
}

#[tokio::test]
async fn a_second_prometheus_reading_through_chute_answers_what_the_first_answers_from_its_own_storage() {
    run(false).await;
}

#[tokio::test]
async fn after_a_postgres_restart_and_a_kill_of_serve_no_sample_is_missing_or_doubled() {
    run(true).await;
}
