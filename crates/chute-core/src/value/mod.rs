//! Text values turned into PostgreSQL's binary wire form on the client.
//!
//! chute parses text input (CSV and friends) itself and sends binary COPY,
//! which costs the server about half of what text COPY costs. That is only
//! allowed if a file that loads with `psql \copy` loads into exactly the same
//! rows, so every conversion here reproduces what PostgreSQL 15's input
//! function followed by its send function produces for the same text. Where
//! the fast path does not know a form it says so ([`ValueError::NeedsServer`])
//! and the engine lets the server's own parser decide; it never guesses and
//! never rejects what the server would accept ([`ValueError::Invalid`] is only
//! returned when PostgreSQL rejects the text too).
//!
//! What the fast path leaves to the server: a non-ASCII byte where
//! PostgreSQL would skip whitespace (whether it is space depends on the
//! server's locale); hexadecimal floats and `nan(…)`; numerics whose first
//! digit lies beyond 10^±1000, with a display scale over 1000 or an exponent
//! over 100000, or with whitespace after the `e`; date/time forms other than
//! ISO 8601 and PostgreSQL's ISO output (see [`parse_timestamptz`]); and a
//! timestamptz without an offset when the session's time zone is unknown.
//!
//! This is the per-value hot path of the loader: values are parsed straight
//! from bytes and appended to the caller's buffer, with no allocation except
//! for error messages.

mod datetime;
mod epoch;
mod number;
mod text;
mod typmod;

pub(crate) use datetime::{civil_from_days, local_offset};
pub use datetime::{parse_date, parse_timestamp, parse_timestamptz};
pub use epoch::epoch_integer;
pub use number::{decimal_prefix, parse_int};
pub use typmod::{apply_typmod, round_timestamp};

use jiff::tz::TimeZone;

/// The column types chute encodes on the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PgType {
    Bool,
    Int2,
    Int4,
    Int8,
    Float4,
    Float8,
    Numeric,
    Text,
    Varchar,
    Bpchar,
    Name,
    Date,
    Timestamp,
    Timestamptz,
    Uuid,
    Json,
    Jsonb,
    Bytea,
}

impl PgType {
    /// Every type, for tests and tables.
    pub const ALL: [PgType; 18] = [
        PgType::Bool,
        PgType::Int2,
        PgType::Int4,
        PgType::Int8,
        PgType::Float4,
        PgType::Float8,
        PgType::Numeric,
        PgType::Text,
        PgType::Varchar,
        PgType::Bpchar,
        PgType::Name,
        PgType::Date,
        PgType::Timestamp,
        PgType::Timestamptz,
        PgType::Uuid,
        PgType::Json,
        PgType::Jsonb,
        PgType::Bytea,
    ];

    /// The type with this `pg_type.oid` (built-in types have fixed OIDs).
    pub fn from_oid(oid: u32) -> Option<PgType> {
        PgType::ALL.into_iter().find(|t| t.oid() == oid)
    }

    /// `pg_type.oid` of the type.
    pub fn oid(self) -> u32 {
        match self {
            PgType::Bool => 16,
            PgType::Int2 => 21,
            PgType::Int4 => 23,
            PgType::Int8 => 20,
            PgType::Float4 => 700,
            PgType::Float8 => 701,
            PgType::Numeric => 1700,
            PgType::Text => 25,
            PgType::Varchar => 1043,
            PgType::Bpchar => 1042,
            PgType::Name => 19,
            PgType::Date => 1082,
            PgType::Timestamp => 1114,
            PgType::Timestamptz => 1184,
            PgType::Uuid => 2950,
            PgType::Json => 114,
            PgType::Jsonb => 3802,
            PgType::Bytea => 17,
        }
    }

    /// `pg_type.typname`, usable in casts (`$1::timestamptz`).
    pub fn name(self) -> &'static str {
        match self {
            PgType::Bool => "bool",
            PgType::Int2 => "int2",
            PgType::Int4 => "int4",
            PgType::Int8 => "int8",
            PgType::Float4 => "float4",
            PgType::Float8 => "float8",
            PgType::Numeric => "numeric",
            PgType::Text => "text",
            PgType::Varchar => "varchar",
            PgType::Bpchar => "bpchar",
            PgType::Name => "name",
            PgType::Date => "date",
            PgType::Timestamp => "timestamp",
            PgType::Timestamptz => "timestamptz",
            PgType::Uuid => "uuid",
            PgType::Json => "json",
            PgType::Jsonb => "jsonb",
            PgType::Bytea => "bytea",
        }
    }
}

/// How bare numbers are read for timestamp/timestamptz/date columns (`--epoch UNIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpochUnit {
    Seconds,
    Millis,
    Micros,
    Nanos,
}

/// What an encoder needs to know about the session.
#[derive(Debug, Clone, Default)]
pub struct EncodeContext {
    /// The session's TimeZone (from the server's ParameterStatus); None if
    /// chute could not load it -> timestamptz values without an explicit
    /// offset are NeedsServer.
    pub session_tz: Option<TimeZone>,
    /// With `Some(unit)`, a bare number in a date/timestamp/timestamptz column
    /// is that many units since 1970-01-01 00:00 UTC. This is chute's own
    /// reading (PostgreSQL has no such input form; note that it takes
    /// `20210608` as a date otherwise), so such values are always decided
    /// here, never passed to the server.
    pub epoch: Option<EpochUnit>,
}

/// Why a text could not be encoded on the client.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The fast path does not know this form; the server's own parser must decide.
    #[error("this form is left to the server's parser")]
    NeedsServer,
    /// Certainly invalid: PostgreSQL's input function rejects it too. The
    /// message is PostgreSQL's.
    #[error("{0}")]
    Invalid(String),
}

/// Appends the binary wire form (WITHOUT the int32 length word) of `text`
/// read as a value of `ty`. On error, `out` is left exactly as it was.
pub fn encode_text(ty: PgType, text: &[u8], ctx: &EncodeContext, out: &mut Vec<u8>) -> Result<(), ValueError> {
    let start = out.len();
    let result = match ty {
        PgType::Bool => number::encode_bool(text, out),
        ty @ (PgType::Int2 | PgType::Int4 | PgType::Int8 | PgType::Float4 | PgType::Float8) => {
            fixed_number(ty, text).map(|(bytes, len)| out.extend_from_slice(&bytes[..len]))
        }
        PgType::Numeric => number::encode_numeric(text, out),
        PgType::Text | PgType::Varchar | PgType::Bpchar | PgType::Json => text::encode_plain(text, out),
        PgType::Name => text::encode_name(text, out),
        PgType::Jsonb => text::encode_jsonb(text, out),
        PgType::Bytea => text::encode_bytea(text, out),
        PgType::Uuid => text::encode_uuid(text, out),
        PgType::Date => parse_date(text, ctx).map(|d| out.extend_from_slice(&datetime::date_wire(d).to_be_bytes())),
        PgType::Timestamp => parse_timestamp(text, ctx).map(|t| out.extend_from_slice(&datetime::timestamp_wire(t).to_be_bytes())),
        PgType::Timestamptz => parse_timestamptz(text, ctx).map(|t| out.extend_from_slice(&datetime::timestamp_wire(t).to_be_bytes())),
    };
    if result.is_err() {
        out.truncate(start);
    }
    result
}

/// One value of a fixed-size type that no typmod changes (`float4`,
/// `float8`, `int2`, `int4`, `int8`) as a field of a binary COPY row: its
/// length word and its bytes, appended to `out`; the bytes are
/// [`encode_text`]'s. The encoder's per-row path calls it for these types
/// without `encode_text`'s dispatch over all of them and without writing
/// the length word after the value. Panics for any other type.
#[inline]
pub fn encode_fixed_field(ty: PgType, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    let (bytes, len) = fixed_number(ty, text)?;
    out.extend_from_slice(&(len as i32).to_be_bytes());
    out.extend_from_slice(&bytes[..len]);
    Ok(())
}

/// A number of fixed size read from `text`: its binary bytes, in the
/// first `len` of the array. Panics for a type that is no such number.
#[inline]
fn fixed_number(ty: PgType, text: &[u8]) -> Result<([u8; 8], usize), ValueError> {
    fn held<const N: usize>(b: [u8; N]) -> ([u8; 8], usize) {
        let mut a = [0; 8];
        a[..N].copy_from_slice(&b);
        (a, N)
    }
    match ty {
        PgType::Float8 => number::parse_float8(text).map(|v| held(v.to_bits().to_be_bytes())),
        PgType::Float4 => number::parse_float4(text).map(|v| held(v.to_bits().to_be_bytes())),
        PgType::Int2 => parse_int(ty, text).map(|v| held((v as i16).to_be_bytes())),
        PgType::Int4 => parse_int(ty, text).map(|v| held((v as i32).to_be_bytes())),
        PgType::Int8 => parse_int(ty, text).map(|v| held(v.to_be_bytes())),
        other => panic!("fixed_number called for {other:?}"),
    }
}

/// `isspace()` in the C locale: what PostgreSQL's input functions skip.
#[inline]
fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// Strips the surrounding whitespace PostgreSQL's input functions skip.
///
/// Whether a non-ASCII byte counts as space depends on the server's
/// LC_CTYPE, so a non-ASCII byte at either end is left to the server.
#[inline]
fn trim_space(text: &[u8]) -> Result<&[u8], ValueError> {
    let mut s = text;
    while let [first, rest @ ..] = s {
        if !is_space(*first) {
            break;
        }
        s = rest;
    }
    while let [rest @ .., last] = s {
        if !is_space(*last) {
            break;
        }
        s = rest;
    }
    match (s.first(), s.last()) {
        (Some(f), Some(l)) if !f.is_ascii() || !l.is_ascii() => Err(ValueError::NeedsServer),
        _ => Ok(s),
    }
}

/// The input as PostgreSQL quotes it in messages.
fn shown(text: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(text)
}

/// PostgreSQL's "invalid input syntax for type X: "…"".
fn syntax_error(type_name: &str, text: &[u8]) -> ValueError {
    ValueError::Invalid(format!("invalid input syntax for type {type_name}: \"{}\"", shown(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_oids_round_trip() {
        for ty in PgType::ALL {
            assert_eq!(PgType::from_oid(ty.oid()), Some(ty));
        }
        assert_eq!(PgType::from_oid(1184), Some(PgType::Timestamptz));
        assert_eq!(PgType::from_oid(0), None);
        assert_eq!(PgType::Timestamptz.name(), "timestamptz");
    }

    #[test]
    fn trimming_stops_at_non_ascii() {
        assert_eq!(trim_space(b" \t\n\x0b\x0c\rx\r\n"), Ok(&b"x"[..]));
        assert_eq!(trim_space(b"   "), Ok(&b""[..]));
        assert_eq!(trim_space("\u{a0}x".as_bytes()), Err(ValueError::NeedsServer));
    }
}
