//! OTLP metrics as Prometheus samples, the way Prometheus's own OTLP
//! receiver translates them (`otlptranslator`, its default
//! `UnderscoreEscapingWithSuffixes`): pure, no I/O.
//!
//! - The metric name: split at each character other than
//!   `[a-zA-Z0-9:]`, the unit's suffix added (`s` -> `seconds`, `By` ->
//!   `bytes`, `m/s` -> `meters_per_second`, `{requests}` -> nothing), then
//!   `_total` for a monotonic cumulative sum (a counter) and `_ratio` for a
//!   gauge of unit `1`; joined by `_`, `_` before a leading digit.
//! - Labels: each attribute of the point, its name's characters other
//!   than `[a-zA-Z0-9_]` made `_` (`key_` before a leading digit; two
//!   attributes that become one name have their values joined by `;`);
//!   `job` from the resource's `service.namespace/service.name`,
//!   `instance` from `service.instance.id`.
//! - One `target_info` series a resource (value 1, at its latest point's
//!   time) with its other attributes, when it has any.
//! - A gauge or sum point is one sample; a histogram's `_bucket{le}`
//!   (cumulative, `+Inf` last), `_count` and `_sum`; a summary's
//!   `{quantile}` series, `_count` and `_sum`. A point flagged "no recorded
//!   value" is Prometheus's stale marker.
//! - Refused (counted in the answer's `partial_success`, named in its
//!   message): delta or unspecified temporality (Prometheus refuses them
//!   too unless told otherwise), exponential histograms (native
//!   histograms, which the samples table cannot hold), a metric whose name
//!   normalises to nothing, a point with no value.

use std::collections::BTreeMap;

use super::wire::{self, AnyValue, ExportMetricsServiceRequest, KeyValue, Metric};

/// The most data points one request may carry.
pub const MAX_POINTS: u64 = 1_000_000;

/// Prometheus's stale marker.
const STALE: u64 = crate::prom::wire::STALE_NAN;

/// One series and its samples: (time in ms, the value's bits).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub samples: Vec<(i64, u64)>,
}

/// What a request becomes.
#[derive(Debug, Default)]
pub struct Translated {
    pub series: Vec<Series>,
    /// Data points in the request.
    pub points: u64,
    /// Data points refused, and why (one line a metric).
    pub rejected: u64,
    pub reasons: Vec<String>,
}

impl Translated {
    fn refuse(&mut self, metric: &Metric, n: usize, why: &str) {
        if n > 0 {
            self.rejected += n as u64;
            self.reasons.push(format!("metric {:?}: {n} data points {why}", metric.name));
        }
    }
}

/// The data points of a request (to refuse one over [`MAX_POINTS`] first).
pub fn points(r: &ExportMetricsServiceRequest) -> u64 {
    let metrics = r.resource_metrics.iter().flat_map(|rm| &rm.scope_metrics).flat_map(|sm| &sm.metrics);
    metrics.map(|m| points_of(m) as u64).sum()
}

fn points_of(m: &Metric) -> usize {
    m.gauge.as_ref().map_or(0, |g| g.data_points.len())
        + m.sum.as_ref().map_or(0, |s| s.data_points.len())
        + m.histogram.as_ref().map_or(0, |h| h.data_points.len())
        + m.exponential_histogram.as_ref().map_or(0, |h| h.data_points.len())
        + m.summary.as_ref().map_or(0, |s| s.data_points.len())
}

/// Translates a request.
pub fn translate(r: &ExportMetricsServiceRequest) -> Translated {
    let mut out = Translated { points: points(r), ..Translated::default() };
    for rm in &r.resource_metrics {
        let attrs = rm.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        let ids = identity(attrs);
        let before = out.series.len();
        for m in rm.scope_metrics.iter().flat_map(|sm| &sm.metrics) {
            metric(m, &ids, &mut out);
        }
        let latest = out.series[before..].iter().flat_map(|s| s.samples.iter().map(|(t, _)| *t)).max();
        let info: Vec<&KeyValue> =
            attrs.iter().filter(|kv| !matches!(kv.key.as_str(), "service.name" | "service.namespace" | "service.instance.id")).collect();
        if let (Some(t), false) = (latest, info.is_empty()) {
            let mut labels = sanitize(info.into_iter());
            labels.extend(ids.iter().map(|(k, v)| (k.clone(), v.clone())));
            labels.insert("__name__".to_owned(), "target_info".to_owned());
            out.series.push(Series { labels: labels.into_iter().collect(), samples: vec![(t, 1f64.to_bits())] });
        }
    }
    out
}

/// The first NUL byte in a metric's name, description or unit or in an
/// attribute's key or text value, said; PostgreSQL's text cannot hold one.
pub fn nul(r: &ExportMetricsServiceRequest) -> Option<String> {
    fn in_attrs(attrs: &[KeyValue]) -> Option<&str> {
        attrs
            .iter()
            .find(|kv| kv.key.contains('\0') || kv.value.as_ref().and_then(|v| v.string_value.as_ref()).is_some_and(|v| v.contains('\0')))
            .map(|kv| kv.key.as_str())
    }
    let said = |what: &str, at: &str| Some(format!("{what} {at:?} holds a NUL byte, which PostgreSQL text cannot: remove it"));
    for rm in &r.resource_metrics {
        if let Some(k) = rm.resource.as_ref().and_then(|r| in_attrs(&r.attributes)) {
            return said("resource attribute", k);
        }
        for m in rm.scope_metrics.iter().flat_map(|sm| &sm.metrics) {
            if m.name.contains('\0') || m.description.contains('\0') || m.unit.contains('\0') {
                return said("metric (its name, description or unit)", &m.name);
            }
            let attrs = m
                .gauge
                .iter()
                .flat_map(|g| &g.data_points)
                .map(|p| &p.attributes[..])
                .chain(m.sum.iter().flat_map(|g| &g.data_points).map(|p| &p.attributes[..]))
                .chain(m.histogram.iter().flat_map(|g| &g.data_points).map(|p| &p.attributes[..]))
                .chain(m.summary.iter().flat_map(|g| &g.data_points).map(|p| &p.attributes[..]));
            for a in attrs {
                if let Some(k) = in_attrs(a) {
                    return said(&format!("an attribute of metric {:?}:", m.name), k);
                }
            }
        }
    }
    None
}

/// The Prometheus type (`MetricMetadata.type`) and family name of a
/// metric that is stored; `None` for one that is refused.
pub fn family(m: &Metric) -> Option<(i32, String)> {
    let (t, kind) = match (&m.gauge, &m.sum, &m.histogram, &m.summary) {
        (Some(_), ..) => (2, Kind::Gauge),
        (None, Some(s), ..) if s.aggregation_temporality == wire::CUMULATIVE => {
            (if s.is_monotonic { 1 } else { 2 }, if s.is_monotonic { Kind::Counter } else { Kind::Other })
        }
        (None, None, Some(h), _) if h.aggregation_temporality == wire::CUMULATIVE => (3, Kind::Other),
        (None, None, None, Some(_)) => (5, Kind::Other),
        _ => return None,
    };
    Some((t, metric_name(&m.name, &m.unit, kind))).filter(|(_, n)| !n.is_empty() && !n.bytes().all(|b| b == b'_'))
}

/// `job` and `instance` of a resource.
fn identity(attrs: &[KeyValue]) -> BTreeMap<String, String> {
    let get = |k: &str| attrs.iter().find(|kv| kv.key == k).map(|kv| value(kv.value.as_ref())).filter(|v| !v.is_empty());
    let mut ids = BTreeMap::new();
    if let Some(name) = get("service.name") {
        let job = match get("service.namespace") {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        };
        ids.insert("job".to_owned(), job);
    }
    if let Some(i) = get("service.instance.id") {
        ids.insert("instance".to_owned(), i);
    }
    ids
}

/// What a metric's points are, for its name's suffixes.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Gauge,
    Counter,
    Other,
}

fn metric(m: &Metric, ids: &BTreeMap<String, String>, out: &mut Translated) {
    let cumulative = |t: i32| t == wire::CUMULATIVE;
    let kind = match (&m.gauge, &m.sum) {
        (Some(_), _) => Kind::Gauge,
        (None, Some(s)) if s.is_monotonic => Kind::Counter,
        _ => Kind::Other,
    };
    let name = metric_name(&m.name, &m.unit, kind);
    if name.is_empty() || name.bytes().all(|b| b == b'_') {
        out.refuse(m, points_of(m), "refused: the metric's name normalises to no valid Prometheus name");
        return;
    }
    let point = |attrs: &[KeyValue], extra: Option<(&str, String)>, suffix: &str| {
        let mut labels = sanitize(attrs.iter());
        labels.extend(ids.iter().map(|(k, v)| (k.clone(), v.clone())));
        if let Some((k, v)) = extra {
            labels.insert(k.to_owned(), v);
        }
        labels.insert("__name__".to_owned(), format!("{name}{suffix}"));
        labels.into_iter().collect::<Vec<_>>()
    };
    let ms = |ns: u64| (ns / 1_000_000) as i64;
    let bits = |v: f64, flags: u32| if flags & wire::NO_RECORDED_VALUE != 0 { STALE } else { v.to_bits() };
    let mut one = |labels, t, v| out.series.push(Series { labels, samples: vec![(t, v)] });
    let numbers = match (&m.gauge, &m.sum) {
        (Some(g), _) => Some(&g.data_points),
        (None, Some(s)) if cumulative(s.aggregation_temporality) => Some(&s.data_points),
        _ => None,
    };
    let mut no_value = 0;
    for p in numbers.into_iter().flatten() {
        let Some(v) = p.as_double.or(p.as_int.map(|i| i as f64)).or((p.flags & wire::NO_RECORDED_VALUE != 0).then_some(0.0)) else {
            no_value += 1;
            continue;
        };
        one(point(&p.attributes, None, ""), ms(p.time_unix_nano), bits(v, p.flags));
    }
    if let Some(h) = m.histogram.as_ref().filter(|h| cumulative(h.aggregation_temporality)) {
        for p in &h.data_points {
            let t = ms(p.time_unix_nano);
            let mut cum = 0u64;
            for (i, bound) in p.explicit_bounds.iter().enumerate() {
                cum = cum.saturating_add(p.bucket_counts.get(i).copied().unwrap_or(0));
                one(point(&p.attributes, Some(("le", float(*bound))), "_bucket"), t, bits(cum as f64, p.flags));
            }
            one(point(&p.attributes, Some(("le", "+Inf".to_owned())), "_bucket"), t, bits(p.count as f64, p.flags));
            one(point(&p.attributes, None, "_count"), t, bits(p.count as f64, p.flags));
            if let Some(sum) = p.sum {
                one(point(&p.attributes, None, "_sum"), t, bits(sum, p.flags));
            }
        }
    }
    if let Some(s) = &m.summary {
        for p in &s.data_points {
            let t = ms(p.time_unix_nano);
            for q in &p.quantile_values {
                one(point(&p.attributes, Some(("quantile", float(q.quantile))), ""), t, bits(q.value, p.flags));
            }
            one(point(&p.attributes, None, "_count"), t, bits(p.count as f64, p.flags));
            one(point(&p.attributes, None, "_sum"), t, bits(p.sum, p.flags));
        }
    }
    out.refuse(m, no_value, "refused: a number data point with no value");
    refuse_temporality(m, out);
}

fn refuse_temporality(m: &Metric, out: &mut Translated) {
    let temporality = |t: i32| match t {
        wire::DELTA => "delta",
        wire::UNSPECIFIED => "unspecified",
        _ => "unknown",
    };
    if let Some(s) = m.sum.as_ref().filter(|s| m.gauge.is_none() && s.aggregation_temporality != wire::CUMULATIVE) {
        let why = format!(
            "refused: a sum of {} temporality (only cumulative is stored, as Prometheus does; set the exporter's temporality preference to cumulative)",
            temporality(s.aggregation_temporality)
        );
        out.refuse(m, s.data_points.len(), &why);
    }
    if let Some(h) = m.histogram.as_ref().filter(|h| h.aggregation_temporality != wire::CUMULATIVE) {
        let why = format!(
            "refused: a histogram of {} temporality (only cumulative is stored, as Prometheus does; set the exporter's temporality preference to cumulative)",
            temporality(h.aggregation_temporality)
        );
        out.refuse(m, h.data_points.len(), &why);
    }
    if let Some(h) = &m.exponential_histogram {
        out.refuse(
            m,
            h.data_points.len(),
            "refused: an exponential histogram (a native histogram, which the samples table cannot hold): use explicit buckets",
        );
    }
}

/// A float as Go's `strconv.FormatFloat(f, 'f', -1, 64)` writes it, `+Inf` and `-Inf` as Prometheus does.
fn float(f: f64) -> String {
    match f {
        f64::INFINITY => "+Inf".to_owned(),
        f64::NEG_INFINITY => "-Inf".to_owned(),
        f => format!("{f}"),
    }
}

/// Attributes as labels: names sanitised, the values of names made equal joined by `;` (in key order).
fn sanitize<'a>(attrs: impl Iterator<Item = &'a KeyValue>) -> BTreeMap<String, String> {
    let mut sorted: Vec<&KeyValue> = attrs.collect();
    sorted.sort_by(|a, b| a.key.cmp(&b.key));
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for kv in sorted {
        let name = label_name(&kv.key);
        let v = value(kv.value.as_ref());
        match out.get_mut(&name) {
            Some(old) => {
                old.push(';');
                old.push_str(&v);
            }
            None => {
                out.insert(name, v);
            }
        }
    }
    out
}

/// A label name as Prometheus's `LabelNamer` makes it (an empty one stays
/// empty, and the label checks refuse it).
pub fn label_name(key: &str) -> String {
    let ok = |c: char| c.is_ascii_alphanumeric() || c == '_';
    if key.chars().all(ok) && !key.starts_with(|c: char| c.is_ascii_digit()) {
        return key.to_owned();
    }
    let s: String = key.chars().map(|c| if ok(c) { c } else { '_' }).collect();
    if s.starts_with(|c: char| c.is_ascii_digit()) { format!("key_{s}") } else { s }
}

/// An attribute's value as text, as OpenTelemetry's `AsString` writes it.
fn value(v: Option<&AnyValue>) -> String {
    let Some(v) = v else { return String::new() };
    if let Some(s) = &v.string_value {
        s.clone()
    } else if let Some(b) = v.bool_value {
        b.to_string()
    } else if let Some(i) = v.int_value {
        i.to_string()
    } else if let Some(f) = v.double_value {
        format!("{f}")
    } else if let Some(b) = &v.bytes_value {
        base64(b)
    } else if v.array_value.is_some() || v.kvlist_value.is_some() {
        to_json(v).to_string()
    } else {
        String::new()
    }
}

fn to_json(v: &AnyValue) -> serde_json::Value {
    use serde_json::Value;
    if let Some(a) = &v.array_value {
        Value::Array(a.values.iter().map(to_json).collect())
    } else if let Some(kv) = &v.kvlist_value {
        Value::Object(kv.values.iter().map(|kv| (kv.key.clone(), kv.value.as_ref().map_or(Value::Null, to_json))).collect())
    } else if let Some(s) = &v.string_value {
        s.clone().into()
    } else if let Some(b) = v.bool_value {
        b.into()
    } else if let Some(i) = v.int_value {
        i.into()
    } else if let Some(f) = v.double_value {
        f.into()
    } else if let Some(b) = &v.bytes_value {
        base64(b).into()
    } else {
        Value::Null
    }
}

fn base64(b: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(b.len().div_ceil(3) * 4);
    for c in b.chunks(3) {
        let n = (u32::from(c[0]) << 16) | (u32::from(*c.get(1).unwrap_or(&0)) << 8) | u32::from(*c.get(2).unwrap_or(&0));
        for i in 0..4 {
            out.push(if i <= c.len() { A[(n >> (18 - 6 * i) & 63) as usize] as char } else { '=' });
        }
    }
    out
}

const UNITS: &[(&str, &str)] = &[
    ("d", "days"),
    ("h", "hours"),
    ("min", "minutes"),
    ("s", "seconds"),
    ("ms", "milliseconds"),
    ("us", "microseconds"),
    ("ns", "nanoseconds"),
    ("By", "bytes"),
    ("KiBy", "kibibytes"),
    ("MiBy", "mebibytes"),
    ("GiBy", "gibibytes"),
    ("TiBy", "tibibytes"),
    ("KBy", "kilobytes"),
    ("MBy", "megabytes"),
    ("GBy", "gigabytes"),
    ("TBy", "terabytes"),
    ("m", "meters"),
    ("V", "volts"),
    ("A", "amperes"),
    ("J", "joules"),
    ("W", "watts"),
    ("g", "grams"),
    ("Cel", "celsius"),
    ("Hz", "hertz"),
    ("1", ""),
    ("%", "percent"),
];

const PER_UNITS: &[(&str, &str)] =
    &[("s", "second"), ("m", "minute"), ("h", "hour"), ("d", "day"), ("w", "week"), ("mo", "month"), ("y", "year")];

fn lookup(table: &[(&str, &'static str)], unit: &str) -> String {
    table.iter().find(|(k, _)| *k == unit).map_or_else(|| unit.to_owned(), |(_, v)| (*v).to_owned())
}

fn metric_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == ':'
}

/// `cleanUpUnit`: other characters `_`, runs of `_` one, no leading `_`.
fn clean_unit(unit: &str) -> String {
    let mut out = String::with_capacity(unit.len());
    for c in unit.chars().map(|c| if metric_char(c) { c } else { '_' }) {
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    out.trim_start_matches('_').to_owned()
}

/// The unit's suffixes: main (`seconds`) and per (`per_second`).
fn unit_suffixes(unit: &str) -> (String, String) {
    let mut parts = unit.splitn(2, '/');
    let main = parts.next().unwrap_or("").trim();
    let main = if main.is_empty() || main.contains(['{', '}']) { String::new() } else { lookup(UNITS, main) };
    let per = match parts.next().map(str::trim) {
        Some(p) if !p.is_empty() && !p.contains(['{', '}']) => format!("per_{}", lookup(PER_UNITS, p)),
        _ => String::new(),
    };
    (main, per)
}

/// A metric's Prometheus name (Prometheus's `normalizeName`).
fn metric_name(name: &str, unit: &str, kind: Kind) -> String {
    let mut tokens: Vec<String> = name.split(|c: char| !metric_char(c)).filter(|t| !t.is_empty()).map(str::to_owned).collect();
    let (main, per) = unit_suffixes(unit);
    let (mut main, per) = (clean_unit(&main), clean_unit(&per));
    let per = if per == "per_" { String::new() } else { per.trim_end_matches('_').to_owned() };
    let per = if tokens.contains(&per) { String::new() } else { per };
    if tokens.contains(&main) {
        main.clear();
    }
    if !per.is_empty() {
        main = main.trim_end_matches('_').to_owned();
    }
    for t in [main, per] {
        if !t.is_empty() {
            tokens.push(t);
        }
    }
    let mut last = |word: &str| {
        tokens.retain(|t| t != word);
        tokens.push(word.to_owned());
    };
    if kind == Kind::Counter {
        last("total");
    }
    if unit == "1" && kind == Kind::Gauge {
        last("ratio");
    }
    let joined = tokens.join("_");
    if joined.starts_with(|c: char| c.is_ascii_digit()) { format!("_{joined}") } else { joined }
}

#[cfg(test)]
mod tests {
    use super::super::wire::*;
    use super::*;

    #[test]
    fn names_as_prometheus_makes_them() {
        assert_eq!(metric_name("http.server.duration", "ms", Kind::Other), "http_server_duration_milliseconds");
        assert_eq!(metric_name("requests", "{request}", Kind::Counter), "requests_total");
        assert_eq!(metric_name("requests_total", "", Kind::Counter), "requests_total");
        assert_eq!(metric_name("total.requests", "", Kind::Counter), "requests_total");
        assert_eq!(metric_name("speed", "m/s", Kind::Gauge), "speed_meters_per_second");
        assert_eq!(metric_name("cpu.utilization", "1", Kind::Gauge), "cpu_utilization_ratio");
        assert_eq!(metric_name("cpu.utilization", "1", Kind::Other), "cpu_utilization");
        assert_eq!(metric_name("mem", "By", Kind::Other), "mem_bytes");
        assert_eq!(metric_name("mem_bytes", "By", Kind::Other), "mem_bytes");
        assert_eq!(metric_name("2xx", "", Kind::Gauge), "_2xx");
        assert_eq!(metric_name("a:b/c-d", "", Kind::Gauge), "a:b_c_d");
        assert_eq!(metric_name("x", "Cel/h", Kind::Counter), "x_celsius_per_hour_total");
        assert_eq!(metric_name("x", "foo bar", Kind::Gauge), "x_foo_bar");
        assert_eq!(metric_name("...", "", Kind::Gauge), "");
    }

    #[test]
    fn label_names_as_prometheus_makes_them() {
        assert_eq!(label_name("http.method"), "http_method");
        assert_eq!(label_name("2fa"), "key_2fa");
        assert_eq!(label_name("ok_name"), "ok_name");
        assert_eq!(label_name("é"), "_");
    }

    fn kv(k: &str, v: &str) -> KeyValue {
        KeyValue { key: k.into(), value: Some(AnyValue { string_value: Some(v.into()), ..AnyValue::default() }) }
    }

    fn request(metrics: Vec<Metric>) -> ExportMetricsServiceRequest {
        ExportMetricsServiceRequest {
            resource_metrics: vec![ResourceMetrics {
                resource: Some(Resource {
                    attributes: vec![
                        kv("service.name", "api"),
                        kv("service.namespace", "shop"),
                        kv("service.instance.id", "i-1"),
                        kv("host.name", "h"),
                    ],
                }),
                scope_metrics: vec![ScopeMetrics { metrics }],
            }],
        }
    }

    fn num(attrs: Vec<KeyValue>, t_ns: u64, v: f64) -> NumberDataPoint {
        NumberDataPoint { attributes: attrs, time_unix_nano: t_ns, as_double: Some(v), ..NumberDataPoint::default() }
    }

    fn shown(s: &Series) -> String {
        let l: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let v: Vec<String> = s.samples.iter().map(|(t, b)| format!("{t}:{}", f64::from_bits(*b))).collect();
        format!("{} {}", l.join(","), v.join(","))
    }

    #[test]
    fn counters_gauges_and_histograms_become_series() {
        let r = request(vec![
            Metric {
                name: "http.requests".into(),
                sum: Some(Sum {
                    // Keys made one name: values in key order (`-` before `.`).
                    data_points: vec![num(vec![kv("http.method", "GET"), kv("http-method", "X")], 2_000_000_123, 5.0)],
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: true,
                }),
                ..Metric::default()
            },
            Metric {
                name: "queue".into(),
                sum: Some(Sum {
                    data_points: vec![NumberDataPoint { time_unix_nano: 3_000_000, as_int: Some(-3), ..NumberDataPoint::default() }],
                    aggregation_temporality: CUMULATIVE,
                    is_monotonic: false,
                }),
                ..Metric::default()
            },
            Metric {
                name: "latency".into(),
                unit: "s".into(),
                histogram: Some(Histogram {
                    data_points: vec![HistogramDataPoint {
                        time_unix_nano: 4_000_000,
                        count: 6,
                        sum: Some(2.5),
                        bucket_counts: vec![1, 2, 3],
                        explicit_bounds: vec![0.5, 1.0],
                        ..HistogramDataPoint::default()
                    }],
                    aggregation_temporality: CUMULATIVE,
                }),
                ..Metric::default()
            },
        ]);
        let t = translate(&r);
        assert_eq!((t.points, t.rejected), (3, 0), "{:?}", t.reasons);
        let all: Vec<String> = t.series.iter().map(shown).collect();
        let id = "instance=i-1,job=shop/api";
        assert_eq!(
            all,
            [
                format!("__name__=http_requests_total,http_method=X;GET,{id} 2000:5"),
                format!("__name__=queue,{id} 3:-3"),
                format!("__name__=latency_seconds_bucket,{id},le=0.5 4:1"),
                format!("__name__=latency_seconds_bucket,{id},le=1 4:3"),
                format!("__name__=latency_seconds_bucket,{id},le=+Inf 4:6"),
                format!("__name__=latency_seconds_count,{id} 4:6"),
                format!("__name__=latency_seconds_sum,{id} 4:2.5"),
                format!("__name__=target_info,host_name=h,{id} 2000:1"),
            ]
        );
    }

    #[test]
    fn deltas_and_exponential_histograms_are_refused_and_named() {
        let r = request(vec![
            Metric { name: "g".into(), gauge: Some(Gauge { data_points: vec![num(vec![], 1_000_000, 1.0)] }), ..Metric::default() },
            Metric {
                name: "d".into(),
                sum: Some(Sum { data_points: vec![num(vec![], 1, 1.0); 2], aggregation_temporality: DELTA, is_monotonic: true }),
                ..Metric::default()
            },
            Metric {
                name: "e".into(),
                exponential_histogram: Some(ExponentialHistogram { data_points: vec![Skipped {}] }),
                ..Metric::default()
            },
            Metric {
                name: "s".into(),
                summary: Some(Summary {
                    data_points: vec![SummaryDataPoint {
                        time_unix_nano: 1_000_000,
                        count: 2,
                        sum: 3.0,
                        quantile_values: vec![ValueAtQuantile { quantile: 0.99, value: 7.0 }],
                        flags: NO_RECORDED_VALUE,
                        ..SummaryDataPoint::default()
                    }],
                }),
                ..Metric::default()
            },
        ]);
        let t = translate(&r);
        assert_eq!((t.points, t.rejected), (5, 3));
        assert!(t.reasons[0].contains("\"d\": 2 data points refused: a sum of delta temporality"), "{:?}", t.reasons);
        assert!(t.reasons[1].contains("\"e\": 1 data points refused: an exponential histogram"), "{:?}", t.reasons);
        let names: Vec<&str> = t.series.iter().map(|s| s.labels.iter().find(|l| l.0 == "__name__").unwrap().1.as_str()).collect();
        assert_eq!(names, ["g", "s", "s_count", "s_sum", "target_info"]);
        assert_eq!(t.series[1].labels.iter().find(|l| l.0 == "quantile").unwrap().1, "0.99");
        assert!(t.series[1..4].iter().all(|s| s.samples[0].1 == STALE), "no recorded value is the stale marker");
    }

    #[test]
    fn attribute_values_as_text() {
        let v = |a: AnyValue| value(Some(&a));
        assert_eq!(v(AnyValue { int_value: Some(-4), ..AnyValue::default() }), "-4");
        assert_eq!(v(AnyValue { double_value: Some(0.25), ..AnyValue::default() }), "0.25");
        assert_eq!(v(AnyValue { bool_value: Some(true), ..AnyValue::default() }), "true");
        assert_eq!(v(AnyValue { bytes_value: Some(b"hello".to_vec()), ..AnyValue::default() }), "aGVsbG8=");
        let arr = AnyValue {
            array_value: Some(ArrayValue { values: vec![AnyValue { string_value: Some("a".into()), ..AnyValue::default() }] }),
            ..AnyValue::default()
        };
        assert_eq!(v(arr), r#"["a"]"#);
    }
}
