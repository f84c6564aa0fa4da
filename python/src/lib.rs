//! `chute` for Python (issue 33): the load engine behind three calls.
//!
//! `load` takes anything with the Arrow PyCapsule stream interface
//! (`__arrow_c_stream__`: a pyarrow Table or RecordBatchReader, a polars
//! DataFrame, a pandas DataFrame through pyarrow) and reads its record
//! batches through Arrow's C stream interface, without a copy, as one more
//! columnar input of a load (`LoadInput::Columnar`). The load runs on a
//! thread of its own with the GIL released; the calling thread waits in
//! short steps and checks for signals between them, so Ctrl-C stops the
//! load cleanly (batches in flight finish, what is committed stays, the
//! journal lets the same call resume) and then raises `KeyboardInterrupt`,
//! also while the load waits for a server that does not answer (for up to
//! `retry_for=` seconds); a second Ctrl-C raises it at once.
//!
//! Errors are `chute.Error` with the server's SQLSTATE in `sqlstate`; a
//! load that rejected rows raises `chute.RejectedRows` (a `chute.Error`)
//! with the report, the reject file and the first reject's SQLSTATE.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use chute_arrow::create::{Created, Partitioning, create_table};
use chute_arrow::{BatchStream, Columnar, ColumnarInput};
use chute_core::ident::QualifiedName;
use chute_core::parse::FileFormat;
use chute_core::partman::Span;
use chute_core::upsert::OnConflict;
use chute_engine::ConnectOptions;
use chute_engine::load::{Files, Input, InputSpec, LoadError, LoadProgress, LoadReport, LoadSpec, LoadStats, TextFormat};
use chute_engine::setting::{Setting, name_settings_with};
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

create_exception!(_chute, Error, PyException, "A load or partition call failed; `sqlstate` holds the server's SQLSTATE when it has one.");
create_exception!(
    _chute,
    RejectedRows,
    Error,
    "The load finished but rejected rows: `report`, `reject_file` and `sqlstate` (the first reject's) say which and why."
);

/// What a load did.
#[pyclass(frozen, get_all, module = "chute")]
#[derive(Debug, Clone)]
struct Report {
    table: String,
    rows_loaded: u64,
    rows_rejected: u64,
    /// Rows an earlier run of the same load had committed.
    rows_skipped: u64,
    partitions_created: usize,
    seconds: f64,
    rows_per_second: f64,
    reject_file: Option<String>,
    load_id: Option<String>,
    interrupted: bool,
    /// An upsert (`on_conflict=`): what its committed rows did; `None` otherwise.
    rows_inserted: Option<u64>,
    rows_updated: Option<u64>,
    rows_unchanged: Option<u64>,
}

#[pymethods]
impl Report {
    /// Python's own reprs of the values (`'…'`, `None`).
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let repr = |v: Bound<'_, PyAny>| v.repr().map(|r| r.to_string());
        Ok(format!(
            "Report(table={}, rows_loaded={}, rows_rejected={}, rows_skipped={}, partitions_created={}, seconds={:.2}, load_id={})",
            repr(self.table.clone().into_pyobject(py)?.into_any())?,
            self.rows_loaded,
            self.rows_rejected,
            self.rows_skipped,
            self.partitions_created,
            self.seconds,
            repr(self.load_id.clone().into_pyobject(py)?.into_any())?
        ))
    }
}

impl From<&LoadReport> for Report {
    fn from(r: &LoadReport) -> Report {
        Report {
            table: r.table.clone(),
            rows_loaded: r.stats.rows_loaded,
            rows_rejected: r.stats.rows_rejected,
            rows_skipped: r.stats.rows_skipped,
            partitions_created: r.stats.partitions_created,
            seconds: r.stats.seconds,
            rows_per_second: r.rows_per_second,
            reject_file: r.reject_file.clone(),
            load_id: r.load_id.clone(),
            interrupted: r.interrupted,
            rows_inserted: r.stats.upsert.as_ref().map(|u| u.inserted),
            rows_updated: r.stats.upsert.as_ref().map(|u| u.updated),
            rows_unchanged: r.stats.upsert.as_ref().map(|u| u.unchanged),
        }
    }
}

/// A `chute.Error` (or `cls`) with `message` and `sqlstate`.
fn error_with(py: Python<'_>, message: String, sqlstate: Option<String>) -> PyErr {
    let err = Error::new_err(message);
    let _ = err.value(py).setattr("sqlstate", sqlstate);
    err
}

fn load_error(py: Python<'_>, e: &LoadError) -> PyErr {
    error_with(py, e.to_string(), e.code().map(|c| c.code().to_owned()))
}

/// Settings as keyword arguments: messages say `memory_mb=`, not `--memory-mb`.
fn keyword(setting: Setting, value: Option<&str>) -> String {
    let name = match setting {
        Setting::MemoryBudget => "memory_mb",
        Setting::LoadId => "load_id",
        Setting::Columns => "columns",
        Setting::Format => "format",
        Setting::Workers => "workers",
        Setting::OnConflict => "on_conflict",
        Setting::ConflictKey => "conflict_key",
        Setting::UpdateColumns => "update_columns",
        Setting::UpdateIf => "update_if",
        other => other.field(),
    };
    match value {
        Some(v) => format!("{name}={v:?}"),
        None => format!("{name}="),
    }
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: std::sync::OnceLock<tokio::runtime::Runtime> = std::sync::OnceLock::new();
    RT.get_or_init(|| tokio::runtime::Builder::new_multi_thread().enable_all().worker_threads(2).build().expect("a tokio runtime"))
}

/// The server: `url` (a postgres:// URL or key=value string), else the PG* variables.
fn target(py: Python<'_>, url: Option<&str>) -> PyResult<ConnectOptions> {
    ConnectOptions::resolve(url, &chute_engine::connect::ProcessEnv).map_err(|e| error_with(py, e.to_string(), None))
}

fn table_name(table: &str) -> PyResult<QualifiedName> {
    QualifiedName::parse(table).map_err(|e| PyValueError::new_err(e.to_string()))
}

fn span(what: &str, text: &str) -> PyResult<Span> {
    Span::parse(text).map_err(|e| PyValueError::new_err(format!("{what}={text:?}: {e}")))
}

/// The record batches of `data`, read through the Arrow C stream interface.
fn stream_of(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    let refused = || {
        PyTypeError::new_err(
            "data must have the Arrow PyCapsule stream interface (__arrow_c_stream__): a pyarrow Table or RecordBatchReader, a polars or pandas DataFrame",
        )
    };
    let exporter = if data.hasattr("__arrow_c_stream__")? {
        data.clone()
    } else {
        // A pandas DataFrame of a pandas without the interface: through pyarrow.
        let module: String = data.get_type().getattr("__module__")?.extract()?;
        if !module.starts_with("pandas") {
            return Err(refused());
        }
        py.import("pyarrow").map_err(|_| refused())?.getattr("Table")?.getattr("from_pandas")?.call1((data,))?
    };
    let capsule = exporter.call_method0("__arrow_c_stream__")?;
    let capsule = capsule.cast::<PyCapsule>().map_err(|_| PyTypeError::new_err("__arrow_c_stream__ did not return a PyCapsule"))?;
    let ptr = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: the capsule holds an ArrowArrayStream (its name says so); from_raw
    // moves the stream out and marks the capsule's copy released, so the
    // capsule's destructor does not release it again.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(ptr.as_ptr().cast::<FFI_ArrowArrayStream>()) };
    RecordBatchStreamReader::try_new(stream).map_err(|e| PyTypeError::new_err(format!("cannot read the data's Arrow stream: {e}")))
}

/// Progress lines on stderr, about every two seconds.
struct Lines {
    on: bool,
    last: Instant,
}

impl LoadProgress for Lines {
    fn update(&mut self, stats: &LoadStats) {
        if self.on && self.last.elapsed() >= Duration::from_secs(2) {
            self.last = Instant::now();
            let rate = stats.rows_loaded as f64 / stats.seconds.max(1e-9);
            eprintln!("chute: {} rows loaded ({rate:.0} rows/s), {} rejected", stats.rows_loaded, stats.rows_rejected);
        }
    }
    fn notice(&mut self, message: &str) {
        if self.on {
            eprintln!("chute: {message}");
        }
    }
}

/// Runs `spec` on a thread of its own, the GIL released; Ctrl-C stops it
/// cleanly (also while it waits for the server), a second Ctrl-C at once.
fn run(py: Python<'_>, spec: LoadSpec, progress: bool) -> PyResult<Report> {
    let cancel: Arc<AtomicBool> = spec.cancel();
    let (tx, rx) = flume::bounded(1);
    std::thread::Builder::new()
        .name("chute-load".into())
        .spawn(move || {
            let mut lines = Lines { on: progress, last: Instant::now() };
            let _ = tx.send(runtime().block_on(chute_engine::load::run(spec, &mut lines)));
        })
        .map_err(|e| Error::new_err(format!("cannot start the load's thread: {e}")))?;
    let mut interrupt: Option<PyErr> = None;
    let result = loop {
        match py.detach(|| rx.recv_timeout(Duration::from_millis(100))) {
            Ok(r) => break r,
            Err(flume::RecvTimeoutError::Timeout) => {}
            Err(flume::RecvTimeoutError::Disconnected) => return Err(Error::new_err("the load's thread ended without a result")),
        }
        if let Err(e) = py.check_signals() {
            if interrupt.is_some() {
                // A second Ctrl-C: no waiting for batches in flight (or a server
                // that does not answer); what they hold rolls back with their
                // connections when the load's thread gets to its end.
                return Err(e);
            }
            // Batches in flight finish; what is committed stays and the journal has it.
            cancel.store(true, Ordering::Relaxed);
            interrupt = Some(e);
        }
    };
    if let Some(e) = interrupt {
        return Err(e);
    }
    let report = result.map_err(|e| load_error(py, &e))?;
    let out = Report::from(&report);
    if report.interrupted {
        return Err(PyKeyboardInterrupt::new_err("the load was stopped; the same call resumes it"));
    }
    if out.rows_rejected > 0 {
        let message = format!(
            "{} rows rejected, {} loaded into {}; see {}",
            out.rows_rejected,
            out.rows_loaded,
            out.table,
            out.reject_file.as_deref().unwrap_or("the reject file")
        );
        let err = RejectedRows::new_err(message);
        let value = err.value(py);
        value.setattr("sqlstate", report.first_reject_sqlstate.clone())?;
        value.setattr("reject_file", out.reject_file.clone())?;
        value.setattr("report", out)?;
        return Err(err);
    }
    Ok(out)
}

/// Settings every load call shares.
struct Common {
    load_id: Option<String>,
    workers: Option<usize>,
    columns: Option<Vec<String>>,
    reject_file: Option<String>,
    memory_mb: Option<u64>,
    retry_for: f64,
    upsert: Upsert,
}

/// `on_conflict=` and what goes with it, as `chute load --on-conflict`.
struct Upsert {
    on_conflict: Option<String>,
    conflict_key: Option<Vec<String>>,
    update_columns: Option<Vec<String>>,
    update_if: Option<String>,
}

impl Upsert {
    fn setting(self) -> PyResult<Option<OnConflict>> {
        use chute_core::upsert::ConflictAction;
        let action = match self.on_conflict.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None => {
                let given = [
                    ("conflict_key", self.conflict_key.is_some()),
                    ("update_columns", self.update_columns.is_some()),
                    ("update_if", self.update_if.is_some()),
                ];
                if let Some((name, _)) = given.iter().find(|(_, set)| *set) {
                    return Err(PyValueError::new_err(format!("{name}= goes with on_conflict=\"nothing\" or \"update\"")));
                }
                return Ok(None);
            }
            Some("nothing") => ConflictAction::Nothing,
            Some("update") => ConflictAction::Update,
            Some(other) => return Err(PyValueError::new_err(format!("on_conflict={other:?}: use \"nothing\" or \"update\""))),
        };
        let mut o = OnConflict::new(action);
        (o.key, o.update_columns, o.update_if) = (self.conflict_key, self.update_columns, self.update_if);
        Ok(Some(o))
    }
}

impl Common {
    /// The load of `input` into `table` on `url` with these settings, checked.
    fn spec(self, py: Python<'_>, url: Option<&str>, table: &str, input: Arc<dyn Input>, text: (bool, bool)) -> PyResult<LoadSpec> {
        let (header, ignore_unknown) = text;
        if !(self.retry_for.is_finite() && self.retry_for >= 0.0) {
            return Err(PyValueError::new_err(format!("retry_for={}: give seconds, 0 or more", self.retry_for)));
        }
        let mut b = LoadSpec::builder(target(py, url)?, table_name(table)?)
            .retry_for(Duration::from_secs_f64(self.retry_for))
            .on_conflict(self.upsert.setting()?)
            .load_id(self.load_id)
            .columns(self.columns)
            .reject_file(self.reject_file.map(Into::into))
            .header(header)
            .ignore_unknown(ignore_unknown);
        if let Some(w) = self.workers {
            b = b.workers(w);
        }
        if let Some(m) = self.memory_mb {
            b = b.memory_budget((m as usize) << 20);
        }
        b.build(input).map_err(|e| PyValueError::new_err(e.to_string()))
    }
}

/// `create=True`: the table from the data's schema, partitioned when `key` and `interval` are given.
fn create(
    py: Python<'_>,
    spec: &LoadSpec,
    columnar: Option<&Columnar>,
    key: Option<String>,
    interval: Option<&str>,
    progress: bool,
) -> PyResult<()> {
    let Some(inputs) = columnar.map(Columnar::inputs) else {
        return Err(PyValueError::new_err("create=True makes the table from Parquet or Arrow data's schema"));
    };
    let partitioning = match (key, interval) {
        (Some(key), Some(i)) => Some(Partitioning { key, interval: span("interval", i)? }),
        (None, None) => None,
        _ => {
            return Err(PyValueError::new_err("create=True partitions the table with both key= and interval= (or neither: a plain table)"));
        }
    };
    let (target, table, inputs) = (spec.target().clone(), spec.table().clone(), inputs.to_vec());
    let made = py
        .detach(|| {
            runtime().block_on(async {
                let mut steps = |_: usize, _: &chute_core::partman::plan::Step, _: chute_engine::exec::StepEvent| {};
                create_table(&target, &table, &inputs, partitioning.as_ref(), &mut steps).await
            })
        })
        .map_err(|e| load_error(py, &e))?;
    if progress && let Created::Made { definition, partitions } = made {
        eprintln!("chute: created {} ({definition}; {partitions} partitions)", spec.table());
    }
    Ok(())
}

/// Loads `data` (anything with `__arrow_c_stream__`) into `table`.
#[pyfunction]
#[pyo3(signature = (url, table, data, *, load_id=None, create=false, key=None, interval=None, on_conflict=None, conflict_key=None, update_columns=None, update_if=None, workers=None, columns=None, reject_file=None, memory_mb=None, retry_for=300.0, progress=true))]
#[allow(clippy::too_many_arguments)]
fn load(
    py: Python<'_>,
    url: Option<&str>,
    table: &str,
    data: &Bound<'_, PyAny>,
    load_id: Option<String>,
    create: bool,
    key: Option<String>,
    interval: Option<&str>,
    on_conflict: Option<String>,
    conflict_key: Option<Vec<String>>,
    update_columns: Option<Vec<String>>,
    update_if: Option<String>,
    workers: Option<usize>,
    columns: Option<Vec<String>>,
    reject_file: Option<String>,
    memory_mb: Option<u64>,
    retry_for: f64,
    progress: bool,
) -> PyResult<Report> {
    let upsert = Upsert { on_conflict, conflict_key, update_columns, update_if };
    let reader = stream_of(py, data)?;
    let columnar =
        Columnar::new(vec![ColumnarInput::Stream(BatchStream::new("data", Box::new(reader)))]).map_err(|e| load_error(py, &e))?;
    let spec = Common { load_id, workers, columns, reject_file, memory_mb, retry_for, upsert }.spec(
        py,
        url,
        table,
        Arc::new(columnar.clone()),
        (false, false),
    )?;
    if create {
        self::create(py, &spec, Some(&columnar), key, interval, progress)?;
    } else if key.is_some() || interval.is_some() {
        return Err(PyValueError::new_err("key= and interval= go with create=True"));
    }
    run(py, spec, progress)
}

/// Loads a file: Parquet or Arrow IPC (by its name, or `format="parquet"|"arrow"`),
/// or CSV, PostgreSQL's text format or JSON lines (`format="csv"|"text"|"jsonl"`).
#[pyfunction]
#[pyo3(signature = (url, table, path, *, format=None, header=false, ignore_unknown=false, load_id=None, create=false, key=None, interval=None, on_conflict=None, conflict_key=None, update_columns=None, update_if=None, workers=None, columns=None, reject_file=None, memory_mb=None, retry_for=300.0, progress=true))]
#[allow(clippy::too_many_arguments)]
fn load_file(
    py: Python<'_>,
    url: Option<&str>,
    table: &str,
    path: std::path::PathBuf,
    format: Option<&str>,
    header: bool,
    ignore_unknown: bool,
    load_id: Option<String>,
    create: bool,
    key: Option<String>,
    interval: Option<&str>,
    on_conflict: Option<String>,
    conflict_key: Option<Vec<String>>,
    update_columns: Option<Vec<String>>,
    update_if: Option<String>,
    workers: Option<usize>,
    columns: Option<Vec<String>>,
    reject_file: Option<String>,
    memory_mb: Option<u64>,
    retry_for: f64,
    progress: bool,
) -> PyResult<Report> {
    let upsert = Upsert { on_conflict, conflict_key, update_columns, update_if };
    // The name decides as it does for `chute load` (a Parquet file inside gzip is refused).
    let format = match format {
        Some(f) => f.to_ascii_lowercase(),
        None => match FileFormat::from_names(&[&path.to_string_lossy()]).map_err(PyValueError::new_err)? {
            Some(_) => "arrow".into(),
            None => "csv".into(),
        },
    };
    if ignore_unknown && format != "jsonl" {
        return Err(PyValueError::new_err(
            "ignore_unknown=True drops JSON keys the table has no column for: it goes with format=\"jsonl\"",
        ));
    }
    let text = |f| Files::new(vec![InputSpec::File(path.clone())], f).map(|f| Arc::new(f) as Arc<dyn chute_engine::load::Input>);
    let (input, columnar) = match format.as_str() {
        "parquet" | "arrow" => {
            let c = Columnar::new(vec![ColumnarInput::File(path.clone())]).map_err(|e| load_error(py, &e))?;
            (Arc::new(c.clone()) as Arc<dyn chute_engine::load::Input>, Some(c))
        }
        "csv" => (text(TextFormat::Csv).map_err(|e| load_error(py, &e))?, None),
        "text" => (text(TextFormat::Text).map_err(|e| load_error(py, &e))?, None),
        "jsonl" => (text(TextFormat::Jsonl).map_err(|e| load_error(py, &e))?, None),
        other => return Err(PyValueError::new_err(format!("format={other:?}: use parquet, arrow, csv, text or jsonl"))),
    };
    let spec = Common { load_id, workers, columns, reject_file, memory_mb, retry_for, upsert }.spec(
        py,
        url,
        table,
        input,
        (header, ignore_unknown),
    )?;
    if create {
        self::create(py, &spec, columnar.as_ref(), key, interval, progress)?;
    } else if key.is_some() || interval.is_some() {
        return Err(PyValueError::new_err("key= and interval= go with create=True"));
    }
    run(py, spec, progress)
}

/// Makes `table` partitioned by `key` every `interval`, as `chute partition create` does.
#[pyfunction]
#[pyo3(signature = (url, table, *, key, interval, columns=None, like=None, premake=4, start=None))]
#[allow(clippy::too_many_arguments)]
fn partition_create(
    py: Python<'_>,
    url: Option<&str>,
    table: &str,
    key: String,
    interval: &str,
    columns: Option<String>,
    like: Option<&str>,
    premake: u32,
    start: Option<String>,
) -> PyResult<usize> {
    use chute_core::partman::{KeyType, Policy};
    let interval = span("interval", interval)?;
    let max_future = interval.is_time().then(|| Span::parse("1d").expect("a valid span"));
    let policy = Policy { premake, max_future, ..Policy::new(table_name(table)?, key, KeyType::Timestamptz, interval) };
    let like = like.map(table_name).transpose()?;
    let target = target(py, url)?;
    let req = chute_engine::partman::CreateRequest { policy, like, columns, start };
    let made = py.detach(|| {
        runtime().block_on(async {
            let mut mgr = chute_engine::partman::PartitionManager::connect(&target, chute_engine::exec::ExecSettings::default()).await?;
            let mut steps = |_: usize, _: &chute_core::partman::plan::Step, _: chute_engine::exec::StepEvent| {};
            let (_, plan) = mgr.create(req, chute_engine::clock::now_micros(), false, &mut steps).await?;
            Ok::<usize, chute_engine::partman::PartmanError>(plan.created().count())
        })
    });
    made.map_err(|e| {
        let code = match &e {
            chute_engine::partman::PartmanError::Sql(s) => s.code().map(|c| c.code().to_owned()),
            _ => None,
        };
        error_with(py, e.to_string(), code)
    })
}

#[pymodule]
fn _chute(m: &Bound<'_, PyModule>) -> PyResult<()> {
    name_settings_with(keyword);
    m.add("Error", m.py().get_type::<Error>())?;
    m.add("RejectedRows", m.py().get_type::<RejectedRows>())?;
    m.add_class::<Report>()?;
    m.add_function(wrap_pyfunction!(load, m)?)?;
    m.add_function(wrap_pyfunction!(load_file, m)?)?;
    m.add_function(wrap_pyfunction!(partition_create, m)?)?;
    Ok(())
}
