//! Numbers, dates and timestamps written as text, fast.
//!
//! `chute gen` writes tens of millions of values per second of CPU, and
//! `write!` through `fmt` costs more than generating the value. These write
//! straight into the output buffer, in forms PostgreSQL's input functions and
//! the tsbs loader read.

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_u64(out: &mut Vec<u8>, mut v: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

/// Appends `v` in decimal.
#[inline]
pub(crate) fn push_i64(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    push_u64(out, v.unsigned_abs());
}

/// Appends `v` zero-padded to `width` digits (`v` must fit).
#[inline]
fn push_padded(out: &mut Vec<u8>, mut v: u64, width: usize) {
    let start = out.len();
    out.resize(start + width, b'0');
    for i in (start..start + width).rev() {
        out[i] = b'0' + (v % 10) as u8;
        v /= 10;
    }
}

/// Appends `v` rounded to `decimals` places without trailing zeros, as tsbs
/// prints its values (`83.2359`, `408`, `-0.5`).
#[inline]
pub(crate) fn push_rounded(out: &mut Vec<u8>, v: f64, decimals: u32) {
    let scale = 10u64.pow(decimals);
    let n = (v * scale as f64).round() as i64;
    if n < 0 {
        out.push(b'-');
    }
    let n = n.unsigned_abs();
    push_u64(out, n / scale);
    let (mut frac, mut digits) = (n % scale, decimals as usize);
    if frac != 0 {
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        out.push(b'.');
        push_padded(out, frac, digits);
    }
}

/// The day of 1970-01-01 + `days` as (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
pub(crate) const fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + (month <= 2) as i64, month, day)
}

/// Days from 1970-01-01 to the given day, proleptic Gregorian (the inverse
/// of [`civil_from_days`]).
pub(crate) const fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = month as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + day as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Appends the date `days` after 1970-01-01 as `YYYY-MM-DD`. Years outside
/// 1..=9999 are written by jiff (or as the number of days, beyond its range).
#[inline]
pub(crate) fn push_date(out: &mut Vec<u8>, days: i64) {
    let (y, m, d) = civil_from_days(days);
    if (1..=9999).contains(&y) {
        push_padded(out, y as u64, 4);
        out.push(b'-');
        push_padded(out, u64::from(m), 2);
        out.push(b'-');
        push_padded(out, u64::from(d), 2);
    } else {
        slow_date(out, days);
    }
}

/// Dates the fast path does not cover.
#[cold]
fn slow_date(out: &mut Vec<u8>, days: i64) {
    match jiff::Timestamp::from_second(days.saturating_mul(86_400)) {
        Ok(t) => out.extend_from_slice(t.to_zoned(jiff::tz::TimeZone::UTC).date().to_string().as_bytes()),
        Err(_) => push_i64(out, days),
    }
}

/// Appends the instant `micros` after the Unix epoch in RFC 3339 form, UTC:
/// `2021-06-01T00:00:10Z`, with as many fraction digits as it needs
/// (`…:10.25Z`) — what jiff's `Timestamp` prints.
#[inline]
pub(crate) fn push_timestamp(out: &mut Vec<u8>, micros: i64) {
    let days = micros.div_euclid(86_400_000_000);
    let in_day = micros.rem_euclid(86_400_000_000) as u64;
    let (y, _, _) = civil_from_days(days);
    if !(1..=9999).contains(&y) {
        slow_timestamp(out, micros);
        return;
    }
    push_date(out, days);
    let secs = in_day / 1_000_000;
    out.push(b'T');
    push_padded(out, secs / 3600, 2);
    out.push(b':');
    push_padded(out, secs / 60 % 60, 2);
    out.push(b':');
    push_padded(out, secs % 60, 2);
    let (mut frac, mut digits) = (in_day % 1_000_000, 6);
    if frac != 0 {
        while frac % 10 == 0 {
            frac /= 10;
            digits -= 1;
        }
        out.push(b'.');
        push_padded(out, frac, digits);
    }
    out.push(b'Z');
}

/// Instants the fast path does not cover.
#[cold]
fn slow_timestamp(out: &mut Vec<u8>, micros: i64) {
    match jiff::Timestamp::from_microsecond(micros) {
        Ok(t) => out.extend_from_slice(t.to_string().as_bytes()),
        Err(_) => push_i64(out, micros),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(f: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        f(&mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn integers() {
        assert_eq!(s(|o| push_u64(o, 0)), "0");
        assert_eq!(s(|o| push_u64(o, u64::MAX)), u64::MAX.to_string());
        assert_eq!(s(|o| push_i64(o, i64::MIN)), i64::MIN.to_string());
        assert_eq!(s(|o| push_i64(o, -7)), "-7");
    }

    #[test]
    fn rounded_like_tsbs() {
        assert_eq!(s(|o| push_rounded(o, 83.235_904, 5)), "83.2359");
        assert_eq!(s(|o| push_rounded(o, 408.4, 0)), "408");
        assert_eq!(s(|o| push_rounded(o, -0.5, 1)), "-0.5");
        assert_eq!(s(|o| push_rounded(o, -0.000_001, 5)), "0");
        assert_eq!(s(|o| push_rounded(o, 0.000_01, 5)), "0.00001");
        assert_eq!(s(|o| push_rounded(o, 24.96, 1)), "25");
    }

    #[test]
    fn dates_and_timestamps_match_jiff() {
        for days in [-719_528, -719_162, -1, 0, 59, 10_957, 8035, 10_591, 2_932_000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
            let want = jiff::Timestamp::from_second(days * 86_400).unwrap().to_zoned(jiff::tz::TimeZone::UTC).date();
            assert_eq!((y, m, d), (i64::from(want.year()), want.month() as u32, want.day() as u32), "{days}");
            assert_eq!(s(|o| push_date(o, days)), want.to_string());
        }
        let mut r = crate::generate::SplitMix64::new(1);
        for i in 0..20_000 {
            let micros = match i % 3 {
                0 => (r.next_u64() % 630_000_000_000) as i64 * 1_000_000 - 377_000_000_000_000_000 + (r.next_u64() % 1_000_000) as i64,
                1 => (r.next_u64() % 4_000_000_000) as i64 * 1_000_000,
                _ => (r.next_u64() % 4_000_000_000_000) as i64 / 1000 * 1000,
            };
            assert_eq!(s(|o| push_timestamp(o, micros)), jiff::Timestamp::from_microsecond(micros).unwrap().to_string(), "{micros}");
        }
        assert_eq!(s(|o| push_timestamp(o, -62_135_596_800_000_001)), "0000-12-31T23:59:59.999999Z");
        assert_eq!(s(|o| push_date(o, -719_529)), "-000001-12-31");
        assert_eq!(days_from_civil(1992, 1, 1), 8035);
    }
}
