//! `chute simulate --create`: an orders table shaped like the published one,
//! filled with a history of N orders spread over the last `--history`,
//! loaded by chute's own loader (the `orders` generator), then given its
//! primary key and indexes (built after the load, where they cost least),
//! its identity sequence set past the history, vacuumed and analyzed as a
//! table that has lived a while would be.
//!
//! The parameters go into the table's comment before the first row, marked
//! unfinished, and are marked finished at the end: a `--create` killed
//! half-way is finished by running it again (the loader's journal skips the
//! rows already committed), and a finished table is never filled twice.
//! An advisory lock keeps two `--create` runs on one table from racing.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use chute_core::generate::{Orders, Workload};
use chute_core::ident::{QualifiedName, check_length, quote_ident};
use chute_engine::ConnectOptions;
use chute_engine::load::{self, LoadProgress, LoadSpec};
use tokio_postgres::Client;

use super::SimError;

/// The start of the comment of a table `--create` made.
const MARK: &str = "chute simulate history ";

/// What `--create` is asked for.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HistorySpec {
    pub rows: u64,
    /// How far back the history reaches, in seconds.
    pub history_s: i64,
    pub text_columns: u16,
    pub customers: u64,
    pub seed: u64,
}

/// What the table's comment records.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
struct Recorded {
    #[serde(flatten)]
    spec: HistorySpec,
    start_micros: i64,
    step_micros: i64,
    complete: bool,
}

/// What `--create` did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Created {
    pub table: String,
    pub rows: u64,
    /// Rows an earlier, interrupted `--create` had loaded already.
    pub rows_resumed: u64,
    pub table_bytes: i64,
    pub index_bytes: i64,
    pub seconds: f64,
}

/// Makes and fills the table (or finishes an interrupted `--create`).
pub async fn create(
    options: &ConnectOptions,
    table: &QualifiedName,
    key: &str,
    spec: &HistorySpec,
    now_micros: i64,
    cancel: Arc<AtomicBool>,
    progress: &mut dyn LoadProgress,
) -> Result<Created, SimError> {
    if key != "created_at" {
        return Err(SimError::Setup(format!(
            "--create makes an orders table keyed by created_at; --key {key} is for a table of your own (without --create)"
        )));
    }
    if spec.rows == 0 || spec.history_s <= 0 {
        return Err(SimError::Setup("--create needs --rows above 0 and a --history longer than zero".into()));
    }
    let began = std::time::Instant::now();
    let client = options.connect().await?;
    let lock = format!("chute simulate --create {}", table.quoted());
    client.execute("SELECT pg_advisory_lock(hashtext($1))", &[&lock]).await.map_err(SimError::sql("taking the --create lock"))?;
    let result = create_locked(&client, options, table, spec, now_micros, cancel, progress).await;
    let _ = client.execute("SELECT pg_advisory_unlock(hashtext($1))", &[&lock]).await;
    let (rows, rows_resumed) = result?;
    let sizes = client
        .query_one(&format!("SELECT pg_table_size('{0}'), pg_indexes_size('{0}')", table.quoted().replace('\'', "''")), &[])
        .await
        .map_err(SimError::sql("measuring the table"))?;
    Ok(Created {
        table: table.to_string(),
        rows,
        rows_resumed,
        table_bytes: sizes.get(0),
        index_bytes: sizes.get(1),
        seconds: began.elapsed().as_secs_f64(),
    })
}

async fn create_locked(
    client: &Client,
    options: &ConnectOptions,
    table: &QualifiedName,
    spec: &HistorySpec,
    now_micros: i64,
    cancel: Arc<AtomicBool>,
    progress: &mut dyn LoadProgress,
) -> Result<(u64, u64), SimError> {
    let info = chute_engine::catalog::table_info(client, table).await.map_err(|e| SimError::Setup(e.to_string()))?;
    let recorded = match &info {
        None => {
            let step = (spec.history_s as i128 * 1_000_000 / i128::from(spec.rows)).max(1) as i64;
            let r =
                Recorded { spec: spec.clone(), start_micros: now_micros - spec.history_s * 1_000_000, step_micros: step, complete: false };
            let sql = format!("BEGIN; {}; {}; COMMIT", workload(&r).create_table_sql(&table.quoted()), comment_sql(table, &r)?);
            client.batch_execute(&sql).await.map_err(SimError::sql(format!("creating {table}")))?;
            r
        }
        Some(info) => {
            let comment: Option<String> = client
                .query_one("SELECT obj_description($1, 'pg_class')", &[&info.oid])
                .await
                .map_err(SimError::sql("reading the table's comment"))?
                .get(0);
            let r = comment.as_deref().and_then(|c| c.strip_prefix(MARK)).and_then(|j| serde_json::from_str::<Recorded>(j).ok()).ok_or_else(|| {
                SimError::Setup(format!(
                    "{table} exists and chute simulate --create did not make it: run without --create to simulate on it, or choose another --table"
                ))
            })?;
            if r.complete {
                return Err(SimError::Setup(format!(
                    "{table} exists with its history already: run without --create to simulate on it (or DROP TABLE {} to make it again)",
                    table.quoted()
                )));
            }
            if r.spec != *spec {
                return Err(SimError::Setup(format!(
                    "{table} is half made by an earlier --create with --rows {} --history {}s --columns {} --customers {} --seed {}: run that again to finish it, or DROP TABLE {} first",
                    r.spec.rows,
                    r.spec.history_s,
                    r.spec.text_columns,
                    r.spec.customers,
                    r.spec.seed,
                    table.quoted()
                )));
            }
            r
        }
    };
    let input = Arc::new(load::Generated::new(Arc::new(workload(&recorded)) as Arc<dyn Workload>, spec.rows));
    let load_spec = LoadSpec::builder(options.clone(), table.clone()).cancel(cancel).build(input).map_err(load::LoadError::from)?;
    let report = load::run(load_spec, progress).await?;
    if report.interrupted {
        return Err(SimError::Interrupted(format!(
            "stopped while loading the history ({} rows in): run the same command again to finish {table}",
            report.stats.rows_loaded + report.stats.rows_skipped
        )));
    }
    if report.stats.rows_rejected > 0 {
        return Err(SimError::Setup(format!("{} generated rows were rejected: {:?}", report.stats.rows_rejected, report.reject_file)));
    }
    finish(client, table, &recorded).await?;
    Ok((report.stats.rows_loaded + report.stats.rows_skipped, report.stats.rows_skipped))
}

fn workload(r: &Recorded) -> Orders {
    Orders {
        start_micros: r.start_micros,
        step_micros: r.step_micros,
        customers: r.spec.customers,
        text_columns: r.spec.text_columns,
        seed: r.spec.seed,
    }
}

fn comment_sql(table: &QualifiedName, r: &Recorded) -> Result<String, SimError> {
    let json = serde_json::to_string(r).map_err(|e| SimError::Setup(e.to_string()))?;
    Ok(format!("COMMENT ON TABLE {} IS '{MARK}{}'", table.quoted(), json.replace('\'', "''")))
}

/// Primary key, indexes, the identity past the history, statistics; then
/// the comment says the table is complete.
async fn finish(client: &Client, table: &QualifiedName, r: &Recorded) -> Result<(), SimError> {
    let t = table.quoted();
    let by_time = format!("{}_created_at_idx", table.name);
    let by_customer = format!("{}_customer_id_created_at_idx", table.name);
    for name in [&by_time, &by_customer] {
        check_length(name).map_err(|e| SimError::Setup(format!("{e}: choose a shorter --table")))?;
    }
    let has_pk: bool = client
        .query_one("SELECT EXISTS (SELECT FROM pg_constraint WHERE conrelid = $1::text::regclass AND contype = 'p')", &[&t])
        .await
        .map_err(SimError::sql("reading the primary key"))?
        .get(0);
    let mut steps = Vec::new();
    if !has_pk {
        steps.push(format!("ALTER TABLE {t} ADD PRIMARY KEY (id)"));
    }
    steps.push(format!("CREATE INDEX IF NOT EXISTS {} ON {t} (created_at)", quote_ident(&by_time)));
    steps.push(format!("CREATE INDEX IF NOT EXISTS {} ON {t} (customer_id, created_at)", quote_ident(&by_customer)));
    steps.push(format!("SELECT setval(pg_get_serial_sequence('{}', 'id'), (SELECT max(id) FROM {t}))", t.replace('\'', "''")));
    steps.push(format!("VACUUM (ANALYZE) {t}"));
    steps.push(comment_sql(table, &Recorded { complete: true, ..r.clone() })?);
    for sql in steps {
        client.batch_execute(&sql).await.map_err(SimError::sql(sql.clone()))?;
    }
    Ok(())
}

/// The customers of a table `--create` made (from its comment), if it did.
pub async fn recorded_customers(client: &Client, table: &QualifiedName) -> Option<u64> {
    let row = client.query_one("SELECT obj_description($1::text::regclass, 'pg_class')", &[&table.quoted()]).await.ok()?;
    let comment: String = row.get::<_, Option<String>>(0)?;
    let r: Recorded = serde_json::from_str(comment.strip_prefix(MARK)?).ok()?;
    Some(r.spec.customers)
}
