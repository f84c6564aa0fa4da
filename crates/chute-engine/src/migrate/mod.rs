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

use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_core::migrate::plan::{self as mplan, Leaf, migration_filter};
use chute_core::migrate::{self, Names, Problem};
use chute_core::partman::planner::PlanError;
use chute_core::partman::{Plan, Policy, Step, StepKind};
use tokio_postgres::Client;

use crate::catalog::{self, CatalogError};
use crate::exec::{self, ExecError, ExecSettings, StepEvent};
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

impl From<tokio_postgres::Error> for MigrateError {
    fn from(e: tokio_postgres::Error) -> Self {
        MigrateError::Sql(e.into())
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
)";

/// One connection's worth of migration.
#[derive(Debug)]
pub struct Migrator {
    client: Client,
    pub settings: ExecSettings,
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
    pub old_partition: String,
}

fn lock_key(table: &QualifiedName) -> String {
    format!("migrate:{}", table.quoted())
}

impl Migrator {
    pub async fn connect(opts: &ConnectOptions, settings: ExecSettings) -> Result<Self, MigrateError> {
        let client = opts.connect().await?;
        catalog::prepare_session(&client).await?;
        Ok(Migrator { client, settings })
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
    /// up to the swap and the policy. Returns the plan.
    pub async fn migrate(&mut self, mut req: MigrateRequest, now: i64, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
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
        let hi = match stored_hi {
            Some(h) => h,
            None => {
                let expr = catalog::key_as_i64(&req.policy, &format!("max({})", req.policy.key_sql()));
                let max: Option<i64> = self.client.query_one(&format!("SELECT {expr} FROM {}", table.quoted()), &[]).await?.get(0);
                mplan::upper_bound(&req.policy, max, now)?
            }
        };
        let progress = facts::progress(&self.client, &names).await?;
        let plan = mplan::plan_swap(&req.policy, &facts, &names, progress, req.extend_primary_key, hi)?;
        if req.dry_run {
            return Ok(plan);
        }
        self.ensure_schema().await?;
        if stored_hi.is_none() {
            self.client
                .execute(
                    "INSERT INTO chute.migrations (table_schema, table_name, key, hi) VALUES ($1, $2, $3, $4)
                     ON CONFLICT (table_schema, table_name) DO UPDATE SET key = EXCLUDED.key, hi = EXCLUDED.hi, phase = 'prepare',
                       split_from = NULL, rows_total = NULL, rows_moved = 0, copied_to = NULL, copy_done = false, copy_started_at = NULL,
                       longest_lock_ms = 0, started_at = now(), updated_at = now()",
                    &[&table.schema.clone().unwrap_or_default(), &table.name, &req.policy.key, &hi],
                )
                .await?;
        }
        if let Err(e) = self.run_timed(&table, &plan, &mut *report).await {
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

    /// The columns the split copies (not generated ones) and whether an
    /// identity column is `GENERATED ALWAYS`.
    async fn split_columns(&self, old: &QualifiedName) -> Result<mplan::SplitColumns, MigrateError> {
        let columns = crate::catalog::columns_of(&self.client, old).await?;
        let identity_always = columns.iter().any(|c| c.identity == Some('a'));
        let names = columns.into_iter().filter(|c| !c.generated).map(|c| c.name).collect();
        Ok(mplan::SplitColumns { names, identity_always })
    }

    /// Runs a plan, recording the longest single attempt of a swap or
    /// cutover step: what writers wait at most (a retried step waits once
    /// per attempt, each under `lock_timeout`, and lets writers through in
    /// its pauses).
    async fn run_timed(&mut self, table: &QualifiedName, plan: &Plan, report: StepReporter<'_>) -> Result<(), MigrateError> {
        let mut longest = Duration::ZERO;
        let mut began = Instant::now();
        let result = exec::run_plan(&mut self.client, plan, self.settings, |i, step, e| {
            let locking =
                matches!(&step.kind, StepKind::Migrate { phase, .. } if phase == "swap" || phase == "cutover" || phase == "flatten");
            match e {
                StepEvent::Started => began = Instant::now(),
                StepEvent::Retrying { pause, .. } if locking => {
                    longest = longest.max(began.elapsed());
                    // The next attempt starts after the pause.
                    began = Instant::now() + pause;
                }
                StepEvent::Done if locking => longest = longest.max(began.elapsed()),
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

    /// Moves the old partition's rows into interval partitions (see the
    /// module doc of `chute_core::migrate`). Returns every plan it ran (or,
    /// with `dry_run`, would run; the copy shown as its first batch).
    pub async fn split(&mut self, mut req: SplitRequest, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        req.table = self.resolve(&req.table).await?;
        let table = req.table.clone();
        self.lock(&table).await?;
        let result = self.split_locked(req, report).await;
        self.unlock(&table, result).await
    }

    async fn split_locked(&mut self, req: SplitRequest, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        let table = req.table.clone();
        let names = Names::new(&table)?;
        let row = self.row(&table).await?.ok_or_else(|| {
            MigrateError::Refused(format!("{table} has no migration: run chute migrate {table} --key COLUMN --interval INTERVAL first"))
        })?;
        let phase: String = row.get(0);
        let hi: i64 = row.get(1);
        match phase.as_str() {
            "prepare" => {
                return Err(MigrateError::Refused(format!(
                    "{table} is not swapped yet: run chute migrate {table} --key COLUMN --interval INTERVAL again to finish the swap"
                )));
            }
            "done" => {
                return Err(MigrateError::Refused(format!("{table} is split already: its old rows are in interval partitions")));
            }
            _ => {}
        }
        let policy = self.policy(&table).await?;
        let mut all = Plan::default();
        if phase == "flattening" {
            // Killed after the cutover: only moving leaves up is left.
            let split_from: i64 = row.get::<_, Option<i64>>(2).unwrap_or(hi);
            let leaves = mplan::split_leaves(&policy, split_from, hi)?;
            self.flatten(&table, &names, &policy, &leaves, req.dry_run, report, &mut all).await?;
            return Ok(all);
        }
        let key_expr = |e: &str| catalog::key_as_i64(&policy, e);
        let split_from: i64 = match row.get::<_, Option<i64>>(2) {
            Some(f) if phase == "copying" => f,
            _ => {
                let min = facts::key_aggregate(&self.client, &names.old, &key_expr(&format!("min({})", policy.key_sql()))).await?;
                min.unwrap_or(hi)
            }
        };
        let leaves = mplan::split_leaves(&policy, split_from, hi)?;
        let columns = self.split_columns(&names.old).await?;
        if phase == "swapped" {
            let info = catalog::require_table(&self.client, &table).await?;
            let parent = facts::read(&self.client, &info, &policy.key).await?;
            let id_cols = migrate::identity_columns(&parent, &policy.key);
            let setup = mplan::plan_split_setup(&policy, &names, &leaves, &id_cols, &columns, &info.grants)?;
            if !req.dry_run {
                let total: i64 = self.client.query_one(&format!("SELECT count(*) FROM {}", names.old.quoted()), &[]).await?.get(0);
                self.client
                    .execute(
                        &format!(
                            "UPDATE chute.migrations SET split_from = $1, rows_total = $2, rows_moved = 0, copied_to = NULL, copy_started_at = now() WHERE {}",
                            migration_filter(&table)
                        ),
                        &[&split_from, &total],
                    )
                    .await?;
                self.run_timed(&table, &setup, report).await?;
            }
            all.extend(setup);
        }
        let mut cursor: Option<i64> = row.get(3);
        let mut copy_done: bool = row.get(4);
        if phase == "swapped" {
            cursor = None;
            copy_done = false;
        }
        let key = policy.key_sql();
        // Blocks of the old partition (read after the trigger exists: any
        // row version written later is the trigger's to carry), and about
        // how many hold `batch_rows` rows.
        let (blocks, per_batch): (i64, i64) = if req.dry_run {
            (1, 1)
        } else {
            let r = self
                .client
                .query_one(
                    "SELECT (pg_relation_size(c.oid) / current_setting('block_size')::int8)::int8, c.relpages::int8, c.reltuples::float8
                     FROM pg_class c WHERE c.oid = $1::text::regclass",
                    &[&names.old.quoted()],
                )
                .await?;
            let (blocks, pages, tuples): (i64, i64, f64) = (r.get(0), r.get(1), r.get(2));
            // The rows counted when the split began, else the statistics.
            let total: Option<i64> = self.row(&table).await?.and_then(|r| r.get(6));
            let per_block = match total {
                Some(t) if t > 0 && blocks > 0 => t as f64 / blocks as f64,
                _ if pages > 0 && tuples > 0.0 => tuples / pages as f64,
                _ => 50.0,
            };
            (blocks, ((req.batch_rows as f64 / per_block).ceil() as i64).max(1))
        };
        let mut from = cursor.unwrap_or(0);
        while !copy_done {
            let started = Instant::now();
            let to = (from + per_batch).min(blocks.max(from + 1));
            let last = to >= blocks;
            let batch = mplan::plan_copy_batch(&names, &columns, from, to, last)?;
            if req.dry_run {
                all.extend(batch);
                all.notes.push(format!("the copy runs in batches of about {} rows by heap block, resumable after each", req.batch_rows));
                break;
            }
            exec::run_plan(&mut self.client, &batch, self.settings, &mut *report).await?;
            if all.steps.iter().all(|s| !matches!(&s.kind, StepKind::Migrate { phase, .. } if phase == "copy")) {
                all.extend(batch);
            }
            from = to;
            copy_done = last;
            if let Some(rate) = req.rows_per_s
                && rate > 0.0
            {
                let want = Duration::from_secs_f64(req.batch_rows as f64 / rate);
                if let Some(rest) = want.checked_sub(started.elapsed()) {
                    tokio::time::sleep(rest).await;
                }
            }
        }
        let grants = catalog::require_table(&self.client, &table).await?.grants;
        // Rows the application wrote before the oldest interval during the
        // split wait in the staging parent's DEFAULT partition; the cutover
        // gives them leaves of their own. One arriving between reading them
        // and the cutover's lock makes it refuse (CH001): read them again.
        let mut tries = 0;
        loop {
            let has_early = req.dry_run && phase == "swapped" || self.exists(&names.early).await?;
            let keys: Vec<i64> = if has_early && !req.dry_run {
                let sql = format!("SELECT DISTINCT {} FROM {}", key_expr(&key), names.early.quoted());
                self.client.query(&sql, &[]).await?.iter().map(|r| r.get(0)).collect()
            } else {
                Vec::new()
            };
            let early = mplan::early_leaves(&policy, &keys)?;
            let c =
                mplan::Cutover { leaves: &leaves, has_early, early: &early, columns: &columns, grants: &grants, keep_old: req.keep_old };
            let cutover = mplan::plan_cutover(&policy, &names, c)?;
            if !req.dry_run {
                match self.run_timed(&table, &cutover, report).await {
                    Err(MigrateError::Exec(e)) if e.sqlstate() == Some(mplan::EARLY_ROWS_MOVED) && tries < 10 => {
                        tries += 1;
                        continue;
                    }
                    other => other?,
                }
            }
            all.extend(cutover);
            break;
        }
        self.flatten(&table, &names, &policy, &leaves, req.dry_run, report, &mut all).await?;
        Ok(all)
    }

    /// Moves the staging parent's leaves up to the table, oldest first, a
    /// few per short transaction (see `plan_flatten_step`), sized so that
    /// each holds its lock about `FLATTEN_HOLD`: a step's ATTACHes cost in
    /// proportion to the partitions there, so the count adapts to what the
    /// last step took. Resumable: what is left is read from the catalog.
    #[allow(clippy::too_many_arguments)]
    async fn flatten(
        &mut self,
        table: &QualifiedName,
        names: &Names,
        policy: &Policy,
        leaves: &[Leaf],
        dry_run: bool,
        report: StepReporter<'_>,
        all: &mut Plan,
    ) -> Result<(), MigrateError> {
        const FLATTEN_HOLD: Duration = Duration::from_millis(200);
        let mut per_step = 16usize;
        loop {
            let under: Vec<String> = if dry_run {
                leaves.iter().map(|l| l.name.name.clone()).collect()
            } else {
                self.client
                    .query(
                        "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass($1)",
                        &[&names.staging.quoted()],
                    )
                    .await?
                    .iter()
                    .map(|r| r.get(0))
                    .collect()
            };
            let left: Vec<&Leaf> = leaves.iter().filter(|l| under.contains(&l.name.name)).collect();
            if left.is_empty() && !dry_run && !self.exists(&names.staging).await? {
                return Ok(());
            }
            let n = per_step.min(left.len());
            let moving: Vec<Leaf> = left[..n].iter().map(|l| (*l).clone()).collect();
            let rest = left.get(n).map(|next| (next.from, left.last().map_or(next.to, |l| l.to)));
            let step = mplan::plan_flatten_step(policy, names, &moving, rest)?;
            if dry_run {
                all.extend(step);
                all.notes.push(format!("the leaves move up {per_step} or so per step, each step a short transaction"));
                return Ok(());
            }
            let began = Instant::now();
            self.run_timed(table, &step, report).await?;
            let took = began.elapsed().max(Duration::from_millis(1));
            if all.steps.iter().all(|s| !matches!(&s.kind, StepKind::Migrate { phase, .. } if phase == "flatten")) {
                all.extend(step);
            }
            if rest.is_none() {
                return Ok(());
            }
            let scaled = (n as f64 * FLATTEN_HOLD.as_secs_f64() / took.as_secs_f64()) as usize;
            per_step = scaled.clamp(4, 256);
        }
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
        Ok(MigrationStatus {
            table: table.to_string(),
            key: row.get(7),
            phase: row.get(0),
            rows_moved: moved,
            rows_total: row.get(6),
            rate_rows_per_s: secs.filter(|s| *s > 0.0).map(|s| moved as f64 / s),
            longest_lock_ms: row.get(8),
            old_partition: Names::new(&table)?.old.to_string(),
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
    Ok(mplan::split_leaves(policy, from, hi)?)
}
