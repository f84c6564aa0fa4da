//! Server-wide figures: version, settings, checkpoint and WAL statistics,
//! the lock demand of the largest partitioned table, and the round trip
//! measured from this host.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use chute_core::doctor::server::{CheckpointFacts, LockDemand, Settings, bytes_of};
use chute_core::ident::QualifiedName;
use tokio_postgres::Client;

use super::DoctorError;

/// The settings `chute status` shows and the rules read.
pub const SETTINGS: &[&str] = &[
    "shared_buffers",
    "maintenance_work_mem",
    "max_wal_size",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "full_page_writes",
    "wal_compression",
    "synchronous_commit",
    "fsync",
    "max_locks_per_transaction",
    "max_connections",
    "max_prepared_transactions",
    "autovacuum",
    "autovacuum_vacuum_insert_threshold",
    "autovacuum_vacuum_insert_scale_factor",
];

pub async fn version(client: &Client) -> Result<(String, i32), DoctorError> {
    let r = client
        .query_one("SELECT current_setting('server_version'), current_setting('server_version_num')::int4", &[])
        .await
        .map_err(|e| DoctorError::sql("reading the server version", e))?;
    Ok((r.get(0), r.get(1)))
}

/// The settings as the rules read them (value and unit), and as people
/// read them (`current_setting`, e.g. `128MB`).
pub async fn settings(client: &Client) -> Result<(Settings, BTreeMap<String, String>), DoctorError> {
    let names: Vec<String> = SETTINGS.iter().map(|s| s.to_string()).collect();
    let rows = client
        .query("SELECT name::text, setting::text, unit::text, current_setting(name)::text FROM pg_settings WHERE name = ANY($1)", &[&names])
        .await
        .map_err(|e| DoctorError::sql("reading pg_settings", e))?;
    let rules = rows.iter().map(|r| (r.get::<_, String>(0), (r.get::<_, String>(1), r.get::<_, Option<String>>(2)))).collect();
    let shown = rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, String>(3))).collect();
    Ok((rules, shown))
}

/// When the database's statistics start, for evidence lines.
pub async fn stats_since(client: &Client) -> Result<String, DoctorError> {
    let r: Option<String> = client
        .query_one("SELECT stats_reset::text FROM pg_stat_database WHERE datname = current_database()", &[])
        .await
        .map_err(|e| DoctorError::sql("reading pg_stat_database", e))?
        .get(0);
    Ok(match r {
        Some(t) => format!("the statistics reset of {t}"),
        None => "the statistics began (never reset)".into(),
    })
}

fn lsn_sql() -> &'static str {
    "SELECT (CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END - '0/0'::pg_lsn)::float8"
}

/// Checkpoint counters and the WAL rate: the average since the WAL
/// statistics start, or the rate over `sample` now, whichever is higher.
pub async fn checkpoints(client: &Client, s: &Settings, sample: Duration) -> Result<CheckpointFacts, DoctorError> {
    let err = |e: tokio_postgres::Error| DoctorError::sql("reading pg_stat_bgwriter and pg_stat_wal", e);
    let b = client
        .query_one(
            "SELECT checkpoints_timed, checkpoints_req, coalesce(stats_reset::text, 'the server began (never reset)') FROM pg_stat_bgwriter",
            &[],
        )
        .await
        .map_err(err)?;
    let w = client
        .query_one(
            "SELECT wal_bytes::float8, extract(epoch FROM now() - coalesce(stats_reset, pg_postmaster_start_time()))::float8 FROM pg_stat_wal",
            &[],
        )
        .await
        .map_err(err)?;
    let (wal_bytes, secs): (f64, f64) = (w.get(0), w.get(1));
    let average = if secs > 0.0 { wal_bytes / secs } else { 0.0 };
    let t0 = Instant::now();
    let l0: f64 = client.query_one(lsn_sql(), &[]).await.map_err(err)?.get(0);
    // The sample's length, not a retry.
    tokio::time::sleep(sample).await;
    let l1: f64 = client.query_one(lsn_sql(), &[]).await.map_err(err)?.get(0);
    let now_rate = (l1 - l0).max(0.0) / t0.elapsed().as_secs_f64();
    let num = |name: &str, default: f64| s.get(name).and_then(|(v, _)| v.parse::<f64>().ok()).unwrap_or(default);
    Ok(CheckpointFacts {
        timed: b.get(0),
        requested: b.get(1),
        since: b.get::<_, String>(2),
        max_wal_size_bytes: bytes_of(s, "max_wal_size").unwrap_or(1073741824),
        checkpoint_timeout_s: num("checkpoint_timeout", 300.0),
        completion_target: num("checkpoint_completion_target", 0.9),
        wal_bytes_per_s: average.max(now_rate),
    })
}

/// The partitioned table whose partitions and indexes make the most
/// relations for one statement to lock.
pub async fn lock_demand(client: &Client) -> Result<Option<LockDemand>, DoctorError> {
    let row = client
        .query_opt(
            "SELECT n.nspname::text, c.relname::text,
                    (SELECT count(*) FROM pg_partition_tree(c.oid) pt)
                    + (SELECT count(*) FROM pg_partition_tree(c.oid) pt JOIN pg_index i ON i.indrelid = pt.relid)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind = 'p' AND NOT c.relispartition
             ORDER BY 3 DESC LIMIT 1",
            &[],
        )
        .await
        .map_err(|e| DoctorError::sql("counting partitions", e))?;
    Ok(row.map(|r| LockDemand { table: QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1)).to_string(), relations: r.get(2) }))
}

/// The fastest of `n` `SELECT 1` round trips, in milliseconds: the
/// network's and the server's share, which every batch pays. A busy client
/// or server only adds scheduling delay to some samples (a median of 21 on a
/// machine running builds read 4 ms where the fastest read 0.1 ms), and that
/// delay is no reason to move the loader.
pub async fn round_trip_ms(client: &Client, n: usize) -> Result<f64, DoctorError> {
    let mut fastest = f64::INFINITY;
    for _ in 0..n {
        let t = Instant::now();
        client.simple_query("SELECT 1").await.map_err(|e| DoctorError::sql("measuring the round trip", e))?;
        fastest = fastest.min(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(fastest)
}
