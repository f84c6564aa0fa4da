//! Reading a partitioned table's whole layout from the catalog into a
//! [`PartitionTree`], the loader's client-side router.
//!
//! The router must know every level exactly as the server does: each
//! partitioned table's key (`pg_partitioned_table`: strategy, key columns,
//! operator classes, collations), its partitions (`pg_inherits`) and their
//! bounds. Bounds are read as the server prints them (`pg_get_expr`), split
//! into literals by [`chute_core::route::bound_text`], and handed back to the
//! server to be cast to the key column's type and returned in binary, so the
//! router compares wire bytes with wire bytes and no client-side parser of
//! dates, floats or numerics can disagree with the server's.
//!
//! Partitions whose detach is pending (`pg_inherits.inhdetachpending`, left
//! by an interrupted `DETACH … CONCURRENTLY`) are skipped: PostgreSQL 15 no
//! longer routes rows to them in READ COMMITTED transactions, which is how the
//! loader writes. (A REPEATABLE READ transaction would still see them.)

use std::collections::HashMap;
use std::error::Error;

use chute_core::ident::QualifiedName;
use chute_core::route::bound_text::{BoundText, BoundTextError, Literal, parse_bound};
use chute_core::route::{
    BoundSpec, KeyCollation, KeyColumnSpec, PartitionKind, PartitionSpec, PartitionTree, RangeDatum, RouteError, Strategy, TableSpec,
    check_key,
};
use tokio_postgres::Client;
use tokio_postgres::types::{FromSql, Type};

use crate::catalog::{self, CatalogError};

#[derive(Debug, thiserror::Error)]
pub enum LayoutError {
    #[error("table {0} does not exist (check the name and search_path)")]
    NoTable(String),
    #[error("{0} is not a partitioned table")]
    NotPartitioned(QualifiedName),
    #[error("reading the partition layout: {}", crate::exec::describe(.0))]
    /// Not `#[source]`: `describe` already shows the server's message, which a
    /// printed error chain would repeat.
    Sql(tokio_postgres::Error),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error("partition {partition}: {source}")]
    Bound { partition: QualifiedName, source: BoundTextError },
    #[error("{table}: key column {column:?} is not a column of the root table {root}")]
    Column { table: QualifiedName, column: String, root: QualifiedName },
    #[error(transparent)]
    Route(#[from] RouteError),
}

impl From<tokio_postgres::Error> for LayoutError {
    fn from(e: tokio_postgres::Error) -> Self {
        LayoutError::Sql(e)
    }
}

/// One value's binary wire bytes, whatever its type: what binary COPY carries
/// and what the type's send function returns. Read it as `Option<WireValue>`
/// when the value may be NULL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireValue(pub Vec<u8>);

impl<'a> FromSql<'a> for WireValue {
    fn from_sql(_ty: &Type, raw: &'a [u8]) -> Result<WireValue, Box<dyn Error + Sync + Send>> {
        Ok(WireValue(raw.to_vec()))
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }
}

/// Settings that change how `pg_get_expr` prints bound literals. They are set
/// for the read (ISO dates, UTC, shortest-exact floats, backslashes as plain
/// characters) and put back afterwards, so the caller's session is unchanged.
const PRINT_SETTINGS: [&str; 5] = ["DateStyle", "TimeZone", "IntervalStyle", "extra_float_digits", "standard_conforming_strings"];

/// Reads the layout of the partitioned table `root` (resolved through
/// search_path when unqualified) and builds its router.
///
/// Fails with [`LayoutError::Route`] holding [`RouteError::Unsupported`] when
/// some level's rows can only be routed by the server (the error names the
/// table and the reason); the loader then sends rows through the parent.
/// The session's print settings are changed for the duration of the call and
/// restored before it returns.
///
/// The root's own partition bound, if it is itself a partition, is not
/// checked: the server rejects rows outside it with its own 23514.
pub async fn load_partition_tree(client: &Client, root: &QualifiedName) -> Result<PartitionTree, LayoutError> {
    let saved: Vec<String> = {
        let row = client
            .query_one(
                "SELECT current_setting('DateStyle'), current_setting('TimeZone'), current_setting('IntervalStyle'),
                        current_setting('extra_float_digits'), current_setting('standard_conforming_strings')",
                &[],
            )
            .await?;
        (0..PRINT_SETTINGS.len()).map(|i| row.get(i)).collect()
    };
    let result = read_with_print_settings(client, root).await;
    let names: Vec<&str> = PRINT_SETTINGS.to_vec();
    let restored = client.execute("SELECT set_config(n, v, false) FROM unnest($1::text[], $2::text[]) AS s(n, v)", &[&names, &saved]).await;
    let tree = result?;
    restored?;
    Ok(tree)
}

async fn read_with_print_settings(client: &Client, root: &QualifiedName) -> Result<PartitionTree, LayoutError> {
    catalog::prepare_session(client).await?;
    client.batch_execute("SET extra_float_digits = 3; SET standard_conforming_strings = on").await?;
    read_tree(client, root).await
}

/// One relation of the tree, as `pg_inherits` and `pg_class` describe it.
struct Relation {
    oid: u32,
    parent: u32,
    name: QualifiedName,
    relkind: char,
    /// `pg_get_expr(relpartbound)`; `None` for the root.
    bound: Option<String>,
}

/// A partitioned table's key, read from `pg_partitioned_table`.
struct Key {
    strategy: Strategy,
    columns: Vec<KeyColumnSpec>,
    /// The type each column's bound literals are cast to: the schema-qualified
    /// type name without a typmod (`format_type` would say `character`, which
    /// as a cast means `char(1)`). Bounds are stored with the typmod applied.
    cast_types: Vec<String>,
}

async fn read_tree(client: &Client, root: &QualifiedName) -> Result<PartitionTree, LayoutError> {
    let info = catalog::table_info(client, root).await?.ok_or_else(|| LayoutError::NoTable(root.to_string()))?;
    if info.relkind != 'p' {
        return Err(LayoutError::NotPartitioned(info.name));
    }
    let positions = root_positions(client, info.oid).await?;
    let relations = relations(client, info.oid).await?;
    let partitioned: Vec<u32> = relations.iter().filter(|r| r.relkind == 'p').map(|r| r.oid).collect();
    let names: HashMap<u32, &QualifiedName> = relations.iter().map(|r| (r.oid, &r.name)).collect();
    let keys = keys(client, &partitioned, &names, &positions, &info.name).await?;
    // Refuse unsupported keys before asking the server to cast any bound.
    for oid in &partitioned {
        let key = &keys[oid];
        check_key(names[oid], key.strategy, &key.columns)?;
    }
    let mut children: HashMap<u32, Vec<&Relation>> = HashMap::new();
    for r in relations.iter().skip(1) {
        children.entry(r.parent).or_default().push(r);
    }
    let mut literals = Literals::default();
    let mut parsed = HashMap::new();
    for r in relations.iter().skip(1) {
        let text = r.bound.as_deref().unwrap_or_default();
        let bound = parse_bound(text).map_err(|source| LayoutError::Bound { partition: r.name.clone(), source })?;
        let pending = literals
            .collect(bound, &keys[&r.parent].cast_types)
            .map_err(|reason| LayoutError::Bound { partition: r.name.clone(), source: BoundTextError { text: text.to_owned(), reason } })?;
        parsed.insert(r.oid, pending);
    }
    let wire = literals.cast(client).await?;
    let spec = table_spec(&relations[0], &keys, &children, &parsed, &wire);
    Ok(PartitionTree::build(&spec)?)
}

/// Column name → position among the root's live columns in attnum order.
async fn root_positions(client: &Client, root: u32) -> Result<HashMap<String, usize>, LayoutError> {
    let columns = crate::catalog::columns(client, root).await?;
    Ok(columns.into_iter().enumerate().map(|(i, c)| (c.name, i)).collect())
}

/// The root and every partition below it, the root first.
async fn relations(client: &Client, root: u32) -> Result<Vec<Relation>, LayoutError> {
    let rows = client
        .query(
            "WITH RECURSIVE tree(oid, parent, depth) AS (
                 SELECT $1::oid, 0::oid, 0
                 UNION ALL
                 SELECT i.inhrelid, i.inhparent, t.depth + 1
                 FROM pg_inherits i JOIN tree t ON i.inhparent = t.oid
                 WHERE NOT i.inhdetachpending
             )
             SELECT t.oid, t.parent, n.nspname::text, c.relname::text, c.relkind::text,
                    CASE WHEN t.depth > 0 THEN pg_get_expr(c.relpartbound, c.oid) END
             FROM tree t JOIN pg_class c ON c.oid = t.oid JOIN pg_namespace n ON n.oid = c.relnamespace
             ORDER BY t.depth, n.nspname, c.relname",
            &[&root],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Relation {
            oid: r.get(0),
            parent: r.get(1),
            name: QualifiedName::new(r.get::<_, String>(2), r.get::<_, String>(3)),
            relkind: r.get::<_, String>(4).chars().next().unwrap_or('?'),
            bound: r.get(5),
        })
        .collect())
}

/// The key of every partitioned table in `oids`, its columns mapped to root positions by name.
async fn keys(
    client: &Client,
    oids: &[u32],
    names: &HashMap<u32, &QualifiedName>,
    positions: &HashMap<String, usize>,
    root: &QualifiedName,
) -> Result<HashMap<u32, Key>, LayoutError> {
    let rows = client
        .query(
            "SELECT pt.partrelid, pt.partstrat::text, k.attnum::int4, a.attname::text, coalesce(a.atttypid, 0::oid),
                    coalesce(format_type(a.atttypid, a.atttypmod), 'expression'), coalesce((SELECT quote_ident(tn.nspname) || '.' || quote_ident(t.typname) FROM pg_type t JOIN pg_namespace tn ON tn.oid = t.typnamespace WHERE t.oid = a.atttypid), ''),
                    k.coll, co.collname::text, co.collprovider::text, co.collcollate::text, coalesce(co.collisdeterministic, true),
                    db.datlocprovider::text, db.datcollate::text,
                    oc.opcname::text,
                    EXISTS (SELECT 1 FROM pg_opclass d
                            WHERE d.opcmethod = oc.opcmethod AND d.opcintype = oc.opcintype AND d.opcdefault AND d.opcfamily = oc.opcfamily),
                    pg_get_expr(pt.partexprs, pt.partrelid)
             FROM pg_partitioned_table pt
             CROSS JOIN LATERAL unnest(pt.partattrs::int2[], pt.partclass::oid[], pt.partcollation::oid[])
                 WITH ORDINALITY AS k(attnum, opclass, coll, i)
             JOIN pg_opclass oc ON oc.oid = k.opclass
             LEFT JOIN pg_attribute a ON a.attrelid = pt.partrelid AND a.attnum = k.attnum AND k.attnum > 0
             LEFT JOIN pg_collation co ON co.oid = k.coll
             CROSS JOIN (SELECT datlocprovider,
                                CASE WHEN datlocprovider = 'i' THEN daticulocale ELSE datcollate END AS datcollate
                         FROM pg_database WHERE datname = current_database()) AS db
             WHERE pt.partrelid = ANY($1)
             ORDER BY pt.partrelid, k.i",
            &[&oids],
        )
        .await?;
    let mut keys: HashMap<u32, Key> = HashMap::new();
    for r in rows {
        let oid: u32 = r.get(0);
        let table = names[&oid];
        let strategy_code = r.get::<_, String>(1).chars().next().unwrap_or('?');
        let strategy = Strategy::from_catalog(strategy_code).ok_or_else(|| RouteError::Unsupported {
            table: table.clone(),
            reason: format!("unknown partitioning strategy {strategy_code:?}"),
        })?;
        let attnum: i32 = r.get(2);
        let (name, position) = if attnum == 0 {
            (r.get::<_, Option<String>>(16).unwrap_or_else(|| "an expression".into()), None)
        } else {
            let name: String = r.get(3);
            let position = *positions.get(&name).ok_or_else(|| LayoutError::Column {
                table: table.clone(),
                column: name.clone(),
                root: root.clone(),
            })?;
            (name, Some(position))
        };
        let collation = collation(r.get(7), r.get(8), r.get(9), r.get(10), r.get(11), r.get(12), r.get(13));
        let column = KeyColumnSpec {
            name,
            position,
            type_oid: r.get(4),
            type_name: r.get(5),
            collation,
            opclass: r.get(14),
            default_opclass: r.get(15),
        };
        let key = keys.entry(oid).or_insert_with(|| Key { strategy, columns: Vec::new(), cast_types: Vec::new() });
        key.columns.push(column);
        key.cast_types.push(r.get(6));
    }
    Ok(keys)
}

/// What a key column's collation means for routing. The default collation
/// (oid 100) is the database's: byte-wise only under libc `C` or `POSIX`, as
/// `lc_collate_is_c` decides (an ICU default never is; its locale is named in messages).
fn collation(
    oid: u32,
    name: Option<String>,
    provider: Option<String>,
    collcollate: Option<String>,
    deterministic: bool,
    db_provider: String,
    db_collate: String,
) -> KeyCollation {
    const DEFAULT_COLLATION_OID: u32 = 100;
    let byte_wise = |provider: &str, collate: &str| provider == "c" && matches!(collate, "C" | "POSIX");
    let name = name.unwrap_or_else(|| oid.to_string());
    if oid == 0 {
        KeyCollation::None
    } else if oid == DEFAULT_COLLATION_OID {
        if byte_wise(&db_provider, &db_collate) {
            KeyCollation::C(name)
        } else {
            KeyCollation::Deterministic(format!("{name} ({db_collate})"))
        }
    } else if byte_wise(provider.as_deref().unwrap_or_default(), collcollate.as_deref().unwrap_or_default()) {
        KeyCollation::C(name)
    } else if deterministic {
        KeyCollation::Deterministic(name)
    } else {
        KeyCollation::Nondeterministic(name)
    }
}

/// Bound literals waiting to be cast, grouped by target type so that every
/// type takes one round trip.
#[derive(Default)]
struct Literals {
    by_type: Vec<(String, Vec<String>)>,
}

/// A literal's place in [`Literals`]: (type group, index).
type Slot = (usize, usize);

/// A bound with its values replaced by slots.
enum PendingBound {
    Default,
    Range { from: Vec<PendingDatum>, to: Vec<PendingDatum> },
    List(Vec<Option<Slot>>),
    Hash { modulus: u64, remainder: u64 },
}

enum PendingDatum {
    Min,
    Value(Slot),
    Max,
}

impl Literals {
    fn add(&mut self, cast_type: &str, literal: String) -> Slot {
        let group = match self.by_type.iter().position(|(t, _)| t == cast_type) {
            Some(g) => g,
            None => {
                self.by_type.push((cast_type.to_owned(), Vec::new()));
                self.by_type.len() - 1
            }
        };
        let values = &mut self.by_type[group].1;
        values.push(literal);
        (group, values.len() - 1)
    }

    /// Queues the bound's values to be cast to their key column's type.
    fn collect(&mut self, bound: BoundText, cast_types: &[String]) -> Result<PendingBound, &'static str> {
        let column_type = |i: usize| cast_types.get(i).map(String::as_str).ok_or("more values than key columns");
        let mut range = |literals: Vec<Literal>| -> Result<Vec<PendingDatum>, &'static str> {
            literals
                .into_iter()
                .enumerate()
                .map(|(i, l)| match l {
                    Literal::MinValue => Ok(PendingDatum::Min),
                    Literal::MaxValue => Ok(PendingDatum::Max),
                    Literal::Null => Err("NULL in a range bound"),
                    Literal::Value(v) => Ok(PendingDatum::Value(self.add(column_type(i)?, v))),
                })
                .collect()
        };
        Ok(match bound {
            BoundText::Default => PendingBound::Default,
            BoundText::Range { from, to } => {
                let from = range(from)?;
                PendingBound::Range { from, to: range(to)? }
            }
            BoundText::List(values) => PendingBound::List(
                values
                    .into_iter()
                    .map(|l| match l {
                        Literal::Value(v) => Ok(Some(self.add(column_type(0)?, v))),
                        Literal::Null => Ok(None),
                        Literal::MinValue | Literal::MaxValue => Err("MINVALUE or MAXVALUE in a list"),
                    })
                    .collect::<Result<_, _>>()?,
            ),
            BoundText::Hash { modulus, remainder } => PendingBound::Hash { modulus, remainder },
        })
    }

    /// Has the server cast every literal to its type and send it back in binary.
    async fn cast(&self, client: &Client) -> Result<Vec<Vec<Vec<u8>>>, LayoutError> {
        let mut out = Vec::with_capacity(self.by_type.len());
        for (cast_type, values) in &self.by_type {
            // cast_type is a quote_ident()ed schema.name, i.e. valid SQL for a type name.
            let sql = format!("SELECT x::{cast_type} FROM unnest($1::text[]) WITH ORDINALITY AS u(x, i) ORDER BY i");
            let rows = client.query(&sql, &[values]).await?;
            // A non-NULL literal never casts to NULL.
            out.push(rows.iter().map(|r| r.get::<_, Option<WireValue>>(0).map(|w| w.0).unwrap_or_default()).collect());
        }
        Ok(out)
    }
}

fn table_spec(
    rel: &Relation,
    keys: &HashMap<u32, Key>,
    children: &HashMap<u32, Vec<&Relation>>,
    parsed: &HashMap<u32, PendingBound>,
    wire: &[Vec<Vec<u8>>],
) -> TableSpec {
    let key = &keys[&rel.oid];
    let value = |slot: &Slot| wire[slot.0][slot.1].clone();
    let partitions = children
        .get(&rel.oid)
        .into_iter()
        .flatten()
        .map(|child| {
            let bound = match &parsed[&child.oid] {
                PendingBound::Default => BoundSpec::Default,
                PendingBound::Range { from, to } => {
                    let datums = |d: &[PendingDatum]| {
                        d.iter()
                            .map(|d| match d {
                                PendingDatum::Min => RangeDatum::MinValue,
                                PendingDatum::Value(slot) => RangeDatum::Value(value(slot)),
                                PendingDatum::Max => RangeDatum::MaxValue,
                            })
                            .collect()
                    };
                    BoundSpec::Range { from: datums(from), to: datums(to) }
                }
                PendingBound::List(values) => BoundSpec::List(values.iter().map(|v| v.as_ref().map(value)).collect()),
                PendingBound::Hash { modulus, remainder } => BoundSpec::Hash { modulus: *modulus, remainder: *remainder },
            };
            let kind = match child.relkind {
                'p' => PartitionKind::Partitioned(table_spec(child, keys, children, parsed, wire)),
                'f' => PartitionKind::Foreign,
                _ => PartitionKind::Table,
            };
            PartitionSpec { name: child.name.clone(), bound, kind }
        })
        .collect();
    TableSpec { name: rel.name.clone(), strategy: key.strategy, key: key.columns.clone(), partitions }
}

impl crate::retry::Classify for crate::layout::LayoutError {
    fn fault(&self) -> crate::retry::Fault {
        use crate::retry::Fault;
        match self {
            crate::layout::LayoutError::Sql(e) => crate::retry::classify(e),
            crate::layout::LayoutError::Catalog(e) => e.fault(),
            // A partition dropped while its tree was read shows an empty
            // bound: the tree read again is whole.
            crate::layout::LayoutError::Bound { .. } => Fault::Again,
            _ => Fault::Fatal,
        }
    }
}
