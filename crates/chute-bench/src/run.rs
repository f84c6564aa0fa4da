//! Runs a scenario against a server, one cell at a time, and writes what it
//! measured.
//!
//! Every cell starts from nothing: the table is dropped and made again in
//! the cell's layout (time partitions for every row made up front by the
//! partition manager, so no cell depends on the wall clock or pays for
//! just-in-time DDL), its indexes are built, the psql input file is written,
//! and a CHECKPOINT flushes what earlier cells left dirty. Only then does the
//! clock start; WAL position and checkpoint counters are read around the
//! load alone. The output files are rewritten after every cell, so a run that
//! fails half-way still leaves the cells it finished.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use chute_core::generate::Workload;
use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::partman::interval::{Span, Unit};
use chute_core::partman::{HashSub, KeyType, Policy};
use chute_engine::ConnectOptions;
use chute_engine::exec::ExecSettings;
use chute_engine::load::GeneratedInput;
use chute_engine::load::{self, Generated, InputSpec, LoadProgress, LoadSpec, LoadStats, TsbsFiles};
use chute_engine::partman::{CreateRequest, PartitionManager, PartmanError};
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::cell::{Cell, Layout, Loader, Order};
use crate::report::{BenchRun, CellResult, SETTINGS, Sample, ServerInfo};
use crate::scenario::Scenario;
use crate::workload::{BenchRows, BenchTable, BenchWorkload, workload_for};

/// The schema the bench owns: its table is dropped and remade for every cell.
pub const BENCH_SCHEMA: &str = "chute_bench";
const BENCH_TABLE: &str = "bench";

/// Where to run.
#[derive(Debug, Clone)]
pub struct BenchTarget {
    pub options: ConnectOptions,
    /// What `psql -d` gets for psql-copy cells: the user's own `--url` when
    /// given, without its password (psql gets that as `PGPASSWORD` in its
    /// environment), else a URL for the same server.
    pub psql_conninfo: String,
}

/// Told about each cell; the binary prints.
pub trait BenchProgress {
    fn cell_started(&mut self, index: usize, total: usize, cell: &Cell);
    fn cell_finished(&mut self, result: &CellResult);
    fn notice(&mut self, message: &str);
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    #[error(transparent)]
    Connect(#[from] chute_engine::ConnectError),
    #[error("cell {cell}: making the layout: {source}")]
    Layout { cell: String, source: PartmanError },
    #[error("cell {cell}: {source}")]
    Load { cell: String, source: chute_engine::load::LoadError },
    #[error("{step}: {message}")]
    Sql { step: String, message: String },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: String, source: std::io::Error },
    #[error("cell {cell}: {message}")]
    Check { cell: String, message: String },
    #[error("{0}")]
    Setup(String),
}

fn sql(step: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> BenchError {
    let step = step.into();
    move |e| BenchError::Sql { step, message: chute_engine::exec::describe(&e) }
}

fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> BenchError {
    let path = path.display().to_string();
    move |source| BenchError::Io { what, path, source }
}

/// Runs every cell of `scenario` and writes the output files into `out_dir`.
pub async fn run(
    scenario: Scenario,
    seed: u64,
    target: &BenchTarget,
    out_dir: &Path,
    progress: &mut dyn BenchProgress,
) -> Result<BenchRun, BenchError> {
    std::fs::create_dir_all(out_dir).map_err(io("cannot create", out_dir))?;
    let out_dir = std::fs::canonicalize(out_dir).map_err(io("cannot find", out_dir))?;
    let psql = if scenario.cells.iter().any(|c| c.loader == Loader::PsqlCopy) { Some(psql_program()?) } else { None };
    let client = target.options.connect().await?;
    let stats = StatsQueries::for_server(&client).await?;
    let server = server_info(&client).await?;
    let mut mgr = PartitionManager::connect(&target.options, ExecSettings::default())
        .await
        .map_err(|e| BenchError::Setup(format!("cannot connect the partition manager: {e}")))?;
    // Every cell is checked against its workload before the first one runs.
    let workloads = workloads(&scenario, seed)?;
    let data = workloads.first().map(|w| w.description.clone()).unwrap_or_default();
    progress.notice(&format!("data: {data}"));
    let mut run = BenchRun { scenario: scenario.clone(), data, server, results: Vec::new(), notes: Vec::new() };
    let ctx = CellContext { client: &client, stats: &stats, target, out_dir: &out_dir, seed, psql: psql.as_deref() };
    let total = scenario.cells.len();
    for ((i, cell), workload) in scenario.cells.iter().enumerate().zip(workloads) {
        progress.cell_started(i, total, cell);
        // Every run on a fresh table; the median run stands for the cell.
        let mut runs = Vec::new();
        for _ in 0..scenario.repeat.max(1) {
            runs.push(ctx.run_cell(cell, &workload, &mut mgr, &mut run.notes, progress).await?);
        }
        runs.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
        let runs_seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        let mut result = runs.swap_remove(runs.len() / 2);
        result.runs_seconds = runs_seconds;
        progress.cell_finished(&result);
        run.results.push(result);
        write_outputs(&run, &out_dir)?;
    }
    // The last cell's tables are the bench's, not the user's: leave nothing behind.
    reset_schema(&client).await?;
    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {BENCH_SCHEMA}")).await;
    Ok(run)
}

/// Each cell's rows, checked against how the cell loads them (nothing runs
/// when a cell cannot: `--dry-run` shows the same errors).
pub fn workloads(scenario: &Scenario, seed: u64) -> Result<Vec<BenchWorkload>, BenchError> {
    let mut out = Vec::new();
    for cell in &scenario.cells {
        let w = workload_for(scenario.workload, cell.rows, seed, scenario.shape).map_err(BenchError::Setup)?;
        check_cell(cell, &w).map_err(|message| BenchError::Check { cell: cell.name.clone(), message })?;
        out.push(w);
    }
    Ok(out)
}

/// Whether the workload can be loaded the way the cell says.
fn check_cell(cell: &Cell, w: &BenchWorkload) -> Result<(), String> {
    let name = w.kind.name();
    if matches!(w.rows, BenchRows::Tsbs { .. }) {
        if cell.loader == Loader::PsqlCopy {
            return Err(format!("{name} is a tsbs stream into {} tables: psql \\copy loads CSV into one", w.tables.len()));
        }
        if cell.order == Order::Shuffled {
            return Err(format!("{name} is a tsbs stream with its own order (late rows included); it cannot be shuffled"));
        }
    }
    if matches!(cell.layout, Layout::Range(_) | Layout::RangeHash(..)) && !w.key_type.is_time() {
        return Err(format!("{name} is keyed by the integer {}: time ranges do not apply; use ranges:N for N equal ranges", w.key_column));
    }
    Ok(())
}

/// Writes results.csv, rates.csv, report.html and one .svg per chart; returns their paths.
pub fn write_outputs(run: &BenchRun, dir: &Path) -> Result<Vec<PathBuf>, BenchError> {
    let mut files = vec![
        ("results.csv".to_owned(), run.results_csv()),
        ("rates.csv".to_owned(), run.rates_csv()),
        ("report.html".to_owned(), run.html()),
    ];
    files.extend(run.charts().into_iter().map(|(name, svg)| (name.to_owned(), svg.0)));
    write_files(dir, files).map_err(|(path, e)| io("cannot write", &path)(e))
}

/// Writes each (file name, contents) into `dir`; returns the paths, or the
/// one that could not be written.
pub(crate) fn write_files(dir: &Path, files: Vec<(String, String)>) -> Result<Vec<PathBuf>, (PathBuf, std::io::Error)> {
    let mut written = Vec::new();
    for (name, text) in files {
        let path = dir.join(name);
        if let Err(e) = std::fs::write(&path, text) {
            return Err((path, e));
        }
        written.push(path);
    }
    Ok(written)
}

/// One table of a cell, to be made in the cell's layout.
#[derive(Clone, Copy)]
struct TableJob<'a> {
    cell: &'a Cell,
    w: &'a BenchWorkload,
    t: &'a BenchTable,
    name: &'a QualifiedName,
}

struct CellContext<'a> {
    client: &'a Client,
    stats: &'a StatsQueries,
    target: &'a BenchTarget,
    out_dir: &'a Path,
    seed: u64,
    psql: Option<&'a Path>,
}

/// WAL position and checkpoint counters at one moment.
#[derive(Debug, Clone)]
struct ServerMark {
    lsn: String,
    timed: i64,
    requested: i64,
}

impl CellContext<'_> {
    async fn run_cell(
        &self,
        cell: &Cell,
        w: &BenchWorkload,
        mgr: &mut PartitionManager,
        notes: &mut Vec<String>,
        progress: &mut dyn BenchProgress,
    ) -> Result<CellResult, BenchError> {
        let tables: Vec<QualifiedName> = w.tables.iter().map(|t| QualifiedName::new(BENCH_SCHEMA, table_name(t))).collect();
        let rows = w.ordered(cell.order, cell.rows, self.seed);
        reset_schema(self.client).await?;
        for (t, name) in w.tables.iter().zip(&tables) {
            self.make_layout(&TableJob { cell, w, t, name }, mgr).await?;
            for cols in w.base_indexes.iter().cloned().chain((0..cell.extra_indexes).filter_map(|i| w.extra_index(t, i))) {
                self.client
                    .batch_execute(&format!("CREATE INDEX ON {} ({cols})", name.quoted()))
                    .await
                    .map_err(sql(format!("CREATE INDEX ON {name} ({cols})")))?;
            }
        }
        let csv = match (cell.loader, &rows) {
            (Loader::PsqlCopy, Some(rows)) => Some(self.write_csv(cell, &**rows)?),
            _ => None,
        };
        self.checkpoint(notes, progress).await?;
        let before = self.stats.mark(self.client).await?;
        let began = Instant::now();
        let outcome = match (&csv, rows) {
            (Some((path, bytes)), _) => self.psql_copy(cell, &tables[0], path).await.map(|()| Loaded::psql(*bytes)),
            (None, rows) => self.chute_load(cell, w, &tables[0], rows, progress).await,
        };
        let seconds = began.elapsed().as_secs_f64();
        if let Some((path, _)) = &csv {
            let _ = std::fs::remove_file(path);
        }
        let loaded = outcome?;
        let after = self.stats.mark(self.client).await?;
        let wal_bytes: i64 = self
            .client
            .query_one("SELECT pg_wal_lsn_diff($1::text::pg_lsn, $2::text::pg_lsn)::int8", &[&after.lsn, &before.lsn])
            .await
            .map_err(sql("measuring WAL"))?
            .get(0);
        let (mut count, mut partitions, mut table_bytes, mut index_bytes) = (0, 0, 0, 0);
        for t in &tables {
            let m = self.measure_table(t).await?;
            count += m.0;
            partitions += m.1;
            table_bytes += m.2;
            index_bytes += m.3;
        }
        if count != cell.rows {
            return Err(BenchError::Check {
                cell: cell.name.clone(),
                message: format!("{count} rows in the table after loading {}", cell.rows),
            });
        }
        let mut samples = loaded.samples;
        if samples.is_empty() {
            samples.push(Sample { seconds, rows: count });
        }
        Ok(CellResult {
            cell: cell.clone(),
            partitions,
            rows: count,
            seconds,
            bytes_sent: loaded.bytes_sent,
            batch_rows: loaded.batch_rows,
            table_bytes,
            index_bytes,
            wal_bytes,
            checkpoints_timed: after.timed - before.timed,
            checkpoints_requested: after.requested - before.requested,
            samples,
            via_parent_reason: loaded.via_parent_reason,
            runs_seconds: vec![seconds],
        })
    }

    async fn make_layout(&self, on: &TableJob<'_>, mgr: &mut PartitionManager) -> Result<(), BenchError> {
        let TableJob { cell, w, t, name } = *on;
        let table = name.quoted();
        let unlogged = if cell.unlogged { "UNLOGGED " } else { "" };
        // Plain SQL partitions: (name suffix, bound) each.
        let (method, column, leaves) = match cell.layout {
            Layout::Single => {
                return self
                    .client
                    .batch_execute(&format!("CREATE {unlogged}TABLE {table} ({})", t.columns_sql))
                    .await
                    .map_err(sql("CREATE TABLE"));
            }
            Layout::Range(span) => return self.partman_layout(on, mgr, span, None).await,
            Layout::RangeHash(span, n) => return self.partman_layout(on, mgr, span, Some(n)).await,
            Layout::Hash(n) => (
                "HASH",
                &w.hash_column,
                (0..n).map(|r| (format!("h{r}"), format!("WITH (MODULUS {n}, REMAINDER {r})"))).collect::<Vec<_>>(),
            ),
            Layout::Ranges(n) => (
                "RANGE",
                &w.key_column,
                equal_ranges(w, n)?
                    .into_iter()
                    .enumerate()
                    .map(|(r, (from, to))| (format!("r{r}"), format!("FROM ({from}) TO ({to})")))
                    .collect(),
            ),
        };
        let mut ddl = format!("BEGIN; CREATE TABLE {table} ({}) PARTITION BY {method} ({});", t.columns_sql, quote_ident(column));
        for (suffix, bound) in &leaves {
            let leaf = QualifiedName::new(BENCH_SCHEMA, format!("{}_{suffix}", name.name)).quoted();
            ddl.push_str(&format!("CREATE {unlogged}TABLE {leaf} PARTITION OF {table} FOR VALUES {bound};"));
        }
        ddl.push_str("COMMIT");
        self.client.batch_execute(&ddl).await.map_err(sql(format!("creating {} {} partitions", leaves.len(), method.to_lowercase())))
    }

    /// `chute partition create` semantics: every interval from the first
    /// row's to the last row's, made before the load.
    async fn partman_layout(
        &self,
        on: &TableJob<'_>,
        mgr: &mut PartitionManager,
        interval: Span,
        hash: Option<u32>,
    ) -> Result<(), BenchError> {
        let TableJob { cell, w, t, name } = *on;
        let policy = Policy {
            premake: 0,
            max_future: Some(Span::Time { n: 1, unit: Unit::Days }),
            hash: hash.map(|modulus| HashSub { column: w.hash_column.clone(), modulus }),
            unlogged: cell.unlogged,
            ..Policy::new(name.clone(), w.key_column.clone(), w.key_type, interval)
        };
        let start = w.key_type.literal(w.key_first).map_err(|e| BenchError::Setup(e.to_string()))?;
        let req =
            CreateRequest { policy, like: None, columns: Some(t.columns_sql.clone()), start: Some(start.trim_matches('\'').to_owned()) };
        mgr.create(req, w.key_last, false, &mut chute_engine::exec::quiet)
            .await
            .map(|_| ())
            .map_err(|source| BenchError::Layout { cell: cell.name.clone(), source })
    }

    /// The psql-copy input: the cell's rows, in its order, as CSV.
    fn write_csv(&self, cell: &Cell, rows: &dyn Workload) -> Result<(PathBuf, u64), BenchError> {
        let path = self.out_dir.join("psql-copy-input.csv");
        let file = std::fs::File::create(&path).map_err(io("cannot create", &path))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, file);
        let (mut line, mut bytes) = (Vec::with_capacity(256), 0u64);
        for seq in 0..cell.rows {
            line.clear();
            rows.write_csv(seq, &mut line);
            out.write_all(&line).map_err(io("cannot write", &path))?;
            bytes += line.len() as u64;
        }
        out.flush().map_err(io("cannot write", &path))?;
        Ok((path, bytes))
    }

    /// CHECKPOINT, then wait until the counters show it, so it is not
    /// counted as a checkpoint during the cell.
    async fn checkpoint(&self, notes: &mut Vec<String>, progress: &mut dyn BenchProgress) -> Result<(), BenchError> {
        let before = self.stats.mark(self.client).await?;
        if let Err(e) = self.client.batch_execute("CHECKPOINT").await {
            if e.code() != Some(&SqlState::INSUFFICIENT_PRIVILEGE) {
                return Err(sql("CHECKPOINT")(e));
            }
            let note = "CHECKPOINT before each cell was refused (it needs superuser or pg_checkpoint): cells may pay for the \
                        dirty pages of the ones before them"
                .to_owned();
            if !notes.contains(&note) {
                progress.notice(&note);
                notes.push(note);
            }
            return Ok(());
        }
        let deadline = Instant::now() + Duration::from_secs(2);
        while Instant::now() < deadline && self.stats.mark(self.client).await?.requested <= before.requested {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(())
    }

    async fn chute_load(
        &self,
        cell: &Cell,
        w: &BenchWorkload,
        table: &QualifiedName,
        rows: Option<Arc<dyn Workload>>,
        progress: &mut dyn BenchProgress,
    ) -> Result<Loaded, BenchError> {
        let row_bytes = w.row_bytes;
        let builder = LoadSpec::builder(self.target.options.clone(), table.clone());
        let (builder, input): (_, Arc<dyn load::Input>) = match (rows, &w.rows) {
            (Some(rows), _) => (builder, Arc::new(Generated::new(rows, cell.rows))),
            (None, BenchRows::Tsbs { params, rows }) => {
                let input = GeneratedInput::stream(w.kind.name(), *rows, params).map_err(BenchError::Setup)?;
                let files = TsbsFiles::new(vec![InputSpec::Generated(input)]).map_err(|e| BenchError::Setup(e.to_string()))?;
                (builder.tsbs_schema(Some(BENCH_SCHEMA.to_owned())), Arc::new(files))
            }
            (None, BenchRows::Table(_)) => unreachable!("rows of a table are always given"),
        };
        // The engine's defaults: 4 MiB batches, a quarter of the memory budget at most.
        let batch_bytes = match cell.batch_rows {
            Some(b) => (b as usize).saturating_mul(row_bytes).clamp(row_bytes, builder.memory() / 4),
            None => 4 << 20,
        };
        let rejects = self.out_dir.join(format!("{}.rejects", file_safe(&cell.name)));
        let batch_rows = (batch_bytes / row_bytes) as u64;
        // Every cell loads the same rows into a fresh table: a load of its own
        // for the journal (else the next cell would "resume" and skip them),
        // forgotten once measured.
        let load_id = format!("bench-{}-{}", std::process::id(), file_safe(&cell.name));
        let spec = builder
            .workers(cell.workers)
            .batch_bytes(batch_bytes)
            .via_parent(cell.loader == Loader::ChuteViaParent)
            // Every partition exists already; a row without one is a bench bug.
            .no_create_partitions(true)
            .reject_file(Some(rejects.clone()))
            .load_id(Some(load_id.clone()))
            .build(input)
            .map_err(|e| BenchError::Setup(e.to_string()))?;
        let mut sampler = Sampler::default();
        let report = load::run(spec, &mut sampler).await.map_err(|source| BenchError::Load { cell: cell.name.clone(), source })?;
        if let Ok(client) = self.target.options.connect().await {
            let _ = load::journal::forget(&client, &load_id).await;
        }
        for n in &sampler.notices {
            progress.notice(&format!("cell {}: {n}", cell.name));
        }
        if report.stats.rows_rejected > 0 {
            return Err(BenchError::Check {
                cell: cell.name.clone(),
                message: format!("{} rows were rejected (see {})", report.stats.rows_rejected, rejects.display()),
            });
        }
        Ok(Loaded {
            bytes_sent: report.stats.bytes_sent,
            batch_rows: Some(batch_rows),
            samples: sampler.samples,
            via_parent_reason: report.via_parent_reason,
        })
    }

    /// The server's own CSV COPY, through the parent, as psql \copy sends it.
    async fn psql_copy(&self, cell: &Cell, table: &QualifiedName, path: &Path) -> Result<(), BenchError> {
        let psql = self.psql.ok_or_else(|| BenchError::Setup("psql was not located".into()))?;
        let file = path.display().to_string().replace('\'', "''");
        let mut command = tokio::process::Command::new(psql);
        if let Some(password) = self.target.options.password_for_child_env() {
            command.env("PGPASSWORD", password);
        }
        let out = command
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &self.target.psql_conninfo, "-c"])
            .arg(format!("\\copy {} FROM '{file}' WITH (FORMAT csv)", table.quoted()))
            .stdin(std::process::Stdio::null())
            .output()
            .await
            .map_err(io("cannot run", psql))?;
        if !out.status.success() {
            return Err(BenchError::Check {
                cell: cell.name.clone(),
                message: format!("psql \\copy failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr).trim()),
            });
        }
        Ok(())
    }

    /// Rows, leaves, and the bytes of leaves and their indexes.
    async fn measure_table(&self, table: &QualifiedName) -> Result<(u64, i64, i64, i64), BenchError> {
        let name = table.quoted();
        let row = self
            .client
            .query_one(
                &format!(
                    // pg_partition_tree() lists nothing for a plain table: it is its own leaf.
                    "WITH leaves AS (
                         SELECT relid FROM pg_partition_tree('{name}') WHERE isleaf
                         UNION SELECT oid FROM pg_class WHERE oid = '{name}'::regclass AND relkind = 'r')
                     SELECT (SELECT count(*) FROM {name}), count(*),
                            coalesce(sum(pg_table_size(relid)), 0)::int8, coalesce(sum(pg_indexes_size(relid)), 0)::int8
                     FROM leaves"
                ),
                &[],
            )
            .await
            .map_err(sql("measuring the table"))?;
        let count: i64 = row.get(0);
        Ok((count as u64, row.get(1), row.get(2), row.get(3)))
    }
}

/// What one load reported.
struct Loaded {
    bytes_sent: u64,
    batch_rows: Option<u64>,
    samples: Vec<Sample>,
    via_parent_reason: Option<String>,
}

impl Loaded {
    /// psql reports no progress: the runner adds the one total sample.
    fn psql(bytes: u64) -> Loaded {
        Loaded { bytes_sent: bytes, batch_rows: None, samples: vec![], via_parent_reason: None }
    }
}

/// Collects the loader's progress as samples (it reports about every 250 ms).
#[derive(Debug, Default)]
struct Sampler {
    samples: Vec<Sample>,
    notices: Vec<String>,
}

impl LoadProgress for Sampler {
    fn update(&mut self, s: &LoadStats) {
        let next = Sample { seconds: s.seconds, rows: s.rows_loaded };
        match self.samples.last() {
            Some(last) if last.rows == next.rows => {}
            _ if next.rows == 0 => {}
            _ => self.samples.push(next),
        }
    }

    fn notice(&mut self, message: &str) {
        self.notices.push(message.to_owned());
    }
}

/// Drops every table of the bench's schema and forgets their partition policies.
async fn reset_schema(client: &Client) -> Result<(), BenchError> {
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {BENCH_SCHEMA} CASCADE; CREATE SCHEMA {BENCH_SCHEMA}"))
        .await
        .map_err(sql("emptying the bench schema"))?;
    let has_config: bool =
        client.query_one("SELECT to_regclass('chute.partition_config') IS NOT NULL", &[]).await.map_err(sql("reading the catalog"))?.get(0);
    if has_config {
        client
            .execute("DELETE FROM chute.partition_config WHERE parent_schema = $1", &[&BENCH_SCHEMA])
            .await
            .map_err(sql("forgetting the bench tables' policies"))?;
    }
    Ok(())
}

/// A table's name in the bench schema: its own (iot), else the bench's.
fn table_name(t: &BenchTable) -> String {
    if t.name.is_empty() { BENCH_TABLE.to_owned() } else { t.name.clone() }
}

/// `n` equal ranges over the workload's keys as SQL bounds, the first from
/// MINVALUE and the last to MAXVALUE (pgbench's range partitions). Date
/// keys get whole days.
fn equal_ranges(w: &BenchWorkload, n: u32) -> Result<Vec<(String, String)>, BenchError> {
    const DAY: i64 = 86_400_000_000;
    let n = i64::from(n.max(1));
    let mut width = ((w.key_last - w.key_first + 1) + n - 1) / n;
    if w.key_type == KeyType::Date {
        width = ((width + DAY - 1) / DAY).max(1) * DAY;
    }
    let lit = |v: i64| w.key_type.literal(v).map_err(|e| BenchError::Setup(format!("range bound: {e}")));
    (0..n)
        .map(|i| {
            let from = if i == 0 { "MINVALUE".to_owned() } else { lit(w.key_first + i * width)? };
            let to = if i == n - 1 { "MAXVALUE".to_owned() } else { lit(w.key_first + (i + 1) * width)? };
            Ok((from, to))
        })
        .collect()
}

/// Checkpoint counters moved from pg_stat_bgwriter to pg_stat_checkpointer in PostgreSQL 17.
#[derive(Debug)]
struct StatsQueries {
    checkpoints: &'static str,
}

impl StatsQueries {
    async fn for_server(client: &Client) -> Result<Self, BenchError> {
        let version: i32 = client
            .query_one("SELECT current_setting('server_version_num')::int4", &[])
            .await
            .map_err(sql("reading the server version"))?
            .get(0);
        Ok(StatsQueries {
            checkpoints: if version >= 170_000 {
                "SELECT num_timed, num_requested FROM pg_stat_checkpointer"
            } else {
                "SELECT checkpoints_timed, checkpoints_req FROM pg_stat_bgwriter"
            },
        })
    }

    async fn mark(&self, client: &Client) -> Result<ServerMark, BenchError> {
        let c = client.query_one(self.checkpoints, &[]).await.map_err(sql("reading checkpoint counters"))?;
        let lsn: String = client.query_one("SELECT pg_current_wal_lsn()::text", &[]).await.map_err(sql("reading the WAL position"))?.get(0);
        Ok(ServerMark { lsn, timed: c.get(0), requested: c.get(1) })
    }
}

async fn server_info(client: &Client) -> Result<ServerInfo, BenchError> {
    read_server(client, SETTINGS).await
}

/// The server's version and the named settings, as `current_setting()` shows them.
pub(crate) async fn read_server(client: &Client, names: &[&str]) -> Result<ServerInfo, BenchError> {
    let version: String = client.query_one("SELECT version()", &[]).await.map_err(sql("reading the server version"))?.get(0);
    let mut settings = Vec::new();
    for name in names {
        let v: String = client.query_one("SELECT current_setting($1)", &[name]).await.map_err(sql(format!("reading {name}")))?.get(0);
        settings.push(((*name).to_owned(), v));
    }
    Ok(ServerInfo { version, settings })
}

/// psql on PATH, else the one beside the installed server binaries.
fn psql_program() -> Result<PathBuf, BenchError> {
    let on_path =
        std::env::var_os("PATH").map(|p| std::env::split_paths(&p).map(|d| d.join("psql")).find(|f| f.is_file())).unwrap_or_default();
    on_path.or_else(|| chute_engine::local::ServerBinaries::locate().ok().map(|b| b.program("psql")).filter(|p| p.is_file())).ok_or_else(
        || {
            BenchError::Setup(
                "psql-copy cells need psql, which is not installed: apt-get install postgresql-client (or choose other loaders)".into(),
            )
        },
    )
}

/// A cell name as part of a file name.
fn file_safe(name: &str) -> String {
    name.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
}
