//! Hands a request's rows to their lanes as chunks sharing one
//! acknowledgement, waits for it, and turns the outcome into the answer.
//!
//! Every answer of a write, whatever its status, has the same fields:
//! `code`, `message` and `error` (v2 clients read the first two, v1 clients
//! `error`), `line` (the first rejected line, or null), `rejected` (each
//! rejected line and why) and `rows_committed` (null when not known: a
//! request answered 503 may have been partly committed).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};

use super::Shared;
use super::http::Stage;
use super::keys::KeyState;
use super::lanes::Lane;
use super::memory::Reservation;
use chute_engine::load::ack::{AckId, AckRef, AckStatus};
use chute_engine::load::model::{Chunk, Payload};

/// Rows for one lane: whole records, numbered from `first_line`, cut into
/// chunks at `cuts` (byte offset in `data`, lines before it in the part;
/// the first cut is at 0) so that no chunk takes much of the lanes' budget.
pub(crate) struct Part {
    pub lane: Arc<Lane>,
    pub data: Vec<u8>,
    pub first_line: u64,
    /// Where the part is cut into chunks: (byte, rows before it).
    pub cuts: Vec<(usize, u64)>,
    /// Rows the service parsed itself (line protocol's values): how many.
    /// They are journaled by index, so a retry finds each row at its place
    /// whatever bytes it encodes to now (the table gained a column between
    /// attempts); `None`: the request's own records, journaled by byte.
    pub rows: Option<u64>,
}

impl Part {
    /// The positions the part takes in its lane's journal: rows or bytes.
    fn span(&self) -> u64 {
        self.rows.unwrap_or(self.data.len() as u64)
    }
}

/// Chunks are cut at the first record boundary past this many bytes.
pub(crate) const CHUNK_BYTES: usize = 1 << 20;

/// A line the request could not write, by the request's own line number.
#[derive(Debug, Clone, serde::Serialize, PartialEq, Eq)]
pub(crate) struct Rejected {
    pub line: u64,
    pub reason: String,
}

impl Ord for Rejected {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.line.cmp(&other.line)
    }
}

impl PartialOrd for Rejected {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// The rejected lines of a request: all of them counted, the first
/// `LISTED` (by line) kept with their reasons, which is what the answer
/// lists. A body of a million bad lines holds a thousand reasons, not a
/// million.
#[derive(Debug, Default)]
pub(crate) struct Rejects {
    /// A max-heap: the kept line with the largest number is the one to drop.
    kept: std::collections::BinaryHeap<Rejected>,
    count: usize,
    /// Bytes the kept reasons take.
    bytes: usize,
}

/// Rejected lines an answer lists.
const LISTED: usize = 1000;

impl Rejects {
    pub(crate) fn push(&mut self, r: Rejected) {
        self.count += 1;
        if self.kept.len() < LISTED {
            self.bytes += r.reason.len() + 32;
            self.kept.push(r);
        } else if self.kept.peek().is_some_and(|last| r.line < last.line) {
            let gone = self.kept.pop().expect("full");
            self.bytes = self.bytes + r.reason.len() - gone.reason.len();
            self.kept.push(r);
        }
    }

    /// What the kept reasons hold in memory.
    pub(crate) fn bytes(&self) -> usize {
        self.bytes
    }
}

/// A request's `Idempotency-Key` and the digest of the request it names.
pub(crate) struct Keyed<'a> {
    pub key: &'a str,
    pub digest: String,
}

/// What a part of a keyed request is to its lane.
enum Plan {
    Send { start: u64 },
    Replay { status: u16, answer: String },
}

/// Sends `parts`, waits until every row is committed or rejected, and
/// answers: 204, 400 listing the rejected lines (`rejects`, plus those the
/// server refused, mapped through `line_of`), 422 (the key was used for
/// another request), or 503. With an idempotency `key`, rows an earlier
/// attempt committed are skipped (see `keys`). `reserved` (the request's
/// memory) is given back once it is answered.
pub(crate) async fn submit_and_answer(
    s: &Shared,
    parts: Vec<Part>,
    mut rejects: Rejects,
    line_of: impl Fn(u64) -> u64,
    total_lines: usize,
    key: Option<Keyed<'_>>,
    reserved: Reservation,
) -> Response {
    let _reserved = reserved;
    if parts.is_empty() {
        let (status, body) = answer(rejects, total_lines, 0);
        return stored(status.as_u16(), body);
    }
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let keys = s.lanes.keys.clone();
    let held = match &key {
        Some(k) => match keys.hold(&s.config, k.key, deadline).await {
            Ok(held) => Some(held),
            Err(super::keys::Busy::Held) => {
                return unknown(&format!(
                    "Idempotency-Key {:?} is still being handled by an earlier attempt (on this chute serve or another one), \
                     which did not end within {:?} (--request-timeout): retry with the same Idempotency-Key",
                    k.key, s.config.request_timeout
                ));
            }
            Err(super::keys::Busy::Lane(e)) => return key_error(&e),
        },
        None => None,
    };
    let keying = std::time::Instant::now();
    let plans = match &key {
        None => parts.iter().map(|p| Plan::Send { start: p.lane.offsets(p.span()).0 }).collect(),
        Some(k) => match plan_keyed(s, &parts, k, deadline).await {
            Ok(plans) => plans,
            Err(r) => return r,
        },
    };
    if key.is_some() {
        s.metrics.stage("key", keying.elapsed().as_secs_f64());
    }
    let enqueue = std::time::Instant::now();
    let (tx, rx) = flume::bounded(1);
    let tag = s.next_request.fetch_add(1, Ordering::Relaxed);
    let ack = AckRef::collecting(AckId { tag, ..AckId::default() }, tx);
    let mut replay = None;
    let mut lanes = Vec::new();
    for (p, plan) in parts.into_iter().zip(plans) {
        let start = match plan {
            Plan::Replay { status, answer } => {
                s.metrics.idempotent_replay();
                replay = Some((status, answer));
                continue;
            }
            Plan::Send { start } => start,
        };
        lanes.push(p.lane.clone());
        send_part(p, start, &ack).await;
    }
    ack.settle();
    if lanes.is_empty()
        && let Some((status, answer)) = replay
    {
        return stored(status, answer);
    }
    s.metrics.stage("enqueue", enqueue.elapsed().as_secs_f64());
    let waiting = std::time::Instant::now();
    let mut stage = s.stage.clone();
    let failed = async {
        // A lane whose load failed has dropped what it held: no need to wait
        // for the deadline. Watching, not a retry.
        loop {
            tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            if let Some(why) = lanes.iter().find_map(|l| l.failure()) {
                return why;
            }
        }
    };
    let outcome = tokio::select! {
        d = tokio::time::timeout_at(deadline, rx.recv_async()) => match d {
            Ok(Ok(c)) => Ok(c),
            Ok(Err(_)) => Err("the service is stopping: retry with the same Idempotency-Key".to_owned()),
            Err(_) => Err(format!(
                "the rows were not committed within {:?} (--request-timeout): PostgreSQL may be unreachable; \
                 retry with the same Idempotency-Key",
                s.config.request_timeout
            )),
        },
        _ = stage.wait_for(|st| *st == Stage::Stopped) => Err(
            "the service is stopping (--shutdown-timeout passed before the rows were committed): \
             retry with the same Idempotency-Key".to_owned()
        ),
        why = failed => Err(format!("the table's load failed ({why}): retry with the same Idempotency-Key")),
    };
    let done = match outcome {
        Ok(done) => done,
        Err(message) => {
            if let Some(held) = held {
                // The key is let go once every chunk of this attempt is committed, rejected
                // or dropped: a retry, here or on another instance, never runs beside it.
                tokio::spawn(async move {
                    let _held = held;
                    let _ = rx.recv_async().await;
                });
            }
            return unknown(&message);
        }
    };
    s.metrics.stage("commit", waiting.elapsed().as_secs_f64());
    if done.status == AckStatus::Failed {
        let why = done.failure.as_deref().map(|w| format!(" ({w})")).unwrap_or_default();
        return unknown(&format!(
            "not every row of the request could be committed{why}: PostgreSQL was unreachable for longer than --retry-for, \
             a partition was dropped while its rows were on their way, the table's load failed, or the service is stopping; \
             retry with the same Idempotency-Key"
        ));
    }
    let committed = done.rows_committed + done.rows_skipped;
    if done.rows_skipped > 0 {
        s.metrics.skipped(done.rows_skipped);
    }
    for r in done.rejects {
        rejects.push(Rejected { line: line_of(r.line), reason: r.reason });
    }
    let (status, body) = answer(rejects, total_lines, committed);
    if let Some(k) = &key {
        // Recorded after the client has its answer; the key stays held until then, so a
        // retry of it waits and finds the answer. Not recorded: a retry finds every row
        // journaled and skips it.
        let (config, metrics, key, ids, answer) =
            (s.config.clone(), s.metrics.clone(), k.key.to_owned(), lanes.iter().map(|l| l.id.clone()).collect::<Vec<_>>(), body.clone());
        tokio::spawn(async move {
            let _held = held;
            let recording = std::time::Instant::now();
            for id in &ids {
                let _ = keys.done(&config, id, &key, status.as_u16(), &answer).await;
            }
            metrics.stage("answer", recording.elapsed().as_secs_f64());
        });
    }
    stored(status.as_u16(), body)
}

/// Sends a part's chunks, each with its offsets and first line.
async fn send_part(p: Part, start: u64, ack: &AckRef) {
    let bounds: Vec<(usize, u64)> = p.cuts.iter().copied().chain(std::iter::once((p.data.len(), p.rows.unwrap_or(0)))).collect();
    let whole = bounds.len() == 2;
    let mut data = Some(p.data);
    for w in bounds.windows(2) {
        let ((from, lines), (to, next)) = (w[0], w[1]);
        let bytes = if whole { data.take().unwrap_or_default() } else { data.as_ref().map_or_else(Vec::new, |d| d[from..to].to_vec()) };
        let chunk = match p.rows {
            Some(_) => Chunk {
                input: 0,
                first_line: p.first_line + lines,
                base_offset: start + lines,
                ack: Some(ack.share()),
                payload: Payload::Rows { data: bytes, rows: next - lines },
            },
            None => Chunk::records(0, bytes, p.first_line + lines, start + from as u64, Some(ack.share())),
        };
        // A lane that is closing drops the chunk: its share fails the request (503).
        let _ = p.lane.send(chunk).await;
    }
}

/// For each part of a keyed request: where its rows go, or the answer an
/// earlier attempt got. Refuses (422) a key used for another request
/// before any row moves.
async fn plan_keyed(s: &Shared, parts: &[Part], k: &Keyed<'_>, deadline: tokio::time::Instant) -> Result<Vec<Plan>, Response> {
    let keys = &s.lanes.keys;
    let unreachable = |e: super::catalog::LaneError| match e.answer() {
        super::catalog::Answer::Retry => unknown(&format!("cannot record the Idempotency-Key: {e}")),
        _ => super::lane_error(&e),
    };
    let mut plans = Vec::new();
    let mut recorded = Vec::new();
    for p in parts {
        let len = p.span();
        let (start, _) = p.lane.offsets(len);
        let at = (p.lane.id.as_str(), &p.lane.table, p.lane.generation());
        let looked =
            super::patiently(deadline, || keys.lookup(&s.config, at, (k.key, &k.digest), start, len)).await.map_err(unreachable)?;
        plans.push(match looked {
            KeyState::New => {
                recorded.push(p.lane.id.clone());
                Plan::Send { start }
            }
            KeyState::Done { status, answer } => Plan::Replay { status, answer },
            KeyState::Other => {
                // Nothing moved yet: forget what this request recorded in its other lanes.
                let _ = keys.forget(&s.config, &recorded, k.key).await;
                return Err(reused(k.key));
            }
            KeyState::Retry { start: at, owner, generation } => {
                // An attempt of this run may have committed rows the run does not
                // know to skip: a new run reads the journal first.
                if owner == keys.owner && generation == p.lane.generation() && !p.lane.restart(s.config.request_timeout).await {
                    return Err(unknown("the table's load is restarting: retry with the same Idempotency-Key"));
                }
                // Another process's attempt (it ended: this request holds the key): once
                // its last batches are in, a run of this lane that reads the journal after
                // them skips what it committed.
                if owner != keys.owner {
                    keys.settle(&s.config, &super::lanes::journals(&p.lane.table)).await.map_err(unreachable)?;
                    let since = tokio::time::Instant::now();
                    if !p.lane.run_since(since, s.config.request_timeout).await {
                        return Err(unknown("the table's load is restarting: retry with the same Idempotency-Key"));
                    }
                }
                super::patiently(deadline, || keys.attempt(&s.config, &p.lane.id, k.key, p.lane.generation()))
                    .await
                    .map_err(unreachable)?;
                Plan::Send { start: at }
            }
        });
    }
    Ok(plans)
}

/// The answer to a request whose key could not be held (nothing moved).
fn key_error(e: &super::catalog::LaneError) -> Response {
    match e.answer() {
        super::catalog::Answer::Retry => unknown(&format!("cannot record the Idempotency-Key: {e}")),
        _ => super::lane_error(e),
    }
}

fn reused(key: &str) -> Response {
    super::error(
        StatusCode::UNPROCESSABLE_ENTITY,
        "conflict",
        &format!(
            "Idempotency-Key {key:?} was already used for another request (another body or target), so nothing was written: \
             a retry must send the same request with its key; send a new request with a new key"
        ),
    )
}

/// 503 for a request whose rows may be partly committed.
fn unknown(message: &str) -> Response {
    let mut r = super::unavailable(message);
    let body = serde_json::json!({
        "code": "unavailable", "message": message, "error": message, "line": null, "rejected": [], "rows_committed": null,
    });
    *r.body_mut() = axum::body::Body::from(body.to_string());
    r
}

/// The answer (status and body) for a request whose rows are all committed or rejected.
fn answer(rejects: Rejects, total_lines: usize, committed: u64) -> (StatusCode, String) {
    if rejects.count == 0 {
        return (StatusCode::NO_CONTENT, String::new());
    }
    let count = rejects.count;
    let listed = rejects.kept.into_sorted_vec();
    let first = &listed[0];
    let message = if committed == 0 {
        format!("no line was written: {count} of {total_lines} lines rejected; line {}: {}", first.line, first.reason)
    } else {
        format!("partial write: {count} of {total_lines} lines rejected, the others are committed; line {}: {}", first.line, first.reason)
    };
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_keep_the_first_lines_reasons_and_count_them_all() {
        let mut r = Rejects::default();
        for line in (1..=5000u64).rev() {
            r.push(Rejected { line, reason: format!("bad {line}") });
        }
        assert_eq!(r.count, 5000);
        assert_eq!(r.kept.len(), LISTED);
        let (status, body) = answer(r, 6000, 1000);
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let v: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert!(v["message"].as_str().unwrap().starts_with("partial write: 5000 of 6000 lines rejected"), "{body}");
        assert_eq!(v["line"], 1);
        let lines: Vec<u64> = v["rejected"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
        assert_eq!(lines, (1..=1000).collect::<Vec<_>>());
    }
}
