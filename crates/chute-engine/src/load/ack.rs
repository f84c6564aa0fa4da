//! Commit acknowledgements: a source learns when every row of a piece of
//! its input is committed (or rejected, and on file), so a service can
//! answer its caller only then, and a file load knows which prefix of its
//! input is safe.
//!
//! The design is vector's end-to-end acknowledgements. The source makes an
//! [`AckRef`] for a chunk; the chunk's rows carry shares of it wherever they
//! go (segments, rows waiting for a partition, rejects, batches, rows routed
//! again after their leaf vanished). Each holder settles its share when its
//! rows are done: the sink when their batch commits, the reject writer when
//! their reject is written, the coordinator when it hands rows on to other
//! holders. When the last share is gone the acknowledgement fires once, on
//! the channel the source gave, with a [`Completion`].
//!
//! A share dropped without being settled (a batch that failed for good, rows
//! dropped when a load is stopped, a bug) marks the acknowledgement failed:
//! nothing is ever reported committed that was not. Shares are counted with
//! an `Arc`, so this costs one atomic increment per holder, never per row.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Where an acknowledged piece of input is: its input, its byte (or
/// sequence number) range and its lines, and a tag the source chose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckId {
    pub input: u32,
    pub start: u64,
    pub end: u64,
    /// The first line of the piece and the first line after it.
    pub first_line: u64,
    pub end_line: u64,
    /// The source's own name for the piece (a request id, a chunk number).
    pub tag: u64,
}

/// How an acknowledged piece ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckStatus {
    /// Every row is committed, rejected (and on file), or was committed by
    /// an earlier run.
    Committed,
    /// Some rows may not be committed: the load failed or was stopped
    /// before they were. Rows of it that were committed stay committed.
    Failed,
}

/// A row of the piece that was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AckReject {
    pub line: u64,
    pub reason: String,
}

/// What an acknowledgement reports when it fires.
#[derive(Debug, Clone)]
pub struct Completion {
    pub id: AckId,
    pub status: AckStatus,
    /// Rows committed by this run.
    pub rows_committed: u64,
    /// Rows an earlier run of the same load had committed (skipped now).
    pub rows_skipped: u64,
    pub rows_rejected: u64,
    /// Rejected rows, in the order they were found, when the
    /// acknowledgement was made to collect them (`AckRef::collecting`).
    pub rejects: Vec<AckReject>,
    /// Why the piece failed, when the holder that failed it knew
    /// ([`AckRef::fail`]): the error a batch of its rows failed with for good.
    pub failure: Option<String>,
}

struct Inner {
    id: AckId,
    failed: AtomicBool,
    committed: AtomicU64,
    skipped: AtomicU64,
    rejected: AtomicU64,
    /// `None`: rejects are counted, not kept (a file load's reject file
    /// has them; a million of them must not be held here).
    rejects: Option<Mutex<Vec<AckReject>>>,
    /// The first reason a holder failed its rows for.
    failure: Mutex<Option<String>>,
    notify: flume::Sender<Completion>,
}

impl Drop for Inner {
    // The last share is gone: fire, exactly once.
    fn drop(&mut self) {
        let rejects = self.rejects.take().map(|r| r.into_inner().unwrap_or_else(|p| p.into_inner())).unwrap_or_default();
        let status = if *self.failed.get_mut() { AckStatus::Failed } else { AckStatus::Committed };
        let _ = self.notify.send(Completion {
            id: self.id,
            status,
            rows_committed: *self.committed.get_mut(),
            rows_skipped: *self.skipped.get_mut(),
            rows_rejected: *self.rejected.get_mut(),
            rejects,
            failure: self.failure.get_mut().unwrap_or_else(|p| p.into_inner()).take(),
        });
    }
}

/// One holder's share of an acknowledgement. Not `Clone`: a new holder
/// takes a [`AckRef::share`], which it must settle in turn.
pub struct AckRef {
    inner: Arc<Inner>,
    settled: bool,
}

impl std::fmt::Debug for AckRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AckRef").field("id", &self.inner.id).field("settled", &self.settled).finish()
    }
}

impl AckRef {
    /// A new acknowledgement, reported on `notify` when its last share
    /// goes; rejects are counted.
    pub fn new(id: AckId, notify: flume::Sender<Completion>) -> AckRef {
        AckRef::make(id, notify, None)
    }

    /// [`AckRef::new`] that also keeps each reject's line and reason (for
    /// a caller that answers with them: keep the piece small).
    pub fn collecting(id: AckId, notify: flume::Sender<Completion>) -> AckRef {
        AckRef::make(id, notify, Some(Mutex::new(Vec::new())))
    }

    fn make(id: AckId, notify: flume::Sender<Completion>, rejects: Option<Mutex<Vec<AckReject>>>) -> AckRef {
        let inner = Inner {
            id,
            failed: AtomicBool::new(false),
            committed: AtomicU64::new(0),
            skipped: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            rejects,
            failure: Mutex::new(None),
            notify,
        };
        AckRef { inner: Arc::new(inner), settled: false }
    }

    pub fn id(&self) -> AckId {
        self.inner.id
    }

    /// A share for a new holder of some of the rows.
    pub fn share(&self) -> AckRef {
        AckRef { inner: self.inner.clone(), settled: false }
    }

    /// Whether two shares belong to one acknowledgement.
    pub(crate) fn same(&self, other: &AckRef) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// This holder's rows are done: `rows` of them committed.
    pub(crate) fn committed(mut self, rows: u64) {
        self.inner.committed.fetch_add(rows, Ordering::Relaxed);
        self.settled = true;
    }

    /// This holder's rows will not be committed, for `why`: the piece fails
    /// (as if the share were dropped), and its completion says why (the
    /// first reason given, if several holders fail).
    pub(crate) fn fail(self, why: &str) {
        let mut reason = self.inner.failure.lock().unwrap_or_else(|p| p.into_inner());
        reason.get_or_insert_with(|| why.to_owned());
    }

    /// This holder's rows are with other holders now, or there were none.
    pub fn settle(mut self) {
        self.settled = true;
    }

    /// Rows of the piece that an earlier run committed.
    pub(crate) fn skipped(&self, rows: u64) {
        if rows > 0 {
            self.inner.skipped.fetch_add(rows, Ordering::Relaxed);
        }
    }

    /// A row of the piece was rejected (settle the share holding it once
    /// the reject is on file).
    pub(crate) fn rejected(&self, line: u64, reason: &str) {
        self.inner.rejected.fetch_add(1, Ordering::Relaxed);
        if let Some(r) = &self.inner.rejects {
            r.lock().unwrap_or_else(|p| p.into_inner()).push(AckReject { line, reason: reason.to_owned() });
        }
    }
}

impl Drop for AckRef {
    fn drop(&mut self) {
        if !self.settled {
            self.inner.failed.store(true, Ordering::Relaxed);
        }
    }
}

/// The acknowledgements of a segment's rows: `(first row, ack)`, in row
/// order; rows from one piece of input are contiguous in a segment.
#[derive(Debug, Default)]
pub(crate) struct SegmentAcks(Vec<(u32, AckRef)>);

impl SegmentAcks {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Rows from `first_row` on belong to `ack`.
    pub(crate) fn push(&mut self, first_row: u32, ack: AckRef) {
        match self.0.last() {
            // The same piece continues: one share is enough.
            Some((_, last)) if last.same(&ack) => ack.settle(),
            _ => self.0.push((first_row, ack)),
        }
    }

    /// Appends another segment's acknowledgements, its rows starting at `rebase`.
    pub(crate) fn append(&mut self, other: SegmentAcks, rebase: u32) {
        for (first, ack) in other.0 {
            self.push(first + rebase, ack);
        }
    }

    /// The acknowledgement of row `i`.
    pub(crate) fn of(&self, i: usize) -> Option<&AckRef> {
        let k = self.0.partition_point(|(first, _)| (*first as usize) <= i);
        k.checked_sub(1).map(|k| &self.0[k].1)
    }

    /// Every row has another holder now (routed again, or rejected).
    pub(crate) fn handed_on(self) {
        self.0.into_iter().for_each(|(_, a)| a.settle());
    }

    /// None of the segment's rows will be committed, for `why`.
    pub(crate) fn fail(self, why: &str) {
        self.0.into_iter().for_each(|(_, a)| a.fail(why));
    }

    /// The segment's rows are committed, except `rejected` rows (by index,
    /// which the reject writer settles): each ack is told its count.
    pub(crate) fn commit(self, rows: usize, rejected: &[usize]) {
        let bounds: Vec<usize> = self.0.iter().skip(1).map(|(f, _)| *f as usize).chain([rows]).collect();
        for ((first, ack), end) in self.0.into_iter().zip(bounds) {
            let first = first as usize;
            let refused = rejected.iter().filter(|&&r| r >= first && r < end).count();
            ack.committed((end - first - refused) as u64);
        }
    }
}

/// How far each input is committed: a file load's acknowledgements, in.
/// A prefix of an input is committed once every piece in it is; a failed
/// piece stops its input's prefix where it starts.
#[derive(Debug, Default)]
pub struct CommittedPrefix {
    /// Per input: (bytes, next line) committed from its start, and the
    /// pieces done past a gap, by start.
    inputs: Vec<Prefix>,
}

#[derive(Debug, Default, Clone)]
struct Prefix {
    through: u64,
    line: u64,
    failed: bool,
    ahead: std::collections::BTreeMap<u64, (u64, u64)>,
}

impl CommittedPrefix {
    /// Prefixes for `inputs` inputs, each starting at byte 0, line 1.
    pub fn new(inputs: usize) -> CommittedPrefix {
        CommittedPrefix { inputs: vec![Prefix { line: 1, ..Prefix::default() }; inputs] }
    }

    /// Takes in a completion; returns whether a prefix moved.
    pub fn absorb(&mut self, c: &Completion) -> bool {
        let Some(p) = self.inputs.get_mut(c.id.input as usize) else { return false };
        if c.status == AckStatus::Failed {
            p.failed = true;
            return false;
        }
        if p.failed || c.id.start < p.through {
            return false;
        }
        p.ahead.insert(c.id.start, (c.id.end, c.id.end_line));
        let mut moved = false;
        while let Some((end, line)) = p.ahead.remove(&p.through) {
            p.through = end;
            p.line = line;
            moved = true;
        }
        moved
    }

    /// Bytes committed from the start of every input together.
    pub fn bytes(&self) -> u64 {
        self.inputs.iter().map(|p| p.through).sum()
    }

    /// Per input: the first line and byte not known to be committed.
    pub fn through(&self) -> Vec<(u64, u64)> {
        self.inputs.iter().map(|p| (p.line, p.through)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ack(tag: u64, start: u64, end: u64) -> (AckRef, flume::Receiver<Completion>) {
        let (tx, rx) = flume::unbounded();
        let id = AckId { input: 0, start, end, first_line: start + 1, end_line: end + 1, tag };
        (AckRef::collecting(id, tx), rx)
    }

    #[test]
    fn fires_once_when_the_last_share_is_settled_not_before() {
        let (a, rx) = ack(7, 0, 10);
        let (s1, s2) = (a.share(), a.share());
        a.settle();
        s1.committed(4);
        assert!(rx.try_recv().is_err(), "a share still holds rows");
        s2.committed(6);
        let c = rx.try_recv().expect("fired");
        assert_eq!((c.id.tag, c.status, c.rows_committed), (7, AckStatus::Committed, 10));
        assert!(rx.try_recv().is_err(), "fires once");
    }

    #[test]
    fn a_share_dropped_without_settling_fails_the_acknowledgement() {
        let (a, rx) = ack(1, 0, 10);
        let lost = a.share();
        a.committed(5);
        drop(lost);
        assert_eq!(rx.try_recv().unwrap().status, AckStatus::Failed);
    }

    #[test]
    fn a_failed_share_says_why_and_the_first_reason_wins() {
        let (a, rx) = ack(1, 0, 10);
        let (s1, s2) = (a.share(), a.share());
        a.committed(2);
        s1.fail("could not extend file: No space left on device (SQLSTATE 53100)");
        s2.fail("a later reason");
        let c = rx.try_recv().unwrap();
        assert_eq!(c.status, AckStatus::Failed);
        assert_eq!(c.failure.as_deref(), Some("could not extend file: No space left on device (SQLSTATE 53100)"));
        let (plain, rx) = ack(2, 0, 10);
        drop(plain);
        assert_eq!(rx.try_recv().unwrap().failure, None, "a share merely dropped gives no reason");
    }

    #[test]
    fn rejects_and_skipped_rows_are_reported() {
        let (a, rx) = ack(1, 0, 10);
        a.rejected(3, "bad value");
        a.skipped(2);
        a.committed(7);
        let c = rx.try_recv().unwrap();
        assert_eq!(c.status, AckStatus::Committed);
        assert_eq!((c.rows_committed, c.rows_skipped), (7, 2));
        assert_eq!(c.rejects, vec![AckReject { line: 3, reason: "bad value".into() }]);
        assert_eq!(c.rows_rejected, 1);
        // Not collecting: counted only.
        let (tx, rx) = flume::unbounded();
        let a = AckRef::new(AckId::default(), tx);
        a.rejected(3, "bad value");
        a.committed(1);
        let c = rx.try_recv().unwrap();
        assert_eq!((c.rows_rejected, c.rejects.len()), (1, 0));
    }

    #[test]
    fn a_segment_tells_each_acknowledgement_its_own_rows() {
        let (a, rx_a) = ack(1, 0, 10);
        let (b, rx_b) = ack(2, 10, 20);
        let mut acks = SegmentAcks::default();
        // Rows 0..3 from a (pushed twice: one share is kept), 3..5 from b.
        acks.push(0, a.share());
        acks.push(2, a.share());
        acks.push(3, b.share());
        a.settle();
        b.settle();
        assert!(acks.of(1).unwrap().same(acks.of(0).unwrap()));
        assert_eq!(acks.of(4).unwrap().id().tag, 2);
        // Row 4 (b's) was rejected: b committed one row.
        acks.commit(5, &[4]);
        assert_eq!(rx_a.try_recv().unwrap().rows_committed, 3);
        assert_eq!(rx_b.try_recv().unwrap().rows_committed, 1);
    }

    #[test]
    fn appended_acknowledgements_keep_their_rows() {
        let (a, rx_a) = ack(1, 0, 10);
        let (b, rx_b) = ack(2, 10, 20);
        let (mut one, mut two) = (SegmentAcks::default(), SegmentAcks::default());
        one.push(0, a.share());
        two.push(0, b.share());
        a.settle();
        b.settle();
        // `one` holds 2 rows; `two`'s rows follow them.
        one.append(two, 2);
        assert_eq!(one.of(1).unwrap().id().tag, 1);
        assert_eq!(one.of(2).unwrap().id().tag, 2);
        one.commit(5, &[]);
        assert_eq!(rx_a.try_recv().unwrap().rows_committed, 2);
        assert_eq!(rx_b.try_recv().unwrap().rows_committed, 3);
    }

    fn done(input: u32, start: u64, end: u64, status: AckStatus) -> Completion {
        let id = AckId { input, start, end, first_line: start / 10 + 1, end_line: end / 10 + 1, tag: 0 };
        Completion { id, status, rows_committed: 0, rows_skipped: 0, rows_rejected: 0, rejects: vec![], failure: None }
    }

    #[test]
    fn the_committed_prefix_waits_for_gaps_and_stops_at_a_failure() {
        let mut p = CommittedPrefix::new(2);
        assert!(!p.absorb(&done(0, 100, 200, AckStatus::Committed)), "a gap before it");
        assert_eq!(p.through()[0], (1, 0));
        assert!(p.absorb(&done(0, 0, 100, AckStatus::Committed)));
        assert_eq!(p.through()[0], (21, 200));
        p.absorb(&done(1, 0, 50, AckStatus::Committed));
        assert_eq!(p.bytes(), 250);
        // A failed piece: nothing after it counts, even when it completes.
        p.absorb(&done(0, 200, 300, AckStatus::Failed));
        p.absorb(&done(0, 300, 400, AckStatus::Committed));
        assert_eq!(p.through()[0], (21, 200));
    }
}
