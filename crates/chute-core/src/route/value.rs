//! Key values in their binary wire form, compared the way PostgreSQL's
//! default btree operator classes compare them.
//!
//! The router never turns a row into owned values: each key column's wire
//! bytes are decoded into a borrowed [`Value`] (an `i64`, an `f64`, a byte
//! slice or a view of a numeric) and compared with the bound values decoded
//! once at build time. Equality under this order is PostgreSQL's equality
//! (`-0 = 0`, every NaN equal, `1.0 = 1.00`, `'ab ' = 'ab'` for bpchar), so
//! the same comparison serves LIST lookups; for RANGE keys it is also
//! PostgreSQL's order, which is why text keys must sort byte-wise there.

use std::cmp::Ordering;

use crate::numeric::{Numeric, NumericClass};

/// How one key column's wire bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Codec {
    /// 1 byte; `boolrecv` takes any non-zero byte as true.
    Bool,
    /// Big-endian int16.
    Int2,
    /// Big-endian int32: `int4`, and `date` (days since 2000-01-01, ±infinity at the extremes).
    Int4,
    /// Big-endian int64: `int8`, and `timestamp[tz]` (µs since 2000-01-01, ±infinity at the extremes).
    Int8,
    /// Big-endian uint32.
    Oid,
    /// IEEE-754 binary32, compared as the float8 it widens to.
    Float4,
    /// IEEE-754 binary64.
    Float8,
    /// `numeric_send`'s NBASE-10000 struct.
    Numeric,
    /// Bytes compared with memcmp, shorter first on a tie: `bytea`, and text-like types under a
    /// byte-wise collation (or, for LIST, any deterministic one, where only equality matters).
    Bytes,
    /// 16 bytes compared with memcmp.
    Uuid,
    /// `char(n)`: bytes without their trailing spaces.
    Bpchar,
}

impl Codec {
    /// The codec for a type OID, and whether the type is collatable (its order then depends on a collation).
    pub(crate) fn from_type_oid(oid: u32) -> Option<(Codec, bool)> {
        Some(match oid {
            16 => (Codec::Bool, false),
            21 => (Codec::Int2, false),
            23 | 1082 => (Codec::Int4, false),
            20 | 1114 | 1184 => (Codec::Int8, false),
            26 => (Codec::Oid, false),
            700 => (Codec::Float4, false),
            701 => (Codec::Float8, false),
            1700 => (Codec::Numeric, false),
            17 => (Codec::Bytes, false),
            25 | 1043 | 19 => (Codec::Bytes, true),
            1042 => (Codec::Bpchar, true),
            2950 => (Codec::Uuid, false),
            _ => return None,
        })
    }

    /// Reads a wire value; `None` when the bytes are not a valid value of the type
    /// (the server's receive function would reject them).
    #[inline]
    pub(crate) fn decode(self, wire: &[u8]) -> Option<Value<'_>> {
        Some(match self {
            Codec::Bool => match wire {
                [b] => Value::Int(i64::from(*b != 0)),
                _ => return None,
            },
            Codec::Int2 => Value::Int(i64::from(i16::from_be_bytes(wire.try_into().ok()?))),
            Codec::Int4 => Value::Int(i64::from(i32::from_be_bytes(wire.try_into().ok()?))),
            Codec::Int8 => Value::Int(i64::from_be_bytes(wire.try_into().ok()?)),
            Codec::Oid => Value::Int(i64::from(u32::from_be_bytes(wire.try_into().ok()?))),
            Codec::Float4 => Value::Float(f64::from(f32::from_be_bytes(wire.try_into().ok()?))),
            Codec::Float8 => Value::Float(f64::from_be_bytes(wire.try_into().ok()?)),
            Codec::Numeric => Value::Numeric(Numeric::parse(wire)?),
            Codec::Bytes => Value::Bytes(wire),
            Codec::Uuid if wire.len() == 16 => Value::Bytes(wire),
            Codec::Uuid => return None,
            Codec::Bpchar => Value::Bytes(trim_trailing_spaces(wire)),
        })
    }
}

/// `bcTruelen`: bpchar compares without its trailing spaces.
fn trim_trailing_spaces(s: &[u8]) -> &[u8] {
    let end = s.iter().rposition(|&b| b != b' ').map_or(0, |i| i + 1);
    &s[..end]
}

/// One decoded key value, borrowing from the row's wire bytes.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Value<'a> {
    Int(i64),
    Float(f64),
    Bytes(&'a [u8]),
    Numeric(Numeric<'a>),
}

/// PostgreSQL's order on two values read by the same codec.
#[inline]
pub(crate) fn cmp_values(a: Value<'_>, b: Value<'_>) -> Ordering {
    match (a, b) {
        (Value::Int(x), Value::Int(y)) => x.cmp(&y),
        (Value::Float(x), Value::Float(y)) => cmp_float(x, y),
        (Value::Bytes(x), Value::Bytes(y)) => x.cmp(y),
        (Value::Numeric(x), Value::Numeric(y)) => x.cmp(&y),
        // Both sides of a comparison are always read by the key column's one codec.
        _ => {
            debug_assert!(false, "comparing values of different kinds: {a:?} and {b:?}");
            Ordering::Equal
        }
    }
}

/// `float8_cmp_internal`: NaN equals NaN and sorts above everything; -0 equals 0.
#[inline]
fn cmp_float(a: f64, b: f64) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// A bound value decoded once at build time.
#[derive(Debug, Clone)]
pub(crate) enum Scalar {
    Int(i64),
    Float(f64),
    Bytes(Box<[u8]>),
    /// A numeric in canonical form: digits without leading zeros and with
    /// nothing hidden by its scale.
    Numeric {
        class: NumericClass,
        negative: bool,
        weight: i32,
        digits: Box<[u8]>,
    },
}

impl Scalar {
    /// Decodes a bound's wire bytes (`None`: not a valid value of the type).
    pub(crate) fn decode(codec: Codec, wire: &[u8]) -> Option<Scalar> {
        Some(match codec.decode(wire)? {
            Value::Int(v) => Scalar::Int(v),
            Value::Float(v) => Scalar::Float(v),
            Value::Bytes(b) => Scalar::Bytes(b.into()),
            Value::Numeric(n) => {
                let digits: Vec<u8> = (0..n.len()).flat_map(|i| n.digit(i).to_be_bytes()).collect();
                Scalar::Numeric { class: n.class, negative: n.negative, weight: n.weight, digits: digits.into() }
            }
        })
    }

    #[inline]
    pub(crate) fn as_value(&self) -> Value<'_> {
        match self {
            Scalar::Int(v) => Value::Int(*v),
            Scalar::Float(v) => Value::Float(*v),
            Scalar::Bytes(b) => Value::Bytes(b),
            Scalar::Numeric { class, negative, weight, digits } => {
                Value::Numeric(Numeric { class: *class, negative: *negative, weight: *weight, digits, last_pow10: 1 })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::encode::{NUMERIC_NAN, NUMERIC_NEG, NUMERIC_NINF, NUMERIC_PINF, NUMERIC_POS};

    fn numeric(weight: i16, sign: u16, dscale: u16, digits: &[u16]) -> Vec<u8> {
        let mut w = Vec::new();
        w.extend((digits.len() as u16).to_be_bytes());
        w.extend(weight.to_be_bytes());
        w.extend(sign.to_be_bytes());
        w.extend(dscale.to_be_bytes());
        digits.iter().for_each(|d| w.extend(d.to_be_bytes()));
        w
    }

    fn cmp_wire(codec: Codec, a: &[u8], b: &[u8]) -> Ordering {
        cmp_values(codec.decode(a).unwrap(), codec.decode(b).unwrap())
    }

    fn cmp_num(a: &[u8], b: &[u8]) -> Ordering {
        let ours = cmp_wire(Codec::Numeric, a, b);
        // A bound decoded once compares the same as the wire value.
        let sa = Scalar::decode(Codec::Numeric, a).unwrap();
        let sb = Scalar::decode(Codec::Numeric, b).unwrap();
        assert_eq!(cmp_values(sa.as_value(), sb.as_value()), ours, "{a:?} vs {b:?}");
        assert_eq!(cmp_values(sa.as_value(), Codec::Numeric.decode(b).unwrap()), ours);
        ours
    }

    #[test]
    fn floats_order_like_postgres_with_nan_on_top() {
        let f = |v: f64| v.to_be_bytes();
        assert_eq!(cmp_wire(Codec::Float8, &f(-0.0), &f(0.0)), Ordering::Equal);
        assert_eq!(cmp_wire(Codec::Float8, &f(f64::NAN), &f(f64::INFINITY)), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Float8, &f(f64::INFINITY), &f(f64::NAN)), Ordering::Less);
        assert_eq!(cmp_wire(Codec::Float8, &f(f64::NAN), &(-f64::NAN).to_be_bytes()), Ordering::Equal);
        assert_eq!(cmp_wire(Codec::Float8, &f(f64::NEG_INFINITY), &f(-1e308)), Ordering::Less);
        let g = |v: f32| v.to_be_bytes();
        assert_eq!(cmp_wire(Codec::Float4, &g(1.5), &g(1.25)), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Float4, &g(f32::NAN), &g(f32::MAX)), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Float4, &g(-0.0), &g(0.0)), Ordering::Equal);
    }

    #[test]
    fn integers_dates_and_timestamps_compare_as_signed_and_oids_as_unsigned() {
        assert_eq!(cmp_wire(Codec::Int4, &(-1i32).to_be_bytes(), &1i32.to_be_bytes()), Ordering::Less);
        assert_eq!(cmp_wire(Codec::Int8, &i64::MIN.to_be_bytes(), &(i64::MIN + 1).to_be_bytes()), Ordering::Less);
        assert_eq!(cmp_wire(Codec::Int2, &i16::MAX.to_be_bytes(), &(-1i16).to_be_bytes()), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Oid, &u32::MAX.to_be_bytes(), &1u32.to_be_bytes()), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Bool, &[2], &[1]), Ordering::Equal, "any non-zero byte is true");
        assert_eq!(cmp_wire(Codec::Bool, &[0], &[1]), Ordering::Less);
    }

    #[test]
    fn bytes_compare_like_memcmp_and_bpchar_ignores_trailing_spaces() {
        assert_eq!(cmp_wire(Codec::Bytes, b"ab", b"abc"), Ordering::Less);
        assert_eq!(cmp_wire(Codec::Bytes, b"b", b"abc"), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Bytes, b"ab ", b"ab"), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Bytes, "é".as_bytes(), b"z"), Ordering::Greater);
        assert_eq!(cmp_wire(Codec::Bpchar, b"ab   ", b"ab"), Ordering::Equal);
        assert_eq!(cmp_wire(Codec::Bpchar, b"   ", b""), Ordering::Equal);
        assert_eq!(cmp_wire(Codec::Bpchar, b"a b", b"a"), Ordering::Greater);
        // 'a ' is 'a' once its trailing space is gone, so 'a\t' sorts above it
        // even though a tab sorts below a space.
        assert_eq!(cmp_wire(Codec::Bpchar, b"a\t", b"a "), Ordering::Greater);
    }

    #[test]
    fn malformed_wire_values_are_refused() {
        assert!(Codec::Int4.decode(&[0, 0, 1]).is_none());
        assert!(Codec::Int8.decode(&[0; 4]).is_none());
        assert!(Codec::Bool.decode(&[]).is_none());
        assert!(Codec::Uuid.decode(&[0; 15]).is_none());
        assert!(Codec::Float4.decode(&[0; 8]).is_none());
        assert!(Codec::Numeric.decode(&[0; 7]).is_none());
        assert!(Codec::Numeric.decode(&numeric(0, 0x8000, 0, &[1])).is_none(), "bad sign");
        assert!(Codec::Numeric.decode(&numeric(0, NUMERIC_POS, 0, &[10_000])).is_none(), "digit too big");
        assert!(Codec::Numeric.decode(&numeric(0, NUMERIC_POS, 0x4000, &[1])).is_none(), "bad scale");
        let mut short = numeric(0, NUMERIC_POS, 0, &[1, 2]);
        short.pop();
        assert!(Codec::Numeric.decode(&short).is_none());
    }

    #[test]
    fn numerics_compare_by_value_not_by_representation() {
        let one = numeric(0, NUMERIC_POS, 0, &[1]);
        let one_00 = numeric(0, NUMERIC_POS, 2, &[1, 0]);
        let leading_zero = numeric(1, NUMERIC_POS, 0, &[0, 1]);
        assert_eq!(cmp_num(&one, &one_00), Ordering::Equal);
        assert_eq!(cmp_num(&one, &leading_zero), Ordering::Equal);
        let ten_thousand = numeric(1, NUMERIC_POS, 0, &[1]);
        assert_eq!(cmp_num(&ten_thousand, &one), Ordering::Greater);
        // 1.5 vs 1.05
        let one_5 = numeric(0, NUMERIC_POS, 1, &[1, 5000]);
        let one_05 = numeric(0, NUMERIC_POS, 2, &[1, 500]);
        assert_eq!(cmp_num(&one_5, &one_05), Ordering::Greater);
        // Negative values reverse the magnitude order.
        let minus_one_5 = numeric(0, NUMERIC_NEG, 1, &[1, 5000]);
        let minus_one_05 = numeric(0, NUMERIC_NEG, 2, &[1, 500]);
        assert_eq!(cmp_num(&minus_one_5, &minus_one_05), Ordering::Less);
        assert_eq!(cmp_num(&minus_one_05, &one), Ordering::Less);
        // Zero in all its forms.
        let zero = numeric(0, NUMERIC_POS, 0, &[]);
        let minus_zero = numeric(0, NUMERIC_NEG, 3, &[0, 0]);
        assert_eq!(cmp_num(&zero, &minus_zero), Ordering::Equal);
        assert_eq!(cmp_num(&minus_zero, &minus_one_05), Ordering::Greater);
        // 0.0001 (weight -1) vs 0.001
        let tiny = numeric(-1, NUMERIC_POS, 4, &[1]);
        let small = numeric(-1, NUMERIC_POS, 3, &[10]);
        assert_eq!(cmp_num(&tiny, &small), Ordering::Less);
        assert_eq!(cmp_num(&tiny, &zero), Ordering::Greater);
    }

    #[test]
    fn numeric_digits_hidden_by_the_scale_do_not_count() {
        // 1.23456 sent with dscale 2 is stored as 1.23.
        let hidden = numeric(0, NUMERIC_POS, 2, &[1, 2345, 6000]);
        let shown = numeric(0, NUMERIC_POS, 2, &[1, 2300]);
        assert_eq!(cmp_num(&hidden, &shown), Ordering::Equal);
        // 0.00009 (digit 9000 at weight -2) with dscale 4 is 0.0000 = 0; 0.0009 is not.
        let vanishing = numeric(-2, NUMERIC_POS, 4, &[9000]);
        assert_eq!(cmp_num(&numeric(-1, NUMERIC_POS, 4, &[9]), &numeric(0, NUMERIC_POS, 0, &[])), Ordering::Greater);
        assert_eq!(cmp_num(&vanishing, &numeric(0, NUMERIC_POS, 0, &[])), Ordering::Equal);
        // 12345 (weight 1) with dscale 0 keeps everything.
        let whole = numeric(1, NUMERIC_POS, 0, &[1, 2345]);
        assert_eq!(cmp_num(&whole, &numeric(1, NUMERIC_POS, 0, &[1, 2346])), Ordering::Less);
    }

    #[test]
    fn numeric_specials_sort_minus_infinity_finite_plus_infinity_nan() {
        let nan = numeric(0, NUMERIC_NAN, 0, &[]);
        let pinf = numeric(0, NUMERIC_PINF, 0, &[]);
        let ninf = numeric(0, NUMERIC_NINF, 0, &[]);
        let big = numeric(100, NUMERIC_POS, 0, &[9999]);
        let neg_big = numeric(100, NUMERIC_NEG, 0, &[9999]);
        assert_eq!(cmp_num(&nan, &pinf), Ordering::Greater);
        assert_eq!(cmp_num(&nan, &nan), Ordering::Equal);
        assert_eq!(cmp_num(&pinf, &big), Ordering::Greater);
        assert_eq!(cmp_num(&ninf, &neg_big), Ordering::Less);
        assert_eq!(cmp_num(&ninf, &ninf), Ordering::Equal);
    }
}
