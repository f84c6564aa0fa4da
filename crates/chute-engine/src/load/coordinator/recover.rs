//! What a load does when the server goes away or the partition tree changes
//! under it: the set-up, the journal and the control connection's reads are
//! retried on a new connection under `--retry-for` (the COPY workers and
//! just-in-time creation retry their own statements the same way, with the
//! same [`Backoff`]), and rows whose leaf vanished before their COPY are
//! routed again against the tree as it is now.

use tokio_postgres::Client;

use super::super::format::Prepared;
use super::super::journal::{self, Committed};
use super::super::model::{Filed, Reject, Segment, Target, TargetMap};
use super::super::routing::Routed;
use super::super::routing::reread_tree;
use super::super::sink::BatchPart;
use super::super::{InputFormat, LoadError, LoadProgress, LoadSpec};
use super::Coordinator;
use crate::retry::{self, Backoff, Lost};

/// Connects and prepares the load (tables, columns, routing, policies),
/// starting over on a new connection while the server is unreachable or
/// restarting: preparing only reads, or creates with `IF NOT EXISTS`.
pub(crate) async fn set_up(spec: &LoadSpec, progress: &mut dyn LoadProgress) -> Result<(Client, Prepared), LoadError> {
    let mut backoff = Backoff::reconnect(spec.retry_for);
    loop {
        let attempt = async {
            let control = spec.target.connect().await?;
            let prepared = match (&spec.generator, spec.format) {
                (Some((workload, _)), _) => super::super::gen_source::prepare(spec, workload.clone(), &control, progress).await?,
                (None, InputFormat::Tsbs) => super::super::tsbs::prepare(spec, &control, progress).await?,
                (None, _) => super::super::format::prepare_single(spec, &control, progress).await?,
            };
            Ok::<_, LoadError>((control, prepared))
        };
        match attempt.await {
            Ok(v) => return Ok(v),
            Err(e) if e.connection_lost() => wait_or_fail(&mut backoff, e, spec, progress).await?,
            Err(e) => return Err(e),
        }
    }
}

/// Takes the load's lock (see `claim`), registers the load in the journal
/// and reads what earlier runs committed, reconnecting `control` when the
/// connection is lost.
///
/// The partition trees are read again once the lock is held: the ones read
/// at set-up may be older than the lock (another run of this load may have
/// been making partitions and committing rows into them until a moment ago,
/// while this run waited with `--wait` or just before it asked), and what
/// earlier runs committed is matched to the leaves of the tree this run
/// routes with.
pub(crate) async fn open_journal(
    spec: &LoadSpec,
    control: &mut Client,
    tables: &[std::sync::Arc<super::super::routing::Routing>],
    id: &str,
    table: &str,
    inputs: &str,
    owner: &str,
    progress: &mut dyn LoadProgress,
) -> Result<Committed, LoadError> {
    let mut backoff = Backoff::reconnect(spec.retry_for);
    loop {
        if control.is_closed() {
            *control = retry::connect(&spec.target, spec.retry_for, |_| {}).await?;
        }
        // The load's lock goes with the connection: taken on each new one.
        let opened = async {
            super::super::claim::acquire(control, id, spec.wait, progress).await?;
            for t in tables.iter().filter(|t| matches!(t.mode, super::super::routing::RouteMode::Tree(_))) {
                reread_tree(control, t).await?;
            }
            journal::open(control, id, table, inputs, spec.inputs.len().max(1), owner).await
        }
        .await;
        match opened {
            Ok(c) => return Ok(c),
            Err(e) if e.connection_lost() || control.is_closed() => {
                wait_or_fail(&mut backoff, e, spec, progress).await?;
                *control = retry::connect(&spec.target, spec.retry_for, |_| {}).await?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Says (once) that the server is being waited for, then pauses; the error
/// itself once `--retry-for` is over.
async fn wait_or_fail(backoff: &mut Backoff, e: LoadError, spec: &LoadSpec, progress: &mut dyn LoadProgress) -> Result<(), LoadError> {
    if backoff.attempts() == 0 {
        progress.notice(&format!("{e}; retrying for up to {:?} (--retry-for)", spec.retry_for));
    }
    if backoff.wait().await { Ok(()) } else { Err(e) }
}

impl Coordinator {
    /// The control connection, made again if the server dropped it.
    /// The load's lock went with the old connection: taken again on the new
    /// one, or this run stops if another run holds it now.
    pub(crate) async fn control(&mut self) -> Result<&Client, LoadError> {
        if self.control.is_closed() {
            self.control = retry::connect(&self.target, self.retry_for, |_| {}).await?;
            if let Some(id) = &self.load_id {
                super::super::claim::retake(&self.control, id).await?;
            }
        }
        Ok(&self.control)
    }

    /// Gives rows of new tag sets their tag ids (tsbs), on a new control
    /// connection if the server dropped it; rows done before a lost
    /// connection are not done again.
    pub(crate) async fn resolve_tags(&mut self, pending: Vec<super::super::model::PendingRow>) -> Result<Filed, LoadError> {
        let mut pending = std::collections::VecDeque::from(pending);
        let mut filed = Filed::default();
        let mut backoff = Backoff::reconnect(self.retry_for);
        loop {
            self.control().await?;
            let resolver = self.tags.as_mut().ok_or_else(|| LoadError::Setup("rows wait for tags, but no tag table is set up".into()))?;
            match resolver.resolve(&self.control, &mut pending, &self.tables, &mut filed).await {
                Ok(()) => return Ok(filed),
                Err(e) if e.connection_lost() && backoff.wait().await => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// Marks the load finished (or how it ended) in the journal.
    pub(crate) async fn close_journal(
        &mut self,
        id: &str,
        status: &str,
        through: &[super::super::CommittedThrough],
    ) -> Result<(), LoadError> {
        let mut backoff = Backoff::reconnect(self.retry_for);
        loop {
            let result = match self.control().await {
                Ok(c) => journal::close(c, id, status, through).await,
                Err(e) => Err(e),
            };
            match result {
                Err(e) if e.connection_lost() && backoff.wait().await => {}
                other => return other,
            }
        }
    }

    /// Reads the trees of the tables whose leaves vanished and routes those
    /// leaves' rows again: to the leaf that holds them now, or refused with
    /// the reason (past retention, most often: `partition maintain` dropped
    /// the leaf). A row whose partition is simply gone is refused rather than
    /// given a new one in this run; it is not journaled, so running the same
    /// command again loads it into a new partition. In a service's load it
    /// fails its acknowledgement instead (the caller is answered "retry",
    /// and its retry is routed afresh and makes the partition): a refusal
    /// would answer "rejected" to a row that is fine.
    pub(crate) async fn reroute_vanished(&mut self) -> Result<(), LoadError> {
        let parts = std::mem::take(&mut self.vanished);
        let mut tables: Vec<u16> = parts.iter().map(|p| p.table).collect();
        tables.sort_unstable();
        tables.dedup();
        for t in tables {
            let routing = self.tables[usize::from(t)].clone();
            let mut backoff = Backoff::reconnect(self.retry_for);
            loop {
                match reread_tree(self.control().await?, &routing).await {
                    Ok(()) => break,
                    Err(e) if e.connection_lost() && backoff.wait().await => {}
                    Err(e) => return Err(e),
                }
            }
        }
        for part in parts {
            self.notices.push(format!("{} no longer exists (dropped while loading?): routing its rows again", part.target_name));
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
                Routed::Missing { .. } if self.service && ack.is_some() => drop(ack),
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
                }),
                Routed::Reject(reason) => self.reject(Reject { input, line, raw, reason, at, ack }),
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
