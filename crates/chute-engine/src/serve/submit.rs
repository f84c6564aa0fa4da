//! Hands a request's rows to their lanes as chunks sharing one
//! acknowledgement, waits for it, and turns the outcome into the answer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::lanes::Lane;
use crate::load::ack::{AckId, AckRef, AckStatus};
use crate::load::model::Chunk;

/// Rows for one lane: whole records, numbered from `first_line`.
pub(crate) struct Part {
    pub lane: Arc<Lane>,
    pub data: Vec<u8>,
    pub first_line: u64,
}

/// A line the request could not write, by the request's own line number.
#[derive(Debug, Clone, serde::Serialize)]
pub(crate) struct Rejected {
    pub line: u64,
    pub reason: String,
}

/// Sends `parts`, waits until every row is committed or rejected, and
/// answers: 204, 400 listing the rejected lines (`rejects`, plus those the
/// server refused, mapped through `line_of`), or 503.
pub(crate) async fn submit_and_answer(
    s: &Shared,
    parts: Vec<Part>,
    mut rejects: Vec<Rejected>,
    line_of: impl Fn(u64) -> u64,
    total_lines: usize,
) -> Response {
    let mut committed = 0;
    if !parts.is_empty() {
        let (tx, rx) = flume::bounded(1);
        let tag = s.next_request.fetch_add(1, Ordering::Relaxed);
        let ack = AckRef::collecting(AckId { tag, ..AckId::default() }, tx);
        for p in parts {
            let len = p.data.len() as u64;
            let (start, _) = p.lane.offsets(len);
            let chunk = Chunk {
                input: 0,
                data: p.data,
                first_line: p.first_line,
                base_offset: start,
                seq: None,
                oversized: None,
                ack: Some(ack.share()),
            };
            // A lane that is closing drops the chunk: its share fails the request (503).
            let _ = p.lane.send(chunk).await;
        }
        ack.settle();
        let done = match tokio::time::timeout(s.config.request_timeout, rx.recv_async()).await {
            Ok(Ok(c)) => c,
            Ok(Err(_)) => return super::unavailable("the service is stopping: retry"),
            Err(_) => {
                return super::unavailable(&format!(
                    "the rows were not committed within {:?} (--request-timeout): PostgreSQL may be unreachable; \
                     retry with the same Idempotency-Key",
                    s.config.request_timeout
                ));
            }
        };
        if done.status == AckStatus::Failed {
            return super::unavailable(
                "not every row of the request could be committed (PostgreSQL was unreachable for longer than --retry-for, \
                 or the service is stopping): retry with the same Idempotency-Key",
            );
        }
        committed = done.rows_committed + done.rows_skipped;
        rejects.extend(done.rejects.into_iter().map(|r| Rejected { line: line_of(r.line), reason: r.reason }));
    }
    if rejects.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    rejects.sort_by_key(|r| r.line);
    let first = &rejects[0];
    let message = format!(
        "partial write: {} of {} lines rejected, the others are committed; line {}: {}",
        rejects.len(),
        total_lines,
        first.line,
        first.reason
    );
    let listed: Vec<&Rejected> = rejects.iter().take(1000).collect();
    super::json(
        StatusCode::BAD_REQUEST,
        serde_json::json!({
            "code": "invalid",
            "message": message,
            "error": message,
            "line": first.line,
            "rejected": listed,
            "rows_committed": committed,
        }),
    )
}
