//! What a body will take once decoded, known before it is: the decoded
//! messages of a small body can take tens of times its bytes (a data point
//! of 2 bytes on the wire is a struct of a hundred), so a request's memory
//! is reserved, and a request of too many data points refused, from this
//! estimate rather than after the decoder has allocated.
//!
//! A protobuf body is walked once without allocating ([`protobuf`]): each
//! message the decoder would make counts its struct's size, data points are
//! counted, and a body that is not well-formed protobuf is found here
//! first. A JSON body is bounded ([`json`]): every object (`{` outside a
//! string) is at most one message, every other byte at most a few.

use super::wire::{
    AnyValue, ArrayValue, ExponentialHistogram, Gauge, Histogram, HistogramDataPoint, KeyValue, KeyValueList, Metric, NumberDataPoint,
    Resource, ResourceMetrics, ScopeMetrics, Skipped, Sum, Summary, SummaryDataPoint, ValueAtQuantile,
};

/// The messages of the request, as far as the decoder makes them.
#[derive(Clone, Copy, PartialEq)]
enum M {
    Request,
    ResourceMetrics,
    Resource,
    ScopeMetrics,
    Metric,
    Numbers,
    Histogram,
    Exponential,
    Summary,
    NumberPoint,
    HistogramPoint,
    SummaryPoint,
    Quantile,
    KeyValue,
    AnyValue,
    Array,
    KeyValues,
    Skipped,
}

/// Protobuf's own limit of nesting (AnyValue in AnyValue).
const MAX_DEPTH: usize = 100;

impl M {
    fn child(self, field: u64) -> Option<M> {
        use M::*;
        Some(match (self, field) {
            (Request, 1) => ResourceMetrics,
            (ResourceMetrics, 1) => Resource,
            (ResourceMetrics, 2) => ScopeMetrics,
            (Resource, 1) => KeyValue,
            (ScopeMetrics, 2) => Metric,
            (Metric, 5 | 7) => Numbers,
            (Metric, 9) => Histogram,
            (Metric, 10) => Exponential,
            (Metric, 11) => Summary,
            (Numbers, 1) => NumberPoint,
            (Histogram, 1) => HistogramPoint,
            (Exponential, 1) => Skipped,
            (Summary, 1) => SummaryPoint,
            (NumberPoint, 7) | (HistogramPoint, 9) | (SummaryPoint, 7) | (KeyValues, 1) => KeyValue,
            (SummaryPoint, 6) => Quantile,
            (KeyValue, 2) | (Array, 1) => AnyValue,
            (AnyValue, 5) => Array,
            (AnyValue, 6) => KeyValues,
            _ => return None,
        })
    }

    fn size(self) -> usize {
        use std::mem::size_of;
        match self {
            M::Request => 0,
            M::ResourceMetrics => size_of::<ResourceMetrics>(),
            M::Resource => size_of::<Resource>(),
            M::ScopeMetrics => size_of::<ScopeMetrics>(),
            M::Metric => size_of::<Metric>(),
            M::Numbers => size_of::<Gauge>().max(size_of::<Sum>()),
            M::Histogram => size_of::<Histogram>(),
            M::Exponential => size_of::<ExponentialHistogram>(),
            M::Summary => size_of::<Summary>(),
            M::NumberPoint => size_of::<NumberDataPoint>(),
            M::HistogramPoint => size_of::<HistogramDataPoint>(),
            M::SummaryPoint => size_of::<SummaryDataPoint>(),
            M::Quantile => size_of::<ValueAtQuantile>(),
            M::KeyValue => size_of::<KeyValue>(),
            M::AnyValue => size_of::<AnyValue>(),
            M::Array => size_of::<ArrayValue>(),
            M::KeyValues => size_of::<KeyValueList>(),
            M::Skipped => size_of::<Skipped>(),
        }
    }

    fn point(self) -> bool {
        matches!(self, M::NumberPoint | M::HistogramPoint | M::SummaryPoint | M::Skipped)
    }
}

/// What decoding will make: bytes, and data points.
#[derive(Debug, Default, PartialEq)]
pub struct Estimate {
    pub bytes: usize,
    pub points: u64,
}

fn varint(b: &[u8], at: &mut usize) -> Result<u64, String> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or("the body ends inside a varint")?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(v);
        }
    }
    Err("a varint longer than 10 bytes".to_owned())
}

fn walk(b: &[u8], m: M, depth: usize, e: &mut Estimate) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("messages nested more than {MAX_DEPTH} deep"));
    }
    let mut at = 0;
    while at < b.len() {
        let key = varint(b, &mut at)?;
        let (field, wire) = (key >> 3, key & 7);
        let skip = match wire {
            0 => varint(b, &mut at).map(|_| 0)?,
            1 => 8,
            5 => 4,
            2 => {
                let len = usize::try_from(varint(b, &mut at)?).map_err(|_| "a length past the body")?;
                let end = at.checked_add(len).filter(|end| *end <= b.len()).ok_or("a field's length runs past the end of the body")?;
                if let Some(child) = m.child(field) {
                    e.bytes += child.size();
                    e.points += u64::from(child.point());
                    walk(&b[at..end], child, depth + 1, e)?;
                }
                len
            }
            w => return Err(format!("field {field} has wire type {w}, which OTLP does not use")),
        };
        at = at.checked_add(skip).filter(|end| *end <= b.len()).ok_or("the body ends inside a field")?;
    }
    Ok(())
}

/// Walks a protobuf `ExportMetricsServiceRequest`: what its decoding will
/// make (besides the strings and numbers, which are at most the body's
/// bytes), or why it is not protobuf.
pub fn protobuf(body: &[u8]) -> Result<Estimate, String> {
    let mut e = Estimate::default();
    walk(body, M::Request, 0, &mut e)?;
    e.bytes += body.len();
    Ok(e)
}

/// A bound of what decoding a JSON body will make: each object at most
/// the largest message, each other byte at most 8 (a number of one digit
/// and a comma becomes a u64). Data points are counted once decoded.
pub fn json(body: &[u8]) -> usize {
    let largest = [M::HistogramPoint, M::SummaryPoint, M::NumberPoint, M::Metric, M::KeyValue, M::AnyValue].map(M::size);
    let largest = largest.into_iter().max().unwrap_or(0);
    let (mut objects, mut in_string, mut escaped) = (0usize, false, false);
    for c in body {
        match (in_string, escaped, *c) {
            (true, true, _) => escaped = false,
            (true, false, b'\\') => escaped = true,
            (true, false, b'"') => in_string = false,
            (false, _, b'"') => in_string = true,
            (false, _, b'{') => objects += 1,
            _ => {}
        }
    }
    objects.saturating_mul(largest).saturating_add(body.len().saturating_mul(4))
}

#[cfg(test)]
mod tests {
    use super::super::wire::*;
    use super::*;
    use prost::Message;

    #[test]
    fn the_walk_counts_points_and_agrees_with_the_decoder() {
        let kv = KeyValue { key: "k".into(), value: Some(AnyValue { string_value: Some("v".into()), ..AnyValue::default() }) };
        let p = NumberDataPoint { attributes: vec![kv.clone(); 2], time_unix_nano: 5, as_double: Some(1.0), ..NumberDataPoint::default() };
        let r = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource { attributes: vec![kv] }),
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![
                        Metric { name: "g".into(), gauge: Some(Gauge { data_points: vec![p.clone(); 3] }), ..Metric::default() },
                        Metric {
                            name: "e".into(),
                            exponential_histogram: Some(ExponentialHistogram { data_points: vec![Skipped {}; 2] }),
                            ..Metric::default()
                        },
                        Metric {
                            name: "h".into(),
                            histogram: Some(Histogram {
                                data_points: vec![HistogramDataPoint { bucket_counts: vec![1, 2], ..HistogramDataPoint::default() }],
                                aggregation_temporality: 2,
                            }),
                            ..Metric::default()
                        },
                    ],
                }],
            }],
        };
        let body = r.encode_to_vec();
        let e = protobuf(&body).unwrap();
        assert_eq!(e.points, 6);
        assert_eq!(e.points, super::super::translate::points(&r));
        assert!(e.bytes > 3 * std::mem::size_of::<NumberDataPoint>() + 7 * std::mem::size_of::<KeyValue>());
        // A body the decoder refuses is refused here too.
        for cut in [1, 3, 10, body.len() - 1] {
            assert!(protobuf(&body[..cut]).is_err() && ExportMetricsServiceRequest::decode(&body[..cut]).is_err(), "cut at {cut}");
        }
        // Two bytes a point on the wire, a struct each decoded: the estimate sees it.
        let many = ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                scope_metrics: vec![ScopeMetrics {
                    metrics: vec![Metric {
                        gauge: Some(Gauge { data_points: vec![NumberDataPoint::default(); 1000] }),
                        ..Metric::default()
                    }],
                }],
                ..ResourceMetrics::default()
            }],
        };
        let body = many.encode_to_vec();
        let e = protobuf(&body).unwrap();
        assert_eq!(e.points, 1000);
        assert!(e.bytes >= 1000 * std::mem::size_of::<NumberDataPoint>() && body.len() < 2100);
    }

    #[test]
    fn json_objects_are_counted_outside_strings() {
        let one = json(br#"{"a":"{{\"{"}"#);
        let two = json(br#"{"a":{}}"#);
        assert!(two > one && one > 0);
        // A body like the SDKs' (a point with two attributes): about a dozen times its size, as the book says.
        let point = r#"{"attributes":[{"key":"region","value":{"stringValue":"eu"}},{"key":"code","value":{"intValue":"200"}}],"timeUnixNano":"1700000000000000000","asDouble":12.5},"#;
        let body = format!(
            r#"{{"resourceMetrics":[{{"scopeMetrics":[{{"metrics":[{{"name":"m","gauge":{{"dataPoints":[{}]}}}}]}}]}}]}}"#,
            point.repeat(1000)
        );
        let ratio = json(body.as_bytes()) as f64 / body.len() as f64;
        assert!((6.0..16.0).contains(&ratio), "{ratio}");
    }
}
