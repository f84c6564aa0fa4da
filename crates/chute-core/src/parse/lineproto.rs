//! InfluxDB line protocol, as Telegraf, the InfluxDB client libraries and
//! tsbs's influx loader write it:
//!
//! ```text
//! measurement[,tag=value…] field=value[,field=value…] [timestamp]
//! ```
//!
//! - The measurement ends at an unescaped `,` or space; `\,` and `\ `
//!   escape them (and `\\` is a backslash).
//! - Tag keys, tag values and field keys also escape `=`.
//! - A field value is a float (`1`, `-1.5`, `2e3`), an integer (`1i`), an
//!   unsigned integer (`1u`), a string in double quotes (`\"` and `\\`
//!   escaped inside) or a boolean (`t`, `T`, `true`, `True`, `TRUE`, and the
//!   same for false).
//! - The timestamp is an integer in the request's precision (`ns` unless the
//!   request says `us`, `ms` or `s`); without one the line takes the time
//!   the server received it, which the caller passes in (this module reads
//!   no clock).
//! - Blank lines and lines starting with `#` are skipped; `\r\n` ends a line
//!   like `\n`.
//!
//! A backslash before any other character is that backslash (as InfluxDB
//! reads it); a backslash that ends a line escapes nothing and is an error.
//! Keys are case-sensitive; a tag or field cannot be named `time` (that is
//! the timestamp's column).

use std::borrow::Cow;

/// The unit of a request's timestamps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Precision {
    #[default]
    Nanoseconds,
    Microseconds,
    Milliseconds,
    Seconds,
    /// v1 only (`m`).
    Minutes,
    /// v1 only (`h`).
    Hours,
}

impl Precision {
    /// The `precision` parameter of InfluxDB's v1 (`n`, `u`, `ms`, `s`,
    /// `m`, `h`) and v2 (`ns`, `us`, `ms`, `s`) write APIs.
    pub fn parse(s: &str) -> Result<Precision, String> {
        Ok(match s {
            "" | "n" | "ns" => Precision::Nanoseconds,
            "u" | "us" | "µ" | "µs" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            "m" => Precision::Minutes,
            "h" => Precision::Hours,
            other => return Err(format!("unknown precision {other:?}: use ns, us, ms or s (v1 also m and h)")),
        })
    }

    /// Nanoseconds per unit.
    pub fn nanos(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }
}

/// A field's value, typed as the line wrote it.
#[derive(Debug, Clone, PartialEq)]
pub enum FieldValue<'a> {
    Float(f64),
    Int(i64),
    UInt(u64),
    Str(Cow<'a, str>),
    Bool(bool),
}

/// The type of a field value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    Float,
    Int,
    UInt,
    Str,
    Bool,
}

impl FieldType {
    /// The PostgreSQL type a new column of this field gets.
    pub fn sql_type(self) -> &'static str {
        match self {
            FieldType::Float => "double precision",
            FieldType::Int => "bigint",
            // bigint cannot hold the top half of u64; numeric holds all of it.
            FieldType::UInt => "numeric(20,0)",
            FieldType::Str => "text",
            FieldType::Bool => "boolean",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            FieldType::Float => "float",
            FieldType::Int => "integer",
            FieldType::UInt => "unsigned integer",
            FieldType::Str => "string",
            FieldType::Bool => "boolean",
        }
    }
}

impl FieldValue<'_> {
    pub fn field_type(&self) -> FieldType {
        match self {
            FieldValue::Float(_) => FieldType::Float,
            FieldValue::Int(_) => FieldType::Int,
            FieldValue::UInt(_) => FieldType::UInt,
            FieldValue::Str(_) => FieldType::Str,
            FieldValue::Bool(_) => FieldType::Bool,
        }
    }
}

/// One parsed line.
#[derive(Debug, Clone, PartialEq)]
pub struct Line<'a> {
    pub measurement: Cow<'a, str>,
    pub tags: Vec<(Cow<'a, str>, Cow<'a, str>)>,
    pub fields: Vec<(Cow<'a, str>, FieldValue<'a>)>,
    /// Nanoseconds since 1970-01-01 UTC (the default time when the line has none).
    pub time_ns: i64,
}

impl Line<'_> {
    /// The line with its text copied.
    pub fn into_owned(self) -> Line<'static> {
        let own = |c: Cow<'_, str>| Cow::Owned(c.into_owned());
        Line {
            measurement: own(self.measurement),
            tags: self.tags.into_iter().map(|(k, v)| (own(k), own(v))).collect(),
            fields: self
                .fields
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        FieldValue::Str(s) => FieldValue::Str(own(s)),
                        FieldValue::Float(f) => FieldValue::Float(f),
                        FieldValue::Int(n) => FieldValue::Int(n),
                        FieldValue::UInt(n) => FieldValue::UInt(n),
                        FieldValue::Bool(b) => FieldValue::Bool(b),
                    };
                    (own(k), v)
                })
                .collect(),
            time_ns: self.time_ns,
        }
    }
}

/// A line that does not parse: its number (from 1) and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct LineError {
    pub line: u64,
    pub reason: String,
}

/// Parses every line of `body`, calling `each` with the line's number
/// (from one) and the line or why it is bad; blank and comment lines are
/// skipped. `default_ns` is the time of lines without a timestamp.
pub fn parse_lines<'a>(body: &'a str, precision: Precision, default_ns: i64, mut each: impl FnMut(u64, Result<Line<'a>, String>)) {
    for (i, raw) in body.split('\n').enumerate() {
        let text = raw.strip_suffix('\r').unwrap_or(raw);
        match parse_line(text, precision, default_ns) {
            Ok(None) => {}
            Ok(Some(l)) => each(i as u64 + 1, Ok(l)),
            Err(e) => each(i as u64 + 1, Err(e)),
        }
    }
}

/// Parses one line (without its line end): `None` for a blank or comment line.
pub fn parse_line(text: &str, precision: Precision, default_ns: i64) -> Result<Option<Line<'_>>, String> {
    let (mut tags, mut fields) = (Vec::new(), Vec::new());
    Ok(parse_line_into(text, precision, default_ns, &mut tags, &mut fields)?.map(|(measurement, time_ns)| Line {
        measurement,
        tags,
        fields,
        time_ns,
    }))
}

/// Tags (key, value) of parsed lines, kept one after another.
pub type Tags<'a> = Vec<(Cow<'a, str>, Cow<'a, str>)>;
/// Fields (key, value) of parsed lines, kept one after another.
pub type FieldList<'a> = Vec<(Cow<'a, str>, FieldValue<'a>)>;

/// The tags and fields of many lines in two shared vectors, so that parsing
/// a request allocates per request, not per line ([`parse_lines_into`]).
#[derive(Debug, Default)]
pub struct LineSet<'a> {
    pub tags: Tags<'a>,
    pub fields: FieldList<'a>,
}

/// One line of a [`LineSet`]: its tags and fields are ranges of the set's.
#[derive(Debug, Clone, PartialEq)]
pub struct LineAt<'a> {
    pub measurement: Cow<'a, str>,
    pub tags: std::ops::Range<usize>,
    pub fields: std::ops::Range<usize>,
    /// Nanoseconds since 1970-01-01 UTC (the default time when the line has none).
    pub time_ns: i64,
}

/// Like [`parse_lines`], with each line's tags and fields appended to `set`.
pub fn parse_lines_into<'a>(
    body: &'a str,
    precision: Precision,
    default_ns: i64,
    set: &mut LineSet<'a>,
    mut each: impl FnMut(u64, Result<LineAt<'a>, String>),
) {
    let mut sized = false;
    let mut start = 0;
    // Line ends by the memchr crate's search (`str::split` is a byte at a time on short lines).
    let ends = memchr::memchr_iter(b'\n', body.as_bytes()).chain(std::iter::once(body.len()));
    for (i, end) in ends.enumerate() {
        let raw = &body[start..end];
        start = end + 1;
        let text = raw.strip_suffix('\r').unwrap_or(raw);
        let (t0, f0) = (set.tags.len(), set.fields.len());
        match parse_line_into(text, precision, default_ns, &mut set.tags, &mut set.fields) {
            Ok(None) => {}
            Ok(Some((measurement, time_ns))) => {
                if !sized {
                    // Room for the rest of the body, if its lines are like this one (estimated
                    // from this line's length: the body is not read twice): the vectors grow
                    // once. Never more than the body can hold (a tag or field takes 4 bytes or
                    // more), whatever the first line looks like.
                    sized = true;
                    let (rest, most) = ((body.len() + 1 - start) / (raw.len() + 1) + 1, body.len() / 4);
                    set.tags.reserve((rest * (set.tags.len() - t0)).min(most));
                    set.fields.reserve((rest * (set.fields.len() - f0)).min(most));
                }
                each(i as u64 + 1, Ok(LineAt { measurement, tags: t0..set.tags.len(), fields: f0..set.fields.len(), time_ns }))
            }
            Err(e) => each(i as u64 + 1, Err(e)),
        }
    }
}

/// Parses one line, appending its tags and fields (left as they were when
/// it is bad); the measurement and time, or `None` for a blank or comment line.
fn parse_line_into<'a>(
    text: &'a str,
    precision: Precision,
    default_ns: i64,
    tags: &mut Tags<'a>,
    fields: &mut FieldList<'a>,
) -> Result<Option<(Cow<'a, str>, i64)>, String> {
    let (t0, f0) = (tags.len(), fields.len());
    let parsed = parse_parts(text, precision, default_ns, tags, t0, fields, f0);
    if !matches!(parsed, Ok(Some(_))) {
        tags.truncate(t0);
        fields.truncate(f0);
    }
    parsed
}

fn parse_parts<'a>(
    text: &'a str,
    precision: Precision,
    default_ns: i64,
    tags: &mut Tags<'a>,
    t0: usize,
    fields: &mut FieldList<'a>,
    f0: usize,
) -> Result<Option<(Cow<'a, str>, i64)>, String> {
    let trimmed = text.trim_start_matches([' ', '\t']);
    if trimmed.is_empty() || trimmed.starts_with('#') {
        return Ok(None);
    }
    let mut c = Cursor { s: trimmed, i: 0 };
    // A bit per key of the line, by its length and last byte (see `key_bit`):
    // only a key whose bit is taken is looked for among the others.
    let mut seen = 0u64;
    let measurement = c.element(Stops::CommaSpace, b", ", "measurement")?;
    if measurement.is_empty() {
        return Err("the measurement name is missing".into());
    }
    while c.peek() == Some(b',') {
        c.i += 1;
        let key = c.element(Stops::CommaEqSpace, b",= ", "tag key")?;
        if c.peek() != Some(b'=') {
            return Err(format!("tag {key:?} has no value (expected tag=value)"));
        }
        c.i += 1;
        let value = c.element(Stops::CommaSpace, b",= ", "tag value")?;
        if key.is_empty() {
            return Err("a tag key is empty".into());
        }
        if value.is_empty() {
            return Err(format!("tag {key:?} has an empty value"));
        }
        check_key(&key, "tag")?;
        let bit = key_bit(&key);
        if seen & bit != 0 && tags[t0..].iter().any(|(k, _)| same_key(k, &key)) {
            return Err(format!("tag {key:?} appears twice in the line"));
        }
        seen |= bit;
        tags.push((key, value));
    }
    if c.peek() != Some(b' ') {
        return Err("the field set is missing (expected a space, then field=value)".into());
    }
    c.skip_spaces();
    if c.at_end() {
        return Err("the field set is missing (expected field=value after the tags)".into());
    }
    loop {
        let key = c.element(Stops::CommaEqSpace, b",= ", "field key")?;
        if key.is_empty() {
            return Err("a field key is empty (expected field=value)".into());
        }
        if c.peek() != Some(b'=') {
            return Err(format!("field {key:?} has no value (expected field=value)"));
        }
        c.i += 1;
        check_key(&key, "field")?;
        let value = c.field_value(&key)?;
        let bit = key_bit(&key);
        if seen & bit != 0 && (fields[f0..].iter().any(|(k, _)| same_key(k, &key)) || tags[t0..].iter().any(|(k, _)| same_key(k, &key))) {
            return Err(format!("{key:?} appears twice in the line"));
        }
        seen |= bit;
        fields.push((key, value));
        match c.peek() {
            Some(b',') => c.i += 1,
            _ => break,
        }
    }
    let time_ns = match c.peek() {
        None => default_ns,
        Some(b' ') => {
            c.skip_spaces();
            let rest = c.s[c.i..].trim_end_matches([' ', '\t']);
            if rest.is_empty() { default_ns } else { timestamp(rest, precision)? }
        }
        Some(other) => return Err(format!("unexpected {:?} after the field set", other as char)),
    };
    Ok(Some((measurement, time_ns)))
}

/// Whether two keys of a line are the same. Keys of one line nearly always
/// differ in length or in their last byte (`v1`, `v2`): those are compared
/// before the bytes, which saves a call to `memcmp` per pair.
fn same_key(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.as_bytes().last() == b.as_bytes().last() && a == b
}

/// One of 64 bits for a key, from its length and last byte: two keys that
/// are the same have the same bit, and the keys of a line rarely share one.
fn key_bit(key: &str) -> u64 {
    let last = key.as_bytes().last().copied().unwrap_or(0);
    1u64 << ((key.len().wrapping_mul(7) + usize::from(last)) & 63)
}

fn check_key(key: &str, what: &str) -> Result<(), String> {
    if key == "time" {
        return Err(format!("a {what} cannot be named \"time\": that is the timestamp"));
    }
    Ok(())
}

/// The unescaped bytes an element ends at.
#[derive(Clone, Copy)]
enum Stops {
    /// `,` and space: a measurement, a tag value.
    CommaSpace,
    /// `,`, `=` and space: a tag or field key.
    CommaEqSpace,
}

impl Stops {
    /// Whether each byte is a stop or a backslash.
    fn special(self) -> &'static [bool; 256] {
        match self {
            Stops::CommaSpace => &SPECIAL_COMMA_SPACE,
            Stops::CommaEqSpace => &SPECIAL_COMMA_EQ_SPACE,
        }
    }
}

/// The bytes an element stops or escapes at (`stops`, and a backslash).
const fn specials(stops: &[u8]) -> [bool; 256] {
    let mut t = [false; 256];
    t[b'\\' as usize] = true;
    let mut i = 0;
    while i < stops.len() {
        t[stops[i] as usize] = true;
        i += 1;
    }
    t
}
static SPECIAL_COMMA_SPACE: [bool; 256] = specials(b", ");
static SPECIAL_COMMA_EQ_SPACE: [bool; 256] = specials(b",= ");

struct Cursor<'a> {
    s: &'a str,
    i: usize,
}

impl<'a> Cursor<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i >= self.s.len()
    }

    fn skip_spaces(&mut self) {
        while self.peek() == Some(b' ') {
            self.i += 1;
        }
    }

    /// An unquoted element: up to an unescaped byte of `stops`; a backslash
    /// before a byte of `escapes` or a backslash stands for that byte.
    fn element(&mut self, stops: Stops, escapes: &[u8], what: &str) -> Result<Cow<'a, str>, String> {
        let b = self.s.as_bytes();
        let start = self.i;
        let mut escaped = false;
        // Most bytes are neither a stop nor a backslash: skipped by one table lookup each.
        let special = stops.special();
        while let Some(&c) = b.get(self.i) {
            if !special[c as usize] {
                self.i += 1;
                continue;
            }
            if c == b'\\' {
                match b.get(self.i + 1) {
                    None => return Err(format!("the {what} ends in a backslash that escapes nothing")),
                    Some(n) if escapes.contains(n) || *n == b'\\' => {
                        escaped = true;
                        self.i += 2;
                        continue;
                    }
                    Some(_) => {}
                }
            } else {
                break;
            }
            self.i += 1;
        }
        let raw = &self.s[start..self.i];
        if !escaped {
            return Ok(Cow::Borrowed(raw));
        }
        let mut out = String::with_capacity(raw.len());
        let mut chars = raw.chars().peekable();
        while let Some(ch) = chars.next() {
            if ch == '\\'
                && let Some(&n) = chars.peek()
                && n.is_ascii()
                && (escapes.contains(&(n as u8)) || n == '\\')
            {
                out.push(n);
                chars.next();
                continue;
            }
            out.push(ch);
        }
        Ok(Cow::Owned(out))
    }

    fn field_value(&mut self, key: &str) -> Result<FieldValue<'a>, String> {
        let b = self.s.as_bytes();
        if self.peek() == Some(b'"') {
            self.i += 1;
            let start = self.i;
            let mut escaped = false;
            loop {
                match b.get(self.i) {
                    None => return Err(format!("the string value of field {key:?} has no closing quote")),
                    Some(b'\\') if matches!(b.get(self.i + 1), Some(b'"' | b'\\')) => {
                        escaped = true;
                        self.i += 2;
                    }
                    Some(b'"') => break,
                    Some(_) => self.i += 1,
                }
            }
            let raw = &self.s[start..self.i];
            self.i += 1;
            if !matches!(self.peek(), None | Some(b',' | b' ')) {
                return Err(format!("unexpected text after the string value of field {key:?}"));
            }
            if !escaped {
                return Ok(FieldValue::Str(Cow::Borrowed(raw)));
            }
            return Ok(FieldValue::Str(Cow::Owned(unescape_string(raw))));
        }
        let start = self.i;
        // Nearly every value: read as it is scanned.
        if let Some((v, len)) = values::plain_decimal_at(&b[start..]) {
            self.i += len;
            return Ok(FieldValue::Float(v));
        }
        while let Some(&c) = b.get(self.i) {
            if c == b',' || c == b' ' {
                break;
            }
            self.i += 1;
        }
        let raw = &self.s[start..self.i];
        field_scalar(raw).ok_or_else(|| {
            if raw.is_empty() {
                format!("field {key:?} has an empty value")
            } else {
                format!("field {key:?} has a bad value {raw:?} (expected a number, 1i, 1u, true/false or a \"string\")")
            }
        })
    }
}

fn unescape_string(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars().peekable();
    while let Some(ch) = chars.next() {
        if ch == '\\'
            && let Some(&n) = chars.peek()
            && (n == '"' || n == '\\')
        {
            out.push(n);
            chars.next();
            continue;
        }
        out.push(ch);
    }
    out
}

/// Writes `line` as line protocol (timestamp in nanoseconds), escaping what
/// must be: parsing the output gives `line` back.
pub fn write_line(line: &Line<'_>, out: &mut String) {
    escape_into(&line.measurement, b", ", out);
    for (k, v) in &line.tags {
        out.push(',');
        escape_into(k, b",= ", out);
        out.push('=');
        escape_into(v, b",= ", out);
    }
    out.push(' ');
    for (i, (k, v)) in line.fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape_into(k, b",= ", out);
        out.push('=');
        use std::fmt::Write;
        match v {
            FieldValue::Float(f) => {
                let _ = write!(out, "{f:?}");
            }
            FieldValue::Int(n) => {
                let _ = write!(out, "{n}i");
            }
            FieldValue::UInt(n) => {
                let _ = write!(out, "{n}u");
            }
            FieldValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            FieldValue::Str(s) => {
                out.push('"');
                for ch in s.chars() {
                    if ch == '"' || ch == '\\' {
                        out.push('\\');
                    }
                    out.push(ch);
                }
                out.push('"');
            }
        }
    }
    use std::fmt::Write;
    let _ = write!(out, " {}", line.time_ns);
}

fn escape_into(s: &str, special: &[u8], out: &mut String) {
    for ch in s.chars() {
        if ch == '\\' || (ch.is_ascii() && special.contains(&(ch as u8))) {
            out.push('\\');
        }
        out.push(ch);
    }
}

#[path = "lineproto_values.rs"]
mod values;
use values::{field_scalar, timestamp};
#[cfg(test)]
use values::{plain_decimal_at, simple_decimal};

#[cfg(test)]
#[path = "lineproto_tests.rs"]
mod tests;
