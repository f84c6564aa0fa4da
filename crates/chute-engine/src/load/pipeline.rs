//! A load from start to end, assembled from its components: the kind and
//! the source (`setup`), the journal, the sink, the reader thread and the
//! parse threads, the coordinator, and the report. Each lives in its own
//! module; this one wires them together and nothing else.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::ack::{CommittedPrefix, Completion};
use super::budget::Budget;
use super::control::Control;
use super::coordinator::backfill::{Backfills, SwapSettings};
use super::coordinator::{Batching, Coordinator, CoordinatorReport, Parts, Wiring};
use super::input::{Delivery, Shared};
use super::kind::{Kind, Prepared};
use super::model::{Chunk, ChunkOut, Payload};
use super::rejects::RejectWriter;
use super::setup;
use super::sink::nodes::{Distributed, NodeSink};
use super::sink::{Batch, CopyOutcome, CopySink, Sink, Started, WorkerCtx};
use super::{Backfill, LoadError, LoadProgress, LoadReport, LoadSpec};

/// Runs one pass of a load to the end (or to the reject limit, or a stop);
/// `passes::run` checks what it committed and runs another when a failover
/// lost some.
pub(super) async fn run_pass(spec: LoadSpec, progress: &mut dyn LoadProgress) -> Result<LoadReport, LoadError> {
    let began = Instant::now();
    let (mut control, prepared) = setup::prepare(&spec, progress).await?;
    let opened = spec.input.open(&spec, &prepared)?;
    // Scale-out: the data nodes, when the table has shards on them.
    let mut distributed = Distributed::detect(&control, &prepared.tables, progress).await?;
    let load_id = setup::load_id(&spec, &opened);
    check_scale_out(&spec, distributed.is_some(), load_id.is_some())?;
    // This run's token in the journal, and the prefix of its batch ids.
    let nonce =
        format!("{:x}", super::journal::stable_hash(&[&std::process::id().to_string(), &format!("{:?}", std::time::SystemTime::now())]));
    let check = PassCheck::of(&opened, load_id.is_some() && distributed.is_none(), &nonce);
    let (resumed, before) = match &load_id {
        Some(id) => {
            open_journals(&spec, &mut control, &prepared, (&opened.names, opened.shared.as_ref()), &mut distributed, id, &nonce, progress)
                .await?
        }
        None => (unjournaled(&opened, progress), None),
    };
    let budget = spec.shared_budget.clone().unwrap_or_else(|| Arc::new(Budget::new(spec.memory_budget)));
    let rejects = Arc::new(std::sync::Mutex::new(RejectWriter::new(spec.reject_file.clone(), &opened.names, &opened.rejects, resumed > 0)));
    let ctx = worker_ctx(&spec, (&load_id, &nonce, before), &opened, &budget, &rejects);

    let (batch_tx, batch_rx) = flume::bounded::<Batch>(spec.workers * 2);
    let (outcome_tx, outcome_rx) = flume::unbounded::<CopyOutcome>();
    let sink = start_sink(&spec, ctx, distributed.as_mut(), &load_id, &nonce, batch_rx, outcome_tx).await?;
    let halt = Arc::new(AtomicBool::new(false));
    let (ack_tx, ack_rx) = flume::unbounded::<Completion>();
    let stages = start_stages(&spec, opened.source, prepared.kind.clone(), budget.clone(), halt.clone(), ack_tx)?;
    let Prepared { tables, tags, via_parent_reason, summary_table, by_ref, .. } = prepared;
    let (numbered, names) = (opened.numbered, opened.names.clone());
    let shared = opened.shared.as_ref().map(|s| s.inputs.clone());
    let mut control = Control::new(control, spec.target.clone(), (spec.retry_for, spec.cancel.clone()), load_id.clone());
    if shared.is_some() {
        control = control.shared();
    }
    let co = Coordinator::new(Parts {
        tables,
        control,
        target: spec.target.clone(),
        retry_for: spec.retry_for,
        budget,
        rejects: rejects.clone(),
        tags,
        by_ref,
        delivery: opened.delivery,
        batches: batch_tx,
        backfill: backfills(&spec, opened.delivery, sink.backfill),
        batching: batching(&spec),
        batch_prefix: nonce.clone(),
        bytes_total: opened.total_bytes,
        new_partitions: spec.new_partitions,
    });
    let wiring = Wiring {
        rows: stages.rows,
        outcomes: outcome_rx,
        acks: ack_rx,
        committed: CommittedPrefix::new(names.len().max(1)),
        stop: spec.cancel.clone(),
        halt,
        bytes_read: opened.bytes_read.clone(),
        began,
    };
    let mut report = co.run(wiring, progress).await;
    finish_stages(sink.workers, stages.reader, stages.parsers, &mut report).await;
    rejects.lock().expect("reject file lock").flush_pending()?;
    for c in report.acks.try_iter() {
        report.committed.absorb(&c);
    }
    let committed_through = through(&report.committed, &names, numbered);
    if let Some(id) = &load_id {
        close_journals(&mut report, id, (shared.as_deref(), &nonce), distributed.as_ref(), &committed_through).await;
    }
    let CoordinatorReport { mut stats, errors, interrupted, limit_hit, committed, .. } = report;
    if let Some(e) = errors.into_error() {
        return Err(e);
    }
    stats.bytes_committed = committed.bytes();
    stats.bytes_read = opened.bytes_read.load(Ordering::Relaxed);
    stats.seconds = began.elapsed().as_secs_f64();
    progress.update(&stats);
    let (reject_file, first_reject_sqlstate) = {
        let w = rejects.lock().expect("reject file lock");
        (w.path_if_written(), w.first_sqlstate())
    };
    Ok(LoadReport {
        table: summary_table,
        rows_per_second: stats.rows_loaded as f64 / stats.seconds.max(1e-9),
        mb_per_second: stats.bytes_read as f64 / 1048576.0 / stats.seconds.max(1e-9),
        reject_file,
        first_reject_sqlstate,
        via_parent_reason,
        reject_limit_exceeded: limit_hit,
        load_id,
        interrupted,
        committed_through,
        stats,
        check,
    })
}

/// What the pass checker needs of a pass: the prefix of its batch ids and
/// whether its input can be read again. Only a journaled load on one
/// server, of an input the user reruns, is checked.
#[derive(Debug, Clone)]
pub(crate) struct PassCheck {
    pub token: String,
    pub rereadable: bool,
}

impl PassCheck {
    /// The check of a pass with token `token` (its batch ids' prefix), if
    /// it is one: `on_one_server` when journaled and not distributed.
    fn of(opened: &super::input::Opened, on_one_server: bool, token: &str) -> Option<PassCheck> {
        (on_one_server && opened.shared.is_none() && opened.delivery == Delivery::Rerun)
            .then(|| PassCheck { token: token.to_owned(), rereadable: opened.identity.is_some() })
    }
}

/// A load with no id is not journaled: says so when the user would expect
/// to resume it. No row was committed before (0).
fn unjournaled(opened: &super::input::Opened, progress: &mut dyn LoadProgress) -> usize {
    if opened.identity.is_none() && opened.delivery == Delivery::Rerun {
        progress.notice(&format!(
            "{} without a load id is not journaled: if this load is interrupted it cannot be resumed, and running it again loads every row again; give {} to make it resumable",
            opened.names.join(", "),
            crate::setting::Setting::LoadId.with("NAME")
        ));
    }
    0
}

/// How the coordinator cuts batches and when it stops for rejects.
fn batching(spec: &LoadSpec) -> Batching {
    Batching {
        batch_bytes: spec.batch_bytes,
        batch_rows: spec.batch_rows.unwrap_or(usize::MAX),
        max_rejects: spec.max_rejects,
        flush_every: spec.flush_every,
        flush_when_idle: spec.flush_when_idle,
        workers: spec.workers.max(1),
    }
}

/// What the sink's workers share.
fn worker_ctx(
    spec: &LoadSpec,
    (load_id, nonce, before): (&Option<String>, &str, Option<super::journal::Before>),
    opened: &super::input::Opened,
    budget: &Arc<Budget>,
    rejects: &Arc<std::sync::Mutex<RejectWriter>>,
) -> Arc<WorkerCtx> {
    Arc::new(WorkerCtx {
        target: spec.target.clone(),
        load_id: load_id.clone(),
        owner: nonce.to_owned(),
        owned: opened.shared.as_ref().map(|s| s.inputs.len()),
        before,
        retry_for: spec.retry_for,
        budget: budget.clone(),
        rejects: rejects.clone(),
        turns: Default::default(),
        stop: spec.cancel.clone(),
    })
}

/// Refuses what a load cannot do with its table's layout: an upsert across
/// data nodes, an atomic load that is not distributed or not journaled.
fn check_scale_out(spec: &LoadSpec, distributed: bool, journaled: bool) -> Result<(), LoadError> {
    if spec.on_conflict.is_some() && distributed {
        return Err(LoadError::Setup(format!(
            "{} has shards on data nodes, and chute does not upsert across data nodes yet: load without {}",
            spec.table,
            crate::setting::Setting::OnConflict
        )));
    }
    if spec.atomic && !distributed {
        return Err(LoadError::Setup(format!("an atomic load applies to tables distributed over data nodes; {} is not", spec.table)));
    }
    if spec.atomic && !journaled {
        return Err(LoadError::Setup("an atomic load must be journaled: files, generated rows, or stdin with a load id".into()));
    }
    Ok(())
}

/// Closes the load's journal (on every data node too) with its outcome and
/// how far each input is committed; a shared input's position moves on. A
/// lost control connection must not hide the load's own outcome: failures
/// here are not the load's.
async fn close_journals(
    report: &mut CoordinatorReport,
    load_id: &str,
    (shared, nonce): (Option<&[u32]>, &str),
    distributed: Option<&Distributed>,
    committed_through: &[super::CommittedThrough],
) {
    let status = if report.errors.any() {
        "failed"
    } else if report.interrupted {
        "interrupted"
    } else {
        "done"
    };
    let _ = report.control.close_journal(status, committed_through).await;
    if let Some(inputs) = shared {
        let at: Vec<(u32, u64)> = inputs.iter().filter_map(|i| committed_through.get(*i as usize).map(|t| (*i, t.byte))).collect();
        let _ = report.control.advance(nonce, &at).await;
    }
    if let Some(d) = distributed {
        d.close_journals(load_id, status, committed_through).await;
    }
}

/// Registers the load in the journal (on every data node too) under its
/// lock and reads what earlier runs committed; returns how many rows that
/// is, and what the load's row said before (to claim it again after a
/// failover: a load on one server only).
#[allow(clippy::too_many_arguments)]
async fn open_journals(
    spec: &LoadSpec,
    control: &mut tokio_postgres::Client,
    prepared: &Prepared,
    (names, shared_inputs): (&[String], Option<&Shared>),
    distributed: &mut Option<Distributed>,
    id: &str,
    owner: &str,
    progress: &mut dyn LoadProgress,
) -> Result<(usize, Option<super::journal::Before>), LoadError> {
    let inputs = names.join(", ");
    let shared = shared_inputs.map(|s| s.inputs.as_slice());
    let entry = super::journal::Entry {
        load_id: id,
        table: &prepared.summary_table,
        inputs: &inputs,
        n_inputs: names.len().max(1),
        owner,
        shared,
        also: spec.skip_committed_by.as_deref(),
    };
    if shared.is_some() && distributed.is_some() {
        return Err(LoadError::Setup(format!("{} is distributed over data nodes: a Kafka topic cannot be consumed into it", spec.table)));
    }
    let mut committed = setup::open_journal(spec, control, &prepared.tables, entry, progress).await?;
    if let Some(s) = shared_inputs {
        let _ = s.seek.set(std::mem::take(&mut committed.positions));
        let _ = s.owner.set(owner.to_owned());
        let resumed: usize = prepared.tables.iter().map(|t| t.set_committed(&committed)).sum();
        return Ok((resumed, None));
    }
    if let Some(d) = distributed {
        d.open_journals(control, spec, entry, &mut committed, progress).await?;
    }
    let resumed: usize = prepared.tables.iter().map(|t| t.set_committed(&committed)).sum();
    if committed.rows > 0 {
        progress.notice(&format!("resuming load {id}: {} rows were committed by earlier runs and are skipped", committed.rows));
    }
    Ok((resumed, if distributed.is_some() { None } else { committed.before }))
}

/// Starts the sink: COPY workers on the one server, or on every server of a
/// distributed table.
async fn start_sink(
    spec: &LoadSpec,
    ctx: Arc<WorkerCtx>,
    distributed: Option<&mut Distributed>,
    load_id: &Option<String>,
    nonce: &str,
    batches: flume::Receiver<Batch>,
    outcomes: flume::Sender<CopyOutcome>,
) -> Result<Started, LoadError> {
    let workers = spec.workers.max(1);
    match distributed {
        Some(d) => {
            let atomic = match (load_id, spec.atomic) {
                (Some(id), true) => Some((id.clone(), nonce.to_owned(), spec.cancel.clone())),
                _ => None,
            };
            let nodes = std::mem::take(&mut d.nodes);
            NodeSink { coordinator: ctx, nodes, workers, retry_for: spec.retry_for, atomic }.start(batches, outcomes).await
        }
        None => {
            CopySink { ctx, workers, retry_for: spec.retry_for, index_memory: spec.backfill_index_memory }.start(batches, outcomes).await
        }
    }
}

/// The reader thread and the parse threads, and where their rows come out.
struct Stages {
    reader: std::thread::JoinHandle<Result<(), LoadError>>,
    parsers: Vec<std::thread::JoinHandle<()>>,
    rows: flume::Receiver<ChunkOut>,
}

/// Starts the reader (the source, on a thread of its own: reading may
/// block) and the parse threads (the kind: parse, encode, route), joined by
/// bounded queues so the input is read only as fast as rows leave.
fn start_stages(
    spec: &LoadSpec,
    source: Box<dyn super::source::Source>,
    kind: Arc<dyn Kind>,
    budget: Arc<Budget>,
    halt: Arc<AtomicBool>,
    acks: flume::Sender<Completion>,
) -> Result<Stages, LoadError> {
    let (chunk_tx, chunk_rx) = flume::bounded::<Chunk>(spec.parse_threads * 2);
    let (out_tx, out_rx) = flume::bounded::<ChunkOut>(spec.parse_threads * 2);
    let reader = {
        let halt = halt.clone();
        std::thread::Builder::new()
            .name("chute-reader".into())
            .spawn(move || source.read(&chunk_tx, &halt, &acks))
            .map_err(|e| LoadError::Setup(format!("cannot start the reader thread: {e}")))?
    };
    let mut parsers = Vec::new();
    for n in 0..spec.parse_threads.max(1) {
        let (rx, tx) = (chunk_rx.clone(), out_tx.clone());
        let (kind, budget, halt) = (kind.clone(), budget.clone(), halt.clone());
        parsers.push(
            std::thread::Builder::new()
                .name(format!("chute-parse-{n}"))
                .spawn(move || {
                    while let Ok(mut chunk) = rx.recv() {
                        let mut out = match &chunk.payload {
                            Payload::Oversized(big) => big.reject(chunk.input),
                            _ => kind.process(&chunk),
                        };
                        out.attach(chunk.ack.take());
                        budget.acquire(out.budget, &halt);
                        if tx.send(out).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| LoadError::Setup(format!("cannot start a parse thread: {e}")))?,
        );
    }
    Ok(Stages { reader, parsers, rows: out_rx })
}

/// Waits for the sink's workers, the reader and the parse threads to end,
/// adding their errors to the report's.
async fn finish_stages(
    workers: Vec<tokio::task::JoinHandle<Result<(), LoadError>>>,
    reader: std::thread::JoinHandle<Result<(), LoadError>>,
    parsers: Vec<std::thread::JoinHandle<()>>,
    report: &mut CoordinatorReport,
) {
    for w in workers {
        match w.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => report.errors.add(e),
            Err(e) => report.errors.add(LoadError::Setup(format!("a COPY worker failed: {e}"))),
        }
    }
    match reader.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => report.errors.add(e),
        Err(_) => report.errors.add(LoadError::Setup("the reader thread panicked".into())),
    }
    for p in parsers {
        if p.join().is_err() {
            report.errors.add(LoadError::Setup("a parse thread panicked".into()));
        }
    }
}

/// How far each input is committed, by name (numbered rows: one input,
/// its lines being sequence numbers plus one).
fn through(committed: &CommittedPrefix, names: &[String], numbered: bool) -> Vec<super::CommittedThrough> {
    committed
        .through()
        .into_iter()
        .enumerate()
        .map(|(i, (line, byte))| super::CommittedThrough {
            input: if numbered { "generated rows".to_owned() } else { names.get(i).cloned().unwrap_or_default() },
            line,
            byte,
        })
        .collect()
}

/// What the load fills before anyone sees it (see `coordinator::backfill`).
/// A service answers each request at its commit: no row waits for a whole partition.
fn backfills(spec: &LoadSpec, delivery: Delivery, filler: Result<super::sink::backfill::Filler, String>) -> Backfills {
    Backfills::new(
        if delivery == Delivery::Callers { Backfill::Off } else { spec.backfill },
        SwapSettings { lock_timeout: spec.lock_timeout, retry_for: spec.retry_for, after: spec.backfill_after },
        filler,
        spec.workers.max(1) + 1,
    )
}
