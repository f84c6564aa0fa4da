//! `--create-tables`: a new measurement gets a table partitioned by time
//! (`--interval`, through the partition manager like `chute partition
//! create`: the policy is kept in `chute.partition_config`, partitions are
//! made just in time), its tags as text columns and its fields typed from
//! the line protocol; a new tag or field adds a column (`ALTER TABLE … ADD
//! COLUMN IF NOT EXISTS`, under `lock_timeout`, retried while writers hold
//! the table).

use std::time::Duration;

use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::parse::lineproto::FieldType;
use chute_core::partman::{KeyType, Policy};

use super::ServeConfig;
use super::catalog::LaneError;
use chute_engine::exec::ExecSettings;
use chute_engine::partman::{CreateRequest, PartitionManager};
use chute_engine::retry::{self, Fault};

/// A column a request needs: a tag (text) or a field of its type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Wanted {
    Tag,
    Field(FieldType),
}

impl Wanted {
    fn sql_type(&self) -> &'static str {
        match self {
            Wanted::Tag => "text",
            Wanted::Field(t) => t.sql_type(),
        }
    }
}

/// Makes `table` (and its schema) for a measurement with these columns.
pub(crate) async fn create_table(config: &ServeConfig, table: &QualifiedName, columns: &[(String, Wanted)]) -> Result<(), LaneError> {
    let settings = ExecSettings { lock_timeout: config.lock_timeout, retry_for: config.retry_for.min(Duration::from_secs(60)) };
    let mut mgr = PartitionManager::connect(&config.target, settings)
        .await
        .map_err(|e| LaneError::Create { table: table.to_string(), source: Box::new(e) })?;
    if let Some(schema) = &table.schema {
        mgr.client()
            .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)))
            .await
            .map_err(|e| LaneError::Sql(chute_engine::error::SqlError::new(format!("creating schema {schema}"), e)))?;
    }
    let mut defs = vec!["time timestamptz NOT NULL".to_owned()];
    defs.extend(columns.iter().map(|(name, w)| format!("{} {}", quote_ident(name), w.sql_type())));
    let interval = config.interval;
    let policy = Policy::new(table.clone(), "time", KeyType::Timestamptz, interval);
    let req = CreateRequest { policy, like: None, columns: Some(defs.join(", ")), start: None };
    let now = chute_engine::clock::now_micros();
    match mgr.create(req, now, false, &mut |_, _, _| {}).await {
        Ok(_) => {
            eprintln!("chute serve: created {table}, partitioned by time every {}", config.interval);
            Ok(())
        }
        // Another chute made it meanwhile: use it.
        Err(_) if super::catalog::read_columns(mgr.client(), table).await.is_ok() => Ok(()),
        Err(e) => Err(LaneError::Create { table: table.to_string(), source: Box::new(e) }),
    }
}

/// Adds the columns `table` lacks, in one statement under `--lock-timeout`,
/// tried again while writers hold the table, until `deadline`.
pub(crate) async fn add_columns(
    client: &tokio_postgres::Client,
    config: &ServeConfig,
    table: &QualifiedName,
    columns: &[(String, Wanted)],
    deadline: tokio::time::Instant,
) -> Result<(), LaneError> {
    let adds: Vec<String> =
        columns.iter().map(|(name, w)| format!("ADD COLUMN IF NOT EXISTS {} {}", quote_ident(name), w.sql_type())).collect();
    let sql = format!(
        "SET lock_timeout = '{}ms'; ALTER TABLE {} {}; RESET lock_timeout",
        config.lock_timeout.as_millis().max(1),
        table.quoted(),
        adds.join(", ")
    );
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    // Only the table's lock is waited for here; anything else is the request's to retry.
    let policy = retry::Policy::request(left).retrying(&[Fault::LockWait]);
    let added = retry::run!(&policy, |_| async {
        let tried = client.batch_execute(&sql).await;
        if tried.is_err() {
            // The failed statement left lock_timeout set on the connection.
            let _ = client.batch_execute("RESET lock_timeout").await;
        }
        tried
    });
    match added {
        Ok(()) => {
            let names: Vec<&str> = columns.iter().map(|(n, _)| n.as_str()).collect();
            eprintln!("chute serve: added to {table}: {}", names.join(", "));
            Ok(())
        }
        Err(e) if policy.gave_up_on(&e) => Err(LaneError::Unreachable(format!(
            "cannot add columns to {table}: its lock was held longer than --lock-timeout on every try: retry"
        ))),
        Err(e) => Err(super::catalog::sql_error(format!("adding columns to {table}"))(e)),
    }
}
