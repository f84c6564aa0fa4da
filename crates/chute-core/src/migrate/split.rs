//! The split's planners (the design is in the module doc of
//! `crate::migrate`): the staging parent and its leaves, a batch at a time;
//! the sync trigger; copy batches; the foreign keys of the leaves; the
//! cutover; the flatten. Each plans one transaction (or a few) from what the
//! engine read, so a run killed anywhere continues where it stopped.
//!
//! Every step ends by recording the locks its transaction holds (see
//! [`measure_locks`]): what `chute migrate --status` shows as the split's
//! largest lock footprint, and what the copy sizes its next batch by.

use super::plan::{migration_filter, step};
use super::{ForeignKey, Names, lock_asked, lock_held, quiet_lock};
use crate::ident::{QualifiedName, dollar_quote, quote_ident};
use crate::partman::planner::{self, PlanError, grant_sql};
use crate::partman::{Grants, Plan, Policy};

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

/// The lock table entries this transaction holds: one per object, whatever
/// the modes (`pg_locks` shows a row per mode).
const HELD_LOCKS: &str = "SELECT count(*) FROM (SELECT DISTINCT locktype, database, relation, page, tuple, virtualxid, transactionid, \
     classid, objid, objsubid FROM pg_locks WHERE pid = pg_backend_pid()) l";

/// The last statement of every split step: the most locks any of its
/// transactions held so far (`max_step_locks`), read from `pg_locks` while
/// the transaction still holds them all.
pub fn measure_locks(table: &QualifiedName) -> String {
    format!("UPDATE chute.migrations SET max_step_locks = greatest(max_step_locks, ({HELD_LOCKS})) WHERE {}", migration_filter(table))
}

/// `ALTER TABLE … SET (storage)` for a table made without the policy's
/// storage parameters, if it has any.
fn set_storage(policy: &Policy, table: &QualifiedName) -> Option<String> {
    let clause = policy.storage_clause();
    clause.strip_prefix(" WITH ").map(|params| format!("ALTER TABLE {} SET {params}", table.quoted()))
}

/// The staging parent, partitioned like the table, still without leaves.
pub fn plan_staging_parent(policy: &Policy, names: &Names) -> Plan {
    let sql = vec![
        format!(
            "CREATE TABLE {} (LIKE {} INCLUDING ALL) PARTITION BY RANGE ({})",
            names.staging.quoted(),
            names.table.quoted(),
            policy.key_sql()
        ),
        measure_locks(&names.table),
    ];
    let mut plan = Plan::default();
    step(&mut plan, &names.table, "split-setup", format!("create the staging parent {}", names.staging), sql, true);
    plan
}

/// One transaction's batch of leaves (see `locks::leaves_per_setup_step`):
/// each made standalone, with a validated CHECK of its bounds (instant on
/// an empty table, and what spares every later ATTACH a scan), and attached
/// to the staging parent. The table and the old partition are not touched:
/// the application waits on none of it.
pub fn plan_staging_leaves(policy: &Policy, names: &Names, leaves: &[Leaf], grants: &Grants) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let st = names.staging.quoted();
    let key = policy.key_sql();
    let mut sql = Vec::new();
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
    sql.push(measure_locks(&names.table));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "split-setup",
        format!("create {} leaves ({}) of {}", leaves.len(), span(leaves), names.staging),
        sql,
        true,
    );
    Ok(plan)
}

/// `first … last` of the leaves' names, for descriptions.
fn span(leaves: &[Leaf]) -> String {
    match (leaves.first(), leaves.last()) {
        (Some(a), Some(b)) if leaves.len() > 1 => format!("{} … {}", a.name.name, b.name.name),
        (Some(a), _) => a.name.name.clone(),
        _ => String::new(),
    }
}

/// The end of the setup, one short transaction: the staging parent's
/// DEFAULT partition (`Names::early`), and an `AFTER` row trigger on the old
/// partition that deletes the old version by `id_cols` from the staging
/// parent and inserts the new one. `CREATE TRIGGER` waits for writers in
/// flight, so no change escapes it.
///
/// The function is planned afresh on every call (`plan_cache_mode =
/// force_custom_plan`): its DELETE names the staging parent, and the generic
/// plan PL/pgSQL switches to after five calls covers every leaf, locking
/// each leaf and index (1,479 locks a call on a year of daily leaves with
/// three indexes), in every application session that writes. A custom plan
/// is pruned to the one leaf the key falls in.
pub fn plan_sync_trigger(names: &Names, id_cols: &[String], columns: &SplitColumns) -> Plan {
    let st = names.staging.quoted();
    let cols = id_cols.iter().map(|c| quote_ident(c)).collect::<Vec<_>>();
    let old_cols = id_cols.iter().map(|c| format!("OLD.{}", quote_ident(c))).collect::<Vec<_>>();
    let body = format!(
        " BEGIN \
         IF TG_OP IN ('UPDATE', 'DELETE') THEN DELETE FROM {st} WHERE ({}) = ({}); END IF; \
         IF TG_OP IN ('INSERT', 'UPDATE') THEN INSERT INTO {st} ({}){} VALUES ({}); END IF; \
         RETURN NULL; END ",
        cols.join(", "),
        old_cols.join(", "),
        columns.list(),
        columns.overriding(),
        columns.names.iter().map(|c| format!("NEW.{}", quote_ident(c))).collect::<Vec<_>>().join(", ")
    );
    let sql = vec![
        quiet_lock(&[names.old.quoted()]),
        // Rows written during the split with a key before the oldest leaf;
        // after the cutover, the partition for every key before it.
        format!("CREATE TABLE {} PARTITION OF {st} DEFAULT", names.early.quoted()),
        format!(
            "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql SET plan_cache_mode = force_custom_plan AS {}",
            names.sync_function.quoted(),
            dollar_quote(&body)
        ),
        format!(
            "CREATE TRIGGER chute_sync AFTER INSERT OR UPDATE OR DELETE ON {} FOR EACH ROW EXECUTE FUNCTION {}()",
            names.old.quoted(),
            names.sync_function.quoted()
        ),
        format!(
            "UPDATE chute.migrations SET phase = 'copying', rows_total = NULL, rows_moved = 0, copied_to = NULL, copy_done = false, \
             copy_started_at = now(), updated_at = now() WHERE {}",
            migration_filter(&names.table)
        ),
        measure_locks(&names.table),
    ];
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "split-setup",
        format!("create {} and a trigger on {} that keeps the staging leaves in sync", names.early, names.old),
        sql,
        true,
    );
    plan
}

/// One copy batch: the rows of the old partition in heap blocks `[from,
/// to)` (a TID range scan, PostgreSQL 14+), locked FOR SHARE so an
/// application update of the same row is ordered before or after it. Blocks,
/// not key ranges: a batch is the same size however many rows share a key
/// (2 M rows written with one `now()` made one key-range batch that held
/// every row locked for 14 s). A row updated during the split has its new
/// version in a later block, or the sync trigger has carried it: either way
/// `ON CONFLICT DO NOTHING` keeps the newest.
///
/// `rows_moved` counts the rows the batch inserted, not those it found
/// there already: those the trigger carried (every row written during the
/// split) or that an earlier batch copied before an update moved them to a
/// later block. So it never passes the rows the old partition held when the
/// copy began; `plan_count_moved` makes both figures exact at the end.
/// `batch_locks` is the batch's lock footprint, which sizes the next one.
/// `last`: open-ended (the rows appended since the engine last read the
/// table's size), and it marks the copy done.
pub fn plan_copy_batch(names: &Names, columns: &SplitColumns, from: i64, to: i64, last: bool) -> Result<Plan, PlanError> {
    let cond = if last { format!("ctid >= '({from},0)'::tid") } else { format!("ctid >= '({from},0)'::tid AND ctid < '({to},0)'::tid") };
    let done = if last { ", copy_done = true" } else { "" };
    let cols = columns.list();
    let sql = format!(
        "WITH batch AS (SELECT * FROM {} WHERE {cond} FOR SHARE), \
              copied AS (INSERT INTO {} ({cols}){} SELECT {cols} FROM batch ON CONFLICT DO NOTHING RETURNING 1) \
         UPDATE chute.migrations SET rows_moved = rows_moved + (SELECT count(*) FROM copied), copied_to = {to}{done}, updated_at = now() WHERE {}",
        names.old.quoted(),
        names.staging.quoted(),
        columns.overriding(),
        migration_filter(&names.table)
    );
    let locks = format!(
        "UPDATE chute.migrations SET batch_locks = l.n, max_step_locks = greatest(max_step_locks, l.n) \
         FROM ({HELD_LOCKS}) l(n) WHERE {}",
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
        vec![sql, locks],
        true,
    );
    Ok(plan)
}

/// After the copy: the trigger keeps the staging leaves equal to the old
/// partition, so the rows moved are the rows the old partition holds now.
/// A count (a scan that blocks nothing) makes `rows_moved` and
/// `rows_total` that exact figure.
pub fn plan_count_moved(names: &Names) -> Plan {
    let sql = vec![format!(
        "UPDATE chute.migrations SET rows_total = c.n, rows_moved = c.n, updated_at = now() FROM (SELECT count(*) AS n FROM {}) c WHERE {}",
        names.old.quoted(),
        migration_filter(&names.table)
    )];
    let mut plan = Plan::default();
    step(&mut plan, &names.table, "copy", format!("count the rows moved (those of {} now)", names.old), sql, true);
    plan
}

/// The table's foreign keys on a batch of staging partitions that lack
/// them, `NOT VALID`: catalog work only (a short SHARE ROW EXCLUSIVE lock of
/// the partition and of the table each key references), while rows keep
/// arriving through the trigger, which the new constraints check.
pub fn plan_leaf_foreign_keys(names: &Names, missing: &[(QualifiedName, &ForeignKey)]) -> Plan {
    let mut tables: Vec<String> =
        missing.iter().map(|(leaf, _)| leaf.quoted()).chain(missing.iter().map(|(_, fk)| fk.referenced.clone())).collect();
    tables.sort();
    tables.dedup();
    let mut sql = vec![quiet_lock(&tables)];
    sql.extend(missing.iter().map(|(leaf, fk)| fk.add_sql(leaf, true)));
    sql.push(measure_locks(&names.table));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "foreign-keys",
        format!("add {} foreign keys NOT VALID to leaves of {} (no scan)", missing.len(), names.staging),
        sql,
        true,
    );
    plan
}

/// `VALIDATE CONSTRAINT` on a batch of staging partitions: a scan of each
/// under SHARE UPDATE EXCLUSIVE, which lets writes continue.
pub fn plan_validate_foreign_keys(names: &Names, pending: &[(QualifiedName, String)]) -> Plan {
    let mut sql: Vec<String> =
        pending.iter().map(|(leaf, fk)| format!("ALTER TABLE {} VALIDATE CONSTRAINT {}", leaf.quoted(), quote_ident(fk))).collect();
    sql.push(measure_locks(&names.table));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "foreign-keys",
        format!("validate {} foreign keys of leaves of {} (a scan that lets writes continue)", pending.len(), names.staging),
        sql,
        true,
    );
    plan
}

/// The foreign keys on the staging parent itself, once every partition
/// under it has them validated: PostgreSQL takes each partition's own
/// constraint as the parent's (no scan), and the cutover's ATTACH finds the
/// staging parent's the same way.
pub fn plan_staging_foreign_keys(names: &Names, fks: &[&ForeignKey]) -> Plan {
    let tables: Vec<String> = std::iter::once(names.staging.quoted()).chain(fks.iter().map(|fk| fk.referenced.clone())).collect();
    let mut sql = vec![quiet_lock(&tables)];
    sql.extend(fks.iter().map(|fk| fk.add_sql(&names.staging, false)));
    sql.push(measure_locks(&names.table));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "foreign-keys",
        format!("add {} foreign keys to {} (its leaves' own, validated: no scan)", fks.len(), names.staging),
        sql,
        true,
    );
    plan
}

/// What the cutover needs besides the leaves the setup made.
#[derive(Debug)]
pub struct Cutover<'a> {
    pub leaves: &'a [Leaf],
    /// The old partition's upper bound: where the leaves end.
    pub hi: i64,
    /// The staging parent's DEFAULT partition: `Names::early`, or for a
    /// split set up by an older chute `Names::legacy_early` or none.
    pub early: Option<&'a QualifiedName>,
    pub grants: &'a Grants,
    pub keep_old: bool,
}

/// The cutover: catalog work only, under one short lock of the parent.
///
/// Keys before the oldest leaf keep working: they belonged to the old
/// partition (`[MINVALUE, hi)`), and an application that wrote such a row
/// before the migration may write one after it. `Names::early` takes them
/// for good, as the partition for `[MINVALUE, oldest leaf)`: it is the
/// staging parent's DEFAULT partition, which holds the rows written there
/// during the split; it gets a CHECK of that range (a scan of those few
/// rows) and is attached with it, so not a row moves.
pub fn plan_cutover(policy: &Policy, names: &Names, c: Cutover<'_>) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let st = names.staging.quoted();
    let old = names.old.quoted();
    let key = policy.key_sql();
    let older = names.early.quoted();
    let mut sql = vec![quiet_lock(&[t.clone(), st.clone()]), lock_asked(), format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")];
    sql.push(format!("DROP TRIGGER chute_sync ON {old}"));
    sql.push(format!("DROP FUNCTION {}()", names.sync_function.quoted()));
    sql.push(format!("ALTER TABLE {t} DETACH PARTITION {old}"));
    let oldest = c.leaves.first().map_or(c.hi, |l| l.from);
    let oldest_lit = policy.key_type.literal(oldest)?;
    match c.early {
        Some(early) => {
            sql.push(format!("ALTER TABLE {st} DETACH PARTITION {}", early.quoted()));
            sql.push(format!(
                "ALTER TABLE {} ADD CONSTRAINT chute_bounds CHECK ({key} IS NOT NULL AND {key} < {oldest_lit})",
                early.quoted()
            ));
            if early != &names.early {
                sql.push(format!("ALTER TABLE {} RENAME TO {}", early.quoted(), quote_ident(&names.early.name)));
            }
            sql.extend(set_storage(policy, &names.early));
        }
        None => sql.push(format!("CREATE TABLE {older} (LIKE {t} INCLUDING ALL){}", policy.storage_clause())),
    }
    sql.extend(grant_sql(c.grants, &names.early));
    sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {older} FOR VALUES FROM (MINVALUE) TO ({oldest_lit})"));
    if c.early.is_some() {
        sql.push(format!("ALTER TABLE {older} DROP CONSTRAINT chute_bounds"));
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
    sql.push(lock_held(&names.table));
    sql.push(measure_locks(&names.table));
    let what = if c.keep_old { format!("keep {} detached", names.old) } else { format!("drop {}", names.old) };
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "cutover",
        format!(
            "cutover: detach {}, attach {} with its {} leaves to {} (one attach, no scan), attach {} for the keys before {oldest_lit} \
             (MINVALUE), {what}",
            names.old,
            names.staging,
            c.leaves.len(),
            names.table,
            names.early
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
/// every leaf keeps its CHECK while it is under the staging parent, and its
/// foreign keys are the table's (validated before the cutover). The CHECKs
/// go afterwards ([`plan_drop_bounds`]): dropping one costs about as much as
/// the move itself, under the table's lock.
pub fn plan_flatten_step(policy: &Policy, names: &Names, moving: &[Leaf], rest: Option<(i64, i64)>) -> Result<Plan, PlanError> {
    let t = names.table.quoted();
    let st = names.staging.quoted();
    let mut sql = vec![
        quiet_lock(std::slice::from_ref(&t)),
        lock_asked(),
        format!("LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE"),
        format!("ALTER TABLE {t} DETACH PARTITION {st}"),
    ];
    for l in moving {
        let (lo, hi) = (policy.key_type.literal(l.from)?, policy.key_type.literal(l.to)?);
        sql.push(format!("ALTER TABLE {st} DETACH PARTITION {}", l.name.quoted()));
        sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", l.name.quoted()));
    }
    let left = match rest {
        Some((from, to)) => {
            let (lo, hi) = (policy.key_type.literal(from)?, policy.key_type.literal(to)?);
            sql.push(format!("ALTER TABLE {t} ATTACH PARTITION {st} FOR VALUES FROM ({lo}) TO ({hi})"));
            format!(", {} keeps the rest", names.staging)
        }
        None => {
            sql.push(format!("DROP TABLE {st}"));
            format!(", drop {}", names.staging)
        }
    };
    sql.push(lock_held(&names.table));
    sql.push(measure_locks(&names.table));
    let mut plan = Plan::default();
    step(
        &mut plan,
        &names.table,
        "flatten",
        format!("move {} leaves ({}) from {} to {} (no scan){left}", moving.len(), span(moving), names.staging, names.table),
        sql,
        true,
    );
    Ok(plan)
}

/// The last of the split: the CHECK of its bounds each moved leaf kept for
/// its move (partitions chute makes have none once attached), a few leaves
/// per transaction, each locked only while its constraint goes (the table
/// is not locked). `last` marks the split done.
pub fn plan_drop_bounds(names: &Names, leaves: &[QualifiedName], last: bool) -> Plan {
    let mut sql = Vec::new();
    if !leaves.is_empty() {
        sql.push(quiet_lock(&leaves.iter().map(QualifiedName::quoted).collect::<Vec<_>>()));
        sql.extend(leaves.iter().map(|l| format!("ALTER TABLE {} DROP CONSTRAINT chute_bounds", l.quoted())));
    }
    if last {
        sql.push(format!("UPDATE chute.migrations SET phase = 'done', updated_at = now() WHERE {}", migration_filter(&names.table)));
    }
    sql.push(measure_locks(&names.table));
    let what = match (leaves.first(), leaves.last()) {
        (Some(a), Some(b)) if leaves.len() > 1 => format!("drop the bounds CHECK of {} leaves ({} … {})", leaves.len(), a.name, b.name),
        (Some(a), _) => format!("drop the bounds CHECK of {}", a.name),
        _ => "mark the split done".to_owned(),
    };
    let mut plan = Plan::default();
    step(&mut plan, &names.table, "flatten", what, sql, true);
    plan
}

#[cfg(test)]
#[path = "split_tests.rs"]
mod tests;
