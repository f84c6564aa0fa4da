//! `POST /api/v1/write`: Prometheus remote write 1.0.
//!
//! The body is read within serve's limits (`body::read`), its snappy
//! block decompressed (its length, which the block states first, checked
//! against `--max-body-mb` and reserved before a byte is written), and the
//! `WriteRequest` walked in place (`wire::decode_write`). Every series is
//! checked (`labels::canonical`) and every sample's time too before
//! anything is written: a request with one bad series is refused whole.
//! Then the label sets become series ids, the metadata is kept, and the
//! samples go to the samples table's lane as 24-byte rows (series id, time
//! in ms, the value's bits; see `load::kind::samples`).
//!
//! Remote write 2.0 (`Content-Type: application/x-protobuf;
//! proto=io.prometheus.write.v2.Request`: a string table, labels as
//! references into it, and the `X-Prometheus-Remote-Write-*-Written`
//! answer headers) is answered 415, which its senders take as "speak 1.0".

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::super::Shared;
use super::super::submit::{CHUNK_BYTES, Keyed, Part, Rejected, Rejects, submit_and_answer};
use super::store::NewSeries;
use super::wire::{self, MetricMetadata, SeriesRef};

/// The earliest and latest sample times PostgreSQL's timestamptz holds (ms since 1970).
const MIN_MS: i64 = -210_866_803_200_000;
const MAX_MS: i64 = 9_224_318_015_999_999;

pub(crate) async fn write(State(s): State<Arc<Shared>>, headers: HeaderMap, body: axum::body::Body) -> Response {
    let started = Instant::now();
    let r = match write_request(&s, &headers, body).await {
        Ok(r) | Err(r) => r,
    };
    // Prometheus 2.42 drops a batch answered 429 (unless retry_on_http_429): a full budget is 503.
    let r = if r.status() == StatusCode::TOO_MANY_REQUESTS { busy(r) } else { r };
    s.metrics.request("prometheus_write", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

fn busy(mut r: Response) -> Response {
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

fn bad(message: String) -> Response {
    super::super::error(StatusCode::BAD_REQUEST, "invalid", &message)
}

/// The request's body as sent, then decompressed from snappy's block format.
pub(super) async fn snappy_body(
    s: &Shared,
    headers: &HeaderMap,
    body: axum::body::Body,
    reserved: &mut super::super::memory::Reservation,
) -> Result<(bytes::Bytes, Vec<u8>), Response> {
    let encoding = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("").trim().to_ascii_lowercase();
    if encoding != "snappy" {
        return Err(super::super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            &format!("Content-Encoding {encoding:?}: Prometheus's remote protocols send snappy (Content-Encoding: snappy)"),
        ));
    }
    let raw = super::super::body::read(s, headers, body, reserved).await?;
    let max = s.config.body.max;
    let len = snap::raw::decompress_len(&raw).map_err(|e| bad(format!("the body is not snappy-compressed (block format): {e}")))?;
    if len > max {
        return Err(super::super::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!("the body decompresses to {len} bytes, more than {max} (--max-body-mb): send smaller requests (max_samples_per_send)"),
        ));
    }
    reserved.need(reserved.bytes() + len)?;
    let out = snap::raw::Decoder::new()
        .decompress_vec(&raw)
        .map_err(|e| bad(format!("the body is not snappy-compressed (block format): {e}")))?;
    Ok((raw, out))
}

/// A request's series, checked: each one's canonical label bytes (in
/// `keys`, ending at `key_ends`) and its samples (in `samples`, ending at
/// `sample_ends`).
#[derive(Default)]
pub(super) struct Batch {
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    metrics: Vec<(usize, usize)>,
    pub(super) samples: Vec<(i64, u64)>,
    sample_ends: Vec<usize>,
}

impl Batch {
    fn key(&self, i: usize) -> &[u8] {
        &self.keys[if i == 0 { 0 } else { self.key_ends[i - 1] }..self.key_ends[i]]
    }

    /// Adds a series, checked (`labels::canonical` and the samples' times),
    /// using `sorted` and `key` as scratch; or says why it is refused (after
    /// a colon, or after the metric's name in brackets).
    pub(super) fn add<'a>(
        &mut self,
        labels: &[(&'a str, &'a str)],
        samples: &[(i64, u64)],
        sorted: &mut Vec<(&'a str, &'a str)>,
        key: &mut Vec<u8>,
    ) -> Result<(), String> {
        let metric = super::labels::canonical(labels, sorted, key).map_err(|why| format!(": {why}"))?;
        if let Some((t, _)) = samples.iter().find(|(t, _)| !(MIN_MS..=MAX_MS).contains(t)) {
            return Err(format!(" ({metric}): sample time {t} ms is outside what PostgreSQL's timestamptz holds"));
        }
        if samples.is_empty() {
            return Ok(());
        }
        let at = self.keys.len();
        self.keys.extend_from_slice(key);
        self.key_ends.push(self.keys.len());
        // Where the metric name's value sits in the key.
        let start = at + memchr::memmem::find(key, b"__name__\xff").map_or(0, |i| i + 9);
        self.metrics.push((start, start + metric.len()));
        self.samples.extend_from_slice(samples);
        self.sample_ends.push(self.samples.len());
        Ok(())
    }

    pub(super) fn bytes(&self) -> usize {
        self.keys.capacity() + self.key_ends.capacity() * 24 + self.samples.capacity() * 16 + self.sample_ends.capacity() * 8
    }
}

/// Walks the body into a [`Batch`]: the first problem refuses the request.
fn check(body: &[u8], metadata: &mut Vec<MetricMetadata>) -> Result<(Batch, wire::WriteCounts), String> {
    let mut b = Batch::default();
    let (mut sorted, mut key) = (Vec::new(), Vec::new());
    let mut scratch = SeriesRef::default();
    let mut n = 0u64;
    let counts = wire::decode_write(
        body,
        &mut scratch,
        |series| {
            n += 1;
            b.add(&series.labels, &series.samples, &mut sorted, &mut key).map_err(|why| wire::WireError(format!("series {n}{why}")))
        },
        |m| metadata.push(m),
    )
    .map_err(|e| e.0)?;
    Ok((b, counts))
}

async fn write_request(s: &Shared, headers: &HeaderMap, body: axum::body::Body) -> Result<Response, Response> {
    super::super::auth::check(&s.config.tokens, headers, &HashMap::new())?;
    let Some(prom) = s.prom.clone() else { return Err(super::off()) };
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("").to_ascii_lowercase();
    if content_type.contains("io.prometheus.write.v2") {
        return Err(super::super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            "remote write 2.0 (io.prometheus.write.v2.Request) is not taken yet: send remote write 1.0 (prometheus.WriteRequest)",
        ));
    }
    if !content_type.is_empty() && !content_type.starts_with("application/x-protobuf") {
        return Err(super::super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            &format!("Content-Type {content_type:?}: remote write sends a snappy protobuf (Content-Type: application/x-protobuf)"),
        ));
    }
    let mut reserved = s.memory.reservation();
    let (raw, body) = snappy_body(s, headers, body, &mut reserved).await?;
    let mut metadata = Vec::new();
    let (batch, counts) = match check(&body, &mut metadata) {
        Ok(v) => v,
        Err(why) => {
            s.metrics.prom_refused();
            return Err(bad(format!("nothing was written: {why}")));
        }
    };
    s.metrics.prom_received(counts.samples, counts.exemplars + counts.histograms);
    drop(body);
    let (answer, total) = store(s, &prom, batch, &metadata, b"prometheus remote write", raw, reserved).await?;
    if total == 0 {
        return Ok(written(answer, 0));
    }
    if answer.status().is_success() {
        s.metrics.prom_committed(total as u64);
        return Ok(written(answer, total as u64));
    } else if answer.status() == StatusCode::BAD_REQUEST {
        return Ok(partial(s, answer, total as u64).await);
    }
    Ok(answer)
}

/// Stores a checked request's samples (the series made first, and the
/// metadata kept) and answers once they are committed: the answer of
/// `submit_and_answer` (204 when there was nothing to store) and the
/// samples the request had. `what` and `raw` key the request.
pub(super) async fn store(
    s: &Shared,
    prom: &Arc<super::Prom>,
    batch: Batch,
    metadata: &[MetricMetadata],
    what: &[u8],
    raw: bytes::Bytes,
    mut reserved: super::super::memory::Reservation,
) -> Result<(Response, usize), Response> {
    reserved.need(reserved.bytes() + batch.bytes() + batch.samples.len() * 24)?;
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let config = &s.config;
    super::super::patiently(deadline, || prom.ready(config)).await.map_err(|e| super::super::lane_error(&e))?;
    // Samples past the retention are refused before their series are made.
    let (batch, old) = match prom.policy(config).await {
        Some(policy) => past_retention(batch, &policy, chute_engine::clock::now_micros()),
        None => (batch, Old::default()),
    };
    let ids = series_ids(s, prom, &batch, deadline).await?;
    if !metadata.is_empty() {
        let stored = super::super::patiently(deadline, || async {
            let c = prom.writers.get(config).await?;
            super::store::store_metadata(&c, &prom.tables, metadata).await
        })
        .await;
        stored.map_err(|e| super::super::lane_error(&e))?;
    }
    let total = batch.samples.len() + old.count;
    if total == 0 {
        return Ok((StatusCode::NO_CONTENT.into_response(), 0));
    }
    let (data, cuts) = rows(&batch, &ids);
    drop(batch);
    // What the request holds from here on: its rows (the body and the batch are gone).
    let _ = reserved.resize(data.capacity() + cuts.capacity() * 16 + old.kept.as_ref().map_or(0, |k| k.capacity() * 8));
    // The samples refused here are part of the key: a retry that refuses others (the
    // retention moved on meanwhile) sends other rows, so it is another request.
    let refused: Vec<u8> = old.refused.iter().flat_map(|n| n.to_le_bytes()).collect();
    let digest = super::super::keys::digest(&[what, prom.tables.schema.as_bytes(), &raw, &refused]);
    drop(raw);
    let key = format!("prometheus {digest}");
    let keyed = Keyed { key: &key, digest };
    let parts = if data.is_empty() {
        vec![]
    } else {
        let lane = super::super::patiently(deadline, || s.lanes.get(&prom.tables.samples, &super::super::lanes::Shape::Samples))
            .await
            .map_err(|e| super::super::lane_error(&e))?;
        vec![Part { lane, data, first_line: 1, cuts, rows: None }]
    };
    let kept = old.kept;
    let line_of = |n: u64| kept.as_ref().and_then(|k| k.get(n.saturating_sub(1) as usize).copied()).unwrap_or(n);
    Ok((submit_and_answer(s, parts, old.rejects, line_of, total, Some(keyed), reserved).await, total))
}

/// Adds remote write's count of what was written to an answer (the
/// `X-Prometheus-Remote-Write-*-Written` headers of remote write 2.0, which
/// 1.0 senders ignore): exemplars and histograms are never stored.
fn written(mut r: Response, samples: u64) -> Response {
    let h = r.headers_mut();
    h.insert("x-prometheus-remote-write-samples-written", HeaderValue::from(samples));
    h.insert("x-prometheus-remote-write-histograms-written", HeaderValue::from_static("0"));
    h.insert("x-prometheus-remote-write-exemplars-written", HeaderValue::from_static("0"));
    r
}

/// A partial write's answer in remote write's terms: 400 (Prometheus drops
/// the batch rather than retry what would be refused again), saying how many
/// samples were written and why the others were not, with the written
/// headers; counts them.
async fn partial(s: &Shared, answer: Response, total: u64) -> Response {
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20).await.unwrap_or_default();
    let Ok(mut v) = serde_json::from_slice::<serde_json::Value>(&bytes) else {
        return Response::from_parts(parts, axum::body::Body::from(bytes));
    };
    let committed = v["rows_committed"].as_u64().unwrap_or(0);
    s.metrics.prom_committed(committed);
    s.metrics.prom_rejected(total.saturating_sub(committed));
    let first = v["rejected"][0]["reason"].as_str().unwrap_or("").to_owned();
    let message = format!(
        "{} of {total} samples written, {} refused and dropped (not worth a retry: they would be refused again); the first: {first}",
        committed,
        total.saturating_sub(committed)
    );
    let message = if committed == 0 { format!("nothing was written: {message}") } else { format!("partial write: {message}") };
    v["message"] = message.clone().into();
    v["error"] = message.into();
    written(Response::from_parts(parts, axum::body::Body::from(v.to_string())), committed)
}

/// Samples refused for being past the samples table's retention.
#[derive(Default)]
struct Old {
    count: usize,
    rejects: Rejects,
    /// Their places in the request (from 1).
    refused: Vec<u64>,
    /// When some were refused: the place in the request of each sample kept.
    kept: Option<Vec<u64>>,
}

/// Takes out of `b` the samples whose partition retention would drop (as
/// the load engine would refuse them), and the series left with none, so
/// that no series row is made for them.
fn past_retention(b: Batch, policy: &chute_core::partman::Policy, now: i64) -> (Batch, Old) {
    use chute_core::partman::planner::{KeyLimits, check_key, key_limits};
    let Ok(KeyLimits { retention_cutoff: Some(cutoff), .. }) = key_limits(policy, None, now) else { return (b, Old::default()) };
    let limits = KeyLimits { retention_cutoff: Some(cutoff), max_key: None };
    let refuse = |t: i64| check_key(policy, &limits, t.saturating_mul(1000)).err();
    if !b.samples.iter().any(|(t, _)| refuse(*t).is_some()) {
        return (b, Old::default());
    }
    let mut out = Batch::default();
    let mut old = Old { kept: Some(Vec::with_capacity(b.samples.len())), ..Old::default() };
    let mut from = 0;
    for (i, end) in b.sample_ends.iter().enumerate() {
        let before = out.samples.len();
        for (at, (t, bits)) in b.samples[from..*end].iter().enumerate() {
            let n = (from + at + 1) as u64;
            match refuse(*t) {
                Some(why) => {
                    let metric = String::from_utf8_lossy(&b.keys[b.metrics[i].0..b.metrics[i].1]).into_owned();
                    old.rejects.push(Rejected { line: n, reason: format!("sample {n} ({metric}, at {t} ms): {why}") });
                    old.refused.push(n);
                    old.count += 1;
                }
                None => {
                    out.samples.push((*t, *bits));
                    old.kept.as_mut().expect("kept").push(n);
                }
            }
        }
        from = *end;
        if out.samples.len() > before {
            let at = out.keys.len();
            out.keys.extend_from_slice(b.key(i));
            out.key_ends.push(out.keys.len());
            let (m0, m1) = b.metrics[i];
            let start = m0 - if i == 0 { 0 } else { b.key_ends[i - 1] };
            out.metrics.push((at + start, at + start + (m1 - m0)));
            out.sample_ends.push(out.samples.len());
        }
    }
    (out, old)
}

/// The series id of each of the batch's label sets: from the cache, and
/// those it lacks from the series table, in one statement.
async fn series_ids(s: &Shared, prom: &super::Prom, batch: &Batch, deadline: tokio::time::Instant) -> Result<Vec<i64>, Response> {
    let mut ids = Vec::with_capacity(batch.key_ends.len());
    prom.cache.lookup((0..batch.key_ends.len()).map(|i| batch.key(i)), &mut ids);
    let mut missing: HashMap<&[u8], usize> = HashMap::new();
    for (i, id) in ids.iter().enumerate() {
        if id.is_none() {
            let at = missing.len();
            missing.entry(batch.key(i)).or_insert(at);
        }
    }
    if missing.is_empty() {
        return Ok(ids.into_iter().map(|id| id.unwrap_or_default()).collect());
    }
    let mut order: Vec<(&[u8], usize)> = missing.iter().map(|(k, i)| (*k, *i)).collect();
    order.sort_by_key(|(_, i)| *i);
    let new: Vec<NewSeries> = order
        .iter()
        .map(|(k, _)| {
            let labels: serde_json::Map<String, serde_json::Value> =
                super::labels::pairs(k).map(|(n, v)| (n.to_owned(), serde_json::Value::String(v.to_owned()))).collect();
            let metric = labels.get("__name__").and_then(|v| v.as_str()).unwrap_or_default().to_owned();
            NewSeries {
                key: ring::digest::digest(&ring::digest::SHA256, k).as_ref().to_vec(),
                metric,
                labels: serde_json::Value::Object(labels),
            }
        })
        .collect();
    let config = &s.config;
    let (found, made) = super::super::patiently(deadline, || async {
        let c = prom.writers.get(config).await?;
        super::store::resolve(&c, &prom.tables, &new).await
    })
    .await
    .map_err(|e| super::super::lane_error(&e))?;
    s.metrics.prom_series_created(made);
    prom.cache.insert(order.iter().zip(&found).map(|((k, _), id)| (Box::<[u8]>::from(*k), *id)));
    Ok(ids.into_iter().enumerate().map(|(i, id)| id.unwrap_or_else(|| found[missing[batch.key(i)]])).collect())
}

/// The samples as the lane's rows: series id, time (ms) and the value's
/// bits, 8 bytes little-endian each, cut into chunks of about `CHUNK_BYTES`.
fn rows(batch: &Batch, ids: &[i64]) -> (Vec<u8>, Vec<(usize, u64)>) {
    let mut data = Vec::with_capacity(batch.samples.len() * ROW);
    let mut cuts = vec![(0usize, 0u64)];
    let per_chunk = CHUNK_BYTES / ROW;
    let mut from = 0;
    for (i, end) in batch.sample_ends.iter().enumerate() {
        let id = ids[i].to_le_bytes();
        for (t, bits) in &batch.samples[from..*end] {
            let n = data.len() / ROW;
            if n > 0 && n.is_multiple_of(per_chunk) {
                cuts.push((data.len(), n as u64));
            }
            data.extend_from_slice(&id);
            data.extend_from_slice(&t.to_le_bytes());
            data.extend_from_slice(&bits.to_le_bytes());
        }
        from = *end;
    }
    (data, cuts)
}

/// Bytes of one sample's row on the lane (see `load::kind::samples`).
const ROW: usize = 24;

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;
    use wire::{Label, Sample, TimeSeries, WriteRequest};

    fn series(labels: &[(&str, &str)], samples: &[(i64, f64)]) -> TimeSeries {
        TimeSeries {
            labels: labels.iter().map(|(n, v)| Label { name: (*n).into(), value: (*v).into() }).collect(),
            samples: samples.iter().map(|(t, v)| Sample { timestamp: *t, value: *v }).collect(),
            exemplars: vec![],
        }
    }

    #[test]
    fn a_request_becomes_rows_of_id_time_and_bits() {
        let req = WriteRequest {
            timeseries: vec![
                series(&[("__name__", "up"), ("job", "a")], &[(1000, 1.0), (2000, f64::from_bits(wire::STALE_NAN))]),
                series(&[("__name__", "x")], &[(5, -2.5)]),
            ],
            metadata: vec![],
        };
        let (batch, counts) = check(&req.encode_to_vec(), &mut Vec::new()).unwrap();
        assert_eq!(counts.samples, 3);
        assert_eq!(&batch.keys[batch.metrics[0].0..batch.metrics[0].1], b"up");
        assert_eq!(&batch.keys[batch.metrics[1].0..batch.metrics[1].1], b"x");
        let (data, cuts) = rows(&batch, &[7, 9]);
        assert_eq!(cuts, [(0, 0)]);
        let row = |i: usize, f: usize| u64::from_le_bytes(data[i * ROW + f * 8..i * ROW + f * 8 + 8].try_into().unwrap());
        assert_eq!((row(0, 0), row(0, 1), row(0, 2)), (7, 1000, 1.0f64.to_bits()));
        assert_eq!(row(1, 2), wire::STALE_NAN);
        assert_eq!((row(2, 0), row(2, 1) as i64, f64::from_bits(row(2, 2))), (9, 5, -2.5));
    }

    #[test]
    fn one_bad_series_refuses_the_request_and_names_it() {
        let req = WriteRequest {
            timeseries: vec![series(&[("__name__", "ok")], &[(1, 1.0)]), series(&[("job", "x")], &[(1, 1.0)])],
            metadata: vec![],
        };
        let why = check(&req.encode_to_vec(), &mut Vec::new()).err().unwrap();
        assert!(why.starts_with("series 2: a series has no metric name"), "{why}");
        let req = WriteRequest { timeseries: vec![series(&[("__name__", "ok")], &[(i64::MAX, 1.0)])], metadata: vec![] };
        assert!(check(&req.encode_to_vec(), &mut Vec::new()).err().unwrap().contains("outside what PostgreSQL's timestamptz holds"));
    }

    #[test]
    fn rows_are_cut_into_chunks_at_row_ends() {
        let n = CHUNK_BYTES / ROW * 2 + 5;
        let samples: Vec<(i64, f64)> = (0..n as i64).map(|i| (i, i as f64)).collect();
        let req = WriteRequest { timeseries: vec![series(&[("__name__", "m")], &samples)], metadata: vec![] };
        let (batch, _) = check(&req.encode_to_vec(), &mut Vec::new()).unwrap();
        let (data, cuts) = rows(&batch, &[1]);
        assert_eq!(data.len(), n * ROW);
        let per = CHUNK_BYTES / ROW;
        assert_eq!(cuts, [(0, 0), (per * ROW, per as u64), (2 * per * ROW, 2 * per as u64)]);
    }
}
