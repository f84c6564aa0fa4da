//! The process's metrics as Prometheus text: the `metrics` crate's recorder,
//! installed once, rendered for a `GET /metrics` (a service's, a
//! consumer's). The engine itself records each COPY batch's commit time
//! and rows (`chute_batch_commit_seconds`, `chute_batch_rows`); what a
//! front end records it records with the `metrics` macros.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// The process's recorder: installed on the first call (a second service in
/// the same process shares it). `None` when another recorder was installed.
pub fn recorder() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let buckets = [0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0];
            let rows = [100.0, 1e3, 1e4, 3e4, 1e5, 3e5, 1e6];
            PrometheusBuilder::new()
                .set_buckets(&buckets)
                .ok()?
                .set_buckets_for_metric(metrics_exporter_prometheus::Matcher::Full("chute_batch_rows".into()), &rows)
                .ok()?
                .install_recorder()
                .ok()
        })
        .clone()
}

/// Every metric recorded so far, as Prometheus text (empty without a recorder).
pub fn render() -> String {
    recorder().map(|h| h.render()).unwrap_or_default()
}
