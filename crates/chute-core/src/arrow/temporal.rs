//! Dates, times, timestamps, durations and intervals.
//!
//! Arrow counts from 1970 in a unit; PostgreSQL counts microseconds (days
//! for `date`) from 2000. Whole units convert exactly. A nanosecond value
//! that is not a whole microsecond is rounded the way the server rounds the
//! same value written as text with nine fraction digits:
//! `rint(strtod(".ddddddddd") * 1e6)` (see `value::datetime`). The fraction
//! of a time or timestamp is the part after the last whole second, as the
//! text writes it (`1969-12-31 23:59:59.9999995` rounds up into 1970); a
//! duration's fraction carries its sign, as `-1.0000005 seconds` does.
//!
//! Text forms (for rows the server parses, and reject files) are ISO 8601
//! with ` BC` for years before 1, which PostgreSQL reads back exactly.

use std::io::Write as _;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, DurationMicrosecondType, DurationMillisecondType, DurationNanosecondType, DurationSecondType,
    IntervalDayTimeType, IntervalMonthDayNanoType, IntervalYearMonthType, Time32MillisecondType, Time32SecondType, Time64MicrosecondType,
    Time64NanosecondType, TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType,
};
use arrow_array::{Array, ArrowPrimitiveType, PrimitiveArray};
use arrow_schema::{DataType, IntervalUnit, TimeUnit};

use super::{Bad, DATETIME_OVERFLOW, Pg, Values, json_string};
use crate::encode::{END_TIMESTAMP, MIN_TIMESTAMP, PG_EPOCH_OFFSET_DAYS, PG_EPOCH_OFFSET_MICROS};
use crate::value::{EncodeContext, PgType, civil_from_days, local_offset, round_timestamp};

const USECS_PER_SEC: i64 = 1_000_000;
const USECS_PER_DAY: i64 = 86_400 * USECS_PER_SEC;
const NANOS_PER_SEC: i64 = 1_000_000_000;
/// `date` accepts days from 4714-11-24 BC (`DATETIME_MIN_JULIAN`) up to,
/// not including, 5874898-01-01 (`DATE_END_JULIAN`), counted from 2000.
const MIN_DATE: i64 = -2_451_545;
const END_DATE: i64 = 2_145_031_949;

pub(super) fn bind<'a>(array: &'a dyn Array, pg: &'a Pg, typmod: i32, ctx: &'a EncodeContext) -> Box<dyn Values + 'a> {
    use DataType as D;
    match array.data_type() {
        D::Date32 => Box::new(Dates { a: array.as_primitive::<Date32Type>(), per_day: 1 }),
        D::Date64 => Box::new(Dates { a: array.as_primitive::<Date64Type>(), per_day: 86_400_000 }),
        D::Time32(TimeUnit::Second) => Box::new(Times { a: array.as_primitive::<Time32SecondType>(), unit: TimeUnit::Second }),
        D::Time32(_) => Box::new(Times { a: array.as_primitive::<Time32MillisecondType>(), unit: TimeUnit::Millisecond }),
        D::Time64(TimeUnit::Microsecond) => {
            Box::new(Times { a: array.as_primitive::<Time64MicrosecondType>(), unit: TimeUnit::Microsecond })
        }
        D::Time64(_) => Box::new(Times { a: array.as_primitive::<Time64NanosecondType>(), unit: TimeUnit::Nanosecond }),
        D::Timestamp(unit, tz) => {
            let zoned = tz.is_some();
            let into_tz = *pg == Pg::Known(PgType::Timestamptz);
            match unit {
                TimeUnit::Second => {
                    Box::new(Stamps { a: array.as_primitive::<TimestampSecondType>(), unit: *unit, zoned, into_tz, typmod, ctx })
                }
                TimeUnit::Millisecond => {
                    Box::new(Stamps { a: array.as_primitive::<TimestampMillisecondType>(), unit: *unit, zoned, into_tz, typmod, ctx })
                }
                TimeUnit::Microsecond => {
                    Box::new(Stamps { a: array.as_primitive::<TimestampMicrosecondType>(), unit: *unit, zoned, into_tz, typmod, ctx })
                }
                TimeUnit::Nanosecond => {
                    Box::new(Stamps { a: array.as_primitive::<TimestampNanosecondType>(), unit: *unit, zoned, into_tz, typmod, ctx })
                }
            }
        }
        D::Duration(TimeUnit::Second) => Box::new(Durations { a: array.as_primitive::<DurationSecondType>(), unit: TimeUnit::Second }),
        D::Duration(TimeUnit::Millisecond) => {
            Box::new(Durations { a: array.as_primitive::<DurationMillisecondType>(), unit: TimeUnit::Millisecond })
        }
        D::Duration(TimeUnit::Microsecond) => {
            Box::new(Durations { a: array.as_primitive::<DurationMicrosecondType>(), unit: TimeUnit::Microsecond })
        }
        D::Duration(TimeUnit::Nanosecond) => {
            Box::new(Durations { a: array.as_primitive::<DurationNanosecondType>(), unit: TimeUnit::Nanosecond })
        }
        D::Interval(IntervalUnit::YearMonth) => Box::new(Intervals { a: array.as_primitive::<IntervalYearMonthType>() }),
        D::Interval(IntervalUnit::DayTime) => Box::new(Intervals { a: array.as_primitive::<IntervalDayTimeType>() }),
        D::Interval(IntervalUnit::MonthDayNano) => Box::new(Intervals { a: array.as_primitive::<IntervalMonthDayNanoType>() }),
        _ => Box::new(super::scalar::Unsupported),
    }
}

/// Microseconds of a whole-second-or-less fraction given in nanoseconds
/// (0 to 999,999,999), rounded as the server rounds its nine digits.
fn fraction_micros(nanos: i64) -> i64 {
    if nanos % 1000 == 0 {
        return nanos / 1000;
    }
    // nanos / 1e9 is the correctly rounded double of the digits, as strtod reads them.
    ((nanos as f64 / NANOS_PER_SEC as f64) * USECS_PER_SEC as f64).round_ties_even() as i64
}

/// A point in time in `unit` as microseconds, its fraction taken after the
/// last whole second (calendar text). `None`: beyond i64 microseconds.
fn point_micros(v: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Second => v.checked_mul(USECS_PER_SEC),
        TimeUnit::Millisecond => v.checked_mul(1000),
        TimeUnit::Microsecond => Some(v),
        TimeUnit::Nanosecond => {
            let (secs, frac) = (v.div_euclid(NANOS_PER_SEC), v.rem_euclid(NANOS_PER_SEC));
            Some(secs * USECS_PER_SEC + fraction_micros(frac))
        }
    }
}

/// Microseconds of an interval's fraction of a second given in nanoseconds,
/// rounded as the server (15 and later) rounds `N.ddddddddd seconds`:
/// `AdjustFractMicroseconds` keeps the whole microseconds and rounds only
/// what is left, half to even, so 1.5 µs reads as 1 µs (a time's fraction,
/// rounded whole, reads as 2).
fn interval_fraction_micros(nanos: i64) -> i64 {
    if nanos % 1000 == 0 {
        return nanos / 1000;
    }
    let p = (nanos as f64 / NANOS_PER_SEC as f64) * USECS_PER_SEC as f64;
    let whole = p.trunc();
    (whole + (p - whole).round_ties_even()) as i64
}

/// A length of time in `unit` as microseconds, its fraction carrying the sign.
fn span_micros(v: i64, unit: TimeUnit) -> Option<i64> {
    match unit {
        TimeUnit::Nanosecond => {
            let (secs, frac) = ((v / NANOS_PER_SEC).abs(), (v % NANOS_PER_SEC).abs());
            let micros = secs * USECS_PER_SEC + interval_fraction_micros(frac);
            Some(if v < 0 { -micros } else { micros })
        }
        _ => point_micros(v, unit),
    }
}

/// `YYYY-MM-DD` of a day count since 1970 (with ` BC` appended by the caller's `bc`).
fn write_date(days: i64, out: &mut Vec<u8>) -> bool {
    let (y, m, d) = civil_from_days(days);
    let bc = y < 1;
    let year = if bc { 1 - y } else { y };
    let _ = write!(out, "{year:04}-{m:02}-{d:02}");
    bc
}

/// `HH:MM:SS[.ffffff]` of microseconds into a day (0 to 24:00:00), or with
/// nine digits when `nanos` holds the exact fraction.
fn write_time(micros: i64, nanos: Option<i64>, out: &mut Vec<u8>) {
    let secs = micros.div_euclid(USECS_PER_SEC);
    let _ = write!(out, "{:02}:{:02}:{:02}", secs / 3600, secs / 60 % 60, secs % 60);
    match nanos {
        Some(n) if n != 0 => {
            let _ = write!(out, ".{n:09}");
        }
        Some(_) => {}
        None => {
            let frac = micros.rem_euclid(USECS_PER_SEC);
            if frac != 0 {
                let _ = write!(out, ".{frac:06}");
            }
        }
    }
}

struct Dates<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    /// Units of the array per day (Date64 counts milliseconds).
    per_day: i64,
}

impl<T: ArrowPrimitiveType> Dates<'_, T>
where
    T::Native: super::scalar::Wide,
{
    fn days(&self, i: usize) -> i64 {
        use super::scalar::Wide;
        (self.a.value(i).wide() as i64).div_euclid(self.per_day)
    }
}

impl<T: ArrowPrimitiveType> Values for Dates<'_, T>
where
    T::Native: super::scalar::Wide,
{
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let d = self.days(i) - i64::from(PG_EPOCH_OFFSET_DAYS);
        if !(MIN_DATE..END_DATE).contains(&d) {
            return Err(Bad::invalid("date out of range", DATETIME_OVERFLOW));
        }
        out.extend_from_slice(&(d as i32).to_be_bytes());
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        if write_date(self.days(i), out) {
            out.extend_from_slice(b" BC");
        }
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let mut t = Vec::with_capacity(16);
        self.text(i, &mut t);
        json_string(&t, out)
    }
}

struct Times<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    unit: TimeUnit,
}

impl<T: ArrowPrimitiveType> Times<'_, T>
where
    T::Native: super::scalar::Wide,
{
    fn raw(&self, i: usize) -> i64 {
        use super::scalar::Wide;
        self.a.value(i).wide() as i64
    }
}

impl<T: ArrowPrimitiveType> Values for Times<'_, T>
where
    T::Native: super::scalar::Wide,
{
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        match point_micros(self.raw(i), self.unit) {
            Some(t) if (0..=USECS_PER_DAY).contains(&t) => {
                out.extend_from_slice(&t.to_be_bytes());
                Ok(())
            }
            _ => Err(Bad::invalid("time out of range", DATETIME_OVERFLOW)),
        }
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let v = self.raw(i);
        if self.unit == TimeUnit::Nanosecond {
            write_time(v.div_euclid(NANOS_PER_SEC) * USECS_PER_SEC, Some(v.rem_euclid(NANOS_PER_SEC)), out);
        } else {
            write_time(point_micros(v, self.unit).unwrap_or(0), None, out);
        }
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let mut t = Vec::with_capacity(20);
        self.text(i, &mut t);
        json_string(&t, out)
    }
}

struct Stamps<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    unit: TimeUnit,
    /// The Arrow type has a time zone: its values are instants (UTC).
    zoned: bool,
    /// The column is `timestamptz`.
    into_tz: bool,
    typmod: i32,
    ctx: &'a EncodeContext,
}

impl<T: ArrowPrimitiveType<Native = i64>> Stamps<'_, T> {
    /// Microseconds since 1970 of what the column stores: UTC for
    /// `timestamptz`, wall time for `timestamp`.
    fn micros(&self, i: usize) -> Result<i64, Bad> {
        let range = || Bad::invalid("timestamp out of range", DATETIME_OVERFLOW);
        let t = point_micros(self.a.value(i), self.unit).ok_or_else(range)?;
        if self.zoned || !self.into_tz {
            return Ok(t);
        }
        // Wall time read in the session's zone, its offset found for the
        // whole seconds as the server finds it.
        let tz = self.ctx.session_tz.as_ref().ok_or(Bad::NeedsServer)?;
        let offset = local_offset(tz, t.div_euclid(USECS_PER_SEC)).map_err(|_| Bad::NeedsServer)?;
        t.checked_sub(i64::from(offset) * USECS_PER_SEC).ok_or_else(range)
    }
}

impl<T: ArrowPrimitiveType<Native = i64>> Values for Stamps<'_, T> {
    #[inline]
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }

    #[inline]
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let range = || Bad::invalid("timestamp out of range", DATETIME_OVERFLOW);
        let mut wire = self.micros(i)?.checked_sub(PG_EPOCH_OFFSET_MICROS).ok_or_else(range)?;
        if self.typmod >= 0 {
            wire = round_timestamp(wire, self.typmod).map_err(|_| range())?;
        }
        if !(MIN_TIMESTAMP..END_TIMESTAMP).contains(&wire) {
            return Err(range());
        }
        out.extend_from_slice(&wire.to_be_bytes());
        Ok(())
    }

    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let v = self.a.value(i);
        // Written at the Arrow value's own precision; the server rounds it as the binary path does.
        let (secs, nanos) = match self.unit {
            TimeUnit::Second => (v, 0),
            TimeUnit::Millisecond => (v.div_euclid(1000), v.rem_euclid(1000) * 1_000_000),
            TimeUnit::Microsecond => (v.div_euclid(USECS_PER_SEC), v.rem_euclid(USECS_PER_SEC) * 1000),
            TimeUnit::Nanosecond => (v.div_euclid(NANOS_PER_SEC), v.rem_euclid(NANOS_PER_SEC)),
        };
        let bc = write_date(secs.div_euclid(86_400), out);
        out.push(b' ');
        write_time(secs.rem_euclid(86_400) * USECS_PER_SEC, Some(nanos), out);
        if self.zoned && self.into_tz {
            out.extend_from_slice(b"+00");
        }
        if bc {
            out.extend_from_slice(b" BC");
        }
    }

    /// As `to_json` writes a timestamp: `T` between date and time, the
    /// fraction without trailing zeros, `+00:00` for a time with a zone.
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let v = self.a.value(i);
        let (secs, nanos) = match self.unit {
            TimeUnit::Second => (v, 0),
            TimeUnit::Millisecond => (v.div_euclid(1000), v.rem_euclid(1000) * 1_000_000),
            TimeUnit::Microsecond => (v.div_euclid(USECS_PER_SEC), v.rem_euclid(USECS_PER_SEC) * 1000),
            TimeUnit::Nanosecond => (v.div_euclid(NANOS_PER_SEC), v.rem_euclid(NANOS_PER_SEC)),
        };
        let mut t = Vec::with_capacity(40);
        let bc = write_date(secs.div_euclid(86_400), &mut t);
        t.push(b'T');
        write_time(secs.rem_euclid(86_400) * USECS_PER_SEC, Some(nanos), &mut t);
        if nanos != 0 {
            while t.last() == Some(&b'0') {
                t.pop();
            }
        }
        if self.zoned {
            t.extend_from_slice(b"+00:00");
        }
        if bc {
            t.extend_from_slice(b" BC");
        }
        json_string(&t, out)
    }
}

/// An interval's wire form: microseconds, days, months.
fn interval_wire(micros: i64, days: i32, months: i32, out: &mut Vec<u8>) {
    out.extend_from_slice(&micros.to_be_bytes());
    out.extend_from_slice(&days.to_be_bytes());
    out.extend_from_slice(&months.to_be_bytes());
}

/// `[-]S[.fffffffff] seconds` of a nanosecond count.
fn write_seconds(nanos: i128, out: &mut Vec<u8>) {
    let sign = if nanos < 0 { "-" } else { "" };
    let (s, f) = (nanos.abs() / 1_000_000_000, nanos.abs() % 1_000_000_000);
    if f == 0 {
        let _ = write!(out, "{sign}{s} seconds");
    } else {
        let _ = write!(out, "{sign}{s}.{f:09} seconds");
    }
}

struct Durations<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
    unit: TimeUnit,
}

impl<T: ArrowPrimitiveType<Native = i64>> Values for Durations<'_, T> {
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let micros = span_micros(self.a.value(i), self.unit).ok_or_else(|| Bad::invalid("interval out of range", DATETIME_OVERFLOW))?;
        interval_wire(micros, 0, 0, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let per = match self.unit {
            TimeUnit::Second => 1_000_000_000,
            TimeUnit::Millisecond => 1_000_000,
            TimeUnit::Microsecond => 1000,
            TimeUnit::Nanosecond => 1,
        };
        write_seconds(i128::from(self.a.value(i)) * per, out)
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let mut t = Vec::with_capacity(32);
        self.text(i, &mut t);
        json_string(&t, out)
    }
}

/// Arrow's interval types as (months, days, nanoseconds).
pub(super) trait IntervalParts: Copy {
    fn parts(self) -> (i32, i32, i64);
}

impl IntervalParts for i32 {
    fn parts(self) -> (i32, i32, i64) {
        (self, 0, 0)
    }
}

impl IntervalParts for arrow_buffer::IntervalDayTime {
    fn parts(self) -> (i32, i32, i64) {
        (0, self.days, i64::from(self.milliseconds) * 1_000_000)
    }
}

impl IntervalParts for arrow_buffer::IntervalMonthDayNano {
    fn parts(self) -> (i32, i32, i64) {
        (self.months, self.days, self.nanoseconds)
    }
}

struct Intervals<'a, T: ArrowPrimitiveType> {
    a: &'a PrimitiveArray<T>,
}

impl<T: ArrowPrimitiveType> Values for Intervals<'_, T>
where
    T::Native: IntervalParts,
{
    fn is_null(&self, i: usize) -> bool {
        self.a.is_null(i)
    }
    fn wire(&self, i: usize, out: &mut Vec<u8>) -> Result<(), Bad> {
        let (months, days, nanos) = self.a.value(i).parts();
        let micros = span_micros(nanos, TimeUnit::Nanosecond).ok_or_else(|| Bad::invalid("interval out of range", DATETIME_OVERFLOW))?;
        interval_wire(micros, days, months, out);
        Ok(())
    }
    fn text(&self, i: usize, out: &mut Vec<u8>) {
        let (months, days, nanos) = self.a.value(i).parts();
        let _ = write!(out, "{months} mons {days} days ");
        write_seconds(i128::from(nanos), out);
    }
    fn json(&self, i: usize, out: &mut Vec<u8>) {
        let mut t = Vec::with_capacity(48);
        self.text(i, &mut t);
        json_string(&t, out)
    }
}
