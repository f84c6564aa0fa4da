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

pub(super) fn step(plan: &mut Plan, table: &QualifiedName, phase: &str, description: String, sql: Vec<String>, transactional: bool) {
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
        let sql = new_parent_sql(policy, facts, names, &new_pk);
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
            vec![
                super::quiet_lock(std::slice::from_ref(&t)),
                format!("ALTER TABLE {t} ADD CONSTRAINT {rc} CHECK ({key} < {hi_lit}) NOT VALID"),
            ],
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
    let (sql, premade) = swap_sql(policy, facts, names, &new_pk, hi, &hi_lit, &rc)?;
    step(
        &mut plan,
        table,
        "swap",
        format!(
            "swap: rename {table} to {}, {} to {table}, attach {} for [MINVALUE, {hi_lit}) without a scan, create {} partitions from {hi_lit}",
            names.old, names.new_parent, names.old, premade
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

/// The swap's statements, with the first partitions from `hi` on, and how
/// many partitions it makes.
fn swap_sql(
    policy: &Policy,
    facts: &Facts,
    names: &Names,
    new_pk: &[String],
    hi: i64,
    hi_lit: &str,
    rc: &str,
) -> Result<(Vec<String>, usize), PlanError> {
    let table = &names.table;
    let t = table.quoted();
    let mut sql =
        vec![super::quiet_lock(std::slice::from_ref(&t)), super::lock_asked(), format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")];
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
    sql.push(super::lock_held(table));
    Ok((sql, premake.steps.len()))
}

/// The new parent, made from the table before any constraint of ours is on
/// it: columns, defaults, checks and the rest (`LIKE … INCLUDING ALL`),
/// the primary key as `new_pk`, every index under its `_cn` name, grants,
/// row-level security and policies, foreign keys, comment, replica identity.
fn new_parent_sql(policy: &Policy, facts: &Facts, names: &Names, new_pk: &[String]) -> Vec<String> {
    let t = names.table.quoted();
    let key = policy.key_sql();
    let np = names.new_parent.quoted();
    let mut sql = vec![format!("CREATE TABLE {np} (LIKE {t} INCLUDING ALL EXCLUDING INDEXES) PARTITION BY RANGE ({key})")];
    if !new_pk.is_empty() {
        let cols = new_pk.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
        match &facts.primary_key_name {
            Some(name) => sql.push(format!("ALTER TABLE {np} ADD CONSTRAINT {} PRIMARY KEY ({cols})", quote_ident(&names.new_index(name)))),
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
    // Row-level security: without it the new parent would show every
    // row to every role that may read the table.
    if facts.row_security.enabled {
        sql.push(format!("ALTER TABLE {np} ENABLE ROW LEVEL SECURITY"));
    }
    if facts.row_security.forced {
        sql.push(format!("ALTER TABLE {np} FORCE ROW LEVEL SECURITY"));
    }
    sql.extend(facts.row_security.policies.iter().map(|p| p.create_sql(&names.new_parent)));
    // Foreign keys, while the new parent is empty: validating scans
    // nothing, and attaching the old table takes its own validated key
    // as the new parent's, without a scan either.
    sql.extend(facts.foreign_keys.iter().map(|fk| fk.add_sql(&names.new_parent, false)));
    if let Some(c) = &facts.comment {
        sql.push(format!("COMMENT ON TABLE {np} IS {}", quote_literal(c)));
    }
    if facts.replica_identity == 'f' {
        sql.push(format!("ALTER TABLE {np} REPLICA IDENTITY FULL"));
    }
    sql
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
