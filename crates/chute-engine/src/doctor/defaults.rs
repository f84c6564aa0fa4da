//! Reads the DEFAULT partitions that hold rows in partitioned tables chute
//! does not manage (pg_partman's, or made by hand), with what their fix
//! needs, for the rule in `chute_core::doctor::defaults`.

use chute_core::doctor::Finding;
use chute_core::doctor::defaults::{self as rules, DefaultRows, Keeper, Layout, Slots};
use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::partman::policy::KeyType;
use tokio_postgres::Client;

use super::{DoctorError, USER_SCHEMAS};

/// New ranges read for one table's fix at most (the doctor's next run gives
/// the rest).
const MAX_RANGES: usize = 1000;
/// Distinct values read for a LIST table's fix at most.
const MAX_VALUES: i64 = 1000;

/// A partitioned table with a DEFAULT partition, as the catalog has it.
struct Candidate {
    oid: u32,
    parent: QualifiedName,
    default: QualifiedName,
    strategy: String,
    /// The key column when the key is one plain column.
    column: Option<String>,
    column_type: Option<String>,
    partkey: String,
}

/// A finding per partitioned table (at any level of a tree) whose DEFAULT
/// partition holds rows, except chute's own tables (`managed`, reported
/// with their policy); only the trees of `tables` when given.
pub async fn unmanaged(client: &Client, managed: &[QualifiedName], tables: Option<&[u32]>) -> Result<Vec<Finding>, DoctorError> {
    let err = |what: &'static str| move |e| DoctorError::sql(what, e);
    let sql = format!(
        "SELECT pt.partrelid, n.nspname::text, c.relname::text, dn.nspname::text, d.relname::text, pt.partstrat::text,
                CASE WHEN pt.partnatts = 1 AND pt.partattrs[0] <> 0 THEN a.attname::text END,
                CASE WHEN pt.partnatts = 1 AND pt.partattrs[0] <> 0 THEN format_type(a.atttypid, NULL) END,
                pg_get_partkeydef(pt.partrelid)
         FROM pg_partitioned_table pt
         JOIN pg_class c ON c.oid = pt.partrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_class d ON d.oid = pt.partdefid JOIN pg_namespace dn ON dn.oid = d.relnamespace
         LEFT JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = pt.partattrs[0]
         WHERE pt.partdefid <> 0 AND {USER_SCHEMAS}
           AND ($1::oid[] IS NULL OR EXISTS (SELECT 1 FROM pg_partition_ancestors(pt.partrelid) x WHERE x.relid = ANY($1)))
         ORDER BY 2, 3"
    );
    let tables: Option<Vec<u32>> = tables.map(|t| t.to_vec());
    let rows = client.query(&sql, &[&tables]).await.map_err(err("reading pg_partitioned_table"))?;
    let candidates: Vec<Candidate> = rows
        .iter()
        .map(|r| Candidate {
            oid: r.get(0),
            parent: QualifiedName::new(r.get::<_, String>(1), r.get::<_, String>(2)),
            default: QualifiedName::new(r.get::<_, String>(3), r.get::<_, String>(4)),
            strategy: r.get(5),
            column: r.get(6),
            column_type: r.get(7),
            partkey: r.get(8),
        })
        .filter(|c| !managed.contains(&c.parent))
        .collect();
    if candidates.is_empty() {
        return Ok(vec![]);
    }
    let partman = partman_parents(client).await?;
    let zone: String = client.query_one("SELECT current_setting('TimeZone')", &[]).await.map_err(err("reading TimeZone"))?.get(0);
    let mut out = Vec::new();
    for c in candidates {
        let rows: i64 = client
            .query_one(&format!("SELECT count(*) FROM {}", c.default.quoted()), &[])
            .await
            .map_err(err("counting the rows of a DEFAULT partition"))?
            .get(0);
        if rows == 0 {
            continue;
        }
        let keeper = match partman.iter().find(|(_, oid, _)| *oid == c.oid) {
            Some((schema, _, parent)) => Keeper::Partman { schema: schema.clone(), parent: parent.clone() },
            None => Keeper::Hand,
        };
        let (layout, null_keys) = match keeper {
            Keeper::Hand => layout(client, &c, &zone).await?,
            Keeper::Partman { .. } => (Layout::Other { partkey: c.partkey.clone() }, 0),
        };
        let taken: Vec<String> = client
            .query(
                "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
                &[&c.parent.schema.clone().unwrap_or_default()],
            )
            .await
            .map_err(err("reading the names in a schema"))?
            .iter()
            .map(|r| r.get(0))
            .collect();
        let d = DefaultRows { parent: c.parent, default: c.default, rows, null_keys, keeper, layout, taken };
        out.push(rules::finding(&d).map_err(|e| DoctorError::Other(e.to_string()))?);
    }
    Ok(out)
}

/// The tables pg_partman keeps: the schema it is installed in, each
/// table's oid and its name as `part_config` has it (none when pg_partman
/// is not installed).
async fn partman_parents(client: &Client) -> Result<Vec<(String, u32, String)>, DoctorError> {
    let schema: Option<String> = client
        .query_opt("SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'pg_partman'", &[])
        .await
        .map_err(|e| DoctorError::sql("reading pg_extension", e))?
        .map(|r| r.get(0));
    let Some(schema) = schema else { return Ok(vec![]) };
    // regnamespace prints the schema quoted where it must be.
    let bare = schema.trim_matches('"').replace("\"\"", "\"");
    let rows = client
        .query(&format!("SELECT to_regclass(parent_table)::oid, parent_table FROM {}.part_config", quote_ident(&bare)), &[])
        .await
        .map_err(|e| DoctorError::sql("reading pg_partman's part_config", e))?;
    Ok(rows.iter().filter_map(|r| Some((bare.clone(), r.get::<_, Option<u32>>(0)?, r.get(1)))).collect())
}

/// How a hand-made table is partitioned, with the new partitions its
/// DEFAULT's rows need; and how many of those rows have a NULL range key.
async fn layout(client: &Client, c: &Candidate, zone: &str) -> Result<(Layout, i64), DoctorError> {
    let other = Layout::Other { partkey: c.partkey.clone() };
    let Some(key) = &c.column else { return Ok((other, 0)) };
    let q = quote_ident(key);
    let def = c.default.quoted();
    let err = |e| DoctorError::sql("reading the keys of a DEFAULT partition", e);
    if c.strategy == "l" {
        let rows = client
            .query(
                &format!("SELECT coalesce(quote_literal({q}), 'NULL') FROM (SELECT DISTINCT {q} FROM {def} ORDER BY 1 LIMIT $1) v"),
                &[&(MAX_VALUES + 1)],
            )
            .await
            .map_err(err)?;
        let mut values: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        let truncated = values.len() as i64 > MAX_VALUES;
        values.truncate(MAX_VALUES as usize);
        return Ok((Layout::List { key: key.clone(), values, truncated }, 0));
    }
    let Some(key_type) = c.column_type.as_deref().and_then(KeyType::from_sql).filter(|_| c.strategy == "r") else {
        return Ok((other, 0));
    };
    let as_i64 = |expr: &str| match key_type {
        KeyType::Int2 | KeyType::Int4 | KeyType::Int8 => format!("({expr})::int8"),
        _ => format!("(extract(epoch FROM {expr}) * 1000000)::int8"),
    };
    let partitions = range_partitions(client, c, key_type).await?;
    let r = client
        .query_one(
            &format!(
                "SELECT {}, {}, count(*) FILTER (WHERE {q} IS NULL) FROM {def}",
                as_i64(&format!("min({q})")),
                as_i64(&format!("max({q})"))
            ),
            &[],
        )
        .await
        .map_err(err)?;
    let (min, max, null_keys): (Option<i64>, Option<i64>, i64) = (r.get(0), r.get(1), r.get(2));
    let (Some(min), Some(max)) = (min, max) else {
        return Ok((
            Layout::Range { key: key.clone(), key_type, slots: rules::fallback_slots(key_type, 0, 0), ranges: vec![], truncated: false },
            null_keys,
        ));
    };
    let slots: Slots = rules::infer_slots(key_type, &partitions, zone).unwrap_or_else(|| rules::fallback_slots(key_type, min, max));
    // From the smallest key on, one query per range that holds rows.
    let mut ranges = Vec::new();
    let mut next = Some(min);
    while let Some(k) = next {
        let Some((from, to)) = rules::clipped(&slots, &partitions, k) else {
            return Ok((other, null_keys));
        };
        ranges.push((from, to));
        if ranges.len() >= MAX_RANGES || to == i64::MAX {
            break;
        }
        let after = key_type.literal(to).map_err(|e| DoctorError::Other(e.to_string()))?;
        next = client
            .query_one(&format!("SELECT {} FROM {def} WHERE {q} >= {after}", as_i64(&format!("min({q})"))), &[])
            .await
            .map_err(err)?
            .get(0);
    }
    let truncated = next.is_some() && ranges.len() >= MAX_RANGES;
    Ok((Layout::Range { key: key.clone(), key_type, slots, ranges, truncated }, null_keys))
}

/// The bounds of a RANGE table's partitions (MINVALUE and MAXVALUE as the
/// i64 extremes), sorted.
async fn range_partitions(client: &Client, c: &Candidate, key_type: KeyType) -> Result<Vec<(i64, i64)>, DoctorError> {
    let rows = client
        .query(
            "SELECT pg_get_expr(p.relpartbound, p.oid) FROM pg_inherits i JOIN pg_class p ON p.oid = i.inhrelid
             WHERE i.inhparent = $1",
            &[&c.oid],
        )
        .await
        .map_err(|e| DoctorError::sql("reading partition bounds", e))?;
    let mut literals = Vec::new();
    for r in rows {
        let bound: String = r.get(0);
        let Some((from, to)) =
            bound.strip_prefix("FOR VALUES FROM (").and_then(|s| s.strip_suffix(')')).and_then(|s| s.split_once(") TO ("))
        else {
            continue;
        };
        literals.extend([from.to_owned(), to.to_owned()]);
    }
    let values = crate::catalog::bound_values(client, key_type, &literals).await.map_err(|e| DoctorError::Other(e.to_string()))?;
    let mut out: Vec<(i64, i64)> = values.chunks(2).map(|p| (p[0], p[1])).collect();
    out.sort_unstable();
    Ok(out)
}
