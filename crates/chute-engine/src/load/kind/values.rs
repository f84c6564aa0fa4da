//! Rows whose values are already parsed (`FeedFormat::Values`): a service
//! that parsed its requests itself (`chute serve`'s line protocol) hands
//! the load typed values, one row after another in the table's column
//! order, and the parse threads only encode and route them. No text is
//! written and parsed again on the way: a float goes into a float8 column
//! as its bits, an integer into an int8 column as its bytes.
//!
//! Every other pairing of value and column goes through the same text and
//! the same encoder a CSV file of those values would (`{f:?}` for floats,
//! decimal integers, `true`/`false`, a timestamp as an epoch in the load's
//! `--epoch` unit), down to the server's own parser for types the encoder
//! does not know: a row lands exactly as it did when it travelled as CSV,
//! and a bad value gets the same reason. One difference: a row that goes to
//! the server as text carries its epoch timestamp as ISO text of the same
//! microsecond (the server does not read epochs; such rows were rejected).
//!
//! The wire form of a chunk (`ValueRows`): each value is a tag byte and its
//! payload (8 bytes little-endian for numbers, a u32 length and the bytes
//! for text); a row has one value per column. Row `i` of a chunk is line
//! `first_line + i`; its offset is where it starts in the chunk.

use std::sync::Arc;

use chute_core::parse::Fields;
use chute_core::rowenc::{RowEncoder, RowOutcome, write_text_row};
use chute_core::value::PgType;

use super::super::model::{Chunk, ChunkOut, Filed, Payload, Reject, RowPos};
use super::super::routing::{RouteCtx, Routing};
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Kind, Prepared};

const NULL: u8 = 0;
const FLOAT: u8 = 1;
const INT: u8 = 2;
const UINT: u8 = 3;
const FALSE: u8 = 4;
const TRUE: u8 = 5;
const TEXT: u8 = 6;

/// One parsed value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Float(f64),
    Int(i64),
    UInt(u64),
    Bool(bool),
    Text(&'a [u8]),
}

impl Value<'_> {
    /// The value as a CSV cell of it would read (`None`: NULL), into `out` (cleared first).
    fn text(&self, out: &mut Vec<u8>) -> bool {
        use std::io::Write as _;
        out.clear();
        match self {
            Value::Null => return false,
            Value::Float(f) => {
                let _ = write!(out, "{f:?}");
            }
            Value::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Value::UInt(u) => {
                let _ = write!(out, "{u}");
            }
            Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Text(t) => out.extend_from_slice(t),
        }
        true
    }
}

/// Rows of parsed values, written one value at a time (a chunk's `data`).
#[derive(Debug, Default)]
pub struct ValueRows {
    pub(crate) data: Vec<u8>,
}

impl ValueRows {
    pub fn len(&self) -> usize {
        self.data.len()
    }
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
    /// Bytes it holds room for.
    pub fn capacity(&self) -> usize {
        self.data.capacity()
    }
    pub fn reserve(&mut self, bytes: usize) {
        self.data.reserve(bytes);
    }
    pub fn into_bytes(self) -> Vec<u8> {
        self.data
    }
    pub fn null(&mut self) {
        self.data.push(NULL);
    }
    pub fn float(&mut self, v: f64) {
        self.data.push(FLOAT);
        self.data.extend_from_slice(&v.to_le_bytes());
    }
    pub fn int(&mut self, v: i64) {
        self.data.push(INT);
        self.data.extend_from_slice(&v.to_le_bytes());
    }
    pub fn uint(&mut self, v: u64) {
        self.data.push(UINT);
        self.data.extend_from_slice(&v.to_le_bytes());
    }
    pub fn bool(&mut self, v: bool) {
        self.data.push(if v { TRUE } else { FALSE });
    }
    pub fn text(&mut self, v: &str) {
        self.data.push(TEXT);
        self.data.extend_from_slice(&(v.len() as u32).to_le_bytes());
        self.data.extend_from_slice(v.as_bytes());
    }
}

/// Reads the value at `data[*at..]` and moves past it; `None` if the data is cut short.
fn read<'a>(data: &'a [u8], at: &mut usize) -> Option<Value<'a>> {
    let tag = *data.get(*at)?;
    *at += 1;
    let mut eight = || -> Option<[u8; 8]> {
        let b = data.get(*at..*at + 8)?.try_into().ok()?;
        *at += 8;
        Some(b)
    };
    Some(match tag {
        NULL => Value::Null,
        FLOAT => Value::Float(f64::from_le_bytes(eight()?)),
        INT => Value::Int(i64::from_le_bytes(eight()?)),
        UINT => Value::UInt(u64::from_le_bytes(eight()?)),
        FALSE => Value::Bool(false),
        TRUE => Value::Bool(true),
        TEXT => {
            let len = u32::from_le_bytes(data.get(*at..*at + 4)?.try_into().ok()?) as usize;
            *at += 4;
            let t = data.get(*at..*at + len)?;
            *at += len;
            Value::Text(t)
        }
        _ => return None,
    })
}

/// Encodes and routes rows of parsed values into one table.
/// Prepares a service's load of parsed values into one table: the feed's
/// rows hold one value per column of `spec.columns`, in that order.
pub(crate) async fn prepare(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let t = super::one_table(spec, control, progress, None, spec.columns.as_deref()).await?;
    // Parsed already: no format cuts or parses the chunks.
    let kind = Arc::new(ValuesProcessor { encoder: RowEncoder::new(t.plan.targets.clone(), t.ctx), routing: t.routing.clone(), table: 0 });
    Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind))
}

pub(crate) struct ValuesProcessor {
    pub(crate) encoder: RowEncoder,
    pub(crate) routing: Arc<Routing>,
    /// The table's index among the load's.
    pub(crate) table: u16,
}

impl ValuesProcessor {
    /// Appends the row as binary, straight from the values where the column
    /// takes them as they are, else through the value's text and the
    /// encoder; `false` (and `out` as it was) when some value needs more
    /// than that (the server's parser, or a reject): the caller then takes
    /// the row the way a CSV row goes.
    fn fast(&self, values: &[Value<'_>], out: &mut Vec<u8>, text: &mut Vec<u8>, wire: &mut Vec<u8>) -> bool {
        let start = out.len();
        out.extend_from_slice(&(values.len() as i16).to_be_bytes());
        for (i, v) in values.iter().enumerate() {
            let ty = self.encoder.columns[i].ty;
            match (v, ty) {
                (Value::Null, _) => out.extend_from_slice(&(-1i32).to_be_bytes()),
                (Value::Float(f), Some(PgType::Float8)) if f.is_finite() => {
                    out.extend_from_slice(&8i32.to_be_bytes());
                    out.extend_from_slice(&f.to_bits().to_be_bytes());
                }
                (Value::Int(n), Some(PgType::Int8)) => {
                    out.extend_from_slice(&8i32.to_be_bytes());
                    out.extend_from_slice(&n.to_be_bytes());
                }
                // A line's timestamp: the same bytes as its digits through the encoder, without them.
                (Value::Int(n), Some(PgType::Timestamptz | PgType::Timestamp)) if self.encoder.ctx.epoch.is_some() => {
                    if self.encoder.encode_epoch(i, *n, wire) != Some(Ok(())) {
                        out.truncate(start);
                        return false;
                    }
                    out.extend_from_slice(&(wire.len() as i32).to_be_bytes());
                    out.extend_from_slice(wire);
                }
                _ => {
                    v.text(text);
                    if self.encoder.encode_value(i, text, wire).is_err() {
                        out.truncate(start);
                        return false;
                    }
                    out.extend_from_slice(&(wire.len() as i32).to_be_bytes());
                    out.extend_from_slice(wire);
                }
            }
        }
        true
    }
}

impl ValuesProcessor {
    /// An epoch (`digits`, in the load's `--epoch` unit) for a timestamp
    /// column, as the ISO text of the microsecond the encoder reads it as:
    /// a row that goes to the server's parser as text (a value only the
    /// server reads elsewhere in it) then carries a time the server reads,
    /// and reads exactly so. `None`: not a timestamp column, or a value
    /// the encoder refuses (the row is then rejected with its reason).
    fn epoch_as_iso(&self, i: usize, digits: &[u8], wire: &mut Vec<u8>) -> Option<String> {
        let ty = self.encoder.columns[i].ty?;
        if !matches!(ty, PgType::Timestamptz | PgType::Timestamp) {
            return None;
        }
        self.encoder.encode_value(i, digits, wire).ok()?;
        let since_2000 = i64::from_be_bytes(wire.as_slice().try_into().ok()?);
        let at = jiff::Timestamp::from_microsecond(since_2000.checked_add(PG_EPOCH_OFFSET_MICROS)?).ok()?;
        // Years before 1 are written `… BC` by PostgreSQL: left to the epoch text.
        let utc = at.to_zoned(jiff::tz::TimeZone::UTC);
        if utc.year() < 1 {
            return None;
        }
        let offset = if ty == PgType::Timestamptz { "+00" } else { "" };
        Some(format!("{}{offset}", utc.strftime("%Y-%m-%d %H:%M:%S%.6f")))
    }
}

/// 2000-01-01 (PostgreSQL's epoch) in Unix microseconds.
const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

/// Buffers a parse thread reuses from row to row.
#[derive(Default)]
pub(crate) struct RowBufs {
    row: Vec<u8>,
    text: Vec<u8>,
    wire: Vec<u8>,
    fields: Fields,
}

impl ValuesProcessor {
    /// Encodes, routes and files one row of `values` (one a column, in the
    /// encoder's order); `raw` is the record a reject shows.
    pub(crate) fn file_row(&self, values: &[Value<'_>], pos: RowPos, raw: &[u8], rc: &mut RouteCtx, b: &mut RowBufs, filed: &mut Filed) {
        let (encoder, routing) = (&self.encoder, &self.routing);
        b.row.clear();
        if self.fast(values, &mut b.row, &mut b.text, &mut b.wire) {
            let routed = routing.route(rc, &b.row);
            filed.file(routing, routed, self.table, &b.row, raw, pos);
            return;
        }
        // The way the same values written as CSV go.
        b.fields.clear();
        for (i, v) in values.iter().enumerate() {
            if !v.text(&mut b.text) {
                b.fields.push_null();
            } else if let Value::Int(_) = v
                && let Some(iso) = self.epoch_as_iso(i, &b.text, &mut b.wire)
            {
                b.fields.push(iso.as_bytes());
            } else {
                b.fields.push(&b.text);
            }
        }
        match encoder.encode(&b.fields, &mut b.row) {
            RowOutcome::Binary => {
                let routed = routing.route(rc, &b.row);
                filed.file(routing, routed, self.table, &b.row, raw, pos);
            }
            RowOutcome::NeedsServer { .. } => {
                write_text_row(&b.fields, &mut b.row);
                super::super::text_route::file_text_row(encoder, (self.table, routing), rc, &b.fields, &b.row, raw, pos, filed);
            }
            RowOutcome::Invalid { column, reason } => {
                let reason = format!("column {}: {reason}", encoder.columns[column].name);
                filed.rejects.push(Reject::new(pos.input, pos.line, raw.to_vec(), reason));
            }
            RowOutcome::FieldCount { expected, found } => {
                filed.rejects.push(Reject::new(pos.input, pos.line, raw.to_vec(), format!("expected {expected} fields, found {found}")))
            }
        }
    }
}

/// Reads the values of the rows in `data` from `*at`, one row at a time:
/// `None` at the end or where the data is cut short.
pub(crate) fn next_row<'a>(data: &'a [u8], at: &mut usize, columns: usize, values: &mut Vec<Value<'a>>) -> Option<()> {
    values.clear();
    for _ in 0..columns {
        values.push(read(data, at)?);
    }
    Some(())
}

impl Kind for ValuesProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let data = chunk.data();
        let range = chunk.journal_range();
        // Journaled by row index (`Payload::Rows`), else by byte.
        let by_index = matches!(chunk.payload, Payload::Rows { .. });
        let columns = self.encoder.columns.len();
        let mut filed = Filed::default();
        let mut rc = self.routing.ctx();
        let mut bufs = RowBufs::default();
        let mut values: Vec<Value<'_>> = Vec::with_capacity(columns);
        let (mut at, mut line) = (0usize, chunk.first_line);
        while at < data.len() {
            let start = at;
            if next_row(data, &mut at, columns, &mut values).is_none() {
                // Never made by chute serve: the rest of the chunk cannot be read.
                let reason = format!("malformed row data (expected {columns} values)");
                filed.rejects.push(Reject::new(chunk.input, line, Vec::new(), reason));
                break;
            }
            let place = if by_index { line - chunk.first_line } else { start as u64 };
            let pos = RowPos { input: chunk.input, line, offset: chunk.base_offset + place, range };
            line += 1;
            self.file_row(&values, pos, &[], &mut rc, &mut bufs, &mut filed);
        }
        filed.finish(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back_as_written() {
        let mut w = ValueRows::default();
        w.int(-5);
        w.null();
        w.float(1.5);
        w.uint(u64::MAX);
        w.bool(true);
        w.bool(false);
        w.text("a\"b\n");
        let data = w.into_bytes();
        let mut at = 0;
        let mut got = Vec::new();
        while at < data.len() {
            got.push(read(&data, &mut at).expect("a value"));
        }
        assert_eq!(
            got,
            [
                Value::Int(-5),
                Value::Null,
                Value::Float(1.5),
                Value::UInt(u64::MAX),
                Value::Bool(true),
                Value::Bool(false),
                Value::Text(b"a\"b\n")
            ]
        );
        let mut at = data.len() - 3;
        assert_eq!(read(&data, &mut at), None);
    }

    #[test]
    fn text_forms_are_those_of_the_csv_cells() {
        let mut t = Vec::new();
        for (v, want) in [
            (Value::Float(1.0), "1.0"),
            (Value::Float(-0.25), "-0.25"),
            (Value::Float(1e300), "1e300"),
            (Value::Int(-42), "-42"),
            (Value::UInt(18446744073709551615), "18446744073709551615"),
            (Value::Bool(false), "false"),
            (Value::Text(b"x,y"), "x,y"),
        ] {
            assert!(v.text(&mut t));
            assert_eq!(String::from_utf8_lossy(&t), want);
        }
        assert!(!Value::Null.text(&mut t));
    }
}
