//! Before any row moves: the kind is prepared (tables, routing), the input
//! opened into its source, and the journal opened under the load's lock.
//! Each step that reads the server is retried on a new connection while the
//! server is unreachable or restarting (`retry_for`): preparing only reads,
//! or creates with `IF NOT EXISTS`.
//!
//! This is the one place that asks what a load's input is ([`open`]): what
//! comes after it (the coordinator, the sinks, the report) sees a source, a
//! kind and an [`Opened`] description, never the input itself.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use tokio_postgres::Client;

use super::input::{self, InputSpec};
use super::journal::{self, Committed};
use super::kind::{self, Prepared};
use super::rejects::RejectOrigin;
use super::routing::{RouteMode, Routing, reread_tree};
use super::source::columnar::ColumnarSource;
use super::source::files::FileSource;
use super::source::generated::GenSource;
use super::source::kafka::KafkaSource;
use super::source::{FeedSource, Source};
use super::{InputFormat, LoadError, LoadInput, LoadProgress, LoadSpec};
use crate::retry::{self, Backoff, Lost};

/// Connects and prepares the load's kind (tables, columns, routing,
/// policies), starting over on a new connection while the server is
/// unreachable or restarting.
pub(crate) async fn prepare(spec: &LoadSpec, progress: &mut dyn LoadProgress) -> Result<(Client, Prepared), LoadError> {
    let mut backoff = Backoff::reconnect(spec.retry_for);
    loop {
        let attempt = async {
            let control = spec.target.connect().await?;
            let prepared = kind::prepare(spec, &control, progress).await?;
            Ok::<_, LoadError>((control, prepared))
        };
        match attempt.await {
            Ok(v) => return Ok(v),
            Err(e) if e.connection_lost() => wait_or_fail(&mut backoff, e, spec, progress).await?,
            Err(e) => return Err(e),
        }
    }
}

/// How rows that cannot be delivered are answered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Delivery {
    /// The user runs the same command again: the journal says what is left
    /// (files, stdin with a load id, generated rows).
    Rerun,
    /// Callers are answered per request and send a row again themselves
    /// (a service's feed): a row whose partition vanished fails its
    /// acknowledgement instead of being refused, and no row waits for a
    /// whole partition to be backfilled.
    Callers,
}

/// An input, opened: its source and what the rest of the load needs to
/// know about it, so that nothing after [`open`] asks which input it was.
pub(crate) struct Opened {
    pub source: Box<dyn Source>,
    /// How people, reject files and the journal name each input (none for
    /// rows that are not read from inputs).
    pub names: Vec<String>,
    /// The inputs' identities (files: path, size and modification time),
    /// from which the load id is derived; `None` when the input has none
    /// of its own (stdin, a service's feed): such a load is journaled only
    /// under a load id it is given.
    pub identity: Option<Identity>,
    /// The size of every input, when each has one (progress).
    pub total_bytes: Option<u64>,
    /// Input bytes read so far, before decompression (progress).
    pub bytes_read: Arc<AtomicU64>,
    pub delivery: Delivery,
    /// Where rejects go and how their records are found again.
    pub rejects: RejectOrigin,
    /// Rows are numbered, not read: "line" N is sequence number N - 1.
    pub numbered: bool,
    /// Inputs several runs share (Kafka partitions): the ones this run
    /// reads, and where the source learns from which position (see `journal`).
    pub shared: Option<Shared>,
}

pub(crate) struct Shared {
    pub inputs: Vec<u32>,
    pub seek: Arc<std::sync::OnceLock<std::collections::HashMap<u32, u64>>>,
    /// Told the run's token once the journal is open.
    pub owner: Arc<std::sync::OnceLock<String>>,
}

/// What a load's id is derived from.
pub(crate) enum Identity {
    /// Files and streams made in process, by their identities.
    Inputs { ids: Vec<String>, generated: bool },
    /// Rows a workload makes.
    Workload(Arc<dyn chute_core::generate::Workload>, u64),
}

/// Opens the load's input into its source (every file first, so a missing
/// one fails before anything is loaded).
pub(crate) fn open(spec: &LoadSpec, prepared: &Prepared) -> Result<Opened, LoadError> {
    let bytes_read = Arc::new(AtomicU64::new(0));
    match &spec.input {
        LoadInput::Read { inputs, format } => {
            let boundary =
                prepared.boundary.clone().ok_or_else(|| LoadError::Setup(format!("{format:?} input cannot be read from bytes")))?;
            let mut opened = Vec::with_capacity(inputs.len());
            for i in inputs {
                let idle = if *i == InputSpec::Stdin { spec.flush_every } else { None };
                opened.push(input::open_with(i, spec.memory_budget / 2, idle)?);
            }
            let total_bytes = opened.iter().map(|i| i.total_bytes).sum::<Option<u64>>();
            let identity = (!inputs.contains(&InputSpec::Stdin)).then(|| Identity::Inputs {
                ids: opened.iter().map(|i| i.identity.clone()).collect(),
                generated: inputs.iter().all(|i| matches!(i, InputSpec::Generated(_))),
            });
            let plain_files = inputs
                .iter()
                .map(|i| {
                    if let InputSpec::File(p) = i
                        && input::is_plain_file(p)
                    {
                        Some(p.clone())
                    } else {
                        None
                    }
                })
                .collect();
            let source = FileSource {
                inputs: opened,
                format: boundary,
                skip: prepared.skip,
                chunk_bytes: spec.chunk_bytes,
                flush_every: spec.flush_every,
                max_record: super::oversized::max_record(spec.memory_budget),
                bytes_read: bytes_read.clone(),
            };
            Ok(Opened {
                source: Box::new(source),
                names: inputs.iter().map(InputSpec::display_name).collect(),
                identity,
                total_bytes,
                bytes_read,
                delivery: Delivery::Rerun,
                rejects: RejectOrigin {
                    default_path: inputs.first().map(InputSpec::default_reject_file),
                    plain_files,
                    regenerate: None,
                    dead_letter: None,
                },
                numbered: false,
                shared: None,
            })
        }
        LoadInput::Generated { workload, rows } => Ok(Opened {
            source: Box::new(GenSource { rows: *rows }),
            names: Vec::new(),
            identity: Some(Identity::Workload(workload.clone(), *rows)),
            total_bytes: None,
            bytes_read,
            delivery: Delivery::Rerun,
            rejects: RejectOrigin {
                default_path: Some("generated.rejects".into()),
                plain_files: vec![None],
                regenerate: Some(workload.clone()),
                dead_letter: None,
            },
            numbered: true,
            shared: None,
        }),
        LoadInput::Columnar { inputs } => {
            // Every input opened (a stream taken) before any row moves.
            let opened = inputs.iter().map(super::columnar::open).collect::<Result<Vec<_>, _>>()?;
            let names: Vec<String> = opened.iter().map(|o| o.name.clone()).collect();
            let identity = opened
                .iter()
                .map(|o| o.identity.clone())
                .collect::<Option<Vec<String>>>()
                .map(|ids| Identity::Inputs { ids, generated: false });
            let total_bytes = opened.iter().map(|o| o.size).sum::<Option<u64>>();
            let default_path = names.first().map(|n| {
                let file = std::path::Path::new(n).file_name().map_or_else(|| n.clone(), |f| f.to_string_lossy().into_owned());
                std::path::PathBuf::from(format!("{file}.rejects"))
            });
            let source = ColumnarSource {
                inputs: opened,
                columns: prepared.read_columns.clone(),
                decoders: spec.parse_threads,
                bytes_read: bytes_read.clone(),
            };
            Ok(Opened {
                source: Box::new(source),
                names,
                identity,
                total_bytes,
                bytes_read,
                delivery: Delivery::Rerun,
                rejects: RejectOrigin { default_path, plain_files: vec![None; inputs.len()], regenerate: None, dead_letter: None },
                numbered: false,
                shared: None,
            })
        }
        LoadInput::Feed { feed, .. } => Ok(Opened {
            source: Box::new(FeedSource { feed: feed.clone() }),
            names: Vec::new(),
            identity: None,
            total_bytes: None,
            bytes_read,
            delivery: Delivery::Callers,
            rejects: RejectOrigin { default_path: None, plain_files: vec![None], regenerate: None, dead_letter: None },
            numbered: false,
            shared: None,
        }),
        LoadInput::Kafka { run, format } => {
            let topic = run.parts.first().map_or("kafka", |p| p.topic.as_str());
            Ok(Opened {
                source: Box::new(KafkaSource {
                    run: run.clone(),
                    json_arrays: *format == InputFormat::Jsonl,
                    chunk_bytes: spec.chunk_bytes,
                    bytes_read: bytes_read.clone(),
                }),
                names: run.names.clone(),
                identity: None,
                total_bytes: None,
                bytes_read,
                delivery: Delivery::Rerun,
                rejects: RejectOrigin {
                    default_path: Some(format!("{topic}.rejects").into()),
                    plain_files: vec![None; run.names.len().max(1)],
                    regenerate: None,
                    dead_letter: run.dead_letter.clone(),
                },
                numbered: false,
                shared: Some(Shared {
                    inputs: run.parts.iter().map(|p| p.input).collect(),
                    seek: run.seek.clone(),
                    owner: run.owner.clone(),
                }),
            })
        }
    }
}

/// The journal's name for a load: the id it was given, or derived from the
/// table and what is loaded (files: path, size and modification time;
/// generated rows: the workload and the row count). `None`: not journaled.
pub(crate) fn load_id(spec: &LoadSpec, opened: &Opened, prepared: &Prepared) -> Option<String> {
    if let Some(id) = &spec.load_id {
        return Some(id.clone());
    }
    // tsbs names its tables in a schema of the load's choosing: the schema-qualified tables tell the loads apart.
    let tsbs = matches!(spec.input, LoadInput::Read { format: InputFormat::Tsbs, .. });
    let table = if tsbs { prepared.summary_table.clone() } else { spec.table.to_string() };
    match opened.identity.as_ref()? {
        Identity::Workload(w, rows) => Some(super::identity::generated_load(&table, w.as_ref(), *rows)),
        Identity::Inputs { ids, generated } => {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            Some(super::identity::inputs_load(&table, &ids, *generated))
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
    tables: &[Arc<Routing>],
    entry: journal::Entry<'_>,
    progress: &mut dyn LoadProgress,
) -> Result<Committed, LoadError> {
    let mut backoff = Backoff::reconnect(spec.retry_for);
    loop {
        if control.is_closed() {
            *control = retry::connect(&spec.target, spec.retry_for, |_| {}).await?;
        }
        // The load's lock goes with the connection: taken on each new one.
        // Shared inputs are owned one by one instead (see `claim::fence`).
        let opened = async {
            if entry.shared.is_none() {
                super::claim::acquire(control, entry.load_id, spec.wait, progress).await?;
            }
            for t in tables.iter().filter(|t| matches!(t.mode, RouteMode::Tree(_))) {
                reread_tree(control, t).await?;
            }
            journal::open(control, &entry).await
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
/// itself once `retry_for` is over, or at once when the load is stopped
/// (nothing has moved yet: a Ctrl-C need not wait out the retries).
async fn wait_or_fail(backoff: &mut Backoff, e: LoadError, spec: &LoadSpec, progress: &mut dyn LoadProgress) -> Result<(), LoadError> {
    if backoff.attempts() == 0 {
        progress.notice(&format!("{e}; retrying for up to {:?}", spec.retry_for));
    }
    let stopped = || spec.cancel.load(std::sync::atomic::Ordering::Relaxed);
    let Some(pause) = backoff.next_pause().filter(|_| !stopped()) else { return Err(e) };
    let until = tokio::time::Instant::now() + pause;
    while tokio::time::Instant::now() < until && !stopped() {
        tokio::time::sleep_until(until.min(tokio::time::Instant::now() + std::time::Duration::from_millis(50))).await;
    }
    if stopped() { Err(e) } else { Ok(()) }
}
