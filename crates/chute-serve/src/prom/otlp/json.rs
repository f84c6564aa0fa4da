//! OTLP/JSON: the proto3 JSON mapping of the messages in `wire`, as the
//! OTLP specification gives it. Field names are lowerCamelCase (the
//! messages' serde names); a 64-bit integer is a decimal string or a
//! number; a double is a number or one of "NaN", "Infinity", "-Infinity";
//! an enum is its integer; `bytesValue` is base64; `null` is the field's
//! default; unknown fields are ignored, as the specification asks.

use super::wire::{ExportMetricsServiceRequest, ExportMetricsServiceResponse};

/// Reads an OTLP/JSON request body.
pub fn decode(body: &[u8]) -> Result<ExportMetricsServiceRequest, String> {
    serde_json::from_slice(body).map_err(|e| format!("the body is not an OTLP/JSON ExportMetricsServiceRequest: {e}"))
}

/// Writes an answer as OTLP/JSON (`{}` when everything was taken).
pub fn encode(r: &ExportMetricsServiceResponse) -> String {
    match &r.partial_success {
        None => "{}".to_owned(),
        Some(p) => serde_json::json!({
            "partialSuccess": {"rejectedDataPoints": p.rejected_data_points.to_string(), "errorMessage": p.error_message}
        })
        .to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_mapping_of_a_request() {
        let body = br#"{"resourceMetrics":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"api"}},
            {"key":"n","value":{"intValue":"7"}},{"key":"b","value":{"bytesValue":"aGk="}}]},
            "scopeMetrics":[{"scope":{"name":"x"},"metrics":[{"name":"m","unit":"s","unknownField":1,
            "sum":{"aggregationTemporality":2,"isMonotonic":true,"dataPoints":[{"timeUnixNano":"1700000000000000000","asInt":"42"},
              {"timeUnixNano":1700000000000000000,"asDouble":"NaN","flags":1}]}},
            {"name":"h","histogram":{"aggregationTemporality":2,"dataPoints":[{"timeUnixNano":"5","count":"3","sum":1.5,
              "bucketCounts":["1",2],"explicitBounds":[0.5]}]}}]}]}]}"#;
        let r = decode(body).unwrap();
        let res = &r.resource_metrics[0];
        let attrs = &res.resource.as_ref().unwrap().attributes;
        assert_eq!(attrs[1].value.as_ref().unwrap().int_value, Some(7));
        assert_eq!(attrs[2].value.as_ref().unwrap().bytes_value.as_deref(), Some(&b"hi"[..]));
        let m = &res.scope_metrics[0].metrics;
        let sum = m[0].sum.as_ref().unwrap();
        assert_eq!((sum.aggregation_temporality, sum.is_monotonic), (2, true));
        assert_eq!(sum.data_points[0].time_unix_nano, 1_700_000_000_000_000_000);
        assert_eq!(sum.data_points[0].as_int, Some(42));
        assert!(sum.data_points[1].as_double.unwrap().is_nan());
        let h = &m[1].histogram.as_ref().unwrap().data_points[0];
        assert_eq!((h.count, h.sum, h.bucket_counts.clone(), h.explicit_bounds.clone()), (3, Some(1.5), vec![1, 2], vec![0.5]));
        assert!(decode(br#"{"resourceMetrics":[{"scopeMetrics":[{"metrics":[{"gauge":{"dataPoints":[{"asInt":"x"}]}}]}]}]}"#).is_err());
        assert!(decode(b"{").is_err());
    }
}
