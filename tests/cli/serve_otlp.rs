//! `chute serve --prometheus` taking OpenTelemetry's OTLP/HTTP metrics
//! (`POST /v1/metrics`): the official OpenTelemetry Python SDK and its
//! OTLP/HTTP protobuf exporter (pinned, from PyPI into target/pyclients by
//! scripts/ensure-deps) export a counter, an up-down counter, an observable
//! gauge and a histogram, and SQL reads back what it exported, translated
//! as Prometheus's own OTLP receiver translates it; hand-written OTLP/JSON;
//! and bodies that are refused whole or in part.

use std::process::Command;

use chute_serve::prom::otlp::wire::{
    AnyValue, ExportMetricsServiceRequest, ExportMetricsServiceResponse, Gauge, KeyValue, Metric, NumberDataPoint, ResourceMetrics,
    ScopeMetrics, Sum,
};
use chute_testkit::shared;
use prost::Message;

use super::serve::Server;
use super::serve_prometheus::post_raw;
use crate::common::{column, open_tempdir};

const SDK: &str = r#"
import sys
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, MetricExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.metrics import Observation
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

base = sys.argv[1]
reader = InMemoryMetricReader()
resource = Resource.create({"service.name": "shop", "service.namespace": "acme", "service.instance.id": "i-1",
                            "deployment.environment": "test"})
provider = MeterProvider(resource=resource, metric_readers=[reader], shutdown_on_exit=False)
meter = provider.get_meter("chute-test")
orders = meter.create_counter("orders", unit="{order}", description="orders taken")
orders.add(3, {"region": "eu"})
orders.add(4, {"region": "us"})
orders.add(2, {"region": "eu"})
depth = meter.create_up_down_counter("queue.depth")
depth.add(5)
depth.add(-2)
meter.create_observable_gauge("temperature", unit="Cel", callbacks=[lambda options: [Observation(21.5, {"room": "a"})]])
latency = meter.create_histogram("request.duration", unit="s", explicit_bucket_boundaries_advisory=[0.1, 1.0, 10.0])
for v in [0.05, 0.5, 0.7, 5.0, 50.0]:
    latency.record(v, {"route": "/x"})

def times(data):
    return sorted({p.time_unix_nano // 1000000 for rm in data.resource_metrics for sm in rm.scope_metrics
                   for m in sm.metrics for p in m.data.data_points})

# One export as the SDK makes it, then a second collection sent gzip-compressed.
first = reader.get_metrics_data()
r1 = OTLPMetricExporter(endpoint=base + "/v1/metrics").export(first)
orders.add(1, {"region": "eu"})
second = reader.get_metrics_data()
r2 = OTLPMetricExporter(endpoint=base + "/v1/metrics", compression=Compression.Gzip).export(second)
print("RESULTS", r1 == MetricExportResult.SUCCESS, r2 == MetricExportResult.SUCCESS)
print("TIMES", " ".join(str(t) for t in times(first)), "|", " ".join(str(t) for t in times(second)))
"#;

/// Every sample as `metric{labels but __name__} time value`, in order.
async fn samples(c: &tokio_postgres::Client) -> Vec<String> {
    column(
        c,
        "SELECT line FROM (SELECT s.time, s.metric || '{' || coalesce((SELECT string_agg(key || '=' || value, ',' ORDER BY key COLLATE \"C\") \
         FROM jsonb_each_text(s.labels) WHERE key <> '__name__'), '') || '} ' || (extract(epoch FROM s.time) * 1000)::bigint || ' ' || s.value AS line \
         FROM prometheus.samples_labeled s) x ORDER BY time, line COLLATE \"C\"",
    )
    .await
}

#[tokio::test]
async fn the_opentelemetry_python_sdk_exports_and_sql_reads_back_what_it_exported() {
    let db = shared().fresh_db("otlp_sdk").await;
    let py = python();
    let s = Server::start(&db.url(), &["--prometheus"]);
    let dir = open_tempdir();
    let script = dir.path().join("otlp.py");
    std::fs::write(&script, SDK).unwrap();
    let out = Command::new(&py)
        .arg(&script)
        .arg(&s.base)
        .env_remove("OTEL_EXPORTER_OTLP_METRICS_TEMPORALITY_PREFERENCE")
        .env_remove("OTEL_RESOURCE_ATTRIBUTES")
        .env_remove("OTEL_SERVICE_NAME")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    assert!(stdout.contains("RESULTS True True"), "both exports answered 200: {stdout}\n{}", s.log());
    // Each collection stamps all its points with one time.
    let times: Vec<&str> = stdout.lines().find_map(|l| l.strip_prefix("TIMES ")).unwrap().split(" | ").collect();
    assert!(times.iter().all(|t| !t.contains(' ')), "one time a collection: {times:?}");
    let (t1, t2) = (times[0], times[1]);
    let sdk_version = py_version(&py);
    let id = "instance=i-1,job=acme/shop";
    let mut want = vec![];
    for (t, eu) in [(t1, 5), (t2, 6)] {
        let mut at = vec![
            format!("orders_total{{{id},region=eu}} {t} {eu}"),
            format!("orders_total{{{id},region=us}} {t} 4"),
            format!("queue_depth{{{id}}} {t} 3"),
            format!("request_duration_seconds_bucket{{{id},le=+Inf,route=/x}} {t} 5"),
            format!("request_duration_seconds_bucket{{{id},le=0.1,route=/x}} {t} 1"),
            format!("request_duration_seconds_bucket{{{id},le=1,route=/x}} {t} 3"),
            format!("request_duration_seconds_bucket{{{id},le=10,route=/x}} {t} 4"),
            format!("request_duration_seconds_count{{{id},route=/x}} {t} 5"),
            format!("request_duration_seconds_sum{{{id},route=/x}} {t} 56.25"),
            format!(
                "target_info{{deployment_environment=test,{id},telemetry_sdk_language=python,telemetry_sdk_name=opentelemetry,\
                 telemetry_sdk_version={sdk_version}}} {t} 1"
            ),
            format!("temperature_celsius{{{id},room=a}} {t} 21.5"),
        ];
        at.sort();
        want.extend(at);
    }
    let c = db.client().await;
    assert_eq!(samples(&c).await, want, "{}", s.log());
    // The same series both times; the metadata of each family.
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.series", &[]).await.unwrap().get(0);
    assert_eq!(n, 11);
    let meta: Vec<String> =
        column(&c, "SELECT metric || ' ' || type || ' ' || help || ' ' || unit FROM prometheus.metadata ORDER BY 1").await;
    assert_eq!(
        meta,
        [
            "orders_total counter orders taken {order}",
            "queue_depth gauge  ",
            "request_duration_seconds histogram  s",
            "temperature_celsius gauge  Cel"
        ]
    );
}

/// The Python of target/pyclients with the OpenTelemetry SDK (installed by scripts/ensure-deps when missing).
fn python() -> std::path::PathBuf {
    let py = super::serve_clients::python();
    let has = |py: &std::path::Path| {
        Command::new(py).args(["-c", "import opentelemetry.exporter.otlp.proto.http"]).status().is_ok_and(|s| s.success())
    };
    if !has(&py) {
        let script = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-deps");
        let status = Command::new("bash").arg(script).arg("--pyclients").status();
        assert!(
            status.is_ok_and(|s| s.success()) && has(&py),
            "cannot install the OpenTelemetry SDK into target/pyclients: run scripts/ensure-deps"
        );
    }
    py
}

fn py_version(py: &std::path::Path) -> String {
    let out = Command::new(py).args(["-c", "from opentelemetry.sdk.version import __version__; print(__version__)"]).output().unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn kv(k: &str, v: &str) -> KeyValue {
    KeyValue { key: k.into(), value: Some(AnyValue { string_value: Some(v.into()), ..AnyValue::default() }) }
}

fn point(t_ms: i64, v: f64) -> NumberDataPoint {
    NumberDataPoint { time_unix_nano: t_ms as u64 * 1_000_000, as_double: Some(v), ..NumberDataPoint::default() }
}

fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
    ExportMetricsServiceRequest {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(chute_serve::prom::otlp::wire::Resource { attributes: vec![kv("service.name", "svc")] }),
            scope_metrics: vec![ScopeMetrics { metrics }],
        }],
    }
}

fn gauge(name: &str, points: Vec<NumberDataPoint>) -> Metric {
    Metric { name: name.into(), gauge: Some(Gauge { data_points: points }), ..Metric::default() }
}

fn post_proto(base: &str, content_type: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let (status, body, _) = post_raw(&format!("{base}/v1/metrics"), body, &[("Content-Type", content_type)], &[]);
    (status, body)
}

#[tokio::test]
async fn otlp_json_is_taken_and_hostile_bodies_are_refused_whole_or_in_part() {
    let db = shared().fresh_db("otlp_json").await;
    let s = Server::start(&db.url(), &["--prometheus"]);
    let c = db.client().await;
    let t = super::serve_prometheus::now_ms() / 1000 * 1000 - 60_000;
    let ns = |ms: i64| (ms * 1_000_000).to_string();

    // OTLP/JSON as the specification maps it: camelCase, int64 as strings or numbers, enums as ints.
    let json = format!(
        r#"{{"resourceMetrics":[{{"resource":{{"attributes":[{{"key":"service.name","value":{{"stringValue":"web"}}}}]}},
        "scopeMetrics":[{{"scope":{{"name":"hand"}},"metrics":[
          {{"name":"http.requests","unit":"1","sum":{{"aggregationTemporality":2,"isMonotonic":true,
            "dataPoints":[{{"attributes":[{{"key":"code","value":{{"intValue":"200"}}}}],"timeUnixNano":"{}","asInt":"7"}}]}}}},
          {{"name":"load","unit":"1","gauge":{{"dataPoints":[{{"timeUnixNano":{},"asDouble":0.25}}]}}}},
          {{"name":"rpc","summary":{{"dataPoints":[{{"timeUnixNano":"{}","count":"4","sum":10,
            "quantileValues":[{{"quantile":0.5,"value":2}},{{"quantile":0.99,"value":"Infinity"}}]}}]}}}}
        ]}}]}}]}}"#,
        ns(t),
        ns(t),
        ns(t)
    );
    let (status, body) = post_proto(&s.base, "application/json", json.as_bytes());
    assert_eq!((status, String::from_utf8_lossy(&body).as_ref()), (200, "{}"), "{}", s.log());
    assert_eq!(
        samples(&c).await,
        [
            format!("http_requests_total{{code=200,job=web}} {t} 7"),
            format!("load_ratio{{job=web}} {t} 0.25"),
            format!("rpc_count{{job=web}} {t} 4"),
            format!("rpc_sum{{job=web}} {t} 10"),
            format!("rpc{{job=web,quantile=0.5}} {t} 2"),
            format!("rpc{{job=web,quantile=0.99}} {t} Infinity"),
        ]
    );
    let stored = samples(&c).await;

    // Refused whole, nothing written: a truncated protobuf body, a NUL in a metric name,
    // a JSON body that is no request, too many data points, an unknown content type.
    let good = request(vec![gauge("fine", vec![point(t + 1000, 1.0)])]).encode_to_vec();
    let (status, body) = post_proto(&s.base, "application/x-protobuf", &good[..good.len() - 3]);
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("nothing was written: the body is not a protobuf ExportMetricsServiceRequest"));
    let nul = request(vec![gauge("fine", vec![point(t + 1000, 1.0)]), gauge("bad\0name", vec![point(t + 1000, 1.0)])]);
    let (status, body) = post_proto(&s.base, "application/x-protobuf", &nul.encode_to_vec());
    assert_eq!(status, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("holds a NUL byte"), "{}", String::from_utf8_lossy(&body));
    let (status, _) = post_proto(&s.base, "application/json", br#"{"resourceMetrics":[{"scopeMetrics":{}}]}"#);
    assert_eq!(status, 400);
    let many = request(vec![gauge("many", vec![NumberDataPoint::default(); 1_000_001])]);
    let (status, body) = post_proto(&s.base, "application/x-protobuf", &many.encode_to_vec());
    assert_eq!(status, 413, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("1000001 data points, more than the 1000000"), "{}", String::from_utf8_lossy(&body));
    let (status, body) = post_proto(&s.base, "text/plain", &good);
    assert_eq!(status, 415, "{}", String::from_utf8_lossy(&body));
    assert_eq!(samples(&c).await, stored, "nothing was written by the refused requests");

    // A delta sum among good gauges: the gauges are stored, the sum refused and named.
    let delta = Metric {
        name: "jobs.done".into(),
        sum: Some(Sum { data_points: vec![point(t + 2000, 3.0), point(t + 3000, 1.0)], aggregation_temporality: 1, is_monotonic: true }),
        ..Metric::default()
    };
    let mixed = request(vec![gauge("g1", vec![point(t + 2000, 1.5)]), delta, gauge("g2", vec![point(t + 2000, -2.0)])]);
    let (status, body) = post_proto(&s.base, "application/x-protobuf", &mixed.encode_to_vec());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let answer = ExportMetricsServiceResponse::decode(&body[..]).expect("an ExportMetricsServiceResponse");
    let partial = answer.partial_success.expect("partial_success");
    assert_eq!(partial.rejected_data_points, 2);
    assert!(
        partial.error_message.contains("metric \"jobs.done\": 2 data points refused: a sum of delta temporality"),
        "{}",
        partial.error_message
    );
    let now = samples(&c).await;
    let new: Vec<&String> = now.iter().filter(|l| !stored.contains(l)).collect();
    let t2 = t + 2000;
    assert_eq!(new, [&format!("g1{{job=svc}} {t2} 1.5"), &format!("g2{{job=svc}} {t2} -2")]);
}

#[tokio::test]
async fn while_postgres_is_down_an_export_is_answered_503_with_retry_after_and_its_retry_is_stored_once() {
    let cluster = chute_testkit::TestCluster::start();
    let db = cluster.fresh_db("otlp_down").await;
    let s = Server::start(&db.url(), &["--prometheus", "--request-timeout", "3s"]);
    let t = super::serve_prometheus::now_ms() / 1000 * 1000;
    let first = request(vec![gauge("up", vec![point(t, 1.0)])]).encode_to_vec();
    assert_eq!(post_proto(&s.base, "application/x-protobuf", &first).0, 200, "{}", s.log());
    cluster.cluster.stop(chute_engine::local::StopMode::Fast).unwrap();
    let delta = Metric {
        name: "jobs".into(),
        sum: Some(Sum { data_points: vec![point(t, 3.0)], aggregation_temporality: 1, is_monotonic: true }),
        ..Metric::default()
    };
    let second = request(vec![gauge("up", vec![point(t + 15_000, 1.0)]), delta, gauge("temp", vec![point(t, 20.5)])]).encode_to_vec();
    let send = || {
        let mut r = super::serve::agent()
            .post(format!("{}/v1/metrics", s.base))
            .header("Content-Type", "application/x-protobuf")
            .send(&second[..])
            .unwrap();
        let retry_after = r.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        (r.status().as_u16(), retry_after, r.body_mut().read_to_vec().unwrap_or_default())
    };
    let (status, retry_after, body) = send();
    assert_eq!(status, 503, "exporters retry a 503: {}\n{}", String::from_utf8_lossy(&body), s.log());
    assert!(retry_after.is_some_and(|v| v.parse::<u64>().is_ok()), "no Retry-After");
    // Back up: the same export, sent again as an exporter retries it, is stored once.
    cluster.cluster.start().unwrap();
    let began = std::time::Instant::now();
    while send().0 != 200 {
        assert!(began.elapsed() < std::time::Duration::from_secs(60), "never stored after PostgreSQL came back:\n{}", s.log());
        // An exporter's pause before it sends again (its own backoff).
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (status, _, body) = send();
    assert_eq!(status, 200);
    let partial = ExportMetricsServiceResponse::decode(&body[..]).unwrap().partial_success.expect("the answer again, partial_success too");
    assert_eq!(partial.rejected_data_points, 1);
    let c = db.client().await;
    assert_eq!(
        samples(&c).await,
        [format!("temp{{job=svc}} {t} 20.5"), format!("up{{job=svc}} {t} 1"), format!("up{{job=svc}} {} 1", t + 15_000)]
    );
    let n: i64 = c.query_one("SELECT count(*) FROM prometheus.samples", &[]).await.unwrap().get(0);
    assert_eq!(n, 3, "each sample once");
}

/// An instant PromQL query of `p` at `t` (ms): each series as `{labels} value`, sorted.
fn promql(p: &chute_testkit::prometheus::Prometheus, q: &str, t: i64) -> Vec<String> {
    let enc = super::serve_prometheus_real::encode(q);
    let path = format!("/api/v1/query?query={enc}&time={}.{:03}", t / 1000, t % 1000);
    let (status, body) = p.get(&path).unwrap_or_else(|| panic!("prometheus did not answer {path}"));
    assert_eq!(status, 200, "{q}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let mut out: Vec<String> = v["data"]["result"]
        .as_array()
        .unwrap_or_else(|| panic!("{body}"))
        .iter()
        .map(|s| format!("{} {}", s["metric"], s["value"][1].as_str().unwrap()))
        .collect();
    out.sort();
    out
}

#[tokio::test]
async fn a_real_prometheus_reads_otlp_metrics_back_through_remote_read_and_runs_promql_over_them() {
    use chute_serve::prom::otlp::wire::{Histogram, HistogramDataPoint};
    use chute_testkit::prometheus::{Prometheus, free_port};
    let db = shared().fresh_db("otlp_promql").await;
    let s = Server::start(&db.url(), &["--prometheus"]);
    let t = super::serve_prometheus::now_ms() - 10_000;
    let ns = t as u64 * 1_000_000;
    let counter = Metric {
        name: "orders".into(),
        unit: "{order}".into(),
        sum: Some(Sum {
            data_points: vec![NumberDataPoint { attributes: vec![kv("region", "eu")], ..point(t, 42.0) }],
            aggregation_temporality: 2,
            is_monotonic: true,
        }),
        ..Metric::default()
    };
    let histogram = Metric {
        name: "queue.wait".into(),
        unit: "s".into(),
        histogram: Some(Histogram {
            data_points: vec![HistogramDataPoint {
                time_unix_nano: ns,
                count: 3,
                sum: Some(0.9),
                bucket_counts: vec![1, 2, 0],
                explicit_bounds: vec![0.1, 1.0],
                ..HistogramDataPoint::default()
            }],
            aggregation_temporality: 2,
        }),
        ..Metric::default()
    };
    let mut req = request(vec![counter, histogram]);
    req.resource_metrics[0].resource.as_mut().unwrap().attributes.push(kv("host.name", "web-1"));
    let (status, body) = post_proto(&s.base, "application/x-protobuf", &req.encode_to_vec());
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let listen = s.base.trim_start_matches("http://").to_owned();
    let reader = Prometheus::start(
        free_port(),
        &format!("global:\n  scrape_interval: 1s\nremote_read:\n  - url: http://{listen}/api/v1/read\n    read_recent: true\n"),
    );
    assert_eq!(promql(&reader, "orders_total", t), [r#"{"__name__":"orders_total","job":"svc","region":"eu"} 42"#]);
    let q = promql(&reader, "histogram_quantile(0.5, queue_wait_seconds_bucket)", t);
    assert_eq!(q.len(), 1, "{q:?}");
    // Rank 1.5 of 3 falls in (0.1, 1], which holds 2: Prometheus interpolates linearly.
    let want = 0.1 + (1.0 - 0.1) * (0.5 / 2.0);
    assert_eq!(q[0].rsplit(' ').next().unwrap().parse::<f64>().unwrap(), want, "{q:?}");
    assert_eq!(promql(&reader, "queue_wait_seconds_sum / queue_wait_seconds_count", t), [r#"{"job":"svc"} 0.3"#]);
    assert_eq!(promql(&reader, "target_info", t), [r#"{"__name__":"target_info","host_name":"web-1","job":"svc"} 1"#]);
}
