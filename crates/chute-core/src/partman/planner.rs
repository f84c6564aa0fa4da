//! The planners: policy + catalog snapshot + now → [`Plan`].
//!
//! They never touch a database and never read the clock, so every catalog
//! state can be unit-tested and `--dry-run` prints exactly what would run.
//! The rules they encode are the ones pg_partman users learn the hard way:
//! new partitions are created standalone, given a CHECK that matches their
//! bounds and then attached (SHARE UPDATE EXCLUSIVE on the parent, no scan),
//! never `CREATE TABLE … PARTITION OF` (ACCESS EXCLUSIVE); retention detaches
//! concurrently, one partition per step; a detach left pending is finalized;
//! rows in a DEFAULT partition are moved into proper partitions; every name is
//! checked against the 63-byte limit before any step is planned.

// Names and the error live with what both the planners here and the
// distributed-table planner (`distribute.rs`) use; callers still find them
// here, beside the planners that give them.
pub use super::naming::{check_names, default_name, hash_child_name, partition_name};
pub use super::plan::{MAX_NEW_PARTITIONS, PlanError};

use super::interval::Span;
use super::plan::{Plan, StepKind};
use super::policy::{Policy, RetentionMode};
use super::snapshot::{Grants, PartitionInfo, Snapshot};
use crate::ident::{QualifiedName, check_length, dollar_quote, quote_ident, quote_literal};

/// Why a row's partition is not created.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RowRefusal {
    #[error("{key} is further ahead than --max-future {limit} allows (a faulty clock?)")]
    TooFarAhead { key: String, limit: String },
    #[error("{key} is older than the retention of {keep}: its partition would be dropped")]
    PastRetention { key: String, keep: String },
}

/// The limits a row's key must respect: `[oldest, newest]`, inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyLimits {
    /// Rows whose interval ends at or before this would be aged out at once.
    pub retention_cutoff: Option<i64>,
    /// Rows with a key beyond this are refused.
    pub max_key: Option<i64>,
}

pub fn key_limits(policy: &Policy, snap_max_key: Option<i64>, now: i64) -> Result<KeyLimits, PlanError> {
    let tz = policy.zone()?;
    let max_key = match (&policy.max_future, policy.key_type.is_time()) {
        (Some(m), true) => Some(m.add_to(now, &tz)?),
        _ => None,
    };
    Ok(KeyLimits { retention_cutoff: retention_cutoff(policy, snap_max_key, now)?, max_key })
}

fn retention_cutoff(policy: &Policy, max_key: Option<i64>, now: i64) -> Result<Option<i64>, PlanError> {
    let Some(r) = &policy.retention else { return Ok(None) };
    let tz = policy.zone()?;
    Ok(match r.keep {
        Span::Integer(keep) => max_key.map(|m| m.saturating_sub(keep)),
        Span::Time { .. } => Some(r.keep.subtract_from(now, &tz)?),
    })
}

/// Decides whether a row with this key may get a partition.
pub fn check_key(policy: &Policy, limits: &KeyLimits, key: i64) -> Result<(), RowRefusal> {
    let show = || policy.key_type.literal(key).unwrap_or_else(|_| key.to_string());
    if let Some(max) = limits.max_key
        && key > max
    {
        let limit = policy.max_future.map(|m| m.to_string()).unwrap_or_default();
        return Err(RowRefusal::TooFarAhead { key: show(), limit });
    }
    if let Some(cutoff) = limits.retention_cutoff {
        let tz = policy.zone().map_err(|_| RowRefusal::PastRetention { key: show(), keep: String::new() })?;
        let end = policy.interval.floor(key, &tz).and_then(|s| policy.interval.next(s, &tz)).unwrap_or(i64::MIN);
        if end <= cutoff {
            let keep = policy.retention.as_ref().map(|r| r.keep.to_string()).unwrap_or_default();
            return Err(RowRefusal::PastRetention { key: show(), keep });
        }
    }
    Ok(())
}

/// The intervals maintenance keeps: from `--start` (or the interval holding
/// now) through `premake` intervals after the anchor (now, or the newest row
/// when that is ahead, up to max-future; integer keys: the newest row).
pub fn wanted_intervals(policy: &Policy, snap: &Snapshot, now: i64) -> Result<Vec<(i64, i64)>, PlanError> {
    let tz = policy.zone()?;
    let limits = key_limits(policy, snap.max_key, now)?;
    let anchor = if policy.key_type.is_time() {
        match (snap.max_key, limits.max_key) {
            (Some(m), Some(limit)) if m > now => m.min(limit),
            (Some(m), None) if m > now => m,
            _ => now,
        }
    } else {
        snap.max_key.or(policy.start).unwrap_or(0)
    };
    let anchor_start = policy.interval.floor(anchor, &tz)?;
    let mut first = match policy.start {
        Some(s) => policy.interval.floor(s, &tz)?.min(anchor_start),
        None if policy.key_type.is_time() => policy.interval.floor(now, &tz)?.min(anchor_start),
        None => anchor_start,
    };
    if let Some(cutoff) = limits.retention_cutoff {
        // Never plan a partition that retention would remove at once.
        while policy.interval.next(first, &tz)? <= cutoff && first < anchor_start {
            first = policy.interval.next(first, &tz)?;
        }
    }
    let mut out = Vec::new();
    let mut s = first;
    let mut after_anchor = 0;
    loop {
        let e = policy.interval.next(s, &tz)?;
        out.push((s, e));
        if out.len() > MAX_NEW_PARTITIONS {
            return Err(PlanError::TooMany(out.len()));
        }
        if s >= anchor_start {
            if after_anchor == policy.premake {
                break;
            }
            after_anchor += 1;
        }
        s = e;
    }
    Ok(out)
}

fn overlaps(snap: &Snapshot, from: i64, to: i64) -> bool {
    snap.partitions.iter().any(|p| p.from < to && from < p.to)
}

/// Maintenance: finish interrupted detaches, give rows in DEFAULT proper
/// partitions, create what is missing ahead, apply retention.
pub fn plan_maintain(policy: &Policy, snap: &Snapshot, now: i64) -> Result<Plan, PlanError> {
    let tz = policy.zone()?;
    let mut plan = Plan::default();
    let cutoff = retention_cutoff(policy, snap.max_key, now)?;
    let due = |p: &PartitionInfo| cutoff.is_some_and(|c| p.to <= c && p.to != i64::MAX);

    for p in snap.partitions.iter().filter(|p| p.detach_pending) {
        plan.push(
            StepKind::FinalizeDetach { name: p.name.clone() },
            format!("finish the interrupted detach of {}", p.name),
            vec![format!("ALTER TABLE {} DETACH PARTITION {} FINALIZE", policy.parent.quoted(), p.name.quoted())],
            false,
        );
        if due(p) {
            plan.extend(after_detach(policy, p));
        }
    }

    if policy.default_partition && snap.default.is_none() {
        let name = policy.parent.with_name(default_name(policy)?);
        let mut sql = vec![format!("CREATE TABLE {} (LIKE {} INCLUDING ALL)", name.quoted(), policy.parent.quoted())];
        sql.extend(grant_sql(&snap.grants, &name));
        sql.push(format!("ALTER TABLE {} ATTACH PARTITION {} DEFAULT", policy.parent.quoted(), name.quoted()));
        plan.push(StepKind::CreateDefault { name: name.clone() }, format!("create the DEFAULT partition {name}"), sql, true);
    }

    let mut planned: Vec<(i64, i64)> = Vec::new();
    if let Some(d) = &snap.default {
        for &start in &d.row_intervals {
            let end = policy.interval.next(start, &tz)?;
            if overlaps(snap, start, end) {
                plan.notes.push(format!(
                    "rows in {} between {} and {} overlap an existing partition; move them by hand",
                    d.name,
                    policy.key_type.literal(start)?,
                    policy.key_type.literal(end)?
                ));
                continue;
            }
            if cutoff.is_some_and(|c| end <= c) {
                plan.notes.push(format!("rows in {} before {} are past retention; left in place", d.name, policy.key_type.literal(end)?));
                continue;
            }
            planned.push((start, end));
            create_partition(policy, snap, &mut plan, start, end)?;
        }
    }
    let wanted = wanted_intervals(policy, snap, now)?;
    for (s, e) in wanted {
        if !overlaps(snap, s, e) && !planned.contains(&(s, e)) {
            create_partition(policy, snap, &mut plan, s, e)?;
        }
    }

    for p in snap.partitions.iter().filter(|p| !p.detach_pending && due(p)) {
        if snap.default.is_some() || policy.default_partition {
            plan.push(
                StepKind::Detach { name: p.name.clone() },
                format!("detach {} (past retention; a DEFAULT partition rules out CONCURRENTLY)", p.name),
                vec![format!("ALTER TABLE {} DETACH PARTITION {}", policy.parent.quoted(), p.name.quoted())],
                true,
            );
        } else {
            plan.push(
                StepKind::DetachConcurrently { name: p.name.clone() },
                format!("detach {} concurrently (past retention)", p.name),
                vec![format!("ALTER TABLE {} DETACH PARTITION {} CONCURRENTLY", policy.parent.quoted(), p.name.quoted())],
                false,
            );
        }
        plan.extend(after_detach(policy, p));
    }
    Ok(plan)
}

fn after_detach(policy: &Policy, p: &PartitionInfo) -> Plan {
    let name = &p.name;
    let mut plan = Plan::default();
    let Some(r) = &policy.retention else { return plan };
    match (r.mode, &r.schema) {
        (RetentionMode::Drop, _) => {
            plan.push(
                StepKind::DropPartition { name: name.clone() },
                format!("drop {name}"),
                vec![format!("DROP TABLE {}", name.quoted())],
                true,
            );
            if let (Some(d), None) = (&policy.distribution, &policy.hash) {
                let node = d.node_of_partition(policy, &name.name, p.from);
                plan.push_on(
                    node,
                    StepKind::DropRemote { node: node.to_owned(), name: name.clone() },
                    format!("drop {name} on data node {node}"),
                    vec![format!("DROP TABLE IF EXISTS {}", name.quoted())],
                );
            }
            if let (Some(d), Some(h)) = (&policy.distribution, &policy.hash) {
                for r in 0..h.modulus {
                    let Ok(child) = hash_child_name(&name.name, r) else { continue };
                    let child = name.with_name(child);
                    let node = d.node_of(r);
                    plan.push_on(
                        node,
                        StepKind::DropRemote { node: node.to_owned(), name: child.clone() },
                        format!("drop {child} on data node {node}"),
                        vec![format!("DROP TABLE IF EXISTS {}", child.quoted())],
                    );
                }
            }
        }
        (RetentionMode::Detach, Some(schema)) => plan.push(
            StepKind::MoveToSchema { name: name.clone(), schema: schema.clone() },
            format!("move {name} to schema {schema}"),
            vec![
                format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)),
                format!("ALTER TABLE {} SET SCHEMA {}", name.quoted(), quote_ident(schema)),
            ],
            true,
        ),
        (RetentionMode::Detach, None) => {}
    }
    plan
}

/// Just in time: partitions for the intervals starting at `starts` (rows of
/// a load need them). Starts that exist already are skipped; the caller
/// checks each row with [`check_key`] first.
pub fn plan_ensure(policy: &Policy, snap: &Snapshot, starts: &[i64]) -> Result<Plan, PlanError> {
    let tz = policy.zone()?;
    let mut plan = Plan::default();
    let mut starts = starts.to_vec();
    starts.sort_unstable();
    starts.dedup();
    if starts.len() > MAX_NEW_PARTITIONS {
        return Err(PlanError::TooMany(starts.len()));
    }
    for s in starts {
        let start = policy.interval.floor(s, &tz)?;
        let end = policy.interval.next(start, &tz)?;
        if overlaps(snap, start, end) {
            continue;
        }
        let moves = snap.default.as_ref().is_some_and(|d| d.row_intervals.contains(&start));
        create_partition_inner(policy, snap, &mut plan, start, end, moves)?;
    }
    Ok(plan)
}

fn create_partition(policy: &Policy, snap: &Snapshot, plan: &mut Plan, from: i64, to: i64) -> Result<(), PlanError> {
    let moves = snap.default.as_ref().is_some_and(|d| d.row_intervals.contains(&from));
    create_partition_inner(policy, snap, plan, from, to, moves)
}

/// One transaction: create the leaf standalone (and its hash children),
/// give it the parent's owner and grants, move its rows out of DEFAULT,
/// add a CHECK matching its bounds so ATTACH need not scan, attach, and drop
/// the CHECK again (the partition constraint now does its job).
fn create_partition_inner(policy: &Policy, snap: &Snapshot, plan: &mut Plan, from: i64, to: i64, moves: bool) -> Result<(), PlanError> {
    let leaf = policy.parent.with_name(partition_name(policy, from)?);
    let (lo, hi) = (policy.key_type.literal(from)?, policy.key_type.literal(to)?);
    if policy.distribution.is_some() && policy.hash.is_none() {
        return super::distribute::create_placed(policy, snap, plan, &leaf, (from, to), (&lo, &hi));
    }
    let key = policy.key_sql();
    let unlogged = if policy.unlogged { "UNLOGGED " } else { "" };
    let mut sql = Vec::new();
    let partitioning = match &policy.hash {
        Some(h) => format!(" PARTITION BY HASH ({})", quote_ident(&h.column)),
        None => String::new(),
    };
    // A partitioned table cannot be UNLOGGED; its hash children are.
    let leaf_unlogged = if policy.hash.is_some() { "" } else { unlogged };
    // Storage parameters go on tables with storage: the hash children, if any.
    let storage = if policy.hash.is_some() { String::new() } else { policy.storage_clause() };
    sql.push(format!(
        "CREATE {leaf_unlogged}TABLE {} (LIKE {} INCLUDING ALL){partitioning}{storage}",
        leaf.quoted(),
        policy.parent.quoted()
    ));
    sql.extend(grant_sql(&snap.grants, &leaf));
    if let (Some(h), Some(d)) = (&policy.hash, &policy.distribution) {
        super::distribute::remote_shards(policy, snap, plan, &leaf, (&lo, &hi))?;
        for r in 0..h.modulus {
            let child = leaf.with_name(hash_child_name(&leaf.name, r)?);
            let schema = child.schema.clone().unwrap_or_else(|| "public".into());
            sql.push(format!(
                "CREATE FOREIGN TABLE {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {r}) SERVER {} OPTIONS (schema_name {}, table_name {})",
                child.quoted(),
                leaf.quoted(),
                h.modulus,
                quote_ident(&super::policy::server_name(d.node_of(r))),
                quote_literal(&schema),
                quote_literal(&child.name)
            ));
        }
    } else if let Some(h) = &policy.hash {
        for r in 0..h.modulus {
            let child = leaf.with_name(hash_child_name(&leaf.name, r)?);
            sql.push(format!(
                "CREATE {unlogged}TABLE {} PARTITION OF {} FOR VALUES WITH (MODULUS {}, REMAINDER {r}){}",
                child.quoted(),
                leaf.quoted(),
                h.modulus,
                policy.storage_clause()
            ));
            sql.extend(grant_sql(&snap.grants, &child));
        }
    }
    if moves && let Some(d) = &snap.default {
        sql.push(format!(
            "WITH moved AS (DELETE FROM {} WHERE {key} >= {lo} AND {key} < {hi} RETURNING *) INSERT INTO {} SELECT * FROM moved",
            d.name.quoted(),
            leaf.quoted()
        ));
    }
    sql.push(format!(
        "ALTER TABLE {} ADD CONSTRAINT chute_bounds CHECK ({key} IS NOT NULL AND {key} >= {lo} AND {key} < {hi})",
        leaf.quoted()
    ));
    sql.push(format!("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", policy.parent.quoted(), leaf.quoted()));
    sql.push(format!("ALTER TABLE {} DROP CONSTRAINT chute_bounds", leaf.quoted()));
    let what = if moves { " (moving its rows out of DEFAULT)" } else { "" };
    plan.push(
        StepKind::CreatePartition { name: leaf.clone(), from, to, moves_default_rows: moves },
        format!("create partition {leaf} for [{lo}, {hi}){what}"),
        sql,
        true,
    );
    Ok(())
}

/// GRANT statements that give `table` the parent's owner and privileges.
pub fn grant_sql(grants: &Grants, table: &QualifiedName) -> Vec<String> {
    let mut sql = Vec::new();
    if !grants.owner.is_empty() && grants.owner != grants.current_user {
        sql.push(format!("ALTER TABLE {} OWNER TO {}", table.quoted(), quote_ident(&grants.owner)));
    }
    for item in &grants.acl {
        let Some((grantee, rest)) = item.split_once('=') else { continue };
        let privs = rest.split('/').next().unwrap_or("");
        let grantee = grantee.trim_matches('"').replace("\"\"", "\"");
        if grantee == grants.owner {
            continue;
        }
        let (plain, with_option) = acl_privileges(privs);
        let to = if grantee.is_empty() { "PUBLIC".to_owned() } else { quote_ident(&grantee) };
        if !plain.is_empty() {
            sql.push(format!("GRANT {} ON {} TO {to}", plain.join(", "), table.quoted()));
        }
        if !with_option.is_empty() {
            sql.push(format!("GRANT {} ON {} TO {to} WITH GRANT OPTION", with_option.join(", "), table.quoted()));
        }
    }
    sql
}

fn acl_privileges(privs: &str) -> (Vec<&'static str>, Vec<&'static str>) {
    let mut plain = Vec::new();
    let mut with_option = Vec::new();
    let mut chars = privs.chars().peekable();
    while let Some(c) = chars.next() {
        let name = match c {
            'r' => "SELECT",
            'a' => "INSERT",
            'w' => "UPDATE",
            'd' => "DELETE",
            'D' => "TRUNCATE",
            'x' => "REFERENCES",
            't' => "TRIGGER",
            _ => continue,
        };
        if chars.peek() == Some(&'*') {
            chars.next();
            with_option.push(name);
        } else {
            plain.push(name);
        }
    }
    (plain, with_option)
}

/// The statement that stores a policy.
pub fn store_config_sql(policy: &Policy) -> String {
    let json = serde_json::to_string(policy).expect("a policy always serializes");
    let schema = policy.parent.schema.clone().unwrap_or_else(|| "public".into());
    format!(
        "INSERT INTO chute.partition_config (parent_schema, parent_table, policy) VALUES ({}, {}, {}::jsonb) \
         ON CONFLICT (parent_schema, parent_table) DO UPDATE SET policy = EXCLUDED.policy, updated_at = now()",
        quote_literal(&schema),
        quote_literal(&policy.parent.name),
        quote_literal(&json)
    )
}

pub fn forget_config_sql(parent: &QualifiedName) -> String {
    delete_of_parent("chute.partition_config", parent)
}

/// Deletes the rows of `parent` from one of chute's tables keyed by
/// `(parent_schema, parent_table)` (a name without a schema is in `public`).
fn delete_of_parent(chute_table: &str, parent: &QualifiedName) -> String {
    format!(
        "DELETE FROM {chute_table} WHERE parent_schema = {} AND parent_table = {}",
        quote_literal(parent.schema.as_deref().unwrap_or("public")),
        quote_literal(&parent.name)
    )
}

/// What exists under the name `partition create` is given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Existing {
    /// Nothing: define it from `--columns` (SQL column definitions) or `--like` (a table).
    Missing { definition: TableSource },
    /// A plain table without rows: converted in one short transaction.
    EmptyPlain { owned_sequences: Vec<(QualifiedName, String)>, grants: Grants },
    /// Already range-partitioned on the key (made by chute or by hand): adopted.
    Partitioned,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableSource {
    Columns(String),
    Like(QualifiedName),
}

/// `partition create`: make (or convert, or adopt) the parent, store the
/// policy, then the first partitions.
pub fn plan_create(policy: &Policy, existing: &Existing, snap: &Snapshot, now: i64) -> Result<Plan, PlanError> {
    check_length(&policy.parent.name)?;
    let tz = policy.zone()?;
    check_names(policy, policy.interval.floor(now, &tz).unwrap_or(0))?;
    let mut plan = Plan::default();
    let parent = policy.parent.quoted();
    let by = format!("PARTITION BY RANGE ({})", policy.key_sql());
    match existing {
        Existing::Missing { definition: TableSource::Columns(cols) } => plan.push(
            StepKind::CreateParent { table: policy.parent.clone() },
            format!("create {} partitioned by range on {}", policy.parent, policy.key),
            vec![format!("CREATE TABLE {parent} ({cols}) {by}")],
            true,
        ),
        Existing::Missing { definition: TableSource::Like(src) } => plan.push(
            StepKind::CreateParent { table: policy.parent.clone() },
            format!("create {} like {src}, partitioned by range on {}", policy.parent, policy.key),
            vec![format!("CREATE TABLE {parent} (LIKE {} INCLUDING ALL) {by}", src.quoted())],
            true,
        ),
        Existing::EmptyPlain { owned_sequences, grants } => {
            let old_name = format!("{}_chute_old", policy.parent.name);
            check_length(&old_name)?;
            let old = policy.parent.with_name(old_name.clone());
            let mut sql = vec![format!("LOCK TABLE {parent} IN ACCESS EXCLUSIVE MODE")];
            sql.push(empty_check(&parent, &policy.parent.to_string()));
            for (seq, _) in owned_sequences {
                sql.push(format!("ALTER SEQUENCE {} OWNED BY NONE", seq.quoted()));
            }
            sql.push(format!("ALTER TABLE {parent} RENAME TO {}", quote_ident(&old_name)));
            sql.push(format!("CREATE TABLE {parent} (LIKE {} INCLUDING ALL) {by}", old.quoted()));
            sql.push(format!("DROP TABLE {}", old.quoted()));
            for (seq, col) in owned_sequences {
                sql.push(format!("ALTER SEQUENCE {} OWNED BY {parent}.{}", seq.quoted(), quote_ident(col)));
            }
            sql.extend(grant_sql(grants, &policy.parent));
            plan.push(
                StepKind::ConvertTable { table: policy.parent.clone() },
                format!("turn the empty table {} into a parent partitioned by range on {}", policy.parent, policy.key),
                sql,
                true,
            );
        }
        Existing::Partitioned => {}
    }
    plan.push(
        StepKind::StoreConfig { table: policy.parent.clone() },
        format!("store the policy of {}", policy.parent),
        vec![store_config_sql(policy)],
        true,
    );
    plan.extend(plan_maintain(policy, snap, now)?);
    Ok(plan)
}

/// `partition undo`: back to a plain table with every row, in one transaction.
pub fn plan_undo(parent: &QualifiedName, owned_sequences: &[(QualifiedName, String)], grants: &Grants) -> Result<Plan, PlanError> {
    let tmp_name = format!("{}_chute_undo", parent.name);
    check_length(&tmp_name)?;
    let tmp = parent.with_name(tmp_name);
    let mut sql = vec![format!("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", parent.quoted())];
    sql.push(format!("CREATE TABLE {} (LIKE {} INCLUDING ALL)", tmp.quoted(), parent.quoted()));
    sql.push(format!("INSERT INTO {} SELECT * FROM {}", tmp.quoted(), parent.quoted()));
    for (seq, _) in owned_sequences {
        sql.push(format!("ALTER SEQUENCE {} OWNED BY NONE", seq.quoted()));
    }
    sql.push(format!("DROP TABLE {}", parent.quoted()));
    sql.push(format!("ALTER TABLE {} RENAME TO {}", tmp.quoted(), quote_ident(&parent.name)));
    for (seq, col) in owned_sequences {
        sql.push(format!("ALTER SEQUENCE {} OWNED BY {}.{}", seq.quoted(), parent.quoted(), quote_ident(col)));
    }
    sql.extend(grant_sql(grants, parent));
    sql.push(forget_config_sql(parent));
    let mut plan = Plan::default();
    plan.push(StepKind::Undo { table: parent.clone() }, format!("turn {parent} back into a plain table with all its rows"), sql, true);
    Ok(plan)
}

/// `partition forget`: the stored policy of a table that is gone (dropped
/// with SQL rather than with `partition undo`), with what chute kept about
/// it: when it was last maintained (`maintained_key`, a `chute.meta` key)
/// and, when `retention_records` (that table exists), the partitions an
/// interrupted retention left to finish.
pub fn plan_forget(parent: &QualifiedName, maintained_key: &str, retention_records: bool) -> Plan {
    let mut sql = vec![forget_config_sql(parent), format!("DELETE FROM chute.meta WHERE key = {}", quote_literal(maintained_key))];
    if retention_records {
        sql.push(delete_of_parent("chute.retention_inflight", parent));
    }
    let mut plan = Plan::default();
    plan.push(
        StepKind::ForgetConfig { table: parent.clone() },
        format!("forget the partition policy of {parent}, a table that no longer exists"),
        sql,
        true,
    );
    plan
}

#[cfg(test)]
#[path = "planner_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "planner_dist_tests.rs"]
mod dist_tests;

/// A statement that fails, naming the table, when `parent` has rows. The
/// message goes through `RAISE … USING MESSAGE`, where `%` is plain text,
/// and the body's dollar quote is a tag the body does not contain, so no
/// table name can end it early.
pub(crate) fn empty_check(parent_sql: &str, shown: &str) -> String {
    let message = format!("table {shown} gained rows; nothing was changed").replace('\'', "''");
    let body = format!(" BEGIN IF EXISTS (SELECT 1 FROM {parent_sql}) THEN RAISE EXCEPTION USING MESSAGE = '{message}'; END IF; END ");
    format!("DO {}", dollar_quote(&body))
}
