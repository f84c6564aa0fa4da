//! Client-side tuple routing: for each row, the leaf partition PostgreSQL 15
//! itself would choose.
//!
//! chute sends every row straight to its leaf with `COPY leaf FROM STDIN`,
//! because routing through the parent collapses with many partitions (the
//! server keeps few per-partition insert buffers). That is only correct if
//! the client picks, for every row, exactly the leaf the server would: a row
//! sent to the wrong leaf fails its partition constraint, and a row sent to a
//! DEFAULT partition that the server would have put elsewhere is silently
//! misplaced. So this module reproduces `get_partition_for_tuple`
//! (`src/backend/executor/execPartition.c`) level by level:
//!
//! - RANGE: the partition whose lower bound is the greatest one not above the
//!   row and whose upper bound is above it (lower inclusive, upper exclusive),
//!   comparing like `partition_rbound_datum_cmp`: column by column, MINVALUE
//!   below and MAXVALUE above everything from that column on. A NULL in any
//!   key column goes to the DEFAULT partition.
//! - LIST: equality with one of the listed values; NULL only where a list
//!   holds `NULL`.
//! - HASH: [`pghash::hash_remainder`](crate::pghash::hash_remainder) modulo
//!   the greatest modulus, then the partition whose (modulus, remainder)
//!   accepts it; NULLs are skipped by the hash.
//! - no match: the DEFAULT partition if there is one, else
//!   [`Route::NoPartition`] (the server's error 23514 "no partition of
//!   relation … found for row").
//!
//! A tree is built once from a [`TableSpec`] (plain data that
//! `chute-engine` reads from the catalog); building refuses, with
//! [`RouteError::Unsupported`] naming the table and the reason, anything
//! whose routing only the server can compute: partition key expressions,
//! non-default operator classes, types outside the supported list, text
//! RANGE keys under a collation that does not sort byte-wise, and
//! nondeterministic collations. The loader then sends that table's rows
//! through the parent.
//!
//! Routing one row reads only the key columns' wire bytes, costs a binary
//! search (range, list) or one hash per level, and allocates nothing.

pub mod bound_text;
mod build;
pub(crate) mod value;

#[cfg(test)]
mod tests;

pub use build::check_key;
use build::*;

use std::cmp::Ordering;

use crate::ident::QualifiedName;
use crate::pghash::{HashKind, hash_remainder, hash_wire_value};
use value::{Codec, Scalar, Value, cmp_values};

/// Identifies a leaf: an index into [`PartitionTree::leaves`].
pub type LeafId = u32;

/// PostgreSQL's limit on partition key columns (`PARTITION_MAX_KEYS`).
pub const PARTITION_MAX_KEYS: usize = 32;

/// The most hash-routing table entries (the sum of a table's distinct moduli)
/// the router builds; PostgreSQL itself allocates one entry per remainder of
/// the greatest modulus.
const MAX_HASH_SLOTS: u64 = 1 << 24;

/// A partitioning strategy (`pg_partitioned_table.partstrat`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Range,
    List,
    Hash,
}

impl Strategy {
    /// From `partstrat`: `r`, `l` or `h`.
    pub fn from_catalog(code: char) -> Option<Strategy> {
        match code {
            'r' => Some(Strategy::Range),
            'l' => Some(Strategy::List),
            'h' => Some(Strategy::Hash),
            _ => None,
        }
    }

    fn sql(self) -> &'static str {
        match self {
            Strategy::Range => "RANGE",
            Strategy::List => "LIST",
            Strategy::Hash => "HASH",
        }
    }
}

/// The collation of a key column, as far as routing cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyCollation {
    /// The key's type is not collatable.
    None,
    /// A collation that sorts byte-wise: libc `C` or `POSIX` (including a
    /// database default that is one of them). Named here by its SQL name.
    C(String),
    /// Any other deterministic collation (equality is byte equality, order is not).
    Deterministic(String),
    /// A nondeterministic collation: equality and hashing follow the locale.
    Nondeterministic(String),
}

impl KeyCollation {
    fn name(&self) -> &str {
        match self {
            KeyCollation::None => "none",
            KeyCollation::C(n) | KeyCollation::Deterministic(n) | KeyCollation::Nondeterministic(n) => n,
        }
    }
}

/// One column of a partitioned table's key, as the catalog describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyColumnSpec {
    /// The column's name, or the text of the key expression.
    pub name: String,
    /// The column's position in the ROOT table (see [`PartitionTree::route`]);
    /// `None` for a key expression.
    pub position: Option<usize>,
    /// `pg_type.oid` of the column.
    pub type_oid: u32,
    /// The type as SQL writes it, for messages.
    pub type_name: String,
    pub collation: KeyCollation,
    /// The operator class, for messages.
    pub opclass: String,
    /// Whether the operator class is the type's default one for the strategy's
    /// access method (btree for RANGE and LIST, hash for HASH), or another
    /// class of the same operator family (which compares and hashes the same).
    pub default_opclass: bool,
}

/// A partitioned table: its key and its partitions, with their bounds as wire values.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSpec {
    pub name: QualifiedName,
    pub strategy: Strategy,
    pub key: Vec<KeyColumnSpec>,
    pub partitions: Vec<PartitionSpec>,
}

/// One partition of a [`TableSpec`].
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionSpec {
    pub name: QualifiedName,
    pub bound: BoundSpec,
    pub kind: PartitionKind,
}

/// What a partition is.
#[derive(Debug, Clone, PartialEq)]
pub enum PartitionKind {
    /// A plain table (relkind `r`): a leaf.
    Table,
    /// A foreign table (relkind `f`): a leaf the loader reaches differently.
    Foreign,
    /// A partitioned table (relkind `p`): routing goes on one level down.
    Partitioned(TableSpec),
}

/// A partition bound, its values in the binary wire form of the key column's type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BoundSpec {
    Default,
    /// `FOR VALUES FROM (from) TO (to)`, one datum per key column.
    Range {
        from: Vec<RangeDatum>,
        to: Vec<RangeDatum>,
    },
    /// `FOR VALUES IN (…)`; `None` is `NULL`.
    List(Vec<Option<Vec<u8>>>),
    /// `FOR VALUES WITH (modulus m, remainder r)`.
    Hash {
        modulus: u64,
        remainder: u64,
    },
}

/// One column of a range bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RangeDatum {
    MinValue,
    Value(Vec<u8>),
    MaxValue,
}

/// Why a tree cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouteError {
    /// The layout is valid, but only the server can route it.
    #[error("rows of {table} cannot be routed on the client: {reason}; send them through the parent table instead")]
    Unsupported { table: QualifiedName, reason: String },
    /// A bound that PostgreSQL would not have produced (wrong kind, malformed value, overlap).
    #[error("partition {partition} has a bound the router cannot use: {reason}")]
    InvalidBound { partition: QualifiedName, reason: String },
}

/// A leaf partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Leaf {
    pub name: QualifiedName,
    /// A foreign table (relkind `f`).
    pub foreign: bool,
    /// Its depth below the root: 1 for a direct partition of the root.
    pub level: usize,
}

/// The key of one partitioned table, its columns given as root positions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionKey {
    pub strategy: Strategy,
    pub columns: Vec<KeyColumn>,
}

/// One key column.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyColumn {
    pub name: String,
    /// The column's position in the root table (see [`PartitionTree::route`]).
    pub position: usize,
    pub type_oid: u32,
}

/// Where a row goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Route<'t> {
    /// Into this leaf.
    Leaf(LeafId),
    /// Nowhere: no partition of `parent` (the root, or a sub-partitioned table
    /// at depth `level`, 0 for the root) accepts the row and it has no DEFAULT
    /// partition. The server would raise 23514 "no partition of relation
    /// `parent` found for row".
    NoPartition { parent: &'t QualifiedName, level: usize },
    /// The key column at this root position holds bytes that are not a valid
    /// binary value of its type; the server would reject the row as malformed.
    BadKey { position: usize },
}

/// Where a partition points: a leaf, or a sub-partitioned table's node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Leaf(LeafId),
    Node(u32),
}

/// One column of a range bound, decoded.
#[derive(Debug, Clone)]
enum Datum {
    Min,
    Value(Scalar),
    Max,
}

impl Datum {
    /// `PartitionRangeDatumKind` order.
    fn rank(&self) -> u8 {
        match self {
            Datum::Min => 0,
            Datum::Value(_) => 1,
            Datum::Max => 2,
        }
    }
}

#[derive(Debug, Clone)]
enum Dispatch {
    /// Partitions sorted by lower bound; they never overlap. Bound `i` is
    /// `lowers[i * width..][..width]` (flat, so a search chases no pointers).
    Range { codecs: Vec<Codec>, lowers: Vec<Datum>, uppers: Vec<Datum>, targets: Vec<Target> },
    /// Listed values sorted, each with its partition.
    List { codec: Codec, values: Vec<Scalar>, targets: Vec<Target>, null: Option<Target> },
    /// For each distinct modulus (ascending), the partition of each remainder.
    Hash { kinds: Vec<HashKind>, greatest: u64, groups: Vec<(u64, Vec<Option<Target>>)> },
}

/// One partitioned table of the tree.
#[derive(Debug, Clone)]
struct Node {
    name: QualifiedName,
    level: usize,
    key: PartitionKey,
    dispatch: Dispatch,
    default: Option<Target>,
}

/// A partitioned table and everything below it, ready to route rows.
#[derive(Debug, Clone)]
pub struct PartitionTree {
    nodes: Vec<Node>,
    root: usize,
    /// Every leaf, in the order the spec lists them (depth first).
    pub leaves: Vec<Leaf>,
    key_positions: Vec<usize>,
}

impl PartitionTree {
    /// Builds the router for `spec`, or says why only the server can route it.
    pub fn build(spec: &TableSpec) -> Result<PartitionTree, RouteError> {
        let mut tree = PartitionTree { nodes: Vec::new(), root: 0, leaves: Vec::new(), key_positions: Vec::new() };
        let root = tree.add_node(spec, 0)?;
        tree.root = root as usize;
        let mut positions: Vec<usize> = tree.nodes.iter().flat_map(|n| n.key.columns.iter().map(|c| c.position)).collect();
        positions.sort_unstable();
        positions.dedup();
        tree.key_positions = positions;
        Ok(tree)
    }

    /// Adds `spec`'s subtree (children first) and returns its node index.
    fn add_node(&mut self, spec: &TableSpec, level: usize) -> Result<u32, RouteError> {
        check_key(&spec.name, spec.strategy, &spec.key)?;
        let mut targets = Vec::with_capacity(spec.partitions.len());
        for p in &spec.partitions {
            let target = match &p.kind {
                PartitionKind::Table | PartitionKind::Foreign => {
                    let id = LeafId::try_from(self.leaves.len()).map_err(|_| unsupported(&spec.name, "more than 2^32 leaves"))?;
                    self.leaves.push(Leaf { name: p.name.clone(), foreign: p.kind == PartitionKind::Foreign, level: level + 1 });
                    Target::Leaf(id)
                }
                PartitionKind::Partitioned(sub) => Target::Node(self.add_node(sub, level + 1)?),
            };
            targets.push(target);
        }
        let (dispatch, default) = match spec.strategy {
            Strategy::Range => range_dispatch(spec, &targets)?,
            Strategy::List => list_dispatch(spec, &targets)?,
            Strategy::Hash => (hash_dispatch(spec, &targets)?, None),
        };
        let columns = spec
            .key
            .iter()
            .map(|c| KeyColumn { name: c.name.clone(), position: c.position.unwrap_or_default(), type_oid: c.type_oid })
            .collect();
        let node = Node { name: spec.name.clone(), level, key: PartitionKey { strategy: spec.strategy, columns }, dispatch, default };
        self.nodes.push(node);
        u32::try_from(self.nodes.len() - 1).map_err(|_| unsupported(&spec.name, "more than 2^32 partitioned tables"))
    }

    /// The partitioned table rows are routed from.
    pub fn root(&self) -> &QualifiedName {
        &self.nodes[self.root].name
    }

    /// The root table's own key (the loader creates a missing top-level
    /// partition just in time from it).
    pub fn top_level_key(&self) -> &PartitionKey {
        &self.nodes[self.root].key
    }

    /// Every root position some level's key reads, ascending.
    pub fn key_positions(&self) -> &[usize] {
        &self.key_positions
    }

    pub fn leaf(&self, id: LeafId) -> &Leaf {
        &self.leaves[id as usize]
    }

    /// The leaf with this name (a linear search: for setup, not per row).
    pub fn leaf_id(&self, name: &QualifiedName) -> Option<LeafId> {
        self.leaves.iter().position(|l| &l.name == name).and_then(|i| LeafId::try_from(i).ok())
    }

    /// Routes one row.
    ///
    /// `field(position)` returns the binary wire bytes of one column of the
    /// ROOT table (`None` for NULL): the bytes binary COPY carries for that
    /// value, as the server will store it: after any typmod rounding
    /// (`numeric(p,s)`, `timestamp(p)`); `char(n)` padding does not matter,
    /// since bpchar compares without trailing spaces. `position` is the column's 0-based index among the root
    /// table's columns in `attnum` order with dropped columns skipped, i.e.
    /// its place in `SELECT *` and in a binary COPY without a column list.
    /// Sub-partition keys are mapped to these positions by column name, so
    /// leaves with another column order or dropped columns need nothing
    /// special. Only key columns are asked for ([`Self::key_positions`]).
    ///
    /// Text values are compared as bytes and are not checked to be valid
    /// UTF-8; the server rejects invalid text however it is routed.
    pub fn route<'v>(&self, field: impl Fn(usize) -> Option<&'v [u8]>) -> Route<'_> {
        let mut node = &self.nodes[self.root];
        loop {
            let found = match node.find(&field) {
                Ok(found) => found,
                Err(position) => return Route::BadKey { position },
            };
            match found.or(node.default) {
                Some(Target::Leaf(id)) => return Route::Leaf(id),
                Some(Target::Node(n)) => node = &self.nodes[n as usize],
                None => return Route::NoPartition { parent: &node.name, level: node.level },
            }
        }
    }

    /// [`Self::route`] for a row given as one optional value per root column.
    pub fn route_row(&self, row: &[Option<&[u8]>]) -> Route<'_> {
        self.route(|i| row.get(i).copied().flatten())
    }
}

impl Node {
    /// The partition of this table that accepts the row (`None`: no
    /// partition does, the DEFAULT one may), or the position of a malformed key value.
    #[inline]
    fn find<'v>(&self, field: &impl Fn(usize) -> Option<&'v [u8]>) -> Result<Option<Target>, usize> {
        let columns = &self.key.columns;
        match &self.dispatch {
            Dispatch::Range { codecs, lowers, uppers, targets } if columns.len() == 1 => {
                // The common single-column key, without the multi-column scratch array.
                let col = &columns[0];
                let Some(wire) = field(col.position) else { return Ok(None) };
                let value = codecs[0].decode(wire).ok_or(col.position)?;
                Ok(range_find(lowers, uppers, targets, std::slice::from_ref(&value)))
            }
            Dispatch::Range { codecs, lowers, uppers, targets } => {
                let keys = (columns.as_slice(), codecs.as_slice());
                if columns.len() <= SMALL_KEY {
                    range_multi::<SMALL_KEY, _>(keys, field, |row| range_find(lowers, uppers, targets, row))
                } else {
                    range_multi::<PARTITION_MAX_KEYS, _>(keys, field, |row| range_find(lowers, uppers, targets, row))
                }
            }
            Dispatch::List { codec, values, targets, null } => {
                let col = &columns[0];
                let Some(wire) = field(col.position) else { return Ok(*null) };
                let v = codec.decode(wire).ok_or(col.position)?;
                Ok(values.binary_search_by(|s| cmp_values(s.as_value(), v)).ok().map(|i| targets[i]))
            }
            Dispatch::Hash { kinds, greatest, groups } => {
                let remainder = if columns.len() <= SMALL_KEY {
                    hash_row::<SMALL_KEY>(columns, kinds, field, *greatest)?
                } else {
                    hash_row::<PARTITION_MAX_KEYS>(columns, kinds, field, *greatest)?
                };
                // Every modulus divides the greatest, so remainder % m is the row's remainder for m.
                Ok(groups.iter().find_map(|(modulus, slots)| slots[(remainder % modulus) as usize]))
            }
        }
    }
}

/// Key columns up to this many are gathered in a small stack array per row.
const SMALL_KEY: usize = 4;

/// Decodes a multi-column range key into an array of `N` slots and hands it
/// to `find`; a NULL anywhere means no range partition.
#[inline]
fn range_multi<'v, const N: usize, F>(
    (columns, codecs): (&[KeyColumn], &[Codec]),
    field: &impl Fn(usize) -> Option<&'v [u8]>,
    find: F,
) -> Result<Option<Target>, usize>
where
    F: FnOnce(&[Value<'v>]) -> Option<Target>,
{
    let mut row = [Value::Int(0); N];
    let mut has_null = false;
    for ((slot, col), codec) in row.iter_mut().zip(columns).zip(codecs) {
        match field(col.position) {
            Some(wire) => *slot = codec.decode(wire).ok_or(col.position)?,
            None => has_null = true,
        }
    }
    Ok(if has_null { None } else { find(&row[..columns.len()]) })
}

/// The row's partition hash modulo `greatest` (`N` slots of scratch space),
/// or the position of a value the hash function refuses.
#[inline]
fn hash_row<'v, const N: usize>(
    columns: &[KeyColumn],
    kinds: &[HashKind],
    field: &impl Fn(usize) -> Option<&'v [u8]>,
    greatest: u64,
) -> Result<u64, usize> {
    let mut keys: [(HashKind, Option<&'v [u8]>); N] = [(HashKind::Int4, None); N];
    for ((slot, col), kind) in keys.iter_mut().zip(columns).zip(kinds) {
        *slot = (*kind, field(col.position));
    }
    let keys = &keys[..columns.len()];
    hash_remainder(keys, greatest).map_err(|_| {
        let bad = keys.iter().zip(columns).find(|((kind, wire), _)| wire.is_some_and(|w| hash_wire_value(*kind, w, 0).is_err()));
        bad.map_or(columns[0].position, |(_, col)| col.position)
    })
}

/// The range partition holding `row`: the last one whose lower bound is not
/// above the row, if its upper bound is above it (`partition_range_datum_bsearch`).
#[inline]
fn range_find(lowers: &[Datum], uppers: &[Datum], targets: &[Target], row: &[Value<'_>]) -> Option<Target> {
    let width = row.len();
    fn bound(datums: &[Datum], width: usize, i: usize) -> &[Datum] {
        &datums[i * width..(i + 1) * width]
    }
    let (mut lo, mut hi) = (0, targets.len());
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if cmp_bound_to_row(bound(lowers, width, mid), row) == Ordering::Greater {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    let i = lo.checked_sub(1)?;
    (cmp_bound_to_row(bound(uppers, width, i), row) == Ordering::Greater).then_some(targets[i])
}

/// `partition_rbound_datum_cmp`: a bound against a row's key values.
#[inline]
fn cmp_bound_to_row(bound: &[Datum], row: &[Value<'_>]) -> Ordering {
    for (datum, value) in bound.iter().zip(row) {
        match datum {
            Datum::Min => return Ordering::Less,
            Datum::Max => return Ordering::Greater,
            Datum::Value(s) => match cmp_values(s.as_value(), *value) {
                Ordering::Equal => continue,
                other => return other,
            },
        }
    }
    Ordering::Equal
}

/// `partition_rbound_cmp` between two bounds of the same kind (both lower or both upper).
fn cmp_bounds(a: &[Datum], b: &[Datum]) -> Ordering {
    for (x, y) in a.iter().zip(b) {
        match (x, y) {
            (Datum::Value(x), Datum::Value(y)) => match cmp_values(x.as_value(), y.as_value()) {
                Ordering::Equal => continue,
                other => return other,
            },
            // Unbounded columns end the comparison: nothing after them counts.
            _ => return x.rank().cmp(&y.rank()),
        }
    }
    Ordering::Equal
}
