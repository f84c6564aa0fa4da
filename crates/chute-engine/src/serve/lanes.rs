//! A lane is one long-running load per table (and input shape) that every
//! request for that table feeds: a request's rows become a chunk on the
//! lane's feed, so rows of many requests share the lane's COPY batches per
//! leaf, flushed when full or after `--max-delay`. A lane whose load fails
//! (the server stayed away longer than `--retry-for`) is started again; the
//! requests it held are answered 503.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use chute_core::ident::QualifiedName;
use chute_core::value::EpochUnit;
use tokio::sync::Mutex;

use super::ServeConfig;
use super::metrics::Metrics;
use crate::load::model::Chunk;
use crate::load::{Feed, InputFormat, LoadProgress, LoadSpec, LoadStats};

/// What a column of a lane's table holds, as far as line protocol cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColKind {
    Time,
    Text,
    Bool,
    Integer,
    Number,
    Other,
}

#[derive(Debug, Clone)]
pub(crate) struct LaneColumn {
    pub name: String,
    pub kind: ColKind,
    pub type_name: String,
}

/// The shape of the rows a lane takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// Line protocol, written as CSV in the lane's column order.
    Lines,
    /// `POST /v1/tables/…`: CSV or JSON Lines with these columns (or all).
    Table { format: TableFormat, columns: Option<Vec<String>>, delimiter: Option<u8>, null: Option<String>, epoch: Option<char> },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TableFormat {
    Csv,
    Jsonl,
}

pub(crate) struct Lane {
    /// Line protocol lanes: the columns rows are written in (time first).
    pub columns: Vec<LaneColumn>,
    tx: flume::Sender<Chunk>,
    /// Virtual offsets of the chunks sent (see `AckId`).
    next_offset: AtomicU64,
    /// Whether the lane's load is running (set while its set-up succeeded).
    pub up: Arc<AtomicBool>,
}

impl Lane {
    /// Sends a chunk of whole records, waiting while the lane's queue is full.
    pub(crate) async fn send(&self, chunk: Chunk) -> Result<(), ()> {
        self.tx.send_async(chunk).await.map_err(|_| ())
    }

    /// A fresh range of `len` virtual bytes for a chunk.
    pub(crate) fn offsets(&self, len: u64) -> (u64, u64) {
        let start = self.next_offset.fetch_add(len.max(1), Ordering::Relaxed);
        (start, start + len.max(1))
    }
}

/// Every lane, by table and shape; made on first use.
pub(crate) struct Lanes {
    config: Arc<ServeConfig>,
    metrics: Arc<Metrics>,
    lanes: Mutex<HashMap<(QualifiedName, Shape), Arc<Lane>>>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub stopping: Arc<AtomicBool>,
}

/// Why a lane cannot be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaneError {
    #[error("table {0} does not exist: create it (chute partition create) or run chute serve with --create-tables")]
    NoTable(String),
    #[error("table {table} has no time column: name it \"time\" (or partition the table by a timestamptz column)")]
    NoTime { table: String },
    #[error("PostgreSQL is unreachable: {0}")]
    Unreachable(String),
    #[error("{0}")]
    Sql(String),
}

impl Lanes {
    pub(crate) fn new(config: Arc<ServeConfig>, metrics: Arc<Metrics>) -> Lanes {
        Lanes {
            config,
            metrics,
            lanes: Mutex::new(HashMap::new()),
            tasks: std::sync::Mutex::new(Vec::new()),
            stopping: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The lane of `table` for rows of `shape`, made (and its load started) on first use.
    pub(crate) async fn get(&self, table: &QualifiedName, shape: &Shape) -> Result<Arc<Lane>, LaneError> {
        let key = (table.clone(), shape.clone());
        let mut lanes = self.lanes.lock().await;
        if let Some(l) = lanes.get(&key) {
            return Ok(l.clone());
        }
        let columns = match shape {
            Shape::Lines => read_columns(&self.config, table).await?,
            // The load reads the columns itself; the table must exist.
            Shape::Table { .. } => match read_columns(&self.config, table).await {
                Ok(_) | Err(LaneError::NoTime { .. }) => Vec::new(),
                Err(e) => return Err(e),
            },
        };
        let lane = self.start(table, shape, columns);
        lanes.insert(key, lane.clone());
        Ok(lane)
    }

    fn start(&self, table: &QualifiedName, shape: &Shape, columns: Vec<LaneColumn>) -> Arc<Lane> {
        let c = &self.config;
        let (tx, feed) = Feed::bounded(c.queue_depth);
        let mut spec = LoadSpec::new(c.target.clone(), table.clone(), Vec::new());
        spec.feed = Some(feed.clone());
        spec.workers = c.workers;
        spec.parse_threads = c.parse_threads;
        spec.batch_bytes = c.batch_bytes;
        spec.memory_budget = c.lane_memory;
        spec.flush_every = Some(c.max_delay);
        spec.retry_for = c.retry_for;
        spec.no_create_partitions = c.no_create_partitions;
        match shape {
            Shape::Lines => {
                spec.format = InputFormat::Csv;
                spec.columns = Some(columns.iter().map(|c| c.name.clone()).collect());
                spec.epoch = Some(EpochUnit::Nanos);
            }
            Shape::Table { format, columns, delimiter, null, epoch } => {
                spec.format = match format {
                    TableFormat::Csv => InputFormat::Csv,
                    TableFormat::Jsonl => InputFormat::Jsonl,
                };
                spec.columns = columns.clone();
                spec.delimiter = *delimiter;
                spec.null = null.clone();
                spec.epoch = epoch.map(|e| match e {
                    's' => EpochUnit::Seconds,
                    'm' => EpochUnit::Millis,
                    'u' => EpochUnit::Micros,
                    _ => EpochUnit::Nanos,
                });
            }
        }
        let up = Arc::new(AtomicBool::new(false));
        let lane = Arc::new(Lane { columns, tx, next_offset: AtomicU64::new(0), up: up.clone() });
        let (metrics, stopping, name) = (self.metrics.clone(), self.stopping.clone(), table.to_string());
        let task = tokio::spawn(async move {
            loop {
                let mut progress =
                    LaneProgress { table: name.clone(), metrics: metrics.clone(), last: LoadStats::default(), up: up.clone() };
                up.store(true, Ordering::Relaxed);
                let result = crate::load::run(spec.clone(), &mut progress).await;
                up.store(false, Ordering::Relaxed);
                if let Err(e) = &result {
                    metrics.lane_failed(&name);
                    eprintln!("chute serve: the load into {name} failed: {e}; starting it again");
                }
                // Every sender is gone (the lane was replaced or the service stops).
                if feed.0.is_disconnected() && feed.0.is_empty() {
                    return;
                }
                if stopping.load(Ordering::Relaxed) && result.is_ok() {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
        self.tasks.lock().expect("lane tasks").push(task);
        lane
    }

    /// Closes every lane and waits for their loads to commit what they hold.
    pub(crate) async fn close(&self) {
        self.stopping.store(true, Ordering::Relaxed);
        self.lanes.lock().await.clear();
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("lane tasks"));
        for t in tasks {
            let _ = t.await;
        }
    }

    /// Whether every lane's load is running.
    pub(crate) async fn all_up(&self) -> bool {
        self.lanes.lock().await.values().all(|l| l.up.load(Ordering::Relaxed))
    }
}

/// Reads the columns of `table`, time first.
pub(crate) async fn read_columns(config: &ServeConfig, table: &QualifiedName) -> Result<Vec<LaneColumn>, LaneError> {
    let client = config.target.connect().await.map_err(|e| LaneError::Unreachable(e.to_string()))?;
    let rows = client
        .query(
            "SELECT a.attname::text, t.typname::text, t.typcategory::text, \
                    (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''), \
                    coalesce(a.attnum = ANY (p.partattrs::int2[]), false) \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             LEFT JOIN pg_partitioned_table p ON p.partrelid = a.attrelid \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table.quoted()],
        )
        .await
        .map_err(
            |e| if crate::retry::connection_lost(&e) { LaneError::Unreachable(e.to_string()) } else { LaneError::Sql(e.to_string()) },
        )?;
    if rows.is_empty() {
        return Err(LaneError::NoTable(table.to_string()));
    }
    let mut time = None;
    let mut key_time = None;
    let mut columns = Vec::new();
    for r in &rows {
        let (name, typ, category, has_default, is_key): (String, String, String, bool, bool) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        let is_time_type = matches!(typ.as_str(), "timestamptz" | "timestamp");
        if name == "time" && is_time_type {
            time = Some(columns.len());
        } else if is_key && is_time_type && key_time.is_none() {
            key_time = Some(columns.len());
        }
        if has_default && name != "time" && !is_key {
            // Left to its default: serve never writes it.
            continue;
        }
        let kind = match (typ.as_str(), category.as_str()) {
            ("bool", _) => ColKind::Bool,
            ("int2" | "int4" | "int8", _) => ColKind::Integer,
            ("float4" | "float8" | "numeric", _) => ColKind::Number,
            (_, "S") => ColKind::Text,
            _ => ColKind::Other,
        };
        columns.push(LaneColumn { name, kind, type_name: typ });
    }
    let Some(t) = time.or(key_time) else { return Err(LaneError::NoTime { table: table.to_string() }) };
    let mut time_col = columns.remove(t);
    time_col.kind = ColKind::Time;
    columns.insert(0, time_col);
    Ok(columns)
}

/// Turns a lane's load progress into metrics and log lines.
struct LaneProgress {
    table: String,
    metrics: Arc<Metrics>,
    last: LoadStats,
    up: Arc<AtomicBool>,
}

impl LoadProgress for LaneProgress {
    fn update(&mut self, stats: &LoadStats) {
        self.up.store(true, Ordering::Relaxed);
        self.metrics.lane_progress(&self.table, &self.last, stats);
        self.last = stats.clone();
    }

    fn notice(&mut self, message: &str) {
        eprintln!("chute serve: {}: {message}", self.table);
    }
}
