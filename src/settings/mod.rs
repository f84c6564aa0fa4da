//! Validated settings: where to connect, decided once.
//!
//! The rule for choosing a server is libpq's plus one: `--url` or any `PG*`
//! variable names a server; with neither, chute starts (or reuses) its
//! embedded server and says so on stderr.

use std::path::PathBuf;

use anyhow::Context;
use chute_engine::ConnectOptions;
use chute_engine::connect::{ProcessEnv, env_names_a_server};
use chute_engine::local::{LocalServer, StartOutcome};

use crate::args::ConnArgs;

pub mod generate;
pub mod load;

/// Resolves the server to use, starting the embedded one when none is named.
pub fn target(conn: &ConnArgs) -> anyhow::Result<ConnectOptions> {
    if conn.url.is_some() || env_names_a_server(&ProcessEnv) {
        return Ok(ConnectOptions::resolve(conn.url.as_deref(), &ProcessEnv)?);
    }
    let server = local_server(conn.data_dir.clone())?;
    let outcome = server.ensure_running().context("cannot start the embedded PostgreSQL")?;
    let dir = server.cluster.data_dir.display();
    let what = match outcome {
        StartOutcome::AlreadyRunning => "running",
        StartOutcome::Started => "started it",
        StartOutcome::Created => "created and started it",
    };
    eprintln!(
        "chute: no server configured (--url or PGHOST…); using the embedded PostgreSQL in {dir} ({what}; `chute local stop` stops it)"
    );
    Ok(server.connect_options())
}

pub fn local_server(data_dir: Option<PathBuf>) -> anyhow::Result<LocalServer> {
    Ok(LocalServer::new(data_dir)?)
}

/// Checks an interval flag (`1h`, `1d`, `1mon`, or a plain number for
/// integer keys) before anything connects, naming the flag when it is wrong.
pub fn check_interval(flag: &str, value: &str) -> anyhow::Result<()> {
    chute_core::partman::interval::Span::parse(value).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    Ok(())
}

/// Checks a time zone flag (an IANA name such as `Europe/Berlin`, or `UTC`)
/// before anything connects.
pub fn check_zone(flag: &str, value: &str) -> anyhow::Result<()> {
    chute_core::partman::interval::zone(value).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    Ok(())
}

/// How the CLI names the engine's settings in its messages: as the flag a
/// user types (see `chute_engine::setting`).
pub fn flag(setting: chute_engine::setting::Setting, value: Option<&str>) -> String {
    use chute_engine::setting::Setting as S;
    let flag = match setting {
        S::MemoryBudget => "--memory-mb",
        S::Backfill => "--backfill",
        S::RetryFor => "--retry-for",
        S::Atomic => "--atomic",
        S::Wait => "--wait",
        S::LoadId => "--load-id",
        S::Columns => "--columns",
        S::Format => "--format",
        S::ViaParent => "--via-parent",
        S::NoCreatePartitions => "--no-create-partitions",
        S::Schema => "--schema",
        S::MaxFuture => "--max-future",
        S::OnConflict => "--on-conflict",
        S::ConflictKey => "--conflict-key",
        S::UpdateColumns => "--update-columns",
        S::UpdateIf => "--update-if",
        S::ParseThreads => "--parse-threads",
        S::Workers => "--workers",
        S::BatchBytes => "--batch-mb",
        S::BatchRows => "--batch-rows",
        S::ChunkBytes => "--chunk-bytes",
        S::LockTimeout => "--lock-timeout",
        S::BackfillAfter => "--backfill-after",
        S::FlushEvery => "--flush-every",
        S::IgnoreUnknown => "--ignore-unknown",
        S::MaxNewPartitions => "--max-new-partitions",
        S::MaxAge => "--max-age",
    };
    match value {
        Some(v) => format!("{flag} {v}"),
        None => flag.to_owned(),
    }
}
