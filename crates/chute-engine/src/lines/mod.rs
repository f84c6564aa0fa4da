//! InfluxDB line protocol into a table's columns: what a column takes
//! (`ColKind`) and the matching of a line's tags and fields to columns
//! (`matcher`), shared by `chute serve`'s write API and `chute consume
//! --format line-protocol`.

pub mod kind;
pub mod matcher;

/// What a column of a table holds, as far as line protocol cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ColKind {
    Time,
    Text,
    Bool,
    Integer,
    Number,
    Other,
}

impl ColKind {
    /// The kind of a column of type `typ` (`pg_type.typname`) in `category` (`typcategory`).
    pub fn of(typ: &str, category: char) -> ColKind {
        match (typ, category) {
            ("bool", _) => ColKind::Bool,
            ("int2" | "int4" | "int8", _) => ColKind::Integer,
            ("float4" | "float8" | "numeric", _) => ColKind::Number,
            (_, 'S') => ColKind::Text,
            _ => ColKind::Other,
        }
    }
}

/// A column lines are written to: the first of a table's is its time.
#[derive(Debug, Clone)]
pub struct LaneColumn {
    pub name: String,
    pub kind: ColKind,
    pub type_name: String,
}

/// The columns lines are written to, of a table's `all`: time first (the
/// column `time`, else the first timestamp column of the partition key),
/// then every other column that has no default. `None`: no time column.
pub fn line_columns(all: Vec<crate::catalog::Column>) -> Option<Vec<LaneColumn>> {
    let mut time = None;
    let mut key_time = None;
    let mut columns = Vec::new();
    for c in all {
        let (name, typ, category, has_default, is_key) = (c.name, c.typname, c.category, c.has_default, c.partition_key);
        let is_time_type = matches!(typ.as_str(), "timestamptz" | "timestamp");
        if name == "time" && is_time_type {
            time = Some(columns.len());
        } else if is_key && is_time_type && key_time.is_none() {
            key_time = Some(columns.len());
        }
        if has_default && name != "time" && !is_key {
            // Left to its default: never written.
            continue;
        }
        columns.push(LaneColumn { name, kind: ColKind::of(&typ, category), type_name: typ });
    }
    let mut time_col = columns.remove(time.or(key_time)?);
    time_col.kind = ColKind::Time;
    columns.insert(0, time_col);
    Some(columns)
}
