//! `POST /v1/metrics`: OpenTelemetry's OTLP/HTTP metrics export, into the
//! same series and samples tables as remote write.
//!
//! The body is protobuf (`Content-Type: application/x-protobuf`) or JSON
//! (`application/json`), gzip or not (`body::decode`); any other type is
//! 415. It is decoded whole (`wire`, `json`), refused with 400 when it
//! does not decode or holds a NUL byte in a name or value, with 413 when it
//! carries more than [`translate::MAX_POINTS`] data points; then it is
//! translated as Prometheus's OTLP receiver does (`translate`), each series
//! checked as remote write checks it (one bad series refuses the request,
//! nothing written), and stored by remote write's own path
//! (`write::store`): series made, keyed by the body's SHA-256 so that a
//! retry is exactly once, answered once committed.
//!
//! The answer is 200 with an `ExportMetricsServiceResponse` in the
//! request's type; its `partial_success` counts the data points refused
//! (delta temporality, exponential histograms, past the retention) and
//! names them. 503 with `Retry-After` when PostgreSQL is away or the memory
//! budget is full: OTLP exporters retry those.

pub mod json;
mod num;
pub mod size;
pub mod translate;
pub mod wire;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::super::Shared;
use super::wire::MetricMetadata;
use super::write::{Batch, store};
use wire::{ExportMetricsPartialSuccess, ExportMetricsServiceRequest, ExportMetricsServiceResponse};

pub(crate) async fn metrics(State(s): State<Arc<Shared>>, headers: HeaderMap, body: axum::body::Body) -> Response {
    let started = Instant::now();
    let mut r = match export(&s, &headers, body).await {
        Ok(r) | Err(r) => r,
    };
    if matches!(r.status(), StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE) {
        *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
        r.headers_mut().entry(header::RETRY_AFTER).or_insert(HeaderValue::from_static("1"));
    }
    s.metrics.request("otlp_metrics", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Protobuf,
    Json,
}

fn bad(message: &str) -> Response {
    super::super::error(StatusCode::BAD_REQUEST, "invalid", &format!("nothing was written: {message}"))
}

fn kind(headers: &HeaderMap) -> Result<Kind, Response> {
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    match content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase().as_str() {
        "application/x-protobuf" => Ok(Kind::Protobuf),
        "application/json" => Ok(Kind::Json),
        other => Err(super::super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            &format!("Content-Type {other:?}: OTLP/HTTP sends application/x-protobuf or application/json (an ExportMetricsServiceRequest)"),
        )),
    }
}

async fn export(s: &Shared, headers: &HeaderMap, body: axum::body::Body) -> Result<Response, Response> {
    super::super::auth::check(&s.config.tokens, headers, &HashMap::new())?;
    let Some(prom) = s.prom.clone() else { return Err(super::off()) };
    let kind = kind(headers)?;
    let mut reserved = s.memory.reservation();
    let raw = super::super::body::read(s, headers, body, &mut reserved).await?;
    let raw = super::super::body::decode(headers, raw, s.config.body.max, &mut reserved)?;
    // What decoding will take is reserved first, and too many points refused unread.
    let request = match kind {
        Kind::Protobuf => {
            let e = size::protobuf(&raw).map_err(|e| bad(&format!("the body is not a protobuf ExportMetricsServiceRequest: {e}")))?;
            too_many(e.points)?;
            reserved.need(reserved.bytes() + e.bytes)?;
            ExportMetricsServiceRequest::decode(&raw[..])
                .map_err(|e| bad(&format!("the body is not a protobuf ExportMetricsServiceRequest: {e}")))?
        }
        Kind::Json => {
            reserved.need(reserved.bytes() + size::json(&raw))?;
            json::decode(&raw).map_err(|e| bad(&e))?
        }
    };
    if let Some(why) = translate::nul(&request) {
        s.metrics.prom_refused();
        return Err(bad(&why));
    }
    too_many(translate::points(&request))?;
    let metadata = changed(&prom, metadata(&request));
    let t = translate::translate(&request);
    // From here the request holds its body and the translated series (the decoded messages go).
    let translated: usize =
        t.series.iter().map(|s| 64 + s.samples.len() * 16 + s.labels.iter().map(|(k, v)| 48 + k.len() + v.len()).sum::<usize>()).sum();
    reserved.need(reserved.bytes() + translated)?;
    drop(request);
    let _ = reserved.resize(raw.len() + translated);
    let mut batch = Batch::default();
    let (mut sorted, mut key) = (Vec::new(), Vec::new());
    for (n, series) in t.series.iter().enumerate() {
        let labels: Vec<(&str, &str)> = series.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        if let Err(why) = batch.add(&labels, &series.samples, &mut sorted, &mut key) {
            s.metrics.prom_refused();
            return Err(bad(&format!("series {} of the translated request{why}", n + 1)));
        }
    }
    s.metrics.prom_received(batch.samples.len() as u64, t.rejected);
    drop(t.series);
    let (answer, total) = store(s, &prom, batch, &metadata, b"opentelemetry otlp metrics", raw, reserved).await?;
    remember(&prom, &metadata);
    let (mut rejected, mut reasons) = (t.rejected, t.reasons);
    if answer.status().is_success() {
        s.metrics.prom_committed(total as u64);
    } else if answer.status() == StatusCode::BAD_REQUEST {
        // Samples past the retention: the others are committed.
        let bytes = axum::body::to_bytes(answer.into_body(), 16 << 20).await.unwrap_or_default();
        let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
        let committed = v["rows_committed"].as_u64().unwrap_or(0);
        let refused = (total as u64).saturating_sub(committed);
        s.metrics.prom_committed(committed);
        s.metrics.prom_rejected(refused);
        rejected += refused;
        let first = v["rejected"][0]["reason"].as_str().unwrap_or("refused by the samples table").to_owned();
        reasons.push(format!("{refused} samples refused by the samples table; the first: {first}"));
    } else {
        return Ok(answer);
    }
    Ok(answered(kind, rejected, &reasons))
}

/// 413 for a request of more than [`translate::MAX_POINTS`] data points.
fn too_many(points: u64) -> Result<(), Response> {
    if points <= translate::MAX_POINTS {
        return Ok(());
    }
    Err(super::super::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request too large",
        &format!(
            "nothing was written: the request has {points} data points, more than the {} chute takes in one: export more often or in smaller batches",
            translate::MAX_POINTS
        ),
    ))
}

/// The 200 answer: an `ExportMetricsServiceResponse` in the request's type.
fn answered(kind: Kind, rejected: u64, reasons: &[String]) -> Response {
    let partial_success = (rejected > 0).then(|| ExportMetricsPartialSuccess {
        rejected_data_points: rejected as i64,
        error_message: format!("{rejected} data points not stored: {}", reasons.join("; ")),
    });
    let r = ExportMetricsServiceResponse { partial_success };
    match kind {
        Kind::Protobuf => ([(header::CONTENT_TYPE, "application/x-protobuf")], r.encode_to_vec()).into_response(),
        Kind::Json => ([(header::CONTENT_TYPE, "application/json")], json::encode(&r)).into_response(),
    }
}

/// The most families whose metadata is remembered; past it, all are forgotten.
const REMEMBERED: usize = 100_000;

/// The metadata that differs from what was last stored.
fn changed(prom: &super::Prom, all: Vec<MetricMetadata>) -> Vec<MetricMetadata> {
    let known = prom.otlp_metadata.lock().expect("metadata");
    all.into_iter()
        .filter(|m| known.get(&m.metric_family_name).is_none_or(|(t, h, u)| (*t, h, u) != (m.r#type, &m.help, &m.unit)))
        .collect()
}

/// Remembers metadata stored.
fn remember(prom: &super::Prom, stored: &[MetricMetadata]) {
    let mut known = prom.otlp_metadata.lock().expect("metadata");
    if known.len() + stored.len() > REMEMBERED {
        known.clear();
    }
    for m in stored {
        known.insert(m.metric_family_name.clone(), (m.r#type, m.help.clone(), m.unit.clone()));
    }
}

/// The metrics' metadata (type, description, unit) under their Prometheus names.
fn metadata(r: &ExportMetricsServiceRequest) -> Vec<MetricMetadata> {
    let metrics = r.resource_metrics.iter().flat_map(|rm| &rm.scope_metrics).flat_map(|sm| &sm.metrics);
    let mut out: Vec<MetricMetadata> = metrics
        .filter_map(|m| {
            let (r#type, name) = translate::family(m)?;
            Some(MetricMetadata { r#type, metric_family_name: name, help: m.description.clone(), unit: m.unit.clone() })
        })
        .collect();
    out.sort_by(|a, b| a.metric_family_name.cmp(&b.metric_family_name));
    out.dedup_by(|a, b| a.metric_family_name == b.metric_family_name);
    out
}
