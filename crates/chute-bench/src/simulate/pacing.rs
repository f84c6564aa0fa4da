//! How fast each kind of operation is asked for: the insert rate's sine
//! wave, a token bucket per kind, and the queue of orders waiting for their
//! next lifecycle update.
//!
//! All of it is pure (time comes in as seconds since the start), so the
//! pacing is tested without a clock or a server. The pacer task in
//! `driver.rs` calls these on every tick.

use std::collections::VecDeque;

/// The insert rate over time: a sine wave between `floor × peak` and
/// `peak` with the given period, starting at the floor (so a run warms up
/// before its first peak).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Wave {
    pub peak: f64,
    /// Fraction of the peak at the wave's trough, in `[0, 1]`.
    pub floor: f64,
    pub period_s: f64,
}

impl Wave {
    /// Operations per second asked for at `t` seconds.
    pub fn rate_at(&self, t: f64) -> f64 {
        if self.period_s <= 0.0 {
            return self.peak;
        }
        let phase = (1.0 - (std::f64::consts::TAU * t / self.period_s).cos()) / 2.0;
        self.peak * (self.floor + (1.0 - self.floor) * phase)
    }

    /// Operations asked for between `t0` and `t1` (the integral of the rate).
    pub fn expected(&self, t0: f64, t1: f64) -> f64 {
        if self.period_s <= 0.0 {
            return self.peak * (t1 - t0);
        }
        let w = std::f64::consts::TAU / self.period_s;
        let wave = ((t1 - t0) - ((w * t1).sin() - (w * t0).sin()) / w) / 2.0;
        self.peak * (self.floor * (t1 - t0) + (1.0 - self.floor) * wave)
    }
}

/// A token bucket: tokens accrue at the asked-for rate and each operation
/// takes one. The bucket holds at most `burst` tokens; what a late pacer
/// would have had beyond that is counted as `lost` (the client could not
/// keep the pace), never sent later as a burst.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenBucket {
    tokens: f64,
    burst: f64,
    /// Operations asked for so far (the rate's integral).
    pub requested: f64,
    /// Tokens that overflowed the bucket because nobody took them in time.
    pub lost: f64,
}

impl TokenBucket {
    /// A bucket that holds `burst_s` seconds' worth of the peak rate (at least one token).
    pub fn new(peak_rate: f64, burst_s: f64) -> Self {
        TokenBucket { tokens: 0.0, burst: (peak_rate * burst_s).max(1.0), requested: 0.0, lost: 0.0 }
    }

    /// Adds `amount` tokens (rate × elapsed time).
    pub fn refill(&mut self, amount: f64) {
        self.requested += amount;
        self.tokens += amount;
        if self.tokens > self.burst {
            self.lost += self.tokens - self.burst;
            self.tokens = self.burst;
        }
    }

    /// Takes a token if there is a whole one.
    pub fn take(&mut self) -> bool {
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }

    /// Gives back a token taken for an operation that could not be sent.
    pub fn give_back(&mut self) {
        self.tokens += 1.0;
    }
}

/// Items that come due in the order they were queued (each waits the same
/// delay), so a FIFO holds them sorted by due time. `counted` items at the
/// front are already due: counted once, when their time passed, whether or
/// not they have been taken yet.
#[derive(Debug, Clone)]
pub struct DueQueue<T> {
    items: VecDeque<(f64, T)>,
    counted: usize,
}

impl<T> Default for DueQueue<T> {
    fn default() -> Self {
        DueQueue { items: VecDeque::new(), counted: 0 }
    }
}

impl<T> DueQueue<T> {
    /// Queues `item`, due at `due` (not before the last item queued).
    pub fn push(&mut self, due: f64, item: T) {
        let due = self.items.back().map_or(due, |(last, _)| due.max(*last));
        self.items.push_back((due, item));
    }

    /// Items that became due by `now` since the last call.
    pub fn advance(&mut self, now: f64) -> usize {
        let before = self.counted;
        while self.items.get(self.counted).is_some_and(|(due, _)| *due <= now) {
            self.counted += 1;
        }
        self.counted - before
    }

    /// The oldest due item (after [`DueQueue::advance`]), with its due time.
    pub fn pop_due(&mut self) -> Option<(f64, T)> {
        if self.counted == 0 {
            return None;
        }
        self.counted -= 1;
        self.items.pop_front()
    }

    /// Puts back an item [`DueQueue::pop_due`] gave out (still due, still counted).
    pub fn unpop(&mut self, item: T) {
        let due = self.items.front().map_or(0.0, |(d, _)| *d);
        self.items.push_front((due, item));
        self.counted += 1;
    }

    /// When the oldest due item came due.
    pub fn oldest_due(&self) -> Option<f64> {
        (self.counted > 0).then(|| self.items[0].0)
    }

    /// Items due and not yet taken.
    pub fn backlog(&self) -> usize {
        self.counted
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// The last `capacity` items pushed, for picking a recent one at random.
#[derive(Debug, Clone)]
pub struct Recent<T> {
    items: Vec<T>,
    next: usize,
    capacity: usize,
}

impl<T: Clone> Recent<T> {
    pub fn new(capacity: usize) -> Self {
        Recent { items: Vec::with_capacity(capacity.min(1 << 16)), next: 0, capacity: capacity.max(1) }
    }

    pub fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            self.items.push(item);
        } else {
            self.items[self.next] = item;
        }
        self.next = (self.next + 1) % self.capacity;
    }

    /// The item at `r` (any number; reduced modulo the count), if any.
    pub fn pick(&self, r: u64) -> Option<T> {
        (!self.items.is_empty()).then(|| self.items[(r % self.items.len() as u64) as usize].clone())
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

/// Connections for the asked-for rates: Little's law with an assumed 4 ms
/// per operation (a local server answers most in well under that, so there
/// is room for bursts of slow ones), plus four; at least 4, at most 64 (two
/// cores' worth of servers many times over) and at most `limit` (what the
/// server has free).
pub fn pool_size(ops_per_s: f64, limit: usize) -> usize {
    let want = (ops_per_s * 0.004).ceil() as usize + 4;
    want.clamp(4, 64).min(limit.max(1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wave_runs_between_floor_and_peak_and_its_integral_matches() {
        let w = Wave { peak: 1000.0, floor: 0.25, period_s: 60.0 };
        assert!((w.rate_at(0.0) - 250.0).abs() < 1e-9, "starts at the floor");
        assert!((w.rate_at(30.0) - 1000.0).abs() < 1e-9, "peaks half way");
        assert!((w.rate_at(60.0) - 250.0).abs() < 1e-9);
        for i in 0..600 {
            let r = w.rate_at(f64::from(i) * 0.37);
            assert!((250.0 - 1e-9..=1000.0 + 1e-9).contains(&r), "{r}");
        }
        // One whole period averages half way between floor and peak.
        assert!((w.expected(0.0, 60.0) - 625.0 * 60.0).abs() < 1e-6);
        // The integral agrees with summing the rate in small steps.
        let mut sum = 0.0;
        for i in 0..10_000 {
            sum += w.rate_at(5.0 + (f64::from(i) + 0.5) * 0.001) * 0.001;
        }
        assert!((sum - w.expected(5.0, 15.0)).abs() < 1e-3, "{sum} vs {}", w.expected(5.0, 15.0));
        let flat = Wave { peak: 80.0, floor: 0.5, period_s: 0.0 };
        assert_eq!(flat.rate_at(3.0), 80.0);
        assert_eq!(flat.expected(1.0, 3.0), 160.0);
    }

    #[test]
    fn a_bucket_paces_and_counts_what_a_late_pacer_lost() {
        let mut b = TokenBucket::new(100.0, 0.1);
        let mut sent = 0;
        // 1 s in ticks of 2 ms, taken at once: every token is sent.
        for _ in 0..500 {
            b.refill(100.0 * 0.002);
            while b.take() {
                sent += 1;
            }
        }
        assert!((99..=100).contains(&sent), "{sent}");
        assert_eq!(b.lost, 0.0);
        // A pacer that wakes once after a whole second sends at most the burst.
        b.refill(100.0);
        let mut burst = 0;
        while b.take() {
            burst += 1;
        }
        assert_eq!(burst, 10);
        assert!((b.lost - 90.0).abs() < 1.0 + 1e-9, "{}", b.lost);
        assert!((b.requested - 200.0).abs() < 1e-6);
        b.give_back();
        assert!(b.take());
    }

    #[test]
    fn due_items_come_out_in_order_and_are_counted_once() {
        let mut q = DueQueue::default();
        q.push(5.0, 'a');
        q.push(6.0, 'b');
        q.push(5.5, 'c'); // never before the item ahead of it
        assert_eq!(q.advance(4.9), 0);
        assert_eq!(q.pop_due(), None);
        assert_eq!(q.advance(5.0), 1);
        assert_eq!(q.oldest_due(), Some(5.0));
        assert_eq!(q.advance(5.2), 0, "counted once");
        assert_eq!(q.pop_due(), Some((5.0, 'a')));
        assert_eq!(q.pop_due(), None);
        assert_eq!(q.advance(7.0), 2);
        assert_eq!(q.backlog(), 2);
        let (_, b) = q.pop_due().unwrap();
        q.unpop(b);
        assert_eq!(q.backlog(), 2, "put back, still due and counted once");
        assert_eq!(q.advance(8.0), 0);
        assert_eq!(q.pop_due().map(|x| x.1), Some('b'));
        assert_eq!(q.pop_due(), Some((6.0, 'c')));
        assert!(q.is_empty());
    }

    #[test]
    fn recent_keeps_the_newest_items() {
        let mut r = Recent::new(3);
        assert_eq!(r.pick(7), None);
        for i in 0..5 {
            r.push(i);
        }
        assert_eq!(r.len(), 3);
        let mut seen: Vec<i32> = (0..3).map(|k| r.pick(k).unwrap()).collect();
        seen.sort();
        assert_eq!(seen, [2, 3, 4]);
    }

    #[test]
    fn pools_follow_the_rate() {
        assert_eq!(pool_size(100.0, 100), 5);
        assert_eq!(pool_size(11_000.0, 100), 48);
        assert_eq!(pool_size(100_000.0, 100), 64);
        assert_eq!(pool_size(11_000.0, 20), 20);
        assert_eq!(pool_size(0.0, 0), 1);
    }
}
