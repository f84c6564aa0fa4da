//! `POST /api/v1/read`: Prometheus remote read.
//!
//! Each query of a request is answered in two steps. The series: those
//! the equality matchers allow are read from the series table (by its
//! `metric` btree and its `labels` GIN index: `metric = $1 AND labels @>
//! $2`; a query with no such matcher reads every series), and every
//! matcher is then applied to their labels here (see `matchers`). The
//! samples: for the series in label order, a few hundred at a time,
//! `series_id = ANY($1) AND time BETWEEN $2 AND $3`, which the `(series_id,
//! time)` index answers in the partitions the time range prunes to (the
//! bounds are parameters of a prepared statement: PostgreSQL prunes at
//! run time).
//!
//! The answer is the first response type of `accepted_response_types` that
//! chute speaks, SAMPLES when the request names none (Prometheus 2.42
//! names none): SAMPLES is one snappy `ReadResponse`, held in memory (and
//! in the request's share of the memory budget) until it is sent;
//! STREAMED_XOR_CHUNKS sends each series as it is read, in XOR chunks of
//! up to 120 samples and frames of up to 1 MiB, so its memory is one frame.
//! A series' samples with the same time (a sample written twice) are
//! answered once.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes};
use prost::Message;
use tokio_postgres::Client;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::super::Shared;
use super::super::catalog::{LaneError, sql_error};
use super::matchers::Matcher;
use super::wire::{self, ChunkedReadResponse, ChunkedSeries, Label, QueryResult, ReadRequest, ReadResponse, Sample, TimeSeries};

/// Series whose samples are read by one statement.
const GROUP: usize = 256;
/// The most samples one request is answered (Prometheus's own default limit).
const SAMPLE_LIMIT: u64 = 50_000_000;
/// Bytes of chunks a streamed frame holds at most.
const FRAME_BYTES: usize = 1 << 20;
/// What a sample of a SAMPLES answer takes in memory until it is sent.
const SAMPLE_BYTES: usize = 40;

/// A time as PostgreSQL's timestamptz holds it: microseconds since 2000.
#[derive(Debug, Clone, Copy)]
struct PgTime(i64);

const PG_EPOCH_MS: i64 = 946_684_800_000;

impl PgTime {
    fn from_ms(ms: i64) -> PgTime {
        PgTime(ms.clamp(-210_866_803_200_000, 9_224_318_015_999_999).saturating_sub(PG_EPOCH_MS).saturating_mul(1000))
    }

    fn ms(self) -> i64 {
        self.0.div_euclid(1000) + PG_EPOCH_MS
    }
}

impl ToSql for PgTime {
    fn to_sql(&self, _: &Type, out: &mut bytes::BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_i64(self.0);
        Ok(IsNull::No)
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }

    to_sql_checked!();
}

impl<'a> FromSql<'a> for PgTime {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(PgTime(i64::from_be_bytes(raw.try_into()?)))
    }

    fn accepts(ty: &Type) -> bool {
        *ty == Type::TIMESTAMPTZ
    }
}

pub(crate) async fn read(State(s): State<Arc<Shared>>, headers: HeaderMap, body: axum::body::Body) -> Response {
    let started = Instant::now();
    let r = match read_request(&s, &headers, body, started).await {
        Ok(r) | Err(r) => r,
    };
    s.metrics.request("prometheus_read", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

fn bad(message: String) -> Response {
    super::super::error(StatusCode::BAD_REQUEST, "invalid", &message)
}

/// One query's series: id and labels, sorted by labels.
type Series = Vec<(i64, Vec<Label>)>;

async fn read_request(s: &Arc<Shared>, headers: &HeaderMap, body: axum::body::Body, started: Instant) -> Result<Response, Response> {
    super::super::auth::check(&s.config.tokens, headers, &HashMap::new())?;
    let Some(prom) = s.prom.clone() else { return Err(super::off()) };
    let mut reserved = s.memory.reservation();
    let (_, body) = super::write::snappy_body(s, headers, body, &mut reserved).await?;
    let req = ReadRequest::decode(&body[..]).map_err(|e| bad(format!("the body is not a prometheus.ReadRequest: {e}")))?;
    let streamed = match req.accepted_response_types.iter().find(|t| [wire::SAMPLES, wire::STREAMED_XOR_CHUNKS].contains(t)) {
        Some(t) => *t == wire::STREAMED_XOR_CHUNKS,
        None if req.accepted_response_types.is_empty() => false,
        None => {
            return Err(bad(format!(
                "none of the accepted response types {:?} is one chute answers (0 SAMPLES, 1 STREAMED_XOR_CHUNKS)",
                req.accepted_response_types
            )));
        }
    };
    let mut queries = Vec::with_capacity(req.queries.len());
    for (i, q) in req.queries.iter().enumerate() {
        let matchers = q.matchers.iter().map(Matcher::new).collect::<Result<Vec<_>, _>>().map_err(|e| bad(format!("query {i}: {e}")))?;
        queries.push((q.start_timestamp_ms, q.end_timestamp_ms, matchers));
    }
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let config = &s.config;
    super::super::patiently(deadline, || prom.ready(config)).await.map_err(|e| super::super::lane_error(&e))?;
    let client = super::super::patiently(deadline, || prom.readers.get(config)).await.map_err(|e| super::super::lane_error(&e))?;
    let mut found = Vec::with_capacity(queries.len());
    for (start, end, matchers) in &queries {
        let series = select_series(&client, &prom.tables, matchers).await.map_err(|e| super::super::lane_error(&e))?;
        found.push((*start, *end, series));
    }
    if streamed {
        return Ok(stream(s.clone(), prom, client, found, started));
    }
    let mut results = Vec::with_capacity(found.len());
    let (mut n_series, mut n_samples) = (0u64, 0u64);
    for (start, end, series) in found {
        let mut timeseries = Vec::with_capacity(series.len());
        let mut fetch = Fetch { client: &client, tables: &prom.tables, from: PgTime::from_ms(start), to: PgTime::from_ms(end) };
        for group in series.chunks(GROUP) {
            let mut samples = fetch.group(group).await.map_err(|e| read_failed(s, &e, started))?;
            for (id, labels) in group {
                let samples: Vec<Sample> = samples
                    .remove(id)
                    .unwrap_or_default()
                    .into_iter()
                    .map(|(t, bits)| Sample { timestamp: t, value: f64::from_bits(bits) })
                    .collect();
                n_samples += samples.len() as u64;
                if n_samples > SAMPLE_LIMIT {
                    return Err(bad(format!(
                        "the queries select more than {SAMPLE_LIMIT} samples: ask for a shorter time range or fewer series"
                    )));
                }
                reserved.need(reserved.bytes() + samples.len() * SAMPLE_BYTES + 256)?;
                if !samples.is_empty() {
                    n_series += 1;
                    timeseries.push(TimeSeries { labels: labels.clone(), samples, exemplars: vec![] });
                }
            }
        }
        results.push(QueryResult { timeseries });
    }
    let encoded = ReadResponse { results }.encode_to_vec();
    let compressed = snap::raw::Encoder::new().compress_vec(&encoded).map_err(|e| bad(format!("cannot compress the answer: {e}")))?;
    s.metrics.prom_read("ok", started.elapsed().as_secs_f64(), n_series, n_samples);
    let mut r = (StatusCode::OK, compressed).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-protobuf"));
    r.headers_mut().insert(header::CONTENT_ENCODING, HeaderValue::from_static("snappy"));
    Ok(r)
}

fn read_failed(s: &Shared, e: &LaneError, started: Instant) -> Response {
    s.metrics.prom_read("error", started.elapsed().as_secs_f64(), 0, 0);
    super::super::lane_error(e)
}

/// The series the matchers select, sorted by their labels.
async fn select_series(client: &Client, t: &super::store::Tables, matchers: &[Matcher]) -> Result<Series, LaneError> {
    let metric = matchers.iter().find_map(|m| m.required().filter(|(n, _)| *n == "__name__").map(|(_, v)| v.to_owned()));
    let required: serde_json::Map<String, serde_json::Value> =
        matchers.iter().filter_map(Matcher::required).map(|(n, v)| (n.to_owned(), serde_json::Value::String(v.to_owned()))).collect();
    let rows = client
        .query(
            &format!("SELECT id, labels FROM {} WHERE ($1::text IS NULL OR metric = $1) AND labels @> $2::jsonb", t.series),
            &[&metric, &serde_json::Value::Object(required)],
        )
        .await
        .map_err(sql_error(format!("reading the series of {}", t.series)))?;
    let mut out = Vec::new();
    for r in rows {
        let labels: BTreeMap<String, String> = serde_json::from_value(r.get::<_, serde_json::Value>(1)).unwrap_or_default();
        if matchers.iter().all(|m| m.matches(labels.get(&m.name).map_or("", String::as_str))) {
            out.push((r.get::<_, i64>(0), labels.into_iter().map(|(name, value)| Label { name, value }).collect::<Vec<_>>()));
        }
    }
    out.sort_by(|a, b| a.1.cmp(&b.1));
    Ok(out)
}

/// Reads the samples of series in a time range, a group at a time.
struct Fetch<'a> {
    client: &'a Client,
    tables: &'a super::store::Tables,
    from: PgTime,
    to: PgTime,
}

impl Fetch<'_> {
    /// The samples (ms, bits) of each series of `group`, in time order, one per time.
    async fn group(&mut self, group: &[(i64, Vec<Label>)]) -> Result<HashMap<i64, Vec<(i64, u64)>>, LaneError> {
        let ids: Vec<i64> = group.iter().map(|(id, _)| *id).collect();
        let rows = self
            .client
            .query(
                &format!(
                    "SELECT series_id, time, value FROM {} WHERE series_id = ANY($1) AND time >= $2 AND time <= $3 ORDER BY series_id, time",
                    self.tables.samples.quoted()
                ),
                &[&ids, &self.from, &self.to],
            )
            .await
            .map_err(sql_error(format!("reading samples of {}", self.tables.samples)))?;
        let mut out: HashMap<i64, Vec<(i64, u64)>> = HashMap::with_capacity(ids.len());
        for r in rows {
            let (id, t, v): (i64, PgTime, f64) = (r.get(0), r.get(1), r.get(2));
            let samples = out.entry(id).or_default();
            let ms = t.ms();
            if samples.last().is_none_or(|(last, _)| *last != ms) {
                samples.push((ms, v.to_bits()));
            }
        }
        Ok(out)
    }
}

/// The STREAMED_XOR_CHUNKS answer: frames sent as series are read.
fn stream(s: Arc<Shared>, prom: Arc<super::Prom>, client: Arc<Client>, found: Vec<(i64, i64, Series)>, started: Instant) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let (mut n_series, mut n_samples) = (0u64, 0u64);
        for (index, (start, end, series)) in found.into_iter().enumerate() {
            let mut fetch = Fetch { client: &client, tables: &prom.tables, from: PgTime::from_ms(start), to: PgTime::from_ms(end) };
            for group in series.chunks(GROUP) {
                let mut samples = match fetch.group(group).await {
                    Ok(s) => s,
                    Err(e) => {
                        // The status is sent: a cut stream (no more frames) is how the reader learns it.
                        eprintln!("chute serve: a remote read stopped: {e}");
                        s.metrics.prom_read("error", started.elapsed().as_secs_f64(), n_series, n_samples);
                        let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
                        return;
                    }
                };
                for (id, labels) in group {
                    let samples = samples.remove(id).unwrap_or_default();
                    if samples.is_empty() {
                        continue;
                    }
                    n_series += 1;
                    n_samples += samples.len() as u64;
                    for f in frames(labels, &samples, index as i64) {
                        if tx.send(Ok(f.into())).await.is_err() {
                            return;
                        }
                    }
                }
            }
        }
        s.metrics.prom_read("ok", started.elapsed().as_secs_f64(), n_series, n_samples);
    });
    let body = axum::body::Body::from_stream(tokio_stream_of(rx));
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"));
    r
}

/// A stream of what `rx` receives.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// One series' samples as framed `ChunkedReadResponse`s: XOR chunks of up
/// to 120 samples, as many per frame as fit in about 1 MiB.
pub(crate) fn frames(labels: &[Label], samples: &[(i64, u64)], query_index: i64) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut chunks = Vec::new();
    let mut bytes = 0;
    let flush = |chunks: &mut Vec<wire::Chunk>, out: &mut Vec<Vec<u8>>| {
        let series = ChunkedSeries { labels: labels.to_vec(), chunks: std::mem::take(chunks) };
        out.push(super::xor::frame(&ChunkedReadResponse { chunked_series: vec![series], query_index }.encode_to_vec()));
    };
    for piece in samples.chunks(super::xor::SAMPLES_PER_CHUNK) {
        let mut w = super::xor::XorWriter::new();
        for (t, bits) in piece {
            w.append(*t, *bits);
        }
        let data = w.finish();
        bytes += data.len();
        chunks.push(wire::Chunk { min_time_ms: piece[0].0, max_time_ms: piece[piece.len() - 1].0, r#type: wire::CHUNK_XOR, data });
        if bytes >= FRAME_BYTES {
            flush(&mut chunks, &mut out);
            bytes = 0;
        }
    }
    if !chunks.is_empty() {
        flush(&mut chunks, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_convert_to_and_from_postgres_exactly() {
        for ms in [0, 1, -1, 1_700_000_000_123, PG_EPOCH_MS, -62_135_596_800_000] {
            assert_eq!(PgTime::from_ms(ms).ms(), ms);
        }
        assert_eq!(PgTime::from_ms(PG_EPOCH_MS).0, 0);
        assert_eq!(PgTime::from_ms(i64::MIN).ms(), -210_866_803_200_000, "clamped to what timestamptz holds");
    }

    #[test]
    fn a_long_series_streams_in_chunks_of_120_and_reads_back() {
        let labels = vec![Label { name: "__name__".into(), value: "up".into() }];
        let samples: Vec<(i64, u64)> = (0..1000).map(|i| (i * 15_000, (i as f64).to_bits())).collect();
        let framed: Vec<u8> = frames(&labels, &samples, 3).concat();
        let mut got = Vec::new();
        for m in super::super::xor::unframe(&framed).unwrap() {
            let r = ChunkedReadResponse::decode(m).unwrap();
            assert_eq!(r.query_index, 3);
            for s in r.chunked_series {
                assert_eq!(s.labels, labels);
                for c in s.chunks {
                    let read = super::super::xor::read_chunk(&c.data).unwrap();
                    assert!(read.len() <= 120);
                    assert_eq!((c.min_time_ms, c.max_time_ms), (read[0].0, read[read.len() - 1].0));
                    got.extend(read);
                }
            }
        }
        assert_eq!(got, samples);
    }
}
