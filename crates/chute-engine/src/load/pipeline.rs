//! A load from start to end: set-up (tables, routing, journal), the threads
//! and tasks of each stage (the input reader, the parse threads, the
//! coordinator, the sink's workers) and the report. Each stage lives in its
//! own module; this one wires them together.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::ack::{CommittedPrefix, Completion};
use super::budget::Budget;
use super::coordinator::{Coordinator, JitDone, recover};
use super::input::{FileSource, Source};
use super::model::{Chunk, ChunkOut, TargetMap};
use super::rejects::RejectWriter;
use super::routing::JitCreator;
use super::sink::nodes::NodeSink;
use super::sink::{Batch, CopyOutcome, CopySink, Sink, WorkerCtx};
use super::source::{self, InputSpec};
use super::{Errors, InputFormat, LoadError, LoadProgress, LoadReport, LoadSpec, LoadStats};

/// Runs a load to the end (or to the reject limit).
pub async fn run(spec: LoadSpec, progress: &mut dyn LoadProgress) -> Result<LoadReport, LoadError> {
    let began = Instant::now();
    let (mut control, prepared) = recover::set_up(&spec, progress).await?;
    let budget = spec.shared_budget.clone().unwrap_or_else(|| Arc::new(Budget::new(spec.memory_budget)));
    let cancel = Arc::new(AtomicBool::new(false));
    let bytes_read = Arc::new(AtomicU64::new(0));

    // Open every input first, so a missing file fails before anything is loaded.
    let mut inputs = Vec::new();
    if spec.generator.is_none() {
        for i in &spec.inputs {
            let idle = if *i == InputSpec::Stdin { spec.flush_every } else { None };
            inputs.push(source::open_with(i, spec.memory_budget / 2, idle)?);
        }
    }
    let bytes_total = if spec.generator.is_some() { None } else { inputs.iter().map(|i| i.total_bytes).sum::<Option<u64>>() };
    let generated = spec.generator.as_ref().map(|(_, rows)| *rows);
    let names: Vec<InputSpec> = spec.inputs.clone();

    // Scale-out: the data nodes, when the table has shards on them.
    let mut distributed = super::sink::nodes::Distributed::detect(&control, &prepared.tables, progress).await?;
    if spec.atomic && distributed.is_none() {
        return Err(LoadError::Setup(format!("--atomic applies to tables distributed over data nodes; {} is not", spec.table)));
    }
    // The journal: what earlier runs of this load committed.
    let load_id = load_id_for(&spec, &inputs, &prepared.summary_table);
    if spec.atomic && load_id.is_none() {
        return Err(LoadError::Setup("--atomic needs a journaled load: files, generated rows, or stdin with --load-id".into()));
    }
    let mut resumed = 0;
    let nonce =
        format!("{:x}", super::journal::stable_hash(&[&std::process::id().to_string(), &format!("{:?}", std::time::SystemTime::now())]));
    if let Some(id) = &load_id {
        let described: Vec<String> = spec.inputs.iter().map(|i| i.display_name()).collect();
        let mut committed = recover::open_journal(
            &spec,
            &mut control,
            &prepared.tables,
            id,
            &prepared.summary_table,
            &described.join(", "),
            &nonce,
            progress,
        )
        .await?;
        if let Some(d) = &mut distributed {
            d.open_journals(&control, &spec, id, (&prepared.summary_table, &described.join(", "), &nonce), &mut committed, progress)
                .await?;
        }
        for t in &prepared.tables {
            resumed += t.set_committed(&committed);
        }
        if committed.rows > 0 {
            progress.notice(&format!("resuming load {id}: {} rows were committed by earlier runs and are skipped", committed.rows));
        }
    } else if spec.inputs.contains(&InputSpec::Stdin) {
        progress.notice("stdin without --load-id is not journaled: an interrupted load cannot be resumed");
    }

    let (chunk_tx, chunk_rx) = flume::bounded::<Chunk>(spec.parse_threads * 2);
    let (out_tx, out_rx) = flume::bounded::<ChunkOut>(spec.parse_threads * 2);
    let (batch_tx, batch_rx) = flume::bounded::<Batch>(spec.workers * 2);
    let (outcome_tx, outcome_rx) = flume::unbounded::<CopyOutcome>();
    let backfill_outcomes = outcome_tx.clone();

    // The sink: COPY workers, one connection each.
    let rejects = Arc::new(std::sync::Mutex::new(RejectWriter::new(
        spec.reject_file.clone(),
        &names,
        spec.generator.as_ref().map(|(w, _)| w.clone()),
        resumed > 0,
    )));
    let worker_ctx = Arc::new(WorkerCtx {
        target: spec.target.clone(),
        load_id: load_id.clone(),
        owner: nonce.clone(),
        retry_for: spec.retry_for,
        budget: budget.clone(),
        rejects: rejects.clone(),
    });
    // Backfill sessions are connections of their own to the one server.
    let backfill_ctx = distributed.is_none().then(|| worker_ctx.clone());
    let workers = match &mut distributed {
        Some(d) => {
            let nodes = std::mem::take(&mut d.nodes);
            let atomic = match (&load_id, spec.atomic) {
                (Some(id), true) => Some((id.clone(), nonce.clone(), spec.cancel.clone())),
                _ => None,
            };
            let sink = NodeSink { coordinator: worker_ctx, nodes, workers: spec.workers.max(1), retry_for: spec.retry_for, atomic };
            sink.start(batch_rx, outcome_tx).await?
        }
        None => CopySink { ctx: worker_ctx, workers: spec.workers.max(1), retry_for: spec.retry_for }.start(batch_rx, outcome_tx).await?,
    };

    // The reader, and the acknowledgements of what it read.
    let source: Box<dyn Source> = match (generated, prepared.boundary.clone()) {
        _ if spec.feed.is_some() => Box::new(super::input::FeedSource { feed: spec.feed.clone().expect("a feed") }),
        (Some(rows), _) => Box::new(super::gen_source::GenSource { rows }),
        (None, Some(format)) => Box::new(FileSource {
            inputs,
            format,
            skip: prepared.skip,
            chunk_bytes: spec.chunk_bytes,
            flush_every: spec.flush_every,
            max_record: super::oversized::max_record(spec.memory_budget),
            bytes_read: bytes_read.clone(),
        }),
        (None, None) => return Err(LoadError::Setup("no input and no generator".into())),
    };
    let (ack_tx, ack_rx) = flume::unbounded::<Completion>();
    let mut committed = CommittedPrefix::new(names.len().max(1));
    let reader = {
        let cancel = cancel.clone();
        std::thread::Builder::new()
            .name("chute-reader".into())
            .spawn(move || source.read(&chunk_tx, &cancel, &ack_tx))
            .map_err(|e| LoadError::Setup(format!("cannot start the reader thread: {e}")))?
    };
    // Parse, encode and route.
    let mut parsers = Vec::new();
    for n in 0..spec.parse_threads.max(1) {
        let (rx, tx) = (chunk_rx.clone(), out_tx.clone());
        let (processor, budget, cancel) = (prepared.processor.clone(), budget.clone(), cancel.clone());
        parsers.push(
            std::thread::Builder::new()
                .name(format!("chute-parse-{n}"))
                .spawn(move || {
                    while let Ok(mut chunk) = rx.recv() {
                        let mut out = match &chunk.oversized {
                            Some(big) => big.reject(chunk.input),
                            None => processor.process(&chunk),
                        };
                        out.attach(chunk.ack.take());
                        budget.acquire(out.budget, &cancel);
                        if tx.send(out).is_err() {
                            break;
                        }
                    }
                })
                .map_err(|e| LoadError::Setup(format!("cannot start a parse thread: {e}")))?,
        );
    }
    drop(chunk_rx);
    drop(out_tx);

    let (jit_tx, jit_rx) = flume::unbounded::<JitDone>();
    let mut co = Coordinator {
        tables: prepared.tables.clone(),
        batch_bytes: spec.batch_bytes,
        batch_rows: spec.batch_rows.unwrap_or(usize::MAX),
        accum: TargetMap::default(),
        accum_bytes: 0,
        batch_tx: Some(batch_tx),
        budget: budget.clone(),
        stats: LoadStats { bytes_total, ..LoadStats::default() },
        touched: HashSet::new(),
        rejects,
        max_rejects: spec.max_rejects,
        limit_hit: false,
        tags: prepared.tags,
        control,
        jit: Some(JitCreator::new(spec.retry_for)),
        jit_done: jit_tx,
        waiting: Vec::new(),
        ahead: Vec::new(),
        made_ahead: HashSet::new(),
        ahead_leaves: HashMap::new(),
        input_done: false,
        by_ref: prepared.by_ref,
        target: spec.target.clone(),
        batch_prefix: nonce,
        notices: Vec::new(),
        retry_for: spec.retry_for,
        in_flight: 0,
        vanished: Vec::new(),
        service: spec.feed.is_some(),
        load_id: load_id.clone(),
        backfill: super::coordinator::backfill::Backfills::new(
            // A service answers each request at its commit: no row waits for a whole partition.
            if spec.feed.is_some() { super::Backfill::Off } else { spec.backfill },
            backfill_ctx,
            backfill_outcomes,
            spec.backfill_index_memory.clone(),
            spec.workers.max(1) + 1,
        ),
    };
    if let Some(every) = spec.flush_every {
        co.backfill.long_idle = every;
    }
    let mut last_report = Instant::now();
    // How often stale batches are looked for: often enough for --flush-every.
    let tick = spec.flush_every.map_or(Duration::from_millis(50), |f| (f / 4).clamp(Duration::from_millis(2), Duration::from_millis(50)));
    let mut error = Errors::default();
    let mut parsing_done = false;
    let mut out_rx = Some(out_rx);
    let mut interrupted = false;
    loop {
        // Stopped: drop what is not sent yet (a resume makes it again) and
        // let the batches in flight finish.
        if spec.cancel.load(Ordering::Relaxed) && !interrupted {
            interrupted = true;
            cancel.store(true, Ordering::Relaxed);
            out_rx = None;
            parsing_done = true;
            co.drop_unsent();
            co.close_sink();
        }
        co.input_done = parsing_done;
        // Once every chunk is in and no row waits for a partition, send the rest.
        if parsing_done && co.batch_tx.is_some() && (co.jit_idle() || error.any()) {
            co.flush_all().await;
            co.close_backfills(true).await;
            // Rows of a batch whose leaf vanished come back to be routed
            // again: the queue stays open until every batch has answered.
            // Rows held for a backfill being attached, or parked for a
            // partition being made, still have to go.
            if (co.in_flight == 0 && co.jit_idle() && co.accum.is_empty()) || error.any() {
                co.close_sink();
            }
        }
        for n in std::mem::take(&mut co.notices) {
            progress.notice(&n);
        }
        if parsing_done && co.batch_tx.is_none() {
            match outcome_rx.recv_async().await {
                Ok(o) => co.absorb(o, &mut error),
                Err(_) => break,
            }
        } else {
            tokio::select! {
                out = async { out_rx.as_ref().expect("receiving").recv_async().await }, if !parsing_done => match out {
                    Ok(out) => if let Err(e) = co.merge(out).await { error.add(e); },
                    Err(_) => parsing_done = true,
                },
                j = jit_rx.recv_async() => if let Ok((creator, result)) = j
                    && let Err(e) = co.jit_finished(creator, result).await
                {
                    error.add(e);
                },
                o = outcome_rx.recv_async() => if let Ok(o) = o { co.absorb(o, &mut error) },
                c = ack_rx.recv_async() => if let Ok(c) = c { committed.absorb(&c); },
                _ = tokio::time::sleep(tick) => {}
            }
        }
        for c in ack_rx.try_iter() {
            committed.absorb(&c);
        }
        if !co.vanished.is_empty()
            && let Err(e) = co.reroute_vanished().await
        {
            error.add(e);
        }
        if let Err(e) = co.rejects.lock().expect("reject file lock").flush_pending() {
            error.add(e);
        }
        if (error.any() || co.limit_hit) && !cancel.load(Ordering::Relaxed) {
            cancel.store(true, Ordering::Relaxed);
        }
        if !parsing_done && (budget.used() * 4 > budget.limit * 3 || budget.has_waiters()) {
            co.flush_largest().await;
        }
        if co.backfill.any_open() && co.batch_tx.is_some() {
            co.close_backfills(false).await;
        }
        if spec.flush_when_idle && !parsing_done && co.batch_tx.is_some() && co.in_flight < spec.workers.max(1) && !co.accum.is_empty() {
            co.flush_all().await;
        }
        if let Some(age) = spec.flush_every
            && !parsing_done
            && co.batch_tx.is_some()
        {
            co.flush_stale(age).await;
        }
        if last_report.elapsed() >= Duration::from_millis(250) {
            co.stats.bytes_committed = committed.bytes();
            co.stats.bytes_read = bytes_read.load(Ordering::Relaxed);
            co.stats.seconds = began.elapsed().as_secs_f64();
            co.stats.partitions_touched = co.touched.len();
            progress.update(&co.stats);
            last_report = Instant::now();
        }
    }
    for w in workers {
        match w.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                error.add(e);
            }
            Err(e) => {
                error.add(LoadError::Setup(format!("a COPY worker failed: {e}")));
            }
        }
    }
    match reader.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            error.add(e);
        }
        Err(_) => {
            error.add(LoadError::Setup("the reader thread panicked".into()));
        }
    }
    for p in parsers {
        if p.join().is_err() {
            error.add(LoadError::Setup("a parse thread panicked".into()));
        }
    }
    co.rejects.lock().expect("reject file lock").flush_pending()?;
    // Every holder of a row is gone now: the last acknowledgements fire.
    drop(co.accum.drain());
    for c in ack_rx.try_iter() {
        committed.absorb(&c);
    }
    let committed_through = through(&committed, &names, generated.is_some());
    if let Some(id) = &load_id {
        let status = if error.any() {
            "failed"
        } else if interrupted {
            "interrupted"
        } else {
            "done"
        };
        // A lost control connection must not hide the load's own outcome.
        let _ = co.close_journal(id, status, &committed_through).await;
        if let Some(d) = &distributed {
            d.close_journals(id, status, &committed_through).await;
        }
    }
    if let Some(e) = error.into_error() {
        return Err(e);
    }
    co.finish_backfill_stats();
    let mut stats = co.stats;
    stats.bytes_committed = committed.bytes();
    stats.bytes_read = bytes_read.load(Ordering::Relaxed);
    stats.seconds = began.elapsed().as_secs_f64();
    stats.partitions_touched = co.touched.len();
    progress.update(&stats);
    Ok(LoadReport {
        table: prepared.summary_table,
        rows_per_second: stats.rows_loaded as f64 / stats.seconds.max(1e-9),
        mb_per_second: stats.bytes_read as f64 / 1048576.0 / stats.seconds.max(1e-9),
        reject_file: co.rejects.lock().expect("reject file lock").path_if_written(),
        via_parent_reason: prepared.via_parent_reason,
        reject_limit_exceeded: co.limit_hit,
        load_id,
        interrupted,
        committed_through,
        stats,
    })
}

/// How far each input is committed, by name (generated rows: one input,
/// its lines being sequence numbers plus one).
fn through(committed: &CommittedPrefix, names: &[InputSpec], generated: bool) -> Vec<super::CommittedThrough> {
    committed
        .through()
        .into_iter()
        .enumerate()
        .map(|(i, (line, byte))| super::CommittedThrough {
            input: if generated { "generated rows".to_owned() } else { names.get(i).map(InputSpec::display_name).unwrap_or_default() },
            line,
            byte,
        })
        .collect()
}

/// The journal's name for a load: `--load-id`, or derived from the table
/// and what is loaded (files: path, size and modification time; generated
/// rows: the workload and the row count). Stdin has no identity of its own.
fn load_id_for(spec: &LoadSpec, inputs: &[source::Input], tables: &str) -> Option<String> {
    if let Some(id) = &spec.load_id {
        return Some(id.clone());
    }
    if spec.feed.is_some() {
        return None;
    }
    // tsbs names its tables in a schema of the load's choosing: the schema-qualified tables tell the loads apart.
    let table = if spec.format == InputFormat::Tsbs { tables.to_owned() } else { spec.table.to_string() };
    if let Some((w, rows)) = &spec.generator {
        return Some(super::identity::generated_load(&table, w.as_ref(), *rows));
    }
    if spec.inputs.contains(&InputSpec::Stdin) {
        return None;
    }
    let ids: Vec<&str> = inputs.iter().map(|i| i.identity.as_str()).collect();
    let generated = spec.inputs.iter().all(|i| matches!(i, InputSpec::Generated(_)));
    Some(super::identity::inputs_load(&table, &ids, generated))
}
