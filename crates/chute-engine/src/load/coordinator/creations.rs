//! How many partitions a load may create just in time: at most so many for
//! the rows of one chunk (a service's request: see `NewPartitions`) and so
//! many a minute. Rows that would need more are refused with why before
//! anything is created for them, so one request of scattered old rows
//! cannot make thousands of partitions (each a table the server keeps in
//! memory and plans over) while its client waits. A plain load has no
//! limit.

use std::collections::{HashSet, VecDeque};
use std::time::{Duration, Instant};

use super::super::NewPartitions;
use super::super::model::{PendingPart, Reject};
use super::Coordinator;
use crate::setting::Setting;

/// Where the interval starting at a key ends (`None`: past what the policy computes).
type IntervalEnd = Box<dyn Fn(i64) -> Option<i64>>;

/// The partitions created in the last minute, and the limits.
#[derive(Debug, Default)]
pub(crate) struct Creations {
    limits: Option<NewPartitions>,
    /// When each partition of the last minute was created.
    recent: VecDeque<Instant>,
}

impl Creations {
    pub(crate) fn new(limits: Option<NewPartitions>) -> Creations {
        Creations { limits, recent: VecDeque::new() }
    }

    /// `n` partitions were just created.
    pub(crate) fn created(&mut self, n: usize) {
        if self.limits.is_some() {
            let now = Instant::now();
            self.recent.extend(std::iter::repeat_n(now, n));
        }
    }

    /// Partitions created within the last minute.
    fn last_minute(&mut self) -> usize {
        while self.recent.front().is_some_and(|t| t.elapsed() >= Duration::from_secs(60)) {
            self.recent.pop_front();
        }
        self.recent.len()
    }
}

impl Coordinator {
    /// Refuses the rows of one chunk (`pending`: those whose partition does
    /// not exist) that would make the load create more partitions than its
    /// limits allow; the others go on waiting for theirs.
    pub(crate) fn limit_new_partitions(&mut self, pending: &mut Vec<PendingPart>) {
        let Some(limits) = self.creations.limits else { return };
        if pending.is_empty() {
            return;
        }
        self.refuse_out_of_window(pending, limits);
        let asked: HashSet<(u16, i64)> = self.waiting.iter().map(|p| (p.table, p.start)).collect();
        let new: HashSet<(u16, i64)> = pending.iter().map(|p| (p.table, p.start)).filter(|k| !asked.contains(k)).collect();
        if new.is_empty() {
            return;
        }
        let reason = if new.len() > limits.per_chunk {
            format!(
                "its request needs {} new partitions, more than the {} one request may make ({}): send old or scattered rows with chute load, or raise the limit",
                new.len(),
                limits.per_chunk,
                Setting::MaxNewPartitions
            )
        } else if self.creations.last_minute() + asked.len() + new.len() > limits.per_minute {
            format!(
                "its partition would be one more than the {} new partitions a minute the service makes ({}): send it again in a minute",
                limits.per_minute,
                Setting::MaxNewPartitions
            )
        } else {
            return;
        };
        self.refuse(pending, |p| new.contains(&(p.table, p.start)).then(|| reason.clone()));
    }

    /// Refuses rows of a time-keyed table whose partition would lie wholly
    /// before `max_age` ago, or start after `max_future` from now.
    fn refuse_out_of_window(&mut self, pending: &mut Vec<PendingPart>, limits: NewPartitions) {
        if limits.max_age.is_none() && limits.max_future.is_none() {
            return;
        }
        let now = crate::clock::now_micros();
        let micros = |d: Duration| i64::try_from(d.as_micros()).unwrap_or(i64::MAX);
        let oldest = limits.max_age.map(|a| now.saturating_sub(micros(a)));
        let newest = limits.max_future.map(|f| now.saturating_add(micros(f)));
        // Per table: where an interval that starts at a key ends (time keys only).
        let ends: Vec<Option<IntervalEnd>> = self
            .tables
            .iter()
            .map(|t| {
                let j = t.jit()?;
                let policy = j.policy.clone();
                let tz = policy.zone().ok()?;
                policy.key_type.is_time().then(|| Box::new(move |start| policy.interval.next(start, &tz).ok()) as IntervalEnd)
            })
            .collect();
        let too_old = format!(
            "it is older than {} ({}): its partition does not exist and none is made for rows that old",
            humanize(limits.max_age.unwrap_or_default()),
            Setting::MaxAge
        );
        let too_new = format!(
            "it is further ahead than {} of this server's clock ({}): its partition does not exist and none is made",
            humanize(limits.max_future.unwrap_or_default()),
            Setting::MaxFuture
        );
        self.refuse(pending, |p| {
            let end = ends[usize::from(p.table)].as_ref()?;
            if oldest.is_some_and(|o| end(p.start).is_some_and(|e| e <= o)) {
                return Some(too_old.clone());
            }
            newest.is_some_and(|n| p.start > n).then(|| too_new.clone())
        });
    }

    /// Refuses the rows `why` gives a reason for; the others stay.
    fn refuse(&mut self, pending: &mut Vec<PendingPart>, why: impl Fn(&PendingPart) -> Option<String>) {
        let mut kept = Vec::with_capacity(pending.len());
        for p in std::mem::take(pending) {
            let Some(reason) = why(&p) else {
                kept.push(p);
                continue;
            };
            self.budget.release(p.bytes());
            self.reject(Reject { input: p.range.0 as usize, line: p.line, raw: p.raw, reason, at: None, ack: p.ack, sqlstate: None });
        }
        *pending = kept;
    }
}

/// A duration as people write it: `90s`, `15min`, `3h`, `7d`.
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{}h", s / 3_600),
        s if s >= 60 && s % 60 == 0 => format!("{}min", s / 60),
        s => format!("{s}s"),
    }
}
