//! `--create` for columnar input: the table made from the data's schema
//! (each Arrow type as the column type its values load into as they are,
//! `chute_core::arrow::natural_type`), then partitioned as `chute partition
//! create` does it with a key and an interval. A table that exists already
//! is left as it is, so the same command can be run again (a resumed load).

use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::partman::{KeyType, Policy, Span};

use chute_engine::load::LoadError;

use crate::files::{self as columnar, ColumnarInput};
use chute_engine::ConnectOptions;
use chute_engine::partman::{CreateRequest, PartitionManager, StepReporter};

/// How the table is to be partitioned, when it is.
#[derive(Debug, Clone)]
pub struct Partitioning {
    pub key: String,
    pub interval: Span,
}

/// What `create_table` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// The table was there already: nothing was changed.
    Existed,
    /// The table was made; `partitions` of them, when partitioned.
    Made { definition: String, partitions: usize },
}

/// The column definitions of a table for `inputs`' first schema.
pub fn definition(inputs: &[ColumnarInput]) -> Result<String, LoadError> {
    let first = inputs.first().ok_or_else(|| LoadError::Setup("no input to make the table from".into()))?;
    let schema = columnar::schema(first)?;
    // An unnamed pandas index kept as a column is not made one (a load then leaves it out too).
    let index = chute_core::arrow::pandas_index_columns(&schema);
    let defs: Vec<String> = schema
        .fields()
        .iter()
        .filter(|f| !(index.contains(f.name()) && f.name().starts_with("__index_level_")))
        .map(|f| format!("{} {}", quote_ident(f.name()), chute_core::arrow::natural_type(f)))
        .collect();
    Ok(defs.join(", "))
}

/// Makes `table` from the data's schema unless it exists, partitioned when
/// `partitioning` is given (as `chute partition create --key --interval`).
pub async fn create_table(
    target: &ConnectOptions,
    table: &QualifiedName,
    inputs: &[ColumnarInput],
    partitioning: Option<&Partitioning>,
    report: StepReporter<'_>,
) -> Result<Created, LoadError> {
    let definition = definition(inputs)?;
    let client = target.connect().await?;
    if chute_engine::catalog::table_info(&client, table).await?.is_some() {
        return Ok(Created::Existed);
    }
    let Some(p) = partitioning else {
        let sql = format!("CREATE TABLE IF NOT EXISTS {table} ({definition})");
        client.batch_execute(&sql).await.map_err(|e| LoadError::sql(format!("creating {table}"), e))?;
        return Ok(Created::Made { definition, partitions: 0 });
    };
    drop(client);
    let max_future = p.interval.is_time().then(|| Span::parse("1d").expect("a valid span"));
    // The key's type is filled in from the catalog (as for partition create).
    let policy = Policy { max_future, ..Policy::new(table.clone(), p.key.clone(), KeyType::Timestamptz, p.interval) };
    let mut mgr = PartitionManager::connect(target, chute_engine::exec::ExecSettings::default()).await?;
    let req = CreateRequest { policy, like: None, columns: Some(definition.clone()), start: None };
    let (_, plan) = mgr.create(req, chute_engine::clock::now_micros(), false, report).await?;
    Ok(Created::Made { definition, partitions: plan.created().count() })
}
