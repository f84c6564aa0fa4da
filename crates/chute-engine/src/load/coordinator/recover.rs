//! What the coordinator does when the server goes away or the partition
//! tree changes under it while rows flow: the control connection's reads
//! are retried on a new connection within `retry_for` (the sinks and
//! just-in-time creation retry their own statements the same way, through
//! `retry::run`), and rows whose leaf vanished before their COPY are
//! routed again against the tree as it is now.

use super::super::LoadError;
use super::super::input::Delivery;
use super::super::model::{Filed, Reject, Segment, Target, TargetMap};
use super::super::routing::Routed;
use super::super::routing::reread_tree;
use super::super::sink::BatchPart;
use super::Coordinator;
use crate::retry::{self, Policy};

impl Coordinator {
    /// Gives rows of new tag sets their tag ids (tsbs), on a new control
    /// connection if the server dropped it; rows done before a lost
    /// connection are not done again.
    pub(crate) async fn resolve_tags(&mut self, pending: Vec<super::super::model::PendingRow>) -> Result<Filed, LoadError> {
        let mut pending = std::collections::VecDeque::from(pending);
        let mut filed = Filed::default();
        retry::run!(&Policy::reconnect(self.retry_for), |_| async {
            let control = self.control.client().await?;
            let resolver = self.tags.as_mut().ok_or_else(|| LoadError::Setup("rows wait for tags, but no tag table is set up".into()))?;
            resolver.resolve(control, &mut pending, &self.tables, &mut filed).await
        })?;
        Ok(filed)
    }

    /// Reads the trees of the tables whose leaves vanished and routes those
    /// leaves' rows again: to the leaf that holds them now, or refused with
    /// the reason (past retention, most often: `partition maintain` dropped
    /// the leaf). A row whose partition is simply gone is refused rather than
    /// given a new one in this run; it is not journaled, so running the same
    /// command again loads it into a new partition. In a service's load it
    /// fails its acknowledgement instead (the caller is answered "retry",
    /// and its retry is routed afresh and makes the partition): a refusal
    /// would answer "rejected" to a row that is fine. So it does for shared
    /// inputs (Kafka): the positions stop before the row, and the next run
    /// reads it again (after a failover, the partitions the old server made
    /// and took with it are vanished leaves, and their rows are fine too).
    pub(crate) async fn reroute_vanished(&mut self) -> Result<(), LoadError> {
        let parts = std::mem::take(&mut self.vanished);
        let mut tables: Vec<u16> = parts.iter().map(|p| p.table).collect();
        tables.sort_unstable();
        tables.dedup();
        // A backfilled leaf stays routable after its backfill (rows of its
        // interval go to it before the tree is read again); once it is gone
        // its rows must follow the tree, or they would come back here for ever.
        for part in &parts {
            self.tables[usize::from(part.table)].forget_virtual(&part.target_name);
        }
        for t in tables {
            let routing = self.tables[usize::from(t)].clone();
            retry::run!(&Policy::reconnect(self.retry_for), |_| async { reread_tree(self.control.client().await?, &routing).await })?;
        }
        for part in parts {
            self.notices.push(format!(
                "{} no longer exists (dropped while loading, or made on a server lost in a failover): routing its rows again",
                part.target_name
            ));
            if self.batch_tx.is_none() {
                continue; // Stopping: a resume routes them again.
            }
            self.reroute(part).await;
        }
        Ok(())
    }

    pub(crate) async fn reroute(&mut self, part: BatchPart) {
        let routing = self.tables[usize::from(part.table)].clone();
        let mut ctx = routing.ctx();
        let mut segments: TargetMap<Segment> = TargetMap::default();
        let seg = &part.seg;
        for i in 0..seg.row_ends.len() {
            let from = if i == 0 { 0 } else { seg.row_ends[i - 1] as usize };
            let row = &part.body[from..seg.row_ends[i] as usize];
            let (raw, at) = seg.record(i);
            let (line, input) = (seg.lines[i], usize::from(seg.inputs[i]));
            let ack = seg.acks.of(i).map(|a| a.share());
            match routing.route(&mut ctx, row) {
                Routed::To(leaf) => {
                    let into = segments.entry(Target { table: part.table, leaf, text: false }).or_default();
                    if let Some(ack) = ack {
                        into.acks.push(into.row_ends.len() as u32, ack);
                    }
                    match at {
                        Some((offset, len)) => into.push_ref(row, offset, len as usize, line, input),
                        None => into.push(row, &raw, line, input),
                    }
                }
                // Its share is dropped unsettled: the acknowledgement fails.
                Routed::Missing { .. } if (self.delivery == Delivery::Callers || self.rereads_unacknowledged) && ack.is_some() => drop(ack),
                Routed::Missing { .. } => self.reject(Reject {
                    input,
                    line,
                    raw,
                    at,
                    reason: format!(
                        "its partition {} was dropped while the load ran (SQLSTATE 42P01): run the same command again to load it into a new partition",
                        part.target_name
                    ),
                    ack,
                    sqlstate: Some("42P01".into()),
                }),
                Routed::Reject(reason) => self.reject(Reject { input, line, raw, reason, at, ack, sqlstate: None }),
            }
        }
        // The part held every row of its ranges for its leaf; the rows that
        // are not refused all went to the leaf holding that interval now.
        for s in segments.values_mut() {
            s.ranges = seg.ranges.clone();
        }
        // Every row has a new holder: the part's own shares are done.
        part.seg.acks.handed_on();
        let budget = segments.values().map(Segment::bytes).sum();
        self.budget.take(budget);
        self.accumulate(segments, budget).await;
    }
}
