//! InfluxDB's write API: v1 `POST /write?db=…&precision=…` and v2 `POST
//! /api/v2/write?bucket=…&org=…&precision=…`.
//!
//! The measurement is the table, in the schema `--schema` names, else the
//! request's db (v1) or bucket (v2), else the search_path. Tags and fields
//! go into the columns of the same names, the timestamp into `time` (or the
//! table's timestamp partition key). A line's parsed values go to the
//! table's lane as they are, in its column order (`load::values`): encoded
//! into binary COPY rows without being written and parsed again as text, and
//! landing as the same values written as CSV and loaded with `chute load …
//! --epoch ns` would.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chute_core::ident::QualifiedName;
use chute_core::parse::lineproto::{FieldType, FieldValue, Line, Precision, parse_lines};
use rustc_hash::FxHashMap;

use super::Shared;
use super::catalog::{ColKind, LaneError};
use super::create::Wanted;
use super::submit::{Part, Rejected, idempotency_key, submit_and_answer};
use crate::load::values::ValueRows;

pub(crate) async fn write_v1(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let started = Instant::now();
    let r = write(&s, &q, &headers, body, q.get("db")).await;
    s.metrics.request("v1_write", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

pub(crate) async fn write_v2(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let started = Instant::now();
    let r = write(&s, &q, &headers, body, q.get("bucket")).await;
    s.metrics.request("v2_write", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

async fn write(s: &Shared, q: &HashMap<String, String>, headers: &HeaderMap, body: axum::body::Body, db: Option<&String>) -> Response {
    let started = Instant::now();
    if let Err(r) = super::auth::check(&s.config.tokens, headers, q) {
        return r;
    }
    let precision = match Precision::parse(q.get("precision").map_or("", String::as_str)) {
        Ok(p) => p,
        Err(e) => return super::error(StatusCode::BAD_REQUEST, "invalid", &e),
    };
    let body = match super::body::read(body, s.config.max_body).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let body = match super::body::decode(headers, body, s.config.max_body) {
        Ok(b) => b,
        Err(r) => return r,
    };
    // The body, and its rows again as CSV, while the request is in flight.
    let Some(_reserved) = s.reserve(body.len() * 2) else {
        return too_busy();
    };
    let text = match std::str::from_utf8(&body) {
        Ok(t) => t,
        Err(e) => {
            let line = body[..e.valid_up_to()].iter().filter(|&&b| b == b'\n').count() + 1;
            return super::error(StatusCode::BAD_REQUEST, "invalid", &format!("line {line}: not UTF-8 text"));
        }
    };
    let schema = s.config.schema.as_ref().or(db.filter(|d| !d.is_empty()));
    let now_ns = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i64);

    let mut rejects = Vec::new();
    let mut total = 0usize;
    let mut by_table: BTreeMap<String, Vec<(u64, Line<'_>)>> = BTreeMap::new();
    // Per measurement, each field's type and the line it was first seen in
    // (looked up by &str: nothing is allocated per line but a new name).
    let mut types: FxHashMap<String, FxHashMap<String, (FieldType, u64)>> = FxHashMap::default();
    let big = text.len() >= OFF_RUNTIME_BYTES;
    off_runtime(big, || {
        parse_lines(text, precision, now_ns, |n, r| {
            total += 1;
            match r {
                Err(reason) => rejects.push(Rejected { line: n, reason }),
                Ok(l) => {
                    if !types.contains_key(l.measurement.as_ref()) {
                        types.insert(l.measurement.to_string(), FxHashMap::default());
                    }
                    let seen = types.get_mut(l.measurement.as_ref()).expect("inserted above");
                    // A field keeps one type within a request.
                    for (k, v) in &l.fields {
                        let t = v.field_type();
                        match seen.get(k.as_ref()) {
                            Some(&(was, first)) if was != t => {
                                let reason = format!("field {k:?} is {} here but {} in line {first}", article(t), article(was));
                                rejects.push(Rejected { line: n, reason });
                                return;
                            }
                            Some(_) => {}
                            None => {
                                seen.insert(k.to_string(), (t, n));
                            }
                        }
                    }
                    match by_table.get_mut(l.measurement.as_ref()) {
                        Some(lines) => lines.push((n, l)),
                        None => {
                            by_table.insert(l.measurement.to_string(), vec![(n, l)]);
                        }
                    }
                }
            }
        })
    });

    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let mut parts = Vec::new();
    let mut line_of: Vec<u64> = Vec::new();
    for (measurement, lines) in by_table {
        let table = match schema {
            Some(sc) => QualifiedName::new(sc.clone(), measurement.clone()),
            None => QualifiedName { schema: None, name: measurement.clone() },
        };
        // What a new table or new columns need: only with --create-tables.
        let wanted = if s.config.create_tables { wanted_columns(&lines) } else { Vec::new() };
        let got = super::while_unreachable(deadline, || s.lanes.lines(&table, &wanted)).await;
        let lane = match got {
            Ok(l) => l,
            Err(LaneError::Unreachable(e)) => return super::unavailable(&format!("PostgreSQL is unreachable: {e}")),
            Err(e) => {
                let reason = e.to_string();
                rejects.extend(lines.iter().map(|(n, _)| Rejected { line: *n, reason: reason.clone() }));
                s.metrics.rejected(&table.to_string(), lines.len() as u64);
                continue;
            }
        };
        let index: FxHashMap<&str, usize> = lane.columns.iter().enumerate().map(|(i, c)| (c.name.as_str(), i)).collect();
        let first_line = line_of.len() as u64 + 1;
        let mut rows_out = ValueRows::with_capacity(lines.len() * 64);
        let mut cells: Vec<Option<Cell<'_>>> = vec![None; lane.columns.len()];
        let mut rows = 0u64;
        off_runtime(big, || {
            'line: for (n, l) in &lines {
                cells.iter_mut().for_each(|c| *c = None);
                for (k, v) in &l.tags {
                    match index.get(k.as_ref()).map(|&i| (i, &lane.columns[i])) {
                        Some((i, c)) if c.kind != ColKind::Time => cells[i] = Some(Cell::Tag(v)),
                        _ => {
                            rejects.push(Rejected { line: *n, reason: missing(&table, k, "tag") });
                            continue 'line;
                        }
                    }
                }
                for (k, v) in &l.fields {
                    match index.get(k.as_ref()).map(|&i| (i, &lane.columns[i])) {
                        Some((i, c)) if c.kind != ColKind::Time => {
                            if !fits(c.kind, v.field_type()) {
                                let reason = format!(
                                    "field {k:?} is {} but column {:?} of {table} is {}",
                                    article(v.field_type()),
                                    c.name,
                                    c.type_name
                                );
                                rejects.push(Rejected { line: *n, reason });
                                continue 'line;
                            }
                            cells[i] = Some(Cell::Field(v));
                        }
                        _ => {
                            rejects.push(Rejected { line: *n, reason: missing(&table, k, "field") });
                            continue 'line;
                        }
                    }
                }
                rows_out.int(l.time_ns);
                for c in &cells[1..] {
                    match c {
                        None => rows_out.null(),
                        Some(Cell::Tag(t)) => rows_out.text(t),
                        Some(Cell::Field(FieldValue::Str(t))) => rows_out.text(t),
                        Some(Cell::Field(FieldValue::Float(f))) => rows_out.float(*f),
                        Some(Cell::Field(FieldValue::Int(i))) => rows_out.int(*i),
                        Some(Cell::Field(FieldValue::UInt(u))) => rows_out.uint(*u),
                        Some(Cell::Field(FieldValue::Bool(b))) => rows_out.bool(*b),
                    }
                }
                line_of.push(*n);
                rows += 1;
            }
        });
        s.metrics.received(&table.to_string(), lines.len() as u64, rows_out.len() as u64);
        if rows > 0 {
            parts.push(Part { lane, data: rows_out.into_bytes(), first_line });
        }
    }
    let lines = line_of;
    s.metrics.stage("read_parse", started.elapsed().as_secs_f64());
    submit_and_answer(s, parts, rejects, |row| lines.get(row as usize - 1).copied().unwrap_or(0), total, idempotency_key(headers)).await
}

/// Bodies at least this large are parsed off the runtime's worker threads.
const OFF_RUNTIME_BYTES: usize = 16 << 10;

/// Runs the CPU-bound part of a large request (`big`) with
/// `block_in_place`: the runtime hands this worker's other tasks (the lanes'
/// coordinators and COPY workers, other requests' I/O) to another worker
/// thread, so they never queue behind a request's parsing; the OS shares
/// the cores between them instead.
fn off_runtime<T>(big: bool, f: impl FnOnce() -> T) -> T {
    let multi = tokio::runtime::Handle::try_current().is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if big && multi { tokio::task::block_in_place(f) } else { f() }
}

/// Every tag and field of a measurement's lines, in order of appearance,
/// fields with their type (the first line's: a change is rejected above).
fn wanted_columns(lines: &[(u64, Line<'_>)]) -> Vec<(String, Wanted)> {
    let mut out: Vec<(String, Wanted)> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (_, l) in lines {
        for (k, _) in &l.tags {
            if seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Tag));
            }
        }
        for (k, v) in &l.fields {
            if seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Field(v.field_type())));
            }
        }
    }
    out
}

#[derive(Clone, Copy)]
enum Cell<'a> {
    Tag(&'a str),
    Field(&'a FieldValue<'a>),
}

pub(crate) fn too_busy() -> Response {
    let mut r = super::error(
        StatusCode::TOO_MANY_REQUESTS,
        "too many requests",
        "the memory budget for requests in flight is full (--memory-mb): retry after a second",
    );
    r.headers_mut().insert(axum::http::header::RETRY_AFTER, axum::http::HeaderValue::from_static("1"));
    r
}

fn missing(table: &QualifiedName, key: &str, what: &str) -> String {
    format!(
        "table {table} has no column {key:?} for {what} {key:?}: add it (ALTER TABLE {} ADD COLUMN …) or run chute serve with --create-tables",
        table.quoted()
    )
}

/// Whether a field of type `t` may go into a column of kind `k`.
fn fits(k: ColKind, t: FieldType) -> bool {
    match k {
        ColKind::Bool => t == FieldType::Bool,
        ColKind::Integer => matches!(t, FieldType::Int | FieldType::UInt),
        ColKind::Number => matches!(t, FieldType::Float | FieldType::Int | FieldType::UInt),
        ColKind::Text => t == FieldType::Str,
        ColKind::Time => false,
        ColKind::Other => true,
    }
}

fn article(t: FieldType) -> String {
    match t {
        FieldType::Int => "an integer".into(),
        FieldType::UInt => "an unsigned integer".into(),
        other => format!("a {}", other.name()),
    }
}
