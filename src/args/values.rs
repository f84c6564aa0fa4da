//! Value parsers: a flag's text becomes a typed value where clap reads it,
//! so a wrong duration, size or interval is refused with the flag's name
//! before anything connects, and no command sees the text again.

use std::time::Duration;

use chute_core::partman::Span;

/// A duration: `90s`, `5min`, `1h30m`, `2 days`, or plain seconds (`0.5`).
pub fn duration(text: &str) -> Result<Duration, String> {
    chute_core::partman::policy::parse_duration(text).map_err(|e| e.to_string())
}

/// A duration longer than zero.
pub fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = duration(text)?;
    if d.is_zero() {
        return Err("must be longer than zero".into());
    }
    Ok(d)
}

/// A duration longer than zero, or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OrOff {
    Off,
    After(Duration),
}

impl OrOff {
    pub fn duration(self) -> Option<Duration> {
        match self {
            OrOff::Off => None,
            OrOff::After(d) => Some(d),
        }
    }
}

pub fn duration_or_off(text: &str) -> Result<OrOff, String> {
    if text.trim().eq_ignore_ascii_case("off") {
        return Ok(OrOff::Off);
    }
    let d = duration(text)?;
    if d.is_zero() {
        return Err("must be longer than zero (or off)".into());
    }
    Ok(OrOff::After(d))
}

/// A partition interval: `1h`, `1d`, `1mon`, or a plain number for integer keys.
pub fn interval(text: &str) -> Result<Span, String> {
    Span::parse(text).map_err(|e| e.to_string())
}

/// A size in bytes, as PostgreSQL writes memory settings: `256MB`, `1GB`,
/// `64kB`, or plain kilobytes (`65536`), as `maintenance_work_mem` reads them.
pub fn memory_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (number, unit) = t.split_at(digits);
    let n: u64 = number.parse().map_err(|_| format!("{text:?} is not a size such as 256MB or 1GB"))?;
    let scale: u64 = match unit.trim() {
        "" | "kB" => 1 << 10,
        "B" => 1,
        "MB" => 1 << 20,
        "GB" => 1 << 30,
        "TB" => 1 << 40,
        other => return Err(format!("unknown unit {other:?}: use B, kB, MB, GB or TB (as PostgreSQL does)")),
    };
    n.checked_mul(scale).ok_or_else(|| format!("{text:?} is too large"))
}

/// A count of at least one.
pub fn at_least_one(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(0) => Err("must be at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{text:?} is not a whole number")),
    }
}

/// A single ASCII character, as a byte (a field delimiter).
pub fn ascii_char(text: &str) -> Result<u8, String> {
    let mut chars = text.chars();
    match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii() => Ok(c as u8),
        _ => Err(format!("must be a single ASCII character, not {text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_postgres_reads_memory_settings() {
        assert_eq!(memory_size("256MB"), Ok(256 << 20));
        assert_eq!(memory_size("1GB"), Ok(1 << 30));
        assert_eq!(memory_size("64kB"), Ok(64 << 10));
        assert_eq!(memory_size("65536"), Ok(65536 << 10));
        assert!(memory_size("256mb").is_err());
        assert!(memory_size("MB").is_err());
        assert!(memory_size("99999999999TB").is_err());
    }

    #[test]
    fn off_and_zero_durations() {
        assert_eq!(duration_or_off("off"), Ok(OrOff::Off));
        assert_eq!(duration_or_off("2s"), Ok(OrOff::After(Duration::from_secs(2))));
        assert!(duration_or_off("0s").is_err());
        assert!(duration("soon").is_err());
    }

    #[test]
    fn counts_and_characters() {
        assert_eq!(at_least_one("3"), Ok(3));
        assert!(at_least_one("0").is_err());
        assert_eq!(ascii_char(";"), Ok(b';'));
        assert!(ascii_char("ab").is_err());
        assert!(ascii_char("é").is_err());
    }
}
