//! Line protocol values: timestamps and field scalars (numbers and
//! booleans), read with a fast path for the plain decimals nearly every
//! line carries.

use super::{FieldValue, Precision};

/// The timestamp in nanoseconds: digits read in one pass (a non-digit
/// anywhere makes it a bad timestamp, even after an overflow).
pub(super) fn timestamp(s: &str, precision: Precision) -> Result<i64, String> {
    let (negative, digits) = match s.strip_prefix('-') {
        Some(d) => (true, d),
        None => (false, s),
    };
    let mut v: Option<i64> = Some(0);
    let mut bad = digits.is_empty();
    for b in digits.bytes() {
        let d = b.wrapping_sub(b'0');
        if d > 9 {
            bad = true;
            break;
        }
        // Negative numbers are built downwards: i64::MIN has no positive twin.
        v = v
            .and_then(|v| v.checked_mul(10))
            .and_then(|v| if negative { v.checked_sub(i64::from(d)) } else { v.checked_add(i64::from(d)) });
    }
    if bad {
        return Err(format!("bad timestamp {s:?} (expected an integer number of {})", unit_name(precision)));
    }
    let out_of_range =
        || format!("timestamp {s} is out of range (nanoseconds since 1970 must fit in 64 bits; precision {})", unit_name(precision));
    v.and_then(|v| v.checked_mul(precision.nanos())).ok_or_else(out_of_range)
}

fn unit_name(p: Precision) -> &'static str {
    match p {
        Precision::Nanoseconds => "nanoseconds",
        Precision::Microseconds => "microseconds",
        Precision::Milliseconds => "milliseconds",
        Precision::Seconds => "seconds",
        Precision::Minutes => "minutes",
        Precision::Hours => "hours",
    }
}

/// The value of a plain decimal (`-?d*(.d*)?`, a digit at least) whose
/// digits make an integer of at most 2^53 with at most 22 of them after the
/// point (see `value::decimal_prefix`, the same fast path as CSV's floats).
/// `None` for anything else, which is parsed in full.
#[cfg(test)]
pub(super) fn simple_decimal(b: &[u8]) -> Option<f64> {
    plain_decimal_at(b).filter(|(_, n)| *n == b.len()).map(|(v, _)| v)
}

/// A plain decimal (see `simple_decimal`) at the start of `b`, up to the
/// end, a comma or a space: its value and length. `None` when another byte
/// comes first or it is not plain: the field is then read in full.
pub(super) fn plain_decimal_at(b: &[u8]) -> Option<(f64, usize)> {
    if b.first() == Some(&b'+') {
        return None;
    }
    crate::value::decimal_prefix(b).filter(|(_, n)| matches!(b.get(*n), None | Some(b',' | b' ')))
}

/// A number or a boolean, read in full (what `plain_decimal_at` does not read).
pub(super) fn field_scalar(raw: &str) -> Option<FieldValue<'static>> {
    match raw {
        "t" | "T" | "true" | "True" | "TRUE" => return Some(FieldValue::Bool(true)),
        "f" | "F" | "false" | "False" | "FALSE" => return Some(FieldValue::Bool(false)),
        _ => {}
    }
    if let Some(n) = raw.strip_suffix('i') {
        return integer_text(n).then(|| n.parse().ok().map(FieldValue::Int)).flatten();
    }
    if let Some(n) = raw.strip_suffix('u') {
        return (!n.starts_with('-') && integer_text(n)).then(|| n.parse().ok().map(FieldValue::UInt)).flatten();
    }
    // Only decimal numbers: Rust's parser would also take "inf" and "NaN".
    let ok = !raw.is_empty()
        && raw.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e' | b'E'))
        && raw.bytes().any(|b| b.is_ascii_digit());
    if !ok {
        return None;
    }
    raw.parse::<f64>().ok().filter(|f| f.is_finite()).map(FieldValue::Float)
}

fn integer_text(n: &str) -> bool {
    let d = n.strip_prefix('-').unwrap_or(n);
    !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())
}
