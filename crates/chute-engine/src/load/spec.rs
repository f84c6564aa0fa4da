//! What a load needs to know, validated in one place. A front end (the CLI,
//! `chute serve`, `chute consume`, the Python package, the bench) sets what
//! its user chose on a [`LoadBuilder`] and calls [`LoadBuilder::build`]
//! with the load's input: every check of the settings against each other
//! is made there, and a refusal names the setting ([`SettingError`]), which
//! the front end shows as its own flag or keyword. The engine reads the
//! fields of a [`LoadSpec`] and nothing of the front end's arguments.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use chute_core::ident::QualifiedName;
use chute_core::value::EpochUnit;

use super::budget::Budget;
use super::{Backfill, Input};
use crate::ConnectOptions;
use crate::setting::Setting;

/// The least memory budget a load runs with: a few chunks and batches.
const MIN_MEMORY: usize = 8 << 20;

/// A load, validated: made by [`LoadBuilder::build`] only.
#[derive(Debug, Clone)]
pub struct LoadSpec {
    pub(crate) target: ConnectOptions,
    pub(crate) table: QualifiedName,
    /// What the load reads (see `input`).
    pub(crate) input: Arc<dyn Input>,
    pub(crate) s: Settings,
}

/// Everything of a load but where it goes and what it reads; the engine
/// reads them through the spec (`spec.workers`), no one else does.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Delimited text: the first record names the columns.
    pub(crate) header: bool,
    pub(crate) delimiter: Option<u8>,
    pub(crate) null: Option<String>,
    pub(crate) columns: Option<Vec<String>>,
    pub(crate) epoch: Option<EpochUnit>,
    /// JSON lines: drop a key that names no column instead of refusing its row.
    pub(crate) ignore_unknown: bool,
    /// COPY connections.
    pub(crate) workers: usize,
    /// Threads that parse, encode and route.
    pub(crate) parse_threads: usize,
    /// Target size of one COPY batch (bytes of binary rows).
    pub(crate) batch_bytes: usize,
    /// A batch is sent at this many rows too, whichever comes first.
    pub(crate) batch_rows: Option<usize>,
    /// Bytes the reader hands to a parse thread at a time.
    pub(crate) chunk_bytes: usize,
    /// The global budget for rows in flight (queues and accumulators).
    pub(crate) memory_budget: usize,
    /// Send every row through the parent (the server routes).
    pub(crate) via_parent: bool,
    /// Reject rows whose time partition does not exist instead of creating it.
    pub(crate) no_create_partitions: bool,
    pub(crate) reject_file: Option<PathBuf>,
    /// Stop once more rows than this were rejected.
    pub(crate) max_rejects: Option<u64>,
    pub(crate) report_every: Duration,
    /// tsbs: partition each measurement table by time with this interval.
    pub(crate) tsbs_interval: Option<chute_core::partman::Span>,
    /// tsbs: the schema of the tables (made if missing; default: the
    /// connection's current schema).
    pub(crate) tsbs_schema: Option<String>,
    /// Names the load for the journal (default: derived from the table and
    /// the inputs' identity; stdin and a feed have none, so without it such
    /// a load is not journaled).
    pub(crate) load_id: Option<String>,
    /// A journaled load also skips the rows that loads whose ids start
    /// with this committed (`chute serve`'s lanes of one table in several
    /// processes: their offsets never overlap, so whatever any of them
    /// committed at an offset is the row at that offset).
    pub(crate) skip_committed_by: Option<String>,
    /// When another run of the same load is running: wait for it to finish
    /// (true) or refuse (false).
    pub(crate) wait: bool,
    /// Set to stop the load: in-flight batches finish, nothing new starts.
    pub(crate) cancel: Arc<AtomicBool>,
    /// How long to keep retrying a lost connection or a restarted server.
    pub(crate) retry_for: Duration,
    /// Scale-out: commit on every server or on none (two-phase commit).
    pub(crate) atomic: bool,
    /// Send rows that have waited this long even in a partial batch, and
    /// read stdin in pieces when it pauses: for live streams. `None`: rows
    /// wait for full batches (best for files).
    pub(crate) flush_every: Option<Duration>,
    /// Group commit for live streams: send what is gathered as soon as a
    /// COPY worker is idle, instead of waiting for a full batch or for
    /// `flush_every` (which stays the limit while every worker is busy).
    pub(crate) flush_when_idle: bool,
    /// Partitions the load creates itself: filled before anyone can see
    /// them, then attached (see `sink::backfill`).
    pub(crate) backfill: Backfill,
    /// `maintenance_work_mem` for building a backfilled partition's indexes, in bytes.
    pub(crate) backfill_index_memory: u64,
    /// How long before now a partition that exists must end for `Backfill::Auto`
    /// to swap it (`None`: one interval; see `sink::swap`).
    pub(crate) backfill_after: Option<Duration>,
    /// The longest a swap's locked step waits for its locks (and so holds up
    /// writers) before it gives way and tries again.
    pub(crate) lock_timeout: Duration,
    /// One budget several loads share instead of `memory_budget` each
    /// (`chute serve`'s lanes, one load per table).
    pub(crate) shared_budget: Option<Arc<Budget>>,
    /// Upsert: what a row whose conflict key is in the table already does
    /// (`None`: it is refused, as COPY refuses it). Each leaf's batch is
    /// staged and merged (see `sink::merge`).
    pub(crate) on_conflict: Option<chute_core::upsert::OnConflict>,
    /// Limits on the partitions made just in time (a service's).
    pub(crate) new_partitions: Option<NewPartitions>,
}

/// Which partitions a load may make just in time: so many for the rows of
/// one chunk (a service's request), so many a minute, and (time keys) none
/// for a row older than `max_age` or further ahead than `max_future`. Rows
/// that would need more are refused with why, nothing made for them; rows
/// whose partition exists are written as they come.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NewPartitions {
    pub per_chunk: usize,
    pub per_minute: usize,
    pub max_age: Option<Duration>,
    pub max_future: Option<Duration>,
}

/// A setting refused, and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{setting}: {problem}")]
pub struct SettingError {
    pub setting: Setting,
    pub problem: String,
}

fn refuse(setting: Setting, problem: impl Into<String>) -> SettingError {
    SettingError { setting, problem: problem.into() }
}

impl std::ops::Deref for LoadSpec {
    type Target = Settings;

    fn deref(&self) -> &Settings {
        &self.s
    }
}

impl LoadSpec {
    /// A load into `table` on `target`, with every setting at its default.
    pub fn builder(target: ConnectOptions, table: QualifiedName) -> LoadBuilder {
        LoadBuilder { target, table, s: Settings::default() }
    }

    pub fn target(&self) -> &ConnectOptions {
        &self.target
    }

    pub fn table(&self) -> &QualifiedName {
        &self.table
    }

    pub fn input(&self) -> &Arc<dyn Input> {
        &self.input
    }

    /// The flag that stops the load when set: batches in flight finish,
    /// nothing new starts, and the report says it was interrupted.
    pub fn cancel(&self) -> Arc<AtomicBool> {
        self.s.cancel.clone()
    }

    pub fn report_every(&self) -> Duration {
        self.s.report_every
    }

    pub fn retry_for(&self) -> Duration {
        self.s.retry_for
    }

    pub fn load_id(&self) -> Option<&str> {
        self.s.load_id.as_deref()
    }

    /// The columns the input's fields fill, in order (`None`: all, in table order).
    pub fn columns(&self) -> Option<&[String]> {
        self.s.columns.as_deref()
    }

    /// Upsert: what a row whose key is in the table already does.
    pub fn on_conflict(&self) -> Option<&chute_core::upsert::OnConflict> {
        self.s.on_conflict.as_ref()
    }

    pub fn chunk_bytes(&self) -> usize {
        self.s.chunk_bytes
    }

    pub fn parse_threads(&self) -> usize {
        self.s.parse_threads
    }

    /// The same load with another input (a consumer's next run).
    pub fn with_input(&self, input: Arc<dyn Input>) -> LoadSpec {
        LoadSpec { input, ..self.clone() }
    }

    /// The same load stopped by another flag (a service's load started again).
    pub fn with_cancel(&self, cancel: Arc<AtomicBool>) -> LoadSpec {
        let mut spec = self.clone();
        spec.s.cancel = cancel;
        spec
    }

    /// The same load under another id in the journal.
    pub fn with_load_id(&self, load_id: impl Into<String>) -> LoadSpec {
        let mut spec = self.clone();
        spec.s.load_id = Some(load_id.into());
        spec
    }
}

impl Default for Settings {
    fn default() -> Self {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        Settings {
            header: false,
            delimiter: None,
            null: None,
            columns: None,
            epoch: None,
            ignore_unknown: false,
            workers: cores,
            // The server needs the other cores: on 2 cores one parse thread
            // outruns two (measured, docs/benchmarks/history.md).
            parse_threads: (cores / 2).max(1),
            batch_bytes: 4 << 20,
            batch_rows: None,
            chunk_bytes: 1 << 20,
            memory_budget: 160 << 20,
            via_parent: false,
            no_create_partitions: false,
            reject_file: None,
            max_rejects: None,
            report_every: Duration::from_secs(10),
            tsbs_interval: None,
            tsbs_schema: None,
            load_id: None,
            skip_committed_by: None,
            wait: false,
            cancel: Default::default(),
            retry_for: Duration::from_secs(300),
            atomic: false,
            flush_every: None,
            flush_when_idle: false,
            backfill: Backfill::Auto,
            backfill_index_memory: 256 << 20,
            backfill_after: None,
            lock_timeout: Duration::from_secs(1),
            shared_budget: None,
            on_conflict: None,
            new_partitions: None,
        }
    }
}

/// Sets a load's settings; [`LoadBuilder::build`] checks them together.
/// Every setting not set keeps its default (see each setter).
#[derive(Debug, Clone)]
pub struct LoadBuilder {
    target: ConnectOptions,
    table: QualifiedName,
    s: Settings,
}

macro_rules! setters {
    ($($(#[$doc:meta])* $name:ident: $ty:ty;)*) => {
        $(
            $(#[$doc])*
            pub fn $name(mut self, value: $ty) -> Self {
                self.s.$name = value;
                self
            }
        )*
    };
}

impl LoadBuilder {
    setters! {
        /// Delimited text: the first record names the columns (default: no header).
        header: bool;
        /// Delimited text: the field delimiter (default: the format's).
        delimiter: Option<u8>;
        /// Delimited text: the string that is NULL (default: the format's).
        null: Option<String>;
        /// The columns the input's fields fill, in order (default: all, in table order).
        columns: Option<Vec<String>>;
        /// Numbers in timestamp columns are epochs in this unit.
        epoch: Option<EpochUnit>;
        /// JSON lines: drop keys that name no column instead of refusing their rows (default: refuse).
        ignore_unknown: bool;
        /// COPY connections (default: the cores).
        workers: usize;
        /// Threads that parse, encode and route (default: half the cores).
        parse_threads: usize;
        /// Target bytes of binary rows in one COPY batch (default 4 MiB; at most a quarter of the memory budget).
        batch_bytes: usize;
        /// A batch is sent at this many rows too.
        batch_rows: Option<usize>;
        /// Bytes of input a parse thread takes at a time (default 1 MiB).
        chunk_bytes: usize;
        /// Bytes of rows in flight, all queues and buffers together (default 160 MiB).
        memory_budget: usize;
        /// Send every row through the parent table (the server routes).
        via_parent: bool;
        /// Reject rows whose partition does not exist instead of creating it.
        no_create_partitions: bool;
        /// Where rejected rows go (default: next to the first input).
        reject_file: Option<PathBuf>;
        /// Stop once more rows than this were rejected.
        max_rejects: Option<u64>;
        /// How often progress is reported (default 10 s).
        report_every: Duration;
        /// tsbs: partition each measurement table by time with this interval.
        tsbs_interval: Option<chute_core::partman::Span>;
        /// tsbs: the schema of the tables.
        tsbs_schema: Option<String>;
        /// The load's name in the journal (default: derived from the inputs).
        load_id: Option<String>;
        /// Also skip the rows that loads whose ids start with this committed (default: only this load's own).
        skip_committed_by: Option<String>;
        /// Wait for another run of the same load to finish instead of refusing.
        wait: bool;
        /// How long to keep retrying a lost connection or a restarted server (default 5 min).
        retry_for: Duration;
        /// Scale-out: commit on every data node or on none.
        atomic: bool;
        /// Send rows that waited this long even in a partial batch (live streams).
        flush_every: Option<Duration>;
        /// Send what is gathered as soon as a COPY worker is idle (live streams).
        flush_when_idle: bool;
        /// Which partitions are filled before anyone sees them (default: auto).
        backfill: Backfill;
        /// `maintenance_work_mem` for a backfilled partition's indexes, in bytes (default 256 MiB).
        backfill_index_memory: u64;
        /// How long ago an empty partition's range must have ended for auto backfill to swap it.
        backfill_after: Option<Duration>;
        /// The longest a swap waits for its locks before it gives way and tries again (default 1 s).
        lock_timeout: Duration;
        /// Upsert: what a row whose key is in the table already does (default: refused).
        on_conflict: Option<chute_core::upsert::OnConflict>;
        /// Limits on the partitions made just in time (default: none).
        new_partitions: Option<NewPartitions>;
    }

    /// The flag that stops the load when set (default: a flag of its own).
    pub fn cancel(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.s.cancel = cancel;
        self
    }

    /// Several loads share one memory budget (`chute serve`'s lanes); the
    /// load's own budget is then the shared one's size.
    pub fn shared_budget(mut self, budget: Arc<Budget>) -> Self {
        self.s.memory_budget = budget.limit;
        self.s.shared_budget = Some(budget);
        self
    }

    /// The stop flag the load will have (to hand to a signal handler before the load is built).
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        self.s.cancel.clone()
    }

    pub fn target(&self) -> &ConnectOptions {
        &self.target
    }

    pub fn table(&self) -> &QualifiedName {
        &self.table
    }

    /// The `retry_for` set (getters are named apart from their setters).
    pub fn retries_for(&self) -> Duration {
        self.s.retry_for
    }

    /// The `chunk_bytes` set.
    pub fn chunk_size(&self) -> usize {
        self.s.chunk_bytes
    }

    /// The `memory_budget` set.
    pub fn memory(&self) -> usize {
        self.s.memory_budget
    }

    /// The `load_id` set, if one was.
    pub fn given_load_id(&self) -> Option<&str> {
        self.s.load_id.as_deref()
    }

    /// Checks the settings against each other without an input (a front
    /// end that makes its inputs later, per run).
    pub fn check(&self) -> Result<(), SettingError> {
        let s = &self.s;
        // A budget shared by several loads is the service's to size (see `shared_budget`).
        if s.shared_budget.is_none() && s.memory_budget < MIN_MEMORY {
            return Err(refuse(
                Setting::MemoryBudget,
                format!("{} MiB is too little: give at least {} MiB", s.memory_budget >> 20, MIN_MEMORY >> 20),
            ));
        }
        if s.workers == 0 {
            return Err(refuse(Setting::Workers, "a load needs at least one COPY connection"));
        }
        if s.parse_threads == 0 {
            return Err(refuse(Setting::ParseThreads, "a load needs at least one parse thread"));
        }
        if s.batch_bytes == 0 {
            return Err(refuse(Setting::BatchBytes, "a batch must hold at least one byte"));
        }
        if s.batch_rows == Some(0) {
            return Err(refuse(Setting::BatchRows, "a batch must hold at least one row"));
        }
        if s.chunk_bytes == 0 {
            return Err(refuse(Setting::ChunkBytes, "a chunk must hold at least one byte"));
        }
        if s.lock_timeout.is_zero() {
            return Err(refuse(
                Setting::LockTimeout,
                "0 would let a swap wait for its locks for ever, with the table's writers queued behind it: give a duration such as 1s",
            ));
        }
        if s.backfill_after.is_some() && s.backfill != Backfill::Auto {
            return Err(refuse(
                Setting::BackfillAfter,
                format!(
                    "it says which partitions {} swaps; with {} every empty one is swapped, with {} none",
                    Setting::Backfill.with("auto"),
                    Setting::Backfill.with("on"),
                    Setting::Backfill.with("off")
                ),
            ));
        }
        if s.new_partitions.is_some_and(|n| n.per_chunk == 0 || n.per_minute == 0) {
            return Err(refuse(Setting::MaxNewPartitions, "at least 1 (or no limit)"));
        }
        if s.flush_every.is_some_and(|f| f.is_zero()) {
            return Err(refuse(Setting::FlushEvery, "must be more than 0"));
        }
        Ok(())
    }

    /// The load of `input` with these settings, checked together. A batch
    /// larger than a quarter of the memory budget is made that size (four
    /// batches in flight at once keep the COPY workers busy).
    pub fn build(self, input: Arc<dyn Input>) -> Result<LoadSpec, SettingError> {
        self.check()?;
        let LoadBuilder { target, table, mut s } = self;
        s.batch_bytes = s.batch_bytes.min(s.memory_budget / 4);
        Ok(LoadSpec { target, table, input, s })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn builder() -> LoadBuilder {
        let env: [(&str, &str); 0] = [];
        let target = ConnectOptions::resolve(Some("postgres://u@localhost/db"), &env).expect("a URL");
        LoadSpec::builder(target, QualifiedName::new("public", "t"))
    }

    #[test]
    fn settings_that_contradict_each_other_are_refused_naming_the_setting() {
        let cases: Vec<(LoadBuilder, Setting)> = vec![
            (builder().memory_budget(1 << 20), Setting::MemoryBudget),
            (builder().workers(0), Setting::Workers),
            (builder().parse_threads(0), Setting::ParseThreads),
            (builder().batch_rows(Some(0)), Setting::BatchRows),
            (builder().lock_timeout(Duration::ZERO), Setting::LockTimeout),
            (builder().backfill(Backfill::On).backfill_after(Some(Duration::from_secs(3600))), Setting::BackfillAfter),
            (builder().flush_every(Some(Duration::ZERO)), Setting::FlushEvery),
        ];
        for (b, want) in cases {
            let e = b.check().expect_err("refused");
            assert_eq!(e.setting, want, "{e}");
        }
        assert!(builder().check().is_ok());
    }

    #[test]
    fn a_batch_is_at_most_a_quarter_of_the_memory_budget() {
        let input: Arc<dyn Input> =
            Arc::new(super::super::Files::new(vec![super::super::InputSpec::Stdin], super::super::TextFormat::Csv).unwrap());
        let spec = builder().memory_budget(16 << 20).batch_bytes(64 << 20).build(input.clone()).unwrap();
        assert_eq!(spec.s.batch_bytes, 4 << 20);
        let spec = builder().memory_budget(160 << 20).batch_bytes(1 << 20).build(input).unwrap();
        assert_eq!(spec.s.batch_bytes, 1 << 20);
    }
}
