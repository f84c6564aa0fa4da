//! The coordinator: one task that takes what the parse threads made of each
//! chunk, writes rejects, holds rows until their partition exists (made just
//! in time, and ahead of sorted input), gathers rows per target into batches
//! and hands them to the sink, then counts what the sink committed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;

pub(crate) use run::{CoordinatorReport, Wiring};

use super::budget::Budget;
use super::control::Control;
use super::input::Delivery;
use super::model::{ChunkOut, Filed, PendingPart, Reject, Segment, Target, TargetMap};
use super::rejects::RejectWriter;
use super::routing::{JitCreator, Routed, Routing};
use super::sink::{Batch, BatchPart, CopyOutcome};
use super::{LoadError, LoadStats};

pub(crate) mod backfill;
mod creations;
mod recover;
mod run;
#[cfg(test)]
mod tests;

/// Rows waiting for a target to fill a batch.
#[derive(Default)]
pub(crate) struct Accum {
    seg: Segment,
    budget: usize,
    /// When its first row arrived (for --flush-every).
    since: Option<Instant>,
}

/// The load's one coordinating task: between the parse threads and the sink.
///
/// Contract. Made once per load (`new`) from its [`Parts`] and driven by
/// [`Coordinator::run`] on the load's tokio runtime, which returns when the
/// load is over. It consumes what the parse threads made of each chunk
/// (`ChunkOut`, in any order), the sink's answers (`CopyOutcome`: every
/// batch it sent is answered once, loaded or failed, and backfills report
/// how they ended), and the source's acknowledgements (how far each input
/// is committed). It delivers batches to the sink: rows of one target (a
/// leaf, or the parent) gathered up to `batch_bytes`/`batch_rows`, each
/// holding whole chunks' rows for its target (what the journal's ranges
/// need), sent on a bounded queue so a slow server slows it down. It writes
/// rejects, holds rows whose partition does not exist until it is made
/// just in time (or opens a backfill for it), makes partitions ahead of
/// sorted input, and routes again rows whose leaf vanished.
///
/// Nothing else runs inside it concurrently: just-in-time creation runs as
/// a task of its own and reports back on a channel the coordinator owns;
/// the sink's workers and backfill sessions share only the budget and the
/// reject file with it. It gives budget back for rows it drops or rejects,
/// and every row it holds keeps its share of its chunk's acknowledgement
/// until it is handed on.
///
/// Shutdown: once the parse threads are done and no row waits for a
/// partition, it sends what is left and closes the sink's queue; it
/// returns when the sink's answer channel closes (every worker and session
/// has ended). A stop (`Wiring::stop`) drops what is not sent yet (a resume
/// makes it again), halts the reader and the parse threads and lets the
/// batches in flight finish. A failure (a batch that failed for good, a
/// creation that failed, the reject limit) halts the input the same way;
/// the errors are gathered, the first deciding how the load ends, and
/// returned in the report, never raised from inside the loop.
pub(crate) struct Coordinator {
    tables: Vec<Arc<Routing>>,
    batching: Batching,
    accum: TargetMap<Accum>,
    accum_bytes: usize,
    /// The sink's queue; `None` once it is closed (the end of the load, or a stop).
    batch_tx: Option<flume::Sender<Batch>>,
    budget: Arc<Budget>,
    stats: LoadStats,
    touched: HashSet<QualifiedName>,
    /// Shared with the sink's workers, who write the rows the server refuses.
    rejects: Arc<std::sync::Mutex<RejectWriter>>,
    limit_hit: bool,
    tags: Option<super::kind::tsbs::tags::TagResolver>,
    control: Control,
    /// The partition creator; `None` while a creation task has it.
    jit: Option<JitCreator>,
    /// Where creation tasks report, and where the loop hears them.
    jit_done: flume::Sender<JitDone>,
    jit_rx: flume::Receiver<JitDone>,
    /// Rows whose partition is being (or is about to be) created.
    waiting: Vec<PendingPart>,
    /// Since when rows wait for a creation, and when the user was last
    /// told (see `tell_of_long_waits`).
    waiting_since: Option<(Instant, Instant)>,
    /// Partitions to make ahead of the rows: the policy's premake intervals
    /// past the newest one rows needed or reached, made one at a time while
    /// no row waits, so sorted input finds the next interval ready instead
    /// of waiting for it (each creation takes a few hundred milliseconds on
    /// a busy server: an hour of rows at a million rows a second).
    ahead: Vec<(u16, i64)>,
    /// Starts already asked for ahead (not asked again).
    made_ahead: HashSet<(u16, i64)>,
    /// Partitions made ahead that no batch has gone to yet: the first batch
    /// into one moves the frontier on.
    ahead_leaves: HashMap<QualifiedName, (u16, i64)>,
    /// Every chunk is in: nothing more is made ahead.
    input_done: bool,
    /// Rows keep their records by position (see `Filed::by_ref`).
    by_ref: bool,
    target: crate::ConnectOptions,
    /// Makes batch ids unique across runs.
    batch_prefix: String,
    /// Messages for the user, shown by the loop.
    notices: Vec<String>,
    /// How long lost connections are retried.
    retry_for: Duration,
    /// Batches sent to the workers and not answered yet.
    in_flight: usize,
    /// Batch parts whose leaf vanished, waiting to be routed again.
    vanished: Vec<BatchPart>,
    /// Who answers for rows that cannot be delivered (see `reroute`).
    delivery: Delivery,
    /// The inputs are shared (Kafka partitions): a row whose acknowledgement
    /// fails is read again by a later run, from the positions the server holds.
    rereads_unacknowledged: bool,
    /// Partitions filled before they are attached (see `backfill`).
    backfill: backfill::Backfills,
    /// Ordered writers (upserts): numbers the batches of each leaf (see `write::merge::Turns`).
    turns: super::write::merge::TurnCounter,
    /// How many partitions the load may create, and how many it did lately.
    creations: creations::Creations,
}

/// How rows are gathered into batches and when they leave.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Batching {
    pub batch_bytes: usize,
    /// A batch also leaves at this many rows.
    pub batch_rows: usize,
    /// The load stops once more rows than this were rejected.
    pub max_rejects: Option<u64>,
    /// Rows that have waited this long leave in a partial batch (live streams).
    pub flush_every: Option<Duration>,
    /// Send what is gathered whenever a worker is idle (group commit).
    pub flush_when_idle: bool,
    /// The sink's workers (for `flush_when_idle`).
    pub workers: usize,
}

/// What a coordinator is made of.
pub(crate) struct Parts {
    pub tables: Vec<Arc<Routing>>,
    pub control: Control,
    pub target: crate::ConnectOptions,
    pub retry_for: Duration,
    pub budget: Arc<Budget>,
    pub rejects: Arc<std::sync::Mutex<RejectWriter>>,
    pub tags: Option<super::kind::tsbs::tags::TagResolver>,
    pub by_ref: bool,
    pub delivery: Delivery,
    /// The sink's batch queue.
    pub batches: flume::Sender<Batch>,
    pub backfill: backfill::Backfills,
    pub batching: Batching,
    pub batch_prefix: String,
    pub bytes_total: Option<u64>,
    /// Limits on the partitions made just in time (`None`: as many as rows need).
    pub new_partitions: Option<super::NewPartitions>,
}

impl Coordinator {
    pub(crate) fn new(p: Parts) -> Self {
        let (jit_done, jit_rx) = flume::unbounded();
        let mut backfill = p.backfill;
        let upsert = p.tables.iter().any(|t| t.writer.ordered()).then(Default::default);
        if let Some(every) = p.batching.flush_every {
            backfill.long_idle = every;
        }
        let rereads_unacknowledged = p.control.is_shared();
        Coordinator {
            tables: p.tables,
            batching: p.batching,
            accum: TargetMap::default(),
            accum_bytes: 0,
            batch_tx: Some(p.batches),
            budget: p.budget,
            stats: LoadStats { bytes_total: p.bytes_total, upsert, ..LoadStats::default() },
            touched: HashSet::new(),
            rejects: p.rejects,
            limit_hit: false,
            tags: p.tags,
            control: p.control,
            jit: Some(JitCreator::new(p.retry_for)),
            jit_done,
            jit_rx,
            waiting: Vec::new(),
            waiting_since: None,
            ahead: Vec::new(),
            made_ahead: HashSet::new(),
            ahead_leaves: HashMap::new(),
            input_done: false,
            by_ref: p.by_ref,
            target: p.target,
            batch_prefix: p.batch_prefix,
            notices: Vec::new(),
            retry_for: p.retry_for,
            in_flight: 0,
            vanished: Vec::new(),
            delivery: p.delivery,
            rereads_unacknowledged,
            backfill,
            turns: Default::default(),
            creations: creations::Creations::new(p.new_partitions),
        }
    }
}

/// One segment per target (a chunk may have produced several).
fn combine(segments: Vec<(Target, Segment)>) -> TargetMap<Segment> {
    let mut out: TargetMap<Segment> = TargetMap::with_capacity_and_hasher(segments.len(), Default::default());
    for (t, mut s) in segments {
        match out.get_mut(&t) {
            Some(have) => append(have, &mut s),
            None => {
                out.insert(t, s);
            }
        }
    }
    out
}

/// Moves `seg`'s rows (and their acknowledgements) to the end of `into`.
fn append(into: &mut Segment, seg: &mut Segment) {
    if into.row_ends.is_empty() && into.ranges.is_empty() && into.acks.is_empty() && into.data.is_empty() {
        // Nothing to add to: the segment is taken whole, without a copy.
        std::mem::swap(into, seg);
        return;
    }
    into.acks.append(std::mem::take(&mut seg.acks), into.row_ends.len() as u32);
    let rebase_data = into.data.len() as u32;
    let rebase_raw = into.raw_ends.last().copied().unwrap_or(0);
    into.data.extend_from_slice(&seg.data);
    into.row_ends.extend(seg.row_ends.iter().map(|e| e + rebase_data));
    into.raw.extend_from_slice(&seg.raw);
    into.raw_ends.extend(seg.raw_ends.iter().map(|e| e + rebase_raw));
    into.offsets.extend_from_slice(&seg.offsets);
    into.lines.extend_from_slice(&seg.lines);
    into.inputs.extend_from_slice(&seg.inputs);
    for r in &seg.ranges {
        super::journal::push_range(&mut into.ranges, *r);
    }
}

/// Gives rows the coordinator resolved for a chunk (tag ids, server-cast
/// keys) shares of the chunk's acknowledgement.
fn share_ack(ack: Option<&super::ack::AckRef>, filed: &mut Filed) {
    if let Some(ack) = ack {
        ack.skipped(filed.skipped);
        super::model::attach_filed(ack, filed.segments.iter_mut().map(|(_, s)| s), &mut filed.pending, &mut filed.rejects);
    }
}

/// (input, start, end): a chunk's place in its input.
type ChunkRange = (u32, u64, u64);

pub(crate) type JitDone = (JitCreator, Result<JitMade, LoadError>);

/// What one creation task made.
#[derive(Default)]
pub(crate) struct JitMade {
    created: usize,
    /// (table, start) rows asked for: rows still without a partition there are refused.
    asked: Vec<(u16, i64)>,
    /// Partitions made ahead of the rows, by name, with their interval.
    ahead: Vec<(QualifiedName, u16, i64)>,
}

/// Intervals made ahead of the rows at most, whatever the policy's premake.
const MAX_AHEAD: u32 = 8;

impl Coordinator {
    pub(crate) async fn merge(&mut self, mut out: ChunkOut) -> Result<(), LoadError> {
        for r in std::mem::take(&mut out.rejects) {
            self.reject(r);
        }
        // On file before any of this chunk's rows can commit (a resume skips them).
        self.rejects.lock().expect("reject file lock").flush_pending()?;
        self.budget.release(out.reject_bytes);
        self.stats.rows_skipped += out.skipped;
        if !out.pending_tags.is_empty() {
            let mut filed = self.resolve_tags(std::mem::take(&mut out.pending_tags)).await?;
            share_ack(out.ack.as_ref(), &mut filed);
            out.pending_parts.extend(filed.pending);
            for r in filed.rejects {
                self.reject(r);
            }
            self.stats.rows_skipped += filed.skipped;
            for (t, mut seg) in filed.segments {
                seg.ranges.push(out.range);
                out.segments.push((t, seg));
            }
        }
        if !out.server_keys.is_empty() {
            let mut filed = Filed::default();
            super::text_route::resolve(self.control.current(), &self.tables[0], std::mem::take(&mut out.server_keys), &mut filed).await;
            share_ack(out.ack.as_ref(), &mut filed);
            out.pending_parts.extend(filed.pending);
            for r in filed.rejects {
                self.reject(r);
            }
            self.rejects.lock().expect("reject file lock").flush_pending()?;
            self.stats.rows_skipped += filed.skipped;
            for (t, mut seg) in filed.segments {
                seg.ranges.push(out.range);
                out.segments.push((t, seg));
            }
        }
        // Rows waiting for a partition carry their own share of the budget.
        let waiting_bytes: usize = out.pending_parts.iter().map(PendingPart::bytes).sum();
        let before = self.stats.rows_rejected;
        self.limit_new_partitions(&mut out.pending_parts);
        if self.stats.rows_rejected > before {
            self.rejects.lock().expect("reject file lock").flush_pending()?;
        }
        self.waiting.extend(std::mem::take(&mut out.pending_parts));
        let segment_budget = out.budget.saturating_sub(waiting_bytes + out.reject_bytes);
        self.accumulate(combine(out.segments), segment_budget).await;
        self.backfill_waiting().await?;
        self.start_jit();
        // Every row of the chunk has a holder of its own now.
        if let Some(ack) = out.ack.take() {
            ack.settle();
        }
        Ok(())
    }

    /// Appends a chunk's rows to the accumulators, all of one target at
    /// once, then sends the accumulators that are full.
    pub(crate) async fn accumulate(&mut self, segments: TargetMap<Segment>, budget: usize) {
        if segments.is_empty() {
            self.budget.release(budget);
            return;
        }
        let per_segment = budget / segments.len();
        self.budget.release(budget - per_segment * segments.len());
        let mut full = Vec::new();
        for (target, mut seg) in segments {
            let a = self.accum.entry(target).or_default();
            a.since.get_or_insert_with(Instant::now);
            self.accum_bytes += seg.data.len();
            if !a.seg.row_ends.is_empty() {
                // Room for a whole batch at once: one copy as it grows, not one per doubling.
                a.seg.reserve_for(self.batching.batch_bytes.max(a.seg.data.len() + seg.data.len()));
            }
            append(&mut a.seg, &mut seg);
            a.budget += per_segment;
            if a.seg.data.len() >= self.batching.batch_bytes || a.seg.row_ends.len() >= self.batching.batch_rows {
                full.push(target);
            }
        }
        for t in full {
            self.dispatch(t).await;
        }
    }

    /// Starts creating the partitions waiting rows need, unless a creation
    /// runs already; rows with existing partitions keep flowing meanwhile.
    /// With no row waiting, makes the partitions due ahead instead (best
    /// effort: a failure there only means rows will wait for them later).
    pub(crate) fn start_jit(&mut self) {
        if self.jit.is_none() {
            return;
        }
        let ahead = self.waiting.is_empty() && self.backfill.to_create.is_empty();
        let wanted: Vec<(u16, i64)> = if !ahead {
            let mut w: Vec<(u16, i64)> = self.waiting.iter().map(|p| (p.table, p.start)).collect();
            w.append(&mut self.backfill.to_create);
            // Made by its backfill: rows for it wait for that commit.
            w.retain(|(t, s)| !self.backfill.busy(*t, *s));
            w
        } else if !self.input_done && !self.ahead.is_empty() {
            // One at a time, nearest first: rows that reach the next interval
            // while the ones after it are made wait for one creation at most.
            vec![self.ahead.remove(0)]
        } else {
            Vec::new()
        };
        if wanted.is_empty() {
            return;
        }
        let mut by_table: HashMap<u16, Vec<i64>> = HashMap::new();
        for (table, start) in wanted {
            by_table.entry(table).or_default().push(start);
        }
        if !ahead && self.waiting_since.is_none() {
            let now = Instant::now();
            self.waiting_since = Some((now, now));
        }
        let mut creator = self.jit.take().expect("checked above");
        let (tables, target, done) = (self.tables.clone(), self.target.clone(), self.jit_done.clone());
        tokio::spawn(async move {
            let mut result = Ok(JitMade::default());
            for (table, mut starts) in by_table {
                starts.sort_unstable();
                starts.dedup();
                match creator.create(&target, &tables[usize::from(table)], &starts).await {
                    Ok(names) => {
                        if let Ok(made) = &mut result {
                            made.created += names.len();
                            if ahead {
                                // Made ahead, no row asked: none may be refused for it.
                                made.ahead.extend(names.into_iter().map(|n| (n, table, starts[0])));
                            } else {
                                made.asked.extend(starts.into_iter().map(|s| (table, s)));
                            }
                        }
                    }
                    Err(_) if ahead => {}
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            let _ = done.send((creator, result));
        });
    }

    /// Rows that wait long for their partitions: making them is retrying
    /// (the server, or a data node that holds a shard of every new
    /// partition, is unreachable) or waits for a lock. Said after 5 s and
    /// every 10 s after that, so a load that makes no progress says why.
    pub(crate) fn tell_of_long_waits(&mut self) {
        let Some((since, told)) = self.waiting_since else { return };
        let waited = since.elapsed();
        if waited < Duration::from_secs(5) || (told != since && told.elapsed() < Duration::from_secs(10)) {
            return;
        }
        self.waiting_since = Some((since, Instant::now()));
        let mut tables: Vec<String> = self.waiting.iter().map(|p| self.tables[usize::from(p.table)].parent.to_string()).collect();
        tables.sort();
        tables.dedup();
        self.notices.push(format!(
            "{} rows have waited {} s for new partitions of {} to be made: the server or a data node may be unreachable, or a lock held; chute keeps trying for up to {} {:?}",
            self.waiting.len(),
            waited.as_secs(),
            tables.join(", "),
            crate::setting::Setting::RetryFor,
            self.retry_for
        ));
    }

    /// Queues the partitions of the policy's premake intervals after the
    /// newest interval rows asked for.
    pub(crate) fn plan_ahead(&mut self, asked: &[(u16, i64)]) {
        let mut newest: HashMap<u16, i64> = HashMap::new();
        for &(table, start) in asked {
            let n = newest.entry(table).or_insert(start);
            *n = (*n).max(start);
        }
        for (table, start) in newest {
            let Some(j) = self.tables[usize::from(table)].jit() else { continue };
            let Ok(tz) = j.policy.zone() else { continue };
            let mut at = start;
            let now = j.limits().now;
            for _ in 0..j.policy.premake.min(MAX_AHEAD) {
                let Ok(next) = j.policy.interval.next(at, &tz) else { break };
                if j.limits().keys.max_key.is_some_and(|max| next > max) {
                    break;
                }
                at = next;
                // Only near the present (a live stream): a historical load
                // would leave empty partitions after its newest row.
                if j.policy.key_type.is_time() && j.policy.interval.next(next, &tz).is_ok_and(|end| end <= now) {
                    continue;
                }
                if self.made_ahead.insert((table, next)) {
                    self.ahead.push((table, next));
                }
            }
        }
    }

    /// A creation finished: route the rows that waited for it.
    pub(crate) async fn jit_finished(&mut self, creator: JitCreator, result: Result<JitMade, LoadError>) -> Result<(), LoadError> {
        self.jit = Some(creator);
        self.waiting_since = None;
        let JitMade { created, asked, ahead } = match result {
            Ok(r) => r,
            Err(e) => {
                for p in std::mem::take(&mut self.waiting) {
                    self.budget.release(p.bytes());
                }
                return Err(e);
            }
        };
        self.stats.partitions_created += created;
        self.creations.created(created);
        self.plan_ahead(&asked);
        self.ahead_leaves.extend(ahead.into_iter().map(|(name, table, start)| (name, (table, start))));
        self.route_waiting(&asked).await;
        self.unpark(&asked).await;
        self.backfill_waiting().await?;
        self.start_jit();
        Ok(())
    }

    /// Routes the rows waiting for a partition with the tree as it is now:
    /// those whose partition exists (or is being backfilled) go to their
    /// accumulators; those of an interval just asked for and still missing
    /// are refused; the others keep waiting.
    pub(crate) async fn route_waiting(&mut self, asked: &[(u16, i64)]) {
        // Grouped by target and chunk: a batch may hold a chunk's rows for a
        // leaf only whole (see `journal`), but rows that waited can fill many
        // batches, and must, or one worker gets them all.
        let mut groups: rustc_hash::FxHashMap<(Target, ChunkRange), (Segment, usize)> = Default::default();
        let mut still = Vec::new();
        let mut rejects = Vec::new();
        // One routing context per table: the tree as just re-read, the limits as of now.
        let mut ctxs: Vec<_> = self.tables.iter().map(|t| t.ctx()).collect();
        for mut p in std::mem::take(&mut self.waiting) {
            let routing = &self.tables[usize::from(p.table)];
            let text = p.key.is_some();
            let ctx = &mut ctxs[usize::from(p.table)];
            let routed = match &p.key {
                Some(key) => routing.route_key(ctx, Some(key)),
                None => routing.route(ctx, &p.row),
            };
            match routed {
                Routed::To(leaf) if routing.is_committed(leaf, text, p.range.0 as usize, p.offset) => {
                    self.stats.rows_skipped += 1;
                    self.budget.release(p.bytes());
                    if let Some(ack) = p.ack.take() {
                        ack.skipped(1);
                        ack.settle();
                    }
                }
                Routed::To(leaf) => {
                    let (seg, budget) = groups.entry((Target { table: p.table, leaf, text }, p.range)).or_default();
                    if let Some(ack) = p.ack.take() {
                        seg.acks.push(seg.row_ends.len() as u32, ack);
                    }
                    if self.by_ref && !text {
                        seg.push_ref(&p.row, p.offset, p.raw.len(), p.line, p.range.0 as usize);
                    } else {
                        seg.push(&p.row, &p.raw, p.line, p.range.0 as usize);
                    }
                    if seg.ranges.is_empty() {
                        seg.ranges.push(p.range);
                    }
                    *budget += p.bytes();
                }
                Routed::Missing { start } if asked.contains(&(p.table, start)) => {
                    self.budget.release(p.bytes());
                    rejects.push(Reject {
                        input: p.range.0 as usize,
                        line: p.line,
                        raw: p.raw,
                        reason: "its partition could not be created (it overlaps a partition made by hand?)".into(),
                        at: None,
                        ack: p.ack,
                        sqlstate: None,
                    });
                }
                Routed::Missing { .. } => still.push(p),
                Routed::Reject(reason) => {
                    self.budget.release(p.bytes());
                    rejects.push(Reject {
                        input: p.range.0 as usize,
                        line: p.line,
                        raw: p.raw,
                        reason,
                        at: None,
                        ack: p.ack,
                        sqlstate: None,
                    });
                }
            }
        }
        for r in rejects {
            self.reject(r);
        }
        self.waiting = still;
        let mut groups: Vec<_> = groups.into_iter().collect();
        groups.sort_unstable_by_key(|((_, range), _)| *range);
        for ((target, _), (seg, budget)) in groups {
            self.accumulate(TargetMap::from_iter([(target, seg)]), budget).await;
        }
    }

    /// No partition is being created and no row waits for one.
    pub(crate) fn jit_idle(&self) -> bool {
        self.jit.is_some() && self.waiting.is_empty() && self.backfill.idle()
    }

    /// No more batches: the workers and backfill sessions end once theirs are done.
    pub(crate) fn close_sink(&mut self) {
        self.batch_tx = None;
        self.backfill.shut();
    }

    pub(crate) fn reject(&mut self, r: Reject) {
        // A resumed load, or a retried batch, does not repeat a reject line.
        if !self.rejects.lock().expect("reject file lock").add(r) {
            return;
        }
        self.stats.rows_rejected += 1;
        if self.batching.max_rejects.is_some_and(|m| self.stats.rows_rejected > m) {
            self.limit_hit = true;
        }
    }

    /// Takes a target's accumulated rows out as one batch part.
    pub(crate) fn take_part(&mut self, target: Target) -> Option<(BatchPart, usize)> {
        let a = self.accum.remove(&target)?;
        if a.seg.row_ends.is_empty() {
            self.budget.release(a.budget);
            return None;
        }
        self.accum_bytes -= a.seg.data.len();
        let table = &self.tables[usize::from(target.table)];
        let name = table.name(target.leaf);
        let writer = table.writer.clone();
        let sql = writer.sql(&name, &table.copy_list, target.text);
        self.touched.insert(name.clone());
        // The first rows into a partition made ahead: keep premake more ahead of them.
        if let Some((table, start)) = self.ahead_leaves.remove(&name) {
            self.plan_ahead(&[(table, start)]);
            self.start_jit();
        }
        let mut seg = a.seg;
        let body = bytes::Bytes::from(std::mem::take(&mut seg.data));
        let part = BatchPart {
            table: target.table,
            target_name: name.to_string(),
            quoted_name: name.quoted(),
            journal_target: super::journal::target_key(&name.to_string(), target.text),
            sql,
            text: target.text,
            writer,
            turn: 0,
            body,
            seg,
        };
        Some((part, a.budget))
    }

    pub(crate) async fn send(&mut self, mut parts: Vec<BatchPart>, budget: usize) {
        if parts.is_empty() {
            return;
        }
        self.turns.number(&mut parts);
        let batch = Batch { parts, budget, batch_id: format!("{}-{}", self.batch_prefix, self.stats.batches) };
        self.stats.batches += 1;
        self.in_flight += 1;
        if let Some(tx) = &self.batch_tx
            && tx.send_async(batch).await.is_err()
        {
            // The workers are gone; their error is reported.
        }
    }

    pub(crate) async fn dispatch(&mut self, target: Target) {
        if let Some((part, budget)) = self.take_routed(target).await {
            self.send(vec![part], budget).await;
        }
    }

    /// Sends several targets' rows, packed into batches of about
    /// `batch_bytes` each: many small per-leaf buffers share a commit.
    pub(crate) async fn dispatch_packed(&mut self, targets: Vec<Target>) {
        let (mut parts, mut budget, mut bytes) = (Vec::new(), 0, 0);
        for t in targets {
            let Some((part, b)) = self.take_routed(t).await else { continue };
            bytes += part.body.len();
            budget += b;
            parts.push(part);
            if bytes >= self.batching.batch_bytes {
                self.send(std::mem::take(&mut parts), std::mem::take(&mut budget)).await;
                bytes = 0;
            }
        }
        self.send(parts, budget).await;
    }

    pub(crate) async fn flush_all(&mut self) {
        let targets: Vec<Target> = self.accum.keys().copied().collect();
        self.dispatch_packed(targets).await;
    }

    /// --flush-every: send the accumulators whose first row has waited `age`.
    pub(crate) async fn flush_stale(&mut self, age: Duration) {
        let stale: Vec<Target> = self.accum.iter().filter(|(_, a)| a.since.is_some_and(|t| t.elapsed() >= age)).map(|(t, _)| *t).collect();
        if !stale.is_empty() {
            self.dispatch_packed(stale).await;
        }
    }

    /// Under budget pressure: send the fullest accumulators now, partial or not.
    pub(crate) async fn flush_largest(&mut self) {
        let mut sizes: Vec<(usize, Target)> = self.accum.iter().map(|(t, a)| (a.seg.data.len(), *t)).collect();
        sizes.sort_unstable_by_key(|s| std::cmp::Reverse(s.0));
        let goal = self.accum_bytes / 2;
        let mut freed = 0;
        let mut chosen = Vec::new();
        for (size, t) in sizes {
            if self.accum_bytes - freed <= goal {
                break;
            }
            freed += size;
            chosen.push(t);
        }
        self.dispatch_packed(chosen).await;
    }

    pub(crate) fn absorb(&mut self, o: CopyOutcome, error: &mut super::Errors) {
        match o {
            CopyOutcome::Loaded { rows, bytes, upsert } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                if let Some(u) = &mut self.stats.upsert {
                    u.add(upsert);
                }
                self.stats.rows_loaded += rows;
                self.stats.bytes_sent += bytes;
            }
            CopyOutcome::Rejected { new } => {
                self.stats.rows_rejected += new;
                if self.batching.max_rejects.is_some_and(|m| self.stats.rows_rejected > m) {
                    self.limit_hit = true;
                }
            }
            CopyOutcome::Failed(e) => {
                self.in_flight = self.in_flight.saturating_sub(1);
                error.add(e);
            }
            CopyOutcome::Retrying { message } => self.notices.push(message),
            CopyOutcome::Vanished(parts) => self.vanished.extend(parts),
            o @ (CopyOutcome::Backfilled { .. } | CopyOutcome::BackfillFailed { .. }) => self.backfill_outcome(o),
        }
    }

    /// Forgets rows not yet sent (an interrupted load); a resume makes them again.
    pub(crate) fn drop_unsent(&mut self) {
        for (_, a) in self.accum.drain() {
            self.budget.release(a.budget);
        }
        self.accum_bytes = 0;
        for p in std::mem::take(&mut self.waiting) {
            self.budget.release(p.bytes());
        }
    }
}
