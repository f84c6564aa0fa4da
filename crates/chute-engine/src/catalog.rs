//! Reading what the partition manager and the loader need from `pg_catalog`.
//!
//! The planners are pure, so everything they know about a table comes from a
//! snapshot read here: the table's kind, its partition key, every partition
//! with its bounds converted to key values, the DEFAULT partition and the
//! intervals its rows fall in, the newest key, owner and grants. Sessions
//! that read bounds use `DateStyle = ISO` and `TimeZone = UTC` so that
//! `pg_get_expr` prints literals the server reads back exactly.

use chute_core::ident::QualifiedName;
use chute_core::partman::{DefaultInfo, Grants, KeyType, PartitionInfo, Policy, Snapshot};
use tokio_postgres::Client;

#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error("table {0} does not exist (check the name and search_path, or create it with --columns/--like)")]
    NoTable(String),
    #[error("{table} has no column {column:?}")]
    NoColumn { table: String, column: String },
    #[error("reading the catalog: {}", crate::exec::describe(.0))]
    /// Not `#[source]`: `describe` already shows the server's message, which a
    /// printed error chain would repeat.
    Sql(tokio_postgres::Error),
    #[error("unexpected partition bound {bound:?} on {partition}")]
    Bound { partition: String, bound: String },
    #[error(transparent)]
    Interval(#[from] chute_core::partman::interval::IntervalError),
}

impl From<tokio_postgres::Error> for CatalogError {
    fn from(e: tokio_postgres::Error) -> Self {
        CatalogError::Sql(e)
    }
}

/// The relation a name resolves to.
#[derive(Debug, Clone)]
pub struct TableInfo {
    pub oid: u32,
    pub name: QualifiedName,
    /// `r` plain table, `p` partitioned table, `f` foreign table, …
    pub relkind: char,
    pub grants: Grants,
    pub row_security: bool,
    /// User triggers on the table (statement or row level).
    pub has_triggers: bool,
}

/// One live column of a table, as every part of chute reads it.
#[derive(Debug, Clone)]
pub struct Column {
    pub name: String,
    pub type_oid: u32,
    /// `format_type` with the typmod, e.g. `numeric(10,2)`.
    pub type_name: String,
    /// `pg_type.typname`, e.g. `timestamptz`.
    pub typname: String,
    /// `pg_type.typcategory`, e.g. `N` for numbers.
    pub category: char,
    /// `atttypmod` (`-1`: none).
    pub typmod: i32,
    pub not_null: bool,
    /// Has a default: an expression, an identity or a generated value.
    pub has_default: bool,
    /// `attidentity`: `a` (always), `d` (by default) or none.
    pub identity: Option<char>,
    /// A generated column (it cannot be written).
    pub generated: bool,
    /// Part of the table's partition key (as a plain column).
    pub partition_key: bool,
}

/// The live columns of the relation `oid`, in table order: the one place
/// chute reads `pg_attribute` for a table's columns.
pub async fn columns(client: &Client, oid: u32) -> Result<Vec<Column>, tokio_postgres::Error> {
    let rows = client
        .query(
            "SELECT a.attname::text, a.atttypid, format_type(a.atttypid, a.atttypmod), t.typname::text, t.typcategory::text,
                    a.atttypmod, a.attnotnull, (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''),
                    nullif(a.attidentity, '')::text, a.attgenerated <> '', coalesce(a.attnum = ANY (p.partattrs::int2[]), false)
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid
             LEFT JOIN pg_partitioned_table p ON p.partrelid = a.attrelid
             WHERE a.attrelid = $1 AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&oid],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Column {
            name: r.get(0),
            type_oid: r.get(1),
            type_name: r.get(2),
            typname: r.get(3),
            category: r.get::<_, String>(4).chars().next().unwrap_or('X'),
            typmod: r.get(5),
            not_null: r.get(6),
            has_default: r.get(7),
            identity: r.get::<_, Option<String>>(8).and_then(|s| s.chars().next()),
            generated: r.get(9),
            partition_key: r.get(10),
        })
        .collect())
}

/// The live columns of the relation a name resolves to (none when it does not exist).
pub async fn columns_of(client: &Client, name: &QualifiedName) -> Result<Vec<Column>, tokio_postgres::Error> {
    let oid: Option<u32> = client.query_one("SELECT to_regclass($1)::oid", &[&name.quoted()]).await?.get(0);
    match oid {
        Some(oid) => columns(client, oid).await,
        None => Ok(Vec::new()),
    }
}

/// Puts a maintenance session into a state whose output the catalog code can read.
pub async fn prepare_session(client: &Client) -> Result<(), tokio_postgres::Error> {
    client.batch_execute("SET DateStyle = 'ISO, YMD'; SET TimeZone = 'UTC'; SET IntervalStyle = 'postgres'").await
}

/// Resolves a name through search_path (when unqualified) to its relation.
pub async fn table_info(client: &Client, name: &QualifiedName) -> Result<Option<TableInfo>, CatalogError> {
    let row = client
        .query_opt(
            "SELECT c.oid, n.nspname::text, c.relname::text, c.relkind::text, pg_get_userbyid(c.relowner)::text, current_user::text,
                    coalesce(c.relacl::text[], '{}'), c.relrowsecurity,
                    EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.oid = to_regclass($1)",
            &[&name.quoted()],
        )
        .await?;
    Ok(row.map(|r| TableInfo {
        oid: r.get(0),
        name: QualifiedName::new(r.get::<_, String>(1), r.get::<_, String>(2)),
        relkind: r.get::<_, String>(3).chars().next().unwrap_or('?'),
        grants: Grants { owner: r.get(4), current_user: r.get(5), acl: r.get(6) },
        row_security: r.get(7),
        has_triggers: r.get(8),
    }))
}

pub async fn require_table(client: &Client, name: &QualifiedName) -> Result<TableInfo, CatalogError> {
    table_info(client, name).await?.ok_or_else(|| CatalogError::NoTable(name.to_string()))
}

/// `format_type()` of a column, e.g. `timestamp with time zone`.
pub async fn column_type(client: &Client, table: u32, column: &str) -> Result<Option<String>, CatalogError> {
    let row = client
        .query_opt(
            "SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = $1 AND attname = $2 AND attnum > 0 AND NOT attisdropped",
            &[&table, &column],
        )
        .await?;
    Ok(row.map(|r| r.get(0)))
}

/// The range key of a partitioned table: strategy (`r`, `h`, `l`) and key columns.
pub async fn partition_key(client: &Client, table: u32) -> Result<Option<(char, Vec<String>)>, CatalogError> {
    let row = client
        .query_opt(
            "SELECT pt.partstrat::text,
                    array(SELECT a.attname::text FROM unnest(pt.partattrs::int2[]) WITH ORDINALITY k(attnum, i)
                          JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum ORDER BY k.i)
             FROM pg_partitioned_table pt WHERE pt.partrelid = $1",
            &[&table],
        )
        .await?;
    Ok(row.map(|r| (r.get::<_, String>(0).chars().next().unwrap_or('?'), r.get(1))))
}

/// Sequences owned by the table's columns (serial columns), which a
/// rename-and-recreate must hand over.
pub async fn owned_sequences(client: &Client, table: u32) -> Result<Vec<(QualifiedName, String)>, CatalogError> {
    let rows = client
        .query(
            "SELECT n.nspname::text, s.relname::text, a.attname::text
             FROM pg_depend d JOIN pg_class s ON s.oid = d.objid AND s.relkind = 'S'
             JOIN pg_namespace n ON n.oid = s.relnamespace
             JOIN pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
             WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass AND d.refobjid = $1 AND d.deptype = 'a'",
            &[&table],
        )
        .await?;
    Ok(rows.into_iter().map(|r| (QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1)), r.get(2))).collect())
}

pub async fn has_rows(client: &Client, table: &QualifiedName) -> Result<bool, CatalogError> {
    Ok(client.query_one(&format!("SELECT EXISTS (SELECT 1 FROM {})", table.quoted()), &[]).await?.get(0))
}

/// A direct partition with its raw bound literals.
struct RawPartition {
    name: QualifiedName,
    detach_pending: bool,
    /// `None` for the DEFAULT partition.
    bounds: Option<(String, String)>,
}

async fn raw_partitions(client: &Client, parent: u32) -> Result<Vec<RawPartition>, CatalogError> {
    let rows = client
        .query(
            "SELECT n.nspname::text, c.relname::text, i.inhdetachpending, pg_get_expr(c.relpartbound, c.oid)
             FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE i.inhparent = $1",
            &[&parent],
        )
        .await?;
    let mut out = Vec::with_capacity(rows.len());
    for r in rows {
        let name = QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1));
        let bound: String = r.get(3);
        let bounds = if bound == "DEFAULT" {
            None
        } else {
            let inner = bound
                .strip_prefix("FOR VALUES FROM (")
                .and_then(|s| s.strip_suffix(')'))
                .and_then(|s| s.split_once(") TO ("))
                .ok_or_else(|| CatalogError::Bound { partition: name.to_string(), bound: bound.clone() })?;
            Some((inner.0.to_owned(), inner.1.to_owned()))
        };
        out.push(RawPartition { name, detach_pending: r.get(2), bounds });
    }
    Ok(out)
}

/// Converts bound literals to key values in one round trip (the server reads
/// its own literals back; MINVALUE/MAXVALUE become the i64 extremes).
pub(crate) async fn bound_values(client: &Client, key_type: KeyType, literals: &[String]) -> Result<Vec<i64>, CatalogError> {
    let unquoted: Vec<Option<String>> = literals
        .iter()
        .map(|l| match l.as_str() {
            "MINVALUE" | "MAXVALUE" => None,
            l => Some(l.trim_matches('\'').replace("''", "'")),
        })
        .collect();
    let conv = match key_type {
        KeyType::Timestamptz => "(extract(epoch FROM x::timestamptz) * 1000000)::int8",
        KeyType::Timestamp => "(extract(epoch FROM x::timestamp) * 1000000)::int8",
        KeyType::Date => "(extract(epoch FROM x::date) * 1000000)::int8",
        KeyType::Int2 | KeyType::Int4 | KeyType::Int8 => "x::int8",
    };
    let rows = client.query(&format!("SELECT {conv} FROM unnest($1::text[]) WITH ORDINALITY u(x, i) ORDER BY i"), &[&unquoted]).await?;
    Ok(rows
        .iter()
        .zip(literals)
        .map(|(r, lit)| match r.get::<_, Option<i64>>(0) {
            Some(v) => v,
            None if lit == "MINVALUE" => i64::MIN,
            None => i64::MAX,
        })
        .collect())
}

/// The SQL expression that turns the key column into the planner's i64.
pub fn key_as_i64(policy: &Policy, expr: &str) -> String {
    match policy.key_type {
        KeyType::Int2 | KeyType::Int4 | KeyType::Int8 => format!("({expr})::int8"),
        _ => format!("(extract(epoch FROM {expr}) * 1000000)::int8"),
    }
}

/// Everything the planners need about a partitioned table.
pub async fn snapshot(client: &Client, info: &TableInfo, policy: &Policy, now: i64) -> Result<Snapshot, CatalogError> {
    let raw = raw_partitions(client, info.oid).await?;
    let literals: Vec<String> = raw.iter().filter_map(|p| p.bounds.clone()).flat_map(|(a, b)| [a, b]).collect();
    let values = bound_values(client, policy.key_type, &literals).await?;
    let mut values = values.into_iter();
    let mut partitions = Vec::new();
    let mut default = None;
    for p in raw {
        match p.bounds {
            Some(_) => {
                let from = values.next().unwrap_or(i64::MIN);
                let to = values.next().unwrap_or(i64::MAX);
                partitions.push(PartitionInfo { name: p.name, from, to, detach_pending: p.detach_pending });
            }
            None => default = Some(p.name),
        }
    }
    partitions.sort_by_key(|p| p.from);
    let default = match default {
        Some(name) => Some(DefaultInfo { row_intervals: default_row_intervals(client, &name, policy).await?, name }),
        None => None,
    };
    let max_key = newest_key(client, policy, &partitions, default.as_ref(), now).await?;
    let remote = match policy.distribution {
        Some(_) => Some(remote_ddl(client, info.oid).await?),
        None => None,
    };
    Ok(Snapshot { partitions, default, max_key, grants: info.grants.clone(), remote })
}

/// The starts of the intervals that rows in the DEFAULT partition fall in,
/// found by skipping from one interval to the next (one indexed query per
/// interval that holds rows, not a scan of every row).
async fn default_row_intervals(client: &Client, default: &QualifiedName, policy: &Policy) -> Result<Vec<i64>, CatalogError> {
    let tz = policy.zone()?;
    let key = policy.key_sql();
    let min_sql = |from: Option<&str>| {
        let filter = from.map(|f| format!(" WHERE {key} >= {f}")).unwrap_or_default();
        format!("SELECT {} FROM {}{filter}", key_as_i64(policy, &format!("min({key})")), default.quoted())
    };
    let mut out = Vec::new();
    let mut next: Option<i64> = client.query_one(&min_sql(None), &[]).await?.get(0);
    while let Some(k) = next {
        let start = policy.interval.floor(k, &tz)?;
        let end = policy.interval.next(start, &tz)?;
        out.push(start);
        if out.len() >= 10_000 {
            break;
        }
        next = client.query_one(&min_sql(Some(&policy.key_type.literal(end)?)), &[]).await?.get(0);
    }
    Ok(out)
}

/// The newest key that matters for premake: for time keys only rows ahead
/// of now count, so only partitions reaching past now are read; for integer
/// keys, the newest non-empty partition. Reads from the top down and stops
/// at the first partition with rows.
async fn newest_key(
    client: &Client,
    policy: &Policy,
    partitions: &[PartitionInfo],
    default: Option<&DefaultInfo>,
    now: i64,
) -> Result<Option<i64>, CatalogError> {
    let key = policy.key_sql();
    let max_of = |t: &QualifiedName| format!("SELECT {} FROM {}", key_as_i64(policy, &format!("max({key})")), t.quoted());
    let mut best: Option<i64> = None;
    if let Some(d) = default {
        best = client.query_one(&max_of(&d.name), &[]).await?.get(0);
    }
    for p in partitions.iter().rev() {
        if policy.key_type.is_time() && p.to <= now {
            break;
        }
        if best.is_some_and(|b| b >= p.to) {
            break;
        }
        let v: Option<i64> = client.query_one(&max_of(&p.name), &[]).await?.get(0);
        if let Some(v) = v {
            best = Some(best.map_or(v, |b| b.max(v)));
            break;
        }
    }
    Ok(best)
}

/// Per-leaf figures for `partition status`: rows (estimate) and bytes,
/// summed over hash children.
pub async fn partition_sizes(client: &Client, parts: &[QualifiedName]) -> Result<Vec<(f64, i64)>, CatalogError> {
    let names: Vec<String> = parts.iter().map(|p| p.quoted()).collect();
    let rows = client
        .query(
            "SELECT coalesce(sum(greatest(c.reltuples, 0)), 0)::float8, coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8
             FROM unnest($1::text[]) WITH ORDINALITY u(name, i)
             LEFT JOIN LATERAL pg_partition_tree(u.name::regclass) t ON true
             LEFT JOIN pg_class c ON c.oid = t.relid AND t.isleaf
             GROUP BY u.i ORDER BY u.i",
            &[&names],
        )
        .await?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
}

impl crate::retry::Classify for crate::catalog::CatalogError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            crate::catalog::CatalogError::Sql(e) => crate::retry::classify(e),
            _ => crate::retry::Fault::Fatal,
        }
    }
}

/// What the tables behind a distributed table's foreign partitions are made
/// of: the parent's columns (with NOT NULL) and its indexes.
pub async fn remote_ddl(client: &Client, parent: u32) -> Result<chute_core::partman::RemoteDdl, tokio_postgres::Error> {
    let columns: String = client
        .query_one(
            "SELECT string_agg(quote_ident(attname) || ' ' || format_type(atttypid, atttypmod) || CASE WHEN attnotnull THEN ' NOT NULL' ELSE '' END, ', ' ORDER BY attnum)
             FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped",
            &[&parent],
        )
        .await?
        .get(0);
    let rows = client
        .query("SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = $1 AND NOT indisunique ORDER BY indexrelid", &[&parent])
        .await?;
    let indexes = rows
        .iter()
        .filter_map(|r| {
            let def: String = r.get(0);
            def.find(" USING ").map(|i| def[i + 1..].to_owned())
        })
        .collect();
    Ok(chute_core::partman::RemoteDdl { columns, indexes })
}
