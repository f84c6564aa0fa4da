//! The coordinator's loop: what it waits for, in what order it acts on it,
//! and when it stops (the contract is on [`Coordinator`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::super::ack::{CommittedPrefix, Completion};
use super::super::control::Control;
use super::super::model::ChunkOut;
use super::super::sink::CopyOutcome;
use super::super::{Errors, LoadProgress, LoadStats};
use super::Coordinator;

/// The channels and flags the coordinator runs between.
pub(crate) struct Wiring {
    /// What the parse threads made of each chunk; closed when they are done.
    pub rows: flume::Receiver<ChunkOut>,
    /// The sink's answers; closed once every worker and backfill session has ended.
    pub outcomes: flume::Receiver<CopyOutcome>,
    /// The source's acknowledgements, gathered into how far each input is committed.
    pub acks: flume::Receiver<Completion>,
    pub committed: CommittedPrefix,
    /// Set from outside to stop the load (a signal, a service shutting down).
    pub stop: Arc<AtomicBool>,
    /// Set by the coordinator to stop the reader and the parse threads.
    pub halt: Arc<AtomicBool>,
    /// Input bytes read so far (progress).
    pub bytes_read: Arc<AtomicU64>,
    /// When the load began (progress).
    pub began: Instant,
}

/// How the coordinator's part of a load ended.
pub(crate) struct CoordinatorReport {
    pub stats: LoadStats,
    /// Every error of the load's stages that reached the coordinator.
    pub errors: Errors,
    /// Stopped from outside before the end.
    pub interrupted: bool,
    /// More rows were rejected than the load allows.
    pub limit_hit: bool,
    /// Handed back for the journal's close: it holds the load's lock.
    pub control: Control,
    /// Acknowledgements still to come (from rows the stages held to the
    /// end) and what is committed so far.
    pub acks: flume::Receiver<Completion>,
    pub committed: CommittedPrefix,
}

impl Coordinator {
    /// Runs the load's coordination to its end (see the contract on [`Coordinator`]).
    pub(crate) async fn run(mut self, wiring: Wiring, progress: &mut dyn LoadProgress) -> CoordinatorReport {
        let Wiring { rows, outcomes, acks, mut committed, stop, halt, bytes_read, began } = wiring;
        let mut rows = Some(rows);
        let mut last_report = Instant::now();
        // How often stale batches are looked for: often enough for a flush interval.
        let tick = self
            .batching
            .flush_every
            .map_or(Duration::from_millis(50), |f| (f / 4).clamp(Duration::from_millis(2), Duration::from_millis(50)));
        let mut errors = Errors::default();
        let mut parsing_done = false;
        let mut interrupted = false;
        let mut acks_open = true;
        loop {
            if stop.load(Ordering::Relaxed) && !interrupted {
                interrupted = true;
                self.halt(&halt);
                rows = None;
                parsing_done = true;
            }
            self.input_done = parsing_done;
            if parsing_done && self.batch_tx.is_some() && (self.jit_idle() || errors.any()) {
                self.drain(&errors).await;
            }
            for n in std::mem::take(&mut self.notices) {
                progress.notice(&n);
            }
            if parsing_done && self.batch_tx.is_none() {
                // Only answers are left to wait for.
                match outcomes.recv_async().await {
                    Ok(o) => self.absorb(o, &mut errors),
                    Err(_) => break,
                }
            } else {
                // An upsert applies rows in input order, so the next chunk
                // waits while rows of earlier ones wait for their partition
                // (not once the load is failing: then the stages must drain).
                let failing = errors.any() || halt.load(Ordering::Relaxed);
                let take_rows = !parsing_done && (self.stats.upsert.is_none() || self.jit_idle() || failing);
                tokio::select! {
                    out = async { rows.as_ref().expect("receiving").recv_async().await }, if take_rows => match out {
                        Ok(out) => if let Err(e) = self.merge(out).await { errors.add(e); },
                        Err(_) => parsing_done = true,
                    },
                    j = self.jit_rx.recv_async() => if let Ok((creator, result)) = j
                        && let Err(e) = self.jit_finished(creator, result).await
                    {
                        errors.add(e);
                    },
                    o = outcomes.recv_async() => if let Ok(o) = o { self.absorb(o, &mut errors) },
                    // Closed once the input is read: not polled then, or this loop would spin.
                    c = acks.recv_async(), if acks_open => match c {
                        Ok(c) => { committed.absorb(&c); }
                        Err(_) => acks_open = false,
                    },
                    // Pacing, not a retry: the loop wakes for its upkeep (flushes by age).
                    _ = tokio::time::sleep(tick) => {}
                }
            }
            for c in acks.try_iter() {
                committed.absorb(&c);
            }
            self.upkeep(&mut errors, parsing_done).await;
            if (errors.any() || self.limit_hit) && !halt.load(Ordering::Relaxed) {
                halt.store(true, Ordering::Relaxed);
            }
            if last_report.elapsed() >= Duration::from_millis(250) {
                self.report_progress(progress, &committed, &bytes_read, began);
                last_report = Instant::now();
            }
        }
        // Every holder of a row in here is gone now: their acknowledgements fire.
        drop(self.accum.drain());
        drop(rows);
        self.stats.backfill_skipped = self.backfill.skipped_lines();
        self.stats.partitions_touched = self.touched.len();
        CoordinatorReport { stats: self.stats, errors, interrupted, limit_hit: self.limit_hit, control: self.control, acks, committed }
    }

    /// A stop: what is not sent yet is dropped (a resume makes it again),
    /// the input is halted, and the batches in flight finish.
    fn halt(&mut self, halt: &AtomicBool) {
        halt.store(true, Ordering::Relaxed);
        self.drop_unsent();
        self.close_sink();
    }

    /// Every chunk is in and no row waits for a partition: send the rest,
    /// and close the sink once nothing can come back to be sent again.
    async fn drain(&mut self, errors: &Errors) {
        self.flush_all().await;
        self.close_backfills(true).await;
        // Rows of a batch whose leaf vanished come back to be routed
        // again: the queue stays open until every batch has answered.
        // Rows held for a backfill being attached, or parked for a
        // partition being made, still have to go.
        if (self.in_flight == 0 && self.jit_idle() && self.accum.is_empty()) || errors.any() {
            self.close_sink();
        }
    }

    /// What is due after each event: rows of vanished leaves routed again,
    /// rejects written, batches sent early (memory pressure, idle workers,
    /// rows that waited long enough) and backfills closed.
    async fn upkeep(&mut self, errors: &mut Errors, parsing_done: bool) {
        self.tell_of_long_waits();
        if !self.vanished.is_empty()
            && let Err(e) = self.reroute_vanished().await
        {
            errors.add(e);
        }
        if !self.backfill.unswapped.is_empty() {
            self.reroute_unswapped().await;
        }
        if let Err(e) = self.rejects.lock().expect("reject file lock").flush_pending() {
            errors.add(e);
        }
        if !parsing_done && (self.budget.used() * 4 > self.budget.limit * 3 || self.budget.has_waiters()) {
            self.flush_largest().await;
        }
        if self.backfill.any_open() && self.batch_tx.is_some() {
            self.close_backfills(false).await;
        }
        let sending = !parsing_done && self.batch_tx.is_some();
        if sending && self.batching.flush_when_idle && self.in_flight < self.batching.workers && !self.accum.is_empty() {
            self.flush_all().await;
        }
        if let Some(age) = self.batching.flush_every
            && sending
        {
            self.flush_stale(age).await;
        }
    }

    fn report_progress(&mut self, progress: &mut dyn LoadProgress, committed: &CommittedPrefix, bytes_read: &AtomicU64, began: Instant) {
        self.stats.bytes_committed = committed.bytes();
        self.stats.bytes_read = bytes_read.load(Ordering::Relaxed);
        self.stats.seconds = began.elapsed().as_secs_f64();
        self.stats.partitions_touched = self.touched.len();
        progress.update(&self.stats);
    }
}
