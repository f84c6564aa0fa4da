//! `chute doctor` and `chute status`: what slows ingestion on this server.
//!
//! The published advice on ingestion is a checklist applied by hand (unused
//! and duplicate indexes, checkpoint tuning, the loader's distance to the
//! server, partitions kept ahead, an empty DEFAULT partition). This module
//! reads the figures behind each item from the live server, one family per
//! file, and hands them to the pure rules in `chute_core::doctor`, which say
//! whether they are a problem and what exactly fixes it.

mod defaults;
mod indexes;
mod partitions;
mod sample;
mod server;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use chute_core::doctor::indexes::{IndexHistory, Window, instant_text};
use chute_core::doctor::{self as rules, Finding};
use chute_core::ident::QualifiedName;
use serde::Serialize;

use crate::ConnectOptions;
use crate::catalog;
use crate::exec::ExecSettings;
use crate::load::journal::{self, LoadRecord};
use crate::partman::{PartitionManager, PartmanError};

pub use server::SETTINGS;

/// Schemas the doctor never looks into (as a WHERE clause on `n`).
const USER_SCHEMAS: &str = "n.nspname NOT IN ('pg_catalog', 'information_schema', 'chute') AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp%'";

#[derive(Debug, thiserror::Error)]
pub enum DoctorError {
    #[error(transparent)]
    Partman(#[from] PartmanError),
    #[error(transparent)]
    Sql(#[from] crate::error::SqlError),
    #[error("{0}")]
    Other(String),
}

impl DoctorError {
    fn sql(what: &str, e: tokio_postgres::Error) -> Self {
        DoctorError::Sql(crate::error::SqlError::new(what, e))
    }
}

/// What to look at.
#[derive(Debug, Clone)]
pub struct DoctorOptions {
    /// Only these tables (and server-wide checks); every table when empty.
    pub tables: Vec<QualifiedName>,
    /// The loader's batch size, for the round trip's cost per batch.
    pub batch_mb: usize,
    /// Plain tables at least this large with a time column are reported, and
    /// partitions at least this large and far larger than their siblings.
    pub large_table_bytes: i64,
    /// How long to watch the WAL grow.
    pub wal_sample: Duration,
    /// A CSV file of rows for the one table named: how sorted they are.
    pub sample: Option<SampleOptions>,
    /// How long an index must go without a scan to be called unused, and
    /// that as given (`7d`).
    pub index_window: (Duration, String),
}

/// `--sample FILE` and how to read it.
#[derive(Debug, Clone)]
pub struct SampleOptions {
    pub file: PathBuf,
    pub header: bool,
    pub max_rows: usize,
}

/// One managed table, as `chute status` shows it.
#[derive(Debug, Clone, Serialize)]
pub struct TableSummary {
    pub table: String,
    pub covered_until: Option<String>,
    pub intervals_ahead: u32,
    pub premake: u32,
    pub due_for_retention: usize,
    pub rows_in_default: Option<i64>,
    pub partitions: usize,
    pub last_maintenance: Option<String>,
}

/// Everything `chute doctor` and `chute status` print (the `--json` schema
/// in docs/doctor.md).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub server_version: String,
    pub server_version_num: i32,
    /// When the statistics behind the index findings start.
    pub stats_since: String,
    /// The window index advice needs, and the indexes waiting for it.
    pub index_history: IndexHistory,
    pub round_trip_ms: f64,
    pub wal_bytes_per_s: f64,
    /// The settings that matter for ingestion, as `current_setting` shows them.
    pub settings: BTreeMap<String, String>,
    pub tables: Vec<TableSummary>,
    pub loads_in_progress: Vec<LoadRecord>,
    pub findings: Vec<Finding>,
    /// No finding at warning level or above.
    pub healthy: bool,
}

pub async fn run(opts: &ConnectOptions, o: &DoctorOptions) -> Result<Report, DoctorError> {
    if o.sample.is_some() && o.tables.len() != 1 {
        return Err(DoctorError::Other(
            "--sample needs exactly one TABLE, the one the file is for (chute doctor TABLE --sample FILE)".into(),
        ));
    }
    let mgr = PartitionManager::connect(opts, ExecSettings::default()).await?;
    let client = mgr.client();
    let now = crate::clock::now_micros();
    let mut oids = Vec::new();
    let mut names = Vec::new();
    for t in &o.tables {
        let info = catalog::require_table(client, t).await.map_err(PartmanError::from)?;
        oids.push(info.oid);
        names.push(info.name);
    }
    let only = if o.tables.is_empty() { None } else { Some(oids.as_slice()) };

    let (server_version, server_version_num) = server::version(client).await?;
    let (settings, shown) = server::settings(client).await?;
    let stats_since = server::stats_since(client).await?;
    let mut findings = Vec::new();

    let mut idx = indexes::read(client, only).await?;
    let (clock, not_recorded) = indexes::watch(client, &mut idx).await?;
    let window = Window { micros: o.index_window.0.as_micros().min(i64::MAX as u128) as i64, text: &o.index_window.1, now: clock.now };
    findings.extend(rules::indexes::findings(&idx, &stats_since, window));
    let (waiting, first) = rules::indexes::waiting(&idx, window.micros, clock.now);
    let index_history = IndexHistory {
        window: o.index_window.1.clone(),
        stats_start: instant_text(clock.stats_start),
        waiting,
        first_judged_at: first.map(instant_text),
        not_recorded,
    };

    let cp = server::checkpoints(client, &settings, o.wal_sample).await?;
    findings.extend(rules::server::checkpoints(&cp));
    let locks = server::lock_demand(client).await?;
    findings.extend(rules::server::settings(&settings, locks.as_ref()));
    let round_trip_ms = server::round_trip_ms(client, 21).await?;
    findings.extend(rules::server::round_trip(round_trip_ms, o.batch_mb, &opts.display_url()));

    let all = mgr.policies().await?;
    let managed: Vec<QualifiedName> = all.iter().map(|p| p.parent.clone()).collect();
    let policies: Vec<_> = all.into_iter().filter(|p| o.tables.is_empty() || names.contains(&p.parent)).collect();
    let mut tables = Vec::new();
    for p in &policies {
        let status = match mgr.status(&p.parent, now).await {
            Ok(s) => s,
            Err(PartmanError::Catalog(catalog::CatalogError::NoTable(_))) => {
                findings.push(partitions::orphaned_policy(&p.parent));
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        let (f, summary) = partitions::managed(client, p, &status, now, o.large_table_bytes).await?;
        findings.extend(f);
        tables.push(summary);
    }
    findings.extend(
        partitions::unmanaged_pending_detach(client, &managed)
            .await?
            .into_iter()
            .filter(|f| o.tables.is_empty() || names.iter().any(|n| n.to_string() == f.object)),
    );
    findings.extend(defaults::unmanaged(client, &managed, only).await?);
    findings.extend(partitions::unpartitioned(client, o.large_table_bytes, only).await?);
    if let Some(s) = &o.sample {
        let ([policy], [_]) = (policies.as_slice(), o.tables.as_slice()) else {
            return Err(DoctorError::Other(
                "--sample needs exactly one TABLE, one with a chute policy (chute partition create): the table the file is for".into(),
            ));
        };
        let req = sample::SampleRequest { file: &s.file, header: s.header, max_rows: s.max_rows };
        findings.extend(sample::check(client, policy, &req).await?);
    }

    let loads_in_progress = journal::list(client, None)
        .await
        .map_err(|e| DoctorError::Other(e.to_string()))?
        .into_iter()
        .filter(|l| l.status == "running")
        .collect();
    findings.sort_by_key(|f| std::cmp::Reverse(f.severity));
    let healthy = !rules::unhealthy(&findings);
    Ok(Report {
        server_version,
        server_version_num,
        stats_since,
        index_history,
        round_trip_ms,
        wal_bytes_per_s: cp.wal_bytes_per_s,
        settings: shown,
        tables,
        loads_in_progress,
        findings,
        healthy,
    })
}
