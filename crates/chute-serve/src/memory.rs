//! The memory budget of `chute serve` (`--memory-mb`), split in two:
//!
//! - **Requests** (three quarters): every request holds a `Reservation` for
//!   what it keeps in memory, taken before the bytes are: its body as sent
//!   (from `Content-Length`, before a byte is read), decompressed, the rows
//!   it is parsed into and what maps them back to its lines. It grows with
//!   them and is given back when the request is answered (its rows sit in
//!   the lanes' queues until then). A request that would not fit even in an
//!   empty budget gets 413; one that does not fit now, 429 with Retry-After.
//! - **Lanes** (a quarter): one budget that every table's load shares (its
//!   parsed rows, per-leaf batches and COPYs in flight, see `load::budget`):
//!   a lane waits for room there, which slows the requests feeding it.
//!
//! What neither counts (the program, its threads, each open connection's
//! buffers) is the fixed overhead docs/serve.md states.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::metrics::Metrics;

/// The bytes requests may hold, all together.
pub(crate) struct Pool {
    limit: usize,
    used: AtomicUsize,
    /// Requests holding a reservation.
    holders: AtomicUsize,
    metrics: Arc<Metrics>,
}

/// Why a reservation could not grow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// Not now: other requests hold the budget (429).
    Later,
    /// Never: more than the whole budget (413).
    Never,
}

/// A request's share of the pool, given back when dropped.
pub(crate) struct Reservation {
    pool: Arc<Pool>,
    bytes: usize,
}

impl Pool {
    pub(crate) fn new(limit: usize, metrics: Arc<Metrics>) -> Arc<Pool> {
        Arc::new(Pool { limit, used: AtomicUsize::new(0), holders: AtomicUsize::new(0), metrics })
    }

    /// An empty reservation, grown with `resize`.
    pub(crate) fn reservation(self: &Arc<Self>) -> Reservation {
        let holders = self.holders.fetch_add(1, Ordering::Relaxed) + 1;
        self.metrics.in_flight(self.used.load(Ordering::Relaxed), holders);
        Reservation { pool: self.clone(), bytes: 0 }
    }

    fn take(&self, n: usize) -> Result<(), Refused> {
        if n > self.limit {
            return Err(Refused::Never);
        }
        let mut used = self.used.load(Ordering::Relaxed);
        loop {
            if used + n > self.limit {
                return Err(Refused::Later);
            }
            match self.used.compare_exchange_weak(used, used + n, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    fn give(&self, n: usize) {
        self.used.fetch_sub(n, Ordering::AcqRel);
    }
}

impl Reservation {
    /// Makes the reservation `total` bytes: shrinking always succeeds;
    /// growing fails (and leaves it as it was) when the pool cannot hold it.
    pub(crate) fn resize(&mut self, total: usize) -> Result<(), Refused> {
        if total > self.pool.limit {
            return Err(Refused::Never);
        }
        if total > self.bytes {
            self.pool.take(total - self.bytes)?;
        } else {
            self.pool.give(self.bytes - total);
        }
        self.bytes = total;
        self.pool.metrics.in_flight(self.pool.used.load(Ordering::Relaxed), self.pool.holders.load(Ordering::Relaxed));
        Ok(())
    }

    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }

    /// The most a request may hold (the pool's size).
    pub(crate) fn limit(&self) -> usize {
        self.pool.limit
    }

    /// `resize`, or the answer that refuses the request.
    pub(crate) fn need(&mut self, total: usize) -> Result<(), Response> {
        self.resize(total).map_err(|why| refusal(why, total, self.pool.limit))
    }
}

impl Drop for Reservation {
    fn drop(&mut self) {
        self.pool.give(self.bytes);
        let holders = self.pool.holders.fetch_sub(1, Ordering::Relaxed) - 1;
        self.pool.metrics.in_flight(self.pool.used.load(Ordering::Relaxed), holders);
    }
}

/// 413 (never fits) or 429 with Retry-After (fits later) for a request that
/// needs `bytes` of a budget of `limit` for requests. The connection is
/// closed after the answer: the rest of the body is not read.
pub(crate) fn refusal(why: Refused, bytes: usize, limit: usize) -> Response {
    let mib = |b: usize| b.div_ceil(1 << 20);
    let mut r = match why {
        Refused::Never => super::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "request too large",
            &format!(
                "the request needs {} MiB in memory (its body, decompressed and parsed), more than the {} MiB --memory-mb leaves \
                 for requests (three quarters of it): send smaller requests, or raise --memory-mb",
                mib(bytes),
                mib(limit)
            ),
        ),
        Refused::Later => {
            let mut r = super::error(
                StatusCode::TOO_MANY_REQUESTS,
                "too many requests",
                "the memory budget for requests in flight is full (--memory-mb): retry after a second",
            );
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            r
        }
    };
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// Makes the C allocator give memory back as requests end: blocks of
/// 128 KiB and more (bodies, their rows, chunks, COPY batches) are mapped
/// for themselves and unmapped when freed (glibc otherwise raises that
/// threshold as such blocks are freed, and keeps them in its heaps), and at
/// most two heaps (arenas) are made. Without it, freed request memory stayed
/// in the process after each request, and its RSS grew past the budget.
pub(crate) fn tune_allocator() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets the allocator's parameters; called before the service's threads allocate much.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_grow_within_the_pool_and_give_back_when_dropped() {
        let pool = Pool::new(100, Arc::new(Metrics::new()));
        let mut a = pool.reservation();
        let mut b = pool.reservation();
        assert_eq!(a.resize(60), Ok(()));
        assert_eq!(b.resize(50), Err(Refused::Later));
        assert_eq!(b.bytes(), 0, "a refused growth leaves the reservation as it was");
        assert_eq!(b.resize(101), Err(Refused::Never));
        assert_eq!(b.resize(40), Ok(()));
        assert_eq!(a.resize(10), Ok(()), "shrinking");
        assert_eq!(b.resize(90), Ok(()));
        drop(b);
        assert_eq!(pool.used.load(Ordering::Relaxed), 10);
        drop(a);
        assert_eq!(pool.used.load(Ordering::Relaxed), 0);
    }
}
