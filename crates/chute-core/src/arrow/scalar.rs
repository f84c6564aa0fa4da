//! Numbers, booleans, strings and bytes.
//!
//! Integers go into integer columns as their bytes (refused beyond the
//! column's range with the server's message), into `real` and `double
//! precision` rounded once to nearest as `strtof`/`strtod` round their
//! digits, and into `numeric` through their digits. Floats keep their bits
//! where the column is as wide; a `float32` into `double precision` is its
//! shortest digits read as a double (0.1f32 is 0.1, as `float8in` reads the
//! CSV cell `0.1`), and a `float64` into `real` is rounded through its
//! shortest text, as `float4in` reads it. Decimals become `numeric` through
//! their digits with the scale as written (`decimal(10,2)` 1.50 is `1.50`).
//! Strings go through the text encoders of `value` (the server's parser
//! where those do not know the form); bytes are `bytea` or, 16 of them,
//! `uuid`.

use std::io::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Decimal32Type, Decimal64Type, Decimal128Type, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    UInt8Type, UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray};
use arrow_schema::DataType;

use super::{Bad, OUT_OF_RANGE, Pg, Values, json_string};
use crate::value::{EncodeContext, PgType, ValueError, apply_typmod, encode_text};

/// Binds the scalar array types (and strings to any column).
pub(super) fn bind<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    use DataType as D;
    match array.data_type() {
        D::Int8 => Box::new(Ints { a: array.as_primitive::<Int8Type>(), pg, typmod }),
        D::Int16 => Box::new(Ints { a: array.as_primitive::<Int16Type>(), pg, typmod }),
        D::Int32 => Box::new(Ints { a: array.as_primitive::<Int32Type>(), pg, typmod }),
        D::Int64 => Box::new(Ints { a: array.as_primitive::<Int64Type>(), pg, typmod }),
        D::UInt8 => Box::new(Ints { a: array.as_primitive::<UInt8Type>(), pg, typmod }),
        D::UInt16 => Box::new(Ints { a: array.as_primitive::<UInt16Type>(), pg, typmod }),
        D::UInt32 => Box::new(Ints { a: array.as_primitive::<UInt32Type>(), pg, typmod }),
        D::UInt64 => Box::new(Ints { a: array.as_primitive::<UInt64Type>(), pg, typmod }),
        D::Float16 => Box::new(Half { a: array.as_primitive::<Float16Type>(), pg, typmod }),
        D::Float32 => Box::new(Floats { a: array.as_primitive::<Float32Type>(), pg, typmod }),
        D::Float64 => Box::new(Floats { a: array.as_primitive::<Float64Type>(), pg, typmod }),
        D::Decimal32(_, s) => Box::new(Decimals { a: array.as_primitive::<Decimal32Type>(), scale: *s, pg, typmod }),
        D::Decimal64(_, s) => Box::new(Decimals { a: array.as_primitive::<Decimal64Type>(), scale: *s, pg, typmod }),
        D::Decimal128(_, s) => Box::new(Decimals { a: array.as_primitive::<Decimal128Type>(), scale: *s, pg, typmod }),
        D::Decimal256(_, s) => Box::new(Decimal256s { a: array.as_primitive(), scale: *s, pg, typmod }),
        D::Boolean => Box::new(Bools { a: array.as_boolean() }),
        D::Utf8 => Box::new(Strings { a: array.as_string::<i32>(), pg, typmod, ctx }),
        D::LargeUtf8 => Box::new(Strings { a: array.as_string::<i64>(), pg, typmod, ctx }),
        D::Utf8View => Box::new(Strings { a: array.as_string_view(), pg, typmod, ctx }),
        D::Binary => Box::new(Bytes { a: array.as_binary::<i32>(), pg }),
        D::LargeBinary => Box::new(Bytes { a: array.as_binary::<i64>(), pg }),
        D::BinaryView => Box::new(Bytes { a: array.as_binary_view(), pg }),
        D::FixedSizeBinary(_) => Box::new(Bytes { a: array.as_fixed_size_binary(), pg }),
        _ => Box::new(Unsupported),
    }
}

/// A column `check` did not let through: never bound in a load.
pub(super) struct Unsupported;

impl Values for Unsupported {
    fn is_null(&self, _: usize) -> bool {
        true
    }
    fn wire(&self, _: usize, _: &mut Vec<u8>) -> Result<(), Bad> {
        Err(Bad::invalid("chute does not load this type", "0A000"))
    }
    fn text(&self, _: usize, _: &mut Vec<u8>) {}
    fn json(&self, _: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(b"null");
    }
}

/// An all-NULL column (Arrow's `null` type).
pub(super) struct Nulls;

impl Values for Nulls {
    fn is_null(&self, _: usize) -> bool {
        true
    }
    fn wire(&self, _: usize, _: &mut Vec<u8>) -> Result<(), Bad> {
        Ok(())
    }
    fn text(&self, _: usize, _: &mut Vec<u8>) {}
    fn json(&self, _: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(b"null");
    }
}

/// A value went where `check` would not have sent it (a bug, not data).
fn unexpected(pg: &Pg) -> Bad {
    Bad::invalid(format!("chute cannot write this value into a column of {pg:?}"), "XX000")
}

/// Rounds a timestamp or numeric wire value at `out[at..]` to the column's
/// type modifier; a value the modifier makes the server refuse is refused.
pub(super) fn round(ty: PgType, typmod: i32, out: &mut Vec<u8>, at: usize) -> Result<(), Bad> {
    match apply_typmod(ty, typmod, out, at) {
        Ok(()) => Ok(()),
        Err(_) if ty == PgType::Numeric => Err(Bad::invalid("numeric field overflow", OUT_OF_RANGE)),
        Err(_) => Err(Bad::invalid("timestamp out of range", super::DATETIME_OVERFLOW)),
    }
}

/// `numeric_in` of `text` (digits chute wrote: never refused), rounded to the typmod.
fn numeric(text: &[u8], typmod: i32, out: &mut Vec<u8>) -> Result<(), Bad> {
    let at = out.len();
    match encode_text(PgType::Numeric, text, &EncodeContext::default(), out) {
        Ok(()) => round(PgType::Numeric, typmod, out, at),
        // Beyond the fast path's limits: the server reads the digits.
        Err(ValueError::NeedsServer) => Err(Bad::NeedsServer),
        Err(ValueError::Invalid(m)) => Err(Bad::invalid(m, "22P02")),
    }
}

/// `float4in`/`float8in` of `text` (a number chute wrote), refused out of range.
fn float_text(ty: PgType, text: &[u8], out: &mut Vec<u8>) -> Result<(), Bad> {
    match encode_text(ty, text, &EncodeContext::default(), out) {
        Ok(()) => Ok(()),
        Err(ValueError::NeedsServer) => Err(Bad::NeedsServer),
        Err(ValueError::Invalid(m)) => Err(Bad::invalid(m, OUT_OF_RANGE)),
    }
}

/// Integer types, widened without loss.
pub(super) trait Wide: Copy {
    fn wide(self) -> i128;
}

macro_rules! wide {
    ($($t:ty),*) => { $(impl Wide for $t { #[inline] fn wide(self) -> i128 { self as i128 } })* };
}
wide!(i8, i16, i32, i64, u8, u16, u32, u64, i128);

struct Ints<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    pg: &'a Pg,
    typmod: i32,
}

impl<T: ArrowPrimitiveType> Values for Ints<'_, T>
where
    T::Native: Wide,
{
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }

    #[inline]
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let v = self.a.value(i).wide();
        let range = |name: &str| Bad::invalid(format!("value \"{v}\" is out of range for type {name}"), OUT_OF_RANGE);
        match self.pg {
            Pg::Known(PgType::Int8) => out.extend_from_slice(&i64::try_from(v).map_err(|_| range("bigint"))?.to_be_bytes()),
            Pg::Known(PgType::Int4) => out.extend_from_slice(&i32::try_from(v).map_err(|_| range("integer"))?.to_be_bytes()),
            Pg::Known(PgType::Int2) => out.extend_from_slice(&i16::try_from(v).map_err(|_| range("smallint"))?.to_be_bytes()),
            Pg::Known(PgType::Float8) => out.extend_from_slice(&(v as f64).to_bits().to_be_bytes()),
            Pg::Known(PgType::Float4) => out.extend_from_slice(&(v as f32).to_bits().to_be_bytes()),
            Pg::Known(PgType::Numeric) => numeric(v.to_string().as_bytes(), self.typmod, out)?,
            other => return Err(unexpected(other)),
        }
        Ok(())
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let _ = write!(out, "{}", self.a.value(i).wide());
    }

    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.text(i, out)
    }
}

/// A float as PostgreSQL's input functions read it: `NaN`, `Infinity`,
/// `-Infinity`, or the shortest digits that read back as the same value.
fn float_text_form(v: f64, single: bool, out: &mut Vec<u8>) {
    if v.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if v.is_infinite() {
        out.extend_from_slice(if v > 0.0 { b"Infinity" } else { b"-Infinity" });
    } else if single {
        let _ = write!(out, "{:?}", v as f32);
    } else {
        let _ = write!(out, "{v:?}");
    }
}

/// A float's digits without an exponent (`numeric_in`'s display scale is
/// the digits after the point as written, and a CSV export writes none for
/// a whole number).
fn float_digits(v: f64, single: bool, out: &mut Vec<u8>) {
    if v.is_nan() || v.is_infinite() {
        float_text_form(v, single, out);
    } else if single {
        let _ = write!(out, "{}", v as f32);
    } else {
        let _ = write!(out, "{v}");
    }
}

/// A float into a column of `pg`: `value` is the float, `single` whether
/// Arrow holds it in 32 bits (then it is exact as an f32).
fn float_wire(v: f64, single: bool, pg: &Pg, typmod: i32, out: &mut Vec<u8>) -> Result<(), Bad> {
    match pg {
        // A float32 is read as its shortest digits, as float8in reads a CSV cell of it.
        Pg::Known(PgType::Float8) if single && v.is_finite() => {
            let widened: f64 = format!("{:?}", v as f32).parse().unwrap_or(v);
            out.extend_from_slice(&widened.to_bits().to_be_bytes())
        }
        Pg::Known(PgType::Float8) => out.extend_from_slice(&v.to_bits().to_be_bytes()),
        Pg::Known(PgType::Float4) if single => out.extend_from_slice(&(v as f32).to_bits().to_be_bytes()),
        Pg::Known(PgType::Float4) => {
            let mut text = Vec::with_capacity(32);
            float_text_form(v, false, &mut text);
            float_text(PgType::Float4, &text, out)?;
        }
        Pg::Known(PgType::Numeric) => {
            let mut text = Vec::with_capacity(32);
            float_digits(v, single, &mut text);
            numeric(&text, typmod, out)?;
        }
        other => return Err(unexpected(other)),
    }
    Ok(())
}

fn float_json(v: f64, single: bool, out: &mut Vec<u8>) {
    if v.is_finite() {
        float_text_form(v, single, out);
    } else {
        // JSON has no NaN or infinities: their names, as strings.
        out.push(b'"');
        float_text_form(v, single, out);
        out.push(b'"');
    }
}

/// Floating-point types: the value and whether it is single precision.
pub(super) trait Float: Copy {
    const SINGLE: bool;
    fn f64(self) -> f64;
}

impl Float for f32 {
    const SINGLE: bool = true;
    fn f64(self) -> f64 {
        f64::from(self)
    }
}

impl Float for f64 {
    const SINGLE: bool = false;
    fn f64(self) -> f64 {
        self
    }
}

struct Floats<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    pg: &'a Pg,
    typmod: i32,
}

impl<T: ArrowPrimitiveType> Values for Floats<'_, T>
where
    T::Native: Float,
{
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }

    #[inline]
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        float_wire(self.a.value(i).f64(), T::Native::SINGLE, self.pg, self.typmod, out)
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        float_text_form(self.a.value(i).f64(), T::Native::SINGLE, out)
    }

    fn json(&self, i: usize, out: &mut Vec<u8>) {
        float_json(self.a.value(i).f64(), T::Native::SINGLE, out)
    }
}

/// `halffloat`: exact as a single-precision float.
struct Half<'a> {
    a: &'a PrimitiveArray<Float16Type>,
    pg: &'a Pg,
    typmod: i32,
}

impl Values for Half<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        float_wire(f64::from(self.a.value(i).to_f32()), true, self.pg, self.typmod, out)
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        float_text_form(f64::from(self.a.value(i).to_f32()), true, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        float_json(f64::from(self.a.value(i).to_f32()), true, out)
    }
}

/// The decimal text of `unscaled` × 10^-`scale`, with `scale` digits after the point.
pub(super) fn decimal_text(unscaled: &str, scale: i8, out: &mut Vec<u8>) {
    let (negative, digits) = match unscaled.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, unscaled),
    };
    if negative {
        out.push(b'-');
    }
    if scale <= 0 {
        out.extend_from_slice(digits.as_bytes());
        if digits != "0" {
            out.extend(std::iter::repeat_n(b'0', usize::from(scale.unsigned_abs())));
        }
        return;
    }
    let scale = scale as usize;
    if digits.len() > scale {
        let (int, frac) = digits.split_at(digits.len() - scale);
        out.extend_from_slice(int.as_bytes());
        out.push(b'.');
        out.extend_from_slice(frac.as_bytes());
    } else {
        out.extend_from_slice(b"0.");
        out.extend(std::iter::repeat_n(b'0', scale - digits.len()));
        out.extend_from_slice(digits.as_bytes());
    }
}

/// A decimal's text into a column of `pg`.
fn decimal_wire(text: &[u8], pg: &Pg, typmod: i32, out: &mut Vec<u8>) -> Result<(), Bad> {
    match pg {
        Pg::Known(PgType::Numeric) => numeric(text, typmod, out),
        Pg::Known(t @ (PgType::Float4 | PgType::Float8)) => float_text(*t, text, out),
        other => Err(unexpected(other)),
    }
}

struct Decimals<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    scale: i8,
    pg: &'a Pg,
    typmod: i32,
}

impl<T: ArrowPrimitiveType> Values for Decimals<'_, T>
where
    T::Native: Wide,
{
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let mut text = Vec::with_capacity(48);
        self.text(i, &mut text);
        decimal_wire(&text, self.pg, self.typmod, out)
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        decimal_text(&self.a.value(i).wide().to_string(), self.scale, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.text(i, out)
    }
}

struct Decimal256s<'a> {
    a: &'a PrimitiveArray<arrow_array::types::Decimal256Type>,
    scale: i8,
    pg: &'a Pg,
    typmod: i32,
}

impl Values for Decimal256s<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let mut text = Vec::with_capacity(96);
        self.text(i, &mut text);
        decimal_wire(&text, self.pg, self.typmod, out)
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        decimal_text(&self.a.value(i).to_string(), self.scale, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        self.text(i, out)
    }
}

struct Bools<'a> {
    a: &'a arrow_array::BooleanArray,
}

impl Values for Bools<'_> {
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        out.push(u8::from(self.a.value(i)));
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        out.push(if self.a.value(i) { b't' } else { b'f' });
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(if self.a.value(i) { b"true" } else { b"false" });
    }
}

/// The string arrays: `string`, `large_string`, `string_view`.
pub(super) trait StrAt: Array {
    fn str_at(&self, i: usize) -> &[u8];
}

impl<O: arrow_array::OffsetSizeTrait> StrAt for arrow_array::GenericStringArray<O> {
    #[inline]
    fn str_at(&self, i: usize) -> &[u8] {
        self.value(i).as_bytes()
    }
}

impl StrAt for arrow_array::StringViewArray {
    #[inline]
    fn str_at(&self, i: usize) -> &[u8] {
        self.value(i).as_bytes()
    }
}

struct Strings<'a, A: StrAt> {
    a: &'a A,
    pg: &'a Pg,
    typmod: i32,
    ctx: &'a EncodeContext,
}

impl<A: StrAt> Values for Strings<'_, A> {
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }

    #[inline]
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let Pg::Known(ty) = self.pg else { return Err(Bad::NeedsServer) };
        let text = self.a.str_at(i);
        let at = out.len();
        match encode_text(*ty, text, self.ctx, out) {
            Ok(()) if matches!(ty, PgType::Timestamp | PgType::Timestamptz | PgType::Numeric) && self.typmod >= 0 => {
                apply_typmod(*ty, self.typmod, out, at).map_err(|_| {
                    out.truncate(at);
                    Bad::NeedsServer
                })
            }
            Ok(()) => Ok(()),
            // Text-like types refuse only bytes no UTF-8 database holds.
            Err(ValueError::Invalid(m)) if is_text_like(*ty) => Err(Bad::invalid(m, "22021")),
            // Anything else the server reads itself: its answer and its SQLSTATE.
            Err(_) => Err(Bad::NeedsServer),
        }
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        out.extend_from_slice(self.a.str_at(i));
    }

    fn json(&self, i: usize, out: &mut Vec<u8>) {
        json_string(self.a.str_at(i), out)
    }
}

fn is_text_like(ty: PgType) -> bool {
    matches!(ty, PgType::Text | PgType::Varchar | PgType::Bpchar | PgType::Name | PgType::Json | PgType::Jsonb)
}

/// The byte arrays: `binary`, `large_binary`, `binary_view`, `fixed_size_binary`.
pub(super) trait BytesAt: Array {
    fn bytes_at(&self, i: usize) -> &[u8];
}

impl<O: arrow_array::OffsetSizeTrait> BytesAt for arrow_array::GenericBinaryArray<O> {
    fn bytes_at(&self, i: usize) -> &[u8] {
        self.value(i)
    }
}

impl BytesAt for arrow_array::BinaryViewArray {
    fn bytes_at(&self, i: usize) -> &[u8] {
        self.value(i)
    }
}

impl BytesAt for arrow_array::FixedSizeBinaryArray {
    fn bytes_at(&self, i: usize) -> &[u8] {
        self.value(i)
    }
}

struct Bytes<'a, A: BytesAt> {
    a: &'a A,
    pg: &'a Pg,
}

impl<A: BytesAt> Values for Bytes<'_, A> {
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }

    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let b = self.a.bytes_at(i);
        match self.pg {
            Pg::Known(PgType::Bytea) => out.extend_from_slice(b),
            Pg::Known(PgType::Uuid) if b.len() == 16 => out.extend_from_slice(b),
            other => return Err(unexpected(other)),
        }
        Ok(())
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let b = self.a.bytes_at(i);
        if *self.pg == Pg::Known(PgType::Uuid) && b.len() == 16 {
            for (k, byte) in b.iter().enumerate() {
                if matches!(k, 4 | 6 | 8 | 10) {
                    out.push(b'-');
                }
                let _ = write!(out, "{byte:02x}");
            }
            return;
        }
        out.extend_from_slice(b"\\x");
        for byte in b {
            let _ = write!(out, "{byte:02x}");
        }
    }

    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let mut t = Vec::with_capacity(2 + 2 * self.a.bytes_at(i).len());
        self.text(i, &mut t);
        json_string(&t, out)
    }
}
