//! Numbers and booleans: `int2/4/8` (`pg_strtoint*`), `float4/8`
//! (`float4in`/`float8in`, i.e. C `strtof`/`strtod`), `numeric`
//! (`numeric_in` + `numeric_send`) and `bool` (`parse_bool_with_len`).

use super::{PgType, ValueError, shown, syntax_error, trim_space};

/// Reads an `int2`, `int4` or `int8` the way `pg_strtoint16/32/64` do:
/// surrounding whitespace, an optional sign, decimal digits only.
///
/// # Panics
/// If `ty` is not one of the three integer types.
pub fn parse_int(ty: PgType, text: &[u8]) -> Result<i64, ValueError> {
    let (min, type_name) = match ty {
        PgType::Int2 => (i64::from(i16::MIN), "smallint"),
        PgType::Int4 => (i64::from(i32::MIN), "integer"),
        PgType::Int8 => (i64::MIN, "bigint"),
        other => panic!("parse_int called for {other:?}"),
    };
    let t = trim_space(text)?;
    let (neg, digits) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    if !digits.first().is_some_and(u8::is_ascii_digit) {
        return Err(syntax_error(type_name, text));
    }
    let out_of_range = || ValueError::Invalid(format!("value \"{}\" is out of range for type {type_name}", shown(text)));
    // Accumulated as a negative number so that the minimum fits, and checked
    // digit by digit like PostgreSQL: "99999999999x" is out of range, not
    // a syntax error.
    let mut acc: i64 = 0;
    let mut used = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            break;
        }
        acc = acc.checked_mul(10).and_then(|a| a.checked_sub(i64::from(d - b'0'))).filter(|a| *a >= min).ok_or_else(out_of_range)?;
        used += 1;
    }
    if used != digits.len() {
        return Err(syntax_error(type_name, text));
    }
    if neg {
        Ok(acc)
    } else if acc == min {
        Err(out_of_range())
    } else {
        Ok(-acc)
    }
}

pub(super) fn encode_bool(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    let t = trim_space(text)?;
    let v = parse_bool(t).ok_or_else(|| syntax_error("boolean", text))?;
    out.push(u8::from(v));
    Ok(())
}

/// `parse_bool_with_len`: a case-insensitive, non-empty prefix of a word
/// ("o" alone is not unique enough), or exactly "1"/"0".
fn parse_bool(t: &[u8]) -> Option<bool> {
    let prefix_of = |word: &[u8]| t.len() <= word.len() && t.iter().zip(word).all(|(a, b)| a.to_ascii_lowercase() == *b);
    match t.first()?.to_ascii_lowercase() {
        b't' => prefix_of(b"true").then_some(true),
        b'y' => prefix_of(b"yes").then_some(true),
        b'f' => prefix_of(b"false").then_some(false),
        b'n' => prefix_of(b"no").then_some(false),
        b'o' if t.len() >= 2 => {
            if prefix_of(b"on") {
                Some(true)
            } else if prefix_of(b"off") {
                Some(false)
            } else {
                None
            }
        }
        b'1' if t.len() == 1 => Some(true),
        b'0' if t.len() == 1 => Some(false),
        _ => None,
    }
}

/// What the syntax scan found in a float text.
enum FloatText<'a> {
    /// Decimal syntax accepted by both `strtod` and Rust's parser; whether any
    /// mantissa digit is non-zero (a zero result then means underflow).
    Decimal {
        text: &'a [u8],
        nonzero: bool,
    },
    Infinity {
        negative: bool,
    },
    NaN {
        negative: bool,
    },
}

/// Checks a float text against what `strtod` followed by "only trailing
/// whitespace" accepts, without converting it.
fn scan_float<'a>(text: &'a [u8], type_name: &str) -> Result<FloatText<'a>, ValueError> {
    let t = trim_space(text)?;
    let (negative, body) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let syntax = || syntax_error(type_name, text);
    match body.first().map(u8::to_ascii_lowercase) {
        Some(b'i') => {
            // strtod takes "inf" or "infinity"; anything after is junk.
            return if body.eq_ignore_ascii_case(b"inf") || body.eq_ignore_ascii_case(b"infinity") {
                Ok(FloatText::Infinity { negative })
            } else {
                Err(syntax())
            };
        }
        Some(b'n') => {
            return if body.eq_ignore_ascii_case(b"nan") {
                Ok(FloatText::NaN { negative })
            } else if body.len() > 3 && body[..3].eq_ignore_ascii_case(b"nan") && body[3] == b'(' {
                // "nan(chars)": glibc's payload syntax; not worth a fast path.
                Err(ValueError::NeedsServer)
            } else {
                Err(syntax())
            };
        }
        // Hexadecimal floats ("0x1p3") are strtod syntax Rust does not read.
        Some(b'0') if body.get(1).is_some_and(|c| c.eq_ignore_ascii_case(&b'x')) => return Err(ValueError::NeedsServer),
        _ => {}
    }
    let mut i = 0;
    let mut digits = 0;
    let mut nonzero = false;
    while let Some(&c) = body.get(i).filter(|c| c.is_ascii_digit()) {
        nonzero |= c != b'0';
        digits += 1;
        i += 1;
    }
    if body.get(i) == Some(&b'.') {
        i += 1;
        while let Some(&c) = body.get(i).filter(|c| c.is_ascii_digit()) {
            nonzero |= c != b'0';
            digits += 1;
            i += 1;
        }
    }
    if digits == 0 {
        return Err(syntax());
    }
    if body.get(i).is_some_and(|c| c.eq_ignore_ascii_case(&b'e')) {
        // strtod only takes the exponent if digits follow; otherwise the
        // "e" is left over, which float8in rejects as junk.
        let mut j = i + 1;
        if matches!(body.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        if !body.get(j).is_some_and(u8::is_ascii_digit) {
            return Err(syntax());
        }
        while body.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        i = j;
    }
    if i != body.len() {
        return Err(syntax());
    }
    Ok(FloatText::Decimal { text: t, nonzero })
}

fn float_out_of_range(type_name: &str, text: &[u8]) -> ValueError {
    ValueError::Invalid(format!("\"{}\" is out of range for type {type_name}", shown(text)))
}

/// Powers of ten that are exact doubles.
const EXACT_POWERS_OF_TEN: [f64; 23] =
    [1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22];

/// A plain decimal at the start of `b` (`[+-]?d*(.d*)?`, a digit at least,
/// up to the first byte that is neither a digit nor the point): its value
/// and the bytes it took. Only when it has at most 19 digits (with leading
/// zeros), which one 64-bit integer `w` holds: `w` over a power of ten then
/// is the value, rounded once, correctly, as `strtod` and Rust's parser
/// round. When `w` is at most 2^53 that is one division of two exact
/// doubles (Clinger's fast path); above, an exact integer division
/// ([`quotient`]). `None` for anything else, which the caller reads in full.
/// Nearly every value a program prints (up to 17 significant digits) takes
/// this path.
pub fn decimal_prefix(b: &[u8]) -> Option<(f64, usize)> {
    let (negative, mut i) = match b.first() {
        Some(b'-') => (true, 1),
        Some(b'+') => (false, 1),
        _ => (false, 0),
    };
    let (mut w, mut count) = (0u64, 0u32);
    digits(b, &mut i, &mut w, &mut count)?;
    let mut after = 0;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let from = i;
        digits(b, &mut i, &mut w, &mut count)?;
        after = i - from;
    }
    if count == 0 {
        return None;
    }
    let v = if w <= 1 << 53 { w as f64 / EXACT_POWERS_OF_TEN[after] } else { quotient(w, after as u32) };
    Some((if negative { -v } else { v }, i))
}

/// Reads the digits at `b[*i..]` into `w` (the integer of every digit read
/// so far, `count` of them), up to eight at a time from one word: the
/// first byte that is not a digit is found in the word, not by a branch per
/// byte. `None` past 19 digits, which `w` could no longer hold.
#[inline]
fn digits(b: &[u8], i: &mut usize, w: &mut u64, count: &mut u32) -> Option<()> {
    loop {
        let word = word_at(b, *i);
        let k = not_digits(word).trailing_zeros() / 8;
        if k == 0 {
            return Some(());
        }
        if *count + k > 19 {
            return None;
        }
        *w = *w * POW10[k as usize] + eight_digits_value(right_aligned(word, k));
        *count += k;
        *i += k as usize;
        if k < 8 {
            return Some(());
        }
    }
}

/// 10^k for k up to 8.
const POW10: [u64; 9] = [1, 10, 100, 1_000, 10_000, 100_000, 1_000_000, 10_000_000, 100_000_000];

/// 10^k for k up to 19, every power of ten a `u64` holds.
const POW10_64: [u64; 20] = {
    let mut p = [1u64; 20];
    let mut k = 1;
    while k < 20 {
        p[k] = p[k - 1] * 10;
        k += 1;
    }
    p
};

/// Eight bytes of `b` from `i`, the first in the lowest byte; past the end
/// of `b`, zero bytes (not digits).
#[inline]
fn word_at(b: &[u8], i: usize) -> u64 {
    if let Some(w) = b.get(i..i + 8) {
        return u64::from_le_bytes(w.try_into().expect("8 bytes"));
    }
    let left = b.len().saturating_sub(i);
    if left == 0 {
        0
    } else if b.len() >= 8 {
        // The last eight bytes, shifted down so that byte `i` is the lowest.
        u64::from_le_bytes(b[b.len() - 8..].try_into().expect("8 bytes")) >> (8 * (8 - left))
    } else {
        let mut w = [0u8; 8];
        w[..left].copy_from_slice(&b[i..]);
        u64::from_le_bytes(w)
    }
}

/// The high bit of each byte of `word` that is not an ASCII digit. Exact
/// for the lowest such byte (what [`digits`] looks for): the borrow or carry
/// a byte outside the digits makes only reaches the bytes above it.
#[inline]
fn not_digits(word: u64) -> u64 {
    (word.wrapping_sub(0x3030_3030_3030_3030) | word.wrapping_add(0x4646_4646_4646_4646)) & 0x8080_8080_8080_8080
}

/// The `k` (1..=8) digits in the low bytes of `word` as the last digits of
/// eight, after `8 - k` zeros.
#[inline]
fn right_aligned(word: u64, k: u32) -> u64 {
    if k == 8 { word } else { (word << (8 * (8 - k))) | (0x3030_3030_3030_3030 >> (8 * k)) }
}

/// The value of eight ASCII digits (the first in the lowest byte), combined
/// in one word (SWAR), as fast_float does it.
#[inline]
fn eight_digits_value(word: u64) -> u64 {
    let v = word - 0x3030_3030_3030_3030;
    // Pairs of digits, then fours, then the eight.
    let v = v * 10 + (v >> 8);
    const MASK: u64 = 0x0000_00ff_0000_00ff;
    let v1 = (v & MASK).wrapping_mul(100 + (1_000_000 << 32));
    let v2 = ((v >> 16) & MASK).wrapping_mul(1 + (10_000 << 32));
    u64::from((v1.wrapping_add(v2) >> 32) as u32)
}

/// The value of eight ASCII digits (`b` holds eight bytes), or `None` when
/// any byte is not a digit.
#[cfg(test)]
fn eight_digits(b: &[u8]) -> Option<u64> {
    let word = u64::from_le_bytes(b.try_into().ok()?);
    (not_digits(word) == 0).then(|| eight_digits_value(word))
}

/// `w / 10^m` (`w` above 2^53, `m` at most 19) rounded to the nearest
/// double, ties to even: the quotient of `w` shifted up as far as 128 bits
/// allow gives 64 bits or more, of which the top 53 are kept and the rest,
/// with the remainder, decide the rounding. Never subnormal or infinite:
/// the value is between 2^53 / 10^19 and 2^64.
fn quotient(w: u64, m: u32) -> f64 {
    let shift = 64 + w.leading_zeros();
    let n = u128::from(w) << shift;
    let d = u128::from(POW10_64[m as usize]);
    let (q, r) = (n / d, n % d);
    // Bits of `q` below the 54 kept (53 and the rounding bit).
    let drop = 128 - q.leading_zeros() - 54;
    let top = (q >> drop) as u64;
    let sticky = r != 0 || q & ((1u128 << drop) - 1) != 0;
    let mut mantissa = top >> 1;
    let mut exponent = drop as i32 + 1 - shift as i32;
    if top & 1 == 1 && (sticky || mantissa & 1 == 1) {
        mantissa += 1;
        if mantissa == 1 << 53 {
            mantissa >>= 1;
            exponent += 1;
        }
    }
    // mantissa < 2^53 and 2^exponent are exact doubles, and so is their product.
    mantissa as f64 * f64::from_bits(((1023 + exponent) as u64) << 52)
}

/// A decimal float with nothing around it (`[-]?d*(.d*)?([eE][+-]?d+)?`)
/// in one pass: the correctly rounded value, as `strtod` gives it, when it
/// is finite and not an underflow to zero. `None` for everything else
/// (signs, spaces, words, junk, ranges), which the full scan then reads or
/// refuses as `float8in` does.
fn one_pass(text: &[u8]) -> Option<f64> {
    if !text.first().is_some_and(|c| c.is_ascii_digit() || *c == b'-' || *c == b'.') {
        return None;
    }
    let (v, n) = fast_float2::parse_partial::<f64, _>(text).ok()?;
    // A zero from non-zero digits underflowed: an error the full scan reports.
    let zero_ok = || v != 0.0 || !text[..n].iter().take_while(|c| !matches!(c, b'e' | b'E')).any(|c| (b'1'..=b'9').contains(c));
    (n == text.len() && v.is_finite() && zero_ok()).then_some(v)
}

/// `float8in`: `strtod`, which is correctly rounded like Rust's parser;
/// overflow and underflow to zero are errors, denormals are kept.
pub(super) fn parse_float8(text: &[u8]) -> Result<f64, ValueError> {
    const NAME: &str = "double precision";
    if let Some(v) = one_pass(text) {
        return Ok(v);
    }
    match scan_float(text, NAME)? {
        // glibc's NaN is the quiet NaN with the sign as written.
        FloatText::NaN { negative } => Ok(f64::from_bits(0x7ff8_0000_0000_0000 | (u64::from(negative) << 63))),
        FloatText::Infinity { negative } => Ok(if negative { f64::NEG_INFINITY } else { f64::INFINITY }),
        FloatText::Decimal { text: t, nonzero } => {
            let v: f64 = fast_float2::parse(t).map_err(|_| ValueError::NeedsServer)?;
            if v.is_infinite() || (v == 0.0 && nonzero) { Err(float_out_of_range(NAME, text)) } else { Ok(v) }
        }
    }
}

/// `float4in`: `strtof` (rounded once, straight to single precision).
pub(super) fn parse_float4(text: &[u8]) -> Result<f32, ValueError> {
    const NAME: &str = "real";
    match scan_float(text, NAME)? {
        FloatText::NaN { negative } => Ok(f32::from_bits(0x7fc0_0000 | (u32::from(negative) << 31))),
        FloatText::Infinity { negative } => Ok(if negative { f32::NEG_INFINITY } else { f32::INFINITY }),
        FloatText::Decimal { text: t, nonzero } => {
            let v: f32 = fast_float2::parse(t).map_err(|_| ValueError::NeedsServer)?;
            if v.is_infinite() || (v == 0.0 && nonzero) { Err(float_out_of_range(NAME, text)) } else { Ok(v) }
        }
    }
}

use crate::encode::{NUMERIC_NAN, NUMERIC_NEG, NUMERIC_NINF, NUMERIC_PINF, NUMERIC_POS};
/// Beyond these (decimal weight of the first significant digit, display
/// scale) the fast path stops and the server checks its own format limits.
const NUMERIC_FAST_WEIGHT: i64 = 1000;
const NUMERIC_FAST_SCALE: i64 = 1000;
const NUMERIC_FAST_EXPONENT: i64 = 100_000;

/// `numeric_in` + `numeric_send`: int16 ndigits, int16 weight, uint16 sign,
/// int16 dscale, then base-10000 digits without leading or trailing zero
/// groups.
pub(super) fn encode_numeric(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    let t = trim_space(text)?;
    if let Some(sign) = numeric_special(t, text)? {
        // numeric_send writes the dscale bits of the special value's header
        // word: 0 for NaN, 0x20 for the infinities.
        let dscale: u16 = if sign == NUMERIC_NAN { 0 } else { 0x20 };
        write_numeric_header(out, 0, 0, sign, dscale);
        return Ok(());
    }
    let syntax = || syntax_error("numeric", text);
    let (negative, body) = match t.first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    // set_var_from_str: digits with at most one point, a digit right after
    // the sign or the leading point.
    let int_len = body.iter().take_while(|c| c.is_ascii_digit()).count();
    let int_digits = &body[..int_len];
    let mut rest = &body[int_len..];
    let mut frac_digits: &[u8] = &[];
    if let [b'.', after @ ..] = rest {
        let n = after.iter().take_while(|c| c.is_ascii_digit()).count();
        frac_digits = &after[..n];
        rest = &after[n..];
    }
    if int_digits.is_empty() && frac_digits.is_empty() {
        return Err(syntax());
    }
    let mut exponent: i64 = 0;
    if let [b'e' | b'E', after @ ..] = rest {
        // The exponent is read by strtol, which would also skip whitespace.
        if after.first().copied().is_some_and(super::is_space) {
            return Err(ValueError::NeedsServer);
        }
        let (neg_exp, exp_digits) = match after {
            [b'-', d @ ..] => (true, d),
            [b'+', d @ ..] => (false, d),
            d => (false, d),
        };
        let n = exp_digits.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return Err(syntax());
        }
        for &d in &exp_digits[..n] {
            exponent = (exponent * 10 + i64::from(d - b'0')).min(1_000_000_000);
        }
        if exponent > NUMERIC_FAST_EXPONENT {
            // PostgreSQL limits the exponent itself (even for zero).
            return Err(ValueError::NeedsServer);
        }
        if neg_exp {
            exponent = -exponent;
        }
        rest = &exp_digits[n..];
    }
    if !rest.is_empty() {
        return Err(syntax());
    }
    let digits = DecimalDigits { int: int_digits, frac: frac_digits };
    let dscale = (frac_digits.len() as i64 - exponent).max(0);
    let Some(first) = digits.first_nonzero() else {
        if dscale > NUMERIC_FAST_SCALE {
            return Err(ValueError::NeedsServer);
        }
        write_numeric_header(out, 0, 0, NUMERIC_POS, dscale as u16);
        return Ok(());
    };
    let last = digits.last_nonzero();
    // Decimal weight of the first significant digit (10^dweight).
    let dweight = int_digits.len() as i64 - 1 - first as i64 + exponent;
    if dweight.abs() > NUMERIC_FAST_WEIGHT || dscale > NUMERIC_FAST_SCALE {
        return Err(ValueError::NeedsServer);
    }
    let weight = dweight.div_euclid(4);
    let pad = 3 - dweight.rem_euclid(4) as usize;
    let significant = last - first + 1;
    let ndigits = (significant + pad).div_ceil(4);
    let sign = if negative { NUMERIC_NEG } else { NUMERIC_POS };
    write_numeric_header(out, ndigits as u16, weight as i16 as u16, sign, dscale as u16);
    let digit_at = |p: usize| -> u16 {
        // Position p of the padded, group-aligned significant digits.
        if p < pad || p - pad >= significant { 0 } else { u16::from(digits.at(first + p - pad) - b'0') }
    };
    for g in 0..ndigits {
        let p = g * 4;
        let group = ((digit_at(p) * 10 + digit_at(p + 1)) * 10 + digit_at(p + 2)) * 10 + digit_at(p + 3);
        out.extend_from_slice(&group.to_be_bytes());
    }
    Ok(())
}

/// The digits of a decimal as written: integer part, then fraction.
struct DecimalDigits<'a> {
    int: &'a [u8],
    frac: &'a [u8],
}

impl DecimalDigits<'_> {
    fn at(&self, k: usize) -> u8 {
        if k < self.int.len() { self.int[k] } else { self.frac[k - self.int.len()] }
    }

    fn first_nonzero(&self) -> Option<usize> {
        match self.int.iter().position(|&c| c != b'0') {
            Some(k) => Some(k),
            None => self.frac.iter().position(|&c| c != b'0').map(|k| k + self.int.len()),
        }
    }

    /// Only called when some digit is non-zero.
    fn last_nonzero(&self) -> usize {
        match self.frac.iter().rposition(|&c| c != b'0') {
            Some(k) => k + self.int.len(),
            None => self.int.iter().rposition(|&c| c != b'0').unwrap_or(0),
        }
    }
}

/// numeric_in's NaN and infinity spellings, tried in its order. `Ok(None)`
/// for anything else.
fn numeric_special(t: &[u8], text: &[u8]) -> Result<Option<u16>, ValueError> {
    const SPELLINGS: [(&[u8], u16); 7] = [
        (b"nan", NUMERIC_NAN),
        (b"infinity", NUMERIC_PINF),
        (b"+infinity", NUMERIC_PINF),
        (b"-infinity", NUMERIC_NINF),
        (b"inf", NUMERIC_PINF),
        (b"+inf", NUMERIC_PINF),
        (b"-inf", NUMERIC_NINF),
    ];
    for (word, sign) in SPELLINGS {
        if t.len() >= word.len() && t[..word.len()].eq_ignore_ascii_case(word) {
            // Only trailing whitespace (already trimmed) may follow.
            return if t.len() == word.len() { Ok(Some(sign)) } else { Err(syntax_error("numeric", text)) };
        }
    }
    Ok(None)
}

fn write_numeric_header(out: &mut Vec<u8>, ndigits: u16, weight: u16, sign: u16, dscale: u16) {
    out.extend_from_slice(&ndigits.to_be_bytes());
    out.extend_from_slice(&weight.to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&dscale.to_be_bytes());
}

#[cfg(test)]
mod tests {
    use super::super::{EncodeContext, encode_text};
    use super::*;
    use proptest::prelude::*;

    /// `decimal_prefix` when it is the whole text.
    fn plain_decimal(t: &[u8]) -> Option<f64> {
        decimal_prefix(t).filter(|(_, n)| *n == t.len()).map(|(v, _)| v)
    }

    proptest! {
        /// The fast paths read a decimal to the bit as Rust's parser (which
        /// rounds correctly, as strtod does), and so does the whole parse.
        #[test]
        fn float8_reads_decimals_as_str_parse_does(
            s in prop_oneof![
                "[-+]?[0-9]{0,20}([.][0-9]{0,25})?([eE][-+]?[0-9]{1,3})?",
                any::<f64>().prop_map(|f| format!("{f:?}")),
                any::<f64>().prop_map(|f| format!("{f:e}")),
                (any::<i64>(), 0u32..19).prop_map(|(m, k)| format!("{}", m as f64 / 10f64.powi(k as i32))),
            ],
        ) {
            match s.parse::<f64>() {
                Ok(want) => {
                    if let Some(v) = plain_decimal(s.as_bytes()) {
                        prop_assert_eq!(v.to_bits(), want.to_bits(), "{}", s);
                    }
                    if let Some(v) = one_pass(s.as_bytes()) {
                        prop_assert_eq!(v.to_bits(), want.to_bits(), "{}", s);
                    }
                    let underflow = want == 0.0 && s.split(['e', 'E']).next().is_some_and(|m| m.bytes().any(|b| (b'1'..=b'9').contains(&b)));
                    if want.is_finite() && !underflow {
                        prop_assert_eq!(parse_float8(s.as_bytes()).map(f64::to_bits), Ok(want.to_bits()), "{}", s);
                    } else {
                        prop_assert!(parse_float8(s.as_bytes()).is_err(), "{}", s);
                    }
                }
                Err(_) => {
                    prop_assert!(plain_decimal(s.as_bytes()).is_none() && one_pass(s.as_bytes()).is_none(), "{}", s);
                    prop_assert!(parse_float8(s.as_bytes()).is_err(), "{}", s);
                }
            }
        }
    }

    proptest! {
        #[test]
        fn an_integer_over_a_power_of_ten_is_rounded_as_str_parse_does(w in (1u64 << 53)..=u64::MAX, m in 0u32..=19) {
            let want: f64 = format!("{w}e-{m}").parse().expect("a number");
            prop_assert_eq!(quotient(w, m).to_bits(), want.to_bits(), "{}e-{}", w, m);
        }

        #[test]
        fn a_decimal_prefix_stops_where_the_digits_do(int in "[0-9]{0,12}", frac in proptest::option::of("[0-9]{0,12}"), rest in "([,a-z ].*)?") {
            let number = match &frac { Some(f) => format!("{int}.{f}"), None => int.clone() };
            let text = format!("{number}{rest}");
            match decimal_prefix(text.as_bytes()) {
                Some((v, n)) => {
                    prop_assert_eq!(n, number.len());
                    prop_assert_eq!(v.to_bits(), number.parse::<f64>().expect("digits").to_bits());
                }
                // No digit, or more than 19.
                None => prop_assert!(matches!(number.bytes().filter(u8::is_ascii_digit).count(), 0 | 20..), "{}", text),
            }
        }

        #[test]
        fn eight_digits_reads_eight_ascii_digits_and_nothing_else(b: [u8; 8], digits in 0u64..100_000_000, mix: bool) {
            let b = if mix { b } else { *format!("{digits:08}").as_bytes().first_chunk::<8>().expect("eight") };
            let want = b.iter().all(u8::is_ascii_digit).then(|| std::str::from_utf8(&b).expect("digits").parse::<u64>().expect("a number"));
            prop_assert_eq!(eight_digits(&b), want);
        }
    }

    #[test]
    fn the_float_fast_paths_take_what_fits_and_leave_the_rest() {
        assert_eq!(plain_decimal(b"74.15648787718233"), Some(74.15648787718233));
        // Over 2^53: an exact integer division.
        assert_eq!(plain_decimal(b"15.991039287692011"), Some(15.991039287692011));
        assert_eq!(plain_decimal(b"9007199254740993"), Some(9007199254740992.0));
        assert_eq!(plain_decimal(b"9999999999999999999"), Some(1e19));
        assert_eq!(plain_decimal(b"-0").map(f64::is_sign_negative), Some(true));
        assert_eq!(plain_decimal(b"+.5"), Some(0.5));
        assert_eq!(decimal_prefix(b"12345678.5,x"), Some((12345678.5, 10)));
        // Over 19 digits, an exponent, whitespace: read in full.
        for s in ["15.991039287692011111", "10000000000000000000", "1e5", " 1.5", "1.5 ", "", ".", "-", "1.2.3"] {
            assert_eq!(plain_decimal(s.as_bytes()), None, "{s}");
        }
        assert_eq!(one_pass(b"15.991039287692011"), Some(15.991039287692011));
        assert_eq!(one_pass(b"-0.0").map(f64::is_sign_negative), Some(true));
        // Left to the full scan: what it must refuse, report or take otherwise.
        for s in ["1e-400", "1e400", "-inf", "nan", "1e", "1.5x", " 1", "+1", "0x1p3", "1_0"] {
            assert_eq!(one_pass(s.as_bytes()), None, "{s}");
        }
        assert_eq!(parse_float8(b" 15.991039287692011 "), Ok(15.991039287692011));
        assert_eq!(parse_float8(b"+1"), Ok(1.0));
        assert!(matches!(parse_float8(b"1e-400"), Err(ValueError::Invalid(_))));
        assert_eq!(parse_float8(b"0e-400"), Ok(0.0));
        assert_eq!(parse_float8(b"4.9e-324"), Ok(4.9e-324));
    }

    fn enc(ty: PgType, s: &str) -> Result<Vec<u8>, ValueError> {
        let mut out = vec![0xAA];
        let r = encode_text(ty, s.as_bytes(), &EncodeContext::default(), &mut out);
        match r {
            Ok(()) => Ok(out[1..].to_vec()),
            Err(e) => {
                assert_eq!(out, [0xAA], "output touched on error for {s:?}");
                Err(e)
            }
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    fn invalid(r: Result<Vec<u8>, ValueError>) -> String {
        match r {
            Err(ValueError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn integers_accept_what_pg_strtoint_accepts() {
        assert_eq!(parse_int(PgType::Int4, b" +12 "), Ok(12));
        assert_eq!(parse_int(PgType::Int4, b"\t-0\n"), Ok(0));
        assert_eq!(parse_int(PgType::Int4, b"-2147483648"), Ok(-2147483648));
        assert_eq!(parse_int(PgType::Int4, b"0002147483647"), Ok(2147483647));
        assert_eq!(parse_int(PgType::Int2, b"-32768"), Ok(-32768));
        assert_eq!(parse_int(PgType::Int8, b"-9223372036854775808"), Ok(i64::MIN));
        assert_eq!(parse_int(PgType::Int8, b"9223372036854775807"), Ok(i64::MAX));
        assert_eq!(enc(PgType::Int2, "-2"), Ok(vec![0xff, 0xfe]));
        assert_eq!(enc(PgType::Int4, "12"), Ok(vec![0, 0, 0, 12]));
        assert_eq!(enc(PgType::Int8, "1"), Ok(vec![0, 0, 0, 0, 0, 0, 0, 1]));
    }

    #[test]
    fn integers_reject_with_postgres_messages() {
        assert_eq!(invalid(enc(PgType::Int4, "12x")), "invalid input syntax for type integer: \"12x\"");
        assert_eq!(invalid(enc(PgType::Int4, "99999999999")), "value \"99999999999\" is out of range for type integer");
        assert_eq!(invalid(enc(PgType::Int2, "32768")), "value \"32768\" is out of range for type smallint");
        assert_eq!(invalid(enc(PgType::Int8, "9223372036854775808")), "value \"9223372036854775808\" is out of range for type bigint");
        // Overflow is found while reading digits, before the junk.
        assert!(invalid(enc(PgType::Int4, "99999999999x")).contains("out of range"));
        for bad in ["", " ", "+", "-", " 1 2", "1_000", "0x10", "1.0", "1e3", "++1"] {
            assert!(matches!(enc(PgType::Int4, bad), Err(ValueError::Invalid(_))), "{bad:?}");
        }
    }

    #[test]
    fn integers_leave_non_ascii_space_to_the_server() {
        assert_eq!(enc(PgType::Int4, "\u{a0}1"), Err(ValueError::NeedsServer));
        assert_eq!(enc(PgType::Int4, "1\u{a0}"), Err(ValueError::NeedsServer));
    }

    #[test]
    fn bools_follow_parse_bool_with_len() {
        for (s, v) in [
            ("t", 1),
            ("TRUE", 1),
            (" yes ", 1),
            ("ye", 1),
            ("on", 1),
            ("1", 1),
            ("of", 0),
            ("OFF", 0),
            ("0", 0),
            ("n", 0),
            ("No", 0),
            ("f", 0),
        ] {
            assert_eq!(enc(PgType::Bool, s), Ok(vec![v]), "{s:?}");
        }
        for bad in ["o", "10", "truex", "", "  ", "onn", "yess", "-1", "2"] {
            assert_eq!(invalid(enc(PgType::Bool, bad)), format!("invalid input syntax for type boolean: \"{bad}\""));
        }
    }

    #[test]
    fn floats_match_strtod() {
        let f8 = |s: &str| enc(PgType::Float8, s).map(|b| u64::from_be_bytes(b.try_into().unwrap()));
        assert_eq!(f8(" 1.5 "), Ok(1.5f64.to_bits()));
        assert_eq!(f8("1.e5"), Ok(1e5f64.to_bits()));
        assert_eq!(f8("-.5E-3"), Ok((-0.0005f64).to_bits()));
        assert_eq!(f8("-0"), Ok(0x8000_0000_0000_0000));
        assert_eq!(f8("4.9e-324"), Ok(1));
        assert_eq!(f8("1e-320"), Ok(0x7e8));
        assert_eq!(f8("0e-999999999"), Ok(0));
        assert_eq!(f8("iNfInItY"), Ok(0x7ff0_0000_0000_0000));
        assert_eq!(f8("-inf"), Ok(0xfff0_0000_0000_0000));
        assert_eq!(f8("+Infinity"), Ok(0x7ff0_0000_0000_0000));
        assert_eq!(f8("NaN "), Ok(0x7ff8_0000_0000_0000));
        assert_eq!(f8("-nan"), Ok(0xfff8_0000_0000_0000));
        assert_eq!(
            enc(PgType::Float8, "1e400").unwrap_err(),
            ValueError::Invalid("\"1e400\" is out of range for type double precision".into())
        );
        assert!(matches!(f8("1e-400"), Err(ValueError::Invalid(_))));
        assert!(matches!(f8("2e-324"), Err(ValueError::Invalid(_))));
        for bad in ["", "1e", "1e+", ".e1", ".", "1_0", "infinit", "infx", "1 e5", "1e 5", "nanx", "--1", "1.2.3"] {
            assert_eq!(invalid(enc(PgType::Float8, bad)), format!("invalid input syntax for type double precision: \"{bad}\""), "{bad:?}");
        }
        assert_eq!(f8("0x1p3"), Err(ValueError::NeedsServer));
        assert_eq!(f8("-0X10"), Err(ValueError::NeedsServer));
        assert_eq!(f8("nan(1)"), Err(ValueError::NeedsServer));
    }

    #[test]
    fn float4_rounds_once() {
        let f4 = |s: &str| enc(PgType::Float4, s).map(|b| u32::from_be_bytes(b.try_into().unwrap()));
        assert_eq!(f4("3.4028235e38"), Ok(0x7f7f_ffff));
        assert_eq!(f4("1e-45"), Ok(1));
        assert_eq!(f4("1.17549435e-38"), Ok(0x0080_0000));
        assert_eq!(f4("nan"), Ok(0x7fc0_0000));
        assert_eq!(f4("-nan"), Ok(0xffc0_0000));
        assert_eq!(f4("-inf"), Ok(0xff80_0000));
        assert_eq!(invalid(enc(PgType::Float4, "3.4028236e38")), "\"3.4028236e38\" is out of range for type real");
        assert!(matches!(f4("1e-46"), Err(ValueError::Invalid(_))));
        assert!(matches!(f4("1e39"), Err(ValueError::Invalid(_))));
    }

    #[test]
    fn numeric_wire_form_matches_numeric_send() {
        // Expected bytes taken from PostgreSQL 15's numeric_send.
        for (s, want) in [
            ("1e 5", None),
            ("1e+5", Some("0001000100000000000a")),
            ("1e-5", Some("0001fffe0000000503e8")),
            (" 1.500 ", Some("000200000000000300011388")),
            ("1e3", Some("000100000000000003e8")),
            ("1.5e-3", Some("0001ffff00000004000f")),
            ("1.5e3", Some("000100000000000005dc")),
            ("0.000", Some("0000000000000003")),
            ("-0", Some("0000000000000000")),
            ("-0.00", Some("0000000000000002")),
            ("1.", Some("00010000000000000001")),
            (".5", Some("0001ffff000000011388")),
            ("+.5e1", Some("00010000000000000005")),
            ("1e1000", Some("000100fa000000000001")),
            ("1e-1000", Some("0001ff06000003e80001")),
            ("NaN", Some("00000000c0000000")),
            (" nan ", Some("00000000c0000000")),
            ("inf", Some("00000000d0000020")),
            ("+inf", Some("00000000d0000020")),
            ("-Infinity", Some("00000000f0000020")),
            ("infinity ", Some("00000000d0000020")),
            ("00012.3400", Some("0002000000000004000c0d48")),
            ("123456789.987654321", Some("0006000200000009000109291a852694153803e8")),
            ("-12345", Some("000200014000000000010929")),
            ("1E2", Some("00010000000000000064")),
        ] {
            let got = enc(PgType::Numeric, s);
            match want {
                Some(h) => assert_eq!(got, Ok(hex(h)), "{s:?}"),
                None => assert_eq!(got, Err(ValueError::NeedsServer), "{s:?}"),
            }
        }
    }

    #[test]
    fn numeric_rejects_and_defers() {
        for bad in [".", "", "-", "1e", "1e+", "1 e5", "1.2.3", "infinit", "+nan", "-nan", "nanx", "1e5x", "0x10", "1_0"] {
            assert_eq!(invalid(enc(PgType::Numeric, bad)), format!("invalid input syntax for type numeric: \"{bad}\""), "{bad:?}");
        }
        assert_eq!(enc(PgType::Numeric, "1e1001"), Err(ValueError::NeedsServer));
        assert_eq!(enc(PgType::Numeric, "1e-2147483647"), Err(ValueError::NeedsServer));
        assert_eq!(enc(PgType::Numeric, "0e9999999999"), Err(ValueError::NeedsServer));
        assert_eq!(enc(PgType::Numeric, "0e99999"), Ok(hex("0000000000000000")));
        let long_scale = format!("0.{}", "0".repeat(1001));
        assert_eq!(enc(PgType::Numeric, &long_scale), Err(ValueError::NeedsServer));
    }
}
