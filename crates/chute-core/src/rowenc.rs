//! Turning one parsed record into one binary COPY row.
//!
//! The loader's per-row hot path: the fields of a record (already unescaped
//! by the parser) are encoded in place into the output buffer, one field per
//! target column, with no allocation. When a value's form is one the fast path
//! does not know, the row is instead written in COPY text format, so the
//! server's own input functions decide it: the same answer `psql \copy` gets,
//! never a guess and never a false reject.

use crate::parse::Fields;
use crate::value::{EncodeContext, PgType, ValueError, apply_typmod, encode_fixed_field, encode_text};

/// One target column: its name and how its values are encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetColumn {
    pub name: String,
    pub type_oid: u32,
    /// `None`: a type the client does not encode (every value goes to the
    /// server's parser as text).
    pub ty: Option<PgType>,
    /// `pg_attribute.atttypmod` (`-1`: none): values are rounded to it as
    /// the server stores them, so rows are routed on the stored value.
    pub typmod: i32,
}

/// The result of encoding one record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RowOutcome {
    /// A binary row was appended.
    Binary,
    /// Some value needs the server's parser: the row must travel as text.
    /// `key_needs_server` says whether a routing key column was among them.
    NeedsServer { first: usize },
    /// A value is certainly invalid (PostgreSQL rejects it too).
    Invalid { column: usize, reason: String },
    /// The record has the wrong number of fields.
    FieldCount { expected: usize, found: usize },
}

/// Encodes records into binary COPY rows for a fixed list of target columns.
#[derive(Debug, Clone)]
pub struct RowEncoder {
    pub columns: Vec<TargetColumn>,
    pub ctx: EncodeContext,
    /// How each column's values are written, decided once from its type.
    ops: Vec<Op>,
}

/// How [`RowEncoder::encode_memo`] writes the values of one column.
#[derive(Debug, Clone, Copy)]
enum Op {
    /// A number of fixed size (no typmod changes it): [`encode_fixed_field`].
    Fixed(PgType),
    /// A date or time: its last wire value is remembered ([`Memo`]).
    Time(PgType),
    /// Any other type the client encodes: [`encode_text`], then the typmod.
    Text(PgType),
    /// A type the client does not encode: the row goes to the server.
    Server,
}

impl Op {
    fn of(column: &TargetColumn) -> Op {
        match column.ty {
            None => Op::Server,
            Some(ty @ (PgType::Float8 | PgType::Float4 | PgType::Int2 | PgType::Int4 | PgType::Int8)) => Op::Fixed(ty),
            Some(ty @ (PgType::Timestamptz | PgType::Timestamp | PgType::Date)) => Op::Time(ty),
            Some(ty) => Op::Text(ty),
        }
    }
}

impl RowEncoder {
    pub fn new(columns: Vec<TargetColumn>, ctx: EncodeContext) -> Self {
        let ops = columns.iter().map(Op::of).collect();
        RowEncoder { columns, ctx, ops }
    }

    /// Appends `fields` as one binary row to `out`. On any outcome but
    /// [`RowOutcome::Binary`], `out` is left as it was.
    pub fn encode(&self, fields: &Fields, out: &mut Vec<u8>) -> RowOutcome {
        self.encode_memo(fields, out, &mut Memo::default())
    }

    /// [`RowEncoder::encode`], reusing the wire value of a time column
    /// whose text is the one it had in the row before (`memo`, kept by the
    /// caller across the rows it encodes with this encoder): rows of
    /// time-series data come in groups that share their time (every device
    /// at each tick), and a timestamp is the costliest value to read after
    /// a float.
    pub fn encode_memo(&self, fields: &Fields, out: &mut Vec<u8>, memo: &mut Memo) -> RowOutcome {
        if fields.len() != self.columns.len() {
            return RowOutcome::FieldCount { expected: self.columns.len(), found: fields.len() };
        }
        let start = out.len();
        out.extend_from_slice(&(self.columns.len() as i16).to_be_bytes());
        for (i, op) in self.ops.iter().enumerate() {
            let Some(value) = fields.get(i) else {
                out.extend_from_slice(&(-1i32).to_be_bytes());
                continue;
            };
            let done = match *op {
                Op::Fixed(ty) => encode_fixed_field(ty, value, out),
                Op::Time(ty) => match memo.recall(i, value) {
                    Some(wire) => {
                        out.extend_from_slice(wire);
                        Ok(())
                    }
                    None => self.encode_field(i, ty, value, out).map(|at| memo.keep(i, value, &out[at..])),
                },
                Op::Text(ty) => self.encode_field(i, ty, value, out).map(|_| ()),
                Op::Server => Err(ValueError::NeedsServer),
            };
            match done {
                Ok(()) => {}
                Err(ValueError::NeedsServer) => {
                    out.truncate(start);
                    return RowOutcome::NeedsServer { first: i };
                }
                Err(ValueError::Invalid(reason)) => {
                    out.truncate(start);
                    return RowOutcome::Invalid { column: i, reason };
                }
            }
        }
        RowOutcome::Binary
    }

    /// Appends the value `text` of column `i` (of type `ty`) as a field:
    /// its length word and its bytes, rounded to the column's typmod.
    /// Returns where the field starts in `out`; on an error `out` keeps
    /// only what it had.
    #[inline]
    fn encode_field(&self, i: usize, ty: PgType, text: &[u8], out: &mut Vec<u8>) -> Result<usize, ValueError> {
        let at = out.len();
        out.extend_from_slice(&[0; 4]);
        match encode_text(ty, text, &self.ctx, out).and_then(|()| self.round(&self.columns[i], out, at + 4)) {
            Ok(()) => {
                let len = (out.len() - at - 4) as i32;
                out[at..at + 4].copy_from_slice(&len.to_be_bytes());
                Ok(at)
            }
            Err(e) => {
                out.truncate(at);
                Err(e)
            }
        }
    }

    /// Rounds the value at `out[at..]` to its column's typmod.
    #[inline]
    fn round(&self, col: &TargetColumn, out: &mut Vec<u8>, at: usize) -> Result<(), ValueError> {
        match col.ty {
            Some(ty @ (PgType::Timestamp | PgType::Timestamptz | PgType::Numeric)) if col.typmod >= 0 => {
                apply_typmod(ty, col.typmod, out, at)
            }
            _ => Ok(()),
        }
    }

    /// The wire bytes of one value of column `i` as the fast path encodes
    /// it (typmod applied), into `out` (cleared first).
    pub fn encode_value(&self, i: usize, text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
        out.clear();
        let col = &self.columns[i];
        let ty = col.ty.ok_or(ValueError::NeedsServer)?;
        encode_text(ty, text, &self.ctx, out)?;
        self.round(col, out, 0)
    }
}

impl RowEncoder {
    /// The wire bytes of an integer epoch (`v` units of the context's
    /// `epoch` unit) for a timestamp or timestamptz column `i`, typmod
    /// applied, into `out` (cleared first): the same bytes
    /// [`RowEncoder::encode_value`] gives for the decimal text of `v`.
    /// `None` when the column is of another type or the load reads no
    /// epochs (the caller then goes through the text).
    pub fn encode_epoch(&self, i: usize, v: i64, out: &mut Vec<u8>) -> Option<Result<(), ValueError>> {
        let col = &self.columns[i];
        let unit = self.ctx.epoch?;
        if !matches!(col.ty, Some(PgType::Timestamp | PgType::Timestamptz)) {
            return None;
        }
        out.clear();
        Some(crate::value::epoch_integer(v, unit).and_then(|micros| {
            out.extend_from_slice(&(micros - crate::encode::PG_EPOCH_OFFSET_MICROS).to_be_bytes());
            self.round(col, out, 0)
        }))
    }
}

/// The last text and wire value (length word and bytes) of each time
/// column, for [`RowEncoder::encode_memo`].
#[derive(Debug, Default)]
pub struct Memo {
    /// By column: (text, wire). An empty wire is a column with nothing
    /// kept yet (a kept one holds at least its length word).
    last: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Memo {
    #[inline]
    fn recall(&self, column: usize, text: &[u8]) -> Option<&[u8]> {
        self.last.get(column).filter(|(t, w)| !w.is_empty() && t.as_slice() == text).map(|(_, w)| w.as_slice())
    }

    fn keep(&mut self, column: usize, text: &[u8], wire: &[u8]) {
        if self.last.len() <= column {
            self.last.resize_with(column + 1, Default::default);
        }
        let (t, w) = &mut self.last[column];
        t.clear();
        t.extend_from_slice(text);
        w.clear();
        w.extend_from_slice(wire);
    }
}

/// Appends `fields` as one row of COPY text format (tab-separated, `\N` for
/// NULL, backslash escapes), for rows the server must parse itself.
pub fn write_text_row(fields: &Fields, out: &mut Vec<u8>) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        match f {
            None => out.extend_from_slice(b"\\N"),
            Some(v) => escape_text(v, out),
        }
    }
    out.push(b'\n');
}

fn escape_text(v: &[u8], out: &mut Vec<u8>) {
    for &b in v {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// The byte ranges of each field of one binary row (`None` = NULL), for
/// routing on encoded key values and for splitting batches.
pub fn field_ranges(row: &[u8], ranges: &mut Vec<Option<(usize, usize)>>) -> Option<usize> {
    ranges.clear();
    let n = i16::from_be_bytes(row.get(0..2)?.try_into().ok()?);
    let mut at = 2;
    for _ in 0..n.max(0) {
        let len = i32::from_be_bytes(row.get(at..at + 4)?.try_into().ok()?);
        at += 4;
        if len < 0 {
            ranges.push(None);
        } else {
            let len = len as usize;
            row.get(at..at + len)?;
            ranges.push(Some((at, len)));
            at += len;
        }
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(vals: &[Option<&str>]) -> Fields {
        let mut f = Fields::new();
        for v in vals {
            match v {
                Some(s) => f.push(s.as_bytes()),
                None => f.push_null(),
            }
        }
        f
    }

    fn encoder() -> RowEncoder {
        let col = |n: &str, oid, ty| TargetColumn { name: n.into(), type_oid: oid, ty, typmod: -1 };
        RowEncoder::new(
            vec![col("id", 23, Some(PgType::Int4)), col("note", 25, Some(PgType::Text)), col("tags", 1009, None)],
            EncodeContext::default(),
        )
    }

    #[test]
    fn binary_rows_and_field_ranges() {
        let e = RowEncoder::new(encoder().columns[..2].to_vec(), EncodeContext::default());
        let mut out = vec![9];
        assert_eq!(e.encode(&fields(&[Some("7"), None]), &mut out), RowOutcome::Binary);
        assert_eq!(out, [9, 0, 2, 0, 0, 0, 4, 0, 0, 0, 7, 0xff, 0xff, 0xff, 0xff]);
        let mut r = Vec::new();
        assert_eq!(field_ranges(&out[1..], &mut r), Some(14));
        assert_eq!(r, [Some((6, 4)), None]);
    }

    #[test]
    fn unknown_types_and_bad_values_leave_the_buffer_alone() {
        let e = encoder();
        let mut out = vec![1, 2];
        assert_eq!(e.encode(&fields(&[Some("1"), Some("x"), Some("{a}")]), &mut out), RowOutcome::NeedsServer { first: 2 });
        assert!(matches!(e.encode(&fields(&[Some("1x"), Some("x"), None]), &mut out), RowOutcome::Invalid { column: 0, .. }));
        assert_eq!(e.encode(&fields(&[Some("1")]), &mut out), RowOutcome::FieldCount { expected: 3, found: 1 });
        assert_eq!(out, [1, 2]);
    }

    #[test]
    fn a_remembered_time_is_the_one_encoded_afresh() {
        let col = |n: &str, oid, ty, typmod| TargetColumn { name: n.into(), type_oid: oid, ty: Some(ty), typmod };
        let e = RowEncoder::new(
            vec![col("t", 1184, PgType::Timestamptz, 0), col("d", 1082, PgType::Date, -1), col("v", 701, PgType::Float8, -1)],
            EncodeContext::default(),
        );
        let rows = [
            ["2021-06-01 00:00:00.7+00", "2021-06-01", "1.5"],
            ["2021-06-01 00:00:00.7+00", "2021-06-01", "2.5"],
            ["2021-06-01 00:00:00.7+00", "2021-06-0x", "2.5"],
            ["2021-06-01 00:00:00.7+00", "2021-06-01", "3.5"],
            ["2021-06-01 00:00:01.2+00", "2021-06-02", "4.5"],
            ["2021-06-01 00:00:00.7+00", "2021-06-02", "5.5"],
        ];
        let mut memo = Memo::default();
        for r in rows {
            let f = fields(&r.map(Some));
            let (mut fresh, mut remembered) = (Vec::new(), Vec::new());
            let want = e.encode(&f, &mut fresh);
            assert_eq!(e.encode_memo(&f, &mut remembered, &mut memo), want, "{r:?}");
            assert_eq!(remembered, fresh, "{r:?}");
        }
        // Rounded to the typmod (0: whole seconds) when remembered too: .7 is the next second.
        let mut out = Vec::new();
        e.encode_memo(&fields(&rows[0].map(Some)), &mut out, &mut memo);
        let mut ranges = Vec::new();
        field_ranges(&out, &mut ranges);
        let (at, _) = ranges[0].expect("a time");
        let micros = i64::from_be_bytes(out[at..at + 8].try_into().expect("8 bytes"));
        assert_eq!(micros % 1_000_000, 0);
    }

    #[test]
    fn text_rows_escape_like_copy() {
        let mut out = Vec::new();
        write_text_row(&fields(&[Some("a\tb\\c\nd"), None, Some("")]), &mut out);
        assert_eq!(out, b"a\\tb\\\\c\\nd\t\\N\t\n");
    }

    proptest::proptest! {
        /// A number column's field is its length word and `encode_text`'s
        /// bytes, or the same outcome, for any text (the per-row path skips
        /// `encode_text` for these types).
        #[test]
        fn numbers_encode_as_encode_text_reads_them(text in proptest::prop_oneof![
            "[-+ ]?[0-9]{0,20}(\\.[0-9]{0,20})?([eE][-+]?[0-9]{1,4})? ?",
            "[0-9.eE+-]{0,12}",
            proptest::prelude::any::<String>(),
            proptest::sample::select(["NaN", "-Infinity", "inf", "1e400", "1e-400", "4.9e-324", "32768", "-2147483649", "9223372036854775808"].map(String::from).to_vec()),
        ], t in 0usize..5) {
            let ty = [PgType::Float8, PgType::Float4, PgType::Int2, PgType::Int4, PgType::Int8][t];
            let e = RowEncoder::new(vec![TargetColumn { name: "v".into(), type_oid: 0, ty: Some(ty), typmod: -1 }], EncodeContext::default());
            let mut row = Vec::new();
            let got = e.encode(&fields(&[Some(&text)]), &mut row);
            let mut want = Vec::new();
            match encode_text(ty, text.as_bytes(), &e.ctx, &mut want) {
                Ok(()) => {
                    proptest::prop_assert_eq!(got, RowOutcome::Binary);
                    proptest::prop_assert_eq!(&row[2..6], &(want.len() as i32).to_be_bytes());
                    proptest::prop_assert_eq!(&row[6..], &want[..]);
                }
                Err(ValueError::NeedsServer) => proptest::prop_assert_eq!(got, RowOutcome::NeedsServer { first: 0 }),
                Err(ValueError::Invalid(reason)) => proptest::prop_assert_eq!(got, RowOutcome::Invalid { column: 0, reason }),
            }
        }

        /// An integer epoch gives the bytes (or the error) its decimal text gives, in every unit and typmod.
        #[test]
        fn integer_epochs_encode_like_their_text(v in proptest::prop_oneof![
            proptest::num::i64::ANY,
            -300_000_000_000_000_000i64..300_000_000_000_000_000i64,
            -5_000i64..5_000,
        ], unit in 0usize..4, typmod in -1i32..7, tz in proptest::bool::ANY) {
            use crate::value::EpochUnit;
            let unit = [EpochUnit::Seconds, EpochUnit::Millis, EpochUnit::Micros, EpochUnit::Nanos][unit];
            let ty = if tz { PgType::Timestamptz } else { PgType::Timestamp };
            let e = RowEncoder::new(
                vec![TargetColumn { name: "t".into(), type_oid: 1184, ty: Some(ty), typmod }],
                EncodeContext { epoch: Some(unit), ..EncodeContext::default() },
            );
            let (mut direct, mut text) = (Vec::new(), Vec::new());
            let got = e.encode_epoch(0, v, &mut direct).expect("a timestamp column");
            let want = e.encode_value(0, v.to_string().as_bytes(), &mut text);
            proptest::prop_assert_eq!(&got, &want);
            if got.is_ok() {
                proptest::prop_assert_eq!(direct, text);
            }
        }
    }

    #[test]
    fn integer_epochs_round_halves_away_from_zero_like_their_text() {
        use crate::value::EpochUnit;
        let edges = [-1_500, -1_499, -501, -500, -499, -1, 0, 1, 499, 500, 501, 1_499, 1_500, 999_999_500, i64::MIN, i64::MAX];
        for unit in [EpochUnit::Seconds, EpochUnit::Millis, EpochUnit::Micros, EpochUnit::Nanos] {
            for typmod in [-1, 0, 3] {
                let e = RowEncoder::new(
                    vec![TargetColumn { name: "t".into(), type_oid: 1184, ty: Some(PgType::Timestamptz), typmod }],
                    EncodeContext { epoch: Some(unit), ..EncodeContext::default() },
                );
                for v in edges {
                    let (mut direct, mut text) = (Vec::new(), Vec::new());
                    let got = e.encode_epoch(0, v, &mut direct).expect("a timestamp column");
                    assert_eq!(got, e.encode_value(0, v.to_string().as_bytes(), &mut text), "{v} {unit:?} {typmod}");
                    assert_eq!(direct, text, "{v} {unit:?} {typmod}");
                }
            }
        }
    }

    #[test]
    fn epochs_go_direct_only_into_timestamps() {
        let mut out = Vec::new();
        assert!(encoder().encode_epoch(0, 5, &mut out).is_none());
        let e = RowEncoder::new(
            vec![TargetColumn { name: "t".into(), type_oid: 1184, ty: Some(PgType::Timestamptz), typmod: -1 }],
            EncodeContext::default(),
        );
        assert!(e.encode_epoch(0, 5, &mut out).is_none(), "no --epoch: the number is not a time");
    }
}
