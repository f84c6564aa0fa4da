//! COPY workers: one connection each, taking batches from a shared queue.
//!
//! A batch is one transaction: its COPY statements and, when the load is
//! journaled, the journal entries saying which input ranges its leaf now
//! holds, so a batch is either wholly committed and recorded or not at all.
//! A batch the server refuses for its data (a bad value, a constraint) has
//! its refused rows isolated under savepoints (see `isolate`): every other
//! row is loaded and each refused row becomes a reject with the server's
//! reason and SQLSTATE, written to the reject file before the transaction
//! commits. A lost connection, a server restart, a deadlock, a
//! serialization failure or a lock not granted within the role's
//! `lock_timeout` is retried with backoff on a new connection
//! (`retry::Policy::transaction`); if the
//! connection dropped while committing, the journal tells whether the batch
//! landed, so nothing is loaded twice. A leaf that no longer exists (dropped
//! by retention between routing and COPY: 42P01) fails only its own part:
//! the rest of the batch commits and that part's rows go back to the
//! coordinator to be routed again.

use std::sync::Arc;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Transaction};

use super::LoadError;

pub(crate) mod atomic;
pub(crate) mod backfill;
mod isolate;
pub(crate) mod nodes;
pub(crate) mod swap;

pub(crate) use super::write::{Batch, BatchPart};

use super::budget::Budget;
use super::write::merge;
use crate::ConnectOptions;
use crate::retry::{self, Classify, Fault, Policy};

pub(crate) struct RejectedRow {
    /// The part of the batch and the row's index in it.
    pub part: usize,
    pub index: usize,
    pub ack: Option<super::ack::AckRef>,
    pub raw: Vec<u8>,
    /// With `raw` empty: where the record is in its input (see `Segment::record`).
    pub at: Option<(u64, u32)>,
    pub line: u64,
    pub input: usize,
    pub reason: String,
    /// The server's SQLSTATE for the row.
    pub sqlstate: Option<String>,
}

pub(crate) enum CopyOutcome {
    Loaded {
        rows: u64,
        bytes: u64,
        /// An upsert's batch: what its rows did.
        upsert: super::UpsertCounts,
    },
    /// Rows the server refused, already written to the reject file (`new`
    /// of them were not there before).
    Rejected {
        new: u64,
    },
    Failed(LoadError),
    /// The connection was lost; retrying.
    Retrying {
        message: String,
    },
    /// These parts' leaves no longer exist (dropped or detached while the
    /// load ran, 42P01): nothing of them was committed; the coordinator
    /// reads the tree again and routes their rows anew.
    Vanished(Vec<BatchPart>),
    /// A backfilled partition is attached with all its rows (`batches`
    /// parts were sent to it).
    Backfilled {
        table: u16,
        leaf: u32,
        batches: usize,
        rows: u64,
        bytes: u64,
        upsert: super::UpsertCounts,
    },
    /// A backfill did not happen (nothing of it is committed): its rows go
    /// the normal way.
    BackfillFailed {
        table: u16,
        leaf: u32,
        parts: Vec<BatchPart>,
        reason: String,
    },
}

/// What workers share.
pub(crate) struct WorkerCtx {
    pub target: ConnectOptions,
    pub load_id: Option<String>,
    /// This run's token: a batch commits only while `chute.loads.owner` is it (see `claim`).
    pub owner: String,
    /// A load whose inputs several runs share: how many this run owns (see `claim::fence`).
    pub owned: Option<usize>,
    /// The load as it was before this run took it, to claim it again after
    /// a failover lost the claim (`None`: never claimed again).
    pub before: Option<super::journal::Before>,
    pub retry_for: Duration,
    pub budget: Arc<Budget>,
    /// Shared with the coordinator: a worker writes its rejects itself, so it
    /// never waits for the coordinator (which may be waiting for workers).
    pub rejects: Arc<std::sync::Mutex<super::rejects::RejectWriter>>,
    /// Upserts: batches of one leaf merge one after the other, in the order sent.
    pub turns: Arc<merge::Turns>,
    /// The load's stop: a batch's retries end once it is set (what is not
    /// committed then is read again by the next run), so a stopped load
    /// whose server is gone exits at once instead of after `retry_for`.
    pub stop: Arc<std::sync::atomic::AtomicBool>,
}

/// Why one attempt at a batch failed.
pub(crate) enum AttemptError {
    Pg(tokio_postgres::Error),
    /// The reject file could not be written: the batch must not commit.
    Rejects(LoadError),
    /// The batch cannot load and no row is to blame (see `isolate`).
    Stop(LoadError),
}

impl From<tokio_postgres::Error> for AttemptError {
    fn from(e: tokio_postgres::Error) -> Self {
        AttemptError::Pg(e)
    }
}

/// A statement's failure is the server's to classify; a reject file that
/// cannot be written or a batch that cannot load fails the same way again.
impl Classify for AttemptError {
    fn fault(&self) -> Fault {
        match self {
            AttemptError::Pg(e) => retry::classify(e),
            AttemptError::Rejects(_) | AttemptError::Stop(_) => Fault::Fatal,
        }
    }
}

/// One try at a batch on a worker: the batch failed, or no new connection
/// could be made for it.
enum BatchTry {
    Batch(AttemptError),
    Connect(crate::ConnectError),
}

impl Classify for BatchTry {
    fn fault(&self) -> Fault {
        match self {
            BatchTry::Batch(e) => e.fault(),
            BatchTry::Connect(e) => e.fault(),
        }
    }
}

/// Where the coordinator's batches go: PostgreSQL, through one or more
/// connections to one server ([`CopySink`]) or to several ([`nodes::NodeSink`]).
///
/// Contract. `pipeline::run` calls `start` once per load, on the tokio
/// runtime, before any batch exists. `start` opens what the sink needs
/// (failing the load if it cannot, after retrying as `retry_for` allows)
/// and spawns its workers. Workers pull batches from `batches`, a bounded
/// queue the coordinator fills, so a slow server slows the coordinator
/// instead of growing memory; they run until the coordinator drops its
/// sender (the end of the load, or a stop). Batches may be committed
/// concurrently and in any order (each is one transaction of its own), but
/// every batch is answered on `outcomes`: any number of `Retrying`,
/// `Rejected` or `Vanished`, then exactly one `Loaded` (its rows are
/// committed, with their journal entries in the same transaction) or
/// `Failed` (nothing of it is committed; the worker stops). A worker gives
/// the batch's bytes back to the load's budget once the batch is done
/// either way. The handles end when the workers do; an `Err` from one is
/// reported with the load's other errors.
///
/// Backfill is a mode of the sink, not a second destination: a sink that
/// can fill partitions before they are attached returns a
/// [`backfill::Filler`] from `start`; the coordinator decides which
/// partitions are filled that way and sends their rows to the sessions the
/// filler opens, whose answers (`Backfilled`, `BackfillFailed`) come on the
/// same `outcomes`. The outcome queue closes when every worker, session and
/// the filler itself are gone.
pub(crate) trait Sink {
    async fn start(self, batches: flume::Receiver<Batch>, outcomes: flume::Sender<CopyOutcome>) -> Result<Started, LoadError>;
}

/// A started sink.
pub(crate) struct Started {
    pub workers: Vec<tokio::task::JoinHandle<Result<(), LoadError>>>,
    /// Opens backfill sessions, or why this sink cannot fill partitions.
    pub backfill: Result<backfill::Filler, String>,
}

/// One server's share of a batch, and where its answer goes (a sink that
/// splits batches over servers, see `nodes`).
pub(crate) struct Job {
    pub batch: Batch,
    pub done: tokio::sync::oneshot::Sender<(Batch, Result<Committed, LoadError>)>,
}

/// The sink of a load into one server: `workers` connections, each COPYing
/// (or, under row-level security, INSERTing) whole batches into their
/// targets, one transaction per batch.
pub(crate) struct CopySink {
    pub ctx: Arc<WorkerCtx>,
    pub workers: usize,
    pub retry_for: Duration,
    /// `maintenance_work_mem` for a backfilled partition's index builds, in bytes.
    pub index_memory: u64,
}

impl Sink for CopySink {
    async fn start(self, batches: flume::Receiver<Batch>, outcomes: flume::Sender<CopyOutcome>) -> Result<Started, LoadError> {
        let mut handles = Vec::with_capacity(self.workers);
        for _ in 0..self.workers {
            let client = crate::retry::connect(&self.ctx.target, self.retry_for, |_| {}).await?;
            handles.push(tokio::spawn(worker(client, batches.clone(), outcomes.clone(), self.ctx.clone())));
        }
        // Backfill sessions are connections of their own to the one server.
        let filler = backfill::Filler::new(self.ctx, outcomes, self.index_memory);
        Ok(Started { workers: handles, backfill: Ok(filler) })
    }
}

async fn worker(
    mut client: Client,
    rx: flume::Receiver<Batch>,
    tx: flume::Sender<CopyOutcome>,
    ctx: Arc<WorkerCtx>,
) -> Result<(), LoadError> {
    while let Ok(batch) = rx.recv_async().await {
        let began = std::time::Instant::now();
        let result = commit_with_retries(&mut client, &batch, &tx, &ctx).await;
        ctx.turns.finish(&batch);
        ctx.budget.release(batch.budget);
        match result {
            Ok(committed) => {
                // A service's /metrics (no recorder in a plain load: a no-op).
                ::metrics::histogram!("chute_batch_commit_seconds").record(began.elapsed().as_secs_f64());
                ::metrics::histogram!("chute_batch_rows").record(committed.rows as f64);
                let gone = settle(batch, &committed);
                // Before `Loaded`: the coordinator keeps the queue open until
                // every batch has answered, and these rows must be back by then.
                if !gone.is_empty() {
                    let _ = tx.send(CopyOutcome::Vanished(gone));
                }
                let _ = tx.send(CopyOutcome::Loaded { rows: committed.rows, bytes: committed.bytes, upsert: committed.upsert });
            }
            Err(e) => {
                batch.fail(&e.to_string());
                let _ = tx.send(CopyOutcome::Failed(e));
                return Ok(());
            }
        }
    }
    Ok(())
}

/// Acknowledges a committed batch's rows; returns the parts whose leaf vanished.
pub(crate) fn settle(batch: Batch, c: &Committed) -> Vec<BatchPart> {
    let mut gone = Vec::new();
    for (i, part) in batch.parts.into_iter().enumerate() {
        if c.vanished.contains(&i) {
            gone.push(part);
        } else {
            let refused: Vec<usize> = c.rejected.iter().filter(|(p, _)| *p == i).map(|(_, r)| *r).collect();
            part.seg.acks.commit(part.seg.row_ends.len(), &refused);
        }
    }
    gone
}

/// What a committed batch did.
pub(crate) struct Committed {
    pub(crate) upsert: super::UpsertCounts,
    rows: u64,
    bytes: u64,
    /// The parts whose leaf vanished (by index): nothing of them is committed.
    vanished: Vec<usize>,
    /// Rows the server refused, as (part, row): rejected, not committed.
    rejected: std::collections::HashSet<(usize, usize)>,
}

pub(crate) async fn commit_with_retries(
    client: &mut Client,
    batch: &Batch,
    tx: &flume::Sender<CopyOutcome>,
    ctx: &WorkerCtx,
) -> Result<Committed, LoadError> {
    // The rejects this batch wrote, so a retry does not write them again.
    let mut written = Written::default();
    let done = retry::run!(
        &Policy::transaction(ctx.retry_for),
        |a| async {
            if a.is_retry() {
                // A new connection for every retry: the last one may be gone,
                // or was cut off in the middle of a COPY.
                *client = ctx.target.connect().await.map_err(BatchTry::Connect)?;
            }
            commit_batch(client, batch, tx, ctx, a.is_retry(), &mut written).await.map_err(BatchTry::Batch)
        },
        on_retry = |r| if let BatchTry::Batch(AttemptError::Pg(e)) = r.error {
            let _ =
                tx.send(CopyOutcome::Retrying { message: format!("COPY into {}: {}; retrying", batch.label(), crate::exec::describe(e)) });
        },
        stop = &*ctx.stop
    );
    let stopped = ctx.stop.load(std::sync::atomic::Ordering::Relaxed);
    let stopped_note =
        "; the load was stopped while this batch was being retried: nothing of it is committed, and the next run reads its rows again";
    match done {
        Ok(Attempt { rows, bytes, vanished, upsert }) => Ok(Committed { rows, bytes, vanished, rejected: written.rows, upsert }),
        Err(BatchTry::Connect(e)) if stopped => {
            Err(LoadError::Setup(format!("COPY into {}: the server could not be reached (last error: {e}){stopped_note}", batch.label())))
        }
        Err(BatchTry::Batch(AttemptError::Pg(e))) if stopped && retry::classify(&e) != Fault::Fatal => {
            Err(LoadError::sql(format!("COPY into {}{stopped_note}; last error", batch.label()), e))
        }
        Err(BatchTry::Connect(e)) if e.connection_lost() => Err(LoadError::Setup(format!(
            "the server could not be reached again within {} {:?} (last error: {e}): check it is up, then run the same command again to load the rest",
            crate::setting::Setting::RetryFor,
            ctx.retry_for,
        ))),
        Err(BatchTry::Connect(e)) => Err(e.into()),
        Err(BatchTry::Batch(AttemptError::Pg(e))) => Err(LoadError::sql(format!("COPY into {}", batch.label()), e)),
        Err(BatchTry::Batch(AttemptError::Rejects(e) | AttemptError::Stop(e))) => Err(e),
    }
}

/// The rows a batch rejected over its attempts: by (input, line) so a
/// retry does not write them to the reject file again, and by (part, row).
#[derive(Default)]
pub(crate) struct Written {
    lines: std::collections::HashSet<(usize, u64)>,
    pub rows: std::collections::HashSet<(usize, usize)>,
}

/// One attempt at a batch: its COPYs and journal entries in one transaction.
/// What a batch's transaction is opened on: a connection (a transaction),
/// or, in an `--atomic` load, the load's one transaction (a savepoint).
pub(crate) trait Begin {
    fn begin(&mut self) -> impl std::future::Future<Output = Result<Transaction<'_>, tokio_postgres::Error>> + Send;
}

impl Begin for Client {
    async fn begin(&mut self) -> Result<Transaction<'_>, tokio_postgres::Error> {
        self.transaction().await
    }
}

impl Begin for Transaction<'_> {
    async fn begin(&mut self) -> Result<Transaction<'_>, tokio_postgres::Error> {
        self.transaction().await
    }
}

pub(crate) async fn commit_batch<C: Begin>(
    client: &mut C,
    batch: &Batch,
    tx: &flume::Sender<CopyOutcome>,
    ctx: &WorkerCtx,
    retry: bool,
    written: &mut Written,
) -> Result<Attempt, AttemptError> {
    let mut txn = client.begin().await?;
    if let Some(load_id) = &ctx.load_id {
        match super::claim::fence(&txn, load_id, &ctx.owner, ctx.owned, ctx.before.as_ref()).await? {
            Ok(super::claim::Fenced::Owned) => {}
            Ok(super::claim::Fenced::Retaken) => {
                let message = format!(
                    "the server reached now had lost this run's claim of load {load_id} (a failover before it was replicated): \
                     claiming it again; rows the old server acknowledged and this one lacks are loaded again after this pass"
                );
                let _ = tx.send(CopyOutcome::Retrying { message });
            }
            // Another run of the load took it over: this run stops.
            Err(e) => return Err(AttemptError::Stop(e)),
        }
    }
    if retry
        && let Some(load_id) = &ctx.load_id
        && let Some(rows) = super::journal::landed(&txn, load_id, &batch.batch_id).await?
    {
        // The commit landed before the connection was lost (an upsert's
        // counts of it are lost with the connection: they count as unchanged).
        let upsert = super::UpsertCounts { unchanged: rows, ..Default::default() };
        return Ok(Attempt {
            rows,
            bytes: batch.bytes(),
            vanished: Vec::new(),
            upsert: if batch.ordered() { upsert } else { Default::default() },
        });
    }
    let mut loaded = 0u64;
    let mut upsert = super::UpsertCounts::default();
    let mut rejected = Vec::new();
    let vanished = lock_targets(&txn, batch).await?;
    for index in batch.order() {
        let part = &batch.parts[index];
        if vanished.contains(&index) {
            // Nothing of it is journaled: its rows are routed again.
            continue;
        }
        let before = rejected.len();
        let (rows, counts) = isolate::load_part(&mut txn, part, &mut rejected, &ctx.turns).await.map_err(|e| match e {
            isolate::PartError::Pg(e) => AttemptError::Pg(e),
            isolate::PartError::Mismatch(e) => AttemptError::Stop(e),
        })?;
        loaded += rows;
        upsert.add(counts);
        rejected[before..].iter_mut().for_each(|r| r.part = index);
        if let Some(load_id) = &ctx.load_id {
            super::journal::record(&txn, load_id, &batch.batch_id, part.claim(rows)).await?;
        }
    }
    if !rejected.is_empty() {
        // The reject file must hold these rows before their range is committed.
        let written = {
            let mut w = ctx.rejects.lock().expect("reject file lock");
            let new = rejected
                .into_iter()
                .filter_map(|mut r| {
                    written.rows.insert((r.part, r.index));
                    let first = written.lines.insert((r.input, r.line));
                    // A retry's reject of a row already on file: its share is settled there.
                    let ack = if first { r.ack.take() } else { r.ack.take().map(|a| a.settle()).and(None) };
                    (first
                        && w.add(super::model::Reject {
                            input: r.input,
                            line: r.line,
                            raw: r.raw,
                            reason: r.reason,
                            at: r.at,
                            ack,
                            sqlstate: r.sqlstate,
                        }))
                    .then_some(())
                })
                .count();
            w.flush_pending().map(|()| new as u64)
        };
        match written {
            Ok(new) => {
                let _ = tx.send(CopyOutcome::Rejected { new });
            }
            Err(e) => return Err(AttemptError::Rejects(e)),
        }
    }
    txn.commit().await?;
    let sent = batch.parts.iter().enumerate().filter(|(i, _)| !vanished.contains(i)).map(|(_, p)| p.body.len() as u64).sum();
    Ok(Attempt { rows: loaded, bytes: sent, vanished, upsert })
}

/// What one committed attempt at a batch did.
pub(crate) struct Attempt {
    pub rows: u64,
    pub bytes: u64,
    /// The parts whose target vanished (nothing of them is committed).
    pub vanished: Vec<usize>,
    pub upsert: super::UpsertCounts,
}

/// Locks every target of the batch as its COPY would (ROW EXCLUSIVE), so
/// none can be dropped before its COPY runs, and returns the parts whose
/// target no longer exists. Asked first, in one statement, because a COPY
/// that fails to start leaves the driver's connection out of step.
async fn lock_targets(txn: &Transaction<'_>, batch: &Batch) -> Result<Vec<usize>, tokio_postgres::Error> {
    let mut gone: Vec<usize> = Vec::new();
    loop {
        let live: Vec<(usize, &str)> =
            batch.parts.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(i, p)| (i, p.quoted_name.as_str())).collect();
        if live.is_empty() {
            return Ok(gone);
        }
        let names: Vec<&str> = live.iter().map(|(_, n)| *n).collect();
        // ONLY: a parent target (rows the server routes) must not lock every partition at once.
        let only: Vec<String> = names.iter().map(|n| format!("ONLY {n}")).collect();
        let lock =
            format!("SAVEPOINT chute_targets; LOCK TABLE {} IN ROW EXCLUSIVE MODE; RELEASE SAVEPOINT chute_targets", only.join(", "));
        match txn.batch_execute(&lock).await {
            Ok(()) => return Ok(gone),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_TABLE) => {
                txn.batch_execute("ROLLBACK TO SAVEPOINT chute_targets; RELEASE SAVEPOINT chute_targets").await?;
                let missing = txn
                    .query("SELECT i::int8 FROM unnest($1::text[]) WITH ORDINALITY u(n, i) WHERE to_regclass(n) IS NULL", &[&names])
                    .await?;
                if missing.is_empty() {
                    return Err(e);
                }
                gone.extend(missing.iter().map(|r| live[r.get::<_, i64>(0) as usize - 1].0));
            }
            Err(e) => return Err(e),
        }
    }
}
