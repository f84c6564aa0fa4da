//! The one clock a load reads: `now` for the max-future limit, retention and
//! premake, read again as the load runs so that a stream that outlives a day
//! (or `--max-future`) keeps taking rows that have become valid.
//!
//! Tests move it: when `CHUTE_TEST_CLOCK_FILE` names a file, `now` is the
//! instant written in it (RFC 3339, e.g. `2030-01-02T12:00:00Z`), read anew
//! on every call, so a test rewrites the file to let a simulated day pass
//! while the real code path runs. Not for production use; without the
//! variable (or when the file cannot be read) the system clock is used.

/// The environment variable that points the clock at a file (tests only).
pub const TEST_CLOCK_FILE: &str = "CHUTE_TEST_CLOCK_FILE";

/// Now, in microseconds since the Unix epoch.
pub fn now_micros() -> i64 {
    if let Some(path) = std::env::var_os(TEST_CLOCK_FILE)
        && let Ok(text) = std::fs::read_to_string(path)
        && let Ok(t) = text.trim().parse::<jiff::Timestamp>()
    {
        return t.as_microsecond();
    }
    jiff::Timestamp::now().as_microsecond()
}
