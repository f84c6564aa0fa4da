//! The migration planners: facts + progress → [`Plan`]. Each planner plans
//! only what the catalog says is not done yet, so a re-run after a crash
//! continues from the step it reached.

use super::{Facts, Names};
use crate::ident::{QualifiedName, quote_ident, quote_literal};
use crate::partman::planner::{self, PlanError, grant_sql};
use crate::partman::{Plan, Policy, Snapshot, StepKind};

/// What the catalog says is done already (before the swap).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Progress {
    pub new_parent_exists: bool,
    /// The extended key's unique index: `Some(valid)`.
    pub pk_index: Option<bool>,
    pub pk_constraint: bool,
    /// The range CHECK: `Some(validated)`.
    pub range_check: Option<bool>,
}

/// Where the migration of `table` stands, as `chute.migrations` holds it.
pub fn migration_filter(table: &QualifiedName) -> String {
    format!("table_schema = {} AND table_name = {}", quote_literal(table.schema.as_deref().unwrap_or("public")), quote_literal(&table.name))
}

fn step(plan: &mut Plan, table: &QualifiedName, phase: &str, description: String, sql: Vec<String>, transactional: bool) {
    plan.push(StepKind::Migrate { table: table.clone(), phase: phase.into() }, description, sql, transactional);
}

/// The upper bound of the old partition: one whole interval after the one
/// holding max(now, newest key), so writers have a margin until the swap.
pub fn upper_bound(policy: &Policy, max_key: Option<i64>, now: i64) -> Result<i64, PlanError> {
    let tz = policy.zone()?;
    let anchor = if policy.key_type.is_time() { max_key.map_or(now, |m| m.max(now)) } else { max_key.unwrap_or(0) };
    let start = policy.interval.floor(anchor, &tz)?;
    let next = policy.interval.next(start, &tz)?;
    Ok(policy.interval.next(next, &tz)?)
}

/// Everything up to and including the swap, then the policy.
pub fn plan_swap(
    policy: &Policy,
    facts: &Facts,
    names: &Names,
    progress: Progress,
    extend_primary_key: bool,
    hi: i64,
) -> Result<Plan, PlanError> {
    let mut plan = Plan::default();
    let t = names.table.quoted();
    let key = policy.key_sql();
    let table = &names.table;
    let pk = facts.primary_key.clone().unwrap_or_default();
    let extend = extend_primary_key && !pk.is_empty() && !pk.contains(&policy.key);
    let mut new_pk: Vec<String> = pk.clone();
    if extend {
        new_pk.push(policy.key.clone());
        let idx = names.table.with_name(names.pk_index.clone());
        let cols = new_pk.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
        if progress.pk_index == Some(false) {
            step(
                &mut plan,
                table,
                "drop-invalid-index",
                format!("drop the invalid index {idx} an interrupted build left"),
                vec![format!("DROP INDEX CONCURRENTLY IF EXISTS {}", idx.quoted())],
                false,
            );
        }
        if progress.pk_index != Some(true) {
            step(
                &mut plan,
                table,
                "extend-primary-key",
                format!("build the unique index {idx} on ({}) concurrently (writes continue)", new_pk.join(", ")),
                vec![format!("CREATE UNIQUE INDEX CONCURRENTLY {} ON {t} ({cols})", quote_ident(&names.pk_index))],
                false,
            );
        }
        if !progress.pk_constraint {
            step(
                &mut plan,
                table,
                "unique-constraint",
                format!("make {idx} a unique constraint (no scan), so the new primary key attaches to it"),
                vec![format!(
                    "ALTER TABLE {t} ADD CONSTRAINT {} UNIQUE USING INDEX {}",
                    quote_ident(&names.pk_index),
                    quote_ident(&names.pk_index)
                )],
                true,
            );
        }
    }
    if !progress.new_parent_exists {
        let np = names.new_parent.quoted();
        let mut sql = vec![format!("CREATE TABLE {np} (LIKE {t} INCLUDING ALL EXCLUDING INDEXES) PARTITION BY RANGE ({key})")];
        if !new_pk.is_empty() {
            let cols = new_pk.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
            match &facts.primary_key_name {
                Some(name) => {
                    sql.push(format!("ALTER TABLE {np} ADD CONSTRAINT {} PRIMARY KEY ({cols})", quote_ident(&names.new_index(name))))
                }
                None => sql.push(format!("ALTER TABLE {np} ADD PRIMARY KEY ({cols})")),
            }
        }
        for (name, cols) in &facts.unique {
            let cols = cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
            sql.push(format!("CREATE UNIQUE INDEX {} ON {np} ({cols})", quote_ident(&names.new_index(name))));
        }
        for (name, tail) in &facts.plain_indexes {
            sql.push(format!("CREATE INDEX {} ON {np} {}", quote_ident(&names.new_index(name)), tail.trim()));
        }
        sql.extend(grant_sql(&facts.grants, &names.new_parent));
        if let Some(c) = &facts.comment {
            sql.push(format!("COMMENT ON TABLE {np} IS {}", quote_literal(c)));
        }
        if facts.replica_identity == 'f' {
            sql.push(format!("ALTER TABLE {np} REPLICA IDENTITY FULL"));
        }
        step(
            &mut plan,
            table,
            "new-parent",
            format!("create the new parent {} like {table}, partitioned by range on {}", names.new_parent, policy.key),
            sql,
            true,
        );
    }
    let hi_lit = policy.key_type.literal(hi)?;
    let rc = quote_ident(&names.range_check);
    if progress.range_check.is_none() {
        step(
            &mut plan,
            table,
            "range-check",
            format!("add CHECK ({} < {hi_lit}) NOT VALID to {table} (no scan)", policy.key),
            vec![format!("ALTER TABLE {t} ADD CONSTRAINT {rc} CHECK ({key} < {hi_lit}) NOT VALID")],
            true,
        );
    }
    if progress.range_check != Some(true) {
        step(
            &mut plan,
            table,
            "validate",
            format!("validate the CHECK on {table} (a scan that lets writes continue)"),
            vec![format!("ALTER TABLE {t} VALIDATE CONSTRAINT {rc}")],
            true,
        );
    }
    // The swap, with the first partitions from hi on.
    let mut sql = vec![format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")];
    for (seq, _) in &facts.owned_sequences {
        sql.push(format!("ALTER SEQUENCE {} OWNED BY NONE", seq.quoted()));
    }
    sql.push(format!("ALTER TABLE {t} RENAME TO {}", quote_ident(&names.old.name)));
    sql.push(format!("ALTER TABLE {} RENAME TO {}", names.new_parent.quoted(), quote_ident(&names.table.name)));
    sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {} FOR VALUES FROM (MINVALUE) TO ({hi_lit})", names.old.quoted()));
    sql.push(format!("ALTER TABLE {} DROP CONSTRAINT {rc}", names.old.quoted()));
    // The new parent's indexes take the old table's index names (renaming an
    // index renames its constraint too).
    let pk_name = facts.primary_key_name.iter().filter(|_| !new_pk.is_empty());
    let index_names = pk_name.chain(facts.unique.iter().map(|(n, _)| n)).chain(facts.plain_indexes.iter().map(|(n, _)| n));
    for name in index_names {
        sql.push(format!("ALTER INDEX {} RENAME TO {}", table.with_name(name.clone()).quoted(), quote_ident(&names.old_index(name))));
        sql.push(format!("ALTER INDEX {} RENAME TO {}", table.with_name(names.new_index(name)).quoted(), quote_ident(name)));
    }
    for (seq, col) in &facts.owned_sequences {
        sql.push(format!("ALTER SEQUENCE {} OWNED BY {t}.{}", seq.quoted(), quote_ident(col)));
    }
    // Identity columns: the new parent's sequence goes on from the old one's
    // value (writers wait on the lock, so it cannot move meanwhile).
    for c in &facts.identity_columns {
        let seq_of = |table: &QualifiedName| format!("pg_get_serial_sequence({}, {})", quote_literal(&table.quoted()), quote_literal(c));
        sql.push(format!(
            "SELECT setval({}, v) FROM (SELECT pg_sequence_last_value({}::regclass) AS v) s WHERE v IS NOT NULL",
            seq_of(table),
            seq_of(&names.old)
        ));
    }
    for (view, def) in &facts.views {
        sql.push(format!("CREATE OR REPLACE VIEW {view} AS {}", def.trim_end().trim_end_matches(';')));
    }
    let tz = policy.zone()?;
    let mut starts = vec![hi];
    for _ in 1..policy.premake.max(1) {
        let last = *starts.last().expect("one start");
        starts.push(policy.interval.next(last, &tz)?);
    }
    let snap = Snapshot { partitions: vec![], default: None, max_key: None, grants: facts.grants.clone(), remote: None };
    let premake = planner::plan_ensure(policy, &snap, &starts)?;
    for s in &premake.steps {
        sql.extend(s.sql.iter().cloned());
    }
    sql.push(format!("UPDATE chute.migrations SET phase = 'swapped', updated_at = now() WHERE {}", migration_filter(table)));
    step(
        &mut plan,
        table,
        "swap",
        format!(
            "swap: rename {table} to {}, {} to {table}, attach {} for [MINVALUE, {hi_lit}) without a scan, create {} partitions from {hi_lit}",
            names.old,
            names.new_parent,
            names.old,
            premake.steps.len()
        ),
        sql,
        true,
    );
    step(
        &mut plan,
        table,
        "policy",
        format!("store the policy of {table} for chute partition maintain"),
        vec![planner::store_config_sql(policy)],
        true,
    );
    Ok(plan)
}

/// One leaf of the split: `[from, to)` of the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub name: QualifiedName,
    pub from: i64,
    pub to: i64,
}

/// The leaves for the intervals from the one holding `min_key` up to `hi`.
pub fn split_leaves(policy: &Policy, min_key: i64, hi: i64) -> Result<Vec<Leaf>, PlanError> {
    let tz = policy.zone()?;
    let mut s = policy.interval.floor(min_key, &tz)?;
    let mut out = Vec::new();
    while s < hi {
        let e = policy.interval.next(s, &tz)?;
        out.push(Leaf { name: policy.parent.with_name(planner::partition_name(policy, s)?), from: s, to: e });
        if out.len() > planner::MAX_NEW_PARTITIONS {
            return Err(PlanError::TooMany(out.len()));
        }
        s = e;
    }
    Ok(out)
}

/// The leaf of the interval that starts at `start` (an interval's floor).
pub fn leaf_at(policy: &Policy, start: i64) -> Result<Leaf, PlanError> {
    let tz = policy.zone()?;
    let from = policy.interval.floor(start, &tz)?;
    let to = policy.interval.next(from, &tz)?;
    Ok(Leaf { name: policy.parent.with_name(planner::partition_name(policy, from)?), from, to })
}

/// The leaves holding `keys` (rows of the staging parent's DEFAULT
/// partition), one per interval, oldest first.
pub fn early_leaves(policy: &Policy, keys: &[i64]) -> Result<Vec<Leaf>, PlanError> {
    let mut out: Vec<Leaf> = Vec::new();
    for &k in keys {
        let l = leaf_at(policy, k)?;
        if !out.iter().any(|o| o.from == l.from) {
            out.push(l);
        }
    }
    out.sort_by_key(|l| l.from);
    Ok(out)
}

/// SQLSTATE of the cutover's refusal when a row reached the staging
/// parent's DEFAULT partition after the cutover was planned: plan again.
pub const EARLY_ROWS_MOVED: &str = "CH001";

/// The columns the split writes: every column but generated ones (the
/// server computes those), and whether an identity column is `GENERATED
/// ALWAYS` (then the rows' own ids go in with `OVERRIDING SYSTEM VALUE`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SplitColumns {
    pub names: Vec<String>,
    pub identity_always: bool,
}

impl SplitColumns {
    fn list(&self) -> String {
        self.names.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ")
    }

    fn overriding(&self) -> &'static str {
        if self.identity_always { " OVERRIDING SYSTEM VALUE" } else { "" }
    }
}

/// The staging parent, its leaves and the sync trigger, in one transaction.
pub fn plan_split_setup(
    policy: &Policy,
    names: &Names,
    leaves: &[Leaf],
    id_cols: &[String],
    columns: &SplitColumns,
    grants: &crate::partman::Grants,
) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let key = policy.key_sql();
    let st = names.staging.quoted();
    let mut sql = vec![format!("CREATE TABLE {st} (LIKE {t} INCLUDING ALL) PARTITION BY RANGE ({key})")];
    for l in leaves {
        let (lo, hi) = (policy.key_type.literal(l.from)?, policy.key_type.literal(l.to)?);
        sql.push(format!("CREATE TABLE {} (LIKE {t} INCLUDING ALL){}", l.name.quoted(), policy.storage_clause()));
        sql.extend(grant_sql(grants, &l.name));
        sql.push(format!(
            "ALTER TABLE {} ADD CONSTRAINT chute_bounds CHECK ({key} IS NOT NULL AND {key} >= {lo} AND {key} < {hi})",
            l.name.quoted()
        ));
        sql.push(format!("ALTER TABLE {st} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", l.name.quoted()));
    }
    // Rows written during the split with a key before the oldest leaf.
    sql.push(format!("CREATE TABLE {} PARTITION OF {st} DEFAULT", names.early.quoted()));
    let cols = id_cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>();
    let old_cols = id_cols.iter().map(|c| format!("OLD.{}", quote_ident(c))).collect::<Vec<_>>();
    sql.push(format!(
        "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $chute$ BEGIN \
         IF TG_OP IN ('UPDATE', 'DELETE') THEN DELETE FROM {st} WHERE ({}) = ({}); END IF; \
         IF TG_OP IN ('INSERT', 'UPDATE') THEN INSERT INTO {st} ({}){} VALUES ({}); END IF; \
         RETURN NULL; END $chute$",
        names.sync_function.quoted(),
        cols.join(", "),
        old_cols.join(", "),
        columns.list(),
        columns.overriding(),
        columns.names.iter().map(|c| format!("NEW.{}", quote_ident(c))).collect::<Vec<_>>().join(", ")
    ));
    sql.push(format!(
        "CREATE TRIGGER chute_sync AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {}()",
        names.old.quoted(),
        names.sync_function.quoted()
    ));
    sql.push(format!("UPDATE chute.migrations SET phase = 'copying', updated_at = now() WHERE {}", migration_filter(&names.table)));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "split-setup",
        format!("create {} with {} leaves and a trigger on {} that keeps them in sync", names.staging, leaves.len(), names.old),
        sql,
        true,
    );
    Ok(plan)
}

/// One copy batch: the rows of the old partition in heap blocks `[from,
/// to)` (a TID range scan, PostgreSQL 14+), locked FOR SHARE so an
/// application update of the same row is ordered before or after it. Blocks,
/// not key ranges: a batch is the same size however many rows share a key
/// (2 M rows written with one `now()` made one key-range batch that held
/// every row locked for 14 s). A row updated during the split has its new
/// version in a later block, or the sync trigger has carried it: either way
/// `ON CONFLICT DO NOTHING` keeps the newest. Every row of the range counts
/// as moved, whether this batch copied it or the trigger carried it first.
/// `last`: the final batch, open-ended (it also counts the row versions
/// written at the end of the table since the split began, which the trigger
/// carried), and it marks the copy done. So `rows_moved` counts every row at
/// least once; a row updated after its block was copied may count twice.
pub fn plan_copy_batch(names: &Names, columns: &SplitColumns, from: i64, to: i64, last: bool) -> Result<Plan, PlanError> {
    let cond = if last { format!("ctid >= '({from},0)'::tid") } else { format!("ctid >= '({from},0)'::tid AND ctid < '({to},0)'::tid") };
    let done = if last { ", copy_done = true" } else { "" };
    let cols = columns.list();
    let sql = format!(
        "WITH batch AS (SELECT * FROM {} WHERE {cond} FOR SHARE), \
              copied AS (INSERT INTO {} ({cols}){} SELECT {cols} FROM batch ON CONFLICT DO NOTHING) \
         UPDATE chute.migrations SET rows_moved = rows_moved + (SELECT count(*) FROM batch), copied_to = {to}{done}, updated_at = now() WHERE {}",
        names.old.quoted(),
        names.staging.quoted(),
        columns.overriding(),
        migration_filter(&names.table)
    );
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "copy",
        format!(
            "copy the rows of {} in blocks {from} to {} into {}",
            names.old,
            if last { "the end".to_owned() } else { (to - 1).to_string() },
            names.staging
        ),
        vec![sql],
        true,
    );
    Ok(plan)
}

/// What the cutover needs besides the leaves the setup made.
#[derive(Debug)]
pub struct Cutover<'a> {
    pub leaves: &'a [Leaf],
    /// Whether the staging parent has its DEFAULT partition (`Names::early`;
    /// a split set up by an older chute has none).
    pub has_early: bool,
    /// The leaves for the rows found in it just before the cutover.
    pub early: &'a [Leaf],
    pub columns: &'a SplitColumns,
    pub grants: &'a crate::partman::Grants,
    pub keep_old: bool,
}

/// The cutover: catalog work only, under one short lock of the parent (and
/// the move of the few rows written during the split before the oldest
/// interval, see `Names::early`).
pub fn plan_cutover(policy: &Policy, names: &Names, c: Cutover<'_>) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let st = names.staging.quoted();
    let old = names.old.quoted();
    let key = policy.key_sql();
    let mut sql = vec![format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")];
    sql.push(format!("DROP TRIGGER chute_sync ON {old}"));
    sql.push(format!("DROP FUNCTION {}()", names.sync_function.quoted()));
    sql.push(format!("ALTER TABLE {t} DETACH PARTITION {old}"));
    if c.has_early {
        let early = names.early.quoted();
        sql.push(format!("ALTER TABLE {st} DETACH PARTITION {early}"));
        let cols = c.columns.list();
        for l in c.early {
            let (lo, hi) = (policy.key_type.literal(l.from)?, policy.key_type.literal(l.to)?);
            sql.push(format!("CREATE TABLE {} (LIKE {t} INCLUDING ALL){}", l.name.quoted(), policy.storage_clause()));
            sql.extend(grant_sql(c.grants, &l.name));
            sql.push(format!(
                "WITH moved AS (DELETE FROM {early} WHERE {key} >= {lo} AND {key} < {hi} RETURNING *) \
                 INSERT INTO {} ({cols}){} SELECT {cols} FROM moved",
                l.name.quoted(),
                c.columns.overriding()
            ));
            sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", l.name.quoted()));
        }
        // A row that arrived after the plan was made, in an interval it has no leaf for.
        sql.push(format!(
            "DO $chute$ BEGIN IF EXISTS (SELECT 1 FROM {early}) THEN RAISE EXCEPTION USING ERRCODE = '{EARLY_ROWS_MOVED}', \
             MESSAGE = 'rows before the oldest interval arrived while the cutover was planned'; END IF; END $chute$"
        ));
        sql.push(format!("DROP TABLE {early}"));
    }
    // The staging parent goes in whole, as one partition of its leaves'
    // range: one ATTACH (its leaves' CHECKs spare the scan) whatever the
    // number of leaves. Attaching them one by one costs each ATTACH time in
    // proportion to the partitions already there (1,389 daily leaves held
    // the lock 8 s here); `plan_flatten_step` moves them up later, a few per
    // short transaction.
    let next = match (c.leaves.first(), c.leaves.last()) {
        (Some(first), Some(last)) => {
            let (lo, hi) = (policy.key_type.literal(first.from)?, policy.key_type.literal(last.to)?);
            sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {st} FOR VALUES FROM ({lo}) TO ({hi})"));
            "flattening"
        }
        _ => {
            sql.push(format!("DROP TABLE {st}"));
            "done"
        }
    };
    if !c.keep_old {
        sql.push(format!("DROP TABLE {old}"));
    }
    sql.push(format!("UPDATE chute.migrations SET phase = '{next}', updated_at = now() WHERE {}", migration_filter(&names.table)));
    let what = if c.keep_old { format!("keep {} detached", names.old) } else { format!("drop {}", names.old) };
    let early = if c.early.is_empty() {
        String::new()
    } else {
        format!(", move the rows written before the oldest interval into {} new leaves", c.early.len())
    };
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "cutover",
        format!(
            "cutover: detach {}, attach {} with its {} leaves to {} (one attach, no scan){early}, {what}",
            names.old,
            names.staging,
            c.leaves.len(),
            names.table
        ),
        sql,
        true,
    );
    Ok(plan)
}

/// One short transaction after the cutover: `moving` (the staging parent's
/// oldest leaves) become partitions of the table itself, and the staging
/// parent goes back in for the range of the leaves it keeps (`rest`: from
/// the next leaf to the end), or is dropped with the last of them. No scan:
/// every leaf keeps its CHECK while it is under the staging parent.
pub fn plan_flatten_step(policy: &Policy, names: &Names, moving: &[Leaf], rest: Option<(i64, i64)>) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let st = names.staging.quoted();
    let mut sql = vec![format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE"), format!("ALTER TABLE {t} DETACH PARTITION {st}")];
    for l in moving {
        let (lo, hi) = (policy.key_type.literal(l.from)?, policy.key_type.literal(l.to)?);
        sql.push(format!("ALTER TABLE {st} DETACH PARTITION {}", l.name.quoted()));
        sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", l.name.quoted()));
        sql.push(format!("ALTER TABLE {} DROP CONSTRAINT chute_bounds", l.name.quoted()));
    }
    let left = match rest {
        Some((from, to)) => {
            let (lo, hi) = (policy.key_type.literal(from)?, policy.key_type.literal(to)?);
            sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {st} FOR VALUES FROM ({lo}) TO ({hi})"));
            format!(", {} keeps the rest", names.staging)
        }
        None => {
            sql.push(format!("DROP TABLE {st}"));
            sql.push(format!("UPDATE chute.migrations SET phase = 'done', updated_at = now() WHERE {}", migration_filter(&names.table)));
            format!(", drop {}", names.staging)
        }
    };
    let mut plan = Plan::default();
    let span = match (moving.first(), moving.last()) {
        (Some(a), Some(b)) if moving.len() > 1 => format!("{} … {}", a.name.name, b.name.name),
        (Some(a), _) => a.name.name.clone(),
        _ => String::new(),
    };
    step(
        &mut plan,
        &names.table,
        "flatten",
        format!("move {} leaves ({span}) from {} to {} (no scan){left}", moving.len(), names.staging, names.table),
        sql,
        true,
    );
    Ok(plan)
}

/// After a failure before the swap: remove what the migration created, one
/// step each (a step that cannot get its lock leaves the rest to the others),
/// so the table is as it was. `progress` is what the catalog shows.
pub fn plan_abort(names: &Names, progress: Progress) -> Plan {
    let t = names.table.quoted();
    let mut plan = Plan::default();
    if progress.new_parent_exists {
        step(
            &mut plan,
            &names.table,
            "abort",
            format!("drop the new parent {}", names.new_parent),
            vec![format!("DROP TABLE {}", names.new_parent.quoted())],
            true,
        );
    }
    if progress.range_check.is_some() {
        step(
            &mut plan,
            &names.table,
            "abort",
            format!("drop the CHECK {} on {}", names.range_check, names.table),
            vec![format!("ALTER TABLE {t} DROP CONSTRAINT {}", quote_ident(&names.range_check))],
            true,
        );
    }
    if progress.pk_constraint {
        step(
            &mut plan,
            &names.table,
            "abort",
            format!("drop the unique constraint {} (and its index) on {}", names.pk_index, names.table),
            vec![format!("ALTER TABLE {t} DROP CONSTRAINT {}", quote_ident(&names.pk_index))],
            true,
        );
    } else if progress.pk_index.is_some() {
        step(
            &mut plan,
            &names.table,
            "abort",
            format!("drop the index {}", names.pk_index),
            vec![format!("DROP INDEX CONCURRENTLY IF EXISTS {}", names.table.with_name(names.pk_index.clone()).quoted())],
            false,
        );
    }
    plan
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
