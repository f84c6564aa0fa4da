//! `chute migrate`, the I/O half: reads the catalog and the progress row in
//! `chute.migrations`, asks the planners in `chute_core::migrate` for the
//! steps not done yet and has the one executor run them. The design (swap,
//! then split through shadow leaves kept in sync by a trigger) is described
//! in `chute_core::migrate`.
//!
//! Every run holds a session advisory lock keyed by the table's name (its oid
//! changes at the swap), so two runs never interleave; each step commits on
//! its own, so a run killed at any moment is continued by running it again.

mod facts;
mod split;

use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_core::migrate::plan::{self as mplan, migration_filter};
use chute_core::migrate::split::Leaf;
use chute_core::migrate::{self, Names, Problem};
use chute_core::partman::planner::PlanError;
use chute_core::partman::{Plan, Policy, Step, StepKind};
use tokio_postgres::Client;

use crate::catalog::{self, CatalogError};
use crate::exec::{self, ExecError, ExecSettings, StepEvent};
use crate::retry::Classify;
use crate::schema::{self, LOCK_CLASS, SchemaError};
use crate::{ConnectError, ConnectOptions};

/// What `chute migrate TABLE --key KEY` would refuse on this table today,
/// and whether it needs `--extend-primary-key`: `chute doctor` suggests the
/// command only as it would run.
pub async fn preflight(client: &Client, table: &QualifiedName, key: &str) -> Result<(bool, Vec<Problem>), CatalogError> {
    let info = catalog::require_table(client, table).await?;
    let facts = facts::read(client, &info, key).await?;
    let extend = facts.primary_key.as_ref().is_some_and(|pk| !pk.iter().any(|c| c == key));
    Ok((extend, migrate::check(&facts, key, extend)))
}

#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Name(#[from] chute_core::ident::IdentError),
    #[error(transparent)]
    Sql(#[from] crate::error::SqlError),
    #[error("{0}")]
    Refused(String),
    #[error("{cause}\nthe table is as it was before the migration: {report}")]
    Aborted { cause: Box<MigrateError>, report: String },
    #[error("{} cannot be migrated yet:\n{}", .table, .problems.iter().map(|p| format!("  - {}\n    fix: {}", p.what, p.fix)).collect::<Vec<_>>().join("\n"))]
    Preconditions { table: String, problems: Vec<Problem> },
}

impl From<crate::pooler::PoolerError> for MigrateError {
    fn from(e: crate::pooler::PoolerError) -> Self {
        match e {
            crate::pooler::PoolerError::Connect(e) => MigrateError::Connect(e),
            crate::pooler::PoolerError::Sql(e) => e.into(),
            refused @ crate::pooler::PoolerError::Pooled(_) => MigrateError::Refused(refused.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Sql(e.into())
    }
}

impl Classify for MigrateError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            MigrateError::Connect(e) => e.fault(),
            MigrateError::Catalog(e) => e.fault(),
            MigrateError::Exec(e) => e.fault(),
            MigrateError::Schema(e) => e.fault(),
            MigrateError::Sql(e) => e.fault(),
            _ => crate::retry::Fault::Fatal,
        }
    }
}

/// What `chute migrate TABLE --key … --interval …` is asked to do. The
/// policy's `parent` is the table; `key_type` is filled in from the catalog.
#[derive(Debug, Clone)]
pub struct MigrateRequest {
    pub policy: Policy,
    pub extend_primary_key: bool,
    pub dry_run: bool,
}

/// What `chute migrate TABLE --split` is asked to do.
#[derive(Debug, Clone)]
pub struct SplitRequest {
    pub table: QualifiedName,
    pub batch_rows: i64,
    pub rows_per_s: Option<f64>,
    pub keep_old: bool,
    pub dry_run: bool,
}

pub type StepReporter<'a> = &'a mut (dyn FnMut(usize, &Step, StepEvent) + Send);

const MIGRATIONS_DDL: &str = "
CREATE TABLE IF NOT EXISTS chute.migrations (
    table_schema text NOT NULL,
    table_name text NOT NULL,
    key text NOT NULL,
    hi int8 NOT NULL,
    phase text NOT NULL DEFAULT 'prepare',
    split_from int8,
    rows_total int8,
    rows_moved int8 NOT NULL DEFAULT 0,
    copied_to int8,
    copy_done boolean NOT NULL DEFAULT false,
    copy_started_at timestamptz,
    longest_lock_ms int8 NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (table_schema, table_name)
);
-- Since the split bounds its transactions' locks: the most any of them held,
-- and the last copy batch's (which sizes the next).
ALTER TABLE chute.migrations ADD COLUMN IF NOT EXISTS max_step_locks int8 NOT NULL DEFAULT 0;
ALTER TABLE chute.migrations ADD COLUMN IF NOT EXISTS batch_locks int8";

/// One connection's worth of migration: a lost connection is replaced by a
/// new one on the same host list (see [`Migrator::migrate`]).
#[derive(Debug)]
pub struct Migrator {
    client: Client,
    /// Where the client came from: a reconnect goes through the host list again.
    opts: ConnectOptions,
    pub settings: ExecSettings,
    /// Told of a lost connection and the reconnect.
    pub notices: exec::Notices,
}

/// The progress row of one migration.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MigrationStatus {
    pub table: String,
    pub key: String,
    pub phase: String,
    pub rows_moved: i64,
    pub rows_total: Option<i64>,
    /// Rows copied per second since the split began.
    pub rate_rows_per_s: Option<f64>,
    /// The longest single attempt of a swap or cutover step (ms): what writers waited at most.
    pub longest_lock_ms: i64,
    /// The most locks one transaction of the split held (`pg_locks`).
    pub max_step_locks: i64,
    /// The most the split allows itself in one transaction: a quarter of
    /// the server's lock table.
    pub lock_budget: i64,
    pub old_partition: String,
    /// Whether the old partition is still there: the split drops it at its
    /// cutover unless `--keep-old` kept it.
    pub old_partition_exists: bool,
}

fn lock_key(table: &QualifiedName) -> String {
    format!("migrate:{}", table.quoted())
}

impl Migrator {
    pub async fn connect(opts: &ConnectOptions, settings: ExecSettings) -> Result<Self, MigrateError> {
        Self::on(opts.connect().await?, opts, settings, exec::Notices::default()).await
    }

    /// [`Migrator::connect`], waiting up to `settings.retry_for` for a
    /// server that takes writes (a failover under way), said to `notices`.
    pub async fn connect_within(opts: &ConnectOptions, settings: ExecSettings, notices: exec::Notices) -> Result<Self, MigrateError> {
        Self::on(exec::connect_within(opts, settings.retry_for, &notices).await?, opts, settings, notices).await
    }

    async fn on(client: Client, opts: &ConnectOptions, settings: ExecSettings, notices: exec::Notices) -> Result<Self, MigrateError> {
        crate::pooler::check(opts, &client).await?;
        catalog::prepare_session(&client).await?;
        Ok(Migrator { client, opts: opts.clone(), settings, notices })
    }

    /// After `cause`, a lost connection: a new one, while `outage` allows
    /// (else `cause`). The session's advisory lock went with the old one;
    /// the caller takes it again and reads its progress from the server
    /// reached now, which after a failover may lack the last commits the
    /// old primary acknowledged.
    async fn reconnect(&mut self, outage: &mut crate::retry::Outage, cause: MigrateError) -> Result<(), MigrateError> {
        let client = exec::reconnect(&self.opts, outage, cause, &self.notices, &std::sync::atomic::AtomicBool::new(false)).await?;
        catalog::prepare_session(&client).await?;
        self.client = client;
        Ok(())
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    async fn lock(&self, table: &QualifiedName) -> Result<(), MigrateError> {
        self.client.execute("SELECT pg_advisory_lock($1, hashtext($2))", &[&LOCK_CLASS, &lock_key(table)]).await?;
        Ok(())
    }

    async fn unlock<T>(&self, table: &QualifiedName, result: Result<T, MigrateError>) -> Result<T, MigrateError> {
        let unlocked = self.client.execute("SELECT pg_advisory_unlock($1, hashtext($2))", &[&LOCK_CLASS, &lock_key(table)]).await;
        let v = result?;
        unlocked?;
        Ok(v)
    }

    async fn ensure_schema(&self) -> Result<(), MigrateError> {
        schema::ensure(&self.client).await?;
        self.client.batch_execute(&format!("BEGIN; SELECT pg_advisory_xact_lock({LOCK_CLASS}, 1); {MIGRATIONS_DDL}; COMMIT")).await?;
        Ok(())
    }

    /// The progress row, if any (and if the chute schema has the table).
    async fn row(&self, table: &QualifiedName) -> Result<Option<tokio_postgres::Row>, MigrateError> {
        let exists: bool = self.client.query_one("SELECT to_regclass('chute.migrations') IS NOT NULL", &[]).await?.get(0);
        if !exists {
            return Ok(None);
        }
        let sql = format!(
            "SELECT phase, hi, split_from, copied_to, copy_done, rows_moved, rows_total, key, longest_lock_ms,
                    extract(epoch FROM (updated_at - copy_started_at))::float8
             FROM chute.migrations WHERE {}",
            migration_filter(table)
        );
        Ok(self.client.query_opt(&sql, &[]).await?)
    }

    /// Resolves the table's schema, so names and progress rows agree.
    async fn resolve(&self, table: &QualifiedName) -> Result<QualifiedName, MigrateError> {
        if table.schema.is_some() {
            return Ok(table.clone());
        }
        if let Some(info) = catalog::table_info(&self.client, table).await? {
            return Ok(info.name);
        }
        let schema: Option<String> = self.client.query_one("SELECT current_schema()::text", &[]).await?.get(0);
        Ok(QualifiedName::new(schema.unwrap_or_else(|| "public".into()), table.name.clone()))
    }

    /// Checks preconditions and plans (and unless `dry_run` runs) everything
    /// up to the swap and the policy. Returns the plan. A lost connection
    /// (a failover among the causes) is replaced for up to `retry_for`, and
    /// the migration planned again from what that server holds.
    pub async fn migrate(&mut self, req: MigrateRequest, now: i64, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        let mut outage = crate::retry::Outage::new(self.settings.retry_for);
        loop {
            let mut progressed = false;
            let mut counted = |i: usize, step: &Step, e: StepEvent| {
                progressed |= e == StepEvent::Done;
                report(i, step, e)
            };
            let result = self.migrate_once(req.clone(), now, &mut counted).await;
            if progressed {
                outage.progressed();
            }
            match result {
                Err(e) if e.connection_lost() => self.reconnect(&mut outage, e).await?,
                done => return done,
            }
        }
    }

    async fn migrate_once(&mut self, mut req: MigrateRequest, now: i64, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        let table = self.resolve(&req.policy.parent).await?;
        req.policy.parent = table.clone();
        self.lock(&table).await?;
        let result = self.migrate_locked(req, now, report).await;
        self.unlock(&table, result).await
    }

    async fn migrate_locked(&mut self, mut req: MigrateRequest, now: i64, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        let table = req.policy.parent.clone();
        let names = Names::new(&table)?;
        let info = catalog::require_table(&self.client, &table).await?;
        let row = self.row(&table).await?;
        let phase: Option<String> = row.as_ref().map(|r| r.get(0));
        if info.relkind == 'p' && matches!(phase.as_deref(), Some("swapped" | "copying" | "flattening" | "done")) {
            // Swapped already (maybe killed before the policy was stored).
            let ty = catalog::column_type(&self.client, info.oid, &req.policy.key).await?.unwrap_or_default();
            req.policy.key_type = key_type(&ty, &req.policy.key)?;
            // The old table keeps its storage parameters until the split drops it.
            if self.exists(&names.old).await? {
                req.policy.storage = facts::storage(&self.client, &names.old).await?;
            }
            req.policy.validate().map_err(|e| MigrateError::Refused(e.to_string()))?;
            let mut plan = Plan::default();
            plan.push(
                StepKind::Migrate { table: table.clone(), phase: "policy".into() },
                format!("store the policy of {table} for chute partition maintain"),
                vec![chute_core::partman::planner::store_config_sql(&req.policy)],
                true,
            );
            plan.notes.push(format!("{table} is swapped already; move its old rows with: chute migrate {table} --split"));
            if !req.dry_run {
                exec::run_plan(&mut self.client, &plan, self.settings, report).await?;
            }
            return Ok(plan);
        }
        let facts = facts::read(&self.client, &info, &req.policy.key).await?;
        let mut facts = facts;
        facts.unique.retain(|(n, _)| *n != names.pk_index);
        facts.checks.retain(|(n, _)| *n != names.range_check);
        let problems = migrate::check(&facts, &req.policy.key, req.extend_primary_key);
        if !problems.is_empty() {
            return Err(MigrateError::Preconditions { table: table.to_string(), problems });
        }
        let ty = facts.key_type.clone().unwrap_or_default();
        req.policy.key_type = key_type(&ty, &req.policy.key)?;
        req.policy.storage = facts::storage(&self.client, &table).await?;
        req.policy.validate().map_err(|e| MigrateError::Refused(e.to_string()))?;
        let stored_hi: Option<i64> = match (&row, phase.as_deref()) {
            (Some(r), Some("prepare")) => Some(r.get(1)),
            _ => None,
        };
        let (min, max): (Option<i64>, Option<i64>) = {
            let k = req.policy.key_sql();
            let (lo, up) = (catalog::key_as_i64(&req.policy, &format!("min({k})")), catalog::key_as_i64(&req.policy, &format!("max({k})")));
            let r = self.client.query_one(&format!("SELECT {lo}, {up} FROM {}", table.quoted()), &[]).await?;
            (r.get(0), r.get(1))
        };
        let hi = match stored_hi {
            Some(h) => h,
            None => mplan::upper_bound(&req.policy, max, now)?,
        };
        // The split that follows must fit the server's lock table: refused
        // now, while the interval can still be chosen, if it would not.
        let leaves = chute_core::migrate::split::split_leaves(&req.policy, min.unwrap_or(hi), hi)?.len();
        let lock_table = split::lock_table(&self.client).await?;
        let interval = req.policy.interval.to_string();
        if let Some(p) = chute_core::migrate::locks::check(&table, lock_table, leaves, self.leaf_locks(&table).await?, Some(&interval)) {
            return Err(MigrateError::Preconditions { table: table.to_string(), problems: vec![p] });
        }
        let progress = facts::progress(&self.client, &names).await?;
        let mut plan = mplan::plan_swap(&req.policy, &facts, &names, progress, req.extend_primary_key, hi)?;
        if req.dry_run {
            let extend = req.extend_primary_key && facts.primary_key.as_ref().is_some_and(|pk| !pk.contains(&req.policy.key));
            plan.notes.extend(chute_core::migrate::inventory::lines(&facts, &names, &req.policy, extend));
            return Ok(plan);
        }
        self.ensure_schema().await?;
        if stored_hi.is_none() {
            self.client
                .execute(
                    "INSERT INTO chute.migrations (table_schema, table_name, key, hi) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (table_schema, table_name) DO UPDATE SET key = EXCLUDED.key, hi = EXCLUDED.hi, phase = 'prepare',
                       split_from = NULL, rows_total = NULL, rows_moved = 0, copied_to = NULL, copy_done = false, copy_started_at = NULL,
                       longest_lock_ms = 0, max_step_locks = 0, batch_locks = NULL, started_at = now(), updated_at = now()",
                    &[&table.schema.clone().unwrap_or_default(), &table.name, &req.policy.key, &hi],
                )
                .await?;
        }
        if let Err(e) = self.run_timed(&table, &plan, &mut *report).await {
            // Nothing to abort with: the caller reconnects and goes on.
            if e.connection_lost() {
                return Err(e);
            }
            let swapped = self.row(&table).await.ok().flatten().is_some_and(|r| r.get::<_, String>(0) != "prepare");
            if swapped {
                return Err(e);
            }
            return Err(self.abort(&names, e).await);
        }
        Ok(plan)
    }

    /// A failure before the swap: removes what this migration created and
    /// says exactly what was removed and what (if anything) is left.
    async fn abort(&mut self, names: &Names, cause: MigrateError) -> MigrateError {
        let progress = match facts::progress(&self.client, names).await {
            Ok(p) => p,
            Err(e) => return MigrateError::Aborted { cause: Box::new(cause), report: format!("cannot read what was created: {e}") },
        };
        let plan = mplan::plan_abort(names, progress);
        let mut lines = Vec::new();
        for step in &plan.steps {
            let one = Plan { steps: vec![step.clone()], notes: vec![] };
            match exec::run_plan(&mut self.client, &one, self.settings, exec::quiet).await {
                Ok(()) => lines.push(format!("removed: {}", step.description.trim_start_matches("drop "))),
                Err(e) => lines.push(format!("NOT removed ({e}): run by hand: {}", step.sql.join("; "))),
            }
        }
        let _ = self
            .client
            .batch_execute(&format!("DELETE FROM chute.migrations WHERE {} AND phase = 'prepare'", migration_filter(&names.table)))
            .await;
        if lines.is_empty() {
            lines.push("nothing had been created".into());
        }
        MigrateError::Aborted { cause: Box::new(cause), report: lines.join("; ") }
    }

    /// Runs a plan. Its swap, cutover and flatten steps record in
    /// `longest_lock_ms` how long writers could have waited on one attempt
    /// (from asking for the lock they wait for to the end, see
    /// `migrate::lock_asked`); an attempt that timed out and rolled back is
    /// counted here, as its time up to `lock_timeout` (the wait for
    /// autovacuum before it holds up nobody). Writers get through in the
    /// pauses between attempts.
    async fn run_timed(&mut self, table: &QualifiedName, plan: &Plan, report: StepReporter<'_>) -> Result<(), MigrateError> {
        let mut longest = Duration::ZERO;
        let mut began = Instant::now();
        let lock_timeout = self.settings.lock_timeout;
        let result = exec::run_plan(&mut self.client, plan, self.settings, |i, step, e| {
            let locking =
                matches!(&step.kind, StepKind::Migrate { phase, .. } if phase == "swap" || phase == "cutover" || phase == "flatten");
            match e {
                StepEvent::Started => began = Instant::now(),
                StepEvent::Retrying { pause, .. } if locking => {
                    longest = longest.max(began.elapsed().min(lock_timeout));
                    // The next attempt starts after the pause.
                    began = Instant::now() + pause;
                }
                _ => {}
            }
            report(i, step, e)
        })
        .await;
        if longest > Duration::ZERO {
            let ms = longest.as_millis() as i64;
            self.client
                .execute(
                    &format!(
                        "UPDATE chute.migrations SET longest_lock_ms = greatest(longest_lock_ms, $1) WHERE {}",
                        migration_filter(table)
                    ),
                    &[&ms],
                )
                .await?;
        }
        Ok(result?)
    }

    async fn exists(&self, table: &QualifiedName) -> Result<bool, MigrateError> {
        Ok(self.client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table.quoted()]).await?.get(0))
    }

    async fn policy(&self, table: &QualifiedName) -> Result<Policy, MigrateError> {
        let row = self
            .client
            .query_opt(
                "SELECT policy::text FROM chute.partition_config WHERE parent_schema = $1 AND parent_table = $2",
                &[&table.schema.clone().unwrap_or_default(), &table.name],
            )
            .await?
            .ok_or_else(|| {
                MigrateError::Refused(format!("{table} has no stored policy: run chute migrate {table} --key … --interval … again"))
            })?;
        serde_json::from_str(row.get(0)).map_err(|e| MigrateError::Refused(format!("the stored policy of {table} cannot be read: {e}")))
    }

    /// `chute migrate --status TABLE`.
    pub async fn status(&self, table: &QualifiedName) -> Result<MigrationStatus, MigrateError> {
        let table = self.resolve(table).await?;
        let row = self.row(&table).await?.ok_or_else(|| {
            MigrateError::Refused(format!(
                "{table} has no migration: start one with chute migrate {table} --key COLUMN --interval INTERVAL"
            ))
        })?;
        let moved: i64 = row.get(5);
        let secs: Option<f64> = row.get(9);
        // Read through jsonb: a progress row of an older schema lacks the column.
        let max_step_locks: i64 = self
            .client
            .query_one(
                &format!(
                    "SELECT coalesce((to_jsonb(m) ->> 'max_step_locks')::int8, 0) FROM chute.migrations m WHERE {}",
                    migration_filter(&table)
                ),
                &[],
            )
            .await?
            .get(0);
        let lock_budget = split::lock_table(&self.client).await?.budget();
        let old = Names::new(&table)?.old;
        let old_partition_exists: bool = self.client.query_one("SELECT to_regclass($1) IS NOT NULL", &[&old.quoted()]).await?.get(0);
        Ok(MigrationStatus {
            table: table.to_string(),
            key: row.get(7),
            phase: row.get(0),
            rows_moved: moved,
            rows_total: row.get(6),
            rate_rows_per_s: secs.filter(|s| *s > 0.0).map(|s| moved as f64 / s),
            longest_lock_ms: row.get(8),
            max_step_locks,
            lock_budget,
            old_partition: old.to_string(),
            old_partition_exists,
        })
    }
}

fn key_type(ty: &str, key: &str) -> Result<chute_core::partman::KeyType, MigrateError> {
    chute_core::partman::KeyType::from_sql(ty).ok_or_else(|| {
        MigrateError::Refused(format!(
            "the key {key:?} is {ty}; chute partitions on timestamptz, timestamp, date, smallint, integer or bigint"
        ))
    })
}

/// The leaves a split of `table` creates, for tests and `--status`.
pub fn leaves(policy: &Policy, from: i64, hi: i64) -> Result<Vec<Leaf>, MigrateError> {
    Ok(chute_core::migrate::split::split_leaves(policy, from, hi)?)
}
