//! OTLP metrics on the wire: the messages of
//! `opentelemetry/proto/collector/metrics/v1/metrics_service.proto`,
//! `metrics/v1/metrics.proto`, `common/v1/common.proto` and
//! `resource/v1/resource.proto` that chute reads, written here as `prost`
//! messages (only the fields used; the others are skipped as unknown).
//!
//! Each message also derives serde's `Deserialize` for OTLP/JSON (the
//! proto3 JSON mapping: lowerCamelCase field names, 64-bit integers as
//! strings or numbers, enums as integers; see `json`). A `oneof` is written
//! as one `Option` per member: on the wire a oneof is its members' fields,
//! so this reads the same bytes (when a sender writes two members, the
//! last one read counts here as well as in protobuf's own decoders).

use serde::Deserialize;

use super::num as json;

/// `ExportMetricsServiceRequest`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExportMetricsServiceRequest {
    #[prost(message, repeated, tag = "1")]
    pub resource_metrics: Vec<ResourceMetrics>,
}

/// `ExportMetricsServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsServiceResponse {
    #[prost(message, optional, tag = "1")]
    pub partial_success: Option<ExportMetricsPartialSuccess>,
}

/// `ExportMetricsPartialSuccess`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ExportMetricsPartialSuccess {
    #[prost(int64, tag = "1")]
    pub rejected_data_points: i64,
    #[prost(string, tag = "2")]
    pub error_message: String,
}

/// `ResourceMetrics`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ResourceMetrics {
    #[prost(message, optional, tag = "1")]
    pub resource: Option<Resource>,
    #[prost(message, repeated, tag = "2")]
    pub scope_metrics: Vec<ScopeMetrics>,
}

/// `Resource`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Resource {
    #[prost(message, repeated, tag = "1")]
    pub attributes: Vec<KeyValue>,
}

/// `ScopeMetrics` (the scope itself is not read).
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ScopeMetrics {
    #[prost(message, repeated, tag = "2")]
    pub metrics: Vec<Metric>,
}

/// `Metric`: its data is one of gauge, sum, histogram, exponential
/// histogram and summary.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Metric {
    #[prost(string, tag = "1")]
    pub name: String,
    #[prost(string, tag = "2")]
    pub description: String,
    #[prost(string, tag = "3")]
    pub unit: String,
    #[prost(message, optional, tag = "5")]
    pub gauge: Option<Gauge>,
    #[prost(message, optional, tag = "7")]
    pub sum: Option<Sum>,
    #[prost(message, optional, tag = "9")]
    pub histogram: Option<Histogram>,
    #[prost(message, optional, tag = "10")]
    pub exponential_histogram: Option<ExponentialHistogram>,
    #[prost(message, optional, tag = "11")]
    pub summary: Option<Summary>,
}

/// `AggregationTemporality`: unspecified.
pub const UNSPECIFIED: i32 = 0;
/// `AggregationTemporality`: delta.
pub const DELTA: i32 = 1;
/// `AggregationTemporality`: cumulative.
pub const CUMULATIVE: i32 = 2;
/// `DataPointFlags.FLAG_NO_RECORDED_VALUE_MASK`.
pub const NO_RECORDED_VALUE: u32 = 1;

/// `Gauge`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Gauge {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
}

/// `Sum`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Sum {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<NumberDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
    #[prost(bool, tag = "3")]
    pub is_monotonic: bool,
}

/// `Histogram`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Histogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<HistogramDataPoint>,
    #[prost(int32, tag = "2")]
    pub aggregation_temporality: i32,
}

/// `ExponentialHistogram`: its points are counted and refused, not read.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ExponentialHistogram {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<Skipped>,
}

/// A message whose fields are not read.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
pub struct Skipped {}

/// `Summary`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Summary {
    #[prost(message, repeated, tag = "1")]
    pub data_points: Vec<SummaryDataPoint>,
}

/// `NumberDataPoint`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct NumberDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "3")]
    #[serde(deserialize_with = "json::u64")]
    pub time_unix_nano: u64,
    #[prost(double, optional, tag = "4")]
    #[serde(deserialize_with = "json::opt_f64")]
    pub as_double: Option<f64>,
    #[prost(sfixed64, optional, tag = "6")]
    #[serde(deserialize_with = "json::opt_i64")]
    pub as_int: Option<i64>,
    #[prost(uint32, tag = "8")]
    pub flags: u32,
}

/// `HistogramDataPoint`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HistogramDataPoint {
    #[prost(message, repeated, tag = "9")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "3")]
    #[serde(deserialize_with = "json::u64")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    #[serde(deserialize_with = "json::u64")]
    pub count: u64,
    #[prost(double, optional, tag = "5")]
    #[serde(deserialize_with = "json::opt_f64")]
    pub sum: Option<f64>,
    #[prost(fixed64, repeated, tag = "6")]
    #[serde(deserialize_with = "json::vec_u64")]
    pub bucket_counts: Vec<u64>,
    #[prost(double, repeated, tag = "7")]
    #[serde(deserialize_with = "json::vec_f64")]
    pub explicit_bounds: Vec<f64>,
    #[prost(uint32, tag = "10")]
    pub flags: u32,
}

/// `SummaryDataPoint`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct SummaryDataPoint {
    #[prost(message, repeated, tag = "7")]
    pub attributes: Vec<KeyValue>,
    #[prost(fixed64, tag = "3")]
    #[serde(deserialize_with = "json::u64")]
    pub time_unix_nano: u64,
    #[prost(fixed64, tag = "4")]
    #[serde(deserialize_with = "json::u64")]
    pub count: u64,
    #[prost(double, tag = "5")]
    #[serde(deserialize_with = "json::f64")]
    pub sum: f64,
    #[prost(message, repeated, tag = "6")]
    pub quantile_values: Vec<ValueAtQuantile>,
    #[prost(uint32, tag = "8")]
    pub flags: u32,
}

/// `SummaryDataPoint.ValueAtQuantile`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ValueAtQuantile {
    #[prost(double, tag = "1")]
    #[serde(deserialize_with = "json::f64")]
    pub quantile: f64,
    #[prost(double, tag = "2")]
    #[serde(deserialize_with = "json::f64")]
    pub value: f64,
}

/// `KeyValue`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValue {
    #[prost(string, tag = "1")]
    pub key: String,
    #[prost(message, optional, tag = "2")]
    pub value: Option<AnyValue>,
}

/// `AnyValue`: one of its fields.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct AnyValue {
    #[prost(string, optional, tag = "1")]
    pub string_value: Option<String>,
    #[prost(bool, optional, tag = "2")]
    pub bool_value: Option<bool>,
    #[prost(int64, optional, tag = "3")]
    #[serde(deserialize_with = "json::opt_i64")]
    pub int_value: Option<i64>,
    #[prost(double, optional, tag = "4")]
    #[serde(deserialize_with = "json::opt_f64")]
    pub double_value: Option<f64>,
    #[prost(message, optional, tag = "5")]
    pub array_value: Option<ArrayValue>,
    #[prost(message, optional, tag = "6")]
    pub kvlist_value: Option<KeyValueList>,
    /// Base64 in OTLP/JSON.
    #[prost(bytes = "vec", optional, tag = "7")]
    #[serde(deserialize_with = "json::opt_base64")]
    pub bytes_value: Option<Vec<u8>>,
}

/// `ArrayValue`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct ArrayValue {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<AnyValue>,
}

/// `KeyValueList`.
#[derive(Clone, PartialEq, prost::Message, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct KeyValueList {
    #[prost(message, repeated, tag = "1")]
    pub values: Vec<KeyValue>,
}
