//! Epoch numbers (`--epoch`): a count of seconds, milliseconds,
//! microseconds or nanoseconds since 1970-01-01 UTC, as text or as an
//! integer a service parsed itself, in microseconds.

use super::{EpochUnit, ValueError, shown, trim_space};
use crate::encode::{END_TIMESTAMP, MIN_TIMESTAMP, PG_EPOCH_OFFSET_MICROS};

/// With `--epoch`, a bare decimal number (`[+-]digits[.digits]`) is that many
/// units since 1970-01-01 00:00 UTC, rounded to the nearest microsecond with
/// halves away from zero, computed exactly in decimal. `None` if the text
/// is not such a number.
pub(super) fn parse_epoch(text: &[u8], unit: EpochUnit) -> Option<Result<i64, ValueError>> {
    let t = trim_space(text).ok()?;
    let (negative, body) = match t.first()? {
        b'-' => (true, &t[1..]),
        b'+' => (false, &t[1..]),
        _ => (false, t),
    };
    let int_len = body.iter().take_while(|c| c.is_ascii_digit()).count();
    let (int, frac) = match &body[int_len..] {
        [] => (&body[..int_len], &[][..]),
        [b'.', frac @ ..] if !frac.is_empty() && frac.iter().all(u8::is_ascii_digit) => (&body[..int_len], frac),
        _ => return None,
    };
    if int.is_empty() {
        return None;
    }
    // Moving the decimal point by the unit's power of ten gives microseconds.
    let shift: isize = match unit {
        EpochUnit::Seconds => 6,
        EpochUnit::Millis => 3,
        EpochUnit::Micros => 0,
        EpochUnit::Nanos => -3,
    };
    let int = &int[int.iter().position(|&c| c != b'0').unwrap_or(int.len())..];
    let digit = |k: isize| -> u8 {
        let k = k as usize;
        if k < int.len() { int[k] - b'0' } else { frac.get(k - int.len()).map_or(0, |d| d - b'0') }
    };
    let point = int.len() as isize + shift;
    let range_error = || ValueError::Invalid(format!("timestamp out of range: \"{}\"", shown(text)));
    if point > 22 {
        return Some(Err(range_error()));
    }
    let mut micros: i128 = (0..point.max(0)).fold(0, |v, k| v * 10 + i128::from(digit(k)));
    if point >= 0 && digit(point) >= 5 {
        micros += 1;
    }
    if negative {
        micros = -micros;
    }
    let pg = micros - i128::from(PG_EPOCH_OFFSET_MICROS);
    if pg < i128::from(MIN_TIMESTAMP) || pg >= i128::from(END_TIMESTAMP) || micros >= i128::from(i64::MAX) {
        return Some(Err(range_error()));
    }
    Some(Ok(micros as i64))
}

/// `v` whole units of `unit` since 1970-01-01 UTC, in microseconds (halves
/// away from zero): exactly what [`parse_epoch`] gives for the decimal text
/// of `v`, without writing and reading that text (a service that parsed the
/// integer itself hands it over as it is).
pub fn epoch_integer(v: i64, unit: EpochUnit) -> Result<i64, ValueError> {
    let n = i128::from(v);
    let micros = match unit {
        EpochUnit::Seconds => n * 1_000_000,
        EpochUnit::Millis => n * 1_000,
        EpochUnit::Micros => n,
        EpochUnit::Nanos => {
            let (whole, rest) = (n.abs() / 1_000, n.abs() % 1_000);
            let rounded = whole + i128::from(rest >= 500);
            if n < 0 { -rounded } else { rounded }
        }
    };
    let pg = micros - i128::from(PG_EPOCH_OFFSET_MICROS);
    if pg < i128::from(MIN_TIMESTAMP) || pg >= i128::from(END_TIMESTAMP) || micros >= i128::from(i64::MAX) {
        return Err(ValueError::Invalid(format!("timestamp out of range: \"{v}\"")));
    }
    Ok(micros as i64)
}
