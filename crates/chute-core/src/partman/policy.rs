//! A table's partitioning policy, as stored in `chute.partition_config`.
//!
//! The policy is what any host needs to maintain a table: the key, the
//! interval, how far ahead to stay, what to age out and how. It is kept in the
//! database as JSON so that a later chute can add fields without a migration
//! of every row, and validated here, once, before anything uses it.

use jiff::tz::TimeZone;

use super::interval::{IntervalError, Span, zone};
use crate::ident::QualifiedName;

/// The type of the partition key column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    Timestamptz,
    Timestamp,
    Date,
    Int2,
    Int4,
    Int8,
}

impl KeyType {
    /// From `format_type()` output or a type name.
    pub fn from_sql(name: &str) -> Option<KeyType> {
        Some(match name {
            "timestamp with time zone" | "timestamptz" => KeyType::Timestamptz,
            "timestamp without time zone" | "timestamp" => KeyType::Timestamp,
            "date" => KeyType::Date,
            "smallint" | "int2" => KeyType::Int2,
            "integer" | "int4" | "int" => KeyType::Int4,
            "bigint" | "int8" => KeyType::Int8,
            _ => return None,
        })
    }

    pub fn sql_name(self) -> &'static str {
        match self {
            KeyType::Timestamptz => "timestamptz",
            KeyType::Timestamp => "timestamp",
            KeyType::Date => "date",
            KeyType::Int2 => "int2",
            KeyType::Int4 => "int4",
            KeyType::Int8 => "int8",
        }
    }

    pub fn is_time(self) -> bool {
        matches!(self, KeyType::Timestamptz | KeyType::Timestamp | KeyType::Date)
    }

    /// The SQL literal of a key value (microseconds since the Unix epoch for
    /// time keys, the number itself for integer keys).
    pub fn literal(self, v: i64) -> Result<String, IntervalError> {
        Ok(match self {
            KeyType::Int2 | KeyType::Int4 | KeyType::Int8 => v.to_string(),
            KeyType::Date => format!("'{}'", era(super::interval::to_timestamp(v)?, "%m-%d")),
            KeyType::Timestamp => format!("'{}'", utc_text(v, "")?),
            KeyType::Timestamptz => format!("'{}'", utc_text(v, "+00")?),
        })
    }

    /// The largest value the type holds, for integer keys.
    pub fn int_range(self) -> Option<(i64, i64)> {
        match self {
            KeyType::Int2 => Some((i64::from(i16::MIN), i64::from(i16::MAX))),
            KeyType::Int4 => Some((i64::from(i32::MIN), i64::from(i32::MAX))),
            KeyType::Int8 => Some((i64::MIN, i64::MAX)),
            _ => None,
        }
    }
}

fn utc_text(v: i64, offset: &str) -> Result<String, IntervalError> {
    let ts = super::interval::to_timestamp(v)?;
    let frac = v.rem_euclid(1_000_000);
    let frac = if frac != 0 { format!(".{frac:06}") } else { String::new() };
    Ok(era(ts, &format!("%m-%d %H:%M:%S{frac}{offset}")))
}

/// `ts` in UTC as `YYYY-` then `rest` (a strftime format), with years up to
/// 0 written the way PostgreSQL reads them: 1 BC is year 0, 2 BC year -1.
fn era(ts: jiff::Timestamp, rest: &str) -> String {
    let dt = ts.to_zoned(jiff::tz::TimeZone::UTC);
    let year = i32::from(dt.year());
    let tail = dt.strftime(rest).to_string();
    if year <= 0 { format!("{:04}-{tail} BC", 1 - year) } else { format!("{year:04}-{tail}") }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RetentionMode {
    /// Detach, then drop the old partition.
    Drop,
    /// Detach and keep the table (optionally moved to another schema).
    Detach,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Retention {
    /// How much to keep: partitions that end before `now - keep` go.
    pub keep: Span,
    pub mode: RetentionMode,
    /// With `Detach`: the schema detached partitions move to.
    pub schema: Option<String>,
}

/// Hash sub-partitions under every time partition (the range+hash layout).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HashSub {
    pub column: String,
    pub modulus: u32,
}

/// Scale-out: the table's hash shards (`hash`) are foreign tables, shard
/// `r` of every time partition living on `nodes[r % nodes.len()]` (the
/// data nodes when the table was distributed; nodes added later hold new
/// tables only). See `crate::cluster`.
/// Without hash shards (`placement`), each time partition is itself a
/// foreign table, on the node its placement picks.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Distribution {
    pub nodes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub placement: Option<Placement>,
}

/// Where a whole time partition goes (`--placement`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// Consecutive intervals on consecutive nodes.
    RoundRobin,
    /// By a stable hash of the partition's name.
    Hash,
}

impl Distribution {
    /// The node shard `remainder` lives on.
    pub fn node_of(&self, remainder: u32) -> &str {
        &self.nodes[remainder as usize % self.nodes.len()]
    }

    /// The node of the time partition `name` starting at `from` (placement only).
    pub fn node_of_partition(&self, policy: &Policy, name: &str, from: i64) -> &str {
        let n = self.nodes.len() as u64;
        let i = match self.placement {
            Some(Placement::Hash) => {
                // FNV-1a: stable across builds and machines.
                name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)) % n
            }
            _ => (interval_ordinal(policy, from).rem_euclid(n as i64)) as u64,
        };
        &self.nodes[i as usize]
    }
}

/// The number of the interval starting at `from`, counted from the epoch:
/// consecutive intervals get consecutive numbers (calendar months and years
/// by their average length, rounded, which is exact for them).
fn interval_ordinal(policy: &Policy, from: i64) -> i64 {
    use super::interval::Unit;
    const DAY: f64 = 86_400_000_000.0;
    let width = match policy.interval {
        Span::Integer(w) => w.max(1) as f64,
        Span::Time { n, unit } => {
            let one = match unit {
                Unit::Minutes => 60_000_000.0,
                Unit::Hours => 3_600_000_000.0,
                Unit::Days => DAY,
                Unit::Weeks => 7.0 * DAY,
                Unit::Months => 30.436_875 * DAY,
                Unit::Years => 365.2425 * DAY,
            };
            one * f64::from(n).max(1.0)
        }
    };
    (from as f64 / width).round() as i64
}

/// The `postgres_fdw` server of data node `node` on the coordinator.
pub fn server_name(node: &str) -> String {
    format!("chute_node_{node}")
}

/// Everything chute needs to keep one partitioned table in shape.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Policy {
    pub parent: QualifiedName,
    pub key: String,
    pub key_type: KeyType,
    pub interval: Span,
    /// Intervals kept ready after the one holding now (or the newest row).
    pub premake: u32,
    /// Create every interval from here on (a key value).
    pub start: Option<i64>,
    /// Rows further ahead of now than this are refused (time keys).
    pub max_future: Option<Span>,
    pub retention: Option<Retention>,
    /// IANA zone whose calendar day-or-longer intervals follow.
    pub tz: String,
    pub hash: Option<HashSub>,
    pub unlogged: bool,
    /// A DEFAULT partition, for pg_partman habits (off by default).
    pub default_partition: bool,
    /// Shards on data nodes (`--distribute-by`); none: every partition is local.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub distribution: Option<Distribution>,
    /// Storage parameters every new leaf gets (`fillfactor=70`,
    /// `autovacuum_…`): a partitioned parent cannot hold them, so `chute
    /// migrate` keeps the old table's here for the leaves made after it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub storage: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    #[error("the key {key:?} is {ty}, which needs {needs}")]
    IntervalKind { key: String, ty: &'static str, needs: &'static str },
    #[error("--tz applies to timestamptz keys only; {key:?} is {ty}, whose values have no zone")]
    ZoneOnNaiveKey { key: String, ty: &'static str },
    #[error("a date key needs an interval of a day or longer")]
    DateNeedsDays,
    #[error("--max-future applies to time keys only")]
    MaxFutureOnInteger,
    #[error("--hash needs a modulus of at least 2 (got {0})")]
    HashModulus(u32),
    #[error("--retention-schema goes with --retention-mode detach")]
    RetentionSchemaWithDrop,
    #[error(
        "a distributed table takes either --distribute-by COLUMN --shards N or --placement (not both), and at least one node (chute cluster init)"
    )]
    DistributionWithoutShards,
    #[error("a distributed table has no DEFAULT partition (a foreign DEFAULT could not be moved out of)")]
    DistributedDefault,
    #[error(transparent)]
    Interval(#[from] IntervalError),
}

impl Policy {
    /// A policy over `key` every `interval`, with chute's defaults for the
    /// rest: 4 partitions made ahead, no limit on future keys, no retention,
    /// days in UTC, no hash sub-partitions, logged, no DEFAULT partition,
    /// on this server, no storage parameters. Set others with struct update
    /// syntax: `Policy { premake: 2, ..Policy::new(…) }`.
    pub fn new(parent: QualifiedName, key: impl Into<String>, key_type: KeyType, interval: Span) -> Policy {
        Policy {
            parent,
            key: key.into(),
            key_type,
            interval,
            premake: 4,
            start: None,
            max_future: None,
            retention: None,
            tz: "UTC".into(),
            hash: None,
            unlogged: false,
            default_partition: false,
            distribution: None,
            storage: Vec::new(),
        }
    }

    /// ` WITH (…)` for a new leaf's `CREATE TABLE`, or nothing.
    /// Each parameter's name is checked and its value quoted, so a policy
    /// row edited by hand cannot add SQL of its own.
    pub fn storage_clause(&self) -> String {
        let params: Vec<String> = self
            .storage
            .iter()
            .filter_map(|p| {
                let (name, value) = p.split_once('=')?;
                let ok = name.starts_with(|c: char| c.is_ascii_lowercase() || c == '_')
                    && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_' || c == '.');
                ok.then(|| format!("{name} = {}", crate::ident::quote_literal(value)))
            })
            .collect();
        if params.is_empty() { String::new() } else { format!(" WITH ({})", params.join(", ")) }
    }

    /// Checks that the parts of a policy fit together.
    pub fn validate(&self) -> Result<(), PolicyError> {
        let ty = self.key_type.sql_name();
        let time_span = |s: &Span| s.is_time();
        if self.key_type.is_time() != time_span(&self.interval) {
            return Err(PolicyError::IntervalKind {
                key: self.key.clone(),
                ty,
                needs: if self.key_type.is_time() { "a time interval such as 1h or 1d" } else { "a plain number interval such as 100000" },
            });
        }
        if self.key_type == KeyType::Date && !self.interval.is_calendar() {
            return Err(PolicyError::DateNeedsDays);
        }
        if self.key_type != KeyType::Timestamptz && !self.tz.eq_ignore_ascii_case("utc") {
            return Err(PolicyError::ZoneOnNaiveKey { key: self.key.clone(), ty });
        }
        zone(&self.tz)?;
        if let Some(m) = &self.max_future
            && (!self.key_type.is_time() || !m.is_time())
        {
            return Err(PolicyError::MaxFutureOnInteger);
        }
        if let Some(r) = &self.retention {
            if r.keep.is_time() != self.key_type.is_time() {
                return Err(PolicyError::IntervalKind {
                    key: self.key.clone(),
                    ty,
                    needs: if self.key_type.is_time() { "a time retention such as 30d" } else { "a plain number retention" },
                });
            }
            if r.mode == RetentionMode::Drop && r.schema.is_some() {
                return Err(PolicyError::RetentionSchemaWithDrop);
            }
        }
        if let Some(h) = &self.hash
            && h.modulus < 2
        {
            return Err(PolicyError::HashModulus(h.modulus));
        }
        if let Some(d) = &self.distribution {
            if (self.hash.is_none() == d.placement.is_none()) || d.nodes.is_empty() {
                return Err(PolicyError::DistributionWithoutShards);
            }
            if self.default_partition {
                return Err(PolicyError::DistributedDefault);
            }
        }
        Ok(())
    }

    /// The zone intervals follow (UTC for keys without a zone).
    pub fn zone(&self) -> Result<TimeZone, IntervalError> {
        zone(&self.tz)
    }

    /// The key column quoted for SQL.
    pub fn key_sql(&self) -> String {
        crate::ident::quote_ident(&self.key)
    }
}

/// Reads a key value given on the command line (`--start`, `--now`): a
/// number for integer keys; for time keys an RFC 3339 timestamp, or a date or
/// date-time without offset, read in `tz` (timestamptz keys) or as is.
pub fn parse_key_value(text: &str, key_type: KeyType, tz: &TimeZone) -> Result<i64, IntervalError> {
    let t = text.trim();
    if !key_type.is_time() {
        return t.parse().map_err(|_| IntervalError::Syntax(text.to_owned()));
    }
    let utc = TimeZone::UTC;
    parse_instant(t, if key_type == KeyType::Timestamptz { tz } else { &utc })
}

/// An instant from `2026-11-22T10:00:00Z`, `2026-11-22 10:00:00+01`,
/// `2026-11-22 10:00` or `2026-11-22` (the last two read in `tz`), as
/// microseconds since the Unix epoch.
pub fn parse_instant(text: &str, tz: &TimeZone) -> Result<i64, IntervalError> {
    let t = text.trim();
    let syntax = || IntervalError::Syntax(text.to_owned());
    if let Ok(ts) = t.parse::<jiff::Timestamp>() {
        return Ok(ts.as_microsecond());
    }
    // PostgreSQL prints offsets as +00; RFC 3339 wants +00:00.
    if let Some(i) = t.rfind(['+', '-']).filter(|&i| i > 10 && t.len() - i == 3)
        && let Ok(ts) = format!("{}{}:00", &t[..i], &t[i..]).parse::<jiff::Timestamp>()
    {
        return Ok(ts.as_microsecond());
    }
    let civil: jiff::civil::DateTime =
        t.parse().or_else(|_| t.parse::<jiff::civil::Date>().map(|d| d.at(0, 0, 0, 0))).map_err(|_| syntax())?;
    let zoned = civil.to_zoned(tz.clone()).map_err(|_| syntax())?;
    Ok(zoned.timestamp().as_microsecond())
}

/// A duration for timeouts and loops: `500ms`, `2s`, `5min`, `1h`, `1d`,
/// `1h30m`, `1.5s`, ISO 8601 `PT5M` (jiff's friendly and ISO duration
/// formats, a day being 24 hours); a bare number is seconds.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, IntervalError> {
    let t = text.trim();
    let syntax = || IntervalError::Syntax(text.to_owned());
    let secs = match t.parse::<f64>() {
        Ok(n) => n,
        Err(_) => {
            let span: jiff::Span = t.parse().map_err(|_| syntax())?;
            span.total((jiff::Unit::Second, jiff::SpanRelativeTo::days_are_24_hours())).map_err(|_| syntax())?
        }
    };
    if !(0.0..1e9).contains(&secs) {
        return Err(syntax());
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instants_in_several_spellings() {
        let berlin = TimeZone::get("Europe/Berlin").unwrap();
        let want = "2026-11-22T09:00:00Z".parse::<jiff::Timestamp>().unwrap().as_microsecond();
        assert_eq!(parse_instant("2026-11-22T09:00:00Z", &berlin).unwrap(), want);
        assert_eq!(parse_instant("2026-11-22 10:00:00+01", &berlin).unwrap(), want);
        assert_eq!(parse_instant("2026-11-22 10:00", &berlin).unwrap(), want);
        assert_eq!(parse_instant("2026-11-22", &TimeZone::UTC).unwrap(), want - 9 * 3_600_000_000);
        assert!(parse_instant("yesterday", &TimeZone::UTC).is_err());
        assert_eq!(parse_key_value("-5", KeyType::Int8, &TimeZone::UTC).unwrap(), -5);
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("500ms").unwrap(), std::time::Duration::from_millis(500));
        assert_eq!(parse_duration("5min").unwrap(), std::time::Duration::from_secs(300));
        assert!(parse_duration("5 fortnights").is_err());
        assert_eq!(parse_duration("1h30m").unwrap(), std::time::Duration::from_secs(5400));
        assert_eq!(parse_duration("1d").unwrap(), std::time::Duration::from_secs(86400));
        assert_eq!(parse_duration("1.5s").unwrap(), std::time::Duration::from_millis(1500));
        assert_eq!(parse_duration("PT5M").unwrap(), std::time::Duration::from_secs(300));
        assert_eq!(parse_duration("2").unwrap(), std::time::Duration::from_secs(2));
        assert!(parse_duration("-5s").is_err() && parse_duration("1mo").is_err() && parse_duration("7x").is_err());
    }

    #[test]
    fn literals() {
        assert_eq!(KeyType::Timestamptz.literal(1_500_000).unwrap(), "'1970-01-01 00:00:01.500000+00'");
        assert_eq!(KeyType::Date.literal(86_400_000_000).unwrap(), "'1970-01-02'");
        assert_eq!(KeyType::Int4.literal(-3).unwrap(), "-3");
        // 2021-01-05 BC is the proleptic year -2020.
        let bc = jiff::civil::date(-2020, 1, 5).to_zoned(jiff::tz::TimeZone::UTC).unwrap().timestamp().as_microsecond();
        assert_eq!(KeyType::Timestamptz.literal(bc).unwrap(), "'2021-01-05 00:00:00+00 BC'");
        assert_eq!(KeyType::Timestamp.literal(bc + 1).unwrap(), "'2021-01-05 00:00:00.000001 BC'");
        assert_eq!(KeyType::Date.literal(bc).unwrap(), "'2021-01-05 BC'");
    }
}
