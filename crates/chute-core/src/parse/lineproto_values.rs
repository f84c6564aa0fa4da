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

/// Powers of ten that are exact doubles.
const EXACT_POWERS_OF_TEN: [f64; 23] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/// The value of a plain decimal (`-?d*(.d*)?`, a digit at least) whose
/// digits make an integer of at most 2^53 with at most 22 of them after the
/// point: that integer and the power of ten are exact doubles, so one
/// division gives the correctly rounded value, the one `str::parse::<f64>`
/// gives (this is its own fast path, without its general parsing). `None`
/// for anything else, which is parsed in full.
#[cfg(test)]
pub(super) fn simple_decimal(b: &[u8]) -> Option<f64> {
    plain_decimal_at(b).filter(|(_, n)| *n == b.len()).map(|(v, _)| v)
}

/// A plain decimal (see `simple_decimal`) at the start of `b`, up to the
/// end, a comma or a space: its value and length. `None` when another byte
/// comes first or it is not plain: the field is then read in full.
pub(super) fn plain_decimal_at(b: &[u8]) -> Option<(f64, usize)> {
    let (negative, mut i) = if b.first() == Some(&b'-') { (true, 1) } else { (false, 0) };
    let (mut w, mut count, mut after, mut point) = (0u64, 0u32, 0usize, false);
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d <= 9 {
            if count == 19 {
                return None;
            }
            w = w * 10 + u64::from(d);
            count += 1;
            after += usize::from(point);
        } else if c == b'.' && !point {
            point = true;
        } else if c == b',' || c == b' ' {
            break;
        } else {
            return None;
        }
        i += 1;
    }
    if count == 0 || w > 1 << 53 || after >= EXACT_POWERS_OF_TEN.len() {
        return None;
    }
    let v = w as f64 / EXACT_POWERS_OF_TEN[after];
    Some((if negative { -v } else { v }, i))
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
