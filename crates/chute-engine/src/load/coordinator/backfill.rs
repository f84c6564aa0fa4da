//! Which partitions the load backfills, and when each is closed (see
//! `sink::backfill` for what a backfill session does).
//!
//! A row whose time partition does not exist waits for it (see
//! `routing`). When the load may create that partition and nothing else
//! can see it yet, the coordinator does not create it in the catalog:
//! it opens a backfill session for it, and rows of its interval route to it
//! from then on (a "virtual" leaf of the routing). The session holds one
//! transaction; the partition appears to others, whole, when it commits.
//!
//! A session is closed (attached and committed) when its rows stop coming
//! (sorted input moved on: no rows for `IDLE`), when more than `max_open`
//! are open (the oldest first), when its rows hold too much of the memory
//! budget (they stay in memory until the commit, to be replayed after a
//! lost connection), and at the end of the input. Rows that reach a closed
//! partition later take the normal path into it.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use chute_core::partman::backfill;

use super::super::model::Target;
use super::super::routing::LeafRef;
use super::super::sink::backfill::{Fill, Filler, LeafMsg, SessionSpec};
use super::super::sink::swap::{self, Refusal, SwapTarget};
use super::super::sink::{BatchPart, CopyOutcome};
use super::super::{Backfill, LoadError};
use super::Coordinator;
use crate::setting::Setting;

/// A backfill with no new rows for this long is closed once a backfill
/// opened after it has taken rows since (sorted input moved on)…
const IDLE: Duration = Duration::from_millis(500);
/// …or after this long whatever comes next (a stream that paused; reading
/// stdin, `--flush-every` instead).
const LONG_IDLE: Duration = Duration::from_secs(5);

/// How partitions that exist are swapped (see `sink::swap`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SwapSettings {
    /// `--lock-timeout`: the longest the locked step makes writers wait.
    pub lock_timeout: Duration,
    /// `--retry-for`: how long the locked step keeps trying.
    pub retry_for: Duration,
    /// `--backfill-after`: how long before now a partition's range must end
    /// for `auto` to swap it (`None`: one interval).
    pub after: Option<Duration>,
}

pub(crate) struct Backfills {
    pub mode: Backfill,
    swap: SwapSettings,
    /// Partitions that exist whose swap was decided (made or not).
    swap_decided: HashSet<(u16, u32)>,
    /// Parts of a swap that did not happen: routed again, into the partition as it is.
    pub(crate) unswapped: Vec<BatchPart>,
    /// The sink's backfill mode, or why it has none (data nodes); given up
    /// when the load's sink closes, so the outcome queue can end.
    filler: Result<Filler, String>,
    pub max_open: usize,
    /// See [`LONG_IDLE`].
    pub long_idle: Duration,
    /// Sessions taking rows, oldest first.
    open: Vec<Open>,
    states: HashMap<(u16, u32), Leaf>,
    /// Intervals already decided (each counted once in `skipped`).
    decided: HashSet<(u16, i64)>,
    /// The leaf of each interval given a backfill.
    leaves: HashMap<(u16, i64), u32>,
    /// Why partitions took the normal path, with how many.
    skipped: BTreeMap<String, usize>,
    /// Parts of a failed backfill waiting for their partition to be created
    /// the normal way.
    pub(crate) parked: Vec<(u16, i64, BatchPart)>,
    /// Intervals to create the normal way for `parked`.
    pub(crate) to_create: Vec<(u16, i64)>,
}

struct Open {
    table: u16,
    leaf: u32,
    tx: flume::Sender<LeafMsg>,
    last_rows: Instant,
}

struct Leaf {
    start: i64,
    state: State,
    /// A swap's standalone table, which its rows are copied into.
    swap_table: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Filling,
    /// Attaching and committing: rows for it wait until that is done.
    Closing,
    /// Attached: rows take the normal path into it.
    Done,
    /// The server refused the backfill: rows take the normal path once the
    /// partition is made.
    Refused,
}

impl Backfills {
    pub(crate) fn new(mode: Backfill, swap: SwapSettings, filler: Result<Filler, String>, max_open: usize) -> Self {
        Backfills {
            mode,
            swap,
            swap_decided: HashSet::new(),
            unswapped: Vec::new(),
            filler,
            max_open: max_open.max(1),
            long_idle: LONG_IDLE,
            open: Vec::new(),
            states: HashMap::new(),
            decided: HashSet::new(),
            leaves: HashMap::new(),
            skipped: BTreeMap::new(),
            parked: Vec::new(),
            to_create: Vec::new(),
        }
    }

    pub(crate) fn idle(&self) -> bool {
        self.parked.is_empty() && self.to_create.is_empty() && self.unswapped.is_empty()
    }

    pub(crate) fn any_open(&self) -> bool {
        !self.open.is_empty()
    }

    /// Whether the partition of `(table, start)` is being backfilled: it is
    /// not to be created the normal way meanwhile.
    pub(crate) fn busy(&self, table: u16, start: i64) -> bool {
        self.interval_state(table, start).is_some_and(|s| matches!(s, State::Filling | State::Closing))
    }

    fn interval_state(&self, table: u16, start: i64) -> Option<State> {
        let leaf = self.leaves.get(&(table, start))?;
        self.states.get(&(table, *leaf)).map(|l| l.state)
    }

    /// The summary's lines: why partitions took the normal path.
    pub(crate) fn skipped_lines(&self) -> Vec<String> {
        self.skipped.iter().map(|(why, n)| format!("{n} partition{}: {why}", if *n == 1 { "" } else { "s" })).collect()
    }

    /// Gives up the outcome sender and ends every open session uncommitted
    /// (a stopped or failed load).
    pub(crate) fn shut(&mut self) {
        self.filler = Err("the load is ending".into());
        self.open.clear();
    }

    fn state(&self, target: &Target) -> Option<State> {
        match target.leaf {
            LeafRef::Leaf(id) if !target.text => self.states.get(&(target.table, id)).map(|l| l.state),
            _ => None,
        }
    }
}

impl Coordinator {
    /// Why the partition of `(table, start)` cannot be backfilled, or `None`.
    fn backfill_refusal(&self, table: u16, start: i64, text: bool) -> Result<Option<String>, LoadError> {
        let b = &self.backfill;
        if b.mode == Backfill::Off {
            return Ok(Some(format!("{}", Setting::Backfill.with("off"))));
        }
        let routing = &self.tables[usize::from(table)];
        let Some(j) = routing.jit() else { return Ok(Some("the table has no partition policy".into())) };
        let layout = if let Err(why) = &b.filler {
            Some(why.clone())
        } else if text {
            Some("its rows are parsed by the server (they go through the parent)".to_owned())
        } else if let Some(why) = routing.writer.fill_refusal() {
            Some(why)
        } else {
            backfill::refusal(&j.policy, false).map(|r| format!("the table: {r}"))
        };
        if let Some(why) = layout {
            if b.mode == Backfill::On {
                return Err(LoadError::Setup(format!(
                    "{}: the partitions of {} cannot be backfilled ({why}); run with {} (or off) to load them the normal way",
                    Setting::Backfill.with("on"),
                    routing.parent,
                    Setting::Backfill.with("auto")
                )));
            }
            return Ok(Some(why));
        }
        if b.mode == Backfill::Auto {
            let tz = j.policy.zone().map_err(|e| LoadError::Setup(format!("the policy of {}: {e}", routing.parent)))?;
            let end = j.policy.interval.next(start, &tz).map_err(|e| LoadError::Setup(format!("the policy of {}: {e}", routing.parent)))?;
            if end > j.limits().now {
                return Ok(Some(format!(
                    "its interval reaches the present (rows may still arrive; {} forces it)",
                    Setting::Backfill.with("on")
                )));
            }
        }
        Ok(None)
    }

    /// Opens backfill sessions for the intervals waiting rows need, where
    /// allowed, and routes those rows to them. The rest wait for the normal
    /// just-in-time creation.
    pub(crate) async fn backfill_waiting(&mut self) -> Result<(), LoadError> {
        if self.waiting.is_empty() {
            return Ok(());
        }
        let mut wanted: Vec<(u16, i64, bool)> = self.waiting.iter().map(|p| (p.table, p.start, p.key.is_some())).collect();
        wanted.sort_unstable();
        wanted.dedup();
        // Rows of a backfill opened after their chunk was routed go to it now.
        let mut opened = wanted.iter().any(|(t, s, _)| self.backfill.interval_state(*t, *s).is_some_and(|s| s != State::Refused));
        for (table, start, text) in wanted {
            if !self.backfill.decided.insert((table, start)) {
                continue;
            }
            match self.backfill_refusal(table, start, text)? {
                Some(why) => *self.backfill.skipped.entry(why).or_default() += 1,
                None => {
                    self.open_backfill(table, start).await?;
                    opened = true;
                }
            }
        }
        if opened {
            self.route_waiting(&[]).await;
        }
        Ok(())
    }

    async fn open_backfill(&mut self, table: u16, start: i64) -> Result<(), LoadError> {
        if self.backfill.filler.is_err() {
            return Ok(());
        }
        while self.backfill.open.len() >= self.backfill.max_open {
            self.close_backfill(0).await;
        }
        let routing = self.tables[usize::from(table)].clone();
        let j = routing.jit().expect("checked by backfill_refusal");
        let policy_error = |e: &dyn std::fmt::Display| LoadError::Setup(format!("the policy of {}: {e}", routing.parent));
        let tz = j.policy.zone().map_err(|e| policy_error(&e))?;
        let end = j.policy.interval.next(start, &tz).map_err(|e| policy_error(&e))?;
        let plan = backfill::plan_backfill_leaf(&j.policy, &j.info.grants, start, end).map_err(|e| policy_error(&e))?;
        let leaf = routing.open_virtual(&plan.name, start, end);
        let dedupe = routing.writer.fill_dedupe(&plan.name.quoted());
        let spec = SessionSpec { table, leaf, fill: Fill::New(plan), parent_oid: j.info.oid, index_memory: 0, dedupe };
        let Ok(filler) = &self.backfill.filler else { return Ok(()) };
        let tx = filler.open(spec);
        self.backfill.states.insert((table, leaf), Leaf { start, state: State::Filling, swap_table: None });
        self.backfill.leaves.insert((table, start), leaf);
        self.backfill.open.push(Open { table, leaf, tx, last_rows: Instant::now() });
        Ok(())
    }

    /// Sends the open backfill's rows still in its accumulator, then asks
    /// it to attach and commit.
    async fn close_backfill(&mut self, index: usize) {
        let o = &self.backfill.open[index];
        let target = Target { table: o.table, leaf: LeafRef::Leaf(o.leaf), text: false };
        self.dispatch(target).await;
        let o = self.backfill.open.remove(index);
        // A session that is gone has failed: its report sets the state.
        let _ = o.tx.send(LeafMsg::Close);
        if let Some(l) = self.backfill.states.get_mut(&(o.table, o.leaf))
            && l.state == State::Filling
        {
            l.state = State::Closing;
        }
    }

    /// Closes the backfills whose rows stopped coming, and all of them at
    /// the end of the input (a session keeps its rows' bytes on disk, not
    /// in the memory budget, until its commit). A backfill is not closed for a pause alone (a busy
    /// machine's parse thread can pause): only when a backfill opened after
    /// it took rows since its last, or after a long pause.
    pub(crate) async fn close_backfills(&mut self, all: bool) {
        let mut i = 0;
        while i < self.backfill.open.len() {
            let o = &self.backfill.open[i];
            let idle = o.last_rows.elapsed();
            let moved_on = self.backfill.open[i + 1..].iter().any(|later| later.table == o.table && later.last_rows > o.last_rows);
            if all || (idle >= IDLE && moved_on) || idle >= self.backfill.long_idle {
                self.close_backfill(i).await;
            } else {
                i += 1;
            }
        }
    }

    /// Takes a target's rows for the normal sink; `None` when they are held
    /// (their backfill is attaching), handed to their backfill session, or
    /// parked until their refused backfill's partition is made.
    pub(crate) async fn take_routed(&mut self, target: Target) -> Option<(BatchPart, usize)> {
        if let LeafRef::Leaf(id) = target.leaf
            && !target.text
            && self.backfill.mode != Backfill::Off
            && self.backfill.filler.is_ok()
            && !self.backfill.states.contains_key(&(target.table, id))
            && self.backfill.swap_decided.insert((target.table, id))
        {
            Box::pin(self.decide_swap(target.table, id)).await;
        }
        match self.backfill.state(&target) {
            None | Some(State::Done) => self.take_part(target),
            // Attaching: rows for it go the normal way once it is in the catalog.
            Some(State::Closing) => None,
            Some(State::Refused) => {
                let (part, budget) = self.take_part(target)?;
                let start = self.park(&target, part, budget);
                self.backfill.to_create.push((target.table, start));
                self.start_jit();
                None
            }
            Some(State::Filling) => {
                let (mut part, budget) = self.take_part(target)?;
                let id = leaf_id(&target);
                let into = self.backfill.states[&(target.table, id)].swap_table.clone().unwrap_or_else(|| part.quoted_name.clone());
                part.sql = format!("COPY {into} {} FROM STDIN (FORMAT binary, FREEZE)", self.tables[usize::from(target.table)].copy_list);
                let batch_id = format!("{}-{}", self.batch_prefix, self.stats.batches);
                self.stats.batches += 1;
                let Some(pos) = self.backfill.open.iter().position(|o| o.table == target.table && o.leaf == id) else {
                    unreachable!("a filling backfill is open")
                };
                match self.backfill.open[pos].tx.send(LeafMsg::Rows(Box::new(part), budget, batch_id)) {
                    Ok(()) => {
                        self.in_flight += 1;
                        self.backfill.open[pos].last_rows = Instant::now();
                    }
                    Err(flume::SendError(LeafMsg::Rows(part, budget, _))) => {
                        // The session failed and its report is on the way: these rows follow its parts.
                        self.park(&target, *part, budget);
                    }
                    Err(_) => {}
                }
                None
            }
        }
    }

    /// Keeps a part of a refused backfill until its partition is made the
    /// normal way (it is routed again then, with a budget of its own);
    /// returns the partition's interval.
    fn park(&mut self, target: &Target, part: BatchPart, budget: usize) -> i64 {
        self.budget.release(budget);
        let start = self.backfill.states[&(target.table, leaf_id(target))].start;
        self.backfill.parked.push((target.table, start, part));
        start
    }

    /// A backfill session's outcome.
    pub(crate) fn backfill_outcome(&mut self, o: CopyOutcome) {
        match o {
            CopyOutcome::Backfilled { table, leaf, batches, rows, bytes, upsert } => {
                self.in_flight = self.in_flight.saturating_sub(batches);
                if let Some(u) = &mut self.stats.upsert {
                    u.add(upsert);
                }
                self.stats.rows_loaded += rows;
                self.stats.bytes_sent += bytes;
                self.stats.partitions_backfilled += 1;
                if let Some(l) = self.backfill.states.get_mut(&(table, leaf)) {
                    l.state = State::Done;
                    if l.swap_table.is_some() {
                        self.stats.partitions_swapped += 1;
                    } else {
                        self.stats.partitions_created += 1;
                    }
                }
                self.touched.insert(self.tables[usize::from(table)].name(LeafRef::Leaf(leaf)));
                // Rows that waited for it (the server parses them: through the parent) can go now.
                self.start_jit();
            }
            CopyOutcome::BackfillFailed { table, leaf, parts, reason } => {
                self.in_flight = self.in_flight.saturating_sub(parts.len());
                let name = self.tables[usize::from(table)].name(LeafRef::Leaf(leaf));
                self.backfill.open.retain(|o| !(o.table == table && o.leaf == leaf));
                let Some(l) = self.backfill.states.get_mut(&(table, leaf)) else { return };
                if l.swap_table.is_some() {
                    // The partition is there as it was: its rows go into it the normal way.
                    if l.state != State::Done {
                        l.state = State::Done;
                        *self.backfill.skipped.entry("the swap did not happen (see the notices)".into()).or_default() += 1;
                        self.notices.push(format!("{name} could not be swapped ({reason}): its rows take the normal path"));
                    }
                    self.backfill.unswapped.extend(parts);
                    return;
                }
                let start = l.start;
                if l.state != State::Refused {
                    l.state = State::Refused;
                    self.tables[usize::from(table)].close_virtual(leaf);
                    *self.backfill.skipped.entry("the server refused the backfill (see the notices)".into()).or_default() += 1;
                    self.notices.push(format!("{name} could not be backfilled ({reason}): its rows take the normal path"));
                }
                self.backfill.parked.extend(parts.into_iter().map(|p| (table, start, p)));
                self.backfill.to_create.push((table, start));
                self.start_jit();
            }
            _ => {}
        }
    }

    /// After a just-in-time creation: the parts of failed backfills whose
    /// partition exists now are routed again.
    pub(crate) async fn unpark(&mut self, asked: &[(u16, i64)]) {
        // Made the normal way now: rows for them take the normal path.
        for ((table, _), l) in self.backfill.states.iter_mut() {
            if l.state == State::Refused && asked.contains(&(*table, l.start)) {
                l.state = State::Done;
            }
        }
        if self.backfill.parked.is_empty() {
            return;
        }
        let (ready, keep): (Vec<_>, Vec<_>) =
            std::mem::take(&mut self.backfill.parked).into_iter().partition(|(t, s, _)| asked.contains(&(*t, *s)));
        self.backfill.parked = keep;
        for (_, _, part) in ready {
            self.reroute(part).await;
        }
    }
}

impl Coordinator {
    /// The first rows for a partition that exists: whether it is swapped
    /// (a session opened for it, its rows sent there from now on) or why not.
    async fn decide_swap(&mut self, table: u16, leaf: u32) {
        let routing = self.tables[usize::from(table)].clone();
        let name = routing.name(LeafRef::Leaf(leaf));
        // What the load does (not the partition) keeps it from a swap: not news under `auto`.
        let why = if !routing.is_tree() {
            return; // A plain table, not a partition.
        } else {
            routing.writer.swap_refusal().map(|why| Refusal { why, usual: true })
        };
        let settings = self.backfill.swap;
        let age = swap::Age { now: crate::clock::now_micros(), after: settings.after, any: self.backfill.mode == Backfill::On };
        let chosen = match why {
            Some(why) => Err(why),
            None => match self.control.client().await {
                Ok(c) => match swap::choose(c, &name, &routing.parent, &age).await {
                    Ok(chosen) => chosen,
                    Err(e) => Err(Refusal::notable(format!("reading the catalog failed ({})", crate::exec::describe(&e)))),
                },
                Err(e) => Err(Refusal::notable(format!("reading the catalog failed ({e})"))),
            },
        };
        let chosen = match chosen {
            Ok(c) => c,
            Err(Refusal { why, usual }) => {
                let on = self.backfill.mode == Backfill::On;
                if on {
                    self.notices.push(format!("{name} is not swapped ({why}): its rows take the normal path"));
                }
                if on || !usual {
                    *self.backfill.skipped.entry(format!("a partition that exists: {why}")).or_default() += 1;
                }
                return;
            }
        };
        while self.backfill.open.len() >= self.backfill.max_open {
            self.close_backfill(0).await;
        }
        // Apart from another load's swap of the same partition at the same moment.
        let nonce = (crate::clock::now_micros() as u64 ^ (u64::from(std::process::id()) << 20)) as u32;
        let target = SwapTarget {
            leaf: name.clone(),
            oid: chosen.oid,
            table: format!("chute_swap_{}_{nonce:08x}", chosen.oid),
            bound: chosen.bound,
            partition_constraint: chosen.partition_constraint,
            lock_timeout: settings.lock_timeout,
            retry_for: settings.retry_for,
        };
        let swap_table = target.table_name().quoted();
        let Ok(filler) = &self.backfill.filler else { return };
        let spec = SessionSpec { table, leaf, fill: Fill::Swap(target), parent_oid: chosen.root_oid, index_memory: 0, dedupe: None };
        let tx = filler.open(spec);
        self.backfill.states.insert((table, leaf), Leaf { start: i64::MIN, state: State::Filling, swap_table: Some(swap_table) });
        self.backfill.open.push(Open { table, leaf, tx, last_rows: Instant::now() });
    }

    /// Rows of swaps that did not happen go into their partitions the normal way.
    pub(crate) async fn reroute_unswapped(&mut self) {
        for part in std::mem::take(&mut self.backfill.unswapped) {
            if self.batch_tx.is_none() {
                continue; // Stopping: a resume routes them again.
            }
            self.reroute(part).await;
        }
    }
}

fn leaf_id(target: &Target) -> u32 {
    match target.leaf {
        LeafRef::Leaf(id) => id,
        LeafRef::Parent => u32::MAX,
    }
}
