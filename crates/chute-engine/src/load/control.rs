//! The load's control connection. It holds the load's lock (see `claim`)
//! for as long as the load runs, reads what the coordinator needs from the
//! server while rows flow (tag ids, keys only the server parses, partition
//! trees after a leaf vanished) and closes the journal at the end. When the
//! server drops it, it is made again on the next use and the lock taken
//! again with it; if another run holds the lock by then, this run stops.
//!
//! A made-again connection may be to another server (a standby promoted
//! after a failover) that lacks the last commits the first one
//! acknowledged: positions of shared inputs are moved on only over the
//! connection the load began with (see [`Control::advance`]).

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use tokio_postgres::Client;

use super::LoadError;
use crate::ConnectOptions;
use crate::retry::{self, Policy};

pub(crate) struct Control {
    client: Client,
    target: ConnectOptions,
    retry_for: Duration,
    /// The journaled load whose lock the connection holds.
    load_id: Option<String>,
    /// The load's inputs are shared by several runs: no lock (see `claim::fence`).
    shared: bool,
    /// The load's stop: no retry starts once it is set.
    stop: Arc<AtomicBool>,
    /// The connection was made again since the load began.
    remade: bool,
}

impl Control {
    pub(crate) fn new(
        client: Client,
        target: ConnectOptions,
        (retry_for, stop): (Duration, Arc<AtomicBool>),
        load_id: Option<String>,
    ) -> Self {
        Control { client, target, retry_for, load_id, shared: false, stop, remade: false }
    }

    /// For a load whose inputs several runs share: it holds no lock of the load's.
    pub(crate) fn shared(mut self) -> Self {
        self.shared = true;
        self
    }

    /// Whether the load's inputs are shared (Kafka partitions).
    pub(crate) fn is_shared(&self) -> bool {
        self.shared
    }

    /// The connection, made again (with the load's lock) if the server dropped it.
    pub(crate) async fn client(&mut self) -> Result<&Client, LoadError> {
        if self.client.is_closed() {
            self.client = retry::connect_unless_stopped(&self.target, self.retry_for, &self.stop).await?;
            self.remade = true;
            if let Some(id) = &self.load_id
                && !self.shared
            {
                super::claim::retake(&self.client, id).await?;
            }
        }
        Ok(&self.client)
    }

    /// The connection as it is, for a statement that copes with its loss itself.
    pub(crate) fn current(&self) -> &Client {
        &self.client
    }

    /// Marks the load finished (or how it ended) in the journal, retrying a lost connection.
    pub(crate) async fn close_journal(&mut self, status: &str, through: &[super::CommittedThrough]) -> Result<(), LoadError> {
        let Some(id) = self.load_id.clone() else { return Ok(()) };
        let stop = self.stop.clone();
        retry::run!(
            &Policy::reconnect(self.retry_for),
            |_| async { super::journal::close(self.client().await?, &id, status, through).await },
            stop = &*stop
        )
    }

    /// Moves the shared inputs this run (`owner`) owns on to where they are
    /// committed through, over the connection the load began with only: its
    /// commit then follows the batches' on the server that has them, and a
    /// server without them (reached after a failover) never gets a position
    /// past rows it lacks. Without that connection the positions stay where
    /// they are (a lower bound: the next run reads a little again and skips
    /// what the journal holds); so does a failure, which says so.
    pub(crate) async fn advance(&mut self, owner: &str, through: &[(u32, u64)]) -> Result<(), LoadError> {
        let Some(id) = self.load_id.clone() else { return Ok(()) };
        if self.remade || self.client.is_closed() {
            return Ok(());
        }
        super::journal::advance(&self.client, &id, owner, through).await
    }
}
