//! `chute migrate --split`, the I/O half: reads where the split stands
//! (the progress row, the staging leaves and their constraints in the
//! catalog), plans the next transactions with `chute_core::migrate::split`
//! and runs them, sizing each to the server's lock table and to
//! `lock_timeout` (see `chute_core::migrate::locks`).

use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_core::migrate::locks::{self, LockTable};
use chute_core::migrate::split::{self as msplit, Leaf, SplitColumns};
use chute_core::migrate::{self, ForeignKey, Names};
use chute_core::partman::{Plan, Policy, Step, StepKind};

use super::{MigrateError, Migrator, SplitRequest, StepReporter, facts};
use crate::catalog;
use crate::exec::{self, StepEvent};
use crate::retry::Classify;

/// What every part of one split run needs.
struct Split {
    table: QualifiedName,
    names: Names,
    policy: Policy,
    leaves: Vec<Leaf>,
    hi: i64,
    /// Locks one leaf holds where it is made (see `locks::leaf_locks`).
    per_leaf: i64,
    lock_table: LockTable,
    dry_run: bool,
}

impl Split {
    /// The longest a transaction that makes writers wait should hold what
    /// they wait for: a fifth of `lock_timeout` (writers queued behind it wait
    /// at most that much more than a lock timeout's worth), 200 ms at most.
    fn hold(lock_timeout: Duration) -> Duration {
        (lock_timeout / 5).clamp(Duration::from_millis(10), Duration::from_millis(200))
    }
}

/// Whether `plan` has a step of `phase` already (what ran is shown once per phase).
fn is_phase(plan: &Plan, phase: &str) -> bool {
    plan.steps.iter().any(|s| matches!(&s.kind, StepKind::Migrate { phase: p, .. } if p == phase))
}

impl Migrator {
    /// Moves the old partition's rows into interval partitions (see the
    /// module doc of `chute_core::migrate`). Returns every plan it ran (or,
    /// with `dry_run`, would run; the copy shown as its first batch).
    /// A lost connection is replaced for up to `retry_for`, and the split
    /// goes on from where the server reached then says it is: the copy from
    /// the `copied_to` its progress row holds there.
    pub async fn split(&mut self, req: SplitRequest, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
        let mut outage = crate::retry::Outage::new(self.settings.retry_for);
        loop {
            let mut progressed = false;
            let mut counted = |i: usize, step: &Step, e: StepEvent| {
                progressed |= e == StepEvent::Done;
                report(i, step, e)
            };
            let result = self.split_once(req.clone(), &mut counted).await;
            if progressed {
                outage.progressed();
            }
            match result {
                Err(e) if e.connection_lost() => self.reconnect(&mut outage, e).await?,
                done => return done,
            }
        }
    }

    async fn split_once(&mut self, mut req: SplitRequest, report: StepReporter<'_>) -> Result<Plan, MigrateError> {
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
        if !req.dry_run {
            self.ensure_schema().await?;
        }
        let policy = self.policy(&table).await?;
        let split_from = match row.get::<_, Option<i64>>(2) {
            Some(f) => f,
            None => {
                let expr = catalog::key_as_i64(&policy, &format!("min({})", policy.key_sql()));
                let min = facts::key_aggregate(&self.client, &names.old, &expr).await?.unwrap_or(hi);
                if !req.dry_run {
                    let sql = format!("UPDATE chute.migrations SET split_from = $1 WHERE {}", msplit_filter(&table));
                    self.client.execute(&sql, &[&min]).await?;
                }
                min
            }
        };
        let leaves = msplit::split_leaves(&policy, split_from, hi)?;
        let per_leaf = self.leaf_locks(&table).await?;
        let lock_table = lock_table(&self.client).await?;
        if let Some(p) = locks::check(&table, lock_table, leaves.len(), per_leaf, None) {
            return Err(MigrateError::Preconditions { table: table.to_string(), problems: vec![p] });
        }
        let s = Split { table, names, policy, leaves, hi, per_leaf, lock_table, dry_run: req.dry_run };
        let mut all = Plan::default();
        if phase == "flattening" {
            // Killed after the cutover: only moving leaves up is left.
            self.flatten(&s, report, &mut all).await?;
            return Ok(all);
        }
        let columns = self.split_columns(&s.names.old).await?;
        if phase == "swapped" {
            self.setup(&s, &columns, report, &mut all).await?;
        } else if !s.dry_run && row.get::<_, Option<i64>>(6).is_none() {
            // Killed between the setup and counting the rows to move.
            self.count_total(&s).await?;
        }
        let (cursor, copy_done): (Option<i64>, bool) = if phase == "swapped" { (None, false) } else { (row.get(3), row.get(4)) };
        self.copy(&s, &req, &columns, cursor, copy_done, report, &mut all).await?;
        self.foreign_keys(&s, report, &mut all).await?;
        let grants = catalog::require_table(&self.client, &s.table).await?.grants;
        let early = if s.dry_run && phase == "swapped" || self.exists(&s.names.early).await? {
            Some(&s.names.early)
        } else if self.exists(&s.names.legacy_early).await? {
            Some(&s.names.legacy_early)
        } else {
            None
        };
        let c = msplit::Cutover { leaves: &s.leaves, hi: s.hi, early, grants: &grants, keep_old: req.keep_old };
        let cutover = msplit::plan_cutover(&s.policy, &s.names, c)?;
        if !s.dry_run {
            self.run_timed(&s.table, &cutover, report).await?;
        }
        all.extend(cutover);
        self.flatten(&s, report, &mut all).await?;
        Ok(all)
    }

    /// Locks one leaf of `table` holds where it is made: its relation, its
    /// TOAST table and index, and one per index of the table.
    pub(super) async fn leaf_locks(&self, table: &QualifiedName) -> Result<i64, MigrateError> {
        let r = self
            .client
            .query_one(
                "SELECT (SELECT count(*) FROM pg_index WHERE indrelid = $1::text::regclass),
                        EXISTS (SELECT 1 FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                                WHERE a.attrelid = $1::text::regclass AND a.attnum > 0 AND NOT a.attisdropped AND t.typstorage <> 'p')",
                &[&table.quoted()],
            )
            .await?;
        Ok(locks::leaf_locks(r.get(0), r.get(1)))
    }

    /// The columns the split copies (not generated ones) and whether an
    /// identity column is `GENERATED ALWAYS`.
    async fn split_columns(&self, old: &QualifiedName) -> Result<SplitColumns, MigrateError> {
        let columns = crate::catalog::columns_of(&self.client, old).await?;
        let identity_always = columns.iter().any(|c| c.identity == Some('a'));
        let names = columns.into_iter().filter(|c| !c.generated).map(|c| c.name).collect();
        Ok(SplitColumns { names, identity_always })
    }

    /// The staging parent, its leaves a batch per transaction, then the
    /// trigger. Resumable: only what the catalog lacks is made.
    async fn setup(&mut self, s: &Split, columns: &SplitColumns, report: StepReporter<'_>, all: &mut Plan) -> Result<(), MigrateError> {
        let mut steps = Plan::default();
        let made: Vec<String> =
            if s.dry_run { vec![] } else { self.staging_partitions(&s.names).await?.into_iter().map(|p| p.0).collect() };
        if s.dry_run || !self.exists(&s.names.staging).await? {
            steps.extend(msplit::plan_staging_parent(&s.policy, &s.names));
        }
        let info = catalog::require_table(&self.client, &s.table).await?;
        let missing: Vec<Leaf> = s.leaves.iter().filter(|l| !made.contains(&l.name.name)).cloned().collect();
        let per_step = locks::leaves_per_setup_step(s.lock_table.budget(), s.per_leaf);
        for batch in missing.chunks(per_step) {
            steps.extend(msplit::plan_staging_leaves(&s.policy, &s.names, batch, &info.grants)?);
        }
        let parent = facts::read(&self.client, &info, &s.policy.key).await?;
        let id_cols = migrate::identity_columns(&parent, &s.policy.key);
        steps.extend(msplit::plan_sync_trigger(&s.names, &id_cols, columns));
        if !s.dry_run {
            self.run_timed(&s.table, &steps, &mut *report).await?;
            self.count_total(s).await?;
        }
        all.extend(steps);
        Ok(())
    }

    /// The rows to move: counted once the trigger carries every change, so
    /// the copy never moves more than this.
    async fn count_total(&self, s: &Split) -> Result<(), MigrateError> {
        let sql = format!(
            "UPDATE chute.migrations SET rows_total = (SELECT count(*) FROM {}) WHERE {} AND rows_total IS NULL",
            s.names.old.quoted(),
            msplit_filter(&s.table)
        );
        self.client.execute(&sql, &[]).await?;
        Ok(())
    }

    /// The staging parent's partitions: name, and the foreign keys on each
    /// (constraint name, validated).
    async fn staging_partitions(&self, names: &Names) -> Result<Vec<(String, Vec<(String, bool)>)>, MigrateError> {
        let rows = self
            .client
            .query(
                "SELECT c.relname::text,
                        coalesce(array_agg(k.conname::text ORDER BY k.conname) FILTER (WHERE k.oid IS NOT NULL), '{}'),
                        coalesce(array_agg(k.convalidated ORDER BY k.conname) FILTER (WHERE k.oid IS NOT NULL), '{}')
                 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 LEFT JOIN pg_constraint k ON k.conrelid = c.oid AND k.contype = 'f'
                 WHERE i.inhparent = to_regclass($1) GROUP BY c.relname ORDER BY c.relname",
                &[&names.staging.quoted()],
            )
            .await?;
        Ok(rows
            .iter()
            .map(|r| {
                let (fks, valid): (Vec<String>, Vec<bool>) = (r.get(1), r.get(2));
                (r.get(0), fks.into_iter().zip(valid).collect())
            })
            .collect())
    }

    /// Copies the old partition's rows in batches by heap block. A batch
    /// holds its rows FOR SHARE while it runs (an application update of one
    /// waits for it) and a lock on every leaf it writes, so each batch is
    /// sized from the last: to take about `Split::hold` and at most half the
    /// lock budget, never more than `--batch-rows`. The end of the table is
    /// read again as it is reached (the application appends while the copy
    /// runs), so even the last, open-ended batch is small.
    #[allow(clippy::too_many_arguments)]
    async fn copy(
        &mut self,
        s: &Split,
        req: &SplitRequest,
        columns: &SplitColumns,
        cursor: Option<i64>,
        mut copy_done: bool,
        report: StepReporter<'_>,
        all: &mut Plan,
    ) -> Result<(), MigrateError> {
        if s.dry_run {
            all.extend(msplit::plan_copy_batch(&s.names, columns, 0, 1, false)?);
            all.notes.push(format!(
                "the copy runs in batches of at most {} rows by heap block, each sized to hold its rows about {} ms and at most {} locks, resumable after each",
                req.batch_rows,
                Split::hold(self.settings.lock_timeout).as_millis(),
                s.lock_table.budget() / 2
            ));
            all.extend(msplit::plan_count_moved(&s.names));
            return Ok(());
        }
        let (mut blocks, per_block) = self.old_blocks(s).await?;
        let hold = Split::hold(self.settings.lock_timeout);
        let half_budget = (s.lock_table.budget() / 2).max(1);
        let most = ((req.batch_rows as f64 / per_block).ceil() as i64).max(1);
        // The first batch: no more rows than leaves its locks could cover.
        let first_rows = (req.batch_rows).min(half_budget / s.per_leaf.max(1)).max(1);
        let mut per_batch = ((first_rows as f64 / per_block).ceil() as i64).clamp(1, most);
        let mut from = cursor.unwrap_or(0);
        let began = Instant::now();
        let mut copied_blocks = 0i64;
        while !copy_done {
            if blocks - from <= per_batch {
                // Near the end as last read: read it again.
                blocks = self.old_blocks(s).await?.0;
            }
            let last = blocks - from <= per_batch;
            let to = if last { blocks.max(from + 1) } else { from + per_batch };
            let batch = msplit::plan_copy_batch(&s.names, columns, from, to, last)?;
            let started = Instant::now();
            exec::run_plan(&mut self.client, &batch, self.settings, &mut *report).await?;
            let took = started.elapsed().max(Duration::from_micros(100));
            if !is_phase(all, "copy") {
                all.extend(batch);
            }
            copied_blocks += to - from;
            from = to;
            copy_done = last;
            let batch_locks: i64 = self
                .client
                .query_one(&format!("SELECT coalesce(batch_locks, 0) FROM chute.migrations WHERE {}", msplit_filter(&s.table)), &[])
                .await?
                .get(0);
            per_batch = next_batch(per_batch, took, hold, batch_locks, half_budget).clamp(1, most);
            if let Some(rate) = req.rows_per_s
                && rate > 0.0
            {
                let want = Duration::from_secs_f64(copied_blocks as f64 * per_block / rate);
                if let Some(rest) = want.checked_sub(began.elapsed()) {
                    // Pacing (--rows-per-s), not a retry.
                    tokio::time::sleep(rest).await;
                }
            }
        }
        let count = msplit::plan_count_moved(&s.names);
        exec::run_plan(&mut self.client, &count, self.settings, &mut *report).await?;
        all.extend(count);
        Ok(())
    }

    /// The old partition's size in blocks now, and about how many rows a
    /// block holds (from the rows counted when the split began, else the
    /// statistics).
    async fn old_blocks(&self, s: &Split) -> Result<(i64, f64), MigrateError> {
        let r = self
            .client
            .query_one(
                "SELECT (pg_relation_size(c.oid) / current_setting('block_size')::int8)::int8, c.relpages::int8, c.reltuples::float8
                 FROM pg_class c WHERE c.oid = $1::text::regclass",
                &[&s.names.old.quoted()],
            )
            .await?;
        let (blocks, pages, tuples): (i64, i64, f64) = (r.get(0), r.get(1), r.get(2));
        let total: Option<i64> = self.row(&s.table).await?.and_then(|r| r.get(6));
        let per_block = match total {
            Some(t) if t > 0 && blocks > 0 => t as f64 / blocks as f64,
            _ if pages > 0 && tuples > 0.0 => tuples / pages as f64,
            _ => 50.0,
        };
        Ok((blocks, per_block.max(1.0)))
    }

    /// The table's foreign keys onto every staging partition (`NOT VALID`,
    /// then `VALIDATE`, a bounded batch per transaction), then onto the
    /// staging parent, which takes the partitions' own without a scan.
    /// Resumable: what the catalog shows done is not done again.
    async fn foreign_keys(&mut self, s: &Split, report: StepReporter<'_>, all: &mut Plan) -> Result<(), MigrateError> {
        let info = catalog::require_table(&self.client, &s.table).await?;
        let fks: Vec<ForeignKey> = facts::read(&self.client, &info, &s.policy.key).await?.foreign_keys;
        if fks.is_empty() {
            return Ok(());
        }
        let partitions = if s.dry_run {
            let mut p: Vec<(String, Vec<(String, bool)>)> = s.leaves.iter().map(|l| (l.name.name.clone(), vec![])).collect();
            p.push((s.names.early.name.clone(), vec![]));
            p
        } else {
            self.staging_partitions(&s.names).await?
        };
        let per_step = locks::leaves_per_setup_step(s.lock_table.budget(), s.per_leaf);
        let mut missing: Vec<(QualifiedName, &ForeignKey)> = Vec::new();
        let mut pending: Vec<(QualifiedName, String)> = Vec::new();
        for (part, have) in &partitions {
            let name = s.table.with_name(part.clone());
            for fk in &fks {
                match have.iter().find(|(n, _)| *n == fk.name) {
                    None => {
                        missing.push((name.clone(), fk));
                        pending.push((name.clone(), fk.name.clone()));
                    }
                    Some((_, false)) => pending.push((name.clone(), fk.name.clone())),
                    Some((_, true)) => {}
                }
            }
        }
        let mut steps = Plan::default();
        for batch in missing.chunks(per_step) {
            steps.extend(msplit::plan_leaf_foreign_keys(&s.names, batch));
        }
        // Each VALIDATE scans its leaf: a few per transaction, so that a
        // retried step redoes little.
        for batch in pending.chunks(per_step.min(16)) {
            steps.extend(msplit::plan_validate_foreign_keys(&s.names, batch));
        }
        let on_staging: Vec<String> = if s.dry_run {
            vec![]
        } else {
            self.client
                .query(
                    "SELECT conname::text FROM pg_constraint WHERE conrelid = to_regclass($1) AND contype = 'f'",
                    &[&s.names.staging.quoted()],
                )
                .await?
                .iter()
                .map(|r| r.get(0))
                .collect()
        };
        let lacking: Vec<&ForeignKey> = fks.iter().filter(|fk| !on_staging.contains(&fk.name)).collect();
        if !lacking.is_empty() {
            steps.extend(msplit::plan_staging_foreign_keys(&s.names, &lacking));
        }
        if !s.dry_run {
            self.run_timed(&s.table, &steps, report).await?;
        }
        all.extend(steps);
        Ok(())
    }

    /// Moves the staging parent's leaves up to the table, oldest first, a
    /// few per short transaction (see `plan_flatten_step`), sized so that
    /// each holds its lock about `Split::hold`: a step's ATTACHes cost in
    /// proportion to the partitions there, so the count starts small and
    /// follows what the last step took (at most twice as many); and never
    /// more than the lock budget allows. Then the leaves' bounds CHECKs go,
    /// the same way. Resumable: what is left is read from the catalog.
    async fn flatten(&mut self, s: &Split, report: StepReporter<'_>, all: &mut Plan) -> Result<(), MigrateError> {
        let hold = Split::hold(self.settings.lock_timeout);
        let mut per_step = 4usize;
        loop {
            let under: Vec<String> = if s.dry_run {
                s.leaves.iter().map(|l| l.name.name.clone()).collect()
            } else {
                self.staging_partitions(&s.names).await?.into_iter().map(|p| p.0).collect()
            };
            let left: Vec<&Leaf> = s.leaves.iter().filter(|l| under.contains(&l.name.name)).collect();
            if left.is_empty() && !s.dry_run && !self.exists(&s.names.staging).await? {
                break;
            }
            let n = per_step.min(locks::flatten_cap(s.lock_table.budget(), left.len(), s.per_leaf)).min(left.len());
            let moving: Vec<Leaf> = left[..n].iter().map(|l| (*l).clone()).collect();
            let rest = left.get(n).map(|next| (next.from, left.last().map_or(next.to, |l| l.to)));
            let step = msplit::plan_flatten_step(&s.policy, &s.names, &moving, rest)?;
            if s.dry_run {
                all.extend(step);
                all.notes.push(format!(
                    "the leaves move up a few per step, each step a short transaction holding its lock about {} ms",
                    hold.as_millis()
                ));
                break;
            }
            let took = self.run_sized(s, &step, report).await?;
            if !is_phase(all, "flatten") {
                all.extend(step);
            }
            if rest.is_none() {
                break;
            }
            per_step = resize(n, took, hold);
        }
        self.drop_bounds(s, hold, report, all).await
    }

    /// Runs one step and says how long it took.
    async fn run_sized(&mut self, s: &Split, step: &Plan, report: StepReporter<'_>) -> Result<Duration, MigrateError> {
        let began = Instant::now();
        self.run_timed(&s.table, step, report).await?;
        Ok(began.elapsed().max(Duration::from_millis(1)))
    }

    /// The bounds CHECKs of the leaves the flatten moved (see
    /// `plan_drop_bounds`), a few leaves per transaction sized like the
    /// flatten's steps; the last marks the split done.
    async fn drop_bounds(&mut self, s: &Split, hold: Duration, report: StepReporter<'_>, all: &mut Plan) -> Result<(), MigrateError> {
        let mut left: Vec<QualifiedName> = if s.dry_run {
            s.leaves.iter().map(|l| l.name.clone()).collect()
        } else {
            self.client
                .query(
                    "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                     JOIN pg_constraint k ON k.conrelid = c.oid AND k.conname = 'chute_bounds'
                     WHERE i.inhparent = to_regclass($1) ORDER BY c.relname",
                    &[&s.table.quoted()],
                )
                .await?
                .iter()
                .map(|r| s.table.with_name(r.get::<_, String>(0)))
                .collect()
        };
        let mut per_step = 4usize;
        loop {
            let n = per_step.min(left.len());
            let batch: Vec<QualifiedName> = left.drain(..n).collect();
            let step = msplit::plan_drop_bounds(&s.names, &batch, left.is_empty());
            if s.dry_run {
                all.extend(step);
                return Ok(());
            }
            let took = self.run_sized(s, &step, report).await?;
            if !is_phase(all, "flatten") || left.is_empty() {
                all.extend(step);
            }
            if left.is_empty() {
                return Ok(());
            }
            per_step = resize(n, took, hold);
        }
    }
}

/// The next step's leaves: scaled to take about `hold`, at most twice as
/// many as `n`, at least one.
fn resize(n: usize, took: Duration, hold: Duration) -> usize {
    let scaled = (n as f64 * hold.as_secs_f64() / took.as_secs_f64()) as usize;
    scaled.clamp(1, (2 * n).clamp(1, 256))
}

/// The next copy batch's blocks: scaled to take about `hold` and to hold at
/// most `max_locks` (the last batch's `locks` show how many leaves its
/// blocks reached), growing at most twofold.
fn next_batch(blocks: i64, took: Duration, hold: Duration, locks: i64, max_locks: i64) -> i64 {
    let by_time = blocks as f64 * hold.as_secs_f64() / took.as_secs_f64();
    let by_locks = if locks > 0 { blocks as f64 * max_locks as f64 / locks as f64 } else { f64::MAX };
    let next = by_time.min(by_locks).min(blocks as f64 * 2.0);
    (next.floor() as i64).max(1)
}

/// The server's lock table, from its settings.
pub(super) async fn lock_table(client: &tokio_postgres::Client) -> Result<LockTable, MigrateError> {
    let r = client
        .query_one(
            "SELECT current_setting('max_locks_per_transaction')::int8,
                    current_setting('max_connections')::int8 + current_setting('autovacuum_max_workers')::int8 + 1
                    + current_setting('max_worker_processes')::int8 + current_setting('max_wal_senders')::int8
                    + current_setting('max_prepared_transactions')::int8",
            &[],
        )
        .await?;
    Ok(LockTable { max_locks_per_transaction: r.get(0), slots: r.get(1) })
}

fn msplit_filter(table: &QualifiedName) -> String {
    chute_core::migrate::plan::migration_filter(table)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_shrink_when_slow_or_wide_and_grow_at_most_twofold() {
        let hold = Duration::from_millis(200);
        assert_eq!(next_batch(100, Duration::from_millis(400), hold, 10, 1000), 50, "twice the hold: half the blocks");
        assert_eq!(next_batch(100, Duration::from_millis(10), hold, 10, 1000), 200, "fast: twice, not twentyfold");
        assert_eq!(next_batch(100, Duration::from_millis(100), hold, 2000, 1000), 50, "twice the locks allowed: half");
        assert_eq!(next_batch(1, Duration::from_secs(5), hold, 5000, 1000), 1, "never zero");
    }

    #[test]
    fn flatten_steps_follow_the_last_one_and_grow_at_most_twofold() {
        let hold = Duration::from_millis(200);
        assert_eq!(resize(16, Duration::from_millis(800), hold), 4);
        assert_eq!(resize(4, Duration::from_millis(20), hold), 8);
        assert_eq!(resize(1, Duration::from_secs(3), hold), 1);
        assert_eq!(resize(200, Duration::from_millis(1), hold), 256);
    }

    #[test]
    fn the_hold_is_a_fifth_of_lock_timeout_within_bounds() {
        assert_eq!(Split::hold(Duration::from_secs(1)), Duration::from_millis(200));
        assert_eq!(Split::hold(Duration::from_millis(200)), Duration::from_millis(40));
        assert_eq!(Split::hold(Duration::from_secs(10)), Duration::from_millis(200));
    }
}
