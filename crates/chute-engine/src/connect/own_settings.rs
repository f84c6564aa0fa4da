//! What chute's own sessions need from the server, whatever a DBA set for
//! the role or the database.
//!
//! A role's `statement_timeout` of a second cancels a COPY of a large batch
//! or a backfill's `INSERT … SELECT`; `idle_in_transaction_session_timeout`
//! ends a session whose transaction waits between statements for the next
//! piece of input; `default_transaction_read_only` makes every write fail
//! with 25006 as on a standby. chute bounds its own work (retries for
//! `--retry-for`, DDL with its own `lock_timeout`, statements of bounded
//! size), so it turns these three off in each session it opens, and
//! `idle_session_timeout` (PostgreSQL 14 and newer) too: a consumer waiting
//! for messages, or a service's connection between requests, sits idle by
//! design, and a session ended under it is a reconnect and a run started
//! again for nothing. A role's
//! `lock_timeout` is kept: chute's DDL sets its own, and a COPY that waits
//! past it for a lock is retried (55P03 is a lock wait). `SET` is per
//! session and a session-mode pooler resets it (`DISCARD ALL`) when chute's
//! session ends; it is never sent as a start-up `options` (which PgBouncer
//! refuses).

use tokio_postgres::{Client, SimpleQueryMessage};

use super::target::ServerState;

/// The settings, as one statement; `idle_session_timeout` where the server has it.
const SETTINGS: &str = "SET statement_timeout = 0; SET idle_in_transaction_session_timeout = 0; SET default_transaction_read_only = off; \
     SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'idle_session_timeout'";

/// Applies chute's session settings to a new connection and says what the
/// server is (for `target_session_attrs`), in one round trip of the simple
/// protocol (no prepared statement: a pooler may run the next statement on
/// another backend).
pub(crate) async fn apply(client: &Client) -> Result<ServerState, tokio_postgres::Error> {
    let messages = client.simple_query(&format!("{SETTINGS}; {}", ServerState::QUERY)).await?;
    // The last row: the settings' own statement may answer one before it.
    let row = messages.iter().rev().find_map(|m| if let SimpleQueryMessage::Row(r) = m { Some(r) } else { None });
    Ok(ServerState::from_text(row.and_then(|r| r.get(0)), row.and_then(|r| r.get(1))))
}
