//! `POST /v1/tables/{table}`: CSV (`Content-Type: text/csv`) or JSON Lines
//! (`application/x-ndjson`) rows, read with the same rules as `chute load`.
//! Query parameters: `header=true` (the first line names the columns),
//! `columns=a,b,c`, `delimiter=;`, `null=NA`, `epoch=s|ms|us|ns`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chute_core::ident::QualifiedName;

use super::Shared;
use super::catalog::LaneError;
use super::lanes::{Shape, TableFormat};
use super::submit::{Part, idempotency_key, submit_and_answer};

pub(crate) async fn write_table(
    State(s): State<Arc<Shared>>,
    Path(table): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let started = Instant::now();
    let r = write(&s, &table, &q, &headers, body).await;
    s.metrics.request("tables", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

fn bad(message: &str) -> Response {
    super::error(StatusCode::BAD_REQUEST, "invalid", message)
}

async fn write(s: &Shared, table: &str, q: &HashMap<String, String>, headers: &HeaderMap, body: axum::body::Body) -> Response {
    if let Err(r) = super::auth::check(&s.config.tokens, headers, q) {
        return r;
    }
    let mut table = match QualifiedName::parse(table) {
        Ok(t) => t,
        Err(e) => return bad(&e.to_string()),
    };
    if table.schema.is_none() {
        table.schema = s.config.schema.clone();
    }
    let content_type = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("text/csv");
    let format = match (q.get("format").map(String::as_str), content_type.split(';').next().unwrap_or("").trim()) {
        (Some("csv"), _) | (None, "text/csv" | "text/plain" | "application/csv") => TableFormat::Csv,
        (Some("jsonl" | "ndjson"), _) | (None, "application/x-ndjson" | "application/jsonl" | "application/json") => TableFormat::Jsonl,
        (Some(f), _) => return bad(&format!("unknown format {f:?}: use csv or jsonl")),
        (None, t) => {
            return super::error(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "invalid",
                &format!("Content-Type {t:?}: send text/csv or application/x-ndjson"),
            );
        }
    };
    let body = match super::body::read(body, s.config.max_body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut data: Vec<u8> = match super::body::decode(headers, body, s.config.max_body) {
        Ok(b) => b.into(),
        Err(r) => return r,
    };
    let Some(_reserved) = s.reserve(data.len()) else {
        return super::influx::too_busy();
    };
    let mut columns: Option<Vec<String>> = q.get("columns").map(|c| c.split(',').map(|c| c.trim().to_owned()).collect());
    let mut first_line = 1;
    if q.get("header").is_some_and(|h| h == "true" || h == "1") {
        let end = memchr_newline(&data).map_or(data.len(), |i| i + 1);
        let head = String::from_utf8_lossy(&data[..end]).trim_end().to_owned();
        data.drain(..end);
        first_line = 2;
        if columns.is_none() && format == TableFormat::Csv {
            let d = q.get("delimiter").map_or(",", String::as_str);
            columns = Some(head.split(d).map(|c| c.trim().trim_matches('"').to_owned()).collect());
        }
    }
    if data.iter().all(u8::is_ascii_whitespace) {
        return StatusCode::NO_CONTENT.into_response();
    }
    if data.last() != Some(&b'\n') {
        data.push(b'\n');
    }
    let delimiter = match q.get("delimiter").map(|d| d.as_bytes()) {
        None => None,
        Some([b]) => Some(*b),
        Some(_) => return bad("delimiter must be one ASCII character"),
    };
    let epoch = match q.get("epoch").map(String::as_str) {
        None => None,
        Some("s") => Some('s'),
        Some("ms") => Some('m'),
        Some("us") => Some('u'),
        Some("ns") => Some('n'),
        Some(e) => return bad(&format!("unknown epoch unit {e:?}: use s, ms, us or ns")),
    };
    let shape = Shape::Table { format, columns, delimiter, null: q.get("null").cloned(), epoch };
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let got = super::while_unreachable(deadline, || s.lanes.get(&table, &shape)).await;
    let lane = match got {
        Ok(l) => l,
        Err(LaneError::Unreachable(e)) => return super::unavailable(&format!("PostgreSQL is unreachable: {e}")),
        Err(e) => return super::error(StatusCode::NOT_FOUND, "not found", &e.to_string()),
    };
    let lines = chute_core::parse::count_lines(&data) as usize;
    s.metrics.received(&table.to_string(), lines as u64, data.len() as u64);
    let part = Part { lane, data, first_line };
    submit_and_answer(s, vec![part], Vec::new(), |l| l, lines, idempotency_key(headers)).await
}

fn memchr_newline(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}
