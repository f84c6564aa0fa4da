//! The table a load writes to: its columns, the COPY column list, and how
//! rows find their leaf (straight to leaves, or through the parent and why).

use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::rowenc::TargetColumn;
use chute_core::value::PgType;
use tokio_postgres::Client;

use super::LoadError;
use crate::catalog::{self, TableInfo};

/// One column of the table (generated columns cannot be loaded).
pub type TableColumn = catalog::Column;

pub async fn table_columns(client: &Client, oid: u32) -> Result<Vec<TableColumn>, LoadError> {
    catalog::columns(client, oid).await.map_err(|e| LoadError::sql("reading the table's columns", e))
}

/// The columns the input fills, in input order, and where each sits in the table.
#[derive(Debug, Clone)]
pub struct ColumnPlan {
    pub targets: Vec<TargetColumn>,
    /// For each table column (attnum order), its index among `targets`.
    pub table_to_target: Vec<Option<usize>>,
    /// `("a", "b", …)` for COPY statements.
    pub copy_list: String,
}

pub fn plan_columns(table: &QualifiedName, columns: &[TableColumn], chosen: Option<&[String]>) -> Result<ColumnPlan, LoadError> {
    let names: Vec<String> = match chosen {
        Some(c) => c.to_vec(),
        None => columns.iter().filter(|c| !c.generated).map(|c| c.name.clone()).collect(),
    };
    let mut targets = Vec::with_capacity(names.len());
    let mut table_to_target = vec![None; columns.len()];
    for (i, n) in names.iter().enumerate() {
        let Some(pos) = columns.iter().position(|c| &c.name == n) else {
            let have: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
            return Err(LoadError::Setup(format!("{table} has no column {n:?} (it has {})", have.join(", "))));
        };
        if columns[pos].generated {
            return Err(LoadError::Setup(format!(
                "column {n:?} of {table} is generated and cannot be loaded; leave it out of {}",
                crate::setting::Setting::Columns
            )));
        }
        if table_to_target[pos].is_some() {
            return Err(LoadError::Setup(format!("column {n:?} is named twice in {}", crate::setting::Setting::Columns)));
        }
        table_to_target[pos] = Some(i);
        let c = &columns[pos];
        targets.push(TargetColumn { name: c.name.clone(), type_oid: c.type_oid, ty: PgType::from_oid(c.type_oid), typmod: c.typmod });
    }
    let copy_list = format!("({})", targets.iter().map(|t| quote_ident(&t.name)).collect::<Vec<_>>().join(", "));
    Ok(ColumnPlan { targets, table_to_target, copy_list })
}

/// Why rows cannot go straight to leaves, if they cannot.
pub fn parent_only_reason(info: &TableInfo) -> Option<String> {
    if info.row_security {
        return Some(format!("{} has row-level security, which loading leaves directly would bypass", info.name));
    }
    if info.has_triggers {
        return Some(format!("{} has triggers, which loading leaves directly would bypass", info.name));
    }
    None
}

/// The load's table, or an error saying how to create it: with the
/// generated rows' own `CREATE TABLE` when `workload` makes them, otherwise
/// with plain SQL, `chute gen … --create` or (for time-series) `chute
/// partition create`, each through the load's own connection.
pub async fn resolve_load_table(
    client: &Client,
    spec: &super::LoadSpec,
    workload: Option<&dyn chute_core::generate::Workload>,
) -> Result<TableInfo, LoadError> {
    let table = &spec.table;
    if let Some(info) = catalog::table_info(client, table).await? {
        return Ok(info);
    }
    let psql = format!("psql \"{}\"", spec.target.display_url());
    let plain = table.to_string();
    Err(LoadError::Setup(match workload {
        Some(w) => format!(
            "table {plain} does not exist: create one these generated rows fit first, e.g. {psql} -c '{}'",
            w.create_table_sql(&table.quoted()).replace('\'', "'\\''")
        ),
        None => format!(
            "table {plain} does not exist: create it first, with SQL ({psql} -c 'CREATE TABLE {plain} (…)'), for rows written by chute gen with \
             chute gen WORKLOAD --create={plain} | {psql}, or, partitioned by time, with chute partition create {plain} --columns \"…\" --key COLUMN --interval 1d"
        ),
    }))
}

pub async fn resolve(client: &Client, table: &QualifiedName) -> Result<TableInfo, LoadError> {
    catalog::table_info(client, table).await?.ok_or_else(|| {
        LoadError::Setup(format!(
            "table {table} does not exist: create it first (chute partition create {table} --columns … --key … --interval …)"
        ))
    })
}
