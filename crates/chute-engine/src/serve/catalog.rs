//! What `chute serve` reads of a table: its columns, which one holds the
//! time, and what kind of value each takes.

use chute_core::ident::QualifiedName;
use tokio_postgres::Client;

use super::ServeConfig;

/// What a column of a lane's table holds, as far as line protocol cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ColKind {
    Time,
    Text,
    Bool,
    Integer,
    Number,
    Other,
}

#[derive(Debug, Clone)]
pub(crate) struct LaneColumn {
    pub name: String,
    pub kind: ColKind,
    pub type_name: String,
}

/// Why a lane cannot be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaneError {
    #[error("table {0} does not exist: create it (chute partition create) or run chute serve with --create-tables")]
    NoTable(String),
    #[error("table {table} has no time column: name it \"time\" (or partition the table by a timestamptz column)")]
    NoTime { table: String },
    #[error("PostgreSQL is unreachable: {0}")]
    Unreachable(String),
    /// A statement the server refused, with its SQLSTATE and fields.
    #[error(transparent)]
    Sql(#[from] crate::error::SqlError),
    /// The partition manager could not make a measurement's table.
    #[error("cannot create {table}: {source}")]
    Create { table: String, source: Box<crate::partman::PartmanError> },
    /// A setting chute serve was started with (checked again here).
    #[error("{0}")]
    Setting(String),
    /// A table serve may not write to (see `guard`).
    #[error("{0}")]
    Refused(String),
    /// The request names a column the table does not have.
    #[error("{0}")]
    NoColumn(String),
}

/// A connection for reading the catalog and changing a table.
pub(crate) async fn connect(config: &ServeConfig) -> Result<tokio_postgres::Client, LaneError> {
    config.target.connect().await.map_err(|e| LaneError::Unreachable(e.to_string()))
}

/// A failed statement: `Unreachable` when the connection was lost.
pub(crate) fn sql_error(context: String) -> impl FnOnce(tokio_postgres::Error) -> LaneError {
    move |e| {
        if crate::retry::connection_lost(&e) {
            LaneError::Unreachable(e.to_string())
        } else {
            LaneError::Sql(crate::error::SqlError::new(context, e))
        }
    }
}

/// Every column name of `table` (those with defaults too), in order.
pub(crate) async fn column_names(client: &Client, table: &QualifiedName) -> Result<Vec<String>, LaneError> {
    let rows = client
        .query(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&table.quoted()],
        )
        .await
        .map_err(sql_error(format!("reading the columns of {table}")))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// Reads the columns of `table`, time first.
pub(crate) async fn read_columns(client: &Client, table: &QualifiedName) -> Result<Vec<LaneColumn>, LaneError> {
    let rows = client
        .query(
            "SELECT a.attname::text, t.typname::text, t.typcategory::text, \
                    (a.atthasdef OR a.attidentity <> '' OR a.attgenerated <> ''), \
                    coalesce(a.attnum = ANY (p.partattrs::int2[]), false) \
             FROM pg_attribute a JOIN pg_type t ON t.oid = a.atttypid \
             LEFT JOIN pg_partitioned_table p ON p.partrelid = a.attrelid \
             WHERE a.attrelid = to_regclass($1) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum",
            &[&table.quoted()],
        )
        .await
        .map_err(sql_error(format!("reading the columns of {table}")))?;
    if rows.is_empty() {
        return Err(LaneError::NoTable(table.to_string()));
    }
    let mut time = None;
    let mut key_time = None;
    let mut columns = Vec::new();
    for r in &rows {
        let (name, typ, category, has_default, is_key): (String, String, String, bool, bool) =
            (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4));
        let is_time_type = matches!(typ.as_str(), "timestamptz" | "timestamp");
        if name == "time" && is_time_type {
            time = Some(columns.len());
        } else if is_key && is_time_type && key_time.is_none() {
            key_time = Some(columns.len());
        }
        if has_default && name != "time" && !is_key {
            // Left to its default: serve never writes it.
            continue;
        }
        let kind = match (typ.as_str(), category.as_str()) {
            ("bool", _) => ColKind::Bool,
            ("int2" | "int4" | "int8", _) => ColKind::Integer,
            ("float4" | "float8" | "numeric", _) => ColKind::Number,
            (_, "S") => ColKind::Text,
            _ => ColKind::Other,
        };
        columns.push(LaneColumn { name, kind, type_name: typ });
    }
    let Some(t) = time.or(key_time) else { return Err(LaneError::NoTime { table: table.to_string() }) };
    let mut time_col = columns.remove(t);
    time_col.kind = ColKind::Time;
    columns.insert(0, time_col);
    Ok(columns)
}
