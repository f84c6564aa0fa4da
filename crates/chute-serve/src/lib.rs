//! `chute serve`: an HTTP ingest service on the load engine (`chute_engine`),
//! the crate of the HTTP door: the CLI links it, the Python package does not.
//!
//! Devices and agents write InfluxDB line protocol (`POST /write`, `POST
//! /api/v2/write`) or CSV / JSON Lines (`POST /v1/tables/{table}`). Each
//! request's rows become chunks on the lanes of their tables (see `lanes`):
//! one long-running load per table whose COPY batches hold rows of many
//! requests. A request is answered once its acknowledgement fires, that is
//! once every row of it is committed or rejected.
//!
//! A request is **partial**, as InfluxDB's own write API is: its good lines
//! are committed, and the answer is 400 listing each bad line's number and
//! reason (204 when there are none).

// A refusal is an HTTP answer, made once per refused request: boxing it buys nothing.
#![allow(clippy::result_large_err)]

mod auth;
mod body;
mod catalog;
mod check;
mod create;
mod guard;
mod http;
mod influx;
mod keys;
mod lanes;
mod memory;
pub(crate) mod metrics;
pub mod prom;
mod query;
mod samples;
mod submit;
mod tables;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use chute_engine::ConnectOptions;

pub use check::{CheckLevel, CheckLine, check};

/// Everything the service needs, validated by the CLI.
#[derive(Debug, Clone)]
pub struct ServeConfig {
    pub target: ConnectOptions,
    pub listen: SocketAddr,
    /// The schema of every table; `None`: the request's db/bucket, else the search_path.
    pub schema: Option<String>,
    /// COPY connections per table.
    pub workers: usize,
    pub parse_threads: usize,
    /// COPY batch size (bytes of binary rows), per leaf.
    pub batch_bytes: usize,
    /// COPY batch size in rows too (whichever comes first), per leaf.
    pub batch_rows: Option<usize>,
    /// Send a partial batch once its oldest row has waited this long.
    pub max_delay: Duration,
    /// The whole memory budget (see `memory`): three quarters for requests
    /// in flight (bodies, decompressed, parsed), a quarter for the lanes.
    pub memory_budget: usize,
    /// How a request body must arrive: its largest size (as sent and
    /// decompressed), how long it may stall, how slowly it may come.
    body: body::BodyLimits,
    /// How long a request waits for its rows to commit before 503.
    pub request_timeout: Duration,
    /// How long a table's load keeps retrying an unreachable server.
    pub retry_for: Duration,
    /// Chunks queued per table before requests wait.
    pub queue_depth: usize,
    pub no_create_partitions: bool,
    /// Which partitions a table's load may make for requests (see `NewPartitions`).
    pub new_partitions: chute_engine::load::NewPartitions,
    /// How long an `Idempotency-Key` is remembered (and the lanes' journal kept).
    pub idempotency_window: Duration,
    /// Names this service's lanes in the journal, apart from those of other
    /// `chute serve` processes writing the same tables (see `lanes`).
    pub instance_id: String,
    /// Bearer tokens accepted; empty: no authentication.
    pub tokens: Vec<String>,
    /// HTTPS with this certificate chain and private key (PEM files).
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Make a table for a new measurement and columns for new tags and fields.
    pub create_tables: bool,
    /// The partition interval of tables made by `create_tables`.
    pub interval: chute_core::partman::Span,
    /// The longest an `ALTER TABLE … ADD COLUMN` waits for its lock (retried).
    pub lock_timeout: Duration,
    /// Patterns of tables serve may write besides those with a chute policy (see `guard`).
    pub allow_tables: Vec<String>,
    /// Connections open at once; more wait to be accepted.
    pub max_connections: usize,
    /// From a request's first byte to its complete headers (and a TLS handshake).
    pub header_timeout: Duration,
    /// A connection idle this long between requests is closed.
    pub idle_timeout: Duration,
    /// After SIGTERM: how long requests in flight get before they are answered 503.
    pub shutdown_timeout: Duration,
    /// Prometheus remote write and read (`prom`), when on.
    pub prometheus: Option<prom::PromConfig>,
}

/// The instance id of a service that was given none: the host's name and
/// the port it listens on, which no other process on the host has while it
/// runs, and which a restart of it on the same address keeps (its lanes
/// then take over their own journal instead of leaving it behind); with
/// port 0 (any free port), the process id instead.
pub fn default_instance_id(listen: SocketAddr) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    match listen.port() {
        // Any free port: this process's own id.
        0 => format!("{host}:pid{}", std::process::id()),
        port => format!("{host}:{port}"),
    }
}

impl ServeConfig {
    pub fn new(target: ConnectOptions, listen: SocketAddr) -> ServeConfig {
        ServeConfig {
            target,
            listen,
            schema: None,
            workers: 2,
            parse_threads: 1,
            batch_bytes: 4 << 20,
            batch_rows: None,
            max_delay: Duration::from_millis(100),
            memory_budget: 256 << 20,
            body: body::BodyLimits { max: 64 << 20, stall: Duration::from_secs(10), min_rate: 8 << 10 },
            request_timeout: Duration::from_secs(60),
            retry_for: Duration::from_secs(300),
            queue_depth: 64,
            no_create_partitions: false,
            new_partitions: chute_engine::load::NewPartitions {
                per_chunk: 16,
                per_minute: 120,
                max_age: None,
                max_future: Some(Duration::from_secs(86_400)),
            },
            idempotency_window: Duration::from_secs(24 * 3600),
            instance_id: default_instance_id(listen),
            tokens: Vec::new(),
            tls: None,
            create_tables: false,
            interval: chute_core::partman::Span::Time { n: 1, unit: chute_core::partman::interval::Unit::Days },
            lock_timeout: Duration::from_secs(2),
            allow_tables: Vec::new(),
            max_connections: 1024,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            shutdown_timeout: Duration::from_secs(20),
            prometheus: None,
        }
    }

    /// The largest request body, as sent and decompressed.
    pub fn set_max_body(&mut self, bytes: usize) {
        self.body.max = bytes;
    }

    /// How long a body may stall, and the average rate it must come at
    /// (bytes a second) once that long has passed.
    pub fn set_body_pace(&mut self, stall: Duration, min_rate: usize) {
        self.body.stall = stall;
        self.body.min_rate = min_rate;
    }

    /// The part of `memory_budget` every lane's load shares; requests get the rest.
    fn lane_memory(&self) -> usize {
        (self.memory_budget / 4).max(2 << 20)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: SocketAddr, source: std::io::Error },
    #[error("the HTTP server failed: {0}")]
    Http(std::io::Error),
    #[error("{0}")]
    Tls(String),
    /// The target is behind a pooler that shares sessions (see `chute_engine::pooler`).
    #[error("{0}")]
    Pooled(String),
}

/// The state every handler shares.
pub(crate) struct Shared {
    pub config: Arc<ServeConfig>,
    pub lanes: lanes::Lanes,
    pub metrics: Arc<metrics::Metrics>,
    /// The requests' part of the memory budget.
    pub memory: Arc<memory::Pool>,
    pub next_request: std::sync::atomic::AtomicU64,
    pub ready: tokio::sync::Mutex<(Instant, bool)>,
    /// Large requests parse so many at a time (one fewer than the cores,
    /// at least one): the rest wait their turn (see `influx::in_turn`).
    pub parse_slots: tokio::sync::Semaphore,
    /// Where the service is in its life (see `http::Stage`).
    pub stage: tokio::sync::watch::Receiver<http::Stage>,
    /// Prometheus's tables and series cache, with `--prometheus`.
    pub prom: Option<Arc<prom::Prom>>,
}

/// Runs the service until `shutdown` completes: then it stops accepting,
/// answers the requests in flight once their rows are committed (those
/// still waiting after `--shutdown-timeout` get 503), and returns. `bound`
/// is told the address listened on (port 0 picks one) and whether it speaks
/// TLS.
/// Refuses, before it listens, a target behind a pool in transaction or
/// statement mode. A server that cannot be reached now is not an error
/// here (serve starts without PostgreSQL and says so on `/ready`): each
/// lane's load checks again before it moves a row.
async fn refuse_pooled_sessions(config: &ServeConfig) -> Result<(), ServeError> {
    let Ok(Ok(client)) = tokio::time::timeout(Duration::from_secs(3), config.target.connect()).await else {
        return Ok(());
    };
    match chute_engine::pooler::check(&config.target, &client).await {
        Err(refused @ chute_engine::pooler::PoolerError::Pooled(_)) => Err(ServeError::Pooled(refused.to_string())),
        _ => Ok(()),
    }
}

pub async fn serve(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    bound: impl FnOnce(SocketAddr, bool),
) -> Result<(), ServeError> {
    http::raise_open_files();
    memory::tune_allocator();
    refuse_pooled_sessions(&config).await?;
    let config = Arc::new(config);
    let metrics = Arc::new(metrics::Metrics::new());
    let (stage_tx, stage) = tokio::sync::watch::channel(http::Stage::Running);
    let lane_memory = config.lane_memory();
    let shared = Arc::new(Shared {
        lanes: lanes::Lanes::new(config.clone(), metrics.clone(), lane_memory),
        memory: memory::Pool::new(config.memory_budget.saturating_sub(lane_memory).max(1 << 20), metrics.clone()),
        config: config.clone(),
        metrics,
        next_request: Default::default(),
        ready: tokio::sync::Mutex::new((Instant::now() - Duration::from_secs(60), false)),
        parse_slots: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_sub(1).max(1)),
        stage,
        prom: config.prometheus.as_ref().map(prom::Prom::new),
    });
    let app = Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/v1/tables/{table}", post(tables::write_table))
        .route("/query", get(query::query).post(query::query))
        .route("/api/v1/write", post(prom::write))
        .route("/api/v1/read", post(prom::read))
        .route("/v1/metrics", post(prom::otlp_metrics))
        .route("/ping", get(query::ping).head(query::ping))
        .route("/api/v2/ping", get(query::ping).head(query::ping))
        .route("/health", get(query::health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics_text))
        // Bodies are read and limited by `body::read`.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared.clone());
    let tls = match &config.tls {
        Some((cert, key)) => Some(tokio_rustls::TlsAcceptor::from(tls::server_config(cert, key).map_err(ServeError::Tls)?)),
        None => None,
    };
    let listener =
        tokio::net::TcpListener::bind(config.listen).await.map_err(|source| ServeError::Listen { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(ServeError::Http)?;
    bound(addr, tls.is_some());
    let limits = http::Limits {
        max_connections: config.max_connections,
        header_timeout: config.header_timeout,
        idle_timeout: config.idle_timeout,
        shutdown_timeout: config.shutdown_timeout,
    };
    let began = std::sync::Arc::new(std::sync::Mutex::new(None::<tokio::time::Instant>));
    let shutdown = {
        let began = began.clone();
        async move {
            shutdown.await;
            *began.lock().expect("shutdown clock") = Some(tokio::time::Instant::now());
        }
    };
    http::serve_until(listener, tls, app, limits, stage_tx, shutdown).await;
    // The lanes commit what they still hold, within what is left of the deadline (and a few seconds).
    let since = began.lock().expect("shutdown clock").unwrap_or_else(tokio::time::Instant::now);
    shared.lanes.close(since + config.shutdown_timeout + Duration::from_secs(3)).await;
    Ok(())
}

/// Ready while PostgreSQL answers (checked at most once a second) and every
/// table's load is running.
async fn ready(State(s): State<Arc<Shared>>) -> Response {
    let mut r = s.ready.lock().await;
    if r.0.elapsed() >= Duration::from_secs(1) {
        let reachable = match tokio::time::timeout(Duration::from_secs(3), s.config.target.connect()).await {
            Ok(Ok(c)) => c.simple_query("SELECT 1").await.is_ok(),
            _ => false,
        };
        *r = (Instant::now(), reachable && s.lanes.all_up().await);
    }
    if r.1 { (StatusCode::OK, "ready\n").into_response() } else { unavailable("PostgreSQL is unreachable or a table's load is restarting") }
}

async fn metrics_text(State(s): State<Arc<Shared>>) -> Response {
    let mut r = s.metrics.render().into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"));
    r
}

/// 503 with Retry-After and a JSON error body both InfluxDB clients read.
/// Runs `get` again while its error is worth a retry (PostgreSQL may be
/// restarting, a lock may be held), until the request's `deadline`; any
/// other outcome at once.
pub(crate) async fn patiently<T, Fut>(deadline: tokio::time::Instant, mut get: impl FnMut() -> Fut) -> Result<T, catalog::LaneError>
where
    Fut: std::future::Future<Output = Result<T, catalog::LaneError>>,
{
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    chute_engine::retry::run!(&chute_engine::retry::Policy::request(left), |_| get())
}

/// The answer to a request that failed with `e` before any row moved.
pub(crate) fn lane_error(e: &catalog::LaneError) -> Response {
    match e.answer() {
        catalog::Answer::Retry => unavailable(&e.to_string()),
        catalog::Answer::Refuse(status) => {
            let code = if status == StatusCode::NOT_FOUND {
                "not found"
            } else if status == StatusCode::FORBIDDEN {
                "forbidden"
            } else {
                "invalid"
            };
            error(status, code, &e.to_string())
        }
        catalog::Answer::Operator => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error",
            &format!("{e} (chute serve's operator must act: see chute serve --check)"),
        ),
    }
}

pub(crate) fn unavailable(message: &str) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// An error answer with the fields of every answer (see `submit`):
/// `code`, `message` and `error` (v2 clients read the first two, v1 clients
/// `error`), and no line of the request written.
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({
        "code": code, "message": message, "error": message, "line": null, "rejected": [], "rows_committed": 0,
    });
    json(status, body)
}

pub(crate) fn json(status: StatusCode, body: serde_json::Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    r
}
