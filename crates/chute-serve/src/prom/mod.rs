//! Prometheus's long-term storage on `chute serve` (`--prometheus`):
//! remote write 1.0 (`POST /api/v1/write`) and remote read (`POST
//! /api/v1/read`), into and out of the tables `store` describes.
//!
//! A remote write request is one more input of the samples table's lane:
//! its label sets become series ids (`store::SeriesCache`, then one
//! statement for those the cache lacks), its samples rows of (series id,
//! time, value) that the `samples` kind of the load engine encodes and
//! routes, and it is answered once they are committed (`submit`), with
//! the status codes Prometheus's queue manager acts on: 2xx done, 4xx
//! dropped (a body that is no snappy `WriteRequest`, a series that breaks
//! a label rule: nothing of it is written), 5xx retried (with
//! `Retry-After`; a full memory budget answers 503 too, since Prometheus
//! 2.42 drops a batch answered 429 unless told otherwise). A retry is
//! exactly once: each request is keyed by the SHA-256 of its body, as an
//! `Idempotency-Key` would key it, so rows an earlier attempt committed
//! are skipped and a request answered before is answered again.
//!
//! Remote read answers each query of a request from PostgreSQL: the
//! series whose labels the matchers accept (`matchers`), then their
//! samples in the time range, by the `(series_id, time)` index in the
//! partitions the range prunes to; sampled or streamed in XOR chunks
//! (`xor`) as the request accepts.

pub(crate) mod labels;
mod matchers;
pub mod otlp;
mod read;
pub(crate) mod store;
pub mod wire;
mod write;
pub mod xor;

pub(crate) use otlp::metrics as otlp_metrics;
pub(crate) use read::read;
pub(crate) use write::write;

use std::sync::Arc;

use crate::ServeConfig;
use crate::catalog::LaneError;

/// `--prometheus`: where its tables are and how they are made.
#[derive(Debug, Clone)]
pub struct PromConfig {
    /// The schema of the series, samples and metadata tables.
    pub schema: String,
    /// Retention of the samples table, when serve makes it.
    pub retention: Option<chute_core::partman::Span>,
    /// Bytes the series cache may hold before it is emptied.
    pub cache_bytes: usize,
}

impl PromConfig {
    pub fn new(schema: impl Into<String>) -> PromConfig {
        PromConfig { schema: schema.into(), retention: None, cache_bytes: 64 << 20 }
    }
}

/// The service's Prometheus state.
pub(crate) struct Prom {
    pub tables: store::Tables,
    retention: Option<chute_core::partman::Span>,
    /// Set once the schema is made (or found): made by the first request
    /// that needs it, so that serve starts while PostgreSQL is away.
    made: tokio::sync::OnceCell<()>,
    pub cache: store::SeriesCache,
    /// Connections for resolving series and keeping metadata.
    pub writers: store::Conns,
    /// Connections for remote read.
    pub readers: store::Conns,
    /// The OTLP metric metadata last stored, by family: an export carries
    /// its metrics' metadata every time, and only what changed is stored.
    pub otlp_metadata: std::sync::Mutex<std::collections::HashMap<String, (i32, String, String)>>,
    /// The samples table's policy as last read, and when.
    policy: std::sync::Mutex<Option<(std::time::Instant, Option<Arc<chute_core::partman::Policy>>)>>,
}

/// How long a policy read is used before it is read again (`chute
/// partition set` may change the retention meanwhile).
const POLICY_FOR: std::time::Duration = std::time::Duration::from_secs(30);

impl Prom {
    pub(crate) fn new(c: &PromConfig) -> Arc<Prom> {
        Arc::new(Prom {
            tables: store::Tables::new(&c.schema),
            retention: c.retention,
            made: tokio::sync::OnceCell::new(),
            cache: store::SeriesCache::new(c.cache_bytes),
            writers: store::Conns::new(2),
            readers: store::Conns::new(2),
            otlp_metadata: std::sync::Mutex::new(std::collections::HashMap::new()),
            policy: std::sync::Mutex::new(None),
        })
    }

    /// Makes the schema, once per process.
    pub(crate) async fn ready(&self, config: &ServeConfig) -> Result<(), LaneError> {
        self.made.get_or_try_init(|| store::ensure_schema(config, &self.tables, self.retention)).await.map(|_| ())
    }
}

impl Prom {
    /// The samples table's policy, read again when older than [`POLICY_FOR`];
    /// `None` when it cannot be read (the load engine checks every row
    /// against the policy anyway).
    pub(crate) async fn policy(&self, config: &ServeConfig) -> Option<Arc<chute_core::partman::Policy>> {
        if let Some((at, p)) = self.policy.lock().expect("policy").as_ref()
            && at.elapsed() < POLICY_FOR
        {
            return p.clone();
        }
        let c = self.writers.get(config).await.ok()?;
        let p = store::samples_policy(&c, &self.tables).await.ok()?.map(Arc::new);
        *self.policy.lock().expect("policy") = Some((std::time::Instant::now(), p.clone()));
        p
    }
}

/// The answer to a request to `--prometheus`'s endpoints when it is off.
pub(crate) fn off() -> axum::response::Response {
    super::error(
        axum::http::StatusCode::NOT_FOUND,
        "not found",
        "this chute serve does not take Prometheus remote write and read: start it with --prometheus",
    )
}
