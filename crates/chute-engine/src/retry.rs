//! Waiting out a lost connection, a restarted server, a conflict or a lock
//! held too long: one classification of failures, one policy, one loop.
//!
//! What a failure means is decided once, here, from the error's kind and
//! SQLSTATE only, never from message text: [`classify`] reads a driver
//! error through the one table [`SQLSTATES`], and chute's own error types
//! answer the same question through the [`Classify`] trait. The answer is
//! a [`Fault`]: reconnect, try again, wait for a lock, or give up. A
//! failover, a pooler that cut a session and a lock held by a long query
//! are told apart in this one place.
//!
//! What is retried, with which pauses and for how long, is a [`Policy`]: its
//! named constructors are the shapes chute uses (a lost connection, a
//! batch's transaction, a DDL step's lock, a request's deadline). [`run!`]
//! runs an operation under a policy; the operation learns from its
//! [`Attempt`] which try it is and what failed before it, so it can make a
//! new connection first. Pauses are exponential and jittered, so many
//! workers cut off at the same moment do not all come back at the same
//! moment, and bounded by the policy's budget (`--retry-for` mostly).
//!
//! A load that is started again after it failed as a whole (a service's
//! lane) goes through a [`Supervisor`]: a budget of restarts in a window,
//! and a log line saying what is restarted and why.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// What a failure means for the work that failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Fault {
    /// The connection is gone, or the server is going away, not up yet or
    /// not the primary: the same work can succeed on a new connection.
    Reconnect,
    /// A conflict with other sessions that trying the transaction again
    /// clears (a serialization failure, a deadlock, no connection slot).
    Again,
    /// A lock was not granted within `lock_timeout`: chute gave way to the
    /// sessions queued behind it, and tries again after a pause.
    LockWait,
    /// Trying again would fail the same way (or do what someone stopped).
    Fatal,
}

impl Fault {
    fn bit(self) -> u8 {
        1 << self as u8
    }

    fn bits(faults: &[Fault]) -> u8 {
        faults.iter().fold(0, |bits, f| bits | f.bit())
    }
}

/// The one table of SQLSTATEs that are worth a retry, and how. A row of two
/// characters is a whole class; the first row that matches decides; a code
/// in no row is [`Fault::Fatal`].
pub const SQLSTATES: &[(&str, Fault)] = &[
    // connection_exception (08000, 08003, 08006, 08001, 08004, 08P01): the
    // session is gone; from postgres_fdw, a data node's is (the coordinator's
    // own connection is fine, and a new try finds the node once it is back).
    ("08", Fault::Reconnect),
    // admin_shutdown: a fast or smart shutdown, or pg_terminate_backend:
    // the server (or a standby promoted in its place) comes back.
    ("57P01", Fault::Reconnect),
    // crash_shutdown: another backend crashed; the server restarts.
    ("57P02", Fault::Reconnect),
    // cannot_connect_now: the server is starting up or shutting down.
    ("57P03", Fault::Reconnect),
    // idle_session_timeout: the server closed a session left idle (a pooled
    // connection): a new one does the work.
    ("57P05", Fault::Reconnect),
    // idle_in_transaction_session_timeout: the same, inside a transaction
    // (which the server rolled back): redone whole on a new connection.
    ("25P03", Fault::Reconnect),
    // read_only_sql_transaction: this server is a standby now (a failover
    // promoted another, or the connection reached one): find the primary
    // again. A new connection asks each host what it is (see
    // `connect::target`) and never writes to one in recovery; the retries
    // last as long as the policy's budget (`--retry-for`), no longer.
    ("25006", Fault::Reconnect),
    // serialization_failure: the transaction lost a race; PostgreSQL's own
    // advice is to run it again.
    ("40001", Fault::Again),
    // deadlock_detected: the server chose this transaction to roll back;
    // the other one goes on, and this one then gets its locks.
    ("40P01", Fault::Again),
    // too_many_connections: slots free up as other sessions end.
    ("53300", Fault::Again),
    // insufficient_resources, out_of_memory: the server is short now (often
    // of shared memory for locks, given back when others commit).
    ("53000", Fault::Again),
    ("53200", Fault::Again),
    // disk_full, configuration_limit_exceeded: an operator must act; a
    // retry for minutes would only hide it.
    ("53100", Fault::Fatal),
    ("53400", Fault::Fatal),
    // lock_not_available: chute's own `lock_timeout` (every DDL step, a
    // swap, a column added by `chute serve`) or one set for the role, gave
    // way to the sessions queued behind this one: wait, then try again.
    ("55P03", Fault::LockWait),
    // query_canceled: chute never cancels its own statements and turns
    // `statement_timeout` off in its sessions (`connect/own_settings.rs`), so
    // this is an operator's pg_cancel_backend: trying again would redo what
    // was stopped.
    ("57014", Fault::Fatal),
];

/// What the failure `e` of a statement or a connection means: by the
/// driver's kind when the server sent no SQLSTATE, else by [`SQLSTATES`].
///
/// No SQLSTATE: a closed connection or an I/O error on its socket is
/// [`Fault::Reconnect`], except the errors the client makes of an answer
/// that arrived whole (a row count or a value that is not what the caller
/// asked for), which a new connection repeats: [`Fault::Fatal`].
pub fn classify(e: &tokio_postgres::Error) -> Fault {
    if e.is_closed() {
        return Fault::Reconnect;
    }
    match e.code() {
        Some(c) => sqlstate_fault(c.code()),
        None if e.as_db_error().is_none() && !answer_misread(e) => Fault::Reconnect,
        None => Fault::Fatal,
    }
}

/// The row of [`SQLSTATES`] that `code` falls under.
pub fn sqlstate_fault(code: &str) -> Fault {
    SQLSTATES.iter().find(|(c, _)| if c.len() == 2 { code.starts_with(c) } else { code == *c }).map_or(Fault::Fatal, |(_, f)| *f)
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

/// The connection is gone or the server is going away or not up yet: the
/// same statement can work on a new connection ([`Fault::Reconnect`]).
pub fn connection_lost(e: &tokio_postgres::Error) -> bool {
    classify(e) == Fault::Reconnect
}

/// An error that knows what its failure means for a retry. chute's own
/// error types answer from the driver error they hold ([`classify`]) or
/// from their kind; a call site's own error type (a lock not free yet, a
/// full queue) says what it is.
pub trait Classify {
    fn fault(&self) -> Fault;

    /// A new connection may do what this failed to do.
    fn connection_lost(&self) -> bool {
        self.fault() == Fault::Reconnect
    }
}

impl Classify for tokio_postgres::Error {
    fn fault(&self) -> Fault {
        classify(self)
    }
}

impl Classify for crate::ConnectError {
    /// Unreachable or not accepting connections yet: a new attempt may
    /// work. Anything else (a password, a database, TLS) needs a person.
    fn fault(&self) -> Fault {
        match self {
            crate::ConnectError::Unreachable { .. } | crate::ConnectError::Unavailable { .. } => Fault::Reconnect,
            // A failover under way: one host is gone, another not promoted yet.
            crate::ConnectError::NoMatchingHost { in_flux: true, .. } => Fault::Reconnect,
            _ => Fault::Fatal,
        }
    }
}

/// What is retried, how long the pauses are and how long it goes on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// The first pause; each next one doubles, up to `max`.
    base: Duration,
    max: Duration,
    /// No new attempt starts after this long since the first one.
    retry_for: Duration,
    /// The faults retried (a bit each, see `Fault::bit`); any other ends the work at once.
    retries: u8,
}

impl Policy {
    /// Pauses from `base` doubling up to `max` (each between half and all
    /// of that), retrying the faults in `retries` until `retry_for` is over.
    pub fn new(base: Duration, max: Duration, retry_for: Duration, retries: &[Fault]) -> Policy {
        Policy { base, max, retry_for, retries: Fault::bits(retries) }
    }

    /// A lost connection or a server restarting (a connect, a load's
    /// set-up, its control connection, just-in-time partitions): from
    /// 100 ms up to 5 s, for `retry_for`.
    pub fn reconnect(retry_for: Duration) -> Policy {
        Policy::new(Duration::from_millis(100), Duration::from_secs(5), retry_for, &[Fault::Reconnect])
    }

    /// A batch's transaction (a COPY worker): a lost connection, a conflict
    /// or a lock not granted in time all roll it back whole, and it is done
    /// again on a new connection; pauses as [`Policy::reconnect`].
    pub fn transaction(retry_for: Duration) -> Policy {
        Policy::new(Duration::from_millis(100), Duration::from_secs(5), retry_for, &[Fault::Reconnect, Fault::Again, Fault::LockWait])
    }

    /// A DDL step under `lock_timeout` (the executor): lock waits and
    /// conflicts, with pauses of at least one `lock_timeout` (so writers
    /// queued behind the failed attempt get through) up to 10 s. A lost
    /// connection is left to the caller, which plans again.
    pub fn lock(lock_timeout: Duration, retry_for: Duration) -> Policy {
        Policy::new(lock_timeout.max(Duration::from_millis(50)), Duration::from_secs(10), retry_for, &[Fault::LockWait, Fault::Again])
    }

    /// A lock asked for over and over (an advisory lock tried, a swap's
    /// locks under a short `lock_timeout`): from 20 ms up to 1 s.
    pub fn lock_poll(retry_for: Duration) -> Policy {
        Policy::new(Duration::from_millis(20), Duration::from_secs(1), retry_for, &[Fault::LockWait, Fault::Again])
    }

    /// Within an HTTP request (`chute serve`): anything that may pass, until
    /// the request's deadline (`left` from now), from 100 ms up to 500 ms.
    pub fn request(left: Duration) -> Policy {
        Policy::new(Duration::from_millis(100), Duration::from_millis(500), left, &[Fault::Reconnect, Fault::Again, Fault::LockWait])
    }

    /// A catalog read that raced with DDL (a partition dropped while its
    /// tree was read shows an empty bound): read again, for 2 s at most.
    pub fn reread() -> Policy {
        Policy::new(Duration::from_millis(100), Duration::from_millis(400), Duration::from_secs(2), &[Fault::Again])
    }

    /// The same pauses and budget, retrying `faults` instead.
    pub fn retrying(mut self, faults: &[Fault]) -> Policy {
        self.retries = Fault::bits(faults);
        self
    }

    /// Whether this policy retries `fault` (so a failure of that kind that
    /// [`run!`] handed back had its budget spent).
    pub fn retries(&self, fault: Fault) -> bool {
        self.retries & fault.bit() != 0
    }

    /// Whether `e` ended [`run!`] because the budget was spent (not because
    /// it is a failure this policy does not retry).
    pub fn gave_up_on(&self, e: &impl Classify) -> bool {
        self.retries(e.fault())
    }

    pub fn retry_for(&self) -> Duration {
        self.retry_for
    }
}

/// Which try of an operation this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attempt {
    /// 1 for the first try.
    pub number: u32,
    /// What the try before this one failed with.
    pub after: Option<Fault>,
}

impl Attempt {
    pub fn is_retry(&self) -> bool {
        self.after.is_some()
    }

    /// The try before lost its connection: make a new one first.
    pub fn reconnect(&self) -> bool {
        self.after == Some(Fault::Reconnect)
    }
}

/// A retry about to happen, for a caller that reports each one.
#[derive(Debug)]
pub struct Retry<'a, E> {
    /// Failures so far (1 before the first retry).
    pub failures: u32,
    /// The pause before the next try.
    pub pause: Duration,
    pub fault: Fault,
    pub error: &'a E,
    /// Since the first try began.
    pub elapsed: Duration,
}

/// Runs an operation under a [`Policy`] until it succeeds, fails with a
/// fault the policy does not retry, or the policy's budget is spent (then
/// with the last failure): `retry::run!(&policy, |attempt| future)`, where
/// the future (an `async` block, made again for each try) gives a
/// `Result` whose error is [`Classify`]. `attempt` is the [`Attempt`].
/// `retry::run!(&policy, |attempt| future, on_retry = |r| expression)` also
/// runs the expression before each pause, with `r` the [`Retry`];
/// `…, stop = flag` (an `&AtomicBool`) ends the retries with the last
/// failure as soon as the flag is set, a pause included (a Ctrl-C need not
/// wait out the budget).
///
/// A macro rather than a function taking a closure: each try borrows what
/// the caller holds (`&mut` a connection, the load's progress) for as long
/// as it runs, which a closure returning a future cannot lend, and an
/// async closure's future cannot be proven `Send` inside a spawned task
/// on stable Rust. Expanded in place, the loop borrows like hand-written
/// code; its decisions (what is retried, the pauses, the budget) stay in
/// [`Tries`].
#[macro_export]
#[doc(hidden)]
macro_rules! retry_run {
    ($policy:expr, |$attempt:pat_param| $op:expr $(, on_retry = |$retry:pat_param| $report:expr)? $(, stop = $stop:expr)? $(,)?) => {{
        let mut tries = $crate::retry::Tries::new($policy);
        #[allow(unused_variables)]
        let stop: ::core::option::Option<&::std::sync::atomic::AtomicBool> = ::core::option::Option::None;
        $(let stop = ::core::option::Option::Some($stop);)?
        loop {
            let $attempt = tries.attempt();
            match $op.await {
                ::core::result::Result::Ok(value) => break ::core::result::Result::Ok(value),
                ::core::result::Result::Err(error) => match tries.failed(&error) {
                    ::core::option::Option::Some(retry) => {
                        $({
                            let $retry = &retry;
                            $report;
                        })?
                        if !$crate::retry::pause_unless(retry.pause, stop).await {
                            break ::core::result::Result::Err(error);
                        }
                    }
                    ::core::option::Option::None => break ::core::result::Result::Err(error),
                },
            }
        }
    }};
}

#[doc(inline)]
pub use crate::retry_run as run;

/// [`run!`] for work that blocks its thread (a Kafka producer's queue):
/// pauses with `std::thread::sleep`.
pub fn run_blocking<T, E: Classify>(policy: &Policy, mut op: impl FnMut(Attempt) -> Result<T, E>) -> Result<T, E> {
    let mut tries = Tries::new(policy);
    loop {
        match op(tries.attempt()) {
            Ok(v) => return Ok(v),
            Err(e) => match tries.failed(&e) {
                Some(retry) => std::thread::sleep(retry.pause),
                None => return Err(e),
            },
        }
    }
}

/// The state of one retried operation ([`run!`]): the next attempt, and
/// the pauses.
#[derive(Debug)]
pub struct Tries {
    policy: Policy,
    backoff: Backoff,
    attempt: Attempt,
}

impl Tries {
    pub fn new(policy: &Policy) -> Self {
        Tries {
            policy: *policy,
            backoff: Backoff::new(policy.base, policy.max, policy.retry_for),
            attempt: Attempt { number: 1, after: None },
        }
    }

    pub fn attempt(&self) -> Attempt {
        self.attempt
    }

    /// The retry after `e`, or `None` when it is not retried (a fault the
    /// policy does not retry, or its budget is spent).
    pub fn failed<'e, E: Classify>(&mut self, e: &'e E) -> Option<Retry<'e, E>> {
        let fault = e.fault();
        if !self.policy.retries(fault) {
            return None;
        }
        let pause = self.backoff.next_pause()?;
        self.attempt = Attempt { number: self.attempt.number + 1, after: Some(fault) };
        Some(Retry { failures: self.backoff.attempts(), pause, fault, error: e, elapsed: self.backoff.elapsed() })
    }
}

/// The pause before a retry ([`run!`]), cut short when `stop` is set:
/// `false` then (no retry follows).
pub async fn pause_unless(d: Duration, stop: Option<&std::sync::atomic::AtomicBool>) -> bool {
    let Some(stop) = stop else {
        tokio::time::sleep(d).await;
        return true;
    };
    let stopped = || stop.load(Ordering::Relaxed);
    let until = tokio::time::Instant::now() + d;
    // Looked at every 50 ms: a stop is heard within that, whatever the pause.
    while !stopped() && tokio::time::Instant::now() < until {
        tokio::time::sleep_until(until.min(tokio::time::Instant::now() + Duration::from_millis(50))).await;
    }
    !stopped()
}

/// Pauses between attempts: `base`, doubling up to `max`, each between half
/// and all of that (jitter), until `retry_for` has passed since the start.
#[derive(Debug, Clone)]
struct Backoff {
    began: Instant,
    attempt: u32,
    base: Duration,
    max: Duration,
    retry_for: Duration,
}

impl Backoff {
    fn new(base: Duration, max: Duration, retry_for: Duration) -> Self {
        Backoff { began: Instant::now(), attempt: 0, base, max, retry_for }
    }

    /// Attempts that failed so far.
    fn attempts(&self) -> u32 {
        self.attempt
    }

    /// How long this has been retrying.
    fn elapsed(&self) -> Duration {
        self.began.elapsed()
    }

    /// The pause before the next attempt, or `None` when `retry_for` is over.
    fn next_pause(&mut self) -> Option<Duration> {
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

/// Connects, retrying while the server is unreachable or not accepting
/// connections yet, for up to `retry_for`; `on_retry` hears of each failure.
pub async fn connect(
    opts: &crate::ConnectOptions,
    retry_for: Duration,
    mut on_retry: impl FnMut(&crate::ConnectError),
) -> Result<tokio_postgres::Client, crate::ConnectError> {
    run!(&Policy::reconnect(retry_for), |_| opts.connect(), on_retry = |r| on_retry(r.error))
}

/// How long a run of plan steps (`chute migrate`, `chute partition
/// maintain`) that lost its connection goes on reconnecting: `retry_for`
/// from the first loss, for as long as no step finishes in between. A run
/// that gets further after each reconnect gets a new budget for each loss,
/// one that does not stops when the first budget is spent.
#[derive(Debug, Clone, Copy)]
pub struct Outage {
    retry_for: Duration,
    /// When the connection was first lost since a step last finished.
    since: Option<Instant>,
}

impl Outage {
    pub fn new(retry_for: Duration) -> Outage {
        Outage { retry_for, since: None }
    }

    /// The connection was lost: how long is left to reconnect in, or
    /// `None` when the budget is spent.
    pub fn lost(&mut self) -> Option<Duration> {
        let since = *self.since.get_or_insert_with(Instant::now);
        self.retry_for.checked_sub(since.elapsed()).filter(|left| !left.is_zero())
    }

    /// A step finished: the next loss starts a new budget.
    pub fn progressed(&mut self) {
        self.since = None;
    }
}

/// [`connect`] that gives up as soon as `stop` is set (a stopped load
/// whose server is gone exits at once instead of after `retry_for`).
pub async fn connect_unless_stopped(
    opts: &crate::ConnectOptions,
    retry_for: Duration,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<tokio_postgres::Client, crate::ConnectError> {
    run!(&Policy::reconnect(retry_for), |_| opts.connect(), stop = stop)
}

/// Starts something again after it failed as a whole (a service's lane
/// whose load gave up), within a stated budget: at most `most` restarts in
/// any `within`. Pauses grow with the restarts in the window, from 0.5 s up
/// to 5 s. Each restart, and the end of the budget, is said in one line
/// naming what is restarted and why.
#[derive(Debug)]
pub struct Supervisor {
    /// What is restarted ("the load into public.m").
    what: String,
    most: u32,
    within: Duration,
    /// When the restarts still in the window happened.
    recent: VecDeque<Instant>,
}

impl Supervisor {
    pub fn new(what: impl Into<String>, most: u32, within: Duration) -> Supervisor {
        Supervisor { what: what.into(), most, within, recent: VecDeque::new() }
    }

    /// After a run ended with `why`: says so through `say`, pauses, and
    /// returns `true` to start it again; `false` (said too) when `most`
    /// restarts already happened within the window.
    pub async fn restart(&mut self, why: &str, say: impl FnOnce(&str)) -> bool {
        match self.next(Instant::now()) {
            Some(pause) => {
                say(&format!(
                    "{} failed: {why}; starting it again in {:.1}s (restart {} of at most {} within {})",
                    self.what,
                    pause.as_secs_f64(),
                    self.recent.len(),
                    self.most,
                    humanize(self.within)
                ));
                tokio::time::sleep(pause).await;
                true
            }
            None => {
                say(&format!(
                    "{} failed: {why}; not started again: it was started again {} times within {} already",
                    self.what,
                    self.most,
                    humanize(self.within)
                ));
                false
            }
        }
    }

    /// The pause before a restart at `now`, counted; `None` when the budget is spent.
    fn next(&mut self, now: Instant) -> Option<Duration> {
        while self.recent.front().is_some_and(|t| now.duration_since(*t) >= self.within) {
            self.recent.pop_front();
        }
        if self.recent.len() >= self.most as usize {
            return None;
        }
        let mut pauses = Backoff::new(Duration::from_millis(500), Duration::from_secs(5), Duration::MAX);
        pauses.attempt = self.recent.len() as u32;
        self.recent.push_back(now);
        pauses.next_pause()
    }
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        _ if s >= 3600 && s.is_multiple_of(3600) => format!("{}h", s / 3600),
        _ if s >= 60 && s.is_multiple_of(60) => format!("{}min", s / 60),
        _ => format!("{:?}", d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_of_the_table_classifies_as_written_and_the_rest_is_fatal() {
        for (code, fault) in SQLSTATES {
            let full = if code.len() == 2 { format!("{code}006") } else { (*code).to_owned() };
            assert_eq!(sqlstate_fault(&full), *fault, "{full}");
        }
        let expect = [
            ("08000", Fault::Reconnect),
            ("08003", Fault::Reconnect),
            ("08006", Fault::Reconnect),
            ("08001", Fault::Reconnect),
            ("08P01", Fault::Reconnect),
            ("57P01", Fault::Reconnect),
            ("57P02", Fault::Reconnect),
            ("57P03", Fault::Reconnect),
            ("57P05", Fault::Reconnect),
            ("25P03", Fault::Reconnect),
            ("25006", Fault::Reconnect),
            ("40001", Fault::Again),
            ("40P01", Fault::Again),
            ("53300", Fault::Again),
            ("53000", Fault::Again),
            ("53200", Fault::Again),
            ("53100", Fault::Fatal),
            ("53400", Fault::Fatal),
            ("55P03", Fault::LockWait),
            ("57014", Fault::Fatal),
            // Neither a class row nor a code row catches its neighbours.
            ("57P04", Fault::Fatal),
            ("25P02", Fault::Fatal),
            ("55006", Fault::Fatal),
            ("40003", Fault::Fatal),
            ("22012", Fault::Fatal),
            ("42P01", Fault::Fatal),
            ("23505", Fault::Fatal),
            ("XX000", Fault::Fatal),
        ];
        for (code, fault) in expect {
            assert_eq!(sqlstate_fault(code), fault, "{code}");
        }
        // Every row of the table is among the expectations above.
        for (code, _) in SQLSTATES {
            assert!(expect.iter().any(|(c, _)| c.starts_with(code)), "{code} has no expectation");
        }
    }

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

    #[test]
    fn the_named_policies_retry_what_they_say() {
        let minute = Duration::from_secs(60);
        let all = [Fault::Reconnect, Fault::Again, Fault::LockWait, Fault::Fatal];
        let retried = |p: &Policy| all.iter().copied().filter(|f| p.retries(*f)).collect::<Vec<_>>();
        assert_eq!(retried(&Policy::reconnect(minute)), [Fault::Reconnect]);
        assert_eq!(retried(&Policy::transaction(minute)), [Fault::Reconnect, Fault::Again, Fault::LockWait]);
        assert_eq!(retried(&Policy::lock(Duration::from_secs(1), minute)), [Fault::Again, Fault::LockWait]);
        assert_eq!(retried(&Policy::lock_poll(minute)), [Fault::Again, Fault::LockWait]);
        assert_eq!(retried(&Policy::request(minute)), [Fault::Reconnect, Fault::Again, Fault::LockWait]);
        assert_eq!(retried(&Policy::reread()), [Fault::Again]);
        assert_eq!(retried(&Policy::transaction(minute).retrying(&[Fault::Reconnect])), [Fault::Reconnect]);
        for p in [Policy::reconnect(minute), Policy::transaction(minute), Policy::lock(Duration::ZERO, minute)] {
            assert!(!p.retries(Fault::Fatal));
            assert_eq!(p.retry_for(), minute);
        }
        // A DDL step pauses at least one lock_timeout before its next try.
        assert_eq!(Policy::lock(Duration::from_secs(2), minute).base, Duration::from_secs(2));
        assert_eq!(Policy::lock(Duration::ZERO, minute).base, Duration::from_millis(50));
    }

    /// A failure of a test's own making.
    #[derive(Debug, PartialEq)]
    struct Failed(Fault);

    impl Classify for Failed {
        fn fault(&self) -> Fault {
            self.0
        }
    }

    fn quick(retry_for: Duration, retries: &[Fault]) -> Policy {
        Policy::new(Duration::from_millis(1), Duration::from_millis(4), retry_for, retries)
    }

    #[tokio::test]
    async fn run_tells_each_attempt_what_failed_before_and_reports_each_retry() {
        let mut seen = Vec::new();
        let mut reported = Vec::new();
        let faults = [Fault::Reconnect, Fault::Again, Fault::LockWait];
        let policy = quick(Duration::from_secs(60), &faults);
        let out = run!(
            &policy,
            |a| async {
                seen.push(a);
                match faults.get(a.number as usize - 1) {
                    Some(f) => Err(Failed(*f)),
                    None => Ok(a.number),
                }
            },
            on_retry = |r| reported.push((r.failures, r.fault, r.pause))
        );
        assert_eq!(out, Ok(4));
        let afters: Vec<Option<Fault>> = seen.iter().map(|a| a.after).collect();
        assert_eq!(afters, [None, Some(Fault::Reconnect), Some(Fault::Again), Some(Fault::LockWait)]);
        assert!(!seen[0].is_retry() && seen[1].reconnect() && !seen[2].reconnect());
        let failures: Vec<u32> = reported.iter().map(|r| r.0).collect();
        assert_eq!(failures, [1, 2, 3]);
        for (i, (_, fault, pause)) in reported.iter().enumerate() {
            assert_eq!(*fault, faults[i]);
            assert!(*pause <= Duration::from_millis(4), "{pause:?}");
        }
    }

    #[tokio::test]
    async fn run_gives_up_at_once_on_a_fault_it_does_not_retry() {
        let policy = quick(Duration::from_secs(60), &[Fault::Reconnect]);
        for fault in [Fault::Fatal, Fault::Again, Fault::LockWait] {
            let mut tries = 0;
            let out: Result<(), Failed> = run!(&policy, |_| async {
                tries += 1;
                Err(Failed(fault))
            });
            assert_eq!((out, tries), (Err(Failed(fault)), 1));
            assert!(!policy.gave_up_on(&Failed(fault)));
        }
    }

    #[tokio::test]
    async fn run_stops_with_the_last_failure_once_the_budget_is_spent() {
        let policy = quick(Duration::from_millis(60), &[Fault::Again]);
        let began = Instant::now();
        let mut tries = 0u32;
        let out: Result<(), Failed> = run!(&policy, |_| async {
            tries += 1;
            Err(Failed(Fault::Again))
        });
        let took = began.elapsed();
        assert_eq!(out, Err(Failed(Fault::Again)));
        assert!(policy.gave_up_on(&Failed(Fault::Again)));
        assert!(tries >= 3, "{tries} tries");
        assert!(took >= Duration::from_millis(60), "gave up after {took:?}");
        // No budget: one try, no pause.
        let mut once = 0;
        let out: Result<(), Failed> = run_blocking(&quick(Duration::ZERO, &[Fault::Again]), |_| {
            once += 1;
            Err(Failed(Fault::Again))
        });
        assert_eq!((out, once), (Err(Failed(Fault::Again)), 1));
    }

    #[test]
    fn run_blocking_retries_like_run() {
        let mut tries = 0;
        let out = run_blocking(&quick(Duration::from_secs(60), &[Fault::Again]), |a| {
            tries += 1;
            if a.number < 3 { Err(Failed(Fault::Again)) } else { Ok(a.after) }
        });
        assert_eq!((out, tries), (Ok(Some(Fault::Again)), 3));
    }

    #[test]
    fn a_supervisor_restarts_at_most_its_budget_within_its_window() {
        let mut s = Supervisor::new("the load into t", 3, Duration::from_secs(3600));
        let t0 = Instant::now();
        let pauses: Vec<Duration> = (0..3).map(|i| s.next(t0 + Duration::from_secs(i)).expect("within budget")).collect();
        for (i, p) in pauses.iter().enumerate() {
            let full = Duration::from_millis(500 << i);
            assert!(*p >= full / 2 && *p <= full, "restart {i}: {p:?}");
        }
        assert_eq!(s.next(t0 + Duration::from_secs(10)), None, "a fourth restart within the hour");
        assert_eq!(s.next(t0 + Duration::from_secs(1800)), None);
        // An hour after the first restart, it has left the window.
        let p = s.next(t0 + Duration::from_secs(3600)).expect("the window moved on");
        assert!(p >= Duration::from_millis(1000), "the pause still counts the two recent restarts: {p:?}");
        assert_eq!(humanize(Duration::from_secs(3600)), "1h");
        assert_eq!(humanize(Duration::from_secs(600)), "10min");
    }
}
