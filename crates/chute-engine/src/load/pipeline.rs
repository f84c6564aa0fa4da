//! The stages of a load and the coordinator that connects them.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_core::parse::csv::{CsvOptions, CsvParser};
use chute_core::parse::jsonl::JsonlParser;
use chute_core::parse::text::{TextOptions, TextParser};
use chute_core::parse::{ChunkEnd, Fields, Format, RecordError, RecordPos, count_lines};
use chute_core::rowenc::{RowEncoder, RowOutcome, write_text_row};
use chute_core::value::EncodeContext;

use super::copy::{self, Batch, BatchPart, CopyOutcome, WorkerCtx};
pub(crate) use super::routing::{JitCreator, LeafRef, Routed, Routing};
use super::source::{self, InputSpec};
use super::target::{self, ColumnPlan};
use super::text_route::ServerKeyed;

use super::{InputFormat, LoadError, LoadProgress, LoadReport, LoadSpec, LoadStats};

mod recover;

/// Where a row goes: a leaf of one of the load's tables, or that table's
/// parent (the server routes), in binary or (for values the server must
/// parse) text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    pub table: u16,
    pub leaf: LeafRef,
    pub text: bool,
}

/// Maps keyed by target are on the per-row path; a target is a few small
/// integers, for which a multiply-and-rotate hash does as well as SipHash at a
/// fraction of the cost.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct TargetHasher(u64);

impl TargetHasher {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x517c_c1b7_2722_0a95);
    }
}

impl Hasher for TargetHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.add(u64::from(*b));
        }
    }
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }
    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
}

pub(crate) type TargetMap<V> = HashMap<Target, V, BuildHasherDefault<TargetHasher>>;

/// A piece of input cut at a record end.
pub(crate) struct Chunk {
    pub input: usize,
    pub data: Vec<u8>,
    pub first_line: u64,
    pub base_offset: u64,
    /// Generated input: the sequence numbers of the rows to make.
    pub seq: Option<(u64, u64)>,
    /// A record too large for the memory budget, skipped by the reader
    /// (`data` is empty): it becomes a reject, never rows.
    pub oversized: Option<super::oversized::Oversized>,
}

/// Rows of one chunk for one target, encoded.
#[derive(Default)]
pub(crate) struct Segment {
    pub data: Vec<u8>,
    /// End of each row in `data`.
    pub row_ends: Vec<u32>,
    /// The original records, for reject files (copies; empty when records
    /// are kept by position, see `offsets`).
    pub raw: Vec<u8>,
    /// End of each record, as if the records were in `raw` one after another.
    pub raw_ends: Vec<u32>,
    /// Where each record starts in its input, when records are kept by
    /// position only (plain files: a reject file reads them back from there).
    pub offsets: Vec<u64>,
    pub lines: Vec<u64>,
    /// The input each row came from.
    pub inputs: Vec<u16>,
    /// The input ranges whose rows for this target are all here (see `journal`).
    pub ranges: Vec<(u32, u64, u64)>,
}

impl Segment {
    pub(crate) fn push(&mut self, row: &[u8], raw: &[u8], line: u64, input: usize) {
        self.inputs.push(input as u16);
        self.data.extend_from_slice(row);
        self.row_ends.push(self.data.len() as u32);
        self.raw.extend_from_slice(raw);
        self.raw_ends.push(self.raw.len() as u32);
        self.lines.push(line);
    }

    /// [`Segment::push`] for a record kept by position: `len` bytes at `offset` of its input.
    pub(crate) fn push_ref(&mut self, row: &[u8], offset: u64, len: usize, line: u64, input: usize) {
        self.inputs.push(input as u16);
        self.data.extend_from_slice(row);
        self.row_ends.push(self.data.len() as u32);
        let end = self.raw_ends.last().copied().unwrap_or(0) + len as u32;
        self.raw_ends.push(end);
        self.offsets.push(offset);
        self.lines.push(line);
    }

    /// Row `i`'s original record: a copy, or where it is in its input.
    pub(crate) fn record(&self, i: usize) -> (Vec<u8>, Option<(u64, u32)>) {
        let from = if i == 0 { 0 } else { self.raw_ends[i - 1] };
        match self.offsets.get(i) {
            Some(&offset) => (Vec::new(), Some((offset, self.raw_ends[i] - from))),
            None => (self.raw[from as usize..self.raw_ends[i] as usize].to_vec(), None),
        }
    }

    fn bytes(&self) -> usize {
        self.data.len() + self.raw.len() + self.row_ends.len() * 16 + self.offsets.len() * 8
    }
}

/// A rejected record with where it came from.
pub(crate) struct Reject {
    pub input: usize,
    pub line: u64,
    pub raw: Vec<u8>,
    pub reason: String,
    /// With `raw` empty: the record is `len` bytes at `offset` of its input file.
    pub at: Option<(u64, u32)>,
}

impl Reject {
    /// Its share of the memory budget while it waits to be written.
    fn bytes(&self) -> usize {
        std::mem::size_of::<Reject>() + self.raw.len() + self.reason.len() + 32
    }
}

/// What a parse thread made of one chunk.
#[derive(Default)]
pub(crate) struct ChunkOut {
    pub segments: Vec<(Target, Segment)>,
    pub rejects: Vec<Reject>,
    /// Rows whose tag set has no id yet (tsbs): resolved by the coordinator.
    pub pending_tags: Vec<super::tsbs::PendingRow>,
    /// Rows whose time partition does not exist yet.
    pub pending_parts: Vec<PendingPart>,
    pub budget: usize,
    /// The chunk's input range: (input, start, end) in bytes or sequence numbers.
    pub range: (u32, u64, u64),
    /// Rows an earlier run of this load committed already.
    pub skipped: u64,
    /// The part of `budget` that `rejects` take: given back once they are
    /// written (a chunk of short bad rows is mostly rejects).
    pub reject_bytes: usize,
    /// Text rows whose key the server must parse before they are routed.
    pub server_keys: Vec<ServerKeyed>,
}

/// A row waiting for its partition to be created.
pub(crate) struct PendingPart {
    pub table: u16,
    pub start: i64,
    pub row: Vec<u8>,
    pub raw: Vec<u8>,
    pub line: u64,
    /// The row's position (for the journal) and its chunk's range.
    pub offset: u64,
    pub range: (u32, u64, u64),
    /// `Some`: a text row the server parses, routed on this key's wire value.
    pub key: Option<Vec<u8>>,
}

impl PendingPart {
    /// Its share of the memory budget.
    pub(crate) fn bytes(&self) -> usize {
        self.row.len() + self.raw.len()
    }
}

/// Where a row came from, for journal, resume and reject file.
#[derive(Clone, Copy)]
pub(crate) struct RowPos {
    pub input: usize,
    pub line: u64,
    pub offset: u64,
    pub range: (u32, u64, u64),
}

/// What one chunk's rows became.
#[derive(Default)]
pub(crate) struct Filed {
    pub segments: TargetMap<Segment>,
    pub pending: Vec<PendingPart>,
    pub rejects: Vec<Reject>,
    pub skipped: u64,
    /// Keep rows' records by position instead of copying them (plain files).
    pub by_ref: bool,
    pub server_keys: Vec<ServerKeyed>,
}

impl Filed {
    /// Files a routed row: into its segment, the pending list or the rejects,
    /// or nowhere when an earlier run committed it.
    pub(crate) fn file(&mut self, routing: &Routing, routed: Routed, table: u16, row: &[u8], raw: &[u8], at: RowPos) {
        match routed {
            Routed::To(leaf) => {
                if routing.is_committed(leaf, false, at.input, at.offset) {
                    self.skipped += 1;
                } else {
                    let seg = self.segments.entry(Target { table, leaf, text: false }).or_default();
                    if self.by_ref {
                        seg.push_ref(row, at.offset, raw.len(), at.line, at.input);
                    } else {
                        seg.push(row, raw, at.line, at.input);
                    }
                }
            }
            Routed::Missing { start } => self.pending.push(PendingPart {
                table,
                start,
                row: row.to_vec(),
                raw: raw.to_vec(),
                line: at.line,
                offset: at.offset,
                range: at.range,
                key: None,
            }),
            Routed::Reject(reason) => self.rejects.push(Reject { input: at.input, line: at.line, raw: raw.to_vec(), reason, at: None }),
        }
    }

    /// Packs the chunk's results with the budget they take.
    pub(crate) fn finish(mut self, range: (u32, u64, u64)) -> ChunkOut {
        self.rejects.sort_by_key(|r| r.line);
        let mut segments: Vec<(Target, Segment)> = self.segments.into_iter().collect();
        for (_, s) in &mut segments {
            s.ranges.push(range);
        }
        let reject_bytes = self.rejects.iter().map(Reject::bytes).sum::<usize>();
        let budget = segments.iter().map(|(_, s)| s.bytes()).sum::<usize>()
            + self.pending.iter().map(PendingPart::bytes).sum::<usize>()
            + self.server_keys.iter().map(ServerKeyed::bytes).sum::<usize>()
            + reject_bytes;
        ChunkOut {
            reject_bytes,
            segments,
            rejects: self.rejects,
            pending_tags: Vec::new(),
            pending_parts: self.pending,
            budget,
            range,
            skipped: self.skipped,
            server_keys: self.server_keys,
        }
    }
}

/// Turns a chunk of input into rows for targets: the per-format part of a
/// load. Called from several parse threads at once.
pub(crate) trait ChunkProcessor: Send + Sync {
    fn process(&self, chunk: &Chunk) -> ChunkOut;
}

/// One budget of bytes for everything in flight: parse threads take from it
/// before they hand rows on, COPY workers give back when rows are sent.
pub(crate) struct Budget {
    used: Mutex<usize>,
    freed: Condvar,
    /// Parse threads waiting in `acquire`: the coordinator sends what it
    /// holds when one waits, since a chunk larger than what is left (or than
    /// the whole budget, which waits for an empty one) would otherwise wait
    /// for rows nobody sends.
    waiting: std::sync::atomic::AtomicUsize,
    pub limit: usize,
}

impl Budget {
    fn new(limit: usize) -> Self {
        Budget { used: Mutex::new(0), freed: Condvar::new(), waiting: Default::default(), limit }
    }

    /// Waits until `n` bytes fit (a single request larger than the whole
    /// budget waits for an empty budget instead of forever).
    fn acquire(&self, n: usize, cancel: &AtomicBool) {
        let mut used = self.used.lock().expect("budget lock");
        if *used > 0 && *used + n > self.limit {
            self.waiting.fetch_add(1, Ordering::Relaxed);
            while *used > 0 && *used + n > self.limit && !cancel.load(Ordering::Relaxed) {
                used = self.freed.wait_timeout(used, Duration::from_millis(100)).expect("budget lock").0;
            }
            self.waiting.fetch_sub(1, Ordering::Relaxed);
        }
        *used += n;
    }

    /// Counts `n` bytes at once, without waiting (rows that come back to
    /// the coordinator after their budget was given back).
    pub fn take(&self, n: usize) {
        *self.used.lock().expect("budget lock") += n;
    }

    pub fn release(&self, n: usize) {
        let mut used = self.used.lock().expect("budget lock");
        *used = used.saturating_sub(n);
        self.freed.notify_all();
    }

    fn used(&self) -> usize {
        *self.used.lock().expect("budget lock")
    }

    /// Whether a parse thread waits for room.
    fn has_waiters(&self) -> bool {
        self.waiting.load(Ordering::Relaxed) > 0
    }
}

fn make_format(spec: &LoadSpec, plan: &ColumnPlan) -> Result<Box<dyn Format>, LoadError> {
    let setup = |e: chute_core::parse::OptionsError| LoadError::Setup(e.to_string());
    Ok(match spec.format {
        InputFormat::Csv => {
            let mut o = CsvOptions::default();
            if let Some(d) = spec.delimiter {
                o.delimiter = d;
            }
            if let Some(n) = &spec.null {
                o.null = n.as_bytes().to_vec();
            }
            o.header = spec.header;
            o.expected_fields = Some(plan.targets.len());
            Box::new(CsvParser::new(o).map_err(setup)?)
        }
        InputFormat::Text => {
            let mut o = TextOptions::default();
            if let Some(d) = spec.delimiter {
                o.delimiter = d;
            }
            if let Some(n) = &spec.null {
                o.null = n.as_bytes().to_vec();
            }
            o.header = spec.header;
            o.expected_fields = Some(plan.targets.len());
            Box::new(TextParser::new(o).map_err(setup)?)
        }
        InputFormat::Jsonl => Box::new(JsonlParser::new(plan.targets.iter().map(|t| t.name.clone()).collect()).map_err(setup)?),
        InputFormat::Tsbs => return Err(LoadError::Setup("tsbs input is prepared separately".into())),
    })
}

/// The session TimeZone, which text COPY uses for timestamps without an offset.
pub(crate) async fn session_zone(client: &tokio_postgres::Client) -> Option<jiff::tz::TimeZone> {
    let name: String = client.query_one("SHOW TimeZone", &[]).await.ok()?.get(0);
    chute_core::partman::interval::zone(&name).ok()
}

/// Finds a header to skip at the start of an input: `Some((bytes, lines))`,
/// or `None` when more bytes are needed.
pub(crate) type SkipHeader = fn(&[u8]) -> Result<Option<(usize, u64)>, String>;

/// Everything format-specific a load needs, made before any row moves.
pub(crate) struct Prepared {
    pub tables: Vec<Arc<Routing>>,
    pub processor: Arc<dyn ChunkProcessor>,
    /// Cuts the input into chunks (the format's boundary finder); none for
    /// generated input.
    pub boundary: Option<Arc<dyn Format>>,
    /// Bytes and lines to skip at the start of every input (a tsbs header).
    pub skip: Option<SkipHeader>,
    pub tags: Option<super::tsbs::TagResolver>,
    pub via_parent_reason: Option<String>,
    pub summary_table: String,
    /// Rows keep their records by position, not as copies (see `Filed::by_ref`).
    pub by_ref: bool,
}

/// Prepares a load of csv, text or jsonl into one table.
async fn prepare_single(spec: &LoadSpec, control: &tokio_postgres::Client, progress: &mut dyn LoadProgress) -> Result<Prepared, LoadError> {
    let info = target::resolve_load_table(control, spec, None).await?;
    let columns = target::table_columns(control, info.oid).await?;
    let plan = target::plan_columns(&info.name, &columns, spec.columns.as_deref())?;
    let ctx = EncodeContext { session_tz: session_zone(control).await, epoch: spec.epoch };
    let (routing, via_parent_reason) = super::routing::build(spec, control, &info, &plan, progress).await?;
    let routing = Arc::new(routing);
    let format: Arc<dyn Format> = Arc::from(make_format(spec, &plan)?);
    let by_ref = spec.inputs.iter().all(|i| matches!(i, InputSpec::File(p) if source::is_plain_file(p)));
    let processor = Arc::new(GenericProcessor {
        format: format.clone(),
        encoder: RowEncoder::new(plan.targets.clone(), ctx),
        routing: routing.clone(),
        by_ref,
    });
    Ok(Prepared {
        tables: vec![routing],
        processor,
        boundary: Some(format),
        skip: None,
        tags: None,
        via_parent_reason,
        summary_table: info.name.to_string(),
        by_ref,
    })
}

/// Runs a load to the end (or to the reject limit).
pub async fn run(spec: LoadSpec, progress: &mut dyn LoadProgress) -> Result<LoadReport, LoadError> {
    let began = Instant::now();
    let (mut control, prepared) = recover::set_up(&spec, progress).await?;
    let budget = Arc::new(Budget::new(spec.memory_budget));
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

    // The journal: what earlier runs of this load committed.
    let load_id = load_id_for(&spec, &inputs, &prepared.summary_table);
    let mut resumed = 0;
    let nonce =
        format!("{:x}", super::journal::stable_hash(&[&std::process::id().to_string(), &format!("{:?}", std::time::SystemTime::now())]));
    if let Some(id) = &load_id {
        let described: Vec<String> = spec.inputs.iter().map(|i| i.display_name()).collect();
        let committed =
            recover::open_journal(&spec, &mut control, id, &prepared.summary_table, &described.join(", "), &nonce, progress).await?;
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

    // COPY workers.
    let mut workers = Vec::new();
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
    for _ in 0..spec.workers.max(1) {
        let client = crate::retry::connect(&spec.target, spec.retry_for, |_| {}).await?;
        let (rx, tx, ctx) = (batch_rx.clone(), outcome_tx.clone(), worker_ctx.clone());
        workers.push(tokio::spawn(copy::worker(client, rx, tx, ctx)));
    }
    drop(batch_rx);
    drop(outcome_tx);

    // The reader.
    let reader = {
        let (format, skip, cancel, bytes_read, chunk_bytes, flush_every) =
            (prepared.boundary.clone(), prepared.skip, cancel.clone(), bytes_read.clone(), spec.chunk_bytes, spec.flush_every);
        let max_record = super::oversized::max_record(spec.memory_budget);
        std::thread::Builder::new()
            .name("chute-reader".into())
            .spawn(move || match (generated, format) {
                (Some(rows), _) => {
                    super::gen_source::emit_ranges(rows, &chunk_tx, &cancel);
                    Ok(())
                }
                (None, Some(format)) => {
                    let cut = Cutting { format: format.as_ref(), skip, chunk_bytes, flush_every, max_record };
                    read_inputs(inputs, cut, &chunk_tx, &cancel, &bytes_read)
                }
                (None, None) => Err(LoadError::Setup("no input and no generator".into())),
            })
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
                    while let Ok(chunk) = rx.recv() {
                        let out = match &chunk.oversized {
                            Some(big) => big.reject(chunk.input),
                            None => processor.process(&chunk),
                        };
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
        load_id: load_id.clone(),
    };
    let mut last_report = Instant::now();
    let mut error: Option<LoadError> = None;
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
            co.batch_tx = None;
        }
        co.input_done = parsing_done;
        // Once every chunk is in and no row waits for a partition, send the rest.
        if parsing_done && co.batch_tx.is_some() && (co.jit_idle() || error.is_some()) {
            co.flush_all().await;
            // Rows of a batch whose leaf vanished come back to be routed
            // again: the queue stays open until every batch has answered.
            if co.in_flight == 0 || error.is_some() {
                co.batch_tx = None;
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
                    Ok(out) => if let Err(e) = co.merge(out).await { error.get_or_insert(e); },
                    Err(_) => parsing_done = true,
                },
                j = jit_rx.recv_async() => if let Ok((creator, result)) = j
                    && let Err(e) = co.jit_finished(creator, result).await
                {
                    error.get_or_insert(e);
                },
                o = outcome_rx.recv_async() => if let Ok(o) = o { co.absorb(o, &mut error) },
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        if !co.vanished.is_empty()
            && let Err(e) = co.reroute_vanished().await
        {
            error.get_or_insert(e);
        }
        if let Err(e) = co.rejects.lock().expect("reject file lock").flush_pending() {
            error.get_or_insert(e);
        }
        if (error.is_some() || co.limit_hit) && !cancel.load(Ordering::Relaxed) {
            cancel.store(true, Ordering::Relaxed);
        }
        if !parsing_done && (budget.used() * 4 > budget.limit * 3 || budget.has_waiters()) {
            co.flush_largest().await;
        }
        if let Some(age) = spec.flush_every
            && !parsing_done
            && co.batch_tx.is_some()
        {
            co.flush_stale(age).await;
        }
        if last_report.elapsed() >= Duration::from_millis(250) {
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
                error.get_or_insert(e);
            }
            Err(e) => {
                error.get_or_insert(LoadError::Setup(format!("a COPY worker failed: {e}")));
            }
        }
    }
    match reader.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            error.get_or_insert(e);
        }
        Err(_) => {
            error.get_or_insert(LoadError::Setup("the reader thread panicked".into()));
        }
    }
    for p in parsers {
        if p.join().is_err() {
            error.get_or_insert(LoadError::Setup("a parse thread panicked".into()));
        }
    }
    co.rejects.lock().expect("reject file lock").flush_pending()?;
    if let Some(id) = &load_id {
        let status = if error.is_some() {
            "failed"
        } else if interrupted {
            "interrupted"
        } else {
            "done"
        };
        // A lost control connection must not hide the load's own outcome.
        let _ = co.close_journal(id, status).await;
    }
    if let Some(e) = error {
        return Err(e);
    }
    let mut stats = co.stats;
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
        stats,
    })
}

/// The journal's name for a load: `--load-id`, or derived from the table
/// and what is loaded (files: path, size and modification time; generated
/// rows: the workload and the row count). Stdin has no identity of its own.
fn load_id_for(spec: &LoadSpec, inputs: &[source::Input], tables: &str) -> Option<String> {
    if let Some(id) = &spec.load_id {
        return Some(id.clone());
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

/// Reads every input in turn and cuts it into chunks at record ends.
/// How the reader cuts its inputs into chunks.
struct Cutting<'a> {
    format: &'a dyn Format,
    /// Skips a header block (tsbs).
    skip: Option<SkipHeader>,
    chunk_bytes: usize,
    /// Send what is buffered when the input pauses or it has waited this long.
    flush_every: Option<Duration>,
    /// A record longer than this is skipped and rejected, not held.
    max_record: usize,
}

fn read_inputs(
    inputs: Vec<source::Input>,
    cut: Cutting<'_>,
    tx: &flume::Sender<Chunk>,
    cancel: &AtomicBool,
    bytes_read: &AtomicU64,
) -> Result<(), LoadError> {
    let Cutting { format, skip, chunk_bytes, flush_every, max_record } = cut;
    let mut done_before = 0u64;
    for (index, mut input) in inputs.into_iter().enumerate() {
        let name = input.spec.display_name();
        let io_err = |e: std::io::Error| LoadError::Input { input: name.clone(), message: e.to_string() };
        let mut buf: Vec<u8> = Vec::with_capacity(chunk_bytes * 2);
        let (mut line, mut offset) = (1u64, 0u64);
        let mut eof = false;
        let mut skipping = skip;
        // A record too large to hold, being skipped: `buf` starts with its stand-in.
        let mut big: Option<super::oversized::Skipping> = None;
        while !eof || !buf.is_empty() || big.is_some() {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            // Fill up to one chunk's worth past what is buffered; with
            // --flush-every, stop early when the input pauses or what is
            // buffered has waited that long, and send the whole records.
            let want = buf.len() + chunk_bytes;
            let filling = Instant::now();
            while buf.len() < want && !eof {
                let at = buf.len();
                buf.resize(want, 0);
                // `None`: the input paused (a live stream waits for its producer).
                let n = match input.reader.read(&mut buf[at..]) {
                    Ok(n) => Some(n),
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
                    Err(e) => return Err(io_err(e)),
                };
                buf.truncate(at + n.unwrap_or(0));
                match n {
                    Some(0) => eof = true,
                    Some(_) if flush_every.is_none_or(|f| filling.elapsed() < f) => {}
                    _ if !buf.is_empty() => break,
                    _ => {}
                }
            }
            bytes_read.store(done_before + input.read_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
            if let Some(f) = skipping {
                match f(&buf).map_err(|message| LoadError::Input { input: name.clone(), message })? {
                    Some((bytes, lines)) => {
                        buf.drain(..bytes);
                        offset += bytes as u64;
                        line += lines;
                        skipping = None;
                    }
                    None if eof => return Err(LoadError::Input { input: name, message: "the file ends inside its header".into() }),
                    None => continue,
                }
            }
            if let Some(b) = big.as_mut() {
                if let Some(whole) = b.advance(format, &mut buf, eof, &mut line, &mut offset) {
                    big = None;
                    if tx
                        .send(Chunk {
                            input: index,
                            data: Vec::new(),
                            first_line: whole.line,
                            base_offset: whole.offset,
                            seq: None,
                            oversized: Some(whole),
                        })
                        .is_err()
                    {
                        return Ok(());
                    }
                }
                continue;
            }
            let Some(mut end) = format.last_record_end(&buf, eof) else {
                if eof {
                    break;
                }
                if buf.len() > max_record
                    && let Some(b) = super::oversized::Skipping::start(format, &mut buf, &mut line, &mut offset, max_record)
                {
                    big = Some(b);
                    continue;
                }
                if buf.len() > 256 << 20 {
                    return Err(LoadError::Input {
                        input: name,
                        message: format!("no record ends within 256 MiB after line {line}: an unterminated quote, or the wrong --format?"),
                    });
                }
                continue;
            };
            let mut stop = false;
            if let Some(n) = format.end_of_data(&buf[..end]) {
                end = n;
                stop = true;
            }
            let rest = buf.split_off(end);
            let lines = count_lines(&buf);
            let data = std::mem::replace(&mut buf, rest);
            if !data.is_empty()
                && tx.send(Chunk { input: index, data, first_line: line, base_offset: offset, seq: None, oversized: None }).is_err()
            {
                return Ok(());
            }
            line += lines;
            offset += end as u64;
            if stop {
                break;
            }
        }
        done_before += input.read_bytes.load(Ordering::Relaxed);
        bytes_read.store(done_before, Ordering::Relaxed);
    }
    Ok(())
}

/// csv, text and jsonl into one table: parse, encode, route.
struct GenericProcessor {
    format: Arc<dyn Format>,
    encoder: RowEncoder,
    routing: Arc<Routing>,
    /// Every input is a plain file: a rejected row's record can be read back
    /// from it, so rows in flight need not carry a copy (half the memory per
    /// row, so twice the rows per batch under the same budget).
    by_ref: bool,
}

impl ChunkProcessor for GenericProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let (encoder, routing) = (&self.encoder, &self.routing);
        let range = (chunk.input as u32, chunk.base_offset, chunk.base_offset + chunk.data.len() as u64);
        let mut filed = Filed { by_ref: self.by_ref, ..Filed::default() };
        let mut row = Vec::with_capacity(512);
        let mut rc = routing.ctx();
        let mut parse_errors = Vec::new();
        let mut on_record = |fields: &Fields, pos: RecordPos| {
            let raw = pos.slice(&chunk.data, chunk.base_offset);
            let at = RowPos { input: chunk.input, line: pos.line, offset: pos.offset, range };
            row.clear();
            match encoder.encode(fields, &mut row) {
                RowOutcome::Binary => {
                    let routed = routing.route(&mut rc, &row);
                    filed.file(routing, routed, 0, &row, raw, at);
                }
                RowOutcome::NeedsServer { .. } => {
                    // The server parses this row; chute routes it on its key.
                    write_text_row(fields, &mut row);
                    super::text_route::file_text_row(encoder, routing, &rc, fields, &row, raw, at, &mut filed);
                }
                RowOutcome::Invalid { column, reason } => {
                    let reason = format!("column {}: {reason}", encoder.columns[column].name);
                    filed.rejects.push(Reject { input: chunk.input, line: pos.line, raw: raw.to_vec(), reason, at: None })
                }
                RowOutcome::FieldCount { expected, found } => filed.rejects.push(Reject {
                    input: chunk.input,
                    line: pos.line,
                    raw: raw.to_vec(),
                    reason: format!("expected {expected} fields, found {found}"),
                    at: None,
                }),
            }
        };
        let mut on_error = |e: RecordError| {
            let raw = e.pos.slice(&chunk.data, chunk.base_offset).to_vec();
            parse_errors.push(Reject { input: chunk.input, line: e.pos.line, raw, reason: e.reason, at: None });
        };
        // The reader already cut the input at an end-of-data marker.
        let _: ChunkEnd = self.format.parse_chunk(&chunk.data, chunk.first_line, chunk.base_offset, &mut on_record, &mut on_error);
        filed.rejects.append(&mut parse_errors);
        filed.finish(range)
    }
}

/// Rows waiting for a target to fill a batch.
#[derive(Default)]
struct Accum {
    seg: Segment,
    budget: usize,
    /// When its first row arrived (for --flush-every).
    since: Option<Instant>,
}

struct Coordinator {
    tables: Vec<Arc<Routing>>,
    batch_bytes: usize,
    accum: TargetMap<Accum>,
    accum_bytes: usize,
    batch_tx: Option<flume::Sender<Batch>>,
    budget: Arc<Budget>,
    stats: LoadStats,
    touched: HashSet<QualifiedName>,
    rejects: Arc<std::sync::Mutex<RejectWriter>>,
    max_rejects: Option<u64>,
    limit_hit: bool,
    tags: Option<super::tsbs::TagResolver>,
    control: tokio_postgres::Client,
    /// The partition creator; `None` while a creation task has it.
    jit: Option<JitCreator>,
    jit_done: flume::Sender<JitDone>,
    /// Rows whose partition is being (or is about to be) created.
    waiting: Vec<PendingPart>,
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
    /// Messages for the user, shown by the main loop.
    notices: Vec<String>,
    /// How long lost connections are retried (`--retry-for`).
    retry_for: Duration,
    /// Batches sent to the workers and not answered yet.
    in_flight: usize,
    /// Batch parts whose leaf vanished, waiting to be routed again.
    vanished: Vec<BatchPart>,
    /// The journaled load whose lock the control connection holds (see `claim`).
    load_id: Option<String>,
}

/// One segment per target (a chunk may have produced several).
fn combine(segments: Vec<(Target, Segment)>) -> TargetMap<Segment> {
    let mut out: TargetMap<Segment> = TargetMap::with_capacity_and_hasher(segments.len(), Default::default());
    for (t, s) in segments {
        match out.get_mut(&t) {
            Some(have) => append(have, &s),
            None => {
                out.insert(t, s);
            }
        }
    }
    out
}

fn append(into: &mut Segment, seg: &Segment) {
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

/// (input, start, end): a chunk's place in its input.
type ChunkRange = (u32, u64, u64);

type JitDone = (JitCreator, Result<JitMade, LoadError>);

/// What one creation task made.
#[derive(Default)]
struct JitMade {
    created: usize,
    /// (table, start) rows asked for: rows still without a partition there are refused.
    asked: Vec<(u16, i64)>,
    /// Partitions made ahead of the rows, by name, with their interval.
    ahead: Vec<(QualifiedName, u16, i64)>,
}

/// Intervals made ahead of the rows at most, whatever the policy's premake.
const MAX_AHEAD: u32 = 8;

impl Coordinator {
    async fn merge(&mut self, mut out: ChunkOut) -> Result<(), LoadError> {
        for r in std::mem::take(&mut out.rejects) {
            self.reject(r);
        }
        // On file before any of this chunk's rows can commit (a resume skips them).
        self.rejects.lock().expect("reject file lock").flush_pending()?;
        self.budget.release(out.reject_bytes);
        self.stats.rows_skipped += out.skipped;
        if !out.pending_tags.is_empty() {
            let filed = self.resolve_tags(std::mem::take(&mut out.pending_tags)).await?;
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
            super::text_route::resolve(&self.control, &self.tables[0], std::mem::take(&mut out.server_keys), &mut filed).await;
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
        self.waiting.extend(std::mem::take(&mut out.pending_parts));
        let segment_budget = out.budget.saturating_sub(waiting_bytes + out.reject_bytes);
        self.accumulate(combine(out.segments), segment_budget).await;
        self.start_jit();
        Ok(())
    }

    /// Appends a chunk's rows to the accumulators, all of one target at
    /// once, then sends the accumulators that are full.
    async fn accumulate(&mut self, segments: TargetMap<Segment>, budget: usize) {
        if segments.is_empty() {
            self.budget.release(budget);
            return;
        }
        let per_segment = budget / segments.len();
        self.budget.release(budget - per_segment * segments.len());
        let mut full = Vec::new();
        for (target, seg) in segments {
            let a = self.accum.entry(target).or_default();
            a.since.get_or_insert_with(Instant::now);
            append(&mut a.seg, &seg);
            a.budget += per_segment;
            self.accum_bytes += seg.data.len();
            if a.seg.data.len() >= self.batch_bytes {
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
    fn start_jit(&mut self) {
        if self.jit.is_none() {
            return;
        }
        let ahead = self.waiting.is_empty();
        let wanted: Vec<(u16, i64)> = if !ahead {
            self.waiting.iter().map(|p| (p.table, p.start)).collect()
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

    /// Queues the partitions of the policy's premake intervals after the
    /// newest interval rows asked for.
    fn plan_ahead(&mut self, asked: &[(u16, i64)]) {
        let mut newest: HashMap<u16, i64> = HashMap::new();
        for &(table, start) in asked {
            let n = newest.entry(table).or_insert(start);
            *n = (*n).max(start);
        }
        for (table, start) in newest {
            let Some(j) = self.tables[usize::from(table)].jit() else { continue };
            let Ok(tz) = j.policy.zone() else { continue };
            let mut at = start;
            for _ in 0..j.policy.premake.min(MAX_AHEAD) {
                let Ok(next) = j.policy.interval.next(at, &tz) else { break };
                if j.limits().keys.max_key.is_some_and(|max| next > max) {
                    break;
                }
                if self.made_ahead.insert((table, next)) {
                    self.ahead.push((table, next));
                }
                at = next;
            }
        }
    }

    /// A creation finished: route the rows that waited for it.
    async fn jit_finished(&mut self, creator: JitCreator, result: Result<JitMade, LoadError>) -> Result<(), LoadError> {
        self.jit = Some(creator);
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
        self.plan_ahead(&asked);
        self.ahead_leaves.extend(ahead.into_iter().map(|(name, table, start)| (name, (table, start))));
        // Grouped by target and chunk: a batch may hold a chunk's rows for a
        // leaf only whole (see `journal`), but rows that waited can fill many
        // batches, and must, or one worker gets them all.
        let mut groups: HashMap<(Target, ChunkRange), (Segment, usize), BuildHasherDefault<TargetHasher>> = HashMap::default();
        let mut still = Vec::new();
        let mut rejects = Vec::new();
        // One routing context per table: the tree as just re-read, the limits as of now.
        let mut ctxs: Vec<_> = self.tables.iter().map(|t| t.ctx()).collect();
        for p in std::mem::take(&mut self.waiting) {
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
                }
                Routed::To(leaf) => {
                    let (seg, budget) = groups.entry((Target { table: p.table, leaf, text }, p.range)).or_default();
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
                    });
                }
                Routed::Missing { .. } => still.push(p),
                Routed::Reject(reason) => {
                    self.budget.release(p.bytes());
                    rejects.push(Reject { input: p.range.0 as usize, line: p.line, raw: p.raw, reason, at: None });
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
        self.start_jit();
        Ok(())
    }

    /// No partition is being created and no row waits for one.
    fn jit_idle(&self) -> bool {
        self.jit.is_some() && self.waiting.is_empty()
    }

    fn reject(&mut self, r: Reject) {
        // A resumed load, or a retried batch, does not repeat a reject line.
        if !self.rejects.lock().expect("reject file lock").add(r) {
            return;
        }
        self.stats.rows_rejected += 1;
        if self.max_rejects.is_some_and(|m| self.stats.rows_rejected > m) {
            self.limit_hit = true;
        }
    }

    /// Takes a target's accumulated rows out as one batch part.
    fn take_part(&mut self, target: Target) -> Option<(BatchPart, usize)> {
        let a = self.accum.remove(&target)?;
        if a.seg.row_ends.is_empty() {
            self.budget.release(a.budget);
            return None;
        }
        self.accum_bytes -= a.seg.data.len();
        let table = &self.tables[usize::from(target.table)];
        let name = table.name(target.leaf);
        let insert = table.insert.clone();
        let sql = if target.text {
            format!("COPY {} {} FROM STDIN", name.quoted(), table.copy_list)
        } else {
            format!("COPY {} {} FROM STDIN (FORMAT binary)", name.quoted(), table.copy_list)
        };
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
            insert,
            body,
            seg,
        };
        Some((part, a.budget))
    }

    async fn send(&mut self, parts: Vec<BatchPart>, budget: usize) {
        if parts.is_empty() {
            return;
        }
        let batch = Batch { parts, budget, batch_id: format!("{}-{}", self.batch_prefix, self.stats.batches) };
        self.stats.batches += 1;
        self.in_flight += 1;
        if let Some(tx) = &self.batch_tx
            && tx.send_async(batch).await.is_err()
        {
            // The workers are gone; their error is reported.
        }
    }

    async fn dispatch(&mut self, target: Target) {
        if let Some((part, budget)) = self.take_part(target) {
            self.send(vec![part], budget).await;
        }
    }

    /// Sends several targets' rows, packed into batches of about
    /// `batch_bytes` each: many small per-leaf buffers share a commit.
    async fn dispatch_packed(&mut self, targets: Vec<Target>) {
        let (mut parts, mut budget, mut bytes) = (Vec::new(), 0, 0);
        for t in targets {
            let Some((part, b)) = self.take_part(t) else { continue };
            bytes += part.body.len();
            budget += b;
            parts.push(part);
            if bytes >= self.batch_bytes {
                self.send(std::mem::take(&mut parts), std::mem::take(&mut budget)).await;
                bytes = 0;
            }
        }
        self.send(parts, budget).await;
    }

    async fn flush_all(&mut self) {
        let targets: Vec<Target> = self.accum.keys().copied().collect();
        self.dispatch_packed(targets).await;
    }

    /// --flush-every: send the accumulators whose first row has waited `age`.
    async fn flush_stale(&mut self, age: Duration) {
        let stale: Vec<Target> = self.accum.iter().filter(|(_, a)| a.since.is_some_and(|t| t.elapsed() >= age)).map(|(t, _)| *t).collect();
        if !stale.is_empty() {
            self.dispatch_packed(stale).await;
        }
    }

    /// Under budget pressure: send the fullest accumulators now, partial or not.
    async fn flush_largest(&mut self) {
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

    fn absorb(&mut self, o: CopyOutcome, error: &mut Option<LoadError>) {
        match o {
            CopyOutcome::Loaded { rows, bytes } => {
                self.in_flight = self.in_flight.saturating_sub(1);
                self.stats.rows_loaded += rows;
                self.stats.bytes_sent += bytes;
            }
            CopyOutcome::Rejected { new } => {
                self.stats.rows_rejected += new;
                if self.max_rejects.is_some_and(|m| self.stats.rows_rejected > m) {
                    self.limit_hit = true;
                }
            }
            CopyOutcome::Failed(e) => {
                self.in_flight = self.in_flight.saturating_sub(1);
                error.get_or_insert(e);
            }
            CopyOutcome::Retrying { message } => self.notices.push(message),
            CopyOutcome::Vanished(parts) => self.vanished.extend(parts),
        }
    }

    /// Forgets rows not yet sent (an interrupted load); a resume makes them again.
    fn drop_unsent(&mut self) {
        for (_, a) in self.accum.drain() {
            self.budget.release(a.budget);
        }
        self.accum_bytes = 0;
        for p in std::mem::take(&mut self.waiting) {
            self.budget.release(p.bytes());
        }
    }
}

/// Copies `len` bytes at `offset` of a plain input file (a record kept by
/// position) to `out` in pieces, so a large record is never held whole.
/// Returns the last byte copied. `Err(Ok(e))`: the input failed; `Err(Err(e))`: `out` did.
fn copy_record(
    path: &std::path::Path,
    offset: u64,
    len: u32,
    out: &mut impl Write,
) -> Result<Option<u8>, Result<std::io::Error, std::io::Error>> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path).map_err(Ok)?;
    f.seek(std::io::SeekFrom::Start(offset)).map_err(Ok)?;
    let mut f = f.take(u64::from(len));
    let mut piece = vec![0u8; (len as usize).min(64 << 10)];
    let (mut left, mut last) = (len as usize, None);
    while left > 0 {
        let n = f.read(&mut piece).map_err(Ok)?;
        if n == 0 {
            return Err(Ok(std::io::ErrorKind::UnexpectedEof.into()));
        }
        out.write_all(&piece[..n]).map_err(Err)?;
        last = Some(piece[n - 1]);
        left -= n;
    }
    Ok(last)
}

/// Writes rejected records: a comment line with where and why, then the
/// record exactly as it was in the input.
pub(crate) struct RejectWriter {
    /// Generated input keeps no raw records: they are made again from their
    /// sequence number (the line number minus one).
    workload: Option<Arc<dyn chute_core::generate::Workload>>,
    path: Option<std::path::PathBuf>,
    names: Vec<String>,
    /// Plain input files, by input index, to read records kept by position from.
    files: Vec<Option<std::path::PathBuf>>,
    pending: Vec<Reject>,
    file: Option<std::io::BufWriter<std::fs::File>>,
    written: bool,
    /// (input, line) of the rejects an earlier run of this load wrote to the
    /// file, so a resume does not write them again; each is forgotten once
    /// met again, since a resume reads every row once. Within a run no row is
    /// rejected twice (a retried batch filters its own, see `copy`), so
    /// nothing else is remembered and memory stays flat however many rows
    /// are rejected.
    seen: HashSet<(usize, u64)>,
    /// Resuming: append to the file (after reading what it holds); otherwise
    /// start it afresh.
    append: bool,
}

impl RejectWriter {
    fn new(
        path: Option<std::path::PathBuf>,
        inputs: &[InputSpec],
        workload: Option<Arc<dyn chute_core::generate::Workload>>,
        resuming: bool,
    ) -> Self {
        let path = match &workload {
            Some(_) => path.or_else(|| Some("generated.rejects".into())),
            None => path.or_else(|| inputs.first().map(|i| i.default_reject_file())),
        };
        let names: Vec<String> =
            if workload.is_some() { vec!["generated row".into()] } else { inputs.iter().map(|i| i.display_name()).collect() };
        let mut seen = HashSet::new();
        if resuming && let Some(text) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            for line in text.lines().filter_map(|l| l.strip_prefix("# ")) {
                for (i, n) in names.iter().enumerate() {
                    if let Some(rest) = line.strip_prefix(n.as_str()).and_then(|r| r.strip_prefix(':'))
                        && let Some(num) = rest.split(':').next().and_then(|d| d.parse::<u64>().ok())
                    {
                        seen.insert((i, num));
                    }
                }
            }
        }
        // Only a plain file is read back: a compressed one's offsets are not its file's.
        let files = inputs
            .iter()
            .map(|i| {
                if let InputSpec::File(p) = i
                    && source::is_plain_file(p)
                {
                    Some(p.clone())
                } else {
                    None
                }
            })
            .collect();
        RejectWriter { workload, path, names, files, pending: Vec::new(), file: None, written: false, seen, append: resuming }
    }

    /// Queues a reject; `false` when the file already has it.
    pub(crate) fn add(&mut self, r: Reject) -> bool {
        if !self.seen.is_empty() && self.seen.remove(&(r.input, r.line)) {
            return false;
        }
        self.pending.push(r);
        true
    }

    pub(crate) fn flush_pending(&mut self) -> Result<(), LoadError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let Some(path) = self.path.clone() else { return Ok(()) };
        let err = |e: std::io::Error| LoadError::RejectFile { path: path.display().to_string(), message: e.to_string() };
        if self.file.is_none() {
            let f =
                std::fs::OpenOptions::new().create(true).append(self.append).write(true).truncate(!self.append).open(&path).map_err(err)?;
            self.file = Some(std::io::BufWriter::new(f));
        }
        let f = self.file.as_mut().expect("opened above");
        for mut r in self.pending.drain(..) {
            if r.raw.is_empty()
                && let Some(w) = &self.workload
            {
                w.write_csv(r.line.saturating_sub(1), &mut r.raw);
            }
            let name = self.names.get(r.input).map(String::as_str).unwrap_or("input");
            // A record kept by position in an input that cannot be read back (an oversized one from stdin).
            let lost = if r.raw.is_empty() && r.at.is_some() && !matches!(self.files.get(r.input), Some(Some(_))) {
                " (the record is not copied here: only an uncompressed file is read back)"
            } else {
                ""
            };
            writeln!(f, "# {name}:{}: {}{lost}", r.line, r.reason.replace('\n', " ")).map_err(err)?;
            let last = match (r.at, self.files.get(r.input)) {
                (Some((offset, len)), Some(Some(input))) if r.raw.is_empty() => {
                    copy_record(input, offset, len, f).map_err(|e| match e {
                        Ok(e) => LoadError::Input { input: input.display().to_string(), message: e.to_string() },
                        Err(e) => err(e),
                    })?
                }
                _ => {
                    f.write_all(&r.raw).map_err(err)?;
                    r.raw.last().copied()
                }
            };
            if last != Some(b'\n') {
                f.write_all(b"\n").map_err(err)?;
            }
        }
        f.flush().map_err(err)?;
        self.written = true;
        Ok(())
    }

    fn path_if_written(&self) -> Option<String> {
        self.written.then(|| self.path.as_ref().map(|p| p.display().to_string())).flatten()
    }
}
