//! Prometheus's remote storage protocol on the wire: the messages of
//! `prompb/types.proto` and `prompb/remote.proto` (remote write 1.0 and
//! remote read), written here as `prost` messages, and a decoder of
//! `WriteRequest` that borrows from the body instead of copying it.
//!
//! Remote write is the hot path: a request of 2,000 samples carries about
//! 2,000 label sets, and decoding each into owned strings (what `prost`
//! makes) cost more than everything else a sample goes through. So a
//! request is walked in place ([`decode_write`]): each time series is handed
//! to the caller as label slices of the body and its samples, checked
//! against the protocol (wire types, lengths, UTF-8) as strictly as
//! `prost` would; the tests hold the two decoders to the same answers.
//! Everything else (read requests and answers, and the clients in the
//! tests and benchmarks) uses the `prost` messages.

/// `prometheus.Label`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Message)]
pub struct Label {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `prometheus.Sample`: a value and its time in milliseconds since the epoch.
///
/// The value is always written (`required`): proto3 leaves out a field
/// equal to its default, and `prost` tests that with `!=`, so -0.0 (equal
/// to 0.0) would be left out and read back as +0.0.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Sample {
    #[prost(double, required, tag = "1")]
    pub value: f64,
    #[prost(int64, tag = "2")]
    pub timestamp: i64,
}

/// `prometheus.Exemplar` (not stored: counted and dropped).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Exemplar {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(double, tag = "2")]
    pub value: f64,
    #[prost(int64, tag = "3")]
    pub timestamp: i64,
}

/// `prometheus.TimeSeries`. Native histograms (field 4) are not modelled:
/// a request's histograms are counted and dropped (see `decode_write`).
#[derive(Clone, PartialEq, prost::Message)]
pub struct TimeSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub samples: Vec<Sample>,
    #[prost(message, repeated, tag = "3")]
    pub exemplars: Vec<Exemplar>,
}

/// `prometheus.MetricMetadata`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MetricMetadata {
    /// `MetricType`: 0 unknown, 1 counter, 2 gauge, 3 histogram,
    /// 4 gaugehistogram, 5 summary, 6 info, 7 stateset.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub metric_family_name: String,
    #[prost(string, tag = "4")]
    pub help: String,
    #[prost(string, tag = "5")]
    pub unit: String,
}

/// The name Prometheus gives metric type `t` (`MetricMetadata.type`).
pub fn metric_type_name(t: i32) -> &'static str {
    match t {
        1 => "counter",
        2 => "gauge",
        3 => "histogram",
        4 => "gaugehistogram",
        5 => "summary",
        6 => "info",
        7 => "stateset",
        _ => "unknown",
    }
}

/// `prometheus.WriteRequest` (remote write 1.0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct WriteRequest {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
    #[prost(message, repeated, tag = "3")]
    pub metadata: Vec<MetricMetadata>,
}

/// `prometheus.LabelMatcher`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelMatcher {
    /// 0 `=`, 1 `!=`, 2 `=~`, 3 `!~`.
    #[prost(int32, tag = "1")]
    pub r#type: i32,
    #[prost(string, tag = "2")]
    pub name: String,
    #[prost(string, tag = "3")]
    pub value: String,
}

/// `prometheus.ReadHints`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadHints {
    #[prost(int64, tag = "1")]
    pub step_ms: i64,
    #[prost(string, tag = "2")]
    pub func: String,
    #[prost(int64, tag = "3")]
    pub start_ms: i64,
    #[prost(int64, tag = "4")]
    pub end_ms: i64,
    #[prost(string, repeated, tag = "5")]
    pub grouping: Vec<String>,
    #[prost(bool, tag = "6")]
    pub by: bool,
    #[prost(int64, tag = "7")]
    pub range_ms: i64,
}

/// `prometheus.Query`: matchers and an inclusive time range in milliseconds.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Query {
    #[prost(int64, tag = "1")]
    pub start_timestamp_ms: i64,
    #[prost(int64, tag = "2")]
    pub end_timestamp_ms: i64,
    #[prost(message, repeated, tag = "3")]
    pub matchers: Vec<LabelMatcher>,
    #[prost(message, optional, tag = "4")]
    pub hints: Option<ReadHints>,
}

/// `ReadRequest.ResponseType`: one `ReadResponse` of samples.
pub const SAMPLES: i32 = 0;
/// `ReadRequest.ResponseType`: framed `ChunkedReadResponse`s of XOR chunks.
pub const STREAMED_XOR_CHUNKS: i32 = 1;

/// `prometheus.ReadRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    #[prost(message, repeated, tag = "1")]
    pub queries: Vec<Query>,
    #[prost(int32, repeated, tag = "2")]
    pub accepted_response_types: Vec<i32>,
}

/// `prometheus.QueryResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryResult {
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}

/// `prometheus.ReadResponse`: one result per query, in the request's order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadResponse {
    #[prost(message, repeated, tag = "1")]
    pub results: Vec<QueryResult>,
}

/// `Chunk.Encoding`: Gorilla XOR.
pub const CHUNK_XOR: i32 = 1;

/// `prometheus.Chunk`: an encoded chunk covering `[min_time_ms, max_time_ms]`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Chunk {
    #[prost(int64, tag = "1")]
    pub min_time_ms: i64,
    #[prost(int64, tag = "2")]
    pub max_time_ms: i64,
    #[prost(int32, tag = "3")]
    pub r#type: i32,
    #[prost(bytes = "vec", tag = "4")]
    pub data: Vec<u8>,
}

/// `prometheus.ChunkedSeries`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedSeries {
    #[prost(message, repeated, tag = "1")]
    pub labels: Vec<Label>,
    #[prost(message, repeated, tag = "2")]
    pub chunks: Vec<Chunk>,
}

/// `prometheus.ChunkedReadResponse`: one frame of a streamed answer.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ChunkedReadResponse {
    #[prost(message, repeated, tag = "1")]
    pub chunked_series: Vec<ChunkedSeries>,
    #[prost(int64, tag = "2")]
    pub query_index: i64,
}

/// What is wrong with a body that is not a `WriteRequest`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct WireError(pub String);

/// One time series of a request, borrowed from the body.
#[derive(Debug, Default)]
pub struct SeriesRef<'a> {
    /// Labels in the order the request has them.
    pub labels: Vec<(&'a str, &'a str)>,
    /// (time in ms, value's bits): the bits as sent, so that Prometheus's
    /// staleness marker (one NaN among many) stays itself.
    pub samples: Vec<(i64, u64)>,
}

/// What `decode_write` found besides series.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct WriteCounts {
    pub series: u64,
    pub samples: u64,
    /// Exemplars and native histogram samples: not stored.
    pub exemplars: u64,
    pub histograms: u64,
}

/// A cursor over protobuf fields.
struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

/// A field's value, by wire type.
enum Value<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, WireError> {
        let mut v = 0u64;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.at) else { return Err(truncated()) };
            self.at += 1;
            if i == 9 && b > 1 {
                return Err(WireError("a varint is longer than 64 bits".into()));
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(WireError("a varint is longer than 10 bytes".into()))
    }

    /// The next field (number and value), `None` at the end.
    fn next(&mut self) -> Result<Option<(u32, Value<'a>)>, WireError> {
        if self.at == self.buf.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let (number, wire) = ((key >> 3) as u32, key & 7);
        if number == 0 || key >> 3 > u64::from(u32::MAX >> 3) {
            return Err(WireError(format!("field number {} is out of range", key >> 3)));
        }
        let value = match wire {
            0 => Value::Varint(self.varint()?),
            1 => {
                let b = self.buf.get(self.at..self.at + 8).ok_or_else(truncated)?;
                self.at += 8;
                Value::Fixed64(u64::from_le_bytes(b.try_into().expect("8 bytes")))
            }
            2 => {
                let len = usize::try_from(self.varint()?).map_err(|_| truncated())?;
                let end = self.at.checked_add(len).filter(|e| *e <= self.buf.len()).ok_or_else(truncated)?;
                let b = &self.buf[self.at..end];
                self.at = end;
                Value::Bytes(b)
            }
            5 => {
                self.buf.get(self.at..self.at + 4).ok_or_else(truncated)?;
                self.at += 4;
                Value::Fixed32
            }
            other => return Err(WireError(format!("field {number} has wire type {other}, which protobuf 3 does not use"))),
        };
        Ok(Some((number, value)))
    }
}

fn truncated() -> WireError {
    WireError("the message is truncated (a field runs past its end)".into())
}

fn wrong_type(message: &str, field: &str) -> WireError {
    WireError(format!("{message}.{field} has the wrong wire type"))
}

fn text<'a>(b: &'a [u8], what: &str) -> Result<&'a str, WireError> {
    std::str::from_utf8(b).map_err(|_| WireError(format!("{what} is not UTF-8")))
}

/// Walks a `WriteRequest`: `series` is called with each time series (its
/// labels and samples as sent; `scratch` is reused between calls), `meta`
/// with each metadata entry. Exemplars and histograms are skipped and
/// counted; unknown fields are skipped, as protobuf wants.
pub fn decode_write<'a>(
    body: &'a [u8],
    scratch: &mut SeriesRef<'a>,
    mut series: impl FnMut(&SeriesRef<'a>) -> Result<(), WireError>,
    mut meta: impl FnMut(MetricMetadata),
) -> Result<WriteCounts, WireError> {
    let mut counts = WriteCounts::default();
    let mut f = Fields::new(body);
    while let Some((number, value)) = f.next()? {
        match (number, value) {
            (1, Value::Bytes(b)) => {
                scratch.labels.clear();
                scratch.samples.clear();
                time_series(b, scratch, &mut counts)?;
                counts.series += 1;
                counts.samples += scratch.samples.len() as u64;
                series(scratch)?;
            }
            (1, _) => return Err(wrong_type("WriteRequest", "timeseries")),
            (3, Value::Bytes(b)) => meta(<MetricMetadata as prost::Message>::decode(b).map_err(|e| WireError(format!("metadata: {e}")))?),
            (3, _) => return Err(wrong_type("WriteRequest", "metadata")),
            _ => {}
        }
    }
    Ok(counts)
}

fn time_series<'a>(b: &'a [u8], out: &mut SeriesRef<'a>, counts: &mut WriteCounts) -> Result<(), WireError> {
    let mut f = Fields::new(b);
    while let Some((number, value)) = f.next()? {
        match (number, value) {
            (1, Value::Bytes(b)) => out.labels.push(label(b)?),
            (2, Value::Bytes(b)) => out.samples.push(sample(b)?),
            (3, Value::Bytes(_)) => counts.exemplars += 1,
            (4, Value::Bytes(_)) => counts.histograms += 1,
            (1..=4, _) => return Err(wrong_type("TimeSeries", ["labels", "samples", "exemplars", "histograms"][number as usize - 1])),
            _ => {}
        }
    }
    Ok(())
}

fn label(b: &[u8]) -> Result<(&str, &str), WireError> {
    let (mut name, mut value) = ("", "");
    let mut f = Fields::new(b);
    while let Some((number, v)) = f.next()? {
        match (number, v) {
            (1, Value::Bytes(b)) => name = text(b, "a label name")?,
            (2, Value::Bytes(b)) => value = text(b, "a label value")?,
            (1 | 2, _) => return Err(wrong_type("Label", if number == 1 { "name" } else { "value" })),
            _ => {}
        }
    }
    Ok((name, value))
}

fn sample(b: &[u8]) -> Result<(i64, u64), WireError> {
    let (mut t, mut v) = (0i64, 0u64);
    let mut f = Fields::new(b);
    while let Some((number, value)) = f.next()? {
        match (number, value) {
            (1, Value::Fixed64(bits)) => v = bits,
            (2, Value::Varint(n)) => t = n as i64,
            (1 | 2, _) => return Err(wrong_type("Sample", if number == 1 { "value" } else { "timestamp" })),
            _ => {}
        }
    }
    Ok((t, v))
}

/// Prometheus's staleness marker: the NaN it writes when a series ends.
pub const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    /// A series as decoded: its labels and (time, value bits) samples.
    type Decoded = (Vec<(String, String)>, Vec<(i64, u64)>);

    fn decode_all(body: &[u8]) -> Result<(Vec<Decoded>, Vec<MetricMetadata>, WriteCounts), WireError> {
        let mut got = Vec::new();
        let mut meta = Vec::new();
        let mut scratch = SeriesRef::default();
        let counts = decode_write(
            body,
            &mut scratch,
            |s| {
                got.push((s.labels.iter().map(|(n, v)| (n.to_string(), v.to_string())).collect(), s.samples.clone()));
                Ok(())
            },
            |m| meta.push(m),
        )?;
        Ok((got, meta, counts))
    }

    fn request() -> WriteRequest {
        let l = |n: &str, v: &str| Label { name: n.into(), value: v.into() };
        WriteRequest {
            timeseries: vec![
                TimeSeries {
                    labels: vec![l("__name__", "up"), l("job", "prometheus"), l("instance", "localhost:9090")],
                    samples: vec![
                        Sample { value: 1.0, timestamp: 1_700_000_000_000 },
                        Sample { value: f64::from_bits(STALE_NAN), timestamp: 1_700_000_001_000 },
                    ],
                    exemplars: vec![Exemplar { labels: vec![l("trace_id", "abc")], value: 2.0, timestamp: 5 }],
                },
                TimeSeries {
                    labels: vec![l("__name__", "ünïcode"), l("a", "")],
                    samples: vec![Sample { value: -0.5, timestamp: -3 }],
                    exemplars: vec![],
                },
            ],
            metadata: vec![MetricMetadata { r#type: 1, metric_family_name: "up".into(), help: "h".into(), unit: String::new() }],
        }
    }

    #[test]
    fn the_borrowing_decoder_reads_what_prost_wrote() {
        let req = request();
        let (series, meta, counts) = decode_all(&req.encode_to_vec()).unwrap();
        assert_eq!(counts, WriteCounts { series: 2, samples: 3, exemplars: 1, histograms: 0 });
        assert_eq!(meta, req.metadata);
        for (want, (labels, samples)) in req.timeseries.iter().zip(&series) {
            let want_labels: Vec<(String, String)> = want.labels.iter().map(|l| (l.name.clone(), l.value.clone())).collect();
            assert_eq!(&want_labels, labels);
            let want_samples: Vec<(i64, u64)> = want.samples.iter().map(|s| (s.timestamp, s.value.to_bits())).collect();
            assert_eq!(&want_samples, samples, "the staleness marker keeps its bits");
        }
    }

    #[test]
    fn every_cut_of_a_request_is_refused_as_prost_refuses_it() {
        let body = request().encode_to_vec();
        for end in 0..body.len() {
            let ours = decode_all(&body[..end]);
            let theirs = WriteRequest::decode(&body[..end]);
            assert_eq!(ours.is_ok(), theirs.is_ok(), "cut at {end}: ours {:?}, prost {:?}", ours.as_ref().err(), theirs.as_ref().err());
        }
    }

    #[test]
    fn bytes_that_are_no_protobuf_are_refused() {
        assert!(decode_all(b"\x0b\x00").is_err(), "wire type 3 (groups)");
        assert!(decode_all(&[0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]).is_err(), "a length past the end");
        assert!(decode_all(b"\x08\x01").is_err(), "timeseries as a varint");
        let not_utf8 = WriteRequest { timeseries: vec![], metadata: vec![] };
        let mut body = not_utf8.encode_to_vec();
        // One series with one label whose name is the byte 0xff.
        body.extend_from_slice(&[0x0a, 0x05, 0x0a, 0x03, 0x0a, 0x01, 0xff]);
        assert!(decode_all(&body).unwrap_err().0.contains("UTF-8"));
        assert!(WriteRequest::decode(&body[..]).is_err());
    }
}
