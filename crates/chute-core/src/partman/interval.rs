//! Partition intervals and how they step through time.
//!
//! Intervals under a day step in absolute time (aligned to the Unix epoch),
//! so an hourly table in any zone has 24 partitions a day, 23 or 25 on DST
//! days, never a hole. A day or longer steps in the local calendar of the
//! policy's time zone: boundaries sit at local midnight (the first instant of
//! the local day when midnight does not exist), so a DST change makes one
//! partition 23 or 25 hours long instead of leaving a gap or an empty range.
//! Integer keys step by plain addition.

use std::fmt;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};

pub const MICROS_PER_SECOND: i64 = 1_000_000;
pub const MICROS_PER_MINUTE: i64 = 60 * MICROS_PER_SECOND;
pub const MICROS_PER_HOUR: i64 = 60 * MICROS_PER_MINUTE;
pub const MICROS_PER_DAY: i64 = 24 * MICROS_PER_HOUR;

/// The unit of a time interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Unit {
    Minutes,
    Hours,
    Days,
    Weeks,
    Months,
    Years,
}

/// A partition width, or a duration (retention, max-future): a whole number
/// of one time unit, or a plain number for integer keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Span {
    Time { n: u32, unit: Unit },
    Integer(i64),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntervalError {
    #[error(
        "cannot read {0:?} as an interval: write a whole number and a unit, e.g. 15min, 1h, 1d, 1w, 1mon, 1y (or a plain number for integer keys)"
    )]
    Syntax(String),
    #[error("an interval must be greater than zero (got {0:?})")]
    Zero(String),
    #[error("time {0} is outside the range chute handles (years 1 to 9999)")]
    OutOfRange(i64),
    #[error("unknown time zone {0:?}: use an IANA name such as UTC, Europe/Berlin or America/New_York")]
    UnknownZone(String),
}

impl Span {
    /// Parses `15min`, `1h`, `2d`, `1w`, `1mon`, `1y` (and long forms such as
    /// `3 hours`, `1 month`), or a bare integer for integer keys.
    pub fn parse(input: &str) -> Result<Span, IntervalError> {
        let s = input.trim();
        let split = s.find(|c: char| !c.is_ascii_digit() && c != '-').unwrap_or(s.len());
        let (num, unit) = (s[..split].trim(), s[split..].trim().to_ascii_lowercase());
        let syntax = || IntervalError::Syntax(input.to_owned());
        if unit.is_empty() {
            let n: i64 = num.parse().map_err(|_| syntax())?;
            if n <= 0 {
                return Err(IntervalError::Zero(input.to_owned()));
            }
            return Ok(Span::Integer(n));
        }
        let n: u32 = num.parse().map_err(|_| syntax())?;
        if n == 0 {
            return Err(IntervalError::Zero(input.to_owned()));
        }
        let unit = match unit.as_str() {
            "min" | "mins" | "minute" | "minutes" => Unit::Minutes,
            "h" | "hour" | "hours" => Unit::Hours,
            "d" | "day" | "days" => Unit::Days,
            "w" | "week" | "weeks" => Unit::Weeks,
            "mon" | "month" | "months" => Unit::Months,
            "y" | "year" | "years" => Unit::Years,
            _ => return Err(syntax()),
        };
        Ok(Span::Time { n, unit })
    }

    pub fn is_time(&self) -> bool {
        matches!(self, Span::Time { .. })
    }

    /// Under a day: steps in absolute time. A day or more: local calendar.
    pub fn is_calendar(&self) -> bool {
        matches!(self, Span::Time { unit: Unit::Days | Unit::Weeks | Unit::Months | Unit::Years, .. })
    }

    /// Fixed length in microseconds of a sub-day interval.
    fn fixed_micros(&self) -> Option<i64> {
        match *self {
            Span::Time { n, unit: Unit::Minutes } => Some(i64::from(n) * MICROS_PER_MINUTE),
            Span::Time { n, unit: Unit::Hours } => Some(i64::from(n) * MICROS_PER_HOUR),
            _ => None,
        }
    }

    /// The start of the interval holding `t` (a key value: microseconds since
    /// the Unix epoch for time keys).
    pub fn floor(&self, t: i64, tz: &TimeZone) -> Result<i64, IntervalError> {
        match *self {
            Span::Integer(w) => Ok(t.div_euclid(w) * w),
            Span::Time { .. } if !self.is_calendar() => {
                let len = self.fixed_micros().expect("sub-day spans have a fixed length");
                Ok(t.div_euclid(len) * len)
            }
            Span::Time { n, unit } => {
                let date = local_date(t, tz)?;
                let n = i64::from(n);
                let floored = match unit {
                    Unit::Days => {
                        let days = days_since_epoch(date);
                        add_days(epoch_date(), days.div_euclid(n) * n)
                    }
                    Unit::Weeks => {
                        // 1970-01-05 was a Monday: weeks start on Mondays, as ISO weeks do.
                        let days = days_since_epoch(date) - 4;
                        add_days(epoch_date(), days.div_euclid(7 * n) * 7 * n + 4)
                    }
                    Unit::Months => {
                        let months = (i64::from(date.year()) - 1970) * 12 + i64::from(date.month()) - 1;
                        let m = months.div_euclid(n) * n;
                        Date::new((1970 + m.div_euclid(12)) as i16, (m.rem_euclid(12) + 1) as i8, 1)
                            .map_err(|_| IntervalError::OutOfRange(t))?
                    }
                    Unit::Years => {
                        let y = (i64::from(date.year()) - 1970).div_euclid(n) * n + 1970;
                        Date::new(y as i16, 1, 1).map_err(|_| IntervalError::OutOfRange(t))?
                    }
                    Unit::Minutes | Unit::Hours => unreachable!("sub-day spans are handled above"),
                };
                start_of_local_day(floored, tz, t)
            }
        }
    }

    /// The start of the interval after the one starting at `start`.
    pub fn next(&self, start: i64, tz: &TimeZone) -> Result<i64, IntervalError> {
        match *self {
            Span::Integer(w) => start.checked_add(w).ok_or(IntervalError::OutOfRange(start)),
            Span::Time { .. } if !self.is_calendar() => Ok(start + self.fixed_micros().expect("sub-day")),
            Span::Time { n, unit } => {
                // Step from the interval's local date, not from its instant, so
                // a 23- or 25-hour day does not shift later boundaries.
                let date = local_date(start, tz)?;
                let n = i32::try_from(n).map_err(|_| IntervalError::OutOfRange(start))?;
                let next = match unit {
                    Unit::Days => date.checked_add(n.days()),
                    Unit::Weeks => date.checked_add(n.weeks()),
                    Unit::Months => date.checked_add(n.months()),
                    Unit::Years => date.checked_add(n.years()),
                    Unit::Minutes | Unit::Hours => unreachable!("sub-day spans are handled above"),
                }
                .map_err(|_| IntervalError::OutOfRange(start))?;
                start_of_local_day(next, tz, start)
            }
        }
    }

    /// `t` moved back by this span (retention cut-off): in the local
    /// calendar for calendar units, in absolute time otherwise.
    pub fn subtract_from(&self, t: i64, tz: &TimeZone) -> Result<i64, IntervalError> {
        self.shift(t, tz, -1)
    }

    /// `t` moved forward by this span (max-future limit).
    pub fn add_to(&self, t: i64, tz: &TimeZone) -> Result<i64, IntervalError> {
        self.shift(t, tz, 1)
    }

    fn shift(&self, t: i64, tz: &TimeZone, sign: i32) -> Result<i64, IntervalError> {
        match *self {
            Span::Integer(w) => t.checked_add(w * i64::from(sign)).ok_or(IntervalError::OutOfRange(t)),
            Span::Time { .. } if !self.is_calendar() => Ok(t + self.fixed_micros().expect("sub-day") * i64::from(sign)),
            Span::Time { n, unit } => {
                let ts = to_timestamp(t)?;
                let zoned = ts.to_zoned(tz.clone());
                let n = i64::from(n) * i64::from(sign);
                let span = match unit {
                    Unit::Days => n.days(),
                    Unit::Weeks => n.weeks(),
                    Unit::Months => n.months(),
                    Unit::Years => n.years(),
                    Unit::Minutes | Unit::Hours => unreachable!("sub-day spans are handled above"),
                };
                let moved = zoned.checked_add(span).map_err(|_| IntervalError::OutOfRange(t))?;
                Ok(moved.timestamp().as_microsecond())
            }
        }
    }
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Span::Integer(n) => write!(f, "{n}"),
            Span::Time { n, unit } => {
                let u = match unit {
                    Unit::Minutes => "min",
                    Unit::Hours => "h",
                    Unit::Days => "d",
                    Unit::Weeks => "w",
                    Unit::Months => "mon",
                    Unit::Years => "y",
                };
                write!(f, "{n}{u}")
            }
        }
    }
}

/// Loads a time zone from the system database.
pub fn zone(name: &str) -> Result<TimeZone, IntervalError> {
    if name.eq_ignore_ascii_case("utc") {
        return Ok(TimeZone::UTC);
    }
    TimeZone::get(name).map_err(|_| IntervalError::UnknownZone(name.to_owned()))
}

pub fn to_timestamp(micros: i64) -> Result<Timestamp, IntervalError> {
    Timestamp::from_microsecond(micros).map_err(|_| IntervalError::OutOfRange(micros))
}

fn local_date(t: i64, tz: &TimeZone) -> Result<Date, IntervalError> {
    Ok(to_timestamp(t)?.to_zoned(tz.clone()).date())
}

fn start_of_local_day(date: Date, tz: &TimeZone, context: i64) -> Result<i64, IntervalError> {
    let z = date.to_zoned(tz.clone()).and_then(|z| z.start_of_day()).map_err(|_| IntervalError::OutOfRange(context))?;
    Ok(z.timestamp().as_microsecond())
}

fn epoch_date() -> Date {
    jiff::civil::date(1970, 1, 1)
}

fn days_since_epoch(d: Date) -> i64 {
    // Days between two dates are exact in the civil calendar.
    i64::from(epoch_date().until(d).map(|s| s.get_days()).unwrap_or(0))
}

fn add_days(d: Date, days: i64) -> Date {
    d.checked_add(days.days()).unwrap_or(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(s: &str) -> i64 {
        s.parse::<Timestamp>().unwrap().as_microsecond()
    }

    #[test]
    fn parse_forms() {
        assert_eq!(Span::parse("15min").unwrap(), Span::Time { n: 15, unit: Unit::Minutes });
        assert_eq!(Span::parse("1h").unwrap(), Span::Time { n: 1, unit: Unit::Hours });
        assert_eq!(Span::parse("3 days").unwrap(), Span::Time { n: 3, unit: Unit::Days });
        assert_eq!(Span::parse("1mon").unwrap(), Span::Time { n: 1, unit: Unit::Months });
        assert_eq!(Span::parse("100000").unwrap(), Span::Integer(100_000));
        assert!(Span::parse("1m").is_err(), "1m is ambiguous (minutes or months)");
        assert!(Span::parse("0d").is_err());
        assert!(Span::parse("h").is_err());
        for s in ["15min", "1h", "2d", "1w", "1mon", "1y", "5000"] {
            assert_eq!(Span::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn hourly_is_absolute() {
        let h = Span::parse("1h").unwrap();
        let tz = zone("Europe/Berlin").unwrap();
        let t = us("2026-03-29T01:30:00Z");
        assert_eq!(h.floor(t, &tz).unwrap(), us("2026-03-29T01:00:00Z"));
        assert_eq!(h.next(us("2026-03-29T01:00:00Z"), &tz).unwrap(), us("2026-03-29T02:00:00Z"));
    }

    #[test]
    fn daily_in_berlin_follows_local_midnight_across_dst() {
        let d = Span::parse("1d").unwrap();
        let tz = zone("Europe/Berlin").unwrap();
        // Spring forward on 2026-03-29: that local day has 23 hours.
        let start = d.floor(us("2026-03-29T12:00:00Z"), &tz).unwrap();
        assert_eq!(start, us("2026-03-28T23:00:00Z"));
        let end = d.next(start, &tz).unwrap();
        assert_eq!(end, us("2026-03-29T22:00:00Z"));
        assert_eq!(end - start, 23 * MICROS_PER_HOUR);
        // Fall back on 2026-10-25: 25 hours.
        let s2 = d.floor(us("2026-10-25T12:00:00Z"), &tz).unwrap();
        assert_eq!(d.next(s2, &tz).unwrap() - s2, 25 * MICROS_PER_HOUR);
    }

    #[test]
    fn weeks_start_on_monday_and_months_on_the_first() {
        let tz = TimeZone::UTC;
        let w = Span::parse("1w").unwrap();
        assert_eq!(w.floor(us("2026-11-22T10:00:00Z"), &tz).unwrap(), us("2026-11-16T00:00:00Z"));
        let m = Span::parse("1mon").unwrap();
        let s = m.floor(us("2026-02-15T00:00:00Z"), &tz).unwrap();
        assert_eq!(s, us("2026-02-01T00:00:00Z"));
        assert_eq!(m.next(s, &tz).unwrap(), us("2026-03-01T00:00:00Z"));
        let q = Span::parse("3mon").unwrap();
        assert_eq!(q.floor(us("2026-05-15T00:00:00Z"), &tz).unwrap(), us("2026-04-01T00:00:00Z"));
        let y = Span::parse("1y").unwrap();
        assert_eq!(y.floor(us("1969-05-15T00:00:00Z"), &tz).unwrap(), us("1969-01-01T00:00:00Z"));
    }

    #[test]
    fn integer_keys_floor_toward_minus_infinity() {
        let i = Span::Integer(100);
        assert_eq!(i.floor(250, &TimeZone::UTC).unwrap(), 200);
        assert_eq!(i.floor(-1, &TimeZone::UTC).unwrap(), -100);
        assert_eq!(i.next(200, &TimeZone::UTC).unwrap(), 300);
    }

    #[test]
    fn shifting_by_months_uses_the_calendar() {
        let m = Span::parse("1mon").unwrap();
        assert_eq!(m.subtract_from(us("2026-03-31T00:00:00Z"), &TimeZone::UTC).unwrap(), us("2026-02-28T00:00:00Z"));
        assert_eq!(Span::parse("1d").unwrap().add_to(us("2026-01-01T00:00:00Z"), &TimeZone::UTC).unwrap(), us("2026-01-02T00:00:00Z"));
    }
}
