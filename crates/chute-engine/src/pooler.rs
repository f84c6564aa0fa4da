//! A connection pooler in front of PostgreSQL (PgBouncer, pgcat, Odyssey,
//! Supavisor) that hands one server backend to several client sessions, a
//! transaction (or a statement) at a time.
//!
//! chute keeps state in its sessions across transactions: a load's claim
//! and a migration's or a partition run's lock are session advisory locks,
//! and its catalog reads depend on session settings. Behind a pool in
//! transaction or statement mode such a lock stays on the server backend
//! when chute's session is done with it, where the next client of that
//! backend finds it (a later load was refused as "already running"), and two
//! chute sessions can each believe they hold one. So a writer checks, once
//! per target and process, before anything moves, that its sessions are its
//! own: it asks its first session and a second one for their backend pids,
//! twice each, alternately. Two sessions served by one backend, or one
//! session that changed backend between two statements, is such a pool; the
//! command is refused with what to use instead. A session-mode pool (one
//! backend per client session, reset when it ends) and a direct connection
//! pass.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};

use tokio_postgres::Client;

use crate::{ConnectError, ConnectOptions};

/// Why a target cannot be written through.
#[derive(Debug, thiserror::Error)]
pub enum PoolerError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error("checking whether a pooler shares chute's sessions: {0}")]
    Sql(#[from] tokio_postgres::Error),
    /// The refusal, worded for the user.
    #[error("{0}")]
    Pooled(String),
}

/// The targets (their display URLs) this process found to be session-safe.
fn checked() -> &'static Mutex<HashSet<String>> {
    static CHECKED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    CHECKED.get_or_init(Mutex::default)
}

/// Refuses a target whose sessions a pooler shares between clients. `first`
/// is a session already open to `target` (chute's control session).
pub async fn check(target: &ConnectOptions, first: &Client) -> Result<(), PoolerError> {
    let key = target.display_url();
    if checked().lock().unwrap_or_else(|p| p.into_inner()).contains(&key) {
        return Ok(());
    }
    let a1 = backend_pid(first).await?;
    let second = target.connect().await?;
    let b1 = backend_pid(&second).await?;
    let a2 = backend_pid(first).await?;
    let b2 = backend_pid(&second).await?;
    if let Some(shared) = sharing([a1, a2], [b1, b2]) {
        return Err(PoolerError::Pooled(refusal(&key, shared)));
    }
    checked().lock().unwrap_or_else(|p| p.into_inner()).insert(key);
    Ok(())
}

/// The session's backend pid, asked without a prepared statement: a pool in
/// transaction mode may run a statement's Parse and its Execute on two
/// backends (the second then has no such statement, or another client's).
async fn backend_pid(client: &Client) -> Result<i32, tokio_postgres::Error> {
    let messages = client.simple_query("SELECT pg_backend_pid()").await?;
    let pid = messages.iter().find_map(|m| match m {
        tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
        _ => None,
    });
    // No row (a pooler that answers itself): a pid nothing else has, so it is never taken for a shared backend.
    Ok(pid.unwrap_or_else(|| -NEXT_UNKNOWN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)))
}

/// Stand-ins for pids that were not answered, each different.
static NEXT_UNKNOWN: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(1);

/// What the pids of two sessions (two statements each) show of a pool in
/// transaction or statement mode: the sentence that says so, or `None`.
fn sharing(a: [i32; 2], b: [i32; 2]) -> Option<String> {
    if let Some(pid) = a.iter().find(|p| b.contains(p)) {
        return Some(format!("two of chute's sessions were both served by PostgreSQL backend pid {pid}"));
    }
    if a[0] != a[1] || b[0] != b[1] {
        let (x, y) = if a[0] != a[1] { (a[0], a[1]) } else { (b[0], b[1]) };
        return Some(format!("one of chute's sessions moved from backend pid {x} to pid {y} between two statements"));
    }
    None
}

fn refusal(url: &str, shared: String) -> String {
    format!(
        "{url} is behind a connection pooler in transaction or statement pooling mode (PgBouncer's pool_mode = transaction \
         or statement): {shared}. chute holds locks across transactions (a load's claim on its rows, a migration's lock), \
         which such a pool would leave behind for its next client or share between two; nothing was written. \
         Connect chute through a pool in session mode (pool_mode = session) or straight to PostgreSQL \
         (see the book's \"Production PostgreSQL\" page)"
    )
}

#[cfg(test)]
mod tests {
    use super::sharing;

    #[test]
    fn own_sessions_pass_and_shared_or_moving_ones_do_not() {
        assert_eq!(sharing([10, 10], [11, 11]), None);
        assert!(sharing([10, 10], [10, 10]).unwrap().contains("pid 10"));
        assert!(sharing([10, 12], [11, 12]).unwrap().contains("pid 12"));
        assert!(sharing([10, 12], [11, 11]).unwrap().contains("from backend pid 10 to pid 12"));
        assert!(sharing([10, 10], [11, 13]).unwrap().contains("from backend pid 11 to pid 13"));
    }
}
