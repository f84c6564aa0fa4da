//! `GET /metrics`: Prometheus text from the `metrics` crate's recorder.
//!
//! Per table: rows and bytes received, rows committed and rejected, bytes
//! of binary COPY sent, COPY batches, partitions created and loads started
//! again after failing; for the service: requests by endpoint and status,
//! acknowledgement latency (request received → every row committed), the
//! bytes of requests in flight (the memory budget's use) and the requests
//! waiting for their rows to commit, per table the requests' chunks queued
//! for its load, and rows of retried requests skipped as already committed;
//! where a request's time goes (`chute_request_stage_seconds`, see
//! `Metrics::stage`); per COPY batch, its COPY and commit time
//! (`chute_batch_commit_seconds`) and rows (`chute_batch_rows`).

use ::metrics::{counter, gauge, histogram};
use metrics_exporter_prometheus::PrometheusHandle;

use chute_engine::load::LoadStats;

pub(crate) struct Metrics {
    handle: Option<PrometheusHandle>,
}

impl Metrics {
    pub(crate) fn new() -> Metrics {
        Metrics { handle: chute_engine::metrics_text::recorder() }
    }

    pub(crate) fn render(&self) -> String {
        self.handle.as_ref().map(|h| h.render()).unwrap_or_default()
    }

    pub(crate) fn received(&self, table: &str, rows: u64, bytes: u64) {
        counter!("chute_rows_received_total", "table" => table.to_owned()).increment(rows);
        counter!("chute_bytes_received_total", "table" => table.to_owned()).increment(bytes);
    }

    pub(crate) fn rejected(&self, table: &str, rows: u64) {
        counter!("chute_rows_rejected_total", "table" => table.to_owned()).increment(rows);
    }

    pub(crate) fn request(&self, endpoint: &'static str, status: u16, seconds: f64) {
        counter!("chute_requests_total", "endpoint" => endpoint, "status" => status.to_string()).increment(1);
        if status < 300 || status == 400 {
            histogram!("chute_ack_latency_seconds", "endpoint" => endpoint).record(seconds);
        }
    }

    /// Where a request's time went: `read_parse` (body read, decoded and
    /// parsed, lanes found), `key` (its Idempotency-Key checked and
    /// recorded), `enqueue` (its chunks handed to their lanes, waiting while
    /// a lane's queue is full), `commit` (from then until every row is
    /// committed: parse thread, batch, COPY and commit), `answer` (the
    /// answer recorded with its key).
    pub(crate) fn stage(&self, stage: &'static str, seconds: f64) {
        histogram!("chute_request_stage_seconds", "stage" => stage).record(seconds);
    }

    pub(crate) fn in_flight(&self, bytes: usize, requests: usize) {
        gauge!("chute_memory_in_flight_bytes").set(bytes as f64);
        gauge!("chute_requests_waiting").set(requests as f64);
    }

    pub(crate) fn lane_failed(&self, table: &str) {
        counter!("chute_load_restarts_total", "table" => table.to_owned()).increment(1);
    }

    /// Requests' chunks waiting for the table's load to take them.
    pub(crate) fn queued(&self, table: &str, chunks: usize) {
        gauge!("chute_queue_depth_chunks", "table" => table.to_owned()).set(chunks as f64);
    }

    /// Rows of retried requests that an earlier attempt had committed.
    pub(crate) fn skipped(&self, rows: u64) {
        counter!("chute_rows_skipped_total").increment(rows);
    }

    pub(crate) fn idempotent_replay(&self) {
        counter!("chute_idempotent_replays_total").increment(1);
    }

    /// Samples of remote write requests as decoded; `dropped`: exemplars and
    /// native histogram samples, which are not stored.
    pub(crate) fn prom_received(&self, samples: u64, dropped: u64) {
        counter!("chute_prometheus_samples_received_total").increment(samples);
        if dropped > 0 {
            counter!("chute_prometheus_dropped_total").increment(dropped);
        }
    }

    /// Samples of remote write requests answered 2xx (every one committed).
    pub(crate) fn prom_committed(&self, samples: u64) {
        counter!("chute_prometheus_samples_committed_total").increment(samples);
    }

    /// A remote write request refused whole (its samples are not counted as received).
    pub(crate) fn prom_refused(&self) {
        counter!("chute_prometheus_requests_refused_total").increment(1);
    }

    /// Samples of remote write requests rejected one by one (a time outside retention, say).
    pub(crate) fn prom_rejected(&self, samples: u64) {
        counter!("chute_prometheus_samples_rejected_total").increment(samples);
    }

    pub(crate) fn prom_series_created(&self, n: u64) {
        counter!("chute_prometheus_series_created_total").increment(n);
    }

    /// A remote read query answered (`outcome`: ok or error), and how long it took.
    pub(crate) fn prom_read(&self, outcome: &'static str, seconds: f64, series: u64, samples: u64) {
        counter!("chute_prometheus_read_queries_total", "outcome" => outcome).increment(1);
        histogram!("chute_prometheus_read_seconds").record(seconds);
        counter!("chute_prometheus_read_series_total").increment(series);
        counter!("chute_prometheus_read_samples_total").increment(samples);
    }

    /// A lane's load reported: the differences since its last report.
    pub(crate) fn lane_progress(&self, table: &str, last: &LoadStats, now: &LoadStats) {
        let d = |a: u64, b: u64| b.saturating_sub(a);
        counter!("chute_rows_committed_total", "table" => table.to_owned()).increment(d(last.rows_loaded, now.rows_loaded));
        counter!("chute_copy_bytes_sent_total", "table" => table.to_owned()).increment(d(last.bytes_sent, now.bytes_sent));
        counter!("chute_copy_batches_total", "table" => table.to_owned()).increment(d(last.batches, now.batches));
        counter!("chute_partitions_created_total", "table" => table.to_owned())
            .increment(d(last.partitions_created as u64, now.partitions_created as u64));
    }
}
