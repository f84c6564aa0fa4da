//! `chute simulate`: the read/write workload of an orders application,
//! run against a table to show what partitioning buys, before and after a
//! migration (after the published partitioning of a live 33 TB orders
//! table, which measured `blks_read` with a load simulator).
//!
//! ```text
//! pacer (token bucket per kind, sine wave) ─tickets─► workers (one per pooled connection) ─► PostgreSQL
//!                                                        │ latency per kind, per second
//! sampler (every second): client windows + pg_stat_database / pg_statio_* / WAL ─► samples ─► report
//! migration (--during-migrate): chute migrate's Migrator, phases marked on the sampler's clock
//! ```
//!
//! Everything the simulator claims it measured: operations are counted
//! when the server answered them, block counters are the server's own (the
//! last sample is read after the pool's sessions ended and flushed their
//! statistics), and where it could not reach the asked-for rates it says so
//! and why instead of reporting the rates it was asked for.

pub mod driver;
pub mod history;
pub mod migration;
pub mod ops;
pub mod pacing;
mod pool;
pub mod report;
pub mod sample;
pub mod stats;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_engine::ConnectOptions;
use hdrhistogram::Histogram;
use tokio_postgres::Client;

use self::driver::{KindWindow, Rates, Shared, UPDATES_PER_ORDER};
use self::migration::MigrateSpec;
use self::ops::{Kind, Order, Shape};
use self::pacing::Wave;
use self::report::{Baseline, SimRun};
use self::sample::{OpSample, PeriodSummary, Sample, summarize};

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error(transparent)]
    Connect(#[from] chute_engine::ConnectError),
    #[error("{0}")]
    Setup(String),
    #[error("{step}: {message}")]
    Sql { step: String, message: String },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: String, source: std::io::Error },
    /// Stopped by a signal; the message says how to go on.
    #[error("{0}")]
    Interrupted(String),
    #[error("loading the history: {0}")]
    Load(#[from] chute_engine::load::LoadError),
}

impl SimError {
    pub(crate) fn sql(step: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> SimError {
        let step = step.into();
        move |e| SimError::Sql { step, message: chute_engine::exec::describe(&e) }
    }

    fn io(what: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> SimError {
        let path = path.display().to_string();
        move |source| SimError::Io { what, path, source }
    }
}

/// Everything a simulation needs, validated.
#[derive(Debug, Clone)]
pub struct SimSpec {
    pub options: ConnectOptions,
    pub table: QualifiedName,
    pub key: String,
    /// Seconds of workload (with a migration: at least; see [`SimSpec::migrate`]).
    pub duration_s: f64,
    /// Peak writes per second: inserts and updates together (each order is
    /// inserted once and updated [`UPDATES_PER_ORDER`] times).
    pub writes_per_s: f64,
    pub reads_per_s: f64,
    pub wave_s: f64,
    /// The insert rate's trough as a fraction of its peak.
    pub floor: f64,
    /// Shares of the reads: by id, by customer, counts (sum 1).
    pub read_mix: [f64; 3],
    pub update_after_s: f64,
    pub customer_days: u32,
    pub count_range_s: f64,
    /// Connections; `None`: sized from the rates.
    pub connections: Option<usize>,
    /// Migrate the table while the workload runs; the run then lasts until
    /// the migration has finished and `after_s` more seconds have passed.
    pub migrate: Option<MigrateSpec>,
    /// An earlier run's output directory to draw beside this one.
    pub compare: Option<PathBuf>,
    pub out_dir: PathBuf,
    pub seed: u64,
    /// Set to stop early (Ctrl-C): the run ends and writes what it measured.
    pub cancel: Arc<AtomicBool>,
}

/// Told about the run as it goes; the binary prints.
pub trait SimProgress: Send {
    fn notice(&mut self, message: &str);
    fn sample(&mut self, sample: &Sample);
}

/// Settings shown in the report: the ones that decide whether the working set fits.
pub const SETTINGS: &[&str] =
    &["shared_buffers", "effective_cache_size", "work_mem", "track_io_timing", "max_connections", "synchronous_commit", "max_wal_size"];

/// Runs the simulation and writes its files into `spec.out_dir`.
pub async fn run(spec: SimSpec, progress: &mut dyn SimProgress) -> Result<SimRun, SimError> {
    std::fs::create_dir_all(&spec.out_dir).map_err(SimError::io("cannot create", &spec.out_dir))?;
    let baseline = spec.compare.as_deref().map(read_baseline).transpose()?;
    let control = spec.options.connect().await?;
    let shape = Arc::new(Shape::read(&control, &spec.table, &spec.key).await?);
    check_privileges(&control, &shape).await?;
    // The first reading comes before the simulator touches the table, so
    // the samples hold everything it did (the first one also its set-up).
    let watch = stats::Watch::new(&shape.table)?;
    let mut stats_conn = stats::Reader::connect(spec.options.clone(), watch).await?;
    let mut counters = stats_conn.read().await?;
    let seed_orders = newest_orders(&control, &shape).await?;
    // The customers --create made, else as many as the newest orders show.
    let customers = match history::recorded_customers(&control, &shape.table).await {
        Some(n) => n as i64,
        None => seed_orders.iter().map(|o| o.customer).max().unwrap_or(0).max(1000),
    };
    let server = crate::run::read_server(&control, SETTINGS).await.map_err(|e| SimError::Setup(e.to_string()))?;
    let rates = rates(&spec);
    let total_peak = rates.inserts.peak + rates.updates_peak + rates.reads.iter().sum::<f64>();
    let free = free_connections(&control).await?;
    let connections = match spec.connections {
        Some(n) if n > free => {
            return Err(SimError::Setup(format!(
                "--connections {n}: the server has {free} connections free (max_connections less those in use and reserved); ask for fewer"
            )));
        }
        Some(n) => n.max(1),
        None => pacing::pool_size(total_peak, free),
    };
    let pids = Arc::new(Mutex::new(Vec::new()));
    let manager = pool::Manager { options: spec.options.clone(), shape: shape.clone(), pids: pids.clone() };
    let pool = pool::Pool::builder(manager)
        .max_size(connections)
        .runtime(deadpool::Runtime::Tokio1)
        .create_timeout(Some(Duration::from_secs(30)))
        .build()
        .map_err(|e| SimError::Setup(format!("cannot make the connection pool: {e}")))?;
    // Every connection is made and its statements prepared before the clock starts.
    let mut warm = Vec::with_capacity(connections);
    for _ in 0..connections {
        warm.push(pool.get().await.map_err(|e| SimError::Setup(format!("cannot open the pool's connections: {e}")))?);
    }
    drop(warm);
    progress.notice(&format!("{connections} connections to {}, {}", shape.table, describe_rates(&spec, &rates)));

    // The set-up read the table on the control connection: that session
    // ends now, flushing its statistics into the first window.
    let control_pid: i32 = control.query_one("SELECT pg_backend_pid()", &[]).await.map_err(SimError::sql("reading the session"))?.get(0);
    drop(control);
    stats::wait_for_exit(stats_conn.client(), &[control_pid], Duration::from_secs(10)).await?;
    let started = Instant::now();
    let shared = Arc::new(Shared::new(started, seed_orders, customers));
    let end: Arc<Mutex<Option<f64>>> = Arc::new(Mutex::new(spec.migrate.is_none().then_some(spec.duration_s)));
    let (tx, rx) = flume::bounded(connections);
    let pacer = tokio::spawn(driver::pace(shared.clone(), rates, tx, end.clone(), spec.seed));
    let workers: Vec<_> = (0..connections)
        .map(|i| {
            let seed = spec.seed ^ (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let spans = driver::Spans {
                update_after_s: spec.update_after_s,
                customer_s: f64::from(spec.customer_days) * 86_400.0,
                count_s: spec.count_range_s,
            };
            tokio::spawn(driver::work(shared.clone(), pool.clone(), shape.clone(), rx.clone(), spans, seed))
        })
        .collect();
    drop(rx);
    let migration = Arc::new(Mutex::new(migration::Progress::default()));
    let migrator = spec
        .migrate
        .clone()
        .map(|m| tokio::spawn(migration::run(spec.options.clone(), shape.table.clone(), spec.key.clone(), m, started, migration.clone())));

    let mut sampler = Sampler::new(&spec, rates);
    let mut ticker = tokio::time::interval_at(tokio::time::Instant::now() + Duration::from_secs(1), Duration::from_secs(1));
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticker.tick().await;
        let t = started.elapsed().as_secs_f64();
        let phase = sampler.phase(&migration, t);
        let s = match stats_conn.read().await {
            Ok(next) => {
                let s = sampler.sample(t, &phase, shared.take_windows(), &shared, stats::delta(&counters, &next), next.leaves);
                counters = next;
                s
            }
            // The server is away (a restart): the workload's errors say so;
            // server figures resume when it is back.
            Err(_) => sampler.sample(t, &phase, shared.take_windows(), &shared, stats::ServerDelta::default(), counters.leaves),
        };
        progress.sample(&s);
        let stop_at = match (&spec.migrate, migration.lock().expect("migration state").finished) {
            (None, _) => spec.duration_s,
            (Some(m), Some(done)) => spec.duration_s.max(done + m.after_s),
            (Some(_), None) => f64::INFINITY,
        };
        *end.lock().expect("end") = Some(stop_at);
        if t + 0.5 >= stop_at || spec.cancel.load(Ordering::Relaxed) {
            break;
        }
    }

    // Stop asking, let the operations in flight finish, close the pool and
    // wait for its sessions to end, so the last sample holds all they did.
    shared.stop.store(true, Ordering::Relaxed);
    let _ = pacer.await;
    for w in workers {
        let _ = w.await;
    }
    pool.close();
    drop(pool);
    let pids: Vec<i32> = pids.lock().expect("pids").clone();
    let left = match stats_conn.reconnected().await {
        Ok(client) => stats::wait_for_exit(client, &pids, Duration::from_secs(10)).await?,
        Err(_) => pids.len(),
    };
    if let Some(task) = migrator {
        if migration.lock().expect("migration state").finished.is_none() {
            task.abort();
            sampler.notes.push(format!(
                "the run was stopped during the migration; the migration stopped with it: run chute migrate {} --split (or the swap again) to finish it",
                shape.table
            ));
        }
        let _ = task.await;
    }
    let t = started.elapsed().as_secs_f64();
    let phase = sampler.phase(&migration, t);
    let last = stats_conn.read().await?;
    let s = sampler.sample(t, &phase, shared.take_windows(), &shared, stats::delta(&counters, &last), last.leaves);
    progress.sample(&s);
    if let Some(note) = stats_conn.outages() {
        sampler.notes.push(note);
    }
    if left > 0 {
        sampler.notes.push(format!(
            "{left} of the pool's sessions had not ended 10 s after the run: the last sample may miss some of their block counts"
        ));
    }
    let state = migration.lock().expect("migration state");
    let run = sampler.finish(&spec, &shape, &shared, &state, RunInfo { server, connections, baseline });
    drop(state);
    write_outputs(&run, &spec.out_dir)?;
    Ok(run)
}

/// The rates the spec asks for.
pub fn rates(spec: &SimSpec) -> Rates {
    let per_order = 1.0 + UPDATES_PER_ORDER as f64;
    let insert_peak = spec.writes_per_s / per_order;
    Rates {
        inserts: Wave { peak: insert_peak, floor: spec.floor, period_s: spec.wave_s },
        updates_peak: insert_peak * UPDATES_PER_ORDER as f64,
        reads: spec.read_mix.map(|m| m * spec.reads_per_s),
        update_after_s: spec.update_after_s,
    }
}

fn describe_rates(spec: &SimSpec, r: &Rates) -> String {
    format!(
        "new orders {:.0}-{:.0}/s on a {:.0} s wave, each updated {UPDATES_PER_ORDER} times {:.0} s apart (up to {:.0} writes/s); reads {:.0}/s ({:.0} by id, {:.0} by customer over {} days, {:.0} counts over {:.0} s)",
        r.inserts.peak * r.inserts.floor,
        r.inserts.peak,
        spec.wave_s,
        spec.update_after_s,
        spec.writes_per_s,
        spec.reads_per_s,
        r.reads[0],
        r.reads[1],
        spec.customer_days,
        r.reads[2],
        spec.count_range_s
    )
}

async fn check_privileges(client: &Client, shape: &Shape) -> Result<(), SimError> {
    let t = shape.table.quoted();
    let row = client
        .query_one(
            "SELECT has_table_privilege($1::text::regclass, 'SELECT'), has_table_privilege($1::text::regclass, 'INSERT'),
                    has_table_privilege($1::text::regclass, 'UPDATE'), current_user::text",
            &[&t],
        )
        .await
        .map_err(SimError::sql("checking privileges"))?;
    let missing: Vec<&str> =
        ["SELECT", "INSERT", "UPDATE"].into_iter().enumerate().filter(|(i, _)| !row.get::<_, bool>(*i)).map(|(_, p)| p).collect();
    if !missing.is_empty() {
        let user: String = row.get(3);
        return Err(SimError::Setup(format!(
            "role {user} may not {} {}: as its owner run psql -c 'GRANT {} ON {t} TO {}' and run again",
            missing.join(", "),
            shape.table,
            missing.join(", "),
            chute_core::ident::quote_ident(&user)
        )));
    }
    Ok(())
}

/// The newest orders, so reads have something to find from the first second.
async fn newest_orders(client: &Client, shape: &Shape) -> Result<Vec<Order>, SimError> {
    let k = chute_core::ident::quote_ident(&shape.key);
    let rows = client
        .query(&format!("SELECT id::int8, {k}, customer_id::int8 FROM {} ORDER BY {k} DESC LIMIT 1000", shape.table.quoted()), &[])
        .await
        .map_err(SimError::sql("reading the newest orders"))?;
    Ok(rows.iter().map(|r| Order { id: r.get(0), key: r.get(1), customer: r.get(2) }).collect())
}

/// Connections the server can still give: max_connections less those in
/// use, the reserved ones and two for the sampler and a migration.
async fn free_connections(client: &Client) -> Result<usize, SimError> {
    let row = client
        .query_one(
            "SELECT current_setting('max_connections')::int - current_setting('superuser_reserved_connections')::int
                    - (SELECT count(*)::int FROM pg_stat_activity WHERE backend_type = 'client backend') - 2",
            &[],
        )
        .await
        .map_err(SimError::sql("reading max_connections"))?;
    Ok(row.get::<_, i32>(0).max(1) as usize)
}

fn read_baseline(dir: &Path) -> Result<Baseline, SimError> {
    let read = |name: &str| {
        let path = dir.join(name);
        std::fs::read_to_string(&path).map_err(SimError::io("cannot read (--compare names an earlier run's --out directory)", &path))
    };
    let samples = sample::parse_samples(&read("samples.csv")?).map_err(SimError::Setup)?;
    let all = sample::parse_summary(&read("summary.csv")?)
        .map_err(SimError::Setup)?
        .into_iter()
        .find(|p| p.period == "all")
        .ok_or_else(|| SimError::Setup(format!("{} has no 'all' row", dir.join("summary.csv").display())))?;
    // Charts and reports get committed and shared: they name the earlier run
    // by its directory's name, never by the path it had on this machine.
    let name = dir.file_name().map_or_else(|| "the earlier run".to_owned(), |n| n.to_string_lossy().into_owned());
    Ok(Baseline { dir: dir.display().to_string(), name, samples, all })
}

/// Writes samples.csv, indexes.csv, summary.csv, report.html and one .svg per chart.
pub fn write_outputs(run: &SimRun, dir: &Path) -> Result<Vec<PathBuf>, SimError> {
    let mut files = vec![
        ("samples.csv".to_owned(), run.samples_csv()),
        ("indexes.csv".to_owned(), run.indexes_csv()),
        ("summary.csv".to_owned(), run.summary_csv()),
        ("report.html".to_owned(), run.html()),
    ];
    files.extend(run.charts().into_iter().map(|(name, svg)| (name.to_owned(), svg.0)));
    crate::run::write_files(dir, files).map_err(|(path, e)| SimError::io("cannot write", &path)(e))
}

/// The machine's load average over the last minute (Linux), if known.
fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg").ok()?.split_whitespace().next()?.parse().ok()
}

/// CPU time this process has used (user and system), in seconds.
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the struct we pass and reads nothing else.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// What the run learned before its first sample, for the report.
struct RunInfo {
    server: crate::report::ServerInfo,
    connections: usize,
    baseline: Option<Baseline>,
}

/// Turns the windows into samples and keeps what the summary needs.
struct Sampler {
    rates: Rates,
    samples: Vec<Sample>,
    last_t: f64,
    last_cpu: f64,
    last_totals: driver::PacerTotals,
    /// Per period name: one merged latency histogram per kind.
    latency: Vec<(String, [Histogram<u64>; 5])>,
    notes: Vec<String>,
    during_migrate: bool,
}

impl Sampler {
    fn new(spec: &SimSpec, rates: Rates) -> Self {
        Sampler {
            rates,
            samples: Vec::new(),
            last_t: 0.0,
            last_cpu: process_cpu_s(),
            last_totals: driver::PacerTotals::default(),
            latency: Vec::new(),
            notes: Vec::new(),
            during_migrate: spec.migrate.is_some(),
        }
    }

    /// The phase at `t`: `run`, or `before`, a migration step, `after`.
    fn phase(&self, migration: &Mutex<migration::Progress>, t: f64) -> String {
        if !self.during_migrate {
            return "run".into();
        }
        let m = migration.lock().expect("migration state");
        match (m.finished, m.markers.iter().rev().find(|(at, _)| *at <= t)) {
            (Some(done), _) if done <= t => "after".into(),
            (_, Some((_, name))) => name.clone(),
            _ => "before".into(),
        }
    }

    fn period_of(phase: &str) -> &str {
        match phase {
            "run" | "before" | "after" => phase,
            _ => "during",
        }
    }

    fn sample(
        &mut self,
        t: f64,
        phase: &str,
        windows: [KindWindow; 5],
        shared: &Shared,
        server: stats::ServerDelta,
        leaves: i64,
    ) -> Sample {
        let totals = shared.totals();
        let cpu = process_cpu_s();
        let window = (t - self.last_t).max(1e-6);
        let period = Self::period_of(phase).to_owned();
        let ops = std::array::from_fn(|i| {
            let w = &windows[i];
            let q = |p: f64| if w.latency.is_empty() { 0.0 } else { w.latency.value_at_quantile(p) as f64 / 1000.0 };
            OpSample {
                requested: totals.requested[i] - self.last_totals.requested[i],
                lost: totals.lost[i] - self.last_totals.lost[i],
                done: w.done,
                errors: w.errors,
                skipped: w.skipped,
                p50_ms: q(0.50),
                p95_ms: q(0.95),
                p99_ms: q(0.99),
                max_ms: if w.latency.is_empty() { 0.0 } else { w.latency.max() as f64 / 1000.0 },
            }
        });
        for name in ["all", period.as_str()] {
            if name == "run" {
                continue;
            }
            let at = match self.latency.iter().position(|(n, _)| n == name) {
                Some(i) => i,
                None => {
                    self.latency.push((name.to_owned(), std::array::from_fn(|_| driver::histogram())));
                    self.latency.len() - 1
                }
            };
            for (h, w) in self.latency[at].1.iter_mut().zip(&windows) {
                let _ = h.add(&w.latency);
            }
        }
        let s = Sample {
            t,
            window,
            phase: phase.to_owned(),
            ops,
            insert_target: self.rates.inserts.rate_at(t),
            server,
            client_cpu_pct: (cpu - self.last_cpu) / window * 100.0,
            busy: shared.busy.load(Ordering::Relaxed),
            leaves,
        };
        self.last_t = t;
        self.last_cpu = cpu;
        self.last_totals = totals;
        self.samples.push(s.clone());
        s
    }

    fn finish(mut self, spec: &SimSpec, shape: &Shape, shared: &Shared, migration: &migration::Progress, info: RunInfo) -> SimRun {
        let RunInfo { server, connections, baseline } = info;
        let layout = |leaves: i64| if leaves <= 1 { "one table".to_owned() } else { format!("{leaves} partitions") };
        let mut periods = Vec::new();
        let names = ["all", "before", "during", "after"];
        for name in names.iter().filter(|n| **n == "all" || self.during_migrate) {
            let picked: Vec<&Sample> = self.samples.iter().filter(|s| *name == "all" || Self::period_of(&s.phase) == *name).collect();
            if picked.is_empty() {
                continue;
            }
            let latency = self.latency.iter().find(|(n, _)| n == name).map(|(_, h)| {
                std::array::from_fn(|i| {
                    let q = |p: f64| if h[i].is_empty() { 0.0 } else { h[i].value_at_quantile(p) as f64 / 1000.0 };
                    (q(0.5), q(0.95), q(0.99), if h[i].is_empty() { 0.0 } else { h[i].max() as f64 / 1000.0 })
                })
            });
            let leaves = picked.last().map_or(1, |s| s.leaves);
            periods.push(summarize(name, &layout(leaves), &picked, latency.unwrap_or_default()));
        }
        let all = periods[0].clone();
        let notes =
            shortfalls(&all, connections, &self.samples, &shared.first_errors(), shared.totals().update_backlog, self.during_migrate);
        self.notes.extend(notes);
        if !shape.defaulted.is_empty() {
            self.notes.push(format!("inserts leave these columns to their defaults (or NULL): {}", shape.defaulted.join(", ")));
        }
        SimRun {
            table: shape.table.to_string(),
            server,
            asked: asked(spec, &self.rates),
            connections,
            samples: self.samples,
            periods,
            markers: migration.markers.clone(),
            notes: self.notes,
            migration_error: migration.error.clone(),
            baseline,
        }
    }
}

fn asked(spec: &SimSpec, r: &Rates) -> Vec<String> {
    let mut v = vec![describe_rates(spec, r)];
    v.push(match &spec.migrate {
        Some(m) => format!(
            "{:.0} s of workload, then chute migrate to {} partitions and the split, then at least {:.0} s more (at least {:.0} s in all)",
            m.after_s, m.interval, m.after_s, spec.duration_s
        ),
        None => format!("{:.0} s of workload", spec.duration_s),
    });
    v
}

/// Where the run fell short of what was asked (under 95%), and why.
fn shortfalls(
    all: &PeriodSummary,
    connections: usize,
    samples: &[Sample],
    first_errors: &[Option<String>; 5],
    backlog: usize,
    during_migrate: bool,
) -> Vec<String> {
    let mut notes = Vec::new();
    let seconds = all.seconds.max(1e-9);
    let cpu = samples.iter().map(|s| s.client_cpu_pct * s.window).sum::<f64>() / seconds;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    for k in Kind::ALL {
        let o = &all.ops[k.index()];
        if o.requested_per_s <= 0.0 || o.share() >= 0.95 {
            continue;
        }
        let asked = o.requested_per_s * seconds;
        let mut why = Vec::new();
        if o.lost > 0.01 * asked {
            let whose = if cpu >= 80.0 {
                "the simulator itself was short of CPU".to_owned()
            } else {
                format!(
                    "the CPU was taken by the server or other processes{}",
                    load_average().map_or(String::new(), |l| format!(" (load average {l:.1})"))
                )
            };
            why.push(format!(
                "{:.0} were never sent because the simulator's pacer ran late: {whose} (the simulator used {cpu:.0}% of one core on average; this machine has {cores} cores, shared with the server)",
                o.lost
            ));
        }
        if o.skipped as f64 > 0.01 * asked {
            let need = all.ops.iter().map(|x| x.requested_per_s * x.p50_ms / 1000.0).sum::<f64>();
            let cause = if need >= connections as f64 * 0.8 {
                format!(
                    "at the measured median latencies the asked-for rates keep about {need:.0} connections busy: the server's latency is the limit (--connections raises the pool if the server has CPU to spare)"
                )
            } else {
                format!(
                    "operations slowed in bursts (p99 {:.1} ms against a median of {:.1} ms{}), and then every connection was taken (--connections raises the pool)",
                    o.p99_ms,
                    o.p50_ms,
                    if during_migrate { ", while the migration locked and copied" } else { "" }
                )
            };
            why.push(format!("{} came due while all {connections} connections were busy (pool exhausted): {cause}", o.skipped));
        }
        if o.errors as f64 > 0.01 * asked {
            why.push(format!("{} failed (first: {})", o.errors, first_errors[k.index()].as_deref().unwrap_or("?")));
        }
        if k == Kind::Update && backlog > 0 {
            why.push(format!("{backlog} orders were due for an update when the run ended"));
        }
        if why.is_empty() {
            why.push("operations were still in flight or waiting for a connection when windows closed".into());
        }
        notes.push(format!(
            "{}: {:.1}/s done of {:.1}/s asked ({:.0}%): {}",
            k.label(),
            o.achieved_per_s,
            o.requested_per_s,
            o.share() * 100.0,
            why.join("; ")
        ));
    }
    for k in Kind::ALL {
        let o = &all.ops[k.index()];
        if o.errors > 0 && o.share() >= 0.95 {
            notes.push(format!("{}: {} failed (first: {})", k.label(), o.errors, first_errors[k.index()].as_deref().unwrap_or("?")));
        }
    }
    notes
}
