//! The loader: parallel binary COPY routed straight into leaf partitions.
//!
//! ```text
//! reader thread ─chunks─► parse/encode/route threads ─segments─► coordinator ─batches─► COPY workers
//!   (file, gz, zst,        (N threads: records → binary    (per-leaf accumulators,   (one connection each,
//!    stdin; cut at          rows, each to its leaf)          one byte budget, JIT      COPY leaf FROM STDIN
//!    record ends)                                            partitions, rejects)      (FORMAT binary))
//! ```
//!
//! Every queue between stages is bounded and every accumulator counts against
//! one byte budget, so memory stays flat whatever the input size or the
//! number of partitions: when the budget is full the parse threads wait, the
//! reader waits behind them, and the input is read only as fast as the server
//! takes rows.

pub mod ack;
pub mod budget;
mod claim;
mod control;
mod coordinator;
mod identity;
pub mod input;
pub mod journal;
pub mod kind;
pub use sink::atomic::{Resolved, recover as recover_prepared};
pub mod model;
mod oversized;
mod passes;
mod pipeline;
pub mod reading;
pub mod rejects;
pub mod routing;
mod segment;
mod setup;
mod sink;
pub mod source;
mod spec;
pub mod target;
mod text_route;
mod write;

pub use input::{Delivery, FeedFormat, FeedInput, Files, Generated, Identity, Input, Opened, Shared, TextFormat, TsbsFiles};
pub use kind::Prepared;
pub use kind::values::ValueRows;
pub use rejects::RejectOrigin;
pub use text_route::file_text_row;

/// A file's identity for the journal: its canonical path, size and
/// modification time (ns). Inputs read from files derive their load id from it.
pub fn file_identity(canonical: &std::path::Path, len: u64, mtime_nanos: u128) -> String {
    identity::file(canonical, len, mtime_nanos)
}

/// The engine's kinds, for inputs outside the engine whose records are in a
/// format the engine reads (a door's messages holding CSV); line protocol's
/// is `crate::lines::kind`.
pub mod kinds {
    pub use super::kind::delimited::prepare as delimited;
}
pub use passes::run;
pub use reading::{GeneratedInput, InputSpec};
pub use source::Feed;
pub use spec::{LoadBuilder, LoadSpec, NewPartitions, SettingError};

/// Whether partitions a load creates, and empty ones it fills, take the
/// backfill path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Backfill {
    /// For intervals wholly in the past (historical data), on layouts that
    /// allow it; an empty partition that exists, when its range ended at
    /// least `backfill_after` ago.
    #[default]
    Auto,
    /// For every partition the load creates (a layout that cannot is
    /// refused) and every empty one it fills (each that cannot is named).
    On,
    Off,
}

/// Figures reported while a load runs and at its end.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct LoadStats {
    pub rows_loaded: u64,
    /// Rows an earlier run of the same load committed (skipped on resume).
    pub rows_skipped: u64,
    pub rows_rejected: u64,
    /// Input bytes read (before decompression).
    pub bytes_read: u64,
    /// Input size, when every input has one.
    pub bytes_total: Option<u64>,
    /// Bytes of binary COPY data sent.
    pub bytes_sent: u64,
    pub seconds: f64,
    pub partitions_touched: usize,
    pub partitions_created: usize,
    /// Partitions the load filled before anyone could see their rows: created
    /// and attached, or (of those) swapped in for an empty partition that existed.
    pub partitions_backfilled: usize,
    /// Of `partitions_backfilled`, those that replaced an empty partition.
    pub partitions_swapped: usize,
    /// Why partitions the load created took the normal path instead (one line each kind).
    pub backfill_skipped: Vec<String>,
    pub batches: u64,
    /// Input bytes (after decompression) from the start of each input
    /// whose rows are all committed or rejected, from the acknowledgements.
    pub bytes_committed: u64,
    /// An upsert load: what its committed rows did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upsert: Option<UpsertCounts>,
}

/// What the rows of an upsert did: each committed row was inserted,
/// updated, or left the table unchanged (its key was there and `nothing`,
/// its `--update-if` did not hold, or its values were the same).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct UpsertCounts {
    pub inserted: u64,
    pub updated: u64,
    pub unchanged: u64,
}

impl UpsertCounts {
    pub fn add(&mut self, o: UpsertCounts) {
        self.inserted += o.inserted;
        self.updated += o.updated;
        self.unchanged += o.unchanged;
    }
}

/// The final report of a load.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadReport {
    pub table: String,
    #[serde(flatten)]
    pub stats: LoadStats,
    pub rows_per_second: f64,
    pub mb_per_second: f64,
    pub reject_file: Option<String>,
    /// The SQLSTATE of the first rejected row that has one.
    pub first_reject_sqlstate: Option<String>,
    /// Why rows went through the parent instead of straight to leaves.
    pub via_parent_reason: Option<String>,
    pub reject_limit_exceeded: bool,
    /// The journal's name for this load (resume with the same command).
    pub load_id: Option<String>,
    /// The load was stopped before the end (what is committed stays).
    pub interrupted: bool,
    /// Per input: every row before this line is committed or rejected.
    pub committed_through: Vec<CommittedThrough>,
    /// For `passes`: what to check of this pass on the server it ends on.
    #[serde(skip)]
    pub(crate) check: Option<passes::PassCheck>,
}

/// How far an input is committed: every row before `line` (and before byte
/// `byte`, after decompression) is committed or rejected.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct CommittedThrough {
    pub input: String,
    pub line: u64,
    pub byte: u64,
}

/// Receives progress while a load runs; the binary draws bars or lines.
pub trait LoadProgress: Send {
    /// Called about every few hundred milliseconds.
    fn update(&mut self, stats: &LoadStats);
    /// A one-line notice for the user (e.g. why the parent is used).
    fn notice(&mut self, message: &str);
}

/// A progress reporter that reports nothing.
#[derive(Debug, Default)]
pub struct NoProgress;

impl LoadProgress for NoProgress {
    fn update(&mut self, _: &LoadStats) {}
    fn notice(&mut self, _: &str) {}
}

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(transparent)]
    Connect(#[from] crate::ConnectError),
    #[error(transparent)]
    Catalog(#[from] crate::catalog::CatalogError),
    #[error(transparent)]
    Partition(#[from] crate::partman::PartmanError),
    #[error("cannot read {input}: {message}")]
    Input { input: String, message: String },
    #[error("{0}")]
    Setup(String),
    /// A setting refused, or two that contradict each other.
    #[error(transparent)]
    Settings(#[from] SettingError),
    /// chute's own schema could not be made or read (`schema`).
    #[error(transparent)]
    Schema(#[from] crate::schema::SchemaError),
    /// A statement failed: its SQLSTATE and the server's fields are kept
    /// (`SqlError::code`); a lost connection is one a new connection can redo.
    #[error(transparent)]
    Sql(#[from] crate::error::SqlError),
    /// The partition tree could not be read.
    #[error("{context}: {source}")]
    Layout { context: String, source: Box<crate::layout::LayoutError> },
    /// Several workers or stages failed: the first error, then the others.
    #[error("{first} (also: {})", also.join("; "))]
    Several { first: Box<LoadError>, also: Vec<String> },
    #[error("cannot write the reject file {path}: {message}")]
    RejectFile { path: String, message: String },
}

impl From<crate::pooler::PoolerError> for LoadError {
    fn from(e: crate::pooler::PoolerError) -> Self {
        match e {
            crate::pooler::PoolerError::Connect(e) => LoadError::Connect(e),
            crate::pooler::PoolerError::Sql(e) => LoadError::sql("checking whether a pooler shares chute's sessions", e),
            refused @ crate::pooler::PoolerError::Pooled(_) => LoadError::Setup(refused.to_string()),
        }
    }
}

impl LoadError {
    /// A statement's failure, with what it was for.
    pub fn sql(context: impl Into<String>, e: tokio_postgres::Error) -> Self {
        LoadError::Sql(crate::error::SqlError::new(context, e))
    }

    /// The server's SQLSTATE, when a statement failed (the first error of several).
    pub fn code(&self) -> Option<&tokio_postgres::error::SqlState> {
        match self {
            LoadError::Sql(e) => e.code(),
            LoadError::Several { first, .. } => first.code(),
            LoadError::Catalog(crate::catalog::CatalogError::Sql(e)) => e.code(),
            LoadError::Schema(crate::schema::SchemaError::Sql(e)) => e.code(),
            LoadError::Partition(crate::partman::PartmanError::Catalog(crate::catalog::CatalogError::Sql(e))) => e.code(),
            LoadError::Partition(crate::partman::PartmanError::Sql(e)) => e.code(),
            _ => None,
        }
    }
}

/// The errors of a load's many workers and stages: the first decides how
/// the load ends (and whether it is retried); the others are reported with
/// it rather than dropped.
#[derive(Debug, Default)]
pub(crate) struct Errors {
    first: Option<LoadError>,
    also: Vec<String>,
}

impl Errors {
    pub(crate) fn add(&mut self, e: LoadError) {
        match &self.first {
            None => self.first = Some(e),
            Some(first) => {
                let text = e.to_string();
                if text != first.to_string() && !self.also.contains(&text) {
                    self.also.push(text);
                }
            }
        }
    }

    pub(crate) fn any(&self) -> bool {
        self.first.is_some()
    }

    /// The first error, with the others' messages after it.
    pub(crate) fn into_error(self) -> Option<LoadError> {
        let first = self.first?;
        if self.also.is_empty() {
            return Some(first);
        }
        Some(LoadError::Several { first: Box::new(first), also: self.also })
    }
}

impl crate::retry::Classify for crate::load::LoadError {
    fn fault(&self) -> crate::retry::Fault {
        use crate::load::LoadError as L;
        match self {
            L::Connect(e) => e.fault(),
            L::Catalog(e) => e.fault(),
            L::Partition(e) => e.fault(),
            L::Sql(e) => e.fault(),
            L::Layout { source, .. } => source.fault(),
            L::Schema(e) => e.fault(),
            L::Several { first, .. } => first.fault(),
            _ => crate::retry::Fault::Fatal,
        }
    }
}
