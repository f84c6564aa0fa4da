//! The partition manager's I/O half: reads the catalog, reads the clock,
//! asks the pure planners for a plan and has the executor run it.
//!
//! Every change to one table happens under a session advisory lock keyed by
//! the table's oid, and the snapshot is read after the lock is taken, so two
//! maintainers, or a maintainer and loader workers creating partitions just
//! in time, never race: the second one plans against what the first made.

use chute_core::ident::QualifiedName;
use chute_core::partman::planner::{self, PlanError};
use chute_core::partman::policy::PolicyError;
use chute_core::partman::{Existing, Grants, KeyType, Plan, Policy, Snapshot, Step, TableSource};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::catalog::{self, CatalogError, TableInfo};
use crate::exec::{self, ExecError, ExecSettings, StepEvent};
use crate::retention;
use crate::schema::{self, LOCK_CLASS, SchemaError};
use crate::{ConnectError, ConnectOptions};

#[derive(Debug, thiserror::Error)]
pub enum PartmanError {
    #[error(transparent)]
    Connect(#[from] ConnectError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("invalid policy: {0}")]
    Policy(#[from] PolicyError),
    #[error(transparent)]
    Exec(#[from] ExecError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// A statement failed (a lost connection among them: see `connection_lost`).
    #[error(transparent)]
    Sql(#[from] crate::error::SqlError),
    #[error("{0}")]
    Refused(String),
}

impl From<crate::pooler::PoolerError> for PartmanError {
    fn from(e: crate::pooler::PoolerError) -> Self {
        match e {
            crate::pooler::PoolerError::Connect(e) => PartmanError::Connect(e),
            crate::pooler::PoolerError::Sql(e) => e.into(),
            refused @ crate::pooler::PoolerError::Pooled(_) => PartmanError::Refused(refused.to_string()),
        }
    }
}

impl From<tokio_postgres::Error> for PartmanError {
    fn from(e: tokio_postgres::Error) -> Self {
        PartmanError::Sql(e.into())
    }
}

/// What `partition create` is asked to do.
#[derive(Debug, Clone)]
pub struct CreateRequest {
    /// The policy; its `key_type` is filled in from the catalog.
    pub policy: Policy,
    pub like: Option<QualifiedName>,
    pub columns: Option<String>,
    /// `--start` as given; read once the key's type is known.
    pub start: Option<String>,
}

/// One connection's worth of partition management: a lost connection is
/// replaced by a new one on the same host list (see [`PartitionManager::maintain`]).
#[derive(Debug)]
pub struct PartitionManager {
    client: Client,
    /// Where the client came from: a reconnect goes through the host list again.
    opts: ConnectOptions,
    pub settings: ExecSettings,
    /// Told of a lost connection and the reconnect.
    pub notices: exec::Notices,
    /// Set by the caller on SIGINT/SIGTERM: a wait for a table's lock ends.
    cancel: Arc<AtomicBool>,
}

/// Progress of an executing plan, for the CLI.
pub type StepReporter<'a> = &'a mut (dyn FnMut(usize, &Step, StepEvent) + Send);

impl PartitionManager {
    pub async fn connect(opts: &ConnectOptions, settings: ExecSettings) -> Result<Self, PartmanError> {
        Self::on(opts.connect().await?, opts, settings, exec::Notices::default()).await
    }

    /// [`PartitionManager::connect`], waiting up to `settings.retry_for`
    /// for a server that takes writes (a failover under way), said to
    /// `notices`.
    pub async fn connect_within(opts: &ConnectOptions, settings: ExecSettings, notices: exec::Notices) -> Result<Self, PartmanError> {
        Self::on(exec::connect_within(opts, settings.retry_for, &notices).await?, opts, settings, notices).await
    }

    async fn on(client: Client, opts: &ConnectOptions, settings: ExecSettings, notices: exec::Notices) -> Result<Self, PartmanError> {
        crate::pooler::check(opts, &client).await?;
        catalog::prepare_session(&client).await?;
        Ok(PartitionManager { client, opts: opts.clone(), settings, notices, cancel: Arc::default() })
    }

    /// After `cause`, a lost connection: a new one, while `outage` allows
    /// (else `cause`). The table's advisory lock went with the old session;
    /// the caller takes it again and plans from the catalog of the server
    /// reached now.
    async fn reconnect(&mut self, outage: &mut crate::retry::Outage, cause: PartmanError) -> Result<(), PartmanError> {
        let client = exec::reconnect(&self.opts, outage, cause, &self.notices, &self.cancel).await?;
        catalog::prepare_session(&client).await?;
        self.client = client;
        Ok(())
    }

    /// The flag that, once set, ends a wait for a table's lock (a signal).
    pub fn set_cancel(&mut self, cancel: Arc<AtomicBool>) {
        self.cancel = cancel;
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Plans `partition create` (touching nothing but a rolled-back probe
    /// for `--columns`), and runs the plan unless `dry_run`.
    pub async fn create(
        &mut self,
        req: CreateRequest,
        now: i64,
        dry_run: bool,
        report: StepReporter<'_>,
    ) -> Result<(Policy, Plan), PartmanError> {
        let (policy, existing, snap) = self.resolve_create(req, now).await?;
        let plan = planner::plan_create(&policy, &existing, &snap, now)?;
        if !dry_run {
            if let Some(missing) = crate::privilege::policies_missing(&self.client).await? {
                return Err(PartmanError::Refused(missing));
            }
            schema::ensure(&self.client).await?;
            // An existing table is changed under the lock maintain, just in
            // time creation and undo take; a new one has no oid to lock yet,
            // and nothing else can act on it before it exists.
            match catalog::table_info(&self.client, &policy.parent).await? {
                Some(info) => {
                    self.lock(&info).await?;
                    let result = exec::run_plan(&mut self.client, &plan, self.settings, report).await.map_err(PartmanError::from);
                    self.unlock(&info, result).await?;
                }
                None => exec::run_plan(&mut self.client, &plan, self.settings, report).await?,
            }
        }
        Ok((policy, plan))
    }

    async fn resolve_create(&mut self, req: CreateRequest, now: i64) -> Result<(Policy, Existing, Snapshot), PartmanError> {
        let mut policy = req.policy;
        let info = catalog::table_info(&self.client, &policy.parent).await?;
        let info_oid = info.as_ref().map(|i| i.oid);
        let current_user: String = self.client.query_one("SELECT current_user::text", &[]).await?.get(0);
        let fresh_grants = Grants { owner: current_user.clone(), current_user, acl: vec![] };
        let (existing, snap) = match info {
            None => {
                if policy.parent.schema.is_none() {
                    let schema: Option<String> = self.client.query_one("SELECT current_schema()::text", &[]).await?.get(0);
                    policy.parent.schema =
                        Some(schema.ok_or_else(|| PartmanError::Refused("no schema in search_path to create the table in".into()))?);
                }
                let definition = match (&req.columns, &req.like) {
                    (Some(c), None) => TableSource::Columns(c.clone()),
                    (None, Some(l)) => TableSource::Like(l.clone()),
                    (Some(_), Some(_)) => return Err(PartmanError::Refused("give either --columns or --like, not both".into())),
                    (None, None) => {
                        return Err(PartmanError::Refused(format!(
                            "table {} does not exist: define it with --columns \"time timestamptz not null, …\" or --like OTHER_TABLE",
                            policy.parent
                        )));
                    }
                };
                policy.key_type = self.probe_key_type(&policy, &definition).await?;
                (Existing::Missing { definition }, empty_snapshot(fresh_grants))
            }
            Some(info) => {
                if req.columns.is_some() || req.like.is_some() {
                    return Err(PartmanError::Refused(format!(
                        "table {} exists already; --columns and --like only define new tables",
                        info.name
                    )));
                }
                policy.parent = info.name.clone();
                policy.key_type = self.key_type(&info, &policy.key).await?;
                match info.relkind {
                    'r' => {
                        if catalog::has_rows(&self.client, &info.name).await? {
                            return Err(PartmanError::Refused(format!(
                                "{} has rows; chute converts only empty tables in place so far. Load into a new partitioned table instead (chute partition create NEW --like {} …)",
                                info.name, info.name
                            )));
                        }
                        let owned_sequences = catalog::owned_sequences(&self.client, info.oid).await?;
                        (Existing::EmptyPlain { owned_sequences, grants: info.grants.clone() }, empty_snapshot(info.grants.clone()))
                    }
                    'p' => {
                        match catalog::partition_key(&self.client, info.oid).await? {
                            Some(('r', cols)) if cols == [policy.key.clone()] => {}
                            Some((strat, cols)) => {
                                return Err(PartmanError::Refused(format!(
                                    "{} is partitioned by {} on ({}), not by range on {:?}: chute manages single-column range partitioning",
                                    info.name,
                                    strategy_name(strat),
                                    cols.join(", "),
                                    policy.key
                                )));
                            }
                            None => return Err(PartmanError::Refused(format!("cannot read the partition key of {}", info.name))),
                        }
                        policy.validate()?;
                        let snap = catalog::snapshot(&self.client, &info, &policy, now).await?;
                        (Existing::Partitioned, snap)
                    }
                    k => return Err(PartmanError::Refused(format!("{} is not a table (relkind {k})", info.name))),
                }
            }
        };
        if let Some(text) = &req.start {
            let v = chute_core::partman::policy::parse_key_value(text, policy.key_type, &policy.zone().map_err(PolicyError::from)?)
                .map_err(|e| PartmanError::Refused(format!("--start: {e}")))?;
            policy.start = Some(v);
        }
        policy.validate()?;
        let mut snap = snap;
        if policy.distribution.is_some() && snap.remote.is_none() {
            snap.remote = Some(match (&existing, &info_oid) {
                (Existing::Missing { definition: TableSource::Columns(c) }, _) => {
                    chute_core::partman::RemoteDdl { columns: c.clone(), indexes: vec![] }
                }
                (_, Some(oid)) => crate::catalog::remote_ddl(&self.client, *oid).await?,
                _ => {
                    return Err(PartmanError::Refused(
                        "a distributed table is defined with --columns (its data nodes do not have the --like table)".into(),
                    ));
                }
            });
        }
        Ok((policy, existing, snap))
    }

    async fn key_type(&self, info: &TableInfo, key: &str) -> Result<KeyType, PartmanError> {
        let ty = catalog::column_type(&self.client, info.oid, key)
            .await?
            .ok_or_else(|| CatalogError::NoColumn { table: info.name.to_string(), column: key.to_owned() })?;
        KeyType::from_sql(&ty).ok_or_else(|| {
            PartmanError::Refused(format!(
                "the key {key:?} is {ty}; chute partitions on timestamptz, timestamp, date, smallint, integer or bigint"
            ))
        })
    }

    /// Creates the table in a transaction that is rolled back, to learn the
    /// key's type (and to check the column definitions) before planning.
    async fn probe_key_type(&mut self, policy: &Policy, definition: &TableSource) -> Result<KeyType, PartmanError> {
        let tx = self.client.transaction().await?;
        let sql = match definition {
            TableSource::Columns(c) => format!("CREATE TEMP TABLE chute_probe ({c})"),
            TableSource::Like(l) => format!("CREATE TEMP TABLE chute_probe (LIKE {})", l.quoted()),
        };
        tx.batch_execute(&sql)
            .await
            .map_err(|e| PartmanError::Refused(format!("the table definition does not work: {}", exec::describe(&e))))?;
        let ty: Option<String> = tx
            .query_opt(
                "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = 'chute_probe'::regclass AND attname = $1 AND attnum > 0",
                &[&policy.key],
            )
            .await?
            .map(|r| r.get(0));
        tx.rollback().await?;
        let ty = ty.ok_or_else(|| CatalogError::NoColumn { table: policy.parent.to_string(), column: policy.key.clone() })?;
        KeyType::from_sql(&ty)
            .ok_or_else(|| PartmanError::Refused(format!("the key {:?} is {ty}; chute partitions on time and integer columns", policy.key)))
    }

    /// Every stored policy.
    pub async fn policies(&self) -> Result<Vec<Policy>, PartmanError> {
        if schema::version(&self.client).await?.is_none() {
            return Ok(vec![]);
        }
        let rows = self.client.query("SELECT policy::text FROM chute.partition_config ORDER BY parent_schema, parent_table", &[]).await?;
        rows.iter()
            .map(|r| {
                serde_json::from_str(r.get(0))
                    .map_err(|e| PartmanError::Refused(format!("a stored policy cannot be read ({e}): was it written by a newer chute?")))
            })
            .collect()
    }

    /// The stored policy of one table.
    pub async fn policy(&self, table: &QualifiedName) -> Result<(TableInfo, Policy), PartmanError> {
        let info = catalog::require_table(&self.client, table).await?;
        let policy = self.policies().await?.into_iter().find(|p| p.parent == info.name).ok_or_else(|| {
            PartmanError::Refused(format!(
                "{} has no chute policy: set one with chute partition create {} --key … --interval …",
                info.name, info.name
            ))
        })?;
        Ok((info, policy))
    }

    /// Plans (and unless `dry_run` runs) maintenance of one table, under its
    /// lock. A lost connection (a failover among the causes) is replaced for
    /// up to `retry_for`, and the table planned again from that server's
    /// catalog: a `DETACH … CONCURRENTLY` the old primary left pending is
    /// finished there with FINALIZE, partitions it created and the new one
    /// never received are created again.
    pub async fn maintain(
        &mut self,
        table: &QualifiedName,
        now: i64,
        dry_run: bool,
        report: StepReporter<'_>,
    ) -> Result<Plan, PartmanError> {
        let mut outage = crate::retry::Outage::new(self.settings.retry_for);
        loop {
            let mut progressed = false;
            let mut counted = |i: usize, step: &Step, e: StepEvent| {
                progressed |= e == StepEvent::Done;
                report(i, step, e)
            };
            let result = self.maintain_once(table, now, dry_run, &mut counted).await;
            if progressed {
                outage.progressed();
            }
            match result {
                Err(e) if crate::retry::Classify::connection_lost(&e) => self.reconnect(&mut outage, e).await?,
                done => return done,
            }
        }
    }

    async fn maintain_once(
        &mut self,
        table: &QualifiedName,
        now: i64,
        dry_run: bool,
        report: StepReporter<'_>,
    ) -> Result<Plan, PartmanError> {
        let (info, policy) = self.policy(table).await?;
        self.lock(&info).await?;
        let result = self.maintain_locked(&info, &policy, now, dry_run, report).await;
        let plan = self.unlock(&info, result).await?;
        if !dry_run {
            record_maintained(&self.client, &info.name).await?;
        }
        Ok(plan)
    }

    async fn maintain_locked(
        &mut self,
        info: &TableInfo,
        policy: &Policy,
        now: i64,
        dry_run: bool,
        report: StepReporter<'_>,
    ) -> Result<Plan, PartmanError> {
        if !dry_run {
            retention::ensure_table(&self.client).await?;
        }
        // What an interrupted run detached but did not drop or move yet.
        let mut done = retention::leftovers(&self.client, policy).await?;
        let mut plan = self.plan_maintain(info, policy, now).await?;
        if dry_run {
            done.steps.append(&mut plan.steps);
            done.notes.append(&mut plan.notes);
            return Ok(done);
        }
        exec::run_plan(&mut self.client, &done, self.settings, &mut *report).await?;
        // A DETACH … CONCURRENTLY whose second phase hit lock_timeout leaves
        // the partition detach-pending, and its retry is refused (55000):
        // plan again, which finishes it with FINALIZE, in this same run.
        let mut replans = 0;
        loop {
            match exec::run_plan(&mut self.client, &plan, self.settings, &mut *report).await {
                Ok(()) => break,
                Err(e) if e.sqlstate() == Some(SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE.code()) && replans < 3 => {
                    replans += 1;
                    done.steps.append(&mut plan.steps);
                    plan = self.plan_maintain(info, policy, now).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
        done.steps.append(&mut plan.steps);
        done.notes.append(&mut plan.notes);
        Ok(done)
    }

    /// The maintenance plan for the table as it is now, its retention
    /// steps recorded so that a kill between them is completed next run.
    async fn plan_maintain(&self, info: &TableInfo, policy: &Policy, now: i64) -> Result<Plan, PartmanError> {
        let snap = catalog::snapshot(&self.client, info, policy, now).await?;
        let mut plan = planner::plan_maintain(policy, &snap, now)?;
        retention::decorate(&mut plan, policy);
        Ok(plan)
    }

    /// Just in time: makes sure the intervals starting at `starts` have
    /// partitions. Safe to call from many connections at once: each call takes
    /// the table's lock and plans against the catalog as it finds it.
    pub async fn ensure(
        &mut self,
        info: &TableInfo,
        policy: &Policy,
        starts: &[i64],
        now: i64,
    ) -> Result<Vec<QualifiedName>, PartmanError> {
        self.lock(info).await?;
        let result = self.ensure_locked(info, policy, starts, now).await;
        self.unlock(info, result).await
    }

    async fn ensure_locked(
        &mut self,
        info: &TableInfo,
        policy: &Policy,
        starts: &[i64],
        now: i64,
    ) -> Result<Vec<QualifiedName>, PartmanError> {
        let snap = catalog::snapshot(&self.client, info, policy, now).await?;
        let plan = planner::plan_ensure(policy, &snap, starts)?;
        exec::run_plan(&mut self.client, &plan, self.settings, exec::quiet).await?;
        Ok(plan.created().cloned().collect())
    }

    /// Back to a plain table with every row; the policy is forgotten.
    pub async fn undo(&mut self, table: &QualifiedName, dry_run: bool, report: StepReporter<'_>) -> Result<Plan, PartmanError> {
        let info = catalog::require_table(&self.client, table).await?;
        if info.relkind != 'p' {
            return Err(PartmanError::Refused(format!("{} is not partitioned; nothing to undo", info.name)));
        }
        let seqs = catalog::owned_sequences(&self.client, info.oid).await?;
        let has_config = schema::version(&self.client).await?.is_some();
        let mut plan = planner::plan_undo(&info.name, &seqs, &info.grants)?;
        if !has_config {
            plan.steps[0].sql.pop();
        }
        if !dry_run {
            self.lock(&info).await?;
            let result = exec::run_plan(&mut self.client, &plan, self.settings, report).await.map_err(PartmanError::from);
            self.unlock(&info, result).await?;
        }
        Ok(plan)
    }

    /// Forgets the stored policy of a table that no longer exists (dropped
    /// with SQL, not with `partition undo`), so that `partition maintain`
    /// stops reporting it and a new table of that name does not inherit it.
    /// A table given without a schema matches a policy of that name in any
    /// schema when only one has it. Refused while the table exists.
    pub async fn forget(&mut self, table: &QualifiedName, dry_run: bool, report: StepReporter<'_>) -> Result<Plan, PartmanError> {
        let matching: Vec<Policy> = self
            .policies()
            .await?
            .into_iter()
            .filter(|p| {
                let schema = |n: &QualifiedName| n.schema.clone().unwrap_or_else(|| "public".into());
                p.parent.name == table.name && (table.schema.is_none() || schema(&p.parent) == schema(table))
            })
            .collect();
        let policy = match matching.as_slice() {
            [one] => one,
            [] => {
                return Err(PartmanError::Refused(format!(
                    "no chute policy for {table}: `chute partition list` shows the tables that have one"
                )));
            }
            many => {
                let names: Vec<String> = many.iter().map(|p| p.parent.to_string()).collect();
                return Err(PartmanError::Refused(format!(
                    "policies for {} tables are named {}: {}; name the schema too",
                    many.len(),
                    table.name,
                    names.join(", ")
                )));
            }
        };
        let parent = &policy.parent;
        if catalog::table_info(&self.client, parent).await?.is_some() {
            return Err(PartmanError::Refused(format!(
                "{parent} exists, and forget is for the policy of a table that is gone: `chute partition undo {parent}` turns it back into a plain table and forgets its policy"
            )));
        }
        let records: bool = self.client.query_one("SELECT to_regclass('chute.retention_inflight') IS NOT NULL", &[]).await?.get(0);
        let plan = planner::plan_forget(parent, &maintained_key(parent), records);
        if !dry_run {
            exec::run_plan(&mut self.client, &plan, self.settings, report).await?;
        }
        Ok(plan)
    }

    /// Takes the table's advisory lock: a session lock, because `DETACH …
    /// CONCURRENTLY` cannot run inside a transaction. Waits for another
    /// holder at most `retry_for`, then names it: an unbounded wait let a
    /// maintainer stuck behind a long query stall every loader.
    async fn lock(&self, info: &TableInfo) -> Result<(), PartmanError> {
        let key = (LOCK_CLASS, info.oid as i32);
        // Only the lock is waited for: a failed statement (a lost connection
        // among them) goes to the caller, which connects and plans again.
        let policy = crate::retry::Policy::lock_poll(self.settings.retry_for).retrying(&[crate::retry::Fault::LockWait]);
        let tried = crate::retry::run!(&policy, |_| async {
            let got: bool = self.client.query_one("SELECT pg_try_advisory_lock($1, $2)", &[&key.0, &key.1]).await?.get(0);
            match got {
                true => Ok(()),
                false if self.cancel.load(Ordering::SeqCst) => Err(LockTry::Failed(PartmanError::Refused(format!(
                    "stopped while waiting for the lock on {} (a signal came)",
                    info.name
                )))),
                false => Err(LockTry::Held),
            }
        });
        match tried {
            Ok(()) => Ok(()),
            Err(LockTry::Failed(e)) => Err(e),
            Err(LockTry::Held) => Err(PartmanError::Refused(format!(
                "{} is being changed by another session ({}) that still holds chute's lock on it after {:?}: wait for it to finish, or end it with SELECT pg_terminate_backend(pid), then run this again (--retry-for waits longer)",
                info.name,
                self.lock_holder(key).await,
                self.settings.retry_for
            ))),
        }
    }

    /// The session holding the advisory lock `key`: pid and application_name.
    async fn lock_holder(&self, key: (i32, i32)) -> String {
        let row = self
            .client
            .query_opt(
                "SELECT l.pid, coalesce(a.application_name, '') FROM pg_catalog.pg_locks l \
                 LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid \
                 WHERE l.locktype = 'advisory' AND l.granted AND l.classid = ($1::int4::int8 & 4294967295)::oid AND l.objid = ($2::int4::int8 & 4294967295)::oid AND l.objsubid = 2",
                &[&key.0, &key.1],
            )
            .await;
        match row {
            Ok(Some(r)) => format!("pid {}, application_name {:?}", r.get::<_, i32>(0), r.get::<_, String>(1)),
            _ => "it left before it could be named".into(),
        }
    }

    /// Releases the lock and passes `result` on (its error first).
    async fn unlock<T>(&self, info: &TableInfo, result: Result<T, PartmanError>) -> Result<T, PartmanError> {
        let unlocked = self.client.execute("SELECT pg_advisory_unlock($1, $2)", &[&LOCK_CLASS, &(info.oid as i32)]).await;
        let value = result?;
        unlocked?;
        Ok(value)
    }

    /// Figures for `partition status`.
    pub async fn status(&self, table: &QualifiedName, now: i64) -> Result<TableStatus, PartmanError> {
        let (info, policy) = self.policy(table).await?;
        let snap = catalog::snapshot(&self.client, &info, &policy, now).await?;
        let names: Vec<QualifiedName> = snap.partitions.iter().map(|p| p.name.clone()).collect();
        let sizes = catalog::partition_sizes(&self.client, &names).await?;
        let limits = planner::key_limits(&policy, snap.max_key, now)?;
        let lit = |v: i64| match v {
            i64::MIN => "MINVALUE".to_owned(),
            i64::MAX => "MAXVALUE".to_owned(),
            v => policy.key_type.literal(v).map(|l| l.trim_matches('\'').to_owned()).unwrap_or_else(|_| v.to_string()),
        };
        let partitions: Vec<PartitionStatus> = snap
            .partitions
            .iter()
            .zip(&sizes)
            .map(|(p, (rows, bytes))| PartitionStatus {
                name: p.name.to_string(),
                from: lit(p.from),
                to: lit(p.to),
                rows_estimate: *rows as i64,
                bytes: *bytes,
                due_for_retention: limits.retention_cutoff.is_some_and(|c| p.to <= c && p.to != i64::MAX),
                detach_pending: p.detach_pending,
            })
            .collect();
        let anchor = if policy.key_type.is_time() { now } else { snap.max_key.unwrap_or(0) };
        let (covered_until, intervals_ahead) = coverage(&snap, anchor)?;
        let rows_in_default = match &snap.default {
            Some(d) => Some(self.client.query_one(&format!("SELECT count(*) FROM {}", d.name.quoted()), &[]).await?.get(0)),
            None => None,
        };
        let plan = planner::plan_maintain(&policy, &snap, now)?;
        Ok(TableStatus {
            table: info.name.to_string(),
            now: lit(now),
            covered_until: covered_until.map(lit),
            intervals_ahead,
            premake: policy.premake,
            rows_in_default,
            due_for_retention: partitions.iter().filter(|p| p.due_for_retention).map(|p| p.name.clone()).collect(),
            pending_detach: partitions.iter().filter(|p| p.detach_pending).map(|p| p.name.clone()).collect(),
            maintain_would_run: plan.steps.len(),
            policy,
            partitions,
        })
    }
}

/// The `chute.meta` key under which a table's last maintenance is kept
/// (read by `chute doctor` and `chute status`).
fn maintained_key(table: &QualifiedName) -> String {
    format!("maintained:{}", table.quoted())
}

async fn record_maintained(client: &Client, table: &QualifiedName) -> Result<(), PartmanError> {
    client
        .execute(
            "INSERT INTO chute.meta VALUES ($1, now()::text) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            &[&maintained_key(table)],
        )
        .await?;
    Ok(())
}

/// When `partition maintain` last finished on `table` (microseconds since
/// the epoch, and as text), if ever.
pub async fn last_maintained(client: &Client, table: &QualifiedName) -> Result<Option<(i64, String)>, tokio_postgres::Error> {
    if schema::version(client).await?.is_none() {
        return Ok(None);
    }
    let row = client
        .query_opt(
            "SELECT (extract(epoch FROM value::timestamptz) * 1000000)::int8, value::timestamptz::text FROM chute.meta WHERE key = $1",
            &[&maintained_key(table)],
        )
        .await?;
    Ok(row.map(|r| (r.get(0), r.get(1))))
}

fn empty_snapshot(grants: Grants) -> Snapshot {
    Snapshot { partitions: vec![], default: None, max_key: None, grants, remote: None }
}

fn strategy_name(c: char) -> &'static str {
    match c {
        'r' => "range",
        'h' => "hash",
        'l' => "list",
        _ => "an unknown strategy",
    }
}

/// How far contiguous partitions reach from the one holding `anchor`.
fn coverage(snap: &Snapshot, anchor: i64) -> Result<(Option<i64>, u32), PartmanError> {
    let Some(mut i) = snap.partitions.iter().position(|p| p.from <= anchor && anchor < p.to) else {
        return Ok((None, 0));
    };
    let mut ahead = 0;
    while i + 1 < snap.partitions.len() && snap.partitions[i + 1].from == snap.partitions[i].to {
        i += 1;
        ahead += 1;
    }
    Ok((Some(snap.partitions[i].to), ahead))
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PartitionStatus {
    pub name: String,
    pub from: String,
    pub to: String,
    pub rows_estimate: i64,
    pub bytes: i64,
    pub due_for_retention: bool,
    pub detach_pending: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TableStatus {
    pub table: String,
    pub now: String,
    /// The end of the contiguous partitions from the one holding now (or
    /// the newest row, for integer keys); `None` when nothing holds now.
    pub covered_until: Option<String>,
    pub intervals_ahead: u32,
    pub premake: u32,
    pub rows_in_default: Option<i64>,
    pub due_for_retention: Vec<String>,
    pub pending_detach: Vec<String>,
    /// Steps `maintain` would run now.
    pub maintain_would_run: usize,
    pub policy: Policy,
    pub partitions: Vec<PartitionStatus>,
}

/// One try at the table's advisory lock.
enum LockTry {
    /// Another session holds it: asked again after a pause.
    Held,
    /// Not worth asking again (a statement failed, a signal came).
    Failed(PartmanError),
}

impl From<tokio_postgres::Error> for LockTry {
    fn from(e: tokio_postgres::Error) -> Self {
        LockTry::Failed(e.into())
    }
}

impl crate::retry::Classify for LockTry {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            LockTry::Held => crate::retry::Fault::LockWait,
            LockTry::Failed(e) => crate::retry::Classify::fault(e),
        }
    }
}

impl crate::retry::Classify for crate::partman::PartmanError {
    fn fault(&self) -> crate::retry::Fault {
        use crate::partman::PartmanError as P;
        match self {
            P::Connect(e) => e.fault(),
            P::Catalog(e) => e.fault(),
            P::Exec(e) => e.fault(),
            P::Schema(e) => e.fault(),
            P::Sql(e) => e.fault(),
            _ => crate::retry::Fault::Fatal,
        }
    }
}
