//! `--during-migrate`: `chute migrate`'s own code path (the engine's
//! `Migrator`, what the command runs) turns the table into daily (or
//! `--migrate-interval`) partitions while the workload runs: the swap, then
//! the split of the old rows. Each step's phase is marked when it starts,
//! on the same clock as the samples, so the charts show what each phase
//! did to the application.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use chute_core::ident::QualifiedName;
use chute_core::partman::interval::{Span, Unit};
use chute_core::partman::{KeyType, Policy, StepKind};
use chute_engine::ConnectOptions;
use chute_engine::exec::{ExecSettings, StepEvent};
use chute_engine::migrate::{MigrateRequest, Migrator, SplitRequest};

/// How the migration runs.
#[derive(Debug, Clone)]
pub struct MigrateSpec {
    /// Seconds of workload before the migration starts.
    pub after_s: f64,
    pub interval: Span,
    pub premake: u32,
    /// Rows per copy batch of the split.
    pub batch_rows: i64,
    /// Pace of the split (rows per second), if any.
    pub rows_per_s: Option<f64>,
    pub exec: ExecSettings,
}

/// Where the migration stands, shared with the sampler.
#[derive(Debug, Default)]
pub struct Progress {
    /// (seconds since the start, phase) for each phase that began.
    pub markers: Vec<(f64, String)>,
    /// When it ended (done or failed).
    pub finished: Option<f64>,
    pub error: Option<String>,
}

/// Waits `after_s`, then migrates and splits `table`; records phases and
/// the outcome in `state`.
pub async fn run(
    options: ConnectOptions,
    table: QualifiedName,
    key: String,
    spec: MigrateSpec,
    started: Instant,
    state: Arc<Mutex<Progress>>,
) {
    let wait = std::time::Duration::from_secs_f64(spec.after_s.max(0.0)).saturating_sub(started.elapsed());
    tokio::time::sleep(wait).await;
    let result = migrate(&options, &table, &key, &spec, started, &state).await;
    let mut s = state.lock().expect("migration state");
    s.finished = Some(started.elapsed().as_secs_f64());
    match result {
        Ok(()) => s.markers.push((started.elapsed().as_secs_f64(), "migrated".into())),
        Err(e) => s.error = Some(e),
    }
}

async fn migrate(
    options: &ConnectOptions,
    table: &QualifiedName,
    key: &str,
    spec: &MigrateSpec,
    started: Instant,
    state: &Arc<Mutex<Progress>>,
) -> Result<(), String> {
    let mut m = Migrator::connect(options, spec.exec).await.map_err(|e| e.to_string())?;
    let (extend, problems) = chute_engine::migrate::preflight(m.client(), table, key).await.map_err(|e| e.to_string())?;
    if let Some(p) = problems.first() {
        return Err(format!("{table} cannot be migrated: {} (fix: {})", p.what, p.fix));
    }
    // The key's type is filled in from the catalog.
    let policy = Policy {
        premake: spec.premake,
        max_future: spec.interval.is_time().then_some(Span::Time { n: 1, unit: Unit::Days }),
        ..Policy::new(table.clone(), key, KeyType::Timestamptz, spec.interval)
    };
    let state = state.clone();
    let mut last = String::new();
    let mut mark = move |_: usize, step: &chute_core::partman::Step, event: StepEvent| {
        if let (StepEvent::Started, StepKind::Migrate { phase, .. }) = (event, &step.kind)
            && *phase != last
        {
            last = phase.clone();
            state.lock().expect("migration state").markers.push((started.elapsed().as_secs_f64(), phase.clone()));
        }
    };
    let req = MigrateRequest { policy, extend_primary_key: extend, dry_run: false };
    m.migrate(req, chute_engine::clock::now_micros(), &mut mark).await.map_err(|e| e.to_string())?;
    let split =
        SplitRequest { table: table.clone(), batch_rows: spec.batch_rows, rows_per_s: spec.rows_per_s, keep_old: false, dry_run: false };
    m.split(split, &mut mark).await.map_err(|e| e.to_string())?;
    Ok(())
}
