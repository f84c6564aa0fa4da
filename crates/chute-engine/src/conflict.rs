//! A table's upsert, checked before any row moves, and the setting a table
//! keeps for it.
//!
//! An upsert needs a key the server enforces everywhere rows can land: a
//! unique index (or primary key) on exactly the conflict key, on the table
//! or, partitioned, on its parent (so on every leaf, including the ones
//! made later), holding every partition key column (a key without them is
//! unique only within each partition, so the same key could sit in two
//! leaves and never conflict). [`resolve`] reads that from the catalog,
//! fills in what was left to defaults (the key, the overwritten columns),
//! and refuses with the fix when it does not hold; [`check_with_server`]
//! then has the server plan the merge itself (`EXPLAIN`), which checks a
//! `--update-if` condition, the columns it names and the role's privileges,
//! before the first row is read.
//!
//! The setting (`chute partition create/set --on-conflict …`) lives in
//! `chute.partition_config.on_conflict` (schema version 9): `chute serve`
//! uses it for every write to the table, and `chute load` when it is given
//! no `--on-conflict` of its own.

use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::upsert::{Compare, ConflictAction, MergeSql, OnConflict, Source};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::catalog::{self, TableInfo};
use crate::error::SqlError;
use crate::setting::Setting;

#[derive(Debug, thiserror::Error)]
pub enum ConflictError {
    /// The upsert cannot work on this table as asked: what is wrong and the fix.
    #[error("{0}")]
    Refused(String),
    #[error(transparent)]
    Sql(#[from] SqlError),
}

impl ConflictError {
    fn sql(context: &str, e: tokio_postgres::Error) -> ConflictError {
        ConflictError::Sql(SqlError::new(context, e))
    }
}

impl crate::retry::Classify for ConflictError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            ConflictError::Sql(e) => crate::retry::Classify::fault(e),
            ConflictError::Refused(_) => crate::retry::Fault::Fatal,
        }
    }
}

/// An upsert made concrete for one table: its key and what an update does.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// `Nothing` or `Update`, with the key and the overwritten columns filled in.
    pub setting: OnConflict,
    /// `Update`: each overwritten column, and how its values are compared.
    pub update: Vec<(String, Compare)>,
    /// Where each key column is among the loaded columns.
    pub key_fields: Vec<usize>,
    /// Byte equality of the key's binary values is the server's equality
    /// (the client can then find repeated keys itself).
    pub exact: bool,
    /// The key's unique index is `NULLS NOT DISTINCT`.
    pub nulls_conflict: bool,
}

impl Resolved {
    pub fn key(&self) -> &[String] {
        self.setting.key.as_deref().unwrap_or_default()
    }

    /// The merge statements for these columns, reading from `stage` (qualified, quoted).
    pub fn merge_sql(&self, stage: &str, loaded: &[String]) -> MergeSql {
        MergeSql {
            action: self.setting.action,
            stage: stage.to_owned(),
            columns: loaded.iter().map(|c| quote_ident(c)).collect(),
            key: self.key().iter().map(|c| quote_ident(c)).collect(),
            update: self.update.iter().map(|(c, cmp)| (quote_ident(c), *cmp)).collect(),
            update_if: self.setting.update_if.clone(),
            nulls_conflict: self.nulls_conflict,
            key_exact: self.exact,
        }
    }
}

/// One unique index (or exclusion constraint) of a table or leaf.
#[derive(Debug, Clone)]
struct UniqueIndex {
    relation: String,
    root: bool,
    index: String,
    primary: bool,
    columns: Vec<String>,
    /// Usable as an arbiter of `ON CONFLICT (columns)`: plain columns, no
    /// predicate, valid, checked at once, not an exclusion constraint.
    arbiter: bool,
    /// `NULLS NOT DISTINCT` (PostgreSQL 15; false before).
    nulls_conflict: bool,
}

/// The table (or parent) and its leaves, each with its unique indexes.
async fn unique_indexes(client: &Client, oid: u32) -> Result<(Vec<String>, Vec<UniqueIndex>), ConflictError> {
    let rows = client
        .query(
            "WITH rels AS (
                 SELECT t.relid AS oid, t.level = 0 AS root FROM pg_partition_tree($1::oid::regclass) t WHERE t.isleaf OR t.level = 0
                 UNION ALL SELECT $1::oid, true WHERE NOT EXISTS (SELECT 1 FROM pg_partition_tree($1::oid::regclass)))
             SELECT r.oid::regclass::text, r.root, i.indexrelid::regclass::text, coalesce(i.indisprimary, false),
                    array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(n, o)
                          JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.n
                          WHERE k.o <= i.indnkeyatts ORDER BY k.o),
                    coalesce(i.indexprs IS NULL AND i.indpred IS NULL AND i.indisvalid AND i.indisready AND i.indimmediate
                             AND NOT i.indisexclusion AND i.indisunique, false),
                    i.indexrelid IS NOT NULL, coalesce((to_jsonb(i) ->> 'indnullsnotdistinct')::bool, false)
             FROM rels r LEFT JOIN pg_index i ON i.indrelid = r.oid AND (i.indisunique OR i.indisexclusion)
             ORDER BY r.root DESC, 1, 3",
            &[&oid],
        )
        .await
        .map_err(|e| ConflictError::sql("reading the unique indexes", e))?;
    let mut relations = Vec::new();
    let mut indexes = Vec::new();
    for r in rows {
        let relation: String = r.get(0);
        if !relations.contains(&relation) {
            relations.push(relation.clone());
        }
        if r.get::<_, bool>(6) {
            indexes.push(UniqueIndex {
                relation,
                root: r.get(1),
                index: r.get(2),
                primary: r.get(3),
                columns: r.get(4),
                arbiter: r.get(5),
                nulls_conflict: r.get(7),
            });
        }
    }
    Ok((relations, indexes))
}

/// The columns of every level's partition key (`None` for an expression).
async fn partition_columns(client: &Client, oid: u32) -> Result<Vec<Option<String>>, ConflictError> {
    let rows = client
        .query(
            "SELECT DISTINCT a.attname::text FROM pg_partition_tree($1::oid::regclass) t
             JOIN pg_partitioned_table p ON p.partrelid = t.relid CROSS JOIN unnest(p.partattrs::int2[]) k(n)
             LEFT JOIN pg_attribute a ON a.attrelid = p.partrelid AND a.attnum = k.n",
            &[&oid],
        )
        .await
        .map_err(|e| ConflictError::sql("reading the partition keys", e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

fn same_set(a: &[String], b: &[String]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

fn list(names: &[String]) -> String {
    names.join(", ")
}

/// Makes `want` concrete for `info`, whose loaded columns are `loaded`
/// (in COPY order), or refuses with the fix.
pub async fn resolve(client: &Client, info: &TableInfo, loaded: &[String], want: &OnConflict) -> Result<Resolved, ConflictError> {
    let table = &info.name;
    if want.action == ConflictAction::Error {
        return Err(ConflictError::Refused(format!("{} error is no upsert", Setting::OnConflict)));
    }
    if want.action == ConflictAction::Nothing && (want.update_columns.is_some() || want.update_if.is_some()) {
        let given = if want.update_if.is_some() { Setting::UpdateIf } else { Setting::UpdateColumns };
        return Err(ConflictError::Refused(format!(
            "{given} says what an update does, and {} keeps the row there: use {} with it, or leave it out",
            Setting::OnConflict.with("nothing"),
            Setting::OnConflict.with("update")
        )));
    }
    if info.relkind == 'f' {
        return Err(ConflictError::Refused(format!("{table} is a foreign table: chute does not upsert into foreign tables")));
    }
    let columns = catalog::columns(client, info.oid).await.map_err(|e| ConflictError::sql("reading the table's columns", e))?;
    let (relations, indexes) = unique_indexes(client, info.oid).await?;
    let key = conflict_key(table, want, &indexes)?;
    for k in &key {
        if !columns.iter().any(|c| &c.name == k) {
            return Err(ConflictError::Refused(format!(
                "{}: {table} has no column {k:?} (it has {})",
                Setting::ConflictKey,
                list(&columns.iter().map(|c| c.name.clone()).collect::<Vec<_>>())
            )));
        }
        if !loaded.contains(k) {
            return Err(ConflictError::Refused(format!(
                "the conflict key column {k:?} is not among the loaded columns: its value would come from its default, so no row would ever \
                 conflict; load it (add it to {}) or choose another key with {}",
                Setting::Columns,
                Setting::ConflictKey
            )));
        }
    }
    if info.relkind == 'p' {
        check_partition_key(table, &key, &partition_columns(client, info.oid).await?)?;
    }
    check_key_indexed(table, &key, &relations, &indexes)?;
    let update = if want.action == ConflictAction::Update {
        check_same_indexes(table, &relations, &indexes)?;
        update_columns(client, table, &columns, loaded, &key, want).await?
    } else {
        Vec::new()
    };
    let key_fields = key.iter().map(|k| loaded.iter().position(|c| c == k).expect("checked above")).collect();
    let exact = exact_key(client, info.oid, &columns, &key).await?;
    let nulls_conflict = indexes.iter().any(|i| i.arbiter && same_set(&i.columns, &key) && i.nulls_conflict);
    let setting = OnConflict {
        action: want.action,
        key: Some(key),
        update_columns: (want.action == ConflictAction::Update).then(|| update.iter().map(|(c, _)| c.clone()).collect()),
        update_if: want.update_if.clone().filter(|_| want.action == ConflictAction::Update),
        per_request: want.per_request,
    };
    Ok(Resolved { setting, update, key_fields, exact, nulls_conflict })
}

/// The key asked for, or the primary key, or the one unique index.
fn conflict_key(table: &QualifiedName, want: &OnConflict, indexes: &[UniqueIndex]) -> Result<Vec<String>, ConflictError> {
    if let Some(k) = &want.key {
        if k.is_empty() {
            return Err(ConflictError::Refused(format!("{} names no column", Setting::ConflictKey)));
        }
        return Ok(k.clone());
    }
    let root: Vec<&UniqueIndex> = indexes.iter().filter(|i| i.root && i.arbiter).collect();
    if let Some(pk) = root.iter().find(|i| i.primary) {
        return Ok(pk.columns.clone());
    }
    let shown = |is: &[&UniqueIndex]| is.iter().map(|i| format!("{} ({})", i.index, list(&i.columns))).collect::<Vec<_>>().join(", ");
    match root.as_slice() {
        [one] => Ok(one.columns.clone()),
        [] => Err(ConflictError::Refused(format!(
            "{table} has no primary key and no unique index, so no row can conflict with another: add one (ALTER TABLE {} ADD PRIMARY KEY (…), \
             with the partition key among its columns when it is partitioned), then run this again",
            table.quoted()
        ))),
        several => Err(ConflictError::Refused(format!(
            "{table} has no primary key and {} unique indexes ({}): name the one to use with {} COLUMNS",
            several.len(),
            shown(several),
            Setting::ConflictKey
        ))),
    }
}

/// A key without every partition key column is unique only within a partition.
fn check_partition_key(table: &QualifiedName, key: &[String], partition: &[Option<String>]) -> Result<(), ConflictError> {
    if partition.iter().any(Option::is_none) {
        return Err(ConflictError::Refused(format!(
            "{table} is partitioned on an expression, which no unique index can hold: chute cannot upsert into it"
        )));
    }
    let missing: Vec<String> = partition.iter().flatten().filter(|c| !key.contains(c)).cloned().collect();
    if missing.is_empty() {
        return Ok(());
    }
    let mut with: Vec<String> = key.to_vec();
    with.extend(missing.iter().cloned());
    Err(ConflictError::Refused(format!(
        "the conflict key ({}) lacks the partition key column{} {} of {table}: a key is unique only within one partition, so the same \
         key could be in two partitions and never conflict; use {} {} (with a unique index on those columns)",
        list(key),
        if missing.len() == 1 { "" } else { "s" },
        list(&missing),
        Setting::ConflictKey,
        with.join(",")
    )))
}

/// The key has a unique index on the table (the parent) and on every leaf.
fn check_key_indexed(table: &QualifiedName, key: &[String], relations: &[String], indexes: &[UniqueIndex]) -> Result<(), ConflictError> {
    let has = |rel: &str| indexes.iter().any(|i| i.relation == rel && i.arbiter && same_set(&i.columns, key));
    let root = relations.first().map(String::as_str).unwrap_or_default();
    let leaves_without: Vec<&String> = relations.iter().skip(1).filter(|r| !has(r)).collect();
    if has(root) && leaves_without.is_empty() {
        return Ok(());
    }
    let near: Vec<String> = indexes
        .iter()
        .filter(|i| i.relation == root && same_set(&i.columns, key) && !i.arbiter)
        .map(|i| format!("{} is partial, on expressions, deferrable, not valid, or an exclusion constraint", i.index))
        .collect();
    let whom = if !has(root) {
        format!("{table}{}", if relations.len() > 1 { " (the parent: leaves made later take their indexes from it)" } else { "" })
    } else {
        let shown: Vec<&str> = leaves_without.iter().take(3).map(|s| s.as_str()).collect();
        format!("{} of its partitions ({}{})", leaves_without.len(), shown.join(", "), if leaves_without.len() > 3 { ", …" } else { "" })
    };
    Err(ConflictError::Refused(format!(
        "the conflict key ({}) is not unique-indexed on {whom}{}: create the index on the parent, e.g. CREATE UNIQUE INDEX ON {} ({}), \
         or choose a key that is with {}",
        list(key),
        if near.is_empty() { String::new() } else { format!(" ({})", near.join("; ")) },
        table.quoted(),
        key.iter().map(|k| quote_ident(k)).collect::<Vec<_>>().join(", "),
        Setting::ConflictKey
    )))
}

/// `update`: every leaf has the same unique indexes (a leaf with one more
/// refuses rows the others update, so the same rows would end differently
/// depending on where they land).
fn check_same_indexes(table: &QualifiedName, relations: &[String], indexes: &[UniqueIndex]) -> Result<(), ConflictError> {
    let shape = |rel: &str| {
        let mut s: Vec<String> = indexes
            .iter()
            .filter(|i| i.relation == rel)
            .map(|i| {
                let mut c = i.columns.clone();
                c.sort();
                format!("({}){}", c.join(", "), if i.arbiter { "" } else { " (partial, on expressions or exclusion)" })
            })
            .collect();
        s.sort();
        s
    };
    let leaves: Vec<&String> = relations.iter().skip(1).collect();
    let Some(first) = leaves.first() else { return Ok(()) };
    let want = shape(first);
    for leaf in &leaves[1..] {
        let have = shape(leaf);
        if have != want {
            return Err(ConflictError::Refused(format!(
                "the partitions of {table} have different unique indexes ({first}: {}; {leaf}: {}), so an update would refuse a row in one \
                 partition that it updates in another: give every partition the same unique indexes (create them on the parent), or use {}",
                if want.is_empty() { "none".to_owned() } else { want.join(", ") },
                if have.is_empty() { "none".to_owned() } else { have.join(", ") },
                Setting::OnConflict.with("nothing")
            )));
        }
    }
    Ok(())
}

/// `update`: the overwritten columns (default: every loaded column not in
/// the key), each with whether its type has an equality.
async fn update_columns(
    client: &Client,
    table: &QualifiedName,
    columns: &[catalog::Column],
    loaded: &[String],
    key: &[String],
    want: &OnConflict,
) -> Result<Vec<(String, Compare)>, ConflictError> {
    let names: Vec<String> = match &want.update_columns {
        Some(given) => {
            for c in given {
                if key.contains(c) {
                    return Err(ConflictError::Refused(format!(
                        "{}: {c:?} is in the conflict key, which identifies the row and is never overwritten",
                        Setting::UpdateColumns
                    )));
                }
                if !loaded.contains(c) {
                    let why = if columns.iter().any(|t| &t.name == c) {
                        "is not among the loaded columns (its incoming value would be its default)"
                    } else {
                        "is not a column of the table"
                    };
                    return Err(ConflictError::Refused(format!("{}: {c:?} {why}", Setting::UpdateColumns)));
                }
            }
            given.clone()
        }
        None => loaded.iter().filter(|c| !key.contains(c)).cloned().collect(),
    };
    if names.is_empty() {
        return Err(ConflictError::Refused(format!(
            "every loaded column of {table} is in the conflict key ({}): an update would change nothing; use {}",
            list(key),
            Setting::OnConflict.with("nothing")
        )));
    }
    let mut out = Vec::with_capacity(names.len());
    for n in names {
        let column = columns.iter().find(|c| c.name == n).expect("a loaded column is a column");
        let ty = &column.type_name;
        let cmp = match column.type_oid {
            // Floats by their bits: -0 becomes +0, one NaN another (Prometheus's staleness marker).
            701 => Compare::Bits("float8send"),
            700 => Compare::Bits("float4send"),
            // A type without an equality (json, point, …) is compared as text.
            _ => match client.prepare(&format!("SELECT NULL::{ty} IS DISTINCT FROM NULL::{ty}")).await {
                Ok(_) => Compare::Eq,
                Err(e) if e.code().is_some_and(|c| c.code().starts_with("42")) => Compare::Text,
                Err(e) => return Err(ConflictError::sql("checking the column types", e)),
            },
        };
        out.push((n, cmp));
    }
    Ok(out)
}

/// Whether every key column's binary value is canonical: equal values have
/// equal bytes (integers, dates, timestamps, uuid, text under a
/// deterministic collation; no typmod that the server would apply).
async fn exact_key(client: &Client, oid: u32, columns: &[catalog::Column], key: &[String]) -> Result<bool, ConflictError> {
    const CANONICAL: &[u32] = &[16, 17, 18, 19, 20, 21, 23, 25, 26, 1043, 1082, 1083, 1114, 1184, 2950];
    let rows = client
        .query(
            "SELECT coalesce(bool_and(coalesce(co.collisdeterministic, true)), true) FROM pg_attribute a
             LEFT JOIN pg_collation co ON co.oid = a.attcollation WHERE a.attrelid = $1 AND a.attname = ANY ($2)",
            &[&oid, &key],
        )
        .await
        .map_err(|e| ConflictError::sql("reading the key's collations", e))?;
    let deterministic: bool = rows.first().is_some_and(|r| r.get(0));
    Ok(deterministic && key.iter().all(|k| columns.iter().any(|c| &c.name == k && c.typmod == -1 && CANONICAL.contains(&c.type_oid))))
}

/// Has the server plan the merge into `info` (and into `leaf`, a partition
/// rows go to directly) from a staging table like the one a load uses,
/// which checks `--update-if`, the columns and the role's privileges;
/// nothing is kept.
pub async fn check_with_server(
    client: &Client,
    info: &TableInfo,
    loaded: &[String],
    resolved: &Resolved,
    leaf: Option<&QualifiedName>,
) -> Result<(), ConflictError> {
    let temp: bool = client
        .query_one("SELECT has_database_privilege(current_database(), 'TEMP')", &[])
        .await
        .map_err(|e| ConflictError::sql("reading the role's privileges", e))?
        .get(0);
    if !temp {
        return Err(ConflictError::Refused(
            "an upsert stages rows in a temporary table, and this role may not create one: as the database's owner run \
             GRANT TEMP ON DATABASE <database> TO <role>"
                .into(),
        ));
    }
    let stage = "pg_temp.chute_stage_check";
    let cols = loaded.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
    let sql = resolved.merge_sql(stage, loaded);
    client
        .batch_execute(&format!(
            "BEGIN; CREATE TEMP TABLE chute_stage_check ON COMMIT DROP AS SELECT {cols} FROM ONLY {} WITH NO DATA",
            info.name.quoted()
        ))
        .await
        .map_err(|e| ConflictError::sql("making a staging table", e))?;
    let mut plans = vec![(info.name.quoted(), info.relkind != 'p')];
    if let Some(l) = leaf {
        plans.push((l.quoted(), true));
    }
    let mut result = Ok(());
    for (target, is_leaf) in plans {
        // One statement per message (the extended protocol): a condition cannot add statements of its own.
        // Both ways a load merges (`insert_new` while no writer races it).
        let fast = sql.insert_new(&target, Source::Stage);
        for statement in std::iter::once(sql.statement(&target, is_leaf, Source::Stage)).chain(fast) {
            if let Err(e) = client.query(&format!("EXPLAIN {statement}"), &[]).await {
                result = Err(refusal(&target, resolved, e));
                break;
            }
        }
        if result.is_err() {
            break;
        }
    }
    let _ = client.batch_execute("ROLLBACK").await;
    result
}

/// Why the server refused to plan the merge, with the fix.
fn refusal(target: &str, resolved: &Resolved, e: tokio_postgres::Error) -> ConflictError {
    if crate::retry::connection_lost(&e) {
        return ConflictError::sql("checking the upsert with the server", e);
    }
    let why = crate::error::describe(&e);
    if e.code() == Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
        let what = if resolved.setting.action == ConflictAction::Update { "INSERT, SELECT and UPDATE" } else { "INSERT and SELECT" };
        return ConflictError::Refused(format!(
            "the role may not upsert into {target} ({why}): an upsert needs {what} on it; grant them and run this again"
        ));
    }
    match &resolved.setting.update_if {
        Some(cond) => ConflictError::Refused(format!(
            "{} {cond:?} does not work: {why}. It is SQL over the row in the table (t) and the incoming one (excluded), e.g. excluded.updated_at > t.updated_at",
            Setting::UpdateIf
        )),
        None => ConflictError::Refused(format!("the server refuses the upsert into {target}: {why}")),
    }
}

/// The upsert setting of `table`, when it has one (`None` also when
/// chute's schema is older than version 9 or the table has no policy).
pub async fn table_setting(client: &Client, table: &QualifiedName) -> Result<Option<OnConflict>, ConflictError> {
    let version = crate::schema::version(client).await.map_err(|e| ConflictError::sql("reading chute.meta", e))?;
    if version.unwrap_or(0) < 9 {
        return Ok(None);
    }
    let row = client
        .query_opt(
            "SELECT on_conflict::text FROM chute.partition_config
             WHERE to_regclass(format('%I.%I', parent_schema, parent_table)) = to_regclass($1) AND on_conflict IS NOT NULL",
            &[&table.quoted()],
        )
        .await
        .map_err(|e| ConflictError::sql("reading chute.partition_config", e))?;
    match row {
        Some(r) => serde_json::from_str(r.get(0)).map(Some).map_err(|e| {
            ConflictError::Refused(format!("the upsert setting of {table} cannot be read ({e}): was it written by a newer chute?"))
        }),
        None => Ok(None),
    }
}

/// Makes `want` the upsert setting of `table` (`None` or `error`: clears
/// it), after checking it as a load of every column would be checked;
/// returns what is stored, with the key and the columns filled in.
pub async fn set_table_setting(
    client: &Client,
    table: &QualifiedName,
    want: Option<&OnConflict>,
) -> Result<Option<OnConflict>, ConflictError> {
    let info = catalog::table_info(client, table)
        .await
        .map_err(|e| ConflictError::Refused(format!("reading {table}: {e}")))?
        .ok_or_else(|| ConflictError::Refused(format!("table {table} does not exist")))?;
    let stored = match want.filter(|w| w.action != ConflictAction::Error) {
        Some(w) => {
            let columns = catalog::columns(client, info.oid).await.map_err(|e| ConflictError::sql("reading the table's columns", e))?;
            let loaded: Vec<String> = columns.iter().filter(|c| !c.generated).map(|c| c.name.clone()).collect();
            let resolved = resolve(client, &info, &loaded, w).await?;
            check_with_server(client, &info, &loaded, &resolved, None).await?;
            Some(resolved.setting)
        }
        None => None,
    };
    crate::schema::ensure(client).await.map_err(|e| ConflictError::Refused(e.to_string()))?;
    let json = stored.as_ref().map(|s| serde_json::to_string(s).expect("a setting serializes"));
    let n = client
        .execute(
            "UPDATE chute.partition_config SET on_conflict = $2::text::jsonb, updated_at = now()
             WHERE to_regclass(format('%I.%I', parent_schema, parent_table)) = $1::oid::regclass",
            &[&info.oid, &json],
        )
        .await
        .map_err(|e| ConflictError::sql("writing chute.partition_config", e))?;
    if n == 0 {
        return Err(ConflictError::Refused(format!(
            "{} has no partition policy, where chute keeps a table's settings: make one with chute partition create {} --key … --interval …",
            info.name, info.name
        )));
    }
    Ok(stored)
}
