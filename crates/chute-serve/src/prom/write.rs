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
use super::super::submit::{CHUNK_BYTES, Keyed, Part, Rejects, submit_and_answer};
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
struct Batch {
    keys: Vec<u8>,
    key_ends: Vec<usize>,
    metrics: Vec<(usize, usize)>,
    samples: Vec<(i64, u64)>,
    sample_ends: Vec<usize>,
}

impl Batch {
    fn key(&self, i: usize) -> &[u8] {
        &self.keys[if i == 0 { 0 } else { self.key_ends[i - 1] }..self.key_ends[i]]
    }

    fn bytes(&self) -> usize {
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
            let metric = super::labels::canonical(&series.labels, &mut sorted, &mut key)
                .map_err(|why| wire::WireError(format!("series {n}: {why}")))?;
            if let Some((t, _)) = series.samples.iter().find(|(t, _)| !(MIN_MS..=MAX_MS).contains(t)) {
                return Err(wire::WireError(format!(
                    "series {n} ({metric}): sample time {t} ms is outside what PostgreSQL's timestamptz holds"
                )));
            }
            if series.samples.is_empty() {
                return Ok(());
            }
            let at = b.keys.len();
            b.keys.extend_from_slice(&key);
            b.key_ends.push(b.keys.len());
            // Where the metric name's value sits in the key.
            let start = at + memchr::memmem::find(&key, b"__name__\xff").map_or(0, |i| i + 9);
            b.metrics.push((start, start + metric.len()));
            b.samples.extend_from_slice(&series.samples);
            b.sample_ends.push(b.samples.len());
            Ok(())
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
    reserved.need(reserved.bytes() + batch.bytes() + batch.samples.len() * 24)?;
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let config = &s.config;
    super::super::patiently(deadline, || prom.ready(config)).await.map_err(|e| super::super::lane_error(&e))?;
    let ids = series_ids(s, &prom, &batch, deadline).await?;
    if !metadata.is_empty() {
        let stored = super::super::patiently(deadline, || async {
            let c = prom.writers.get(config).await?;
            super::store::store_metadata(&c, &prom.tables, &metadata).await
        })
        .await;
        stored.map_err(|e| super::super::lane_error(&e))?;
    }
    if batch.samples.is_empty() {
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let lane = super::super::patiently(deadline, || s.lanes.get(&prom.tables.samples, &super::super::lanes::Shape::Samples))
        .await
        .map_err(|e| super::super::lane_error(&e))?;
    let (data, cuts) = rows(&batch, &ids);
    let total = batch.samples.len();
    drop(batch);
    // What the request holds from here on: its rows (the body and the batch are gone).
    let _ = reserved.resize(data.capacity() + cuts.capacity() * 16);
    let digest = super::super::keys::digest(&[b"prometheus remote write", prom.tables.schema.as_bytes(), &raw]);
    drop(raw);
    let key = format!("prometheus {digest}");
    let keyed = Keyed { key: &key, digest };
    let parts = vec![Part { lane, data, first_line: 1, cuts, rows: None }];
    let answer = submit_and_answer(s, parts, Rejects::default(), |n| n, total, Some(keyed), reserved).await;
    if answer.status().is_success() {
        s.metrics.prom_committed(total as u64);
    } else if answer.status() == StatusCode::BAD_REQUEST {
        return Ok(count_rejected(s, answer, total as u64).await);
    }
    Ok(answer)
}

/// Counts the samples a partial write committed and rejected (from its
/// answer's `rows_committed`), and gives the answer back as it was.
async fn count_rejected(s: &Shared, answer: Response, total: u64) -> Response {
    let (parts, body) = answer.into_parts();
    let bytes = axum::body::to_bytes(body, 16 << 20).await.unwrap_or_default();
    let committed = serde_json::from_slice::<serde_json::Value>(&bytes).ok().and_then(|v| v["rows_committed"].as_u64()).unwrap_or(0);
    s.metrics.prom_committed(committed);
    s.metrics.prom_rejected(total.saturating_sub(committed));
    Response::from_parts(parts, axum::body::Body::from(bytes))
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
