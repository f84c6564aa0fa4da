//! Hands a request's rows to their lanes as chunks sharing one
//! acknowledgement, waits for it, and turns the outcome into the answer.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::keys::KeyState;
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
/// server refused, mapped through `line_of`), or 503. With an idempotency
/// `key`, rows an earlier attempt committed are skipped (see `keys`).
pub(crate) async fn submit_and_answer(
    s: &Shared,
    parts: Vec<Part>,
    mut rejects: Vec<Rejected>,
    line_of: impl Fn(u64) -> u64,
    total_lines: usize,
    key: Option<&str>,
) -> Response {
    let mut committed = 0;
    let keys = s.lanes.keys.clone();
    let mut held = Vec::new();
    let mut keyed_lanes = Vec::new();
    let mut replay: Option<(u16, String)> = None;
    let mut sent = 0;
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    if !parts.is_empty() {
        let enqueue = std::time::Instant::now();
        let (tx, rx) = flume::bounded(1);
        let tag = s.next_request.fetch_add(1, Ordering::Relaxed);
        let ack = AckRef::collecting(AckId { tag, ..AckId::default() }, tx);
        for p in parts {
            let len = p.data.len() as u64;
            let (mut start, _) = p.lane.offsets(len);
            if let Some(k) = key {
                held.push(keys.hold(&p.lane.id, k).await);
                let looked =
                    patiently(deadline, || keys.lookup(&s.config, (&p.lane.id, &p.lane.table, p.lane.generation()), k, start, len)).await;
                match looked {
                    Err(e) => return super::unavailable(&format!("cannot record the Idempotency-Key: {e}")),
                    Ok(KeyState::New) => {}
                    Ok(KeyState::Done { status, answer }) => {
                        s.metrics.idempotent_replay();
                        replay = Some((status, answer));
                        continue;
                    }
                    Ok(KeyState::Retry { start: at, owner, generation }) => {
                        // An attempt of this run may have committed rows the run does not
                        // know to skip: a new run reads the journal first.
                        if owner == keys.owner && generation == p.lane.generation() && !p.lane.restart(s.config.request_timeout).await {
                            return super::unavailable("the table's load is restarting: retry");
                        }
                        if let Err(e) = patiently(deadline, || keys.attempt(&s.config, &p.lane.id, k, p.lane.generation())).await {
                            return super::unavailable(&format!("cannot record the Idempotency-Key: {e}"));
                        }
                        start = at;
                    }
                }
                keyed_lanes.push(p.lane.id.clone());
            }
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
            sent += 1;
        }
        ack.settle();
        if sent == 0
            && let Some((status, answer)) = replay
        {
            return stored(status, answer);
        }
        s.metrics.stage("enqueue", enqueue.elapsed().as_secs_f64());
        let waiting = std::time::Instant::now();
        let done = match tokio::time::timeout_at(deadline, rx.recv_async()).await {
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
        s.metrics.stage("commit", waiting.elapsed().as_secs_f64());
        if done.status == AckStatus::Failed {
            return super::unavailable(
                "not every row of the request could be committed (PostgreSQL was unreachable for longer than --retry-for, \
                 a partition was dropped while its rows were on their way, or the service is stopping): \
                 retry with the same Idempotency-Key",
            );
        }
        committed = done.rows_committed + done.rows_skipped;
        if done.rows_skipped > 0 {
            s.metrics.skipped(done.rows_skipped);
        }
        rejects.extend(done.rejects.into_iter().map(|r| Rejected { line: line_of(r.line), reason: r.reason }));
    }
    let (status, answer) = answer(rejects, total_lines, committed);
    if let Some(k) = key {
        for lane in &keyed_lanes {
            // Not recorded: a retry finds every row journaled and skips it.
            let _ = keys.done(&s.config, lane, k, status.as_u16(), &answer).await;
        }
    }
    drop(held);
    stored(status.as_u16(), answer)
}

/// Tries `f` until it succeeds or `deadline` passes (PostgreSQL may be
/// restarting): the last error then.
pub(crate) async fn patiently<T, F: Future<Output = Result<T, String>>>(
    deadline: tokio::time::Instant,
    mut f: impl FnMut() -> F,
) -> Result<T, String> {
    loop {
        match f().await {
            Ok(v) => return Ok(v),
            Err(e) if tokio::time::Instant::now() + std::time::Duration::from_millis(250) >= deadline => return Err(e),
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(250)).await,
        }
    }
}

/// The answer (status and body) for a request whose rows are all committed or rejected.
fn answer(mut rejects: Vec<Rejected>, total_lines: usize, committed: u64) -> (StatusCode, String) {
    if rejects.is_empty() {
        return (StatusCode::NO_CONTENT, String::new());
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
    let body = serde_json::json!({
        "code": "invalid",
        "message": message,
        "error": message,
        "line": first.line,
        "rejected": listed,
        "rows_committed": committed,
    });
    (StatusCode::BAD_REQUEST, body.to_string())
}

fn stored(status: u16, answer: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::NO_CONTENT);
    if status == StatusCode::NO_CONTENT {
        return status.into_response();
    }
    match serde_json::from_str(&answer) {
        Ok(v) => super::json(status, v),
        Err(_) => (status, answer).into_response(),
    }
}

/// The request's `Idempotency-Key` (or `X-Request-Id`), when it has one.
pub(crate) fn idempotency_key(headers: &axum::http::HeaderMap) -> Option<&str> {
    ["idempotency-key", "x-request-id"].iter().find_map(|h| headers.get(*h)?.to_str().ok()).map(str::trim).filter(|k| !k.is_empty())
}
