//! Swapping a partition that exists, is empty and is about to receive a
//! load's rows (see `chute_core::partman::swap` for the statements): which
//! partitions may be swapped, what the catalog says about one, and the
//! locked step at the end of its backfill session.
//!
//! Nothing here locks the partition or its parent before the locked step:
//! the facts are read from the catalog alone, so a long fill holds up no
//! writer, no other backfill session and no partition manager.

use std::time::Duration;

use chute_core::ident::QualifiedName;
use chute_core::partman::Grants;
use chute_core::partman::swap::{SwapColumn, SwapFacts, SwapIndex, SwapPlan};
use tokio_postgres::{Client, GenericClient, Transaction};

use crate::retry::{self, Fault, Policy};

/// The partition a backfill session swaps.
#[derive(Debug, Clone)]
pub(crate) struct SwapTarget {
    pub leaf: QualifiedName,
    /// Its oid when it was chosen: the locked step checks the name still
    /// holds this table (another load may have swapped it meanwhile).
    pub oid: u32,
    /// The standalone table's name (in the partition's schema).
    pub table: String,
    /// Its bound and partition constraint, read when it was chosen (outside
    /// the session's transaction: the server locks the partition and its
    /// parent to read the constraint, and the session must hold no lock on
    /// them until its locked step).
    pub bound: String,
    pub partition_constraint: Option<String>,
    /// How long the locked step's LOCK waits before it gives way and tries again (`--lock-timeout`).
    pub lock_timeout: Duration,
    /// How long it keeps trying (`--retry-for`).
    pub retry_for: Duration,
}

impl SwapTarget {
    pub(crate) fn table_name(&self) -> QualifiedName {
        self.leaf.with_name(self.table.clone())
    }
}

/// What the load's settings say about a partition's age.
pub(crate) struct Age {
    /// The clock's now, in microseconds since the Unix epoch.
    pub now: i64,
    /// `--backfill-after`: `None` is one interval (the partition's width).
    pub after: Option<Duration>,
    /// `--backfill on`: any age.
    pub any: bool,
}

/// A partition chosen for a swap.
pub(crate) struct Chosen {
    pub oid: u32,
    /// The load's table's.
    pub root_oid: u32,
    pub bound: String,
    pub partition_constraint: Option<String>,
}

/// Why a partition is not swapped.
pub(crate) struct Refusal {
    pub why: String,
    /// What most loads meet (rows there already, the present's interval):
    /// not worth a line of `--backfill auto`'s summary.
    pub usual: bool,
}

impl Refusal {
    pub(crate) fn notable(why: impl Into<String>) -> Self {
        Refusal { why: why.into(), usual: false }
    }
}

/// How long `choose` waits for a lock before it leaves the partition to the
/// normal path: the load's coordinator waits for it meanwhile.
const CHOOSE_LOCK_TIMEOUT: &str = "1s";

/// Whether `leaf` (of the load's table `root`) may be swapped, or why it
/// takes the normal path. Reads the catalog and whether the partition
/// holds a row, in a short transaction that waits for no lock longer than
/// [`CHOOSE_LOCK_TIMEOUT`] (a partition someone else holds locked is not
/// swapped). It locks the table before the partition, as a swap does: the
/// server locks a partition while it shows its bound, and a partition and
/// then its parent while it shows its partition constraint.
pub(crate) async fn choose(
    client: &Client,
    leaf: &QualifiedName,
    root: &QualifiedName,
    age: &Age,
) -> Result<Result<Chosen, Refusal>, tokio_postgres::Error> {
    let chosen = async {
        client
            .batch_execute(&format!(
                "BEGIN; SET LOCAL lock_timeout = '{CHOOSE_LOCK_TIMEOUT}'; LOCK TABLE ONLY {} IN ACCESS SHARE MODE",
                root.quoted()
            ))
            .await?;
        read_choice(client, leaf, root, age).await
    }
    .await;
    let end = client.batch_execute(if chosen.is_ok() { "COMMIT" } else { "ROLLBACK" }).await;
    match chosen {
        Err(e) if retry::classify(&e) == Fault::LockWait => {
            end?;
            Ok(Err(Refusal::notable("another session holds a lock on it or its table")))
        }
        other => {
            let chosen = other?;
            end?;
            Ok(chosen)
        }
    }
}

async fn read_choice(
    client: &Client,
    leaf: &QualifiedName,
    root: &QualifiedName,
    age: &Age,
) -> Result<Result<Chosen, Refusal>, tokio_postgres::Error> {
    let row = client
        .query_opt(
            "WITH l AS (SELECT c.* FROM pg_class c WHERE c.oid = to_regclass($1)),
                  anc AS (SELECT relid FROM l, pg_partition_ancestors(l.oid))
             SELECT l.oid, l.relkind::text, pg_has_role(l.relowner, 'USAGE'), pg_has_role(p.relowner, 'USAGE'), l.relreplident::text,
                    EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'f' AND confrelid IN (SELECT relid FROM anc)),
                    EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'f' AND conrelid = l.oid),
                    EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'x' AND conrelid = l.oid),
                    EXISTS (SELECT 1 FROM pg_constraint WHERE contype = 'c' AND conrelid = l.oid AND NOT convalidated),
                    EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = l.oid AND NOT tgisinternal AND tgenabled <> 'D'
                                                       AND (tgtype & 4) = 4),
                    EXISTS (SELECT 1 FROM pg_publication WHERE puballtables)
                      OR EXISTS (SELECT 1 FROM pg_publication_rel WHERE prrelid IN (SELECT relid FROM anc))
                      OR EXISTS (SELECT 1 FROM pg_publication_namespace pn JOIN pg_class a ON a.relnamespace = pn.pnnspid
                                 WHERE a.oid IN (SELECT relid FROM anc)),
                    EXISTS (SELECT 1 FROM pg_depend d WHERE d.refobjid = l.oid AND d.classid = 'pg_rewrite'::regclass),
                    EXISTS (SELECT 1 FROM pg_depend d JOIN pg_class s ON s.oid = d.objid
                            WHERE d.classid = 'pg_class'::regclass AND d.refobjid = l.oid AND s.relkind = 'S'),
                    EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = l.oid AND attnum > 0 AND NOT attisdropped
                                                         AND (attacl IS NOT NULL OR attidentity <> '')),
                    EXISTS (SELECT 1 FROM pg_statistic_ext WHERE stxrelid = l.oid),
                    to_regclass($2)::oid, p.oid::regclass::text
             FROM l JOIN pg_inherits i ON i.inhrelid = l.oid JOIN pg_class p ON p.oid = i.inhparent",
            &[&leaf.quoted(), &root.quoted()],
        )
        .await?;
    let Some(r) = row else { return Ok(Err(Refusal::notable("it is no longer a partition"))) };
    let oid: u32 = r.get(0);
    let why = |i: usize, why: &str| r.get::<_, bool>(i).then(|| why.to_owned());
    let refusal = if r.get::<_, String>(1) != "r" {
        Some("it is not a plain table".to_owned())
    } else if !r.get::<_, bool>(2) || !r.get::<_, bool>(3) {
        Some("the loading role does not own it and its parent (a swap drops the one and alters the other)".to_owned())
    } else if r.get::<_, String>(4) != "d" {
        Some("it has a replica identity of its own".to_owned())
    } else {
        why(5, "a foreign key points at it or its parent")
            .or_else(|| why(6, "it has a foreign key, which each row must pass as it goes in"))
            .or_else(|| why(7, "it has an exclusion constraint"))
            .or_else(|| why(8, "it has a CHECK constraint marked NOT VALID"))
            // Row-level or statement-level: the successor is filled before its triggers exist, so neither would fire.
            .or_else(|| why(9, "an INSERT trigger on it must fire for these rows"))
            .or_else(|| why(10, "it is published for logical replication"))
            .or_else(|| why(11, "a view or rule depends on it"))
            .or_else(|| why(12, "a sequence belongs to one of its columns"))
            .or_else(|| why(13, "it has column privileges or an identity column"))
            .or_else(|| why(14, "it has extended statistics"))
    };
    if let Some(why) = refusal {
        return Ok(Err(Refusal::notable(why)));
    }
    // A partition of a partition: its parent is locked before it too.
    let parent: String = r.get(16);
    client.batch_execute(&format!("LOCK TABLE ONLY {parent} IN ACCESS SHARE MODE")).await?;
    let bound: String = client.query_one("SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = $1", &[&oid]).await?.get(0);
    if !age.any
        && let Some(why) = too_young(client, &bound, age).await?
    {
        return Ok(Err(Refusal { why, usual: true }));
    }
    let holds: bool = client.query_one(&format!("SELECT EXISTS (SELECT 1 FROM {})", leaf.quoted()), &[]).await?.get(0);
    if holds {
        return Ok(Err(Refusal { why: "it holds rows already".into(), usual: true }));
    }
    let partition_constraint = client.query_one("SELECT pg_get_partition_constraintdef($1)", &[&oid]).await?.get(0);
    Ok(Ok(Chosen { oid, root_oid: r.get(15), bound, partition_constraint }))
}

/// Why a partition is too recent for `--backfill auto`: its range must end
/// at least `--backfill-after` (one interval unless given) before now, so a
/// live stream into the current interval keeps the normal path.
async fn too_young(client: &Client, bound: &str, age: &Age) -> Result<Option<String>, tokio_postgres::Error> {
    let Some((lo, hi)) = range_literals(bound) else {
        return Ok(Some("its range is not one of times (--backfill on swaps it)".into()));
    };
    let now = jiff::Timestamp::from_microsecond(age.now).map(|t| t.to_string()).unwrap_or_default();
    let after = age.after.map(|d| format!("{} milliseconds", d.as_millis()));
    // Bounds that are not times fail the cast: under a savepoint, so the transaction goes on.
    client.batch_execute("SAVEPOINT chute_age").await?;
    let old = client
        .query_one(
            "SELECT $2::text::timestamptz <= $3::text::timestamptz - coalesce($4::text::interval, $2::text::timestamptz - $1::text::timestamptz)",
            &[&lo, &hi, &now, &after],
        )
        .await;
    client.batch_execute(if old.is_ok() { "RELEASE SAVEPOINT chute_age" } else { "ROLLBACK TO SAVEPOINT chute_age" }).await?;
    Ok(match old {
        Ok(r) if r.get::<_, bool>(0) => None,
        Ok(_) => Some(format!(
            "its range ends less than {} before now (rows may still arrive; --backfill on swaps it)",
            age.after.map_or("one interval".to_owned(), |d| format!("{d:?}"))
        )),
        Err(e) if e.as_db_error().is_some() => Some("its range is not one of times (--backfill on swaps it)".into()),
        Err(e) => return Err(e),
    })
}

/// The quoted literals of `FOR VALUES FROM ('…') TO ('…')` (one column).
fn range_literals(bound: &str) -> Option<(String, String)> {
    let rest = bound.strip_prefix("FOR VALUES FROM ('")?;
    let (lo, rest) = rest.split_once("') TO ('")?;
    let hi = rest.strip_suffix("')")?;
    if lo.contains('\'') || hi.contains('\'') {
        return None;
    }
    Some((lo.to_owned(), hi.to_owned()))
}

/// Reads what the swap needs to know of the partition, or why it cannot be
/// swapped after all. No lock is taken on it or on its parent.
pub(crate) async fn facts(c: &Transaction<'_>, t: &SwapTarget) -> Result<Result<SwapFacts, String>, tokio_postgres::Error> {
    let oid = t.oid;
    let r = c
        .query_opt(
            "SELECT c.relpersistence = 'u', ts.spcname, coalesce(c.reloptions, '{}')::text[], c.relrowsecurity, c.relforcerowsecurity,
                    obj_description(c.oid, 'pg_class'), NULL::text, NULL::text,
                    o.rolname::text, current_user::text, coalesce(c.relacl::text[], '{}'), pn.nspname::text, p.relname::text
             FROM pg_class c LEFT JOIN pg_tablespace ts ON ts.oid = c.reltablespace JOIN pg_roles o ON o.oid = c.relowner
                  JOIN pg_inherits i ON i.inhrelid = c.oid JOIN pg_class p ON p.oid = i.inhparent
                  JOIN pg_namespace pn ON pn.oid = p.relnamespace
             WHERE c.oid = $1",
            &[&oid],
        )
        .await?;
    // Gone (another load swapped it first, or it was dropped): not a lost connection, a refusal.
    let Some(r) = r else { return Ok(Err("it was replaced or dropped since it was chosen".into())) };
    let columns = columns(c, oid).await?;
    let checks = checks(c, oid).await?;
    let indexes = match indexes(c, oid).await? {
        Ok(i) => i,
        Err(why) => return Ok(Err(why)),
    };
    let leaf_sql = t.leaf.quoted();
    let policies = policies(c, oid, &leaf_sql).await?;
    let triggers = triggers(c, oid, &leaf_sql).await?;
    let default = default_partition(c, oid).await?;
    let key_columns = key_columns(c, oid).await?;
    Ok(Ok(SwapFacts {
        leaf: t.leaf.clone(),
        parent: QualifiedName::new(r.get::<_, String>(11), r.get::<_, String>(12)),
        default_partition: default,
        bound: t.bound.clone(),
        partition_constraint: t.partition_constraint.clone(),
        unlogged: r.get(0),
        tablespace: r.get(1),
        reloptions: r.get(2),
        columns,
        checks,
        indexes,
        grants: Grants { owner: r.get(8), current_user: r.get(9), acl: r.get(10) },
        row_security: r.get(3),
        force_row_security: r.get(4),
        policies,
        triggers,
        comment: r.get(5),
        key_columns,
    }))
}

/// The partition's columns as its swap successor must have them.
async fn columns(c: &Transaction<'_>, oid: u32) -> Result<Vec<SwapColumn>, tokio_postgres::Error> {
    let columns = c
        .query(
            "SELECT a.attname::text, format_type(a.atttypid, a.atttypmod),
                    CASE WHEN a.attcollation <> t.typcollation THEN
                      (SELECT quote_ident(n.nspname) || '.' || quote_ident(co.collname) FROM pg_collation co
                       JOIN pg_namespace n ON n.oid = co.collnamespace WHERE co.oid = a.attcollation) END,
                    a.attnotnull,
                    CASE WHEN a.attgenerated = '' THEN pg_get_expr(d.adbin, d.adrelid) END,
                    CASE WHEN a.attgenerated = 's' THEN pg_get_expr(d.adbin, d.adrelid) END,
                    CASE WHEN a.attstorage <> t.typstorage THEN a.attstorage::text END,
                    NULLIF(a.attcompression::text, ''), NULLIF(a.attstattarget, -1), col_description(a.attrelid, a.attnum)
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
                  LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| SwapColumn {
            name: r.get(0),
            type_sql: r.get(1),
            collation: r.get(2),
            not_null: r.get(3),
            default: r.get(4),
            generated: r.get(5),
            storage: r.get::<_, Option<String>>(6).and_then(|s| storage(&s)),
            compression: r.get::<_, Option<String>>(7).and_then(|s| compression(&s)),
            statistics: r.get::<_, Option<i32>>(8),
            comment: r.get(9),
        })
        .collect();
    Ok(columns)
}

/// The partition's CHECK constraints: (name, definition).
async fn checks(c: &Transaction<'_>, oid: u32) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let checks = c
        .query(
            "SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1 AND contype = 'c' ORDER BY conname",
            &[&oid],
        )
        .await?
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    Ok(checks)
}

/// The partition's valid indexes, or why one cannot be made again.
async fn indexes(c: &Transaction<'_>, oid: u32) -> Result<Result<Vec<SwapIndex>, String>, tokio_postgres::Error> {
    let mut indexes = Vec::new();
    for r in c
        .query(
            "SELECT ic.relname::text, pg_get_indexdef(i.indexrelid), i.indisunique,
                    (SELECT contype::text FROM pg_constraint k WHERE k.conindid = i.indexrelid AND k.conrelid = i.indrelid),
                    'CREATE ' || CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END || 'INDEX ' || quote_ident(ic.relname)
                      || ' ON ' || quote_ident(n.nspname) || '.' || quote_ident(t.relname) || ' USING '
             FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
                  JOIN pg_namespace n ON n.oid = t.relnamespace
             WHERE i.indrelid = $1 AND i.indisvalid ORDER BY i.indexrelid",
            &[&oid],
        )
        .await?
    {
        let (name, def, unique, kind, prefix): (String, String, bool, Option<String>, String) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        let Some(using) = def.strip_prefix(&prefix) else {
            return Ok(Err(format!("the definition of index {name} is not in the form chute reads ({def})")));
        };
        let constraint = match kind.as_deref() {
            None => None,
            Some("p") => Some("PRIMARY KEY"),
            Some("u") => Some("UNIQUE"),
            Some(k) => return Ok(Err(format!("index {name} backs a constraint of kind {k}"))),
        };
        indexes.push(SwapIndex { name, using: using.to_owned(), unique, constraint });
    }
    Ok(Ok(indexes))
}

/// The partition's row-level security policies, as statements on `leaf_sql`.
async fn policies(c: &Transaction<'_>, oid: u32, leaf_sql: &str) -> Result<Vec<String>, tokio_postgres::Error> {
    let policies = c
        .query(
            "SELECT format('CREATE POLICY %I ON %s AS %s FOR %s TO %s', polname, $2::text,
                           CASE WHEN polpermissive THEN 'PERMISSIVE' ELSE 'RESTRICTIVE' END,
                           CASE polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                           CASE WHEN polroles = '{0}' THEN 'PUBLIC'
                                ELSE (SELECT string_agg(quote_ident(rolname), ', ') FROM pg_roles WHERE oid = ANY (polroles)) END)
                    || coalesce(' USING (' || pg_get_expr(polqual, polrelid) || ')', '')
                    || coalesce(' WITH CHECK (' || pg_get_expr(polwithcheck, polrelid) || ')', '')
             FROM pg_policy WHERE polrelid = $1 ORDER BY polname",
            &[&oid, &leaf_sql],
        )
        .await?
        .iter()
        .map(|r| r.get(0))
        .collect();
    Ok(policies)
}

/// The partition's own triggers, as statements (a disabled one disabled again).
async fn triggers(c: &Transaction<'_>, oid: u32, leaf_sql: &str) -> Result<Vec<String>, tokio_postgres::Error> {
    let mut triggers = Vec::new();
    for r in c
        .query(
            "SELECT pg_get_triggerdef(oid), tgenabled = 'D', quote_ident(tgname) FROM pg_trigger
             WHERE tgrelid = $1 AND NOT tgisinternal AND tgparentid = 0 ORDER BY tgname",
            &[&oid],
        )
        .await?
    {
        triggers.push(r.get::<_, String>(0));
        if r.get::<_, bool>(1) {
            triggers.push(format!("ALTER TABLE {leaf_sql} DISABLE TRIGGER {}", r.get::<_, String>(2)));
        }
    }
    Ok(triggers)
}

/// The DEFAULT partition of the partition's parent, if it has one.
async fn default_partition(c: &Transaction<'_>, oid: u32) -> Result<Option<QualifiedName>, tokio_postgres::Error> {
    let default = c
        .query_opt(
            "SELECT n.nspname::text, d.relname::text FROM pg_inherits i JOIN pg_partitioned_table pt ON pt.partrelid = i.inhparent
             JOIN pg_class d ON d.oid = pt.partdefid JOIN pg_namespace n ON n.oid = d.relnamespace WHERE i.inhrelid = $1",
            &[&oid],
        )
        .await?
        .map(|r| QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1)));
    Ok(default)
}

/// The columns of the partition key of `leaf`'s parent, in key order
/// (expressions have none).
async fn key_columns(c: &Transaction<'_>, leaf: u32) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT a.attname::text FROM pg_inherits i JOIN pg_partitioned_table pt ON pt.partrelid = i.inhparent
             CROSS JOIN LATERAL unnest(pt.partattrs::int2[]) WITH ORDINALITY AS k(attnum, n)
             JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum
             WHERE i.inhrelid = $1 ORDER BY k.n",
            &[&leaf],
        )
        .await?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

fn storage(s: &str) -> Option<&'static str> {
    Some(match s {
        "p" => "PLAIN",
        "e" => "EXTERNAL",
        "m" => "MAIN",
        "x" => "EXTENDED",
        _ => return None,
    })
}

fn compression(s: &str) -> Option<&'static str> {
    Some(match s {
        "p" => "pglz",
        "l" => "lz4",
        _ => return None,
    })
}

/// How the locked step went.
pub(crate) enum Locked {
    /// The locks are held and the partition is the one the swap was planned for.
    Held,
    /// Why the swap cannot go on (the rows take the normal path).
    Refused(String),
}

/// Takes the locked step's locks, giving way after `--lock-timeout` (so no
/// writer waits behind it longer than that) and trying again until
/// `--retry-for`; then checks that the partition is still the table the
/// swap was planned for.
pub(crate) async fn lock(txn: &Transaction<'_>, plan: &SwapPlan, t: &SwapTarget) -> Result<Locked, tokio_postgres::Error> {
    // A deadlock with another session that holds a lock on the parent (a
    // backfill reading its definition) gives way as a lock wait does.
    let policy = Policy::lock_poll(t.retry_for);
    let locked = retry::run!(&policy, |_| async {
        txn.batch_execute(&format!("SAVEPOINT chute_swap; SET LOCAL lock_timeout = '{}ms'", t.lock_timeout.as_millis().max(1))).await?;
        let tried = txn.batch_execute(&plan.lock).await;
        if let Err(e) = &tried
            && policy.retries(retry::classify(e))
        {
            // Give way: the locks already granted go with the savepoint.
            txn.batch_execute("ROLLBACK TO SAVEPOINT chute_swap").await?;
        }
        tried
    });
    match locked {
        Ok(()) => {}
        Err(e) if policy.gave_up_on(&e) => {
            return Ok(Locked::Refused(format!(
                "its parent and it could not be locked within --lock-timeout {:?}, tried for --retry-for {:?}",
                t.lock_timeout, t.retry_for
            )));
        }
        Err(e) => return Err(e),
    }
    let same: bool = txn
        .query_one(
            "SELECT to_regclass($1) = $2::oid AND EXISTS (SELECT 1 FROM pg_inherits WHERE inhrelid = $2::oid)
                    AND (SELECT pg_get_expr(relpartbound, oid) FROM pg_class WHERE oid = $2::oid) = $3",
            &[&t.leaf.quoted(), &t.oid, &t.bound],
        )
        .await?
        .get(0);
    if !same {
        return Ok(Locked::Refused("it was replaced or detached while the load filled its successor".into()));
    }
    Ok(Locked::Held)
}

/// After a lost connection, for a load without a journal: whether the swap committed.
pub(crate) async fn landed(client: &impl GenericClient, t: &SwapTarget) -> Result<bool, tokio_postgres::Error> {
    let r = client.query_one("SELECT to_regclass($1) IS DISTINCT FROM $2::oid", &[&t.leaf.quoted(), &t.oid]).await?;
    Ok(r.get(0))
}

#[cfg(test)]
mod tests {
    use super::range_literals;

    #[test]
    fn a_single_column_range_bound_gives_its_literals() {
        assert_eq!(
            range_literals("FOR VALUES FROM ('2021-06-01 00:00:00+00') TO ('2021-06-01 01:00:00+00')"),
            Some(("2021-06-01 00:00:00+00".into(), "2021-06-01 01:00:00+00".into()))
        );
        assert_eq!(range_literals("FOR VALUES FROM (MINVALUE) TO ('2021-06-01')"), None);
        assert_eq!(range_literals("FOR VALUES FROM (1) TO (2)"), None);
        assert_eq!(range_literals("FOR VALUES FROM ('a', 1) TO ('b', 2)"), None);
        assert_eq!(range_literals("DEFAULT"), None);
    }
}
