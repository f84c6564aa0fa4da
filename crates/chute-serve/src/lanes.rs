//! A lane is one long-running load per table (and input shape) that every
//! request for that table feeds: a request's rows become chunks on the
//! lane's feed, so rows of many requests share the lane's COPY batches per
//! leaf, flushed when full or after `--max-delay`. Every lane's load takes
//! its memory from one budget the lanes share (see `memory`).
//!
//! A lane is made on first use, after `guard` has admitted its table and,
//! for CSV and JSON Lines, after the columns the request names are found
//! in it (a request naming a column the table lacks gets 400 at once; its
//! lane is never started). Making lanes and changing a table
//! (`--create-tables`) are serialised per table by the table's `Gate`, not
//! under the lock of every lane: requests for other tables go on meanwhile.
//! Requests that need new columns of the same table at the same time leave
//! them with the gate, and one `ALTER TABLE` adds them all.
//!
//! A lane whose load fails is closed (its requests are answered 503 with
//! the reason) and the next request makes it again, reading the table
//! afresh; only a server that stayed away longer than `--retry-for` makes a
//! lane start its load again by itself, under a supervisor with a stated
//! budget (`LANE_RESTARTS` within `LANE_RESTART_WINDOW`; past it the lane
//! is closed like any other). Before each start the lane's
//! journal is brought up to date with a TRUNCATE or VACUUM FULL of its
//! leaves (`keys::repair_journal`), so that neither stops it.

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
use chute_engine::load::budget::Budget;
use chute_engine::load::model::Chunk;
use chute_engine::load::{Feed, FeedFormat, FeedInput, Input, LoadProgress, LoadSpec, LoadStats, TextFormat};
use chute_engine::retry::Classify;

/// The shape of the rows a lane takes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) enum Shape {
    /// Line protocol: parsed values in the lane's column order (`load::values`).
    Lines,
    /// `POST /v1/tables/…`: CSV or JSON Lines with these columns (or all).
    Table {
        format: TableFormat,
        columns: Option<Vec<String>>,
        delimiter: Option<u8>,
        null: Option<String>,
        epoch: Option<char>,
        /// The request's own upsert action (`?on_conflict=`), where the table allows one.
        on_conflict: Option<chute_core::upsert::ConflictAction>,
    },
    /// Prometheus remote write: samples as series id, time and value (`load::kind::samples`).
    Samples,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum TableFormat {
    Csv,
    Jsonl,
}

pub(crate) struct Lane {
    /// The lane's load id in the journal (see `keys`).
    pub id: String,
    /// Tells this lane from the one that replaced it.
    serial: u64,
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
    /// When the current run started (it reads the journal after that).
    started: Started,
    /// Stops the current run (the lane starts the next one).
    cancel: RunCancel,
    /// Why the lane's load failed, for the requests it held.
    failure: Arc<std::sync::Mutex<Option<String>>>,
}

type Started = Arc<std::sync::Mutex<tokio::time::Instant>>;

impl Lane {
    /// Sends a chunk of whole records, waiting while the lane's queue is full.
    pub(crate) async fn send(&self, chunk: Chunk) -> Result<(), ()> {
        self.tx.send_async(chunk).await.map_err(|_| ())
    }

    /// A fresh range of `len` virtual bytes for a request's rows.
    pub(crate) fn offsets(&self, len: u64) -> (u64, u64) {
        let start = self.next_offset.fetch_add(len.max(1), Ordering::Relaxed);
        (start, start + len.max(1))
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }

    /// Why the lane's load failed, if it did.
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure.lock().expect("lane failure").clone()
    }

    /// Makes sure the lane's current run started after `since` (so that it
    /// read the journal after then), ending the one before; `false` if that
    /// took longer than `wait`. Requests that ask at once share one new run.
    pub(crate) async fn run_since(&self, since: tokio::time::Instant, wait: Duration) -> bool {
        let began = std::time::Instant::now();
        while *self.started.lock().expect("lane start") <= since {
            if began.elapsed() > wait || self.tx.is_disconnected() {
                return false;
            }
            self.cancel.lock().expect("lane cancel").store(true, Ordering::SeqCst);
            // Waiting for the next run to start, not a retry.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }

    /// Ends the current run of the lane's load (what is in flight is
    /// committed or dropped) and waits until the next one has started, so
    /// that it has read the journal; `false` if that took longer than `wait`.
    pub(crate) async fn restart(&self, wait: Duration) -> bool {
        let before = self.generation();
        self.cancel.lock().expect("lane cancel").store(true, Ordering::SeqCst);
        let began = std::time::Instant::now();
        while self.generation() == before {
            if began.elapsed() > wait || self.tx.is_disconnected() {
                return false;
            }
            // Waiting for the next run to start, not a retry.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        true
    }
}

type LaneMap = HashMap<(QualifiedName, Shape), Arc<Lane>>;
/// Stops a lane's current run (see `Lane::cancel`).
type RunCancel = Arc<std::sync::Mutex<Arc<AtomicBool>>>;

/// Where the requests of one table meet to make its lanes and change it.
#[derive(Default)]
struct Gate {
    lock: Mutex<()>,
    /// Columns requests wait for, added together by the next `ALTER TABLE`.
    pending: std::sync::Mutex<Vec<(String, Wanted)>>,
}

/// Every lane, by table and shape; made on first use.
pub(crate) struct Lanes {
    config: Arc<ServeConfig>,
    metrics: Arc<Metrics>,
    lanes: Arc<Mutex<LaneMap>>,
    gates: std::sync::Mutex<HashMap<QualifiedName, Arc<Gate>>>,
    /// Table changes running at once, all tables together (each takes a connection).
    ddl_slots: tokio::sync::Semaphore,
    tasks: std::sync::Mutex<Vec<(tokio::task::JoinHandle<()>, RunCancel)>>,
    next_serial: AtomicU64,
    /// The memory every lane's load shares.
    budget: Arc<Budget>,
    pub stopping: Arc<AtomicBool>,
    pub keys: Arc<super::keys::Keys>,
}

impl Lanes {
    pub(crate) fn new(config: Arc<ServeConfig>, metrics: Arc<Metrics>, lane_memory: usize) -> Lanes {
        Lanes {
            config,
            metrics,
            lanes: Arc::new(Mutex::new(HashMap::new())),
            gates: std::sync::Mutex::new(HashMap::new()),
            ddl_slots: tokio::sync::Semaphore::new(2),
            tasks: std::sync::Mutex::new(Vec::new()),
            next_serial: AtomicU64::new(0),
            budget: Arc::new(Budget::new(lane_memory)),
            stopping: Arc::new(AtomicBool::new(false)),
            keys: Arc::new(super::keys::Keys::new()),
        }
    }

    fn gate(&self, table: &QualifiedName) -> Arc<Gate> {
        self.gates.lock().expect("lane gates").entry(table.clone()).or_default().clone()
    }

    async fn existing(&self, table: &QualifiedName, shape: &Shape) -> Option<Arc<Lane>> {
        self.lanes.lock().await.get(&(table.clone(), shape.clone())).cloned()
    }

    /// The lane of `table` for CSV or JSON Lines rows of `shape`, made (and
    /// its load started) on first use, once the table is admitted and has
    /// every column the shape names.
    pub(crate) async fn get(&self, table: &QualifiedName, shape: &Shape) -> Result<Arc<Lane>, LaneError> {
        if let Some(l) = self.existing(table, shape).await {
            return Ok(l);
        }
        let gate = self.gate(table);
        let _turn = gate.lock.lock().await;
        if let Some(l) = self.existing(table, shape).await {
            return Ok(l);
        }
        let client = super::catalog::connect(&self.config).await?;
        if !super::guard::check(&client, table, &self.config.allow_tables).await? {
            return Err(LaneError::NoTable(table.to_string()));
        }
        if let Shape::Table { columns: Some(named), .. } = shape {
            let have = super::catalog::column_names(&client, table).await?;
            if let Some(missing) = named.iter().find(|c| !have.contains(c)) {
                return Err(LaneError::NoColumn(format!(
                    "table {table} has no column {missing:?} (it has {}): name only its columns (header=true or columns=…)",
                    have.join(", ")
                )));
            }
        }
        drop(client);
        self.start(table, shape, Vec::new()).await
    }

    /// The line-protocol lane of `table`, whose columns include `wanted`;
    /// with `--create-tables` the table or the columns are made first (and
    /// the lane replaced by one that writes the new columns). Waits for the
    /// table's gate until `deadline`.
    pub(crate) async fn lines(
        &self,
        table: &QualifiedName,
        wanted: &[(String, Wanted)],
        deadline: tokio::time::Instant,
    ) -> Result<Arc<Lane>, LaneError> {
        let covers = |l: &Lane| !self.config.create_tables || wanted.iter().all(|(n, _)| l.columns.iter().any(|c| &c.name == n));
        if let Some(l) = self.existing(table, &Shape::Lines).await
            && covers(&l)
        {
            return Ok(l);
        }
        let gate = self.gate(table);
        gate.pending.lock().expect("pending columns").extend(wanted.iter().cloned());
        let Ok(_turn) = tokio::time::timeout_at(deadline, gate.lock.lock()).await else {
            return Err(LaneError::Unreachable(format!("the columns of {table} are still being changed: retry")));
        };
        let existing = self.existing(table, &Shape::Lines).await;
        if let Some(l) = &existing
            && covers(l)
        {
            return Ok(l.clone());
        }
        // Every column waiting requests asked for, in one statement.
        let mut asked: Vec<(String, Wanted)> = std::mem::take(&mut *gate.pending.lock().expect("pending columns"));
        asked.extend(wanted.iter().cloned());
        let _slot = self.ddl_slots.acquire().await.map_err(|_| LaneError::Unreachable("the service is stopping".into()))?;
        let client = super::catalog::connect(&self.config).await?;
        let admitted = super::guard::check(&client, table, &self.config.allow_tables).await?;
        let mut columns = match admitted {
            true => read_columns(&client, table).await?,
            false if self.config.create_tables => {
                super::guard::creation_schema(&client, table).await?;
                super::create::create_table(&self.config, table, &dedup(asked.clone())).await?;
                read_columns(&client, table).await?
            }
            false => return Err(LaneError::NoTable(table.to_string())),
        };
        if self.config.create_tables {
            let missing: Vec<(String, Wanted)> =
                dedup(asked).into_iter().filter(|(name, _)| name != "time" && !columns.iter().any(|c| &c.name == name)).collect();
            if !missing.is_empty() {
                super::create::add_columns(&client, &self.config, table, &missing, deadline).await?;
                columns = read_columns(&client, table).await?;
            } else if let Some(l) = existing
                && l.columns.len() == columns.len()
            {
                // Another process added them (or the lane is as good as it gets).
                return Ok(l);
            }
        }
        drop(client);
        // The old lane finishes what it holds; new rows go to one that writes the new columns.
        self.start(table, &Shape::Lines, columns).await
    }

    async fn start(&self, table: &QualifiedName, shape: &Shape, columns: Vec<LaneColumn>) -> Result<Arc<Lane>, LaneError> {
        let c = &self.config;
        let base = self.keys.offset_block(c).await?;
        let id = match shape {
            Shape::Lines => format!("serve {table}"),
            other => format!("serve {table} {:x}", chute_engine::load::journal::stable_hash(&[&format!("{other:?}")])),
        };
        // This process's load of the lane; every process's lanes of the table skip what any of them committed.
        let (load_id, journals) = (format!("{id} @{}", c.instance_id), journals(table));
        // What is older than the idempotency window is forgotten: the lane reads less when it starts.
        self.keys.prune(c, (&id, &journals), c.idempotency_window).await?;
        let on_conflict = self.upsert(table, shape).await?;
        let (tx, feed) = Feed::bounded(c.queue_depth);
        let spec = self.spec(table, shape, &columns, (&load_id, &journals), feed.clone(), on_conflict)?;
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let lane = Arc::new(Lane {
            id,
            serial,
            table: table.clone(),
            columns,
            tx,
            next_offset: AtomicU64::new(base),
            up: Arc::new(AtomicBool::new(false)),
            generation: Arc::new(AtomicU64::new(0)),
            started: Arc::new(std::sync::Mutex::new(tokio::time::Instant::now())),
            cancel: Arc::new(std::sync::Mutex::new(Arc::new(AtomicBool::new(false)))),
            failure: Arc::default(),
        });
        let run = LaneRun {
            name: table.to_string(),
            key: (table.clone(), shape.clone()),
            serial,
            journals: journals.clone(),
            config: self.config.clone(),
            metrics: self.metrics.clone(),
            stopping: self.stopping.clone(),
            keys: self.keys.clone(),
            lanes: self.lanes.clone(),
            up: lane.up.clone(),
            generation: lane.generation.clone(),
            started: lane.started.clone(),
            cancel: lane.cancel.clone(),
            failure: lane.failure.clone(),
            feed,
        };
        let cancel = lane.cancel.clone();
        let task = tokio::spawn(run.run(spec));
        {
            let mut tasks = self.tasks.lock().expect("lane tasks");
            tasks.retain(|(t, _)| !t.is_finished());
            tasks.push((task, cancel));
        }
        self.lanes.lock().await.insert((table.clone(), shape.clone()), lane.clone());
        // Every ten minutes, while the lane is in use (a schedule, not a retry).
        let (keys, config, weak, id) = (self.keys.clone(), self.config.clone(), Arc::downgrade(&lane), lane.id.clone());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(Duration::from_secs(600)).await;
                if weak.strong_count() == 0 {
                    return;
                }
                if let Err(e) = keys.prune(&config, (&id, &journals), config.idempotency_window).await {
                    eprintln!("chute serve: cannot forget old idempotency keys of {id}: {e}");
                }
            }
        });
        Ok(lane)
    }

    /// The upsert of a lane's rows: the table's setting (`chute partition
    /// set --on-conflict`), or the request's own action where the setting
    /// allows one.
    async fn upsert(&self, table: &QualifiedName, shape: &Shape) -> Result<Option<chute_core::upsert::OnConflict>, LaneError> {
        use chute_core::upsert::{ConflictAction, OnConflict};
        if *shape == Shape::Samples {
            // One sample per series and time, the last written winning, as in Prometheus's own storage.
            return Ok(Some(OnConflict {
                key: Some(vec!["series_id".into(), "time".into()]),
                update_columns: Some(vec!["value".into()]),
                ..OnConflict::new(ConflictAction::Update)
            }));
        }
        let setting = {
            let client = super::catalog::connect(&self.config).await?;
            chute_engine::conflict::table_setting(&client, table).await.map_err(|e| match e {
                chute_engine::conflict::ConflictError::Sql(e) => LaneError::Sql(e),
                chute_engine::conflict::ConflictError::Refused(m) => LaneError::Refused(m),
            })?
        };
        let asked = match shape {
            Shape::Table { on_conflict: Some(a), .. } => Some(*a),
            _ => None,
        };
        let chosen = match (setting, asked) {
            (setting, None) => setting,
            (Some(s), Some(action)) if s.per_request => {
                // What an update does is the table's; another action has none of it.
                let update = action == ConflictAction::Update;
                Some(OnConflict {
                    action,
                    update_columns: s.update_columns.filter(|_| update),
                    update_if: s.update_if.filter(|_| update),
                    ..s
                })
            }
            (s, Some(_)) => {
                let now = s.map_or_else(|| "error".to_owned(), |s| s.action.to_string());
                return Err(LaneError::Refused(format!(
                    "{table} does not let a request choose on_conflict (its setting: {now}): its owner allows it with \
                     chute partition set {table} --on-conflict {now} --per-request"
                )));
            }
        };
        Ok(chosen.filter(|o| o.action != ConflictAction::Error))
    }

    /// The load of a lane.
    fn spec(
        &self,
        table: &QualifiedName,
        shape: &Shape,
        columns: &[LaneColumn],
        (id, journals): (&str, &str),
        feed: Feed,
        on_conflict: Option<chute_core::upsert::OnConflict>,
    ) -> Result<LoadSpec, LaneError> {
        let c = &self.config;
        let input: Arc<dyn Input> = match shape {
            Shape::Lines => Arc::new(FeedInput::new(feed, FeedFormat::Values)),
            Shape::Samples => Arc::new(crate::samples::SamplesFeed::new(feed)),
            Shape::Table { format: TableFormat::Csv, .. } => Arc::new(FeedInput::new(feed, FeedFormat::Text(TextFormat::Csv))),
            Shape::Table { format: TableFormat::Jsonl, .. } => Arc::new(FeedInput::new(feed, FeedFormat::Text(TextFormat::Jsonl))),
        };
        let spec = LoadSpec::builder(c.target.clone(), table.clone())
            // Journaled: a keyed request's retry skips what its earlier attempts committed.
            .load_id(Some(id.to_owned()))
            // A retry sent to this process skips what another process's lane committed of it.
            .skip_committed_by(Some(journals.to_owned()))
            .wait(true)
            .workers(c.workers)
            .parse_threads(c.parse_threads)
            .batch_bytes(c.batch_bytes)
            .batch_rows(c.batch_rows)
            .shared_budget(self.budget.clone())
            .flush_every(Some(c.max_delay))
            .flush_when_idle(true)
            .retry_for(c.retry_for)
            .no_create_partitions(c.no_create_partitions)
            .new_partitions(Some(c.new_partitions))
            .on_conflict(on_conflict);
        let spec = match shape {
            Shape::Lines => spec.columns(Some(columns.iter().map(|c| c.name.clone()).collect())).epoch(Some(EpochUnit::Nanos)),
            Shape::Samples => spec,
            Shape::Table { columns, delimiter, null, epoch, .. } => {
                spec.columns(columns.clone()).delimiter(*delimiter).null(null.clone()).epoch(epoch.map(|e| match e {
                    's' => EpochUnit::Seconds,
                    'm' => EpochUnit::Millis,
                    'u' => EpochUnit::Micros,
                    _ => EpochUnit::Nanos,
                }))
            }
        };
        spec.build(input).map_err(|e| LaneError::Setting(e.to_string()))
    }

    /// Closes every lane and waits until `deadline` for their loads to
    /// commit what they hold; a load still running then is stopped (what it
    /// holds was answered 503 or is dropped unanswered with the process).
    pub(crate) async fn close(&self, deadline: tokio::time::Instant) {
        self.stopping.store(true, Ordering::Relaxed);
        self.lanes.lock().await.clear();
        let tasks = std::mem::take(&mut *self.tasks.lock().expect("lane tasks"));
        for (t, cancel) in tasks {
            let abort = t.abort_handle();
            if tokio::time::timeout_at(deadline, t).await.is_err() {
                cancel.lock().expect("lane cancel").store(true, Ordering::SeqCst);
                abort.abort();
            }
        }
    }

    /// Whether every lane's load is running.
    pub(crate) async fn all_up(&self) -> bool {
        self.lanes.lock().await.values().all(|l| l.up.load(Ordering::Relaxed))
    }
}

/// What the load ids of every lane of `table`, in any process, start with:
/// each process's load of a lane is named by the lane and the process's
/// `--instance-id`. (It may also be how another table's lanes start, whose
/// name this one's begins: their offsets are never this table's, so skipping
/// them skips nothing.)
pub(crate) fn journals(table: &QualifiedName) -> String {
    format!("serve {table}")
}

/// Columns asked for twice (by several requests): the first asking decides the type.
fn dedup(columns: Vec<(String, Wanted)>) -> Vec<(String, Wanted)> {
    let mut seen = std::collections::HashSet::new();
    columns.into_iter().filter(|(n, _)| seen.insert(n.clone())).collect()
}

/// How many times a lane starts its load again by itself (after the
/// server stayed away longer than `--retry-for`) within
/// `LANE_RESTART_WINDOW`; one more failure closes the lane, and the next
/// request makes it again. Each run waits out `--retry-for` before it
/// fails, so with the default 5 min this gives a server about an hour.
const LANE_RESTARTS: u32 = 10;
const LANE_RESTART_WINDOW: Duration = Duration::from_secs(3600);

/// What runs a lane's load, and starts it again while the server stays away.
struct LaneRun {
    name: String,
    key: (QualifiedName, Shape),
    serial: u64,
    /// The journals of the table's lanes (see `journals`).
    journals: String,
    config: Arc<ServeConfig>,
    metrics: Arc<Metrics>,
    stopping: Arc<AtomicBool>,
    keys: Arc<super::keys::Keys>,
    lanes: Arc<Mutex<LaneMap>>,
    up: Arc<AtomicBool>,
    generation: Arc<AtomicU64>,
    started: Started,
    cancel: RunCancel,
    failure: Arc<std::sync::Mutex<Option<String>>>,
    feed: Feed,
}

impl LaneRun {
    async fn run(self, spec: LoadSpec) {
        let what = format!("the load into {}", self.name);
        let mut supervisor = chute_engine::retry::Supervisor::new(what, LANE_RESTARTS, LANE_RESTART_WINDOW);
        let say = |line: &str| eprintln!("chute serve: {line}");
        loop {
            let mut progress = LaneProgress {
                table: self.name.clone(),
                metrics: self.metrics.clone(),
                last: LoadStats::default(),
                feed: self.feed.clone(),
            };
            let stop = Arc::new(AtomicBool::new(false));
            // Before the run reads the journal (see `Lane::run_since`).
            *self.started.lock().expect("lane start") = tokio::time::Instant::now();
            *self.cancel.lock().expect("lane cancel") = stop.clone();
            let spec = spec.with_cancel(stop.clone());
            // A TRUNCATE or VACUUM FULL of a leaf since the journal was written does not stop the lane.
            if let Err(e) = self.keys.repair_journal(&self.config, &self.journals).await {
                eprintln!("chute serve: {}: cannot bring the journal up to date: {e}", self.name);
            }
            self.generation.fetch_add(1, Ordering::SeqCst);
            self.up.store(true, Ordering::Relaxed);
            let result = chute_engine::load::run(spec, &mut progress).await;
            self.up.store(false, Ordering::Relaxed);
            let stopping = self.stopping.load(Ordering::Relaxed);
            let failure = match &result {
                Ok(_) if stopping => return,
                // Every sender is gone (the lane was replaced or the service stops).
                _ if self.feed.is_disconnected() && self.feed.is_empty() => return,
                // Asked to start again (see `Lane::restart`): at once.
                Ok(_) if stop.load(Ordering::SeqCst) => continue,
                Ok(_) => "it ended by itself".to_owned(),
                Err(e) => {
                    self.metrics.lane_failed(&self.name);
                    e.to_string()
                }
            };
            // The server stayed away: the supervisor starts the load again, within its budget.
            let restartable = result.as_ref().err().is_none_or(|e| e.connection_lost()) && !stopping;
            if restartable && supervisor.restart(&failure, say).await {
                continue;
            }
            if restartable {
                say(&format!("{}: the lane is closed; the next request starts its load again", self.name));
            } else {
                say(&format!("the load into {} failed: {failure}; the next request starts it again", self.name));
            }
            return self.close(failure).await;
        }
    }

    /// Closes the lane after its load failed for `why`: its queued
    /// requests are answered 503, and the next request makes it again
    /// (reading the table afresh).
    async fn close(&self, why: String) {
        *self.failure.lock().expect("lane failure") = Some(why);
        let mut lanes = self.lanes.lock().await;
        if lanes.get(&self.key).is_some_and(|l| l.serial == self.serial) {
            lanes.remove(&self.key);
        }
        // The chunks still queued are dropped: their requests are answered 503 (see `submit`).
        self.feed.drain();
    }
}

/// Turns a lane's load progress into metrics and log lines.
struct LaneProgress {
    table: String,
    metrics: Arc<Metrics>,
    last: LoadStats,
    feed: Feed,
}

impl LoadProgress for LaneProgress {
    fn update(&mut self, stats: &LoadStats) {
        self.metrics.lane_progress(&self.table, &self.last, stats);
        self.metrics.queued(&self.table, self.feed.len());
        self.last = stats.clone();
    }

    fn notice(&mut self, message: &str) {
        eprintln!("chute serve: {}: {message}", self.table);
    }
}
