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
use chute_engine::lines::matcher::name_problem;

use super::Shared;
use super::lanes::{Shape, TableFormat};
use super::submit::{Keyed, Part, idempotency_key, submit_and_answer};

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
    let named = [("schema", table.schema.as_deref()), ("table", Some(table.name.as_str()))];
    if let Some(reason) = named.iter().find_map(|(what, n)| n.and_then(|n| name_problem(what, n))) {
        return bad(&reason);
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
    let columns: Option<Vec<String>> = q.get("columns").map(|c| c.split(',').map(|c| c.trim().to_owned()).collect());
    if let Err(why) = check_reading(format, delimiter, q.get("null"), columns.as_deref()) {
        return bad(&why);
    }
    let on_conflict = match q.get("on_conflict").map(|a| (a, chute_core::upsert::ConflictAction::parse(a))) {
        None => None,
        Some((_, Some(a))) => Some(a),
        Some((a, None)) => return bad(&format!("unknown on_conflict {a:?}: use error, nothing or update")),
    };
    let mut reserved = s.memory.reservation();
    let body = match super::body::read(s, headers, body, &mut reserved).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let mut data: Vec<u8> = match super::body::decode(headers, body, s.config.body.max, &mut reserved) {
        Ok(b) => b.into(),
        Err(r) => return r,
    };
    // The request as its key binds it: the table, how its rows are read, and the rows.
    let key = idempotency_key(headers).map(|key| {
        let mut params: Vec<(&String, &String)> = q.iter().filter(|(k, _)| !["u", "p"].contains(&k.as_str())).collect();
        params.sort();
        let params = format!("{table} {format:?} {params:?}");
        Keyed { key, digest: super::keys::digest(&[b"table", params.as_bytes(), &data]) }
    });
    let mut columns = columns;
    let mut first_line = 1;
    if q.get("header").is_some_and(|h| h == "true" || h == "1") {
        let end = memchr::memchr(b'\n', &data).map_or(data.len(), |i| i + 1);
        let head = String::from_utf8_lossy(&data[..end]).trim_end().to_owned();
        data.drain(..end);
        first_line = 2;
        if columns.is_none() && format == TableFormat::Csv {
            let d = q.get("delimiter").map_or(",", String::as_str);
            let named: Vec<String> = head.split(d).map(|c| c.trim().trim_matches('"').to_owned()).collect();
            if let Err(why) = check_columns(&named, "the header") {
                return bad(&why);
            }
            columns = Some(named);
        }
    }
    if data.iter().all(u8::is_ascii_whitespace) {
        return StatusCode::NO_CONTENT.into_response();
    }
    if data.last() != Some(&b'\n') {
        data.push(b'\n');
    }
    let shape = Shape::Table { format, columns, delimiter, null: q.get("null").cloned(), epoch, on_conflict };
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let lane = match super::patiently(deadline, || s.lanes.get(&table, &shape)).await {
        Ok(l) => l,
        Err(e) => return super::lane_error(&e),
    };
    let lines = chute_core::parse::count_lines(&data) as usize;
    s.metrics.received(&table.to_string(), lines as u64, data.len() as u64);
    let cuts = record_cuts(&data, format, super::submit::CHUNK_BYTES);
    let part = Part { lane, data, first_line, cuts, rows: None };
    submit_and_answer(s, vec![part], Default::default(), |l| l, lines, key, reserved).await
}

/// Checks how the rows are to be read before any is: the options as COPY
/// checks them (a delimiter that is the quote or a line end, a NULL string
/// holding the delimiter…) and the columns named (each a valid name, once).
fn check_reading(format: TableFormat, delimiter: Option<u8>, null: Option<&String>, columns: Option<&[String]>) -> Result<(), String> {
    if let Some(c) = columns {
        check_columns(c, "columns=")?;
    }
    if format == TableFormat::Csv {
        let mut o = chute_core::parse::csv::CsvOptions::default();
        if let Some(d) = delimiter {
            o.delimiter = d;
        }
        if let Some(n) = null {
            o.null = n.as_bytes().to_vec();
        }
        chute_core::parse::csv::CsvParser::new(o).map_err(|e| format!("{e}: change delimiter= or null="))?;
    } else if delimiter.is_some() || null.is_some() {
        return Err("delimiter= and null= are for CSV: JSON lines name their columns and write null".into());
    }
    Ok(())
}

/// Each column a valid PostgreSQL name, named once.
fn check_columns(columns: &[String], what: &str) -> Result<(), String> {
    let mut seen = std::collections::HashSet::new();
    for c in columns {
        if c.is_empty() {
            return Err(format!("{what} names an empty column"));
        }
        if let Some(why) = name_problem("column", c) {
            return Err(why);
        }
        if !seen.insert(c.as_str()) {
            return Err(format!("{what} names column {c:?} twice"));
        }
    }
    Ok(())
}

/// Where to cut CSV or JSON Lines rows into chunks of about `every` bytes:
/// (byte offset, lines before it), at a line end that ends a record (for
/// CSV, one outside double quotes, which may hold line ends).
fn record_cuts(data: &[u8], format: TableFormat, every: usize) -> Vec<(usize, u64)> {
    let mut cuts = vec![(0, 0)];
    let (mut lines, mut quoted, mut last) = (0u64, false, 0usize);
    for i in memchr::memchr2_iter(b'\n', b'"', data) {
        if data[i] == b'"' {
            quoted ^= format == TableFormat::Csv;
            continue;
        }
        lines += 1;
        if !quoted && i + 1 - last >= every && i + 1 < data.len() {
            cuts.push((i + 1, lines));
            last = i + 1;
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_is_cut_at_record_ends_only() {
        let data = b"1,\"a\nb\"\n2,c\n3,\"d\"\n4,e\n";
        // Every line end that ends a record, past 1 byte: not the one inside quotes.
        assert_eq!(record_cuts(data, TableFormat::Csv, 1), vec![(0, 0), (8, 2), (12, 3), (18, 4)]);
        assert_eq!(record_cuts(data, TableFormat::Csv, 100), vec![(0, 0)]);
        assert_eq!(record_cuts(b"{}\n{}\n", TableFormat::Jsonl, 1), vec![(0, 0), (3, 1)]);
    }
}
