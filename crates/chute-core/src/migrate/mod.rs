//! `chute migrate`, the pure half: turning a live plain table into a
//! range-partitioned one, then splitting its old rows into interval
//! partitions, as plans the one executor runs.
//!
//! # The swap (after the published procedure for a 33 TB orders table)
//! 1. With `--extend-primary-key`: `CREATE UNIQUE INDEX CONCURRENTLY` on
//!    (pk…, key), then `ADD CONSTRAINT … UNIQUE USING INDEX` (no scan), so the
//!    new parent's primary key (pk…, key) finds a matching constraint index
//!    on the old table when it is attached, instead of building one.
//! 2. The new parent `T_chute_new` is created from the old table (columns,
//!    defaults, checks, storage, comments, statistics, every index, grants,
//!    table comment, replica identity FULL, row-level security and its
//!    policies, and its foreign keys: added while the new parent is empty,
//!    so validating them scans nothing) before any constraint of ours
//!    exists on the old table, so none is copied.
//! 3. `CHECK (key < hi) NOT VALID`, then `VALIDATE` (SHARE UPDATE EXCLUSIVE:
//!    writes continue). `hi` is the interval boundary one whole interval after
//!    the one holding max(now, newest key), stored in `chute.migrations` so a
//!    re-run uses the same value.
//! 4. One transaction under `lock_timeout`, retried: rename the old table to
//!    `T_chute_old`, the new parent to `T`, attach the old table for
//!    `[MINVALUE, hi)` (implied by the validated CHECK and NOT NULL: no scan;
//!    its own validated foreign keys become the new parent's on it, also
//!    without a scan), hand serial sequences over, point dependent views at
//!    the new parent (`CREATE OR REPLACE VIEW` with the same definition),
//!    create the partitions from `hi` on.
//! 5. The policy is stored for `chute partition maintain`.
//!
//! # The split: shadow leaves, a sync trigger, one catalog-only cutover
//! A partition's bounds cannot shrink without a scan while it still holds the
//! rows, and rows may never be invisible through the parent (an update by
//! primary key would then miss them). So the old partition `O` keeps its
//! bounds and its rows until one final, short transaction. No transaction
//! holds more than a quarter of the server's lock table (see [`locks`]):
//! 1. Setup: a staging parent `T_chute_split` partitioned like `T`, then its
//!    standalone leaves, one per interval of `O`'s rows, a bounded batch per
//!    transaction, each with a validated `CHECK` of its bounds (instant on an
//!    empty table); then, in one short transaction, an `AFTER INSERT OR
//!    UPDATE OR DELETE` row trigger on `O` that deletes the old version by
//!    primary key from the staging parent and inserts the new one (planned
//!    afresh on each call, so it locks the one leaf it writes, not all of
//!    them). `CREATE TRIGGER` waits for writers in flight, so no change
//!    escapes it. A DEFAULT partition `T_pmin` of the staging parent takes
//!    the rows an application writes with a key before the oldest interval
//!    while the split runs (they still belong in `O`, whose range starts at
//!    MINVALUE), so such a write never fails for want of a leaf.
//! 2. Copy batches by heap block range (a TID range scan), each one
//!    transaction: `INSERT INTO staging SELECT * FROM O WHERE ctid in
//!    [a, b) FOR SHARE ON CONFLICT DO NOTHING`, with the progress row updated
//!    in the same transaction (a crash loses at most the batch, and
//!    re-copying is a no-op). Blocks, not keys: a batch stays about
//!    `--batch-rows` however many rows share a key. `FOR SHARE` makes a batch
//!    and an application update of the same row serialize: an update
//!    committed first is what the batch copies (or the trigger's row wins the
//!    conflict); an update after the batch goes through the trigger. Deletes
//!    are mirrored the same way. A batch holds its rows as long as it runs,
//!    so the engine sizes batches to a fraction of `lock_timeout` and to the
//!    lock budget, from what the last one took.
//! 3. Foreign keys: on each staging partition `NOT VALID` (no scan), then
//!    `VALIDATE` (writes continue), then on the staging parent, where each
//!    partition's own validated key is taken as the parent's.
//! 4. Cutover (one transaction under `lock_timeout`, retried): lock `T`,
//!    drop the trigger, detach `O`, attach the staging parent to `T` as one
//!    partition of its leaves' range (its leaves' CHECKs spare the scan),
//!    attach `T_pmin` for `[MINVALUE, oldest interval)` (a CHECK first: a
//!    scan of the rows written there during the split), so keys older than
//!    the history keep working, and drop `O` (or keep it, detached, with
//!    `--keep-old`). One ATTACH whatever the number of leaves: attached one
//!    by one, each ATTACH costs in proportion to the partitions already
//!    there, and 1,389 daily leaves held the lock 8 s.
//! 5. Flatten (short transactions, resumable): the staging parent's oldest
//!    leaves become partitions of `T`, a few per transaction (sized to hold
//!    the lock a fifth of `lock_timeout`, at most 200 ms), the staging
//!    parent re-attached for the rest, until it is empty and dropped.

pub mod inventory;
pub mod locks;
pub mod plan;
pub mod split;

use crate::ident::{IdentError, QualifiedName, check_length, quote_ident};
use crate::partman::Grants;

/// `LOCK TABLE … IN SHARE UPDATE EXCLUSIVE MODE` on `tables` (each quoted;
/// a partitioned table's partitions too), the first statement of a step
/// that then takes a lock writers wait for. This mode conflicts with
/// autovacuum, ANALYZE and other DDL, never with writers: waiting for it
/// holds up nobody, and the stronger lock that follows waits only for
/// writes in flight. Without it, a cutover that held the table queued
/// behind an autovacuum of one leaf until the server cancelled it (after
/// `deadlock_timeout`, a second), and every writer waited that long.
pub fn quiet_lock(tables: &[String]) -> String {
    format!("LOCK TABLE {} IN SHARE UPDATE EXCLUSIVE MODE", tables.join(", "))
}

/// The statements around a step's lock that writers wait for: the first
/// notes the time the lock is asked for (after [`quiet_lock`]), the second,
/// near the step's end, records in `longest_lock_ms` how long writers could
/// have waited on it since. A step that fails (a lock timeout) rolls both
/// back; the engine counts such an attempt itself.
pub fn lock_asked() -> String {
    "SELECT set_config('chute.lock_asked', clock_timestamp()::text, true)".to_owned()
}

/// See [`lock_asked`].
pub fn lock_held(table: &QualifiedName) -> String {
    format!(
        "UPDATE chute.migrations SET longest_lock_ms = greatest(longest_lock_ms, \
         (extract(epoch FROM clock_timestamp() - current_setting('chute.lock_asked')::timestamptz) * 1000)::int8) WHERE {}",
        plan::migration_filter(table)
    )
}

/// A foreign key of the table pointing at another table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForeignKey {
    pub name: String,
    /// `pg_get_constraintdef`, with every name schema-qualified:
    /// `FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE`.
    pub definition: String,
    pub validated: bool,
    /// The table it references, as `regclass` prints it (quoted where needed).
    pub referenced: String,
}

impl ForeignKey {
    /// Adds the key to `table` as it is (validated unless `not_valid`).
    pub fn add_sql(&self, table: &QualifiedName, not_valid: bool) -> String {
        let def = self.definition.trim_end_matches(" NOT VALID");
        format!(
            "ALTER TABLE {} ADD CONSTRAINT {} {def}{}",
            table.quoted(),
            quote_ident(&self.name),
            if not_valid { " NOT VALID" } else { "" }
        )
    }
}

/// A row-level security policy of the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RlsPolicy {
    pub name: String,
    pub permissive: bool,
    /// `ALL`, `SELECT`, `INSERT`, `UPDATE` or `DELETE`.
    pub command: String,
    /// Role names; `public` is PUBLIC.
    pub roles: Vec<String>,
    /// The `USING` and `WITH CHECK` expressions, as `pg_get_expr` prints them.
    pub using: Option<String>,
    pub check: Option<String>,
}

impl RlsPolicy {
    pub fn create_sql(&self, table: &QualifiedName) -> String {
        let roles =
            self.roles.iter().map(|r| if r == "public" { "PUBLIC".to_owned() } else { quote_ident(r) }).collect::<Vec<_>>().join(", ");
        let mut sql = format!(
            "CREATE POLICY {} ON {} AS {} FOR {} TO {roles}",
            quote_ident(&self.name),
            table.quoted(),
            if self.permissive { "PERMISSIVE" } else { "RESTRICTIVE" },
            self.command
        );
        if let Some(u) = &self.using {
            sql.push_str(&format!(" USING ({u})"));
        }
        if let Some(c) = &self.check {
            sql.push_str(&format!(" WITH CHECK ({c})"));
        }
        sql
    }
}

/// Row-level security on the table: whether it is on (and forced on the
/// owner too), and its policies.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RowSecurity {
    pub enabled: bool,
    pub forced: bool,
    pub policies: Vec<RlsPolicy>,
}

/// Everything the preconditions and planners need to know about the table
/// being migrated, as the engine reads it from the catalog.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    pub table: QualifiedName,
    /// `r`, `p`, …
    pub relkind: char,
    /// `p` permanent, `u` unlogged, `t` temporary.
    pub persistence: char,
    /// `format_type()` of the key column; `None` when it does not exist.
    pub key_type: Option<String>,
    pub key_not_null: bool,
    /// Columns of the primary key, in order.
    pub primary_key: Option<Vec<String>>,
    /// The primary key constraint's (and its index's) name.
    pub primary_key_name: Option<String>,
    /// Unique constraints and indexes other than the primary key: name and columns.
    pub unique: Vec<(String, Vec<String>)>,
    /// Indexes that are neither the primary key nor unique: their name and
    /// the part of `pg_get_indexdef` from `USING` on.
    pub plain_indexes: Vec<(String, String)>,
    /// Foreign keys of other tables that point here: "constraint on table".
    pub referencing_fks: Vec<String>,
    /// Foreign keys of this table that point at other tables: re-created on
    /// the new parent, so that none is lost with the old table.
    pub foreign_keys: Vec<ForeignKey>,
    /// CHECK constraints (name and definition): `LIKE … INCLUDING ALL`
    /// carries them to the new parent.
    pub checks: Vec<(String, String)>,
    pub row_security: RowSecurity,
    /// Views that select from the table: name and `pg_get_viewdef` text,
    /// recreated in the swap so they read the new parent.
    pub views: Vec<(String, String)>,
    pub matviews: Vec<String>,
    pub triggers: Vec<String>,
    pub publications: Vec<String>,
    /// Inheritance parents and children.
    pub inheritance: Vec<String>,
    /// Identity columns: carried over (the new parent's sequence continues
    /// from the old one's value in the swap).
    pub identity_columns: Vec<String>,
    /// Generated columns: carried by `LIKE … INCLUDING ALL`; the split never writes them.
    pub generated_columns: Vec<String>,
    pub owned_sequences: Vec<(QualifiedName, String)>,
    pub grants: Grants,
    pub comment: Option<String>,
    /// `d` default, `f` full, `i` index, `n` nothing.
    pub replica_identity: char,
}

/// One reason the table cannot be migrated yet, with what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Problem {
    pub what: String,
    pub fix: String,
}

/// The names a migration of `table` creates, checked against the 63-byte limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub table: QualifiedName,
    pub new_parent: QualifiedName,
    pub old: QualifiedName,
    pub pk_index: String,
    pub range_check: String,
    pub staging: QualifiedName,
    /// The staging parent's DEFAULT partition: rows whose key the
    /// application moves (or inserts) before the oldest interval while the
    /// split runs, which no staging leaf covers. The cutover attaches it to
    /// the table for `[MINVALUE, oldest interval)`, so that such keys keep
    /// working after the split as they did before it.
    pub early: QualifiedName,
    /// The same partition as a split set up by chute before it kept it.
    pub legacy_early: QualifiedName,
    pub sync_function: QualifiedName,
}

impl Names {
    pub fn new(table: &QualifiedName) -> Result<Names, IdentError> {
        let n = |suffix: &str| -> Result<String, IdentError> {
            let s = format!("{}_chute_{suffix}", table.name);
            check_length(&s)?;
            Ok(s)
        };
        Ok(Names {
            table: table.clone(),
            new_parent: table.with_name(n("new")?),
            old: table.with_name(n("old")?),
            pk_index: n("pk")?,
            range_check: n("range")?,
            staging: table.with_name(n("split")?),
            early: table.with_name({
                let s = format!("{}_pmin", table.name);
                check_length(&s)?;
                s
            }),
            legacy_early: table.with_name(n("early")?),
            sync_function: table.with_name(n("sync")?),
        })
    }

    /// The name the new parent's copy of the old table's index `name` has
    /// until the swap gives it `name` itself, so applications and tools that
    /// name an index or constraint keep working.
    pub fn new_index(&self, name: &str) -> String {
        index_name(name, "cn")
    }

    /// The name the old table's index `name` takes in the swap.
    pub fn old_index(&self, name: &str) -> String {
        index_name(name, "co")
    }
}

/// `name_tag`, or a hashed name of the same meaning when that would pass
/// PostgreSQL's 63-byte limit.
fn index_name(name: &str, tag: &str) -> String {
    let s = format!("{name}_{tag}");
    if check_length(&s).is_ok() {
        return s;
    }
    // FNV-1a: stable across runs and versions, so a re-run finds the same name.
    let hash = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3));
    format!("chute_{tag}_{hash:016x}")
}

/// What stands in the way of migrating `facts.table` on `key`.
pub fn check(facts: &Facts, key: &str, extend_primary_key: bool) -> Vec<Problem> {
    let t = facts.table.quoted();
    let k = crate::ident::quote_ident(key);
    let mut out = Vec::new();
    let mut p = |what: String, fix: String| out.push(Problem { what, fix });
    match facts.relkind {
        'r' => {}
        'p' => p(format!("{} is partitioned already", facts.table), "use chute partition create to adopt it".into()),
        c => p(format!("{} is not a plain table (relkind {c})", facts.table), "chute migrates plain tables only".into()),
    }
    match facts.persistence {
        'u' => p(
            format!("{} is UNLOGGED", facts.table),
            format!("make it logged first (ALTER TABLE {t} SET LOGGED, which rewrites it), or partition it by hand"),
        ),
        't' => p(format!("{} is a temporary table", facts.table), "temporary tables cannot be migrated; create a partitioned table".into()),
        _ => {}
    }
    match &facts.key_type {
        None => p(format!("{} has no column {key:?}", facts.table), "give the partition key column with --key".into()),
        Some(ty) if crate::partman::KeyType::from_sql(ty).is_none() => {
            p(format!("the key {key:?} is {ty}"), "chute partitions on timestamptz, timestamp, date, smallint, integer or bigint".into())
        }
        Some(_) if !facts.key_not_null => p(
            format!("the key {key:?} may be NULL"),
            format!(
                "without a long lock: ALTER TABLE {t} ADD CONSTRAINT {key}_not_null CHECK ({k} IS NOT NULL) NOT VALID; \
                 ALTER TABLE {t} VALIDATE CONSTRAINT {key}_not_null; ALTER TABLE {t} ALTER COLUMN {k} SET NOT NULL \
                 (no scan on PostgreSQL 12+ thanks to the constraint); ALTER TABLE {t} DROP CONSTRAINT {key}_not_null"
            ),
        ),
        Some(_) => {}
    }
    if let Some(pk) = &facts.primary_key
        && !pk.iter().any(|c| c == key)
        && !extend_primary_key
    {
        p(
            format!("the primary key ({}) does not include the partition key {key:?}, and a partitioned table's must", pk.join(", ")),
            format!(
                "run again with --extend-primary-key: chute builds a unique index on ({}, {key}) CONCURRENTLY before the swap and the new primary key is ({}, {key}); lookups by ({}) alone still work but no longer enforce uniqueness across partitions, so check your application",
                pk.join(", "),
                pk.join(", "),
                pk.join(", ")
            ),
        );
    }
    for (name, cols) in &facts.unique {
        if !cols.iter().any(|c| c == key) {
            p(
                format!("the unique constraint or index {name} on ({}) does not include {key:?}", cols.join(", ")),
                format!(
                    "drop it or replace it with one on ({}, {key}) (CREATE UNIQUE INDEX CONCURRENTLY), then run again",
                    cols.join(", ")
                ),
            );
        }
    }
    for fk in &facts.referencing_fks {
        p(
            format!("the foreign key {fk} points at {}", facts.table),
            "drop it (ALTER TABLE … DROP CONSTRAINT), migrate, then add it back against the new primary key with NOT VALID and VALIDATE it"
                .into(),
        );
    }
    for fk in facts.foreign_keys.iter().filter(|fk| !fk.validated) {
        p(
            format!("the foreign key {} of {} is NOT VALID ({})", fk.name, facts.table, fk.definition),
            format!(
                "validate it first: ALTER TABLE {t} VALIDATE CONSTRAINT {} (a scan that lets writes continue), or drop it; \
                 chute re-creates every foreign key on the partitioned table, where PostgreSQL 15 cannot add one NOT VALID",
                quote_ident(&fk.name)
            ),
        );
    }
    for v in &facts.matviews {
        p(format!("the materialized view {v} depends on {}", facts.table), "drop it, migrate, and create it again".into());
    }
    for tr in &facts.triggers {
        p(
            format!("the trigger {tr} is on {}", facts.table),
            "drop it, migrate, and create it again on the partitioned table (row triggers there fire for every partition)".into(),
        );
    }
    for pb in &facts.publications {
        p(
            format!("{} is in the publication {pb}", facts.table),
            format!(
                "remove it (ALTER PUBLICATION {pb} DROP TABLE {t}), migrate, and add the partitioned table back (publish_via_partition_root = true keeps subscribers unchanged)"
            ),
        );
    }
    for i in &facts.inheritance {
        p(
            format!("{} takes part in inheritance with {i}", facts.table),
            "detach it (ALTER TABLE … NO INHERIT) first: a partition cannot inherit".into(),
        );
    }
    if facts.primary_key.is_none() && !facts.unique.iter().any(|(_, cols)| cols.iter().any(|c| c == key)) {
        p(
            format!("{} has no primary key", facts.table),
            "the split keeps its copy in sync by primary key: add one (CREATE UNIQUE INDEX CONCURRENTLY, then ADD PRIMARY KEY USING INDEX)"
                .into(),
        );
    }
    out
}

/// The columns rows are identified by during the split: the primary key,
/// grown by the key when it lacks it.
pub fn identity_columns(facts: &Facts, key: &str) -> Vec<String> {
    let mut cols = facts.primary_key.clone().unwrap_or_default();
    if cols.is_empty()
        && let Some((_, u)) = facts.unique.iter().find(|(_, cols)| cols.iter().any(|c| c == key))
    {
        cols = u.clone();
    }
    if !cols.iter().any(|c| c == key) {
        cols.push(key.to_owned());
    }
    cols
}
