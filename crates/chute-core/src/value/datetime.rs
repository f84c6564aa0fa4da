//! `date`, `timestamp` and `timestamptz`: the ISO 8601 forms and
//! PostgreSQL's own output, read the way `ParseDateTime` + `DecodeDateTime`
//! read them; everything else goes to the server.
//!
//! The fast path takes `YYYY-MM-DD`, optionally followed by `T` or
//! whitespace and `H:M[:S[.fraction]]` (one or two digits each), optionally
//! followed (after optional whitespace) by `Z` or a numeric offset (`+HH`,
//! `+HHMM`, `+HH:MM`, `+HH:MM:SS`). PostgreSQL rules it reproduces:
//! - `24:00:00` and a leap second `:60` are allowed as long as the time of
//!   day does not exceed 24:00:00; they roll over into the next day/minute
//!   (a `date` keeps the day as written).
//! - A fraction of a second is read with `strtod` and rounded with
//!   `rint(frac * 1e6)` (half to even, after the binary rounding:
//!   `.0000005` -> 0 µs, `.0000015` -> 2 µs, `.9999995` -> the next second).
//! - `timestamp` and `date` ignore an offset (it is still range-checked).
//! - Without an offset a `timestamptz` is local time in the session's time
//!   zone. In a spring-forward gap PostgreSQL uses the offset from before the
//!   transition (02:30 in Berlin becomes 03:30 CEST), in a fall-back fold the
//!   offset from after it (the later instant). The offset is looked up for
//!   the whole seconds as written and the fraction is added afterwards, as
//!   `DetermineTimeZoneOffset` does: `01:59:59.9999999` on a fall-back day
//!   keeps the summer offset.
//!
//! A time-zone name or abbreviation, `BC`, other date orders, special words
//! other than `infinity`/`-infinity` and years that are not four digits are
//! left to the server.

use jiff::tz::{AmbiguousOffset, TimeZone};

use super::epoch::parse_epoch;
use super::{EncodeContext, ValueError, is_space, shown, trim_space};
use crate::encode::{PG_EPOCH_OFFSET_DAYS, PG_EPOCH_OFFSET_MICROS};

const USECS_PER_SEC: i64 = 1_000_000;
const SECS_PER_DAY: i64 = 86_400;
const USECS_PER_DAY: i64 = SECS_PER_DAY * USECS_PER_SEC;
/// More fraction digits than this would overflow `ParseDateTime`'s buffer.
const MAX_FRACTION_DIGITS: usize = 30;

/// A `timestamptz` as microseconds since 1970-01-01 00:00 UTC;
/// `i64::MAX`/`i64::MIN` for `infinity`/`-infinity`.
///
/// Takes `YYYY-MM-DD[(T|whitespace)H:M[:S[.fraction]]][ ][Z|±offset]`
/// (offsets `±H`, `±HH`, `±HHMM`, `±HH:MM`, `±HH:MM:SS`) with surrounding
/// whitespace, `24:00:00` and leap seconds as PostgreSQL does, fractions
/// rounded as `rint(strtod(frac) * 1e6)`. Without an offset the text is
/// local time in `ctx.session_tz`: in a DST gap with the offset from before
/// the change, in a fold with the offset from after it (PostgreSQL's
/// choice). `Z` is read as UTC, as PostgreSQL's default
/// `timezone_abbreviations` set reads it. Other forms (zone names and
/// abbreviations, `BC`, other date orders, words other than `infinity`)
/// are [`ValueError::NeedsServer`]. With `ctx.epoch`, a bare number
/// `[+-]digits[.digits]` is that many units since 1970-01-01 UTC, rounded
/// to the microsecond with halves away from zero.
pub fn parse_timestamptz(text: &[u8], ctx: &EncodeContext) -> Result<i64, ValueError> {
    if let Some(micros) = ctx.epoch.and_then(|unit| parse_epoch(text, unit)) {
        return micros;
    }
    let f = match parse_fields(text)? {
        Parsed::Infinity => return Ok(i64::MAX),
        Parsed::NegInfinity => return Ok(i64::MIN),
        Parsed::At(f) => f,
    };
    let offset = match f.offset {
        Some(offset) => offset,
        None => {
            let tz = ctx.session_tz.as_ref().ok_or(ValueError::NeedsServer)?;
            local_offset(tz, i64::from(f.days) * SECS_PER_DAY + f.secs)?
        }
    };
    Ok((i64::from(f.days) * SECS_PER_DAY + f.secs - i64::from(offset)) * USECS_PER_SEC + f.fsec)
}

/// A `timestamp` (without time zone) as microseconds from 1970-01-01 00:00
/// to the wall-clock time as written (any offset in the text is ignored, as
/// PostgreSQL does); `i64::MAX`/`i64::MIN` for `infinity`/`-infinity`.
pub fn parse_timestamp(text: &[u8], ctx: &EncodeContext) -> Result<i64, ValueError> {
    if let Some(micros) = ctx.epoch.and_then(|unit| parse_epoch(text, unit)) {
        return micros;
    }
    match parse_fields(text)? {
        Parsed::Infinity => Ok(i64::MAX),
        Parsed::NegInfinity => Ok(i64::MIN),
        Parsed::At(f) => Ok((i64::from(f.days) * SECS_PER_DAY + f.secs) * USECS_PER_SEC + f.fsec),
    }
}

/// A `date` as days since 1970-01-01; `i32::MAX`/`i32::MIN` for
/// `infinity`/`-infinity`. A time of day (checked, then ignored) may follow.
/// With `ctx.epoch`, a bare number is read as for `timestamp` and its
/// (UTC) date taken, like `to_timestamp(n)::timestamp::date` would.
pub fn parse_date(text: &[u8], ctx: &EncodeContext) -> Result<i32, ValueError> {
    if let Some(micros) = ctx.epoch.and_then(|unit| parse_epoch(text, unit)) {
        // The timestamp range lies well inside the date range.
        return micros.map(|m| m.div_euclid(USECS_PER_DAY) as i32);
    }
    match parse_fields(text)? {
        Parsed::Infinity => Ok(i32::MAX),
        Parsed::NegInfinity => Ok(i32::MIN),
        Parsed::At(f) => Ok(f.days),
    }
}

/// The wire value (microseconds since 2000-01-01) of a parsed timestamp.
pub(super) fn timestamp_wire(unix_micros: i64) -> i64 {
    match unix_micros {
        i64::MAX | i64::MIN => unix_micros,
        v => v - PG_EPOCH_OFFSET_MICROS,
    }
}

/// The wire value (days since 2000-01-01) of a parsed date.
pub(super) fn date_wire(unix_days: i32) -> i32 {
    match unix_days {
        i32::MAX | i32::MIN => unix_days,
        v => v - PG_EPOCH_OFFSET_DAYS,
    }
}

enum Parsed {
    Infinity,
    NegInfinity,
    At(Fields),
}

/// A checked date and time as written.
struct Fields {
    /// The date, in days since 1970-01-01.
    days: i32,
    /// Seconds into that day: up to 86400 for `24:00:00` or `23:59:60`.
    secs: i64,
    /// Microseconds, 0 to 1,000,000 (a fraction can round up to a second).
    fsec: i64,
    /// An explicit UTC offset in seconds east of Greenwich.
    offset: Option<i32>,
}

fn out_of_range(text: &[u8]) -> ValueError {
    ValueError::Invalid(format!("date/time field value out of range: \"{}\"", shown(text)))
}

fn displacement_out_of_range(text: &[u8]) -> ValueError {
    ValueError::Invalid(format!("time zone displacement out of range: \"{}\"", shown(text)))
}

/// A cursor over the trimmed text. Any shape it does not expect is
/// [`ValueError::NeedsServer`]: only PostgreSQL knows all of its forms.
struct Cursor<'a> {
    s: &'a [u8],
    i: usize,
}

impl Cursor<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }

    fn at_end(&self) -> bool {
        self.i == self.s.len()
    }

    fn expect(&mut self, c: u8) -> Result<(), ValueError> {
        if self.peek() == Some(c) {
            self.i += 1;
            Ok(())
        } else {
            Err(ValueError::NeedsServer)
        }
    }

    /// The whole run of digits here, which must be `min..=max` digits long.
    fn number(&mut self, min: usize, max: usize) -> Result<(u32, usize), ValueError> {
        let run = self.s[self.i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if run < min || run > max {
            return Err(ValueError::NeedsServer);
        }
        let v = self.s[self.i..self.i + run].iter().fold(0u32, |v, d| v * 10 + u32::from(d - b'0'));
        self.i += run;
        Ok((v, run))
    }

    fn skip_space(&mut self) {
        while self.peek().is_some_and(is_space) {
            self.i += 1;
        }
    }
}

fn parse_fields(text: &[u8]) -> Result<Parsed, ValueError> {
    let t = trim_space(text)?;
    if t.eq_ignore_ascii_case(b"infinity") {
        return Ok(Parsed::Infinity);
    }
    if t.eq_ignore_ascii_case(b"-infinity") {
        return Ok(Parsed::NegInfinity);
    }
    let mut c = Cursor { s: t, i: 0 };
    let (year, month, day);
    let (mut hour, mut minute, mut second, mut fsec) = (0, 0, 0, 0);
    let mut offset = None;
    // Whether a time follows the date, and whether it has seconds.
    let (timed, with_seconds);
    if let Some(f) = fixed_layout(t) {
        [year, month, day, hour, minute, second] = f;
        c.i = FIXED_LAYOUT_LEN;
        (timed, with_seconds) = (true, true);
    } else {
        (year, _) = c.number(4, 4)?;
        c.expect(b'-')?;
        (month, _) = c.number(1, 2)?;
        c.expect(b'-')?;
        (day, _) = c.number(1, 2)?;
        timed = !c.at_end();
        if timed {
            match c.peek() {
                Some(b'T' | b't') => c.i += 1,
                Some(b) if is_space(b) => c.skip_space(),
                _ => return Err(ValueError::NeedsServer),
            }
            (hour, _) = c.number(1, 2)?;
            c.expect(b':')?;
            (minute, _) = c.number(1, 2)?;
        }
        // "HH:MM.fff" would be minutes and seconds to PostgreSQL; not taken.
        with_seconds = timed && c.peek() == Some(b':');
        if with_seconds {
            c.i += 1;
            (second, _) = c.number(1, 2)?;
        }
    }
    if timed {
        if with_seconds && c.peek() == Some(b'.') {
            fsec = fraction(&mut c)?;
        }
        c.skip_space();
        match c.peek() {
            None => {}
            Some(b'Z' | b'z') => {
                c.i += 1;
                offset = Some(OffsetFields { hours: 0, minutes: 0, seconds: 0, negative: false });
            }
            Some(sign @ (b'+' | b'-')) => {
                c.i += 1;
                offset = Some(offset_fields(&mut c, sign == b'-')?);
            }
            Some(_) => return Err(ValueError::NeedsServer),
        }
        if !c.at_end() {
            return Err(ValueError::NeedsServer);
        }
    }
    // The text has a known shape: from here on a bad field is PostgreSQL's
    // error too.
    if year == 0 || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
        return Err(out_of_range(text));
    }
    let secs = i64::from((hour * 60 + minute) * 60 + second);
    if hour > 24 || minute > 59 || second > 60 || secs * USECS_PER_SEC + fsec > USECS_PER_DAY {
        return Err(out_of_range(text));
    }
    let offset = match offset {
        None => None,
        Some(o) if o.hours > 15 || o.minutes > 59 || o.seconds > 59 => return Err(displacement_out_of_range(text)),
        Some(o) => {
            let secs = ((o.hours * 60 + o.minutes) * 60 + o.seconds) as i32;
            Some(if o.negative { -secs } else { secs })
        }
    };
    Ok(Parsed::At(Fields { days: days_from_civil(year as i32, month, day), secs, fsec, offset }))
}

/// Length of the layout nearly every timestamp has: `YYYY-MM-DDTHH:MM:SS`.
const FIXED_LAYOUT_LEN: usize = 19;

/// Year, month, day, hour, minute and second of a text that starts with
/// `YYYY-MM-DD` then `T`, `t` or a space, then `HH:MM:SS` (two digits each,
/// as ISO 8601 and PostgreSQL's own output write them), read at their
/// places; `None` for any other start, which is read field by field.
fn fixed_layout(t: &[u8]) -> Option<[u32; 6]> {
    let b: &[u8; FIXED_LAYOUT_LEN] = t.get(..FIXED_LAYOUT_LEN)?.try_into().ok()?;
    if b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    // The digits must not run on: "2021-06-01T00:00:001" is not this layout.
    if t.get(FIXED_LAYOUT_LEN).is_some_and(u8::is_ascii_digit) {
        return None;
    }
    let mut out = [0u32; 6];
    for (k, (at, len)) in [(0, 4), (5, 2), (8, 2), (11, 2), (14, 2), (17, 2)].into_iter().enumerate() {
        for &d in &b[at..at + len] {
            let v = d.wrapping_sub(b'0');
            if v > 9 {
                return None;
            }
            out[k] = out[k] * 10 + u32::from(v);
        }
    }
    Some(out)
}

/// `ParseFractionalSecond`: `rint(strtod(".ddd") * 1000000)`. Up to six
/// digits that is exact; beyond, the double arithmetic is reproduced (Rust's
/// parser is correctly rounded, as glibc's `strtod` is).
fn fraction(c: &mut Cursor<'_>) -> Result<i64, ValueError> {
    let start = c.i;
    c.i += 1;
    let run = c.s[c.i..].iter().take_while(|d| d.is_ascii_digit()).count();
    if run == 0 || run > MAX_FRACTION_DIGITS {
        return Err(ValueError::NeedsServer);
    }
    let digits = &c.s[c.i..c.i + run];
    c.i += run;
    if run <= 6 {
        let v = digits.iter().fold(0i64, |v, d| v * 10 + i64::from(d - b'0'));
        return Ok(v * 10i64.pow(6 - run as u32));
    }
    let text = std::str::from_utf8(&c.s[start..c.i]).map_err(|_| ValueError::NeedsServer)?;
    let frac: f64 = text.parse().map_err(|_| ValueError::NeedsServer)?;
    Ok((frac * 1_000_000.0).round_ties_even() as i64)
}

struct OffsetFields {
    hours: u32,
    minutes: u32,
    seconds: u32,
    negative: bool,
}

/// `DecodeTimezone` after the sign: `H`, `HH`, `HMM`, `HHMM`, or `H[H]:M[M]`
/// with an optional `:S[S]`.
fn offset_fields(c: &mut Cursor<'_>, negative: bool) -> Result<OffsetFields, ValueError> {
    let (v, run) = c.number(1, 4)?;
    let (hours, minutes, seconds) = if c.peek() == Some(b':') {
        if run > 2 {
            return Err(ValueError::NeedsServer);
        }
        c.i += 1;
        let (minutes, _) = c.number(1, 2)?;
        let mut seconds = 0;
        if c.peek() == Some(b':') {
            c.i += 1;
            (seconds, _) = c.number(1, 2)?;
        }
        (v, minutes, seconds)
    } else if run >= 3 {
        (v / 100, v % 100, 0)
    } else {
        (v, 0, 0)
    };
    Ok(OffsetFields { hours, minutes, seconds, negative })
}

/// The UTC offset (seconds east) of a local time in `tz`, chosen as
/// PostgreSQL's `DetermineTimeZoneOffset` chooses in gaps and folds.
pub(crate) fn local_offset(tz: &TimeZone, local_secs: i64) -> Result<i32, ValueError> {
    let (y, m, d) = civil_from_days(local_secs.div_euclid(SECS_PER_DAY));
    let sod = local_secs.rem_euclid(SECS_PER_DAY);
    let year = i16::try_from(y).map_err(|_| ValueError::NeedsServer)?;
    let dt = jiff::civil::DateTime::new(year, m as i8, d as i8, (sod / 3600) as i8, (sod / 60 % 60) as i8, (sod % 60) as i8, 0)
        .map_err(|_| ValueError::NeedsServer)?;
    let offset = match tz.to_ambiguous_timestamp(dt).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset,
        AmbiguousOffset::Gap { before, .. } => before,
        AmbiguousOffset::Fold { after, .. } => after,
    };
    Ok(offset.seconds())
}

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i32, month: u32, day: u32) -> i32 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month as i32 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day as i32 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian date of a day count since 1970-01-01.
pub(crate) fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::super::{EpochUnit, PgType, encode_text};
    use super::*;

    /// What `parse_fields` made of a text, comparable.
    fn fields_of(text: &str) -> Result<(i32, i64, i64, Option<i32>), String> {
        match parse_fields(text.as_bytes()) {
            Ok(Parsed::At(f)) => Ok((f.days, f.secs, f.fsec, f.offset)),
            Ok(_) => Err("infinity".into()),
            // The message quotes the text: its kind and reason are compared.
            Err(ValueError::Invalid(m)) => Err(m.split(": \"").next().unwrap_or_default().to_owned()),
            Err(e) => Err(format!("{e:?}")),
        }
    }

    proptest::proptest! {
        /// The fixed layout's shortcut reads a text as the field-by-field
        /// path reads it (two spaces between date and time take that path).
        #[test]
        fn the_fixed_layout_reads_as_field_by_field(
            date in "[0-9]{4}-[0-9]{2}-[0-9]{2}",
            sep in "[Tt ]",
            time in "[0-9]{2}:[0-9]{2}:[0-9]{2,3}",
            frac in "(\\.[0-9]{1,8})?",
            zone in "(Z|z|[+-][0-9]{1,2}(:[0-9]{2})?| [+-][0-9]{4})?",
        ) {
            let fixed = format!("{date}{sep}{time}{frac}{zone}");
            let general = format!("{date}  {time}{frac}{zone}");
            proptest::prop_assert_eq!(fields_of(&fixed), fields_of(&general), "{} / {}", fixed, general);
        }
    }

    #[test]
    fn the_fixed_layout_is_taken_only_where_it_fits() {
        assert_eq!(fixed_layout(b"2021-06-01T07:08:09Z"), Some([2021, 6, 1, 7, 8, 9]));
        assert_eq!(fixed_layout(b"2021-06-01 07:08:09.5+02"), Some([2021, 6, 1, 7, 8, 9]));
        for t in ["2021-6-01T07:08:09", "2021-06-01T07:08:091", "2021-06-01T07:08", "2021-06-01x07:08:09", "20210-06-01T07:08:09"] {
            assert_eq!(fixed_layout(t.as_bytes()), None, "{t}");
        }
        assert_eq!(fields_of("2021-06-01T07:08:09Z"), Ok((18779, 25689, 0, Some(0))));
    }

    fn ctx(tz: &str) -> EncodeContext {
        EncodeContext { session_tz: Some(TimeZone::get(tz).unwrap()), epoch: None }
    }

    fn epoch(unit: EpochUnit) -> EncodeContext {
        EncodeContext { session_tz: None, epoch: Some(unit) }
    }

    /// Unix micros of a UTC wall-clock time.
    fn utc(y: i32, mo: u32, d: u32, h: i64, mi: i64, s: i64, us: i64) -> i64 {
        (i64::from(days_from_civil(y, mo, d)) * SECS_PER_DAY + h * 3600 + mi * 60 + s) * USECS_PER_SEC + us
    }

    fn ts(s: &str) -> Result<i64, ValueError> {
        parse_timestamp(s.as_bytes(), &EncodeContext::default())
    }

    fn tstz(s: &str, tz: &str) -> Result<i64, ValueError> {
        parse_timestamptz(s.as_bytes(), &ctx(tz))
    }

    fn is_invalid<T: std::fmt::Debug>(r: Result<T, ValueError>) -> bool {
        matches!(r, Err(ValueError::Invalid(_)))
    }

    #[test]
    fn calendar_round_trips() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 1, 1), PG_EPOCH_OFFSET_DAYS);
        assert_eq!(days_from_civil(1, 1, 1), -719_162);
        for d in (-800_000..3_000_000).step_by(997) {
            let (y, m, dd) = civil_from_days(d);
            assert_eq!(i64::from(days_from_civil(y as i32, m, dd)), d);
        }
    }

    #[test]
    fn iso_forms_of_timestamp() {
        let want = utc(2021, 6, 8, 12, 30, 5, 0);
        for s in [
            "2021-06-08 12:30:05",
            "2021-06-08T12:30:05",
            "2021-06-08t12:30:05",
            "  2021-06-08   12:30:05  ",
            "2021-6-8 12:30:5",
            "2021-06-08 12:30:05+02",
            "2021-06-08 12:30:05 -07:30",
            "2021-06-08T12:30:05Z",
            "2021-06-08 12:30:05 z",
            "2021-06-08 12:30:05.000",
        ] {
            assert_eq!(ts(s), Ok(want), "{s:?}");
        }
        assert_eq!(ts("2021-06-08 12:30"), Ok(utc(2021, 6, 8, 12, 30, 0, 0)));
        assert_eq!(ts("2021-06-08"), Ok(utc(2021, 6, 8, 0, 0, 0, 0)));
        assert_eq!(ts("2021-06-08 12:30:05.123456"), Ok(utc(2021, 6, 8, 12, 30, 5, 123_456)));
        assert_eq!(ts("2021-06-08 12:30:05.1"), Ok(utc(2021, 6, 8, 12, 30, 5, 100_000)));
        assert_eq!(ts(" Infinity "), Ok(i64::MAX));
        assert_eq!(ts("-INFINITY"), Ok(i64::MIN));
    }

    #[test]
    fn fractions_round_like_rint_of_a_double() {
        // Results taken from PostgreSQL 15.
        assert_eq!(ts("2021-06-08 12:00:00.0000005"), Ok(utc(2021, 6, 8, 12, 0, 0, 0)));
        assert_eq!(ts("2021-06-08 12:00:00.0000015"), Ok(utc(2021, 6, 8, 12, 0, 0, 2)));
        assert_eq!(ts("2021-06-08 12:00:00.9999995"), Ok(utc(2021, 6, 8, 12, 0, 1, 0)));
        assert_eq!(ts("2021-06-08 23:59:59.9999999"), Ok(utc(2021, 6, 9, 0, 0, 0, 0)));
    }

    #[test]
    fn end_of_day_and_leap_second_roll_over() {
        assert_eq!(ts("2021-06-08 24:00"), Ok(utc(2021, 6, 9, 0, 0, 0, 0)));
        assert_eq!(ts("2021-06-08 23:59:60"), Ok(utc(2021, 6, 9, 0, 0, 0, 0)));
        assert_eq!(ts("2021-06-08 12:30:60"), Ok(utc(2021, 6, 8, 12, 31, 0, 0)));
        assert_eq!(parse_date(b"2021-06-08 24:00:00", &EncodeContext::default()), Ok(days_from_civil(2021, 6, 8)));
        assert!(is_invalid(ts("2021-06-08 23:59:60.5")));
        assert!(is_invalid(ts("2021-06-08 24:00:00.1")));
        assert!(is_invalid(ts("2021-06-08 24:01")));
    }

    #[test]
    fn out_of_range_fields_are_invalid() {
        for s in
            ["0000-01-01", "2021-13-01", "2021-00-10", "2021-01-00", "2021-02-29", "2021-04-31", "2021-06-08 25:00", "2021-06-08 12:60"]
        {
            assert_eq!(ts(s), Err(ValueError::Invalid(format!("date/time field value out of range: \"{s}\""))), "{s:?}");
        }
        assert!(is_invalid(ts("2021-06-08 12:00:61")));
        assert_eq!(ts("2020-02-29"), Ok(utc(2020, 2, 29, 0, 0, 0, 0)));
        assert_eq!(ts("2000-02-29"), Ok(utc(2000, 2, 29, 0, 0, 0, 0)));
        assert!(is_invalid(ts("1900-02-29")));
        for s in ["2021-06-08 12:00:00+16", "2021-06-08 12:00:00+02:60", "2021-06-08 12:00:00+02:00:60", "2021-06-08 12:00:00+1560"] {
            assert_eq!(ts(s), Err(ValueError::Invalid(format!("time zone displacement out of range: \"{s}\""))), "{s:?}");
        }
    }

    #[test]
    fn unknown_forms_go_to_the_server() {
        for s in [
            "01/02/2021",
            "Jan 2 2021",
            "2021-01-02 BC",
            "21-01-02",
            "20210102",
            "12021-01-02",
            "2021-06-08 12:00 Europe/Berlin",
            "2021-06-08 12:00 CET",
            "2021-06-08 12:00 UTC",
            "2021-06-08 12:30.5",
            "2021-06-08 12",
            "2021-06-08 12:00:00.",
            "2021-06-08T 12:00",
            "2021-06-08 -1:00",
            "2021-06-08+02",
            "2021-06-08 12:00+02:",
            "2021-06-08 12:00+0530:15",
            "2021-06-08 12:00+ 02",
            "2021-06-08 12:00:00Zulu",
            "+infinity",
            "now",
            "epoch",
            "2021-06-08\u{a0}",
            "",
        ] {
            assert_eq!(ts(s), Err(ValueError::NeedsServer), "{s:?}");
        }
    }

    #[test]
    fn explicit_offsets() {
        let tz = "Europe/Berlin";
        let want = utc(2021, 6, 8, 10, 0, 0, 0);
        for s in [
            "2021-06-08 12:00:00+02",
            "2021-06-08 12:00+0200",
            "2021-06-08 12:00:00 +02:00",
            "2021-06-08 10:00:00Z",
            "2021-06-08 10:00:00 Z",
        ] {
            assert_eq!(tstz(s, tz), Ok(want), "{s:?}");
        }
        assert_eq!(tstz("2021-06-08 12:00:00+0530", tz), Ok(utc(2021, 6, 8, 6, 30, 0, 0)));
        assert_eq!(tstz("2021-06-08 12:00:00+05:30:15", tz), Ok(utc(2021, 6, 8, 6, 29, 45, 0)));
        assert_eq!(tstz("2021-06-08 12:00:00-0230", tz), Ok(utc(2021, 6, 8, 14, 30, 0, 0)));
        assert_eq!(tstz("2021-06-08 12:00:00+123", tz), Ok(utc(2021, 6, 8, 10, 37, 0, 0)));
        assert_eq!(tstz("2021-06-08 12:00:00+2", tz), Ok(utc(2021, 6, 8, 10, 0, 0, 0)));
        // Without a session time zone an explicit offset is still enough.
        assert_eq!(parse_timestamptz(b"2021-06-08 12:00:00+02", &EncodeContext::default()), Ok(want));
        assert_eq!(parse_timestamptz(b"2021-06-08 12:00:00", &EncodeContext::default()), Err(ValueError::NeedsServer));
    }

    #[test]
    fn local_times_in_gaps_and_folds_match_postgres() {
        // Expected instants taken from PostgreSQL 15.
        let b = "Europe/Berlin";
        assert_eq!(tstz("2021-06-08 12:00", b), Ok(utc(2021, 6, 8, 10, 0, 0, 0)));
        assert_eq!(tstz("2021-03-28 02:30", b), Ok(utc(2021, 3, 28, 1, 30, 0, 0)));
        assert_eq!(tstz("2021-10-31 02:30", b), Ok(utc(2021, 10, 31, 1, 30, 0, 0)));
        assert_eq!(tstz("2021-10-31 01:59:59.9999999", b), Ok(utc(2021, 10, 31, 0, 0, 0, 0)));
        assert_eq!(tstz("2021-03-28 01:59:59.9999999", b), Ok(utc(2021, 3, 28, 1, 0, 0, 0)));
        assert_eq!(tstz("1893-04-01 00:00", b), Ok(utc(1893, 3, 31, 23, 6, 32, 0)));
        assert_eq!(tstz("1850-01-01 12:00", b), Ok(utc(1850, 1, 1, 11, 6, 32, 0)));
        let ny = "America/New_York";
        assert_eq!(tstz("2021-03-14 02:30", ny), Ok(utc(2021, 3, 14, 7, 30, 0, 0)));
        assert_eq!(tstz("2021-11-07 01:30", ny), Ok(utc(2021, 11, 7, 6, 30, 0, 0)));
        assert_eq!(tstz("2300-07-01 12:00", ny), Ok(utc(2300, 7, 1, 16, 0, 0, 0)));
        assert_eq!(tstz("9999-12-31 24:00", ny), Err(ValueError::NeedsServer));
    }

    #[test]
    fn unusual_transitions_match_postgres() {
        // (zone, local time, Unix seconds from PostgreSQL 15)
        for (zone, text, want) in [
            // Apia skipped 2011-12-30 altogether.
            ("Pacific/Apia", "2011-12-30 12:00", 1_325_282_400),
            ("Pacific/Apia", "2011-12-30 00:00", 1_325_239_200),
            ("Pacific/Apia", "2011-12-30 23:59", 1_325_325_540),
            ("Pacific/Apia", "2011-12-29 23:59", 1_325_239_140),
            // São Paulo's clocks changed at midnight: a date alone can be in the gap.
            ("America/Sao_Paulo", "2018-11-04", 1_541_300_400),
            ("America/Sao_Paulo", "2018-11-04 00:30", 1_541_302_200),
            ("America/Sao_Paulo", "2019-02-16 23:30", 1_550_370_600),
            // Moscow in 2014 went from one standard time to another.
            ("Europe/Moscow", "2014-10-26 01:30", 1_414_276_200),
            ("Europe/Moscow", "2011-03-27 02:30", 1_301_182_200),
            // Lord Howe moves by half an hour.
            ("Australia/Lord_Howe", "2021-04-04 01:45", 1_617_462_900),
            ("Australia/Lord_Howe", "2021-10-03 02:15", 1_633_189_500),
        ] {
            assert_eq!(tstz(text, zone), Ok(want * USECS_PER_SEC), "{zone} {text}");
        }
    }

    #[test]
    fn dates() {
        let d = |s: &str| parse_date(s.as_bytes(), &EncodeContext::default());
        assert_eq!(d("2021-06-08"), Ok(days_from_civil(2021, 6, 8)));
        assert_eq!(d(" 0001-01-01 "), Ok(-719_162));
        assert_eq!(d("2021-06-08 12:00:00+02"), Ok(days_from_civil(2021, 6, 8)));
        assert_eq!(d("infinity"), Ok(i32::MAX));
        assert_eq!(d("-infinity"), Ok(i32::MIN));
        assert!(is_invalid(d("2021-02-29")));
        assert!(is_invalid(d("2021-06-08 25:00")));
        assert_eq!(d("June 8, 2021"), Err(ValueError::NeedsServer));
    }

    #[test]
    fn wire_bytes() {
        let mut out = Vec::new();
        encode_text(PgType::Date, b"2000-01-02", &EncodeContext::default(), &mut out).unwrap();
        assert_eq!(out, 1i32.to_be_bytes());
        out.clear();
        encode_text(PgType::Date, b"-infinity", &EncodeContext::default(), &mut out).unwrap();
        assert_eq!(out, i32::MIN.to_be_bytes());
        out.clear();
        encode_text(PgType::Timestamp, b"2000-01-01 00:00:00.000001", &EncodeContext::default(), &mut out).unwrap();
        assert_eq!(out, 1i64.to_be_bytes());
        out.clear();
        encode_text(PgType::Timestamptz, b"2000-01-01 01:00:00+01", &EncodeContext::default(), &mut out).unwrap();
        assert_eq!(out, 0i64.to_be_bytes());
        out.clear();
        encode_text(PgType::Timestamptz, b"infinity", &EncodeContext::default(), &mut out).unwrap();
        assert_eq!(out, i64::MAX.to_be_bytes());
        out.clear();
        let r = encode_text(PgType::Timestamptz, b"2000-01-01 01:00:00", &EncodeContext::default(), &mut out);
        assert_eq!((r, out.len()), (Err(ValueError::NeedsServer), 0));
    }

    #[test]
    fn epoch_numbers() {
        let s = epoch(EpochUnit::Seconds);
        assert_eq!(parse_timestamptz(b"1623110400", &s), Ok(1_623_110_400_000_000));
        assert_eq!(parse_timestamp(b" -1.5 ", &s), Ok(-1_500_000));
        assert_eq!(parse_timestamp(b"+0.0000005", &s), Ok(1));
        assert_eq!(parse_timestamp(b"0.0000004999", &s), Ok(0));
        assert_eq!(parse_timestamp(b"-0.0000005", &s), Ok(-1));
        assert_eq!(parse_timestamp(b"00001.000001", &s), Ok(1_000_001));
        assert_eq!(parse_date(b"-1", &s), Ok(-1));
        assert_eq!(parse_date(b"86399.999999", &s), Ok(0));
        assert_eq!(parse_date(b"86400", &s), Ok(1));
        let ms = epoch(EpochUnit::Millis);
        assert_eq!(parse_timestamptz(b"1623110400123", &ms), Ok(1_623_110_400_123_000));
        assert_eq!(parse_timestamptz(b"1.0005", &ms), Ok(1_001));
        let us = epoch(EpochUnit::Micros);
        assert_eq!(parse_timestamptz(b"-42", &us), Ok(-42));
        let ns = epoch(EpochUnit::Nanos);
        assert_eq!(parse_timestamptz(b"1623110400123456789", &ns), Ok(1_623_110_400_123_457));
        assert_eq!(parse_timestamptz(b"1499", &ns), Ok(1));
        assert_eq!(parse_timestamptz(b"1500", &ns), Ok(2));
        assert_eq!(parse_timestamptz(b"-1500", &ns), Ok(-2));
        assert_eq!(parse_timestamptz(b"499", &ns), Ok(0));
        // ISO text still works with --epoch; other forms still go to the server.
        assert_eq!(parse_timestamptz(b"1970-01-01 00:00:01Z", &s), Ok(1_000_000));
        assert_eq!(parse_timestamptz(b"1e9", &s), Err(ValueError::NeedsServer));
        // Out of PostgreSQL's range (or of i64 Unix microseconds).
        assert!(is_invalid(parse_timestamptz(b"99999999999999999999", &s)));
        assert!(is_invalid(parse_timestamptz(b"-210866803201", &s)));
        assert!(is_invalid(parse_timestamptz(b"-210866803200.0000005", &s)));
        assert_eq!(parse_timestamptz(b"-210866803200", &s), Ok(-210_866_803_200_000_000));
        assert!(is_invalid(parse_timestamptz(b"9223372036854775807", &us)));
        assert!(is_invalid(parse_date(b"9223372036854775807000", &ns)));
    }
}
