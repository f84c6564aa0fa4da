//! Remote-write load generator for `chute serve --prometheus`
//! (`scripts/bench-prometheus`, docs/benchmarks.md): requests as
//! Prometheus's queue manager makes them, replayed as fast as they are
//! acknowledged, and the time of a remote read of one series.
//!
//! ```text
//! prom-client write --base http://127.0.0.1:9201 --series 10000 --hours 24 --shards 4 --batch 2000 [--seed N] [--otlp]
//! prom-client read  --base http://127.0.0.1:9201 --series 10000 --hours 24 --index 42
//! ```
//!
//! `--series` series of 50 metrics (`__name__`, `job`, `instance`, `env`,
//! `region`: about 100 bytes of labels), scraped every 15 s for `--hours`
//! from 2026-01-01. As Prometheus sends them: samples in scrape order, each
//! series to one of `--shards` shards (by its index), a shard's samples cut
//! into requests of `--batch` samples, one `TimeSeries` per sample with its
//! full label set (what remote write 1.0 carries), a shard's requests sent
//! one after another, each waiting for its 204. Requests are encoded and
//! snappy-compressed on the fly, by the shard's thread (`--seed` shifts
//! the values: other bodies, for a warm-up). Prints one JSON object.
//!
//! `--otlp` sends the same samples as OpenTelemetry's OTLP/HTTP protobuf
//! (`POST /v1/metrics`, each waiting for its 200): a request of `--batch`
//! points, one resource a host (`service.name` node, `service.instance.id`
//! the instance: `job` and `instance` once translated) and one monotonic
//! cumulative sum a series with `env` and `region` as attributes, so that
//! chute stores the same series and samples as remote write does.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chute_serve::prom::otlp::wire as otlp;
use chute_serve::prom::wire::{Label, LabelMatcher, Query, ReadRequest, ReadResponse, Sample, TimeSeries, WriteRequest};
use prost::Message;

/// 2026-01-01T00:00:00Z in ms.
const START_MS: i64 = 1_767_225_600_000;
const STEP_MS: i64 = 15_000;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn labels(i: u64) -> Vec<Label> {
    let l = |n: &str, v: String| Label { name: n.into(), value: v };
    vec![
        l("__name__", format!("node_metric_{}_total", i % 50)),
        l("env", "prod".into()),
        l("instance", format!("host-{:04}.example.net:9100", i / 50)),
        l("job", "node".into()),
        l("region", format!("eu-west-{}", i % 4)),
    ]
}

fn value(i: u64, step: u64, seed: u64) -> f64 {
    (i * 7 + step * 13 + seed) as f64 * 0.25
}

fn post(agent: &ureq::Agent, url: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let compressed = snap::raw::Encoder::new().compress_vec(body).expect("snappy");
    let mut resp = agent
        .post(url)
        .header("Content-Encoding", "snappy")
        .header("Content-Type", "application/x-protobuf")
        .header("X-Prometheus-Remote-Write-Version", "0.1.0")
        .send(&compressed[..])
        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
    (resp.status().as_u16(), resp.body_mut().read_to_vec().unwrap_or_default())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| arg(&args, name).map_or(default, |v| v.parse().expect("a number"));
    let base = arg(&args, "--base").unwrap_or_else(|| "http://127.0.0.1:9201".into());
    let series = num("--series", 10_000);
    let steps = num("--hours", 24) * 3600 * 1000 / STEP_MS as u64;
    let agent: ureq::Agent =
        ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(300))).build().into();
    match args.get(1).map(String::as_str) {
        Some("write") if args.iter().any(|a| a == "--otlp") => {
            write_otlp(&agent, &base, series, steps, num("--shards", 4), num("--batch", 2000), num("--seed", 0))
        }
        Some("write") => write(&agent, &base, series, steps, num("--shards", 4), num("--batch", 2000), num("--seed", 0)),
        Some("read") => read(&agent, &base, steps, num("--index", 0)),
        _ => {
            eprintln!("usage: prom-client write|read --base URL [--series N] [--hours H] [--shards S] [--batch B] [--index I]");
            std::process::exit(2);
        }
    }
}

fn write(agent: &ureq::Agent, base: &str, series: u64, steps: u64, shards: u64, batch: u64, seed: u64) {
    let url = format!("{base}/api/v1/write");
    let sent = Arc::new(AtomicU64::new(0));
    let requests = Arc::new(AtomicU64::new(0));
    let began = Instant::now();
    let threads: Vec<_> = (0..shards)
        .map(|shard| {
            let (agent, url, sent, requests) = (agent.clone(), url.clone(), sent.clone(), requests.clone());
            std::thread::spawn(move || {
                let mine: Vec<(u64, Vec<Label>)> = (shard..series).step_by(shards as usize).map(|i| (i, labels(i))).collect();
                let mut req = WriteRequest::default();
                let flush = |req: &mut WriteRequest| {
                    if req.timeseries.is_empty() {
                        return;
                    }
                    let body = req.encode_to_vec();
                    let (status, answer) = post(&agent, &url, &body);
                    assert_eq!(status, 204, "{}", String::from_utf8_lossy(&answer));
                    sent.fetch_add(req.timeseries.len() as u64, Ordering::Relaxed);
                    requests.fetch_add(1, Ordering::Relaxed);
                    req.timeseries.clear();
                };
                for step in 0..steps {
                    let t = START_MS + step as i64 * STEP_MS;
                    for (i, l) in &mine {
                        req.timeseries.push(TimeSeries {
                            labels: l.clone(),
                            samples: vec![Sample { timestamp: t, value: value(*i, step, seed) }],
                            exemplars: vec![],
                        });
                        if req.timeseries.len() as u64 == batch {
                            flush(&mut req);
                        }
                    }
                }
                flush(&mut req);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a shard panicked");
    }
    let secs = began.elapsed().as_secs_f64();
    let n = sent.load(Ordering::Relaxed);
    println!(
        "{{\"samples\": {n}, \"requests\": {}, \"seconds\": {secs:.2}, \"samples_per_s\": {:.0}, \"shards\": {shards}, \"batch\": {batch}}}",
        requests.load(Ordering::Relaxed),
        n as f64 / secs
    );
}

fn attr(k: &str, v: &str) -> otlp::KeyValue {
    otlp::KeyValue { key: k.into(), value: Some(otlp::AnyValue { string_value: Some(v.into()), ..otlp::AnyValue::default() }) }
}

/// Series `i`'s sample at `t` as an OTLP metric, and its host's resource attributes.
fn otlp_point(i: u64, l: &[Label], t: i64, v: f64) -> (String, otlp::Metric) {
    let point = otlp::NumberDataPoint {
        attributes: vec![attr("env", &l[1].value), attr("region", &l[4].value)],
        time_unix_nano: t as u64 * 1_000_000,
        as_double: Some(v),
        ..otlp::NumberDataPoint::default()
    };
    let sum = otlp::Sum { data_points: vec![point], aggregation_temporality: otlp::CUMULATIVE, is_monotonic: true };
    (l[2].value.clone(), otlp::Metric { name: format!("node_metric_{}", i % 50), sum: Some(sum), ..otlp::Metric::default() })
}

/// The samples of `write`, sent as OTLP/HTTP protobuf.
fn write_otlp(agent: &ureq::Agent, base: &str, series: u64, steps: u64, shards: u64, batch: u64, seed: u64) {
    let url = format!("{base}/v1/metrics");
    let (sent, requests) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let began = Instant::now();
    let threads: Vec<_> = (0..shards)
        .map(|shard| {
            let (agent, url, sent, requests) = (agent.clone(), url.clone(), sent.clone(), requests.clone());
            std::thread::spawn(move || {
                let mine: Vec<(u64, Vec<Label>)> = (shard..series).step_by(shards as usize).map(|i| (i, labels(i))).collect();
                let mut points: Vec<(String, otlp::Metric)> = Vec::new();
                let flush = |points: &mut Vec<(String, otlp::Metric)>| {
                    if points.is_empty() {
                        return;
                    }
                    // One resource a host, its points' metrics in one scope (consecutive points share hosts).
                    let mut req = otlp::ExportMetricsServiceRequest::default();
                    for (host, m) in points.drain(..) {
                        let same = req.resource_metrics.last().is_some_and(|r: &otlp::ResourceMetrics| {
                            r.resource
                                .as_ref()
                                .is_some_and(|r| r.attributes[1].value.as_ref().and_then(|v| v.string_value.as_ref()) == Some(&host))
                        });
                        if !same {
                            let resource =
                                otlp::Resource { attributes: vec![attr("service.name", "node"), attr("service.instance.id", &host)] };
                            req.resource_metrics.push(otlp::ResourceMetrics {
                                resource: Some(resource),
                                scope_metrics: vec![otlp::ScopeMetrics::default()],
                            });
                        }
                        req.resource_metrics.last_mut().expect("a resource").scope_metrics[0].metrics.push(m);
                    }
                    let n: usize = req.resource_metrics.iter().map(|r| r.scope_metrics[0].metrics.len()).sum();
                    let mut resp = agent
                        .post(&url)
                        .header("Content-Type", "application/x-protobuf")
                        .send(&req.encode_to_vec()[..])
                        .unwrap_or_else(|e| panic!("POST {url}: {e}"));
                    let (status, answer) = (resp.status().as_u16(), resp.body_mut().read_to_vec().unwrap_or_default());
                    assert!(status == 200 && answer.is_empty(), "{status}: {}", String::from_utf8_lossy(&answer));
                    sent.fetch_add(n as u64, Ordering::Relaxed);
                    requests.fetch_add(1, Ordering::Relaxed);
                };
                for step in 0..steps {
                    let t = START_MS + step as i64 * STEP_MS;
                    for (i, l) in &mine {
                        points.push(otlp_point(*i, l, t, value(*i, step, seed)));
                        if points.len() as u64 == batch {
                            flush(&mut points);
                        }
                    }
                }
                flush(&mut points);
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a shard panicked");
    }
    let secs = began.elapsed().as_secs_f64();
    let n = sent.load(Ordering::Relaxed);
    println!(
        "{{\"samples\": {n}, \"requests\": {}, \"seconds\": {secs:.2}, \"samples_per_s\": {:.0}, \"shards\": {shards}, \"batch\": {batch}, \"otlp\": true}}",
        requests.load(Ordering::Relaxed),
        n as f64 / secs
    );
}

/// Reads the day of series `index` five times (SAMPLES); prints the median and the slowest.
fn read(agent: &ureq::Agent, base: &str, steps: u64, index: u64) {
    let url = format!("{base}/api/v1/read");
    let l = labels(index);
    let m = |name: &str, value: &str| LabelMatcher { r#type: 0, name: name.into(), value: value.into() };
    let matchers = vec![m("__name__", &l[0].value), m("instance", &l[2].value)];
    let end = START_MS + steps as i64 * STEP_MS;
    let req = ReadRequest {
        queries: vec![Query { start_timestamp_ms: START_MS, end_timestamp_ms: end, matchers, hints: None }],
        accepted_response_types: vec![],
    };
    let body = req.encode_to_vec();
    let mut times = Vec::new();
    let mut samples = 0;
    for _ in 0..5 {
        let began = Instant::now();
        let (status, answer) = post(agent, &url, &body);
        assert_eq!(status, 200, "{}", String::from_utf8_lossy(&answer));
        let plain = snap::raw::Decoder::new().decompress_vec(&answer).expect("a snappy answer");
        let r = ReadResponse::decode(&plain[..]).expect("a ReadResponse");
        times.push(began.elapsed().as_secs_f64() * 1000.0);
        samples = r.results.iter().flat_map(|q| &q.timeseries).map(|t| t.samples.len()).sum::<usize>();
    }
    assert_eq!(samples as u64, steps, "the series' every sample");
    times.sort_by(f64::total_cmp);
    println!("{{\"samples\": {samples}, \"median_ms\": {:.1}, \"max_ms\": {:.1}}}", times[2], times[4]);
}
