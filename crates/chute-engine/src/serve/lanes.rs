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
use super::catalog::{LaneColumn, LaneError, read_columns};
use super::create::Wanted;
use super::metrics::Metrics;
use crate::load::model::Chunk;
use crate::load::{Feed, InputFormat, LoadInput, LoadProgress, LoadSpec, LoadStats};

/// The shape of the rows a lane takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// Line protocol: parsed values in the lane's column order (`load::values`).
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
    /// The lane's load id in the journal (see `keys`).
    pub id: String,
    /// The table it loads.
    pub table: QualifiedName,
    /// Line protocol lanes: the columns rows are written in (time first).
    pub columns: Vec<LaneColumn>,
    tx: flume::Sender<Chunk>,
    /// Offsets of the chunks sent: journaled, so never used twice (a block
    /// of its own per lane, see `Keys::offset_block`).
    next_offset: AtomicU64,
    /// Whether the lane's load is running (set while its set-up succeeded).
    pub up: Arc<AtomicBool>,
    /// Counts the runs of the lane's load; a run reads the journal after
    /// its number is set.
    generation: Arc<AtomicU64>,
    /// Stops the current run (the lane starts the next one).
    cancel: Arc<std::sync::Mutex<Arc<AtomicBool>>>,
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

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Ends the current run of the lane's load (what is in flight is
    /// committed or dropped) and waits until the next one has started, so
    /// that it has read the journal; `false` if that took longer than `wait`.
    pub(crate) async fn restart(&self, wait: Duration) -> bool {
        let before = self.generation();
        self.cancel.lock().expect("lane cancel").store(true, Ordering::SeqCst);
        let began = std::time::Instant::now();
        while self.generation() == before {
            if began.elapsed() > wait {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

/// Every lane, by table and shape; made on first use.
pub(crate) struct Lanes {
    config: Arc<ServeConfig>,
    metrics: Arc<Metrics>,
    lanes: Mutex<HashMap<(QualifiedName, Shape), Arc<Lane>>>,
    tasks: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    pub stopping: Arc<AtomicBool>,
    pub keys: Arc<super::keys::Keys>,
}

impl Lanes {
    pub(crate) fn new(config: Arc<ServeConfig>, metrics: Arc<Metrics>) -> Lanes {
        Lanes {
            config,
            metrics,
            lanes: Mutex::new(HashMap::new()),
            tasks: std::sync::Mutex::new(Vec::new()),
            stopping: Arc::new(AtomicBool::new(false)),
            keys: Arc::new(super::keys::Keys::new()),
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
        let lane = self.start(table, shape, columns).await?;
        lanes.insert(key, lane.clone());
        Ok(lane)
    }

    /// The line-protocol lane of `table`, whose columns include `wanted`;
    /// with `--create-tables` the table or the columns are made first (and
    /// the lane replaced by one that writes the new columns).
    pub(crate) async fn lines(&self, table: &QualifiedName, wanted: &[(String, Wanted)]) -> Result<Arc<Lane>, LaneError> {
        let key = (table.clone(), Shape::Lines);
        let mut lanes = self.lanes.lock().await;
        let existing = lanes.get(&key).cloned();
        let lane = match existing {
            Some(l) => l,
            None => {
                let columns = match read_columns(&self.config, table).await {
                    Err(LaneError::NoTable(_)) if self.config.create_tables => {
                        super::create::create_table(&self.config, table, wanted).await?;
                        read_columns(&self.config, table).await?
                    }
                    other => other?,
                };
                let lane = self.start(table, &Shape::Lines, columns).await?;
                lanes.insert(key.clone(), lane.clone());
                lane
            }
        };
        if !self.config.create_tables {
            return Ok(lane);
        }
        let missing: Vec<(String, Wanted)> =
            wanted.iter().filter(|(name, _)| name != "time" && !lane.columns.iter().any(|c| &c.name == name)).cloned().collect();
        if missing.is_empty() {
            return Ok(lane);
        }
        super::create::add_columns(&self.config, table, &missing).await?;
        // The old lane finishes what it holds; new rows go to one that writes the new columns.
        let columns = read_columns(&self.config, table).await?;
        let lane = self.start(table, &Shape::Lines, columns).await?;
        lanes.insert(key, lane.clone());
        Ok(lane)
    }

    async fn start(&self, table: &QualifiedName, shape: &Shape, columns: Vec<LaneColumn>) -> Result<Arc<Lane>, LaneError> {
        let c = &self.config;
        let base = self.keys.offset_block(c).await.map_err(LaneError::Unreachable)?;
        let id = match shape {
            Shape::Lines => format!("serve {table}"),
            other => format!("serve {table} {:x}", crate::load::journal::stable_hash(&[&format!("{other:?}")])),
        };
        // What is older than the idempotency window is forgotten: the lane reads less when it starts.
        self.keys.prune(c, &id, c.idempotency_window).await.map_err(LaneError::Unreachable)?;
        let (tx, feed) = Feed::bounded(c.queue_depth);
        let format = match shape {
            Shape::Lines => InputFormat::Values,
            Shape::Table { format: TableFormat::Csv, .. } => InputFormat::Csv,
            Shape::Table { format: TableFormat::Jsonl, .. } => InputFormat::Jsonl,
        };
        let mut spec = LoadSpec::new(c.target.clone(), table.clone(), LoadInput::Feed { feed: feed.clone(), format });
        // Journaled: a keyed request's retry skips what its earlier attempts committed.
        spec.load_id = Some(id.clone());
        spec.wait = true;
        spec.workers = c.workers;
        spec.parse_threads = c.parse_threads;
        spec.batch_bytes = c.batch_bytes;
        spec.batch_rows = c.batch_rows;
        spec.memory_budget = c.lane_memory;
        spec.flush_every = Some(c.max_delay);
        spec.flush_when_idle = true;
        spec.retry_for = c.retry_for;
        spec.no_create_partitions = c.no_create_partitions;
        match shape {
            Shape::Lines => {
                spec.columns = Some(columns.iter().map(|c| c.name.clone()).collect());
                spec.epoch = Some(EpochUnit::Nanos);
            }
            Shape::Table { columns, delimiter, null, epoch, .. } => {
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
        let generation = Arc::new(AtomicU64::new(0));
        let cancel = Arc::new(std::sync::Mutex::new(Arc::new(AtomicBool::new(false))));
        let lane = Arc::new(Lane {
            id,
            table: table.clone(),
            columns,
            tx,
            next_offset: AtomicU64::new(base),
            up: up.clone(),
            generation: generation.clone(),
            cancel: cancel.clone(),
        });
        let (metrics, stopping, name) = (self.metrics.clone(), self.stopping.clone(), table.to_string());
        let task = tokio::spawn(async move {
            loop {
                let mut progress = LaneProgress {
                    table: name.clone(),
                    metrics: metrics.clone(),
                    last: LoadStats::default(),
                    up: up.clone(),
                    feed: feed.clone(),
                };
                up.store(true, Ordering::Relaxed);
                let stop = Arc::new(AtomicBool::new(false));
                *cancel.lock().expect("lane cancel") = stop.clone();
                let mut spec = spec.clone();
                spec.cancel = stop.clone();
                generation.fetch_add(1, Ordering::SeqCst);
                let result = crate::load::run(spec, &mut progress).await;
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
                // Asked to start again (see `Lane::restart`): at once.
                if !stop.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
            }
        });
        self.tasks.lock().expect("lane tasks").push(task);
        // Every ten minutes, while the lane is in use.
        let (keys, config, weak, id) = (self.keys.clone(), self.config.clone(), Arc::downgrade(&lane), lane.id.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(600)).await;
                if weak.strong_count() == 0 {
                    return;
                }
                if let Err(e) = keys.prune(&config, &id, config.idempotency_window).await {
                    eprintln!("chute serve: cannot forget old idempotency keys of {id}: {e}");
                }
            }
        });
        Ok(lane)
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

/// Turns a lane's load progress into metrics and log lines.
struct LaneProgress {
    table: String,
    metrics: Arc<Metrics>,
    last: LoadStats,
    up: Arc<AtomicBool>,
    feed: Feed,
}

impl LoadProgress for LaneProgress {
    fn update(&mut self, stats: &LoadStats) {
        self.up.store(true, Ordering::Relaxed);
        self.metrics.lane_progress(&self.table, &self.last, stats);
        self.metrics.queued(&self.table, self.feed.0.len());
        self.last = stats.clone();
    }

    fn notice(&mut self, message: &str) {
        eprintln!("chute serve: {}: {message}", self.table);
    }
}
