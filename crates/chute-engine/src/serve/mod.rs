//! `chute serve`: an HTTP ingest service on the load engine.
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
mod create;
mod influx;
mod keys;
mod lanes;
mod metrics;
mod submit;
mod tables;
mod tls;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use crate::ConnectOptions;

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
    /// The budget for request bytes in flight, all requests together:
    /// beyond it new requests get 429 with Retry-After.
    pub memory_budget: usize,
    /// The budget of each table's load (its queues and batches).
    pub lane_memory: usize,
    /// The largest request body, decompressed.
    pub max_body: usize,
    /// How long a request waits for its rows to commit before 503.
    pub request_timeout: Duration,
    /// How long a table's load keeps retrying an unreachable server.
    pub retry_for: Duration,
    /// Chunks queued per table before requests wait.
    pub queue_depth: usize,
    pub no_create_partitions: bool,
    /// How long an `Idempotency-Key` is remembered (and the lanes' journal kept).
    pub idempotency_window: Duration,
    /// Bearer tokens accepted; empty: no authentication.
    pub tokens: Vec<String>,
    /// HTTPS with this certificate chain and private key (PEM files).
    pub tls: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// Make a table for a new measurement and columns for new tags and fields.
    pub create_tables: bool,
    /// The partition interval of tables made by `create_tables`.
    pub interval: String,
    /// The longest an `ALTER TABLE … ADD COLUMN` waits for its lock (retried).
    pub lock_timeout: Duration,
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
            lane_memory: 128 << 20,
            max_body: 64 << 20,
            request_timeout: Duration::from_secs(60),
            retry_for: Duration::from_secs(300),
            queue_depth: 64,
            no_create_partitions: false,
            idempotency_window: Duration::from_secs(24 * 3600),
            tokens: Vec::new(),
            tls: None,
            create_tables: false,
            interval: "1d".into(),
            lock_timeout: Duration::from_secs(2),
        }
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
}

/// The state every handler shares.
pub(crate) struct Shared {
    pub config: Arc<ServeConfig>,
    pub lanes: lanes::Lanes,
    pub metrics: Arc<metrics::Metrics>,
    /// Request bytes in flight, against `memory_budget`.
    pub in_flight: AtomicUsize,
    pub waiting: AtomicUsize,
    pub next_request: std::sync::atomic::AtomicU64,
    pub ready: tokio::sync::Mutex<(Instant, bool)>,
    /// Large requests parse so many at a time (one fewer than the cores,
    /// at least one): the rest wait their turn (see `influx::in_turn`).
    pub parse_slots: tokio::sync::Semaphore,
}

/// A request's share of the memory budget, given back when it is answered.
pub(crate) struct Reserved<'a> {
    shared: &'a Shared,
    bytes: usize,
}

impl Shared {
    /// Takes `bytes` of the budget, or `None` when it is full.
    pub(crate) fn reserve(&self, bytes: usize) -> Option<Reserved<'_>> {
        let limit = self.config.memory_budget;
        let mut used = self.in_flight.load(Ordering::Relaxed);
        loop {
            // A request larger than the whole budget still goes through alone.
            if used > 0 && used + bytes > limit {
                return None;
            }
            match self.in_flight.compare_exchange_weak(used, used + bytes, Ordering::AcqRel, Ordering::Relaxed) {
                Ok(_) => break,
                Err(now) => used = now,
            }
        }
        let waiting = self.waiting.fetch_add(1, Ordering::Relaxed) + 1;
        self.metrics.in_flight(used + bytes, waiting);
        Some(Reserved { shared: self, bytes })
    }
}

impl Drop for Reserved<'_> {
    fn drop(&mut self) {
        let used = self.shared.in_flight.fetch_sub(self.bytes, Ordering::AcqRel) - self.bytes;
        let waiting = self.shared.waiting.fetch_sub(1, Ordering::Relaxed) - 1;
        self.shared.metrics.in_flight(used, waiting);
    }
}

/// Runs the service until `shutdown` completes: then it stops accepting,
/// answers the requests in flight once their rows are committed, and
/// returns. `bound` is told the address listened on (port 0 picks one)
/// and whether it speaks TLS.
pub async fn serve(
    config: ServeConfig,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    bound: impl FnOnce(SocketAddr, bool),
) -> Result<(), ServeError> {
    let config = Arc::new(config);
    let metrics = Arc::new(metrics::Metrics::new());
    let shared = Arc::new(Shared {
        lanes: lanes::Lanes::new(config.clone(), metrics.clone()),
        config: config.clone(),
        metrics,
        in_flight: AtomicUsize::new(0),
        waiting: AtomicUsize::new(0),
        next_request: Default::default(),
        ready: tokio::sync::Mutex::new((Instant::now() - Duration::from_secs(60), false)),
        parse_slots: tokio::sync::Semaphore::new(std::thread::available_parallelism().map_or(2, |n| n.get()).saturating_sub(1).max(1)),
    });
    let app = Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/v1/tables/{table}", post(tables::write_table))
        .route("/ping", get(ping).head(ping))
        .route("/health", get(health))
        .route("/ready", get(ready))
        .route("/metrics", get(metrics_text))
        // Bodies are read and limited by `body::read`.
        .layer(DefaultBodyLimit::disable())
        .with_state(shared.clone());
    let tls = match &config.tls {
        Some((cert, key)) => Some(tls::server_config(cert, key).map_err(ServeError::Tls)?),
        None => None,
    };
    let listener =
        tokio::net::TcpListener::bind(config.listen).await.map_err(|source| ServeError::Listen { addr: config.listen, source })?;
    let addr = listener.local_addr().map_err(ServeError::Http)?;
    let served = match tls {
        Some(tls) => {
            let listener = tls::TlsListener::new(listener, tls).map_err(ServeError::Http)?;
            bound(addr, true);
            axum::serve(listener, app).with_graceful_shutdown(shutdown).await
        }
        None => {
            bound(addr, false);
            axum::serve(listener, app).with_graceful_shutdown(shutdown).await
        }
    };
    // Every request is answered: the lanes commit what they still hold.
    shared.lanes.close().await;
    served.map_err(ServeError::Http)
}

async fn ping() -> StatusCode {
    StatusCode::NO_CONTENT
}

async fn health() -> &'static str {
    "ok\n"
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
/// Runs `get` again every 250 ms while PostgreSQL is unreachable (it may be
/// restarting), until the request's `deadline`; any other outcome at once.
pub(crate) async fn while_unreachable<T, Fut>(deadline: tokio::time::Instant, mut get: impl FnMut() -> Fut) -> Result<T, catalog::LaneError>
where
    Fut: std::future::Future<Output = Result<T, catalog::LaneError>>,
{
    const PAUSE: std::time::Duration = std::time::Duration::from_millis(250);
    loop {
        match get().await {
            Err(catalog::LaneError::Unreachable(_)) if tokio::time::Instant::now() + PAUSE < deadline => tokio::time::sleep(PAUSE).await,
            other => return other,
        }
    }
}

pub(crate) fn unavailable(message: &str) -> Response {
    let mut r = error(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
    r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    r
}

/// An error answer: `{"code", "message", "error"}` (v2 clients read the
/// first two, v1 clients `error`).
pub(crate) fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = serde_json::json!({ "code": code, "message": message, "error": message });
    json(status, body)
}

pub(crate) fn json(status: StatusCode, body: serde_json::Value) -> Response {
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json; charset=utf-8"));
    r
}
