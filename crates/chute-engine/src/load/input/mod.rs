//! What a load reads, behind one trait: an [`Input`] is chosen once, by the
//! load's front end, and makes everything input-specific the load needs
//! before any row moves: its kind (the tables it writes, how chunks become
//! rows: [`Input::prepare`]) and its source with what the rest of the load
//! must know of it ([`Input::open`]: names, identity, size, how
//! undeliverable rows are answered for, where rejects go, shared positions).
//! After `open` nothing in the engine asks which input a load has.
//!
//! The engine's own inputs: [`Files`] (delimited text from files, stdin or
//! streams made in process), [`TsbsFiles`], [`Generated`] (rows a workload
//! makes) and [`FeedInput`] (chunks a service sends). A door adds its own
//! input in its own crate (Kafka partitions, Arrow record batches,
//! Prometheus samples) by implementing this trait; nothing else of the
//! engine changes.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::future::BoxFuture;

use super::kind::Prepared;
use super::rejects::RejectOrigin;
use super::source::Source;
use super::{LoadError, LoadProgress, LoadSpec};

mod feed;
mod files;
mod generated;

pub use super::kind::delimited::TextFormat;
pub use feed::{FeedFormat, FeedInput};
pub use files::{Files, TsbsFiles};
pub use generated::Generated;

/// A load's input.
///
/// Contract. `prepare` may be called several times (the load's set-up
/// starts over on a new connection while the server is away), so it only
/// reads the server or creates what is missing with `IF NOT EXISTS`; it
/// takes nothing from the input that cannot be taken again (a header is
/// read, a stream is not consumed). `open` is called once, after the last
/// `prepare`, before any row moves, and opens every part of the input (a
/// missing file fails the load before anything is loaded); the source it
/// returns is run once on the load's reader thread (see [`Source`]).
pub trait Input: Send + Sync + std::fmt::Debug {
    /// Makes the load's kind: its tables (resolved, or made), how rows are
    /// routed to their leaves, and how a chunk of this input becomes rows.
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>>;

    /// Opens the input into its source and its description.
    fn open(&self, spec: &LoadSpec, prepared: &Prepared) -> Result<Opened, LoadError>;

    /// Whether the input is a live stream (stdin, a stream from a pipe):
    /// its rows should reach the table while it waits for more, rather than
    /// wait for full batches. A front end uses it for its default of
    /// `flush_every`.
    fn is_live(&self) -> bool {
        false
    }
}

/// How rows that cannot be delivered are answered for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// The user runs the same command again: the journal says what is left
    /// (files, stdin with a load id, generated rows, Kafka partitions).
    Rerun,
    /// Callers are answered per request and send a row again themselves
    /// (a service's feed): a row whose partition vanished fails its
    /// acknowledgement instead of being refused, and no row waits for a
    /// whole partition to be backfilled.
    Callers,
}

/// An input, opened: its source and what the rest of the load needs to
/// know about it, so that nothing after [`Input::open`] asks which input it was.
pub struct Opened {
    pub(crate) source: Box<dyn Source>,
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

impl std::fmt::Debug for Opened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opened").field("names", &self.names).field("delivery", &self.delivery).finish_non_exhaustive()
    }
}

impl Opened {
    /// An opened input with `source`, answered for as `delivery`; the rest
    /// empty (no names, no identity, no size, rejects nowhere by default),
    /// for the caller to set.
    pub fn new(source: Box<dyn Source>, delivery: Delivery, bytes_read: Arc<AtomicU64>) -> Opened {
        Opened {
            source,
            names: Vec::new(),
            identity: None,
            total_bytes: None,
            bytes_read,
            delivery,
            rejects: RejectOrigin::nowhere(1),
            numbered: false,
            shared: None,
        }
    }
}

/// Inputs several runs of a load share (the partitions of a Kafka topic,
/// which the consumers of one group divide among themselves).
#[derive(Debug)]
pub struct Shared {
    /// The inputs this run reads.
    pub inputs: Vec<u32>,
    /// Told, once the journal is open, from which position each input is read.
    pub seek: Arc<std::sync::OnceLock<std::collections::HashMap<u32, u64>>>,
    /// Told the run's token once the journal is open.
    pub owner: Arc<std::sync::OnceLock<String>>,
}

/// What a load's id is derived from, and the table name it is derived with.
#[derive(Debug)]
pub enum Identity {
    /// Files and streams made in process, by their identities.
    Inputs { table: String, ids: Vec<String>, generated: bool },
    /// Rows a workload makes.
    Workload { table: String, workload: Arc<dyn chute_core::generate::Workload>, rows: u64 },
}

impl Identity {
    /// The journal's name for a load of this identity.
    pub(crate) fn load_id(&self) -> String {
        match self {
            Identity::Workload { table, workload, rows } => super::identity::generated_load(table, workload.as_ref(), *rows),
            Identity::Inputs { table, ids, generated } => {
                let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
                super::identity::inputs_load(table, &ids, *generated)
            }
        }
    }
}
