//! Waiting out a lost connection, a restarted server or a lock held too long.
//!
//! Every loop that retries something against the server (the DDL executor's
//! lock retries, a COPY worker's reconnects, a load's set-up, journal and
//! just-in-time partition creation) takes its pauses from one [`Backoff`]:
//! exponential, jittered so that many workers cut off at the same moment do
//! not all come back at the same moment, and bounded by `--retry-for`. What
//! counts as "the connection is gone, try again on a new one" is decided here
//! too, from the error's kind and SQLSTATE only ([`connection_lost`], the
//! [`Lost`] trait for chute's own error types), never from message text.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Pauses between attempts: `base`, doubling up to `max`, each between half
/// and all of that (jitter), until `retry_for` has passed since the start.
#[derive(Debug, Clone)]
pub struct Backoff {
    began: Instant,
    attempt: u32,
    base: Duration,
    max: Duration,
    retry_for: Duration,
}

impl Backoff {
    pub fn new(base: Duration, max: Duration, retry_for: Duration) -> Self {
        Backoff { began: Instant::now(), attempt: 0, base, max, retry_for }
    }

    /// For a lost connection: from 100 ms up to 5 s.
    pub fn reconnect(retry_for: Duration) -> Self {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(5), retry_for)
    }

    /// Attempts that failed so far.
    pub fn attempts(&self) -> u32 {
        self.attempt
    }

    /// How long this has been retrying.
    pub fn elapsed(&self) -> Duration {
        self.began.elapsed()
    }

    /// The pause before the next attempt, or `None` when `retry_for` is over.
    pub fn next_pause(&mut self) -> Option<Duration> {
        if self.began.elapsed() >= self.retry_for {
            return None;
        }
        let full = self.base.saturating_mul(2u32.saturating_pow(self.attempt.min(16))).min(self.max);
        self.attempt += 1;
        let half = full / 2;
        let jitter = half.mul_f64(unit_random());
        // Never sleep past the deadline by much: one more attempt at the end.
        let left = self.retry_for.saturating_sub(self.began.elapsed());
        Some((half + jitter).min(left.max(Duration::from_millis(10))))
    }

    /// Sleeps for the next pause; `false` when `retry_for` is over.
    pub async fn wait(&mut self) -> bool {
        match self.next_pause() {
            Some(p) => {
                tokio::time::sleep(p).await;
                true
            }
            None => false,
        }
    }
}

/// A number in [0, 1): SplitMix64 over the clock and a counter (no seeding
/// ceremony; it only spreads retries apart).
fn unit_random() -> f64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let mut z = nanos ^ COUNTER.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

/// The connection is gone or the server is going away or not up yet: the
/// same statement can work on a new connection. Class 08 (connection
/// exception), 57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot
/// connect now, or no SQLSTATE at all (an I/O error on the socket), except
/// the errors the client makes of a good answer (a row count or a value
/// that is not what the caller asked for), which a new connection repeats.
pub fn connection_lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(c) => {
            let c = c.code();
            c.starts_with("08") || matches!(c, "57P01" | "57P02" | "57P03")
        }
        None => e.as_db_error().is_none() && !answer_misread(e),
    }
}

/// tokio-postgres's errors about an answer that arrived whole: the wrong
/// number of rows for `query_one`, a value or a column the caller's types
/// do not fit. Known by their text: the crate does not expose its kinds.
fn answer_misread(e: &tokio_postgres::Error) -> bool {
    let text = e.to_string();
    ["query returned an unexpected number of rows", "error serializing parameter", "error deserializing column", "invalid column"]
        .iter()
        .any(|p| text.starts_with(p))
}

/// [`connection_lost`], or a conflict that goes away when the transaction
/// is tried again: serialization failure, deadlock, too many connections.
pub fn transient(e: &tokio_postgres::Error) -> bool {
    connection_lost(e) || e.code().is_some_and(|c| matches!(c.code(), "40001" | "40P01" | "53300"))
}

/// An error that may mean the connection was lost (and the work can be
/// redone on a new one).
pub trait Lost {
    fn connection_lost(&self) -> bool;
}

impl Lost for tokio_postgres::Error {
    fn connection_lost(&self) -> bool {
        connection_lost(self)
    }
}

impl Lost for crate::ConnectError {
    fn connection_lost(&self) -> bool {
        matches!(self, crate::ConnectError::Unreachable { .. } | crate::ConnectError::Unavailable { .. })
    }
}

/// Connects, retrying while the server is unreachable or not accepting
/// connections yet, for up to `retry_for`; `on_retry` hears of each failure.
pub async fn connect(
    opts: &crate::ConnectOptions,
    retry_for: Duration,
    on_retry: impl FnMut(&crate::ConnectError),
) -> Result<tokio_postgres::Client, crate::ConnectError> {
    connect_with(opts, &mut Backoff::reconnect(retry_for), on_retry).await
}

/// [`connect`] within a backoff that is already running (a worker that
/// lost its connection keeps the deadline it started with).
pub async fn connect_with(
    opts: &crate::ConnectOptions,
    backoff: &mut Backoff,
    mut on_retry: impl FnMut(&crate::ConnectError),
) -> Result<tokio_postgres::Client, crate::ConnectError> {
    loop {
        match opts.connect().await {
            Ok(c) => return Ok(c),
            Err(e) if e.connection_lost() => {
                on_retry(&e);
                if !backoff.wait().await {
                    return Err(e);
                }
            }
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_are_jittered_and_stop_at_the_deadline() {
        let mut b = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), Duration::from_secs(60));
        let pauses: Vec<Duration> = (0..8).map(|_| b.next_pause().unwrap()).collect();
        for (i, p) in pauses.iter().enumerate() {
            let full = Duration::from_millis(100 * (1 << i.min(4))).min(Duration::from_secs(1));
            assert!(*p >= full / 2 && *p <= full, "pause {i}: {p:?} not within [{:?}, {full:?}]", full / 2);
        }
        let mut done = Backoff::new(Duration::from_millis(100), Duration::from_secs(1), Duration::ZERO);
        assert_eq!(done.next_pause(), None);
    }
}
