//! The demo job: chute's main path end to end on any server.
//!
//! Creates `chute_demo.conditions` (time timestamptz, dev_id int,
//! data1..data5 float8, index on time) partitioned by day, generates rows in
//! process and loads them with binary COPY, then measures what landed. It
//! owns its schema, so it can drop and recreate the table on every run
//! without touching anything of the user's.

use std::sync::Arc;

use chute_core::generate::Conditions;

use chute_core::ident::QualifiedName;
use chute_core::partman::interval::{Span, Unit};
use chute_core::partman::{KeyType, Policy};

use crate::ConnectOptions;
use crate::exec::ExecSettings;
use crate::load::{LoadError, LoadProgress, LoadSpec};
use crate::partman::{CreateRequest, PartitionManager, PartmanError};

/// The schema the demo owns.
pub const DEMO_SCHEMA: &str = "chute_demo";

#[derive(Debug, Clone)]
pub struct DemoSpec {
    pub rows: u64,
    pub devices: u32,
    pub days: u32,
    pub seed: u64,
    /// Midnight UTC that ends the data, in microseconds since the Unix epoch.
    pub end_micros: i64,
    /// Scale-out: hash shards on dev_id over the coordinator's data nodes.
    pub shards: Option<u32>,
}

/// What the demo measured.
#[derive(Debug, Clone, serde::Serialize)]
pub struct DemoReport {
    pub table: String,
    pub rows: u64,
    pub seconds: f64,
    pub rows_per_second: f64,
    pub partitions: i64,
    pub partitions_used: i64,
    pub table_bytes: i64,
    pub server_version: String,
    /// Data nodes the table is distributed over (0: one server).
    pub nodes: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Connect(#[from] crate::ConnectError),
    #[error(transparent)]
    Partition(#[from] PartmanError),
    #[error(transparent)]
    Load(#[from] LoadError),
    #[error("{step}: {source}")]
    Sql { step: &'static str, source: tokio_postgres::Error },
    #[error("{0}")]
    Cluster(String),
}

/// The demo's load id (see `run`).
const DEMO_LOAD_ID: &str = "chute-demo";

fn sql(step: &'static str) -> impl FnOnce(tokio_postgres::Error) -> DemoError {
    move |source| DemoError::Sql { step, source }
}

/// Runs the demo; `progress` is told the rows sent so far now and then.
pub async fn run(opts: &ConnectOptions, spec: &DemoSpec, progress: &mut dyn LoadProgress) -> Result<DemoReport, DemoError> {
    let day = 86_400_000_000i64;
    let start = spec.end_micros - i64::from(spec.days) * day;
    let client = opts.connect().await?;
    let nodes = match spec.shards {
        Some(_) => {
            let nodes = crate::cluster::nodes(&client).await.map_err(|e| DemoError::Cluster(e.to_string()))?;
            if nodes.is_empty() {
                return Err(DemoError::Cluster(
                    "no data nodes: start them with chute local start --nodes 3, or record them with chute cluster init".into(),
                ));
            }
            // The shards of an earlier run, and their journals, go first.
            crate::cluster::drop_remote(&client, &format!("{DEMO_SCHEMA}.conditions"), Some(DEMO_LOAD_ID))
                .await
                .map_err(|e| DemoError::Cluster(e.to_string()))?;
            nodes.into_iter().map(|n| n.name).collect()
        }
        None => Vec::new(),
    };
    client
        .batch_execute(&format!("DROP TABLE IF EXISTS {DEMO_SCHEMA}.conditions; CREATE SCHEMA IF NOT EXISTS {DEMO_SCHEMA}"))
        .await
        .map_err(sql("resetting chute_demo.conditions"))?;
    // The partition manager makes the table: daily partitions from the
    // first day of data, kept one day ahead of the last.
    let policy = Policy {
        premake: 0,
        max_future: Some(Span::Time { n: 1, unit: Unit::Days }),
        hash: spec.shards.map(|modulus| chute_core::partman::HashSub { column: "dev_id".into(), modulus }),
        distribution: spec.shards.map(|_| chute_core::partman::Distribution { nodes: nodes.clone(), placement: None }),
        ..Policy::new(QualifiedName::new(DEMO_SCHEMA, "conditions"), "time", KeyType::Timestamptz, Span::Time { n: 1, unit: Unit::Days })
    };
    let req = CreateRequest {
        policy,
        like: None,
        columns: Some(
            "time timestamptz NOT NULL, dev_id int NOT NULL, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8".into(),
        ),
        start: Some(jiff::Timestamp::from_microsecond(start).map(|t| t.to_string()).unwrap_or_default()),
    };
    let mut mgr = PartitionManager::connect(opts, ExecSettings::default()).await?;
    mgr.create(req, spec.end_micros - 1, false, &mut crate::exec::quiet).await?;
    client.batch_execute(&format!("CREATE INDEX ON {DEMO_SCHEMA}.conditions (time)")).await.map_err(sql("creating the index on time"))?;
    if spec.shards.is_some() {
        // The index on the nodes' shard tables too.
        crate::cluster::sync_ddl(&client, &crate::connect::ProcessEnv, false).await.map_err(|e| DemoError::Cluster(e.to_string()))?;
    }

    let ticks = spec.rows.div_ceil(u64::from(spec.devices.max(1))).max(1);
    let generator = Conditions {
        start_micros: start,
        step_micros: (i64::from(spec.days) * day / ticks as i64).max(1),
        devices: spec.devices.max(1),
        fields: 5,
        seed: spec.seed,
    };
    // The loader does the rest: rows straight into their daily partitions.
    // The table was just made again, so every row loads: the demo's journal
    // has one fixed name and forgets what earlier runs committed.
    crate::load::journal::forget(&client, DEMO_LOAD_ID).await?;
    let input = Arc::new(crate::load::Generated::new(Arc::new(generator), spec.rows));
    let load = LoadSpec::builder(opts.clone(), QualifiedName::new(DEMO_SCHEMA, "conditions"))
        .load_id(Some(DEMO_LOAD_ID.to_owned()))
        .build(input)
        .map_err(crate::load::LoadError::from)?;
    let report = crate::load::run(load, progress).await?;
    let (rows, seconds) = (report.stats.rows_loaded, report.stats.seconds);

    client.batch_execute(&format!("ANALYZE {DEMO_SCHEMA}.conditions")).await.map_err(sql("ANALYZE"))?;
    let row = client
        .query_one(
            &format!(
                "SELECT (SELECT count(*) FROM pg_partition_tree('{DEMO_SCHEMA}.conditions') WHERE isleaf),
                        (SELECT count(DISTINCT tableoid) FROM {DEMO_SCHEMA}.conditions),
                        (SELECT coalesce(sum(pg_total_relation_size(relid)), 0)::int8 FROM pg_partition_tree('{DEMO_SCHEMA}.conditions')),
                        current_setting('server_version')"
            ),
            &[],
        )
        .await
        .map_err(sql("measuring the table"))?;
    Ok(DemoReport {
        table: format!("{DEMO_SCHEMA}.conditions"),
        rows,
        seconds,
        rows_per_second: rows as f64 / seconds.max(1e-9),
        partitions: row.get(0),
        partitions_used: row.get(1),
        table_bytes: row.get(2),
        server_version: row.get(3),
        nodes: nodes.len(),
    })
}
