//! Arrow arrays into PostgreSQL's binary COPY form, value by value, with no
//! text on the way.
//!
//! Parquet files, Arrow IPC files and streams, and the data frames of
//! pyarrow, polars and pandas all hold typed columns. chute writes each
//! value's binary wire form straight from its array: an `int64` is eight
//! bytes, a `timestamp[us, UTC]` becomes microseconds since 2000, a
//! `decimal128(10, 2)` becomes `numeric_send`'s base-10000 digits. The rule
//! is the one the text formats follow (see `value`): **a column loads into
//! exactly what `psql \copy` of the same data exported as CSV would give.**
//! Where that reading is not obvious it is PostgreSQL's:
//! - a fraction of a microsecond (nanosecond timestamps, times, durations)
//!   is rounded as the server rounds the text `….123456789`:
//!   `rint(strtod(fraction) * 1e6)`, half to even after the binary rounding;
//! - a timestamp without a time zone into a `timestamptz` column is wall
//!   time in the session's `TimeZone`, a timestamp with one into a
//!   `timestamp` column is its UTC wall time (the server ignores the offset);
//! - a `float64` into a `real` column is rounded through its shortest text,
//!   as `float4in` would read it, and refused beyond `real`'s range;
//! - a column's type modifier rounds timestamps and numerics before the row
//!   is routed (the value the server stores decides its partition).
//!
//! Which Arrow type goes into which column type is decided once per load,
//! before any row moves ([`check`]): a pairing that makes no sense is
//! refused with the column, both types and the cast to use. A string goes
//! into any column: through the fast text encoders where they know the
//! form, else the row travels as text and the server parses it (every type
//! has a text form, [`Values::text`], for such rows and for reject files).
//! Structs, maps and lists go into `json`/`jsonb` as JSON ([`Values::json`]),
//! lists into arrays of any element type chute encodes.

mod nested;
mod scalar;
mod temporal;

use std::fmt;

use arrow_array::Array;
use arrow_schema::{DataType, Field, IntervalUnit, TimeUnit};

use crate::value::{EncodeContext, PgType};

/// A column's type as the Arrow encoder sees it (domains resolved to their
/// base type by the caller).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pg {
    /// A type the text encoders know (`value::PgType`); text-like types of
    /// extensions and enums (whose binary form is their text) come as `Text`.
    Known(PgType),
    Time,
    Interval,
    /// An array of `elem` (`elem_oid` is written into every array value).
    Array {
        elem: Box<Pg>,
        elem_oid: u32,
    },
    /// Any other type: only strings go in, parsed by the server.
    Other,
}

/// One target column, for the encoder and its messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgColumn {
    pub name: String,
    /// `format_type` of the column, e.g. `timestamp with time zone`.
    pub type_name: String,
    pub pg: Pg,
    /// `atttypmod` (`-1`: none).
    pub typmod: i32,
}

/// Why a value is not written in binary.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bad {
    /// Only the server can read it: the row travels as text.
    NeedsServer,
    /// PostgreSQL refuses this value: its message and SQLSTATE.
    Invalid { message: String, sqlstate: &'static str },
}

impl Bad {
    pub(crate) fn invalid(message: impl Into<String>, sqlstate: &'static str) -> Bad {
        Bad::Invalid { message: message.into(), sqlstate }
    }
}

/// `numeric_value_out_of_range`: integers and floats beyond their type.
pub(crate) const OUT_OF_RANGE: &str = "22003";
/// `datetime_field_overflow`: dates, times and timestamps beyond their type.
pub(crate) const DATETIME_OVERFLOW: &str = "22008";
/// `array_subscript_error`: a multidimensional array that is not rectangular.
pub(crate) const ARRAY_SHAPE: &str = "2202E";

/// The values of one array bound to the column they go into: made once
/// per record batch ([`bind`]), then asked value by value.
pub trait Values {
    fn is_null(&self, i: usize) -> bool;
    /// Appends the binary wire form of value `i` (not NULL), without its
    /// length word. On `Err`, `out` is as it was.
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad>;
    /// Appends value `i` (not NULL) as the column's input function reads it.
    fn text(&self, i: usize, out: &mut Vec<u8>);
    /// Appends value `i` (not NULL) as a JSON value.
    fn json(&self, i: usize, out: &mut Vec<u8>);
}

/// A pairing of an Arrow type and a column that chute does not load, with
/// the casts that would make it load.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub column: String,
    pub column_type: String,
    pub arrow: String,
    /// An Arrow type the column takes.
    pub arrow_fix: String,
    /// A column type the data's type goes into.
    pub column_fix: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "column {:?} is {}, but the data's {:?} is {}, which chute does not load into it: cast the data's column to {} \
             (pyarrow.compute.cast, polars' cast), or change the column's type to {} (ALTER TABLE … ALTER COLUMN {} TYPE {} USING {}::{})",
            self.column,
            self.column_type,
            self.column,
            self.arrow,
            self.arrow_fix,
            self.column_fix,
            crate::ident::quote_ident(&self.column),
            self.column_fix,
            crate::ident::quote_ident(&self.column),
            self.column_fix,
        )
    }
}

/// Whether values of `data` go into `column`, checked before any row moves.
pub fn check(data: &Field, column: &PgColumn) -> Result<(), Refusal> {
    if fits(data.data_type(), &column.pg) {
        return Ok(());
    }
    Err(Refusal {
        column: column.name.clone(),
        column_type: column.type_name.clone(),
        arrow: type_name(data.data_type()),
        arrow_fix: arrow_for(&column.pg),
        column_fix: natural_type(data),
    })
}

fn fits(dt: &DataType, pg: &Pg) -> bool {
    use DataType as D;
    use PgType as T;
    let known = match pg {
        Pg::Known(t) => Some(*t),
        _ => None,
    };
    let json = matches!(known, Some(T::Json | T::Jsonb));
    match dt {
        D::Null => true,
        D::Dictionary(_, values) => fits(values, pg),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => true,
        _ if json => has_json(dt),
        D::Int8 | D::Int16 | D::Int32 | D::Int64 | D::UInt8 | D::UInt16 | D::UInt32 | D::UInt64 => {
            matches!(known, Some(T::Int2 | T::Int4 | T::Int8 | T::Float4 | T::Float8 | T::Numeric))
        }
        D::Float16 | D::Float32 | D::Float64 | D::Decimal32(..) | D::Decimal64(..) | D::Decimal128(..) | D::Decimal256(..) => {
            matches!(known, Some(T::Float4 | T::Float8 | T::Numeric))
        }
        D::Boolean => known == Some(T::Bool),
        D::Binary | D::LargeBinary | D::BinaryView => known == Some(T::Bytea),
        D::FixedSizeBinary(n) => known == Some(T::Bytea) || (*n == 16 && known == Some(T::Uuid)),
        D::Date32 | D::Date64 => known == Some(T::Date),
        D::Time32(_) | D::Time64(_) => *pg == Pg::Time,
        D::Timestamp(..) => matches!(known, Some(T::Timestamp | T::Timestamptz)),
        D::Duration(_) | D::Interval(_) => *pg == Pg::Interval,
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) | D::ListView(f) | D::LargeListView(f) => match pg {
            Pg::Array { elem, .. } => fits_element(f.data_type(), elem),
            _ => false,
        },
        _ => false,
    }
}

/// An array's elements: a list of lists is a multidimensional array of the
/// innermost type.
fn fits_element(dt: &DataType, elem: &Pg) -> bool {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::ListView(f) | DataType::LargeListView(f) => {
            fits_element(f.data_type(), elem)
        }
        _ => !matches!(elem, Pg::Array { .. } | Pg::Other) && fits(dt, elem),
    }
}

/// Whether chute writes values of `dt` as JSON.
fn has_json(dt: &DataType) -> bool {
    use DataType as D;
    match dt {
        D::Null
        | D::Boolean
        | D::Int8
        | D::Int16
        | D::Int32
        | D::Int64
        | D::UInt8
        | D::UInt16
        | D::UInt32
        | D::UInt64
        | D::Float16
        | D::Float32
        | D::Float64
        | D::Decimal32(..)
        | D::Decimal64(..)
        | D::Decimal128(..)
        | D::Decimal256(..)
        | D::Utf8
        | D::LargeUtf8
        | D::Utf8View
        | D::Binary
        | D::LargeBinary
        | D::BinaryView
        | D::FixedSizeBinary(_)
        | D::Date32
        | D::Date64
        | D::Time32(_)
        | D::Time64(_)
        | D::Timestamp(..)
        | D::Duration(_)
        | D::Interval(_) => true,
        D::Dictionary(_, v) => has_json(v),
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) | D::ListView(f) | D::LargeListView(f) => has_json(f.data_type()),
        D::Struct(fields) => fields.iter().all(|f| has_json(f.data_type())),
        D::Map(entries, _) => has_json(entries.data_type()),
        _ => false,
    }
}

/// The columns pandas added to hold a data frame's index when pyarrow
/// converted it (`Table.from_pandas`, `DataFrame.to_parquet`): those the
/// schema's `pandas` metadata names in `index_columns`, and any named
/// `__index_level_N__`. A filtered frame's index (`df[df.x > 1]`) is such
/// a column; it is data only when the table has a column of its name.
pub fn pandas_index_columns(schema: &arrow_schema::Schema) -> Vec<String> {
    let named: Vec<String> = schema
        .metadata()
        .get("pandas")
        .and_then(|m| serde_json::from_str::<serde_json::Value>(m).ok())
        .and_then(|m| {
            // A RangeIndex is described, not stored: its entry is an object, not a name.
            m.get("index_columns").and_then(|i| i.as_array()).map(|i| i.iter().filter_map(|c| c.as_str().map(str::to_owned)).collect())
        })
        .unwrap_or_default();
    let level = |n: &str| {
        n.strip_prefix("__index_level_")
            .and_then(|r| r.strip_suffix("__"))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    schema.fields().iter().map(|f| f.name()).filter(|n| named.contains(n) || level(n)).cloned().collect()
}

/// The column type a field's values load into as they are: what `--create`
/// makes, and what a refusal suggests.
pub fn natural_type(field: &Field) -> String {
    let uuid = field.metadata().get("ARROW:extension:name").is_some_and(|n| n == "arrow.uuid");
    if uuid {
        return "uuid".into();
    }
    natural(field.data_type())
}

fn natural(dt: &DataType) -> String {
    use DataType as D;
    match dt {
        D::Int8 | D::Int16 | D::UInt8 => "smallint".into(),
        D::Int32 | D::UInt16 => "integer".into(),
        D::Int64 | D::UInt32 => "bigint".into(),
        D::UInt64 => "numeric(20,0)".into(),
        D::Float16 | D::Float32 => "real".into(),
        D::Float64 => "double precision".into(),
        D::Decimal32(p, s) | D::Decimal64(p, s) | D::Decimal128(p, s) | D::Decimal256(p, s) => format!("numeric({p},{s})"),
        D::Boolean => "boolean".into(),
        D::Utf8 | D::LargeUtf8 | D::Utf8View | D::Null => "text".into(),
        D::Binary | D::LargeBinary | D::BinaryView | D::FixedSizeBinary(_) => "bytea".into(),
        D::Date32 | D::Date64 => "date".into(),
        D::Time32(TimeUnit::Second) => "time(0)".into(),
        D::Time32(TimeUnit::Millisecond) => "time(3)".into(),
        D::Time32(_) | D::Time64(_) => "time".into(),
        D::Timestamp(_, None) => "timestamp".into(),
        D::Timestamp(_, Some(_)) => "timestamptz".into(),
        D::Duration(_) | D::Interval(_) => "interval".into(),
        D::Dictionary(_, v) => natural(v),
        D::List(f) | D::LargeList(f) | D::FixedSizeList(f, _) | D::ListView(f) | D::LargeListView(f) => {
            let inner = natural_element(f.data_type());
            if inner == "jsonb" { inner } else { format!("{inner}[]") }
        }
        _ => "jsonb".into(),
    }
}

/// An array column's element type (lists of lists are more dimensions of it).
fn natural_element(dt: &DataType) -> String {
    match dt {
        DataType::List(f) | DataType::LargeList(f) | DataType::FixedSizeList(f, _) | DataType::ListView(f) | DataType::LargeListView(f) => {
            natural_element(f.data_type())
        }
        DataType::Struct(_) | DataType::Map(..) => "jsonb".into(),
        other => natural(other),
    }
}

/// An Arrow type (as pyarrow spells it) whose values go into a column of `pg`.
fn arrow_for(pg: &Pg) -> String {
    use PgType as T;
    match pg {
        Pg::Known(T::Bool) => "bool".into(),
        Pg::Known(T::Int2) => "int16".into(),
        Pg::Known(T::Int4) => "int32".into(),
        Pg::Known(T::Int8) => "int64".into(),
        Pg::Known(T::Float4) => "float32".into(),
        Pg::Known(T::Float8) => "float64".into(),
        Pg::Known(T::Numeric) => "a decimal128(precision, scale)".into(),
        Pg::Known(T::Bytea) => "binary".into(),
        Pg::Known(T::Uuid) => "fixed_size_binary(16)".into(),
        Pg::Known(T::Date) => "date32".into(),
        Pg::Known(T::Timestamp) => "timestamp(\"us\")".into(),
        Pg::Known(T::Timestamptz) => "timestamp(\"us\", tz=\"UTC\")".into(),
        Pg::Known(T::Json | T::Jsonb) => "string (JSON text), a struct or a map".into(),
        Pg::Known(T::Text | T::Varchar | T::Bpchar | T::Name) | Pg::Other => "string".into(),
        Pg::Time => "time64(\"us\")".into(),
        Pg::Interval => "duration(\"us\")".into(),
        Pg::Array { elem, .. } => format!("list<{}>", arrow_for(elem)),
    }
}

/// An Arrow type as pyarrow prints it (`timestamp[ns, tz=UTC]`, `list<item: int64>`).
pub fn type_name(dt: &DataType) -> String {
    use DataType as D;
    let unit = |u: &TimeUnit| match u {
        TimeUnit::Second => "s",
        TimeUnit::Millisecond => "ms",
        TimeUnit::Microsecond => "us",
        TimeUnit::Nanosecond => "ns",
    };
    match dt {
        D::Null => "null".into(),
        D::Boolean => "bool".into(),
        D::Int8 => "int8".into(),
        D::Int16 => "int16".into(),
        D::Int32 => "int32".into(),
        D::Int64 => "int64".into(),
        D::UInt8 => "uint8".into(),
        D::UInt16 => "uint16".into(),
        D::UInt32 => "uint32".into(),
        D::UInt64 => "uint64".into(),
        D::Float16 => "halffloat".into(),
        D::Float32 => "float".into(),
        D::Float64 => "double".into(),
        D::Decimal32(p, s) | D::Decimal64(p, s) | D::Decimal128(p, s) | D::Decimal256(p, s) => format!("decimal({p}, {s})"),
        D::Utf8 => "string".into(),
        D::LargeUtf8 => "large_string".into(),
        D::Utf8View => "string_view".into(),
        D::Binary => "binary".into(),
        D::LargeBinary => "large_binary".into(),
        D::BinaryView => "binary_view".into(),
        D::FixedSizeBinary(n) => format!("fixed_size_binary[{n}]"),
        D::Date32 => "date32".into(),
        D::Date64 => "date64".into(),
        D::Time32(u) => format!("time32[{}]", unit(u)),
        D::Time64(u) => format!("time64[{}]", unit(u)),
        D::Timestamp(u, None) => format!("timestamp[{}]", unit(u)),
        D::Timestamp(u, Some(tz)) => format!("timestamp[{}, tz={tz}]", unit(u)),
        D::Duration(u) => format!("duration[{}]", unit(u)),
        D::Interval(IntervalUnit::YearMonth) => "month_interval".into(),
        D::Interval(IntervalUnit::DayTime) => "day_time_interval".into(),
        D::Interval(IntervalUnit::MonthDayNano) => "month_day_nano_interval".into(),
        D::List(f) | D::ListView(f) => format!("list<{}>", type_name(f.data_type())),
        D::LargeList(f) | D::LargeListView(f) => format!("large_list<{}>", type_name(f.data_type())),
        D::FixedSizeList(f, n) => format!("fixed_size_list<{}>[{n}]", type_name(f.data_type())),
        D::Struct(fields) => {
            let inner: Vec<String> = fields.iter().map(|f| format!("{}: {}", f.name(), type_name(f.data_type()))).collect();
            format!("struct<{}>", inner.join(", "))
        }
        D::Map(..) => "map".into(),
        D::Dictionary(k, v) => format!("dictionary<values={}, indices={}>", type_name(v), type_name(k)),
        other => format!("{other}"),
    }
}

/// Binds `array` to the column it goes into: `check` said they fit.
pub fn bind<'a>(array: &'a dyn Array, column: &'a PgColumn, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    bind_to(array, &column.pg, column.typmod, ctx)
}

/// What values bound only for their JSON text are bound to.
pub(crate) static JSON: Pg = Pg::Known(PgType::Json);

/// [`bind`] for a column (or an array's elements) of `pg` with `typmod`.
pub(crate) fn bind_to<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    use DataType as D;
    let json = matches!(pg, Pg::Known(PgType::Json | PgType::Jsonb));
    match array.data_type() {
        D::Null => Box::new(scalar::Nulls),
        D::Dictionary(..) => nested::dictionary(array, pg, typmod, ctx),
        D::Utf8 | D::LargeUtf8 | D::Utf8View => scalar::bind(array, pg, typmod, ctx),
        // Anything else into json: its JSON text.
        _ if json => {
            let inner = bind_plain(array, &JSON, -1, ctx);
            Box::new(nested::AsJson { inner, jsonb: *pg == Pg::Known(PgType::Jsonb) })
        }
        _ => bind_plain(array, pg, typmod, ctx),
    }
}

/// [`bind_to`] by the array's own type, never wrapped for JSON.
fn bind_plain<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    use DataType as D;
    match array.data_type() {
        D::Null => Box::new(scalar::Nulls),
        D::Dictionary(..) => nested::dictionary(array, pg, typmod, ctx),
        D::List(_) | D::LargeList(_) | D::FixedSizeList(..) | D::ListView(_) | D::LargeListView(_) => nested::list(array, pg, typmod, ctx),
        D::Struct(_) | D::Map(..) => nested::object(array, pg, ctx),
        D::Date32 | D::Date64 | D::Time32(_) | D::Time64(_) | D::Timestamp(..) | D::Duration(_) | D::Interval(_) => {
            temporal::bind(array, pg, typmod, ctx)
        }
        _ => scalar::bind(array, pg, typmod, ctx),
    }
}

/// Appends `s` as a JSON string.
pub(crate) fn json_string(s: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0..=0x1f => {
                use std::io::Write as _;
                let _ = write!(out, "\\u{b:04x}");
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

/// Appends one binary field (length word and value) for value `i` of `v`,
/// or -1 for NULL.
pub fn write_field(v: &dyn Values, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
    if v.is_null(i) {
        out.extend_from_slice(&(-1i32).to_be_bytes());
        return Ok(());
    }
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    match v.wire(i, out) {
        Ok(()) => {
            let len = (out.len() - at - 4) as i32;
            out[at..at + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Err(e) => {
            out.truncate(at);
            Err(e)
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow_schema::{DataType, Field, Schema};

    #[test]
    fn pandas_index_columns_are_those_its_metadata_names_or_named_like_them() {
        let fields = ["time", "__index_level_0__", "city", "__index_level_x__", "value"].map(|n| Field::new(n, DataType::Int64, true));
        let plain = Schema::new(fields.to_vec());
        assert_eq!(super::pandas_index_columns(&plain), vec!["__index_level_0__"]);
        let meta = r#"{"index_columns": ["city", {"kind": "range", "start": 0, "stop": 3, "step": 1}], "columns": []}"#;
        let named = Schema::new_with_metadata(fields.to_vec(), HashMap::from([("pandas".to_owned(), meta.to_owned())]));
        assert_eq!(super::pandas_index_columns(&named), vec!["__index_level_0__", "city"]);
        let broken = Schema::new_with_metadata(fields.to_vec(), HashMap::from([("pandas".to_owned(), "{not json".to_owned())]));
        assert_eq!(super::pandas_index_columns(&broken), vec!["__index_level_0__"]);
    }
}
