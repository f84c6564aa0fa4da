//! The one memory budget of a load: every byte in flight (chunks being
//! parsed, rows waiting in accumulators, batches being sent, rejects waiting
//! to be written) is counted here. Parse threads take from it before they
//! hand rows on (blocking while it is full), sinks give back when rows are
//! committed; the coordinator watches `has_waiters` so it never holds rows
//! that a waiting parse thread needs room for.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// One budget of bytes for everything in flight: parse threads take from it
/// before they hand rows on, COPY workers give back when rows are sent.
#[derive(Debug)]
pub struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
    /// Parse threads waiting in `acquire`: the coordinator sends what it
    /// holds when one waits, since a chunk larger than what is left (or than
    /// the whole budget, which waits for an empty one) would otherwise wait
    /// for rows nobody sends.
    waiting: std::sync::atomic::AtomicUsize,
    pub limit: usize,
}

impl Budget {
    pub fn new(limit: usize) -> Self {
        Budget { used: Mutex::new(0), freed: Condvar::new(), waiting: Default::default(), limit }
    }

    /// Waits until `n` bytes fit (a single request larger than the whole
    /// budget waits for an empty budget instead of forever).
    pub(crate) fn acquire(&self, n: usize, cancel: &AtomicBool) {
        let mut used = self.used.lock().expect("budget lock");
        if *used > 0 && *used + n > self.limit {
            self.waiting.fetch_add(1, Ordering::Relaxed);
            while *used > 0 && *used + n > self.limit && !cancel.load(Ordering::Relaxed) {
                used = self.freed.wait_timeout(used, Duration::from_millis(100)).expect("budget lock").0;
            }
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        *used += n;
    }

    /// Counts `n` bytes at once, without waiting (rows that come back to
    /// the coordinator after their budget was given back).
    pub fn take(&self, n: usize) {
        *self.used.lock().expect("budget lock") += n;
    }

    pub fn release(&self, n: usize) {
        let mut used = self.used.lock().expect("budget lock");
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }

    pub(crate) fn used(&self) -> usize {
        *self.used.lock().expect("budget lock")
    }

    /// Whether a parse thread waits for room.
    pub(crate) fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}
