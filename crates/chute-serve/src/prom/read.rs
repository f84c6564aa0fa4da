//! `POST /api/v1/read`: Prometheus remote read.
//!
//! Each query of a request is answered in two steps. The series: those
//! the equality matchers allow are read from the series table (by its
//! `metric` btree and its `labels` GIN index: `metric = $1 AND labels @>
//! $2`; a query with no such matcher reads every series), and every
//! matcher is then applied to their labels here (see `matchers`). The
//! samples: for each series in label order, one statement, `series_id = $1
//! AND time BETWEEN $2 AND $3 ORDER BY time`, which the unique `(series_id,
//! time)` index answers in time order in the partitions the time range
//! prunes to (the bounds are parameters: PostgreSQL prunes at run time).
//! Rows are read as they are used: the connection stops reading from
//! PostgreSQL while they wait, so a read of any range holds a few of its
//! messages, never the range.
//!
//! The answer is the first response type of `accepted_response_types` that
//! chute speaks, SAMPLES when the request names none (Prometheus 2.42
//! names none). SAMPLES is one snappy `ReadResponse`, built whole in memory
//! (and in the request's share of the memory budget) before it is sent: a
//! read that would pass [`SAMPLE_LIMIT`] samples or that share is refused
//! (400) as soon as it does, before the rest is read, saying to stream.
//! STREAMED_XOR_CHUNKS sends each series as it is read, in XOR chunks of
//! up to 120 samples and frames of up to 1 MiB, over a connection of its
//! own: a read holds the frame being filled and four waiting to be sent,
//! whatever the range.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use bytes::{BufMut, Bytes};
use futures_util::TryStreamExt;
use prost::Message;
use tokio_postgres::Client;
use tokio_postgres::types::{FromSql, IsNull, ToSql, Type, to_sql_checked};

use super::super::Shared;
use super::super::catalog::{LaneError, sql_error};
use super::matchers::Matcher;
use super::wire::{self, ChunkedReadResponse, ChunkedSeries, Label, QueryResult, ReadRequest, ReadResponse, Sample, TimeSeries};

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
        // A connection of its own: a slow reader holds it while the answer streams, and no other read waits behind it.
        let own = super::super::patiently(deadline, || async { Ok::<_, LaneError>(Arc::new(config.target.connect().await?)) })
            .await
            .map_err(|e| super::super::lane_error(&e))?;
        return Ok(stream(s.clone(), prom, own, found, started));
    }
    samples_answer(s, &prom, &client, found, reserved, started).await
}

/// The SAMPLES answer: one `ReadResponse`, built whole in memory before it
/// is sent; refused (400) as soon as it would pass [`SAMPLE_LIMIT`] samples
/// or what the memory budget leaves a request, before the rest is read.
async fn samples_answer(
    s: &Shared,
    prom: &super::Prom,
    client: &Client,
    found: Vec<(i64, i64, Series)>,
    mut reserved: super::super::memory::Reservation,
    started: Instant,
) -> Result<Response, Response> {
    let max = SAMPLE_LIMIT.min((reserved.limit() / SAMPLE_BYTES) as u64);
    let too_large = |n: u64| {
        s.metrics.prom_read("error", started.elapsed().as_secs_f64(), 0, 0);
        bad(format!(
            "the answer would hold more than {max} samples (read {n} so far; a SAMPLES answer is built whole in memory, \
             {SAMPLE_BYTES} bytes a sample, within what --memory-mb leaves a request): ask for STREAMED_XOR_CHUNKS \
             (accepted_response_types), which streams any range, or for a shorter time range or fewer series"
        ))
    };
    let mut results = Vec::with_capacity(found.len());
    let (mut n_series, mut n_samples) = (0u64, 0u64);
    for (start, end, series) in found {
        let mut timeseries = Vec::with_capacity(series.len());
        let fetch = Fetch::new(client, &prom.tables, (start, end)).await.map_err(|e| read_failed(s, &e, started))?;
        for (id, labels) in series {
            let rows = fetch.stream(id).await.map_err(|e| read_failed(s, &e, started))?;
            futures_util::pin_mut!(rows);
            let mut samples = Vec::new();
            let mut last = None;
            while let Some(row) = rows.try_next().await.map_err(|e| read_failed(s, &fetch.failed(e), started))? {
                let Some((t, bits)) = sample(&row, &mut last) else { continue };
                samples.push(Sample { timestamp: t, value: f64::from_bits(bits) });
                n_samples += 1;
                if n_samples > max {
                    return Err(too_large(n_samples));
                }
                if n_samples % 4096 == 0 {
                    match reserved.resize(reserved.bytes() + 4096 * SAMPLE_BYTES) {
                        Ok(()) => {}
                        Err(super::super::memory::Refused::Never) => return Err(too_large(n_samples)),
                        Err(why) => return Err(super::super::memory::refusal(why, reserved.bytes(), reserved.limit())),
                    }
                }
            }
            if !samples.is_empty() {
                n_series += 1;
                timeseries.push(TimeSeries { labels, samples, exemplars: vec![] });
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

/// Reads the samples of series in a time range.
struct Fetch<'a> {
    client: &'a Client,
    tables: &'a super::store::Tables,
    statement: tokio_postgres::Statement,
    from: PgTime,
    to: PgTime,
}

impl<'a> Fetch<'a> {
    async fn new(client: &'a Client, tables: &'a super::store::Tables, (start, end): (i64, i64)) -> Result<Fetch<'a>, LaneError> {
        let sql =
            format!("SELECT time, value FROM {} WHERE series_id = $1 AND time >= $2 AND time <= $3 ORDER BY time", tables.samples.quoted());
        let statement = client.prepare(&sql).await.map_err(sql_error(format!("reading samples of {}", tables.samples)))?;
        Ok(Fetch { client, tables, statement, from: PgTime::from_ms(start), to: PgTime::from_ms(end) })
    }

    /// The samples of series `id` in time order, as PostgreSQL sends them:
    /// the rows are read as they are used (the connection stops reading
    /// while they wait), so no more than a few of its messages are held
    /// whatever the range. One series a statement, so that series come in
    /// label order (what Prometheus's merge of series sets needs) with the
    /// `(series_id, time)` index giving the time order.
    async fn stream(&self, id: i64) -> Result<tokio_postgres::RowStream, LaneError> {
        let params: [&(dyn ToSql + Sync); 3] = [&id, &self.from, &self.to];
        self.client.query_raw(&self.statement, params).await.map_err(|e| self.failed(e))
    }

    fn failed(&self, e: tokio_postgres::Error) -> LaneError {
        sql_error(format!("reading samples of {}", self.tables.samples))(e)
    }
}

/// A row's sample (ms, bits), unless it has the time of the one before
/// (`last`: a table made by an older chute may hold a sample twice).
fn sample(row: &tokio_postgres::Row, last: &mut Option<i64>) -> Option<(i64, u64)> {
    let (t, v): (PgTime, f64) = (row.get(0), row.get(1));
    let ms = t.ms();
    if *last == Some(ms) {
        return None;
    }
    *last = Some(ms);
    Some((ms, v.to_bits()))
}

/// The STREAMED_XOR_CHUNKS answer: frames sent as samples are read. What a
/// request holds is one frame being filled ([`FRAME_BYTES`]), the frames
/// waiting to be sent (4) and the rows the connection has read ahead.
fn stream(s: Arc<Shared>, prom: Arc<super::Prom>, client: Arc<Client>, found: Vec<(i64, i64, Series)>, started: Instant) -> Response {
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
    tokio::spawn(async move {
        let mut n = (0u64, 0u64);
        match send_frames(&prom, &client, found, &tx, &mut n).await {
            Ok(()) => s.metrics.prom_read("ok", started.elapsed().as_secs_f64(), n.0, n.1),
            Err(Some(e)) => {
                // The status is sent: a cut stream (no more frames) is how the reader learns it.
                eprintln!("chute serve: a remote read stopped: {e}");
                s.metrics.prom_read("error", started.elapsed().as_secs_f64(), n.0, n.1);
                let _ = tx.send(Err(std::io::Error::other(e.to_string()))).await;
            }
            // The reader went away.
            Err(None) => {}
        }
    });
    let body = axum::body::Body::from_stream(tokio_stream_of(rx));
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static("application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse"));
    r
}

/// Reads and sends every query's series as frames; counts (series,
/// samples) in `n`. `Err(None)`: the reader went away.
async fn send_frames(
    prom: &super::Prom,
    client: &Client,
    found: Vec<(i64, i64, Series)>,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
    n: &mut (u64, u64),
) -> Result<(), Option<LaneError>> {
    let send = |f: Vec<u8>| async move { tx.send(Ok(f.into())).await.map_err(|_| None::<LaneError>) };
    for (index, (start, end, series)) in found.into_iter().enumerate() {
        let fetch = Fetch::new(client, &prom.tables, (start, end)).await.map_err(Some)?;
        for (id, labels) in &series {
            let rows = fetch.stream(*id).await.map_err(Some)?;
            futures_util::pin_mut!(rows);
            let mut framer = Framer::new(labels, index as i64);
            let mut last = None;
            while let Some(row) = rows.try_next().await.map_err(|e| Some(fetch.failed(e)))? {
                let Some((t, bits)) = sample(&row, &mut last) else { continue };
                n.1 += 1;
                if let Some(frame) = framer.push(t, bits) {
                    send(frame).await?;
                }
            }
            if last.is_some() {
                n.0 += 1;
            }
            if let Some(frame) = framer.finish() {
                send(frame).await?;
            }
        }
    }
    Ok(())
}

/// A stream of what `rx` receives.
fn tokio_stream_of(
    mut rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// One series' samples as framed `ChunkedReadResponse`s, made as they
/// come: XOR chunks of up to 120 samples, as many per frame as fit in
/// about [`FRAME_BYTES`] (a long series spans several frames, each with
/// its labels, as Prometheus streams it).
struct Framer<'a> {
    labels: &'a [Label],
    query_index: i64,
    writer: super::xor::XorWriter,
    first: i64,
    last: i64,
    chunks: Vec<wire::Chunk>,
    bytes: usize,
}

impl<'a> Framer<'a> {
    fn new(labels: &'a [Label], query_index: i64) -> Framer<'a> {
        Framer { labels, query_index, writer: super::xor::XorWriter::new(), first: 0, last: 0, chunks: Vec::new(), bytes: 0 }
    }

    /// Adds a sample (times in order); a frame when one is full.
    fn push(&mut self, t: i64, bits: u64) -> Option<Vec<u8>> {
        if self.writer.is_empty() {
            self.first = t;
        }
        self.writer.append(t, bits);
        self.last = t;
        if self.writer.len() < super::xor::SAMPLES_PER_CHUNK {
            return None;
        }
        self.cut();
        (self.bytes >= FRAME_BYTES).then(|| self.frame())
    }

    fn cut(&mut self) {
        let data = std::mem::take(&mut self.writer).finish();
        self.bytes += data.len();
        self.chunks.push(wire::Chunk { min_time_ms: self.first, max_time_ms: self.last, r#type: wire::CHUNK_XOR, data });
    }

    fn frame(&mut self) -> Vec<u8> {
        self.bytes = 0;
        let series = ChunkedSeries { labels: self.labels.to_vec(), chunks: std::mem::take(&mut self.chunks) };
        super::xor::frame(&ChunkedReadResponse { chunked_series: vec![series], query_index: self.query_index }.encode_to_vec())
    }

    /// The last frame of the series, if it holds anything.
    fn finish(mut self) -> Option<Vec<u8>> {
        if !self.writer.is_empty() {
            self.cut();
        }
        (!self.chunks.is_empty()).then(|| self.frame())
    }
}

/// One series' samples as framed `ChunkedReadResponse`s (see [`Framer`]).
#[cfg(test)]
fn frames(labels: &[Label], samples: &[(i64, u64)], query_index: i64) -> Vec<Vec<u8>> {
    let mut framer = Framer::new(labels, query_index);
    let mut out: Vec<Vec<u8>> = samples.iter().filter_map(|(t, bits)| framer.push(*t, *bits)).collect();
    out.extend(framer.finish());
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
