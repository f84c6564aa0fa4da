//! The rounding a column's type modifier applies: `timestamp(p)`,
//! `timestamptz(p)`, `numeric(p,s)`.
//!
//! The server applies a column's typmod to every value it stores, on binary
//! input too (`timestamp_recv`, `timestamptz_recv` and `numeric_recv` take the
//! typmod COPY passes them). The router must see the value as it will be
//! stored: `2021-01-01 23:59:59.7` in a `timestamptz(0)` column is
//! `2021-01-02 00:00:00` and belongs to the next day's partition. So the
//! encoder rounds the wire value here exactly as `AdjustTimestampForTypmod`
//! and `apply_typmod` (`round_var`) do, and leaves to the server any value
//! that the typmod would reject (numeric field overflow, infinities in a
//! numeric with a typmod, timestamps rounded out of range).

use super::{PgType, ValueError};
use crate::encode::{END_TIMESTAMP, MIN_TIMESTAMP, NUMERIC_NAN, NUMERIC_NEG, NUMERIC_POS};

/// `MAX_TIMESTAMP_PRECISION`.
const MAX_TIMESTAMP_PRECISION: i32 = 6;
/// `VARHDRSZ`: numeric typmods are offset by it.
const VARHDRSZ: i32 = 4;

/// Rounds the wire value `out[start..]` of a `ty` column with type modifier
/// `typmod` (`-1`: none) in place, to what the server stores. Types without typmod
/// rounding are left as they are. [`ValueError::NeedsServer`] when the
/// typmod would make the server reject the value (its message decides).
pub fn apply_typmod(ty: PgType, typmod: i32, out: &mut Vec<u8>, start: usize) -> Result<(), ValueError> {
    if typmod < 0 {
        return Ok(());
    }
    match ty {
        PgType::Timestamp | PgType::Timestamptz => {
            let wire = &mut out[start..];
            let Ok(bytes) = <[u8; 8]>::try_from(&*wire) else { return Err(ValueError::NeedsServer) };
            let rounded = round_timestamp(i64::from_be_bytes(bytes), typmod)?;
            wire.copy_from_slice(&rounded.to_be_bytes());
            Ok(())
        }
        PgType::Numeric => {
            let mut wire = out.split_off(start);
            let r = round_numeric_wire(&mut wire, typmod);
            out.extend_from_slice(&wire);
            r
        }
        _ => Ok(()),
    }
}

/// `AdjustTimestampForTypmod`: microseconds rounded half away from zero to
/// `precision` fractional digits; the infinities stay as they are.
pub fn round_timestamp(t: i64, precision: i32) -> Result<i64, ValueError> {
    if t == i64::MIN || t == i64::MAX || !(0..MAX_TIMESTAMP_PRECISION).contains(&precision) {
        return if precision > MAX_TIMESTAMP_PRECISION { Err(ValueError::NeedsServer) } else { Ok(t) };
    }
    let scale = 10i64.pow((MAX_TIMESTAMP_PRECISION - precision) as u32);
    let offset = scale / 2;
    let rounded = if t >= 0 {
        t.checked_add(offset).map(|v| v / scale * scale)
    } else {
        t.checked_neg().and_then(|v| v.checked_add(offset)).map(|v| -(v / scale * scale))
    };
    match rounded {
        Some(r) if (MIN_TIMESTAMP..END_TIMESTAMP).contains(&r) => Ok(r),
        _ => Err(ValueError::NeedsServer),
    }
}

/// A numeric typmod's (precision, scale); PostgreSQL 15 allows negative scales.
fn numeric_typmod(typmod: i32) -> Option<(i32, i32)> {
    if typmod < VARHDRSZ {
        return None;
    }
    let t = typmod - VARHDRSZ;
    let precision = (t >> 16) & 0xffff;
    let scale = ((t & 0x7ff) ^ 1024) - 1024;
    Some((precision, scale))
}

/// `apply_typmod` on a `numeric_send` value: rounds half away from zero to
/// the scale, then checks the precision.
fn round_numeric_wire(wire: &mut Vec<u8>, typmod: i32) -> Result<(), ValueError> {
    let Some((precision, scale)) = numeric_typmod(typmod) else { return Ok(()) };
    let word = |i: usize| wire.get(i..i + 2).map(|b| u16::from_be_bytes([b[0], b[1]])).ok_or(ValueError::NeedsServer);
    let (ndigits, weight, sign) = (usize::from(word(0)?), i32::from(word(2)? as i16), word(4)?);
    if sign == NUMERIC_NAN {
        return Ok(());
    }
    if sign != NUMERIC_POS && sign != NUMERIC_NEG {
        // An infinity: any typmod rejects it.
        return Err(ValueError::NeedsServer);
    }
    // Decimal digits; the first one's exponent is 4 * weight + 3.
    let mut digits: Vec<u8> = Vec::with_capacity(ndigits * 4 + 1);
    for i in 0..ndigits {
        let g = word(8 + 2 * i)?;
        digits.extend_from_slice(&[(g / 1000) as u8, (g / 100 % 10) as u8, (g / 10 % 10) as u8, (g % 10) as u8]);
    }
    let mut first_exp = 4 * weight + 3;
    // Keep the digits whose exponent is at least -scale.
    let keep = i64::from(first_exp) + i64::from(scale) + 1;
    if keep < digits.len() as i64 {
        if keep < 0 {
            digits.clear();
        } else {
            let keep = keep as usize;
            let up = digits[keep] >= 5;
            digits.truncate(keep);
            if up {
                let mut carry = true;
                for d in digits.iter_mut().rev() {
                    *d += 1;
                    carry = *d == 10;
                    if !carry {
                        break;
                    }
                    *d = 0;
                }
                if carry {
                    digits.insert(0, 1);
                    first_exp += 1;
                }
            }
        }
    }
    let lead = digits.iter().take_while(|&&d| d == 0).count();
    digits.drain(..lead);
    first_exp -= lead as i32;
    while digits.last() == Some(&0) {
        digits.pop();
    }
    let dscale = scale.max(0) as u16;
    wire.clear();
    if digits.is_empty() {
        wire.extend_from_slice(&[0, 0, 0, 0]);
        wire.extend_from_slice(&NUMERIC_POS.to_be_bytes());
        wire.extend_from_slice(&dscale.to_be_bytes());
        return Ok(());
    }
    // The number of integer digits may not exceed precision - scale.
    if first_exp + 1 > precision - scale {
        return Err(ValueError::NeedsServer);
    }
    let new_weight = first_exp.div_euclid(4);
    let pad = (3 - first_exp.rem_euclid(4)) as usize;
    let mut padded = vec![0u8; pad];
    padded.extend_from_slice(&digits);
    padded.resize(padded.len().div_ceil(4) * 4, 0);
    wire.extend_from_slice(&((padded.len() / 4) as u16).to_be_bytes());
    wire.extend_from_slice(&(new_weight as i16).to_be_bytes());
    wire.extend_from_slice(&sign.to_be_bytes());
    wire.extend_from_slice(&dscale.to_be_bytes());
    for g in padded.chunks(4) {
        let v = g.iter().fold(0u16, |acc, &d| acc * 10 + u16::from(d));
        wire.extend_from_slice(&v.to_be_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::value::{EncodeContext, encode_text};

    /// numeric(p,s)'s atttypmod.
    fn numeric_mod(p: i32, s: i32) -> i32 {
        ((p << 16) | (s & 0x7ff)) + VARHDRSZ
    }

    fn numeric(text: &str, typmod: i32) -> Result<Vec<u8>, ValueError> {
        let mut v = Vec::new();
        encode_text(PgType::Numeric, text.as_bytes(), &EncodeContext::default(), &mut v)?;
        apply_typmod(PgType::Numeric, typmod, &mut v, 0)?;
        Ok(v)
    }

    fn plain(text: &str) -> Vec<u8> {
        let mut v = Vec::new();
        encode_text(PgType::Numeric, text.as_bytes(), &EncodeContext::default(), &mut v).unwrap();
        v
    }

    #[test]
    fn timestamps_round_half_away_from_zero() {
        assert_eq!(round_timestamp(1_700_000, 0), Ok(2_000_000));
        assert_eq!(round_timestamp(1_499_999, 0), Ok(1_000_000));
        assert_eq!(round_timestamp(1_500_000, 0), Ok(2_000_000));
        assert_eq!(round_timestamp(-1_500_000, 0), Ok(-2_000_000));
        assert_eq!(round_timestamp(-1_499_999, 0), Ok(-1_000_000));
        assert_eq!(round_timestamp(123_456_789, 3), Ok(123_457_000));
        assert_eq!(round_timestamp(123_456_789, 6), Ok(123_456_789));
        assert_eq!(round_timestamp(i64::MAX, 0), Ok(i64::MAX));
        assert_eq!(round_timestamp(i64::MIN, 2), Ok(i64::MIN));
        assert_eq!(round_timestamp(END_TIMESTAMP - 1, 0), Err(ValueError::NeedsServer));
    }

    #[test]
    fn timestamp_typmod_rewrites_the_wire_value() {
        let mut v = 86_399_700_000i64.to_be_bytes().to_vec();
        apply_typmod(PgType::Timestamptz, 0, &mut v, 0).unwrap();
        assert_eq!(v, 86_400_000_000i64.to_be_bytes());
        let mut v = 86_399_700_000i64.to_be_bytes().to_vec();
        apply_typmod(PgType::Timestamptz, -1, &mut v, 0).unwrap();
        assert_eq!(v, 86_399_700_000i64.to_be_bytes());
    }

    #[test]
    fn numerics_round_to_the_scale_like_round_var() {
        let m = numeric_mod(10, 2);
        assert_eq!(numeric("9.995", m), Ok(plain("10.00")));
        assert_eq!(numeric("9.994999", m), Ok(plain("9.99")));
        assert_eq!(numeric("-9.995", m), Ok(plain("-10.00")));
        assert_eq!(numeric("9999.9999", m), Ok(plain("10000.00")));
        assert_eq!(numeric("0.004", m), Ok(plain("0.00")));
        assert_eq!(numeric("-0.004", m), Ok(plain("0.00")));
        assert_eq!(numeric("0.005", m), Ok(plain("0.01")));
        assert_eq!(numeric("12345678.1", m), Ok(plain("12345678.10")));
        assert_eq!(numeric("1e-9", m), Ok(plain("0.00")));
        assert_eq!(numeric("NaN", m), Ok(plain("NaN")));
        assert_eq!(numeric("99999.5", numeric_mod(6, 0)), Ok(plain("100000")));
        // Negative scale: rounded to hundreds.
        assert_eq!(numeric("12350", numeric_mod(5, -2)), Ok(plain("12400")));
    }

    #[test]
    fn numerics_the_typmod_rejects_are_left_to_the_server() {
        let m = numeric_mod(10, 2);
        assert_eq!(numeric("99999999.995", m), Err(ValueError::NeedsServer));
        assert_eq!(numeric("123456789", m), Err(ValueError::NeedsServer));
        assert_eq!(numeric("Infinity", m), Err(ValueError::NeedsServer));
        assert_eq!(numeric("99999999.994", m), Ok(plain("99999999.99")));
    }
}
