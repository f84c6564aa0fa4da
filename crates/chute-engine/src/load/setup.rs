//! Before any row moves: the kind is prepared (tables, routing), the input
//! opened into its source, and the journal opened under the load's lock.
//! Each step that reads the server is retried on a new connection while the
//! server is unreachable or restarting (`retry_for`): preparing only reads,
//! or creates with `IF NOT EXISTS`.
//!
//! The input itself decides what it needs (`Input::prepare` and
//! `Input::open`): what comes after set-up (the coordinator, the sinks, the
//! report) sees a source, a kind and an `Opened` description, never the
//! input.

use std::sync::Arc;

use tokio_postgres::Client;

use super::input::{Identity, Opened};
use super::journal::{self, Committed};
use super::kind::Prepared;
use super::routing::{RouteMode, Routing, reread_tree};
use super::{LoadError, LoadProgress, LoadSpec};
use crate::retry::{self, Policy};

/// Connects and prepares the load's kind (tables, columns, routing,
/// policies), starting over on a new connection while the server is
/// unreachable or restarting.
pub(crate) async fn prepare(spec: &LoadSpec, progress: &mut dyn LoadProgress) -> Result<(Client, Prepared), LoadError> {
    retry::run!(
        &Policy::reconnect(spec.retry_for),
        |_| async {
            let control = spec.target.connect().await?;
            crate::pooler::check(&spec.target, &control).await?;
            let prepared = spec.input.prepare(spec, &control, progress).await?;
            Ok((control, prepared))
        },
        on_retry = |r| say_waiting(r, spec, progress),
        // Nothing has moved yet: a stop need not wait out the retries.
        stop = spec.cancel.as_ref()
    )
}

/// The journal's name for a load: the id it was given, or derived from its
/// input's identity (see `input::Identity`). `None`: not journaled.
pub(crate) fn load_id(spec: &LoadSpec, opened: &Opened) -> Option<String> {
    spec.load_id.clone().or_else(|| opened.identity.as_ref().map(Identity::load_id))
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
    retry::run!(
        &Policy::reconnect(spec.retry_for),
        |a| async {
            if a.reconnect() || control.is_closed() {
                *control = retry::connect(&spec.target, spec.retry_for, |_| {}).await?;
            }
            // The load's lock goes with the connection: taken on each new one.
            // Shared inputs are owned one by one instead (see `claim::fence`).
            if entry.shared.is_none() {
                super::claim::acquire(control, entry.load_id, spec.wait, progress).await?;
            }
            for t in tables.iter().filter(|t| matches!(t.mode, RouteMode::Tree(_))) {
                reread_tree(control, t).await?;
            }
            journal::open(control, &entry).await
        },
        on_retry = |r| say_waiting(r, spec, progress),
        // Nothing has moved yet: a stop need not wait out the retries.
        stop = spec.cancel.as_ref()
    )
}

/// Says, at the first retry only, that the server is being waited for.
fn say_waiting(r: &retry::Retry<'_, LoadError>, spec: &LoadSpec, progress: &mut dyn LoadProgress) {
    if r.failures == 1 {
        progress.notice(&format!("{}; retrying for up to {:?}", r.error, spec.retry_for));
    }
}
