//! The input side of a load, behind one trait: a [`Source`] runs on the
//! load's reader thread and sends `Chunk`s, each with the acknowledgement
//! that fires once its rows are committed. There is one source per way in:
//! files, stdin and streams made in process, cut at record ends
//! ([`files::FileSource`]); rows a workload makes ([`generated::GenSource`]);
//! a service's requests ([`FeedSource`]); Parquet files, Arrow IPC files and
//! streams and data frames, read as record batches ([`columnar::ColumnarSource`]). Which one a load has is decided
//! once, by its [`LoadInput`](super::LoadInput) (see `setup`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::LoadError;
use super::ack::Completion;
use super::model::Chunk;

pub(crate) mod files;
pub(crate) mod generated;

/// Where a load's rows come from.
///
/// Contract. `pipeline::run` calls `read` once per load, on the load's own
/// reader thread (a plain thread: reading may block; no async runtime is
/// there). The source sends chunks on `out` in input order; `out` is a
/// bounded queue the parse threads drain, so a source runs at most a few
/// chunks ahead of parsing and the memory budget bounds the rest. Each chunk
/// holds whole records (a chunk never ends inside one), its input's index,
/// its first line and its offset (bytes, or sequence numbers for generated
/// rows: what the journal records and a resume skips), and an
/// acknowledgement (`AckRef`) made on `acks`, which fires once every row of
/// the chunk is committed or rejected, or failed if the load ends first.
/// `read` returns `Ok` at the end of its input or as soon as `cancel` is
/// set or `out` is closed (the load is stopping); an `Err` fails the load.
/// Returning closes the source's side: the parse threads finish what is
/// queued and the load drains.
pub trait Source: Send {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, cancel: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError>;
}

/// Where a service's chunks come in (see [`FeedSource`]): whole records,
/// each chunk with its own acknowledgement.
#[derive(Clone)]
pub struct Feed(pub(crate) flume::Receiver<Chunk>);

impl std::fmt::Debug for Feed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed").field("queued", &self.0.len()).finish()
    }
}

impl Feed {
    /// A feed and the sender of its chunks, holding at most `depth` chunks.
    pub fn bounded(depth: usize) -> (flume::Sender<Chunk>, Feed) {
        let (tx, rx) = flume::bounded(depth);
        (tx, Feed(rx))
    }

    /// Chunks queued, not taken by the load yet.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every sender is gone: no chunk comes any more.
    pub fn is_disconnected(&self) -> bool {
        self.0.is_disconnected()
    }

    /// Drops the chunks queued (their acknowledgements fail).
    pub fn drain(&self) {
        while self.0.try_recv().is_ok() {}
    }
}

/// Chunks a service made (a request's rows, with the acknowledgement that
/// answers it), passed on as they come until every sender is gone.
pub(crate) struct FeedSource {
    pub(crate) feed: Feed,
}

impl Source for FeedSource {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, cancel: &AtomicBool, _: &flume::Sender<Completion>) -> Result<(), LoadError> {
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            match self.feed.0.recv_timeout(Duration::from_millis(100)) {
                Ok(chunk) => {
                    if out.send(chunk).is_err() {
                        return Ok(());
                    }
                }
                Err(flume::RecvTimeoutError::Timeout) => {}
                Err(flume::RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }
}
