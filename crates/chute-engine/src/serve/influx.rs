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
use std::borrow::Cow;

use chute_core::parse::lineproto::{FieldType, FieldValue, LineAt, LineSet, Precision, parse_lines_into};
use rustc_hash::FxHashMap;

use super::Shared;
use super::catalog::{ColKind, LaneColumn, LaneError};
use super::create::Wanted;
use super::submit::{Part, Rejected, idempotency_key, submit_and_answer};
use crate::load::ValueRows;

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
    // Every line's tags and fields in two vectors: nothing is allocated per line.
    let mut set = LineSet::default();
    let mut by_table: BTreeMap<String, Vec<(u64, LineAt<'_>)>> = BTreeMap::new();
    let big = text.len() >= TURN_BYTES;
    // Lines that can be rows: a line takes 6 bytes or more (`m f=1` and its end).
    let line_count = (memchr::memchr_iter(b'\n', text.as_bytes()).count() + 1).min(text.len() / 6 + 1);
    in_turn(s, big, || {
        parse_lines_into(text, precision, now_ns, &mut set, |n, r| {
            total += 1;
            match r {
                Err(reason) => rejects.push(Rejected { line: n, reason }),
                Ok(l) => match by_table.get_mut(l.measurement.as_ref()) {
                    Some(lines) => lines.push((n, l)),
                    None => {
                        // The first measurement gets room for every line: most requests write only one.
                        let name = l.measurement.to_string();
                        let mut lines = Vec::with_capacity(if by_table.is_empty() { line_count } else { 0 });
                        lines.push((n, l));
                        by_table.insert(name, lines);
                    }
                },
            }
        })
    })
    .await;

    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let mut parts = Vec::new();
    let mut line_of: Vec<u64> = Vec::with_capacity(total.min(line_count));
    for (measurement, lines) in by_table {
        let table = match schema {
            Some(sc) => QualifiedName::new(sc.clone(), measurement.clone()),
            None => QualifiedName { schema: None, name: measurement.clone() },
        };
        // What a new table or new columns need: only with --create-tables.
        let wanted = if s.config.create_tables { wanted_columns(&set, &lines) } else { Vec::new() };
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
        let first_line = line_of.len() as u64 + 1;
        let mut rows_out = ValueRows::default();
        let mut rows = 0u64;
        in_turn(s, big, || {
            let mut m = Matcher::new(&lane.columns);
            for (n, l) in &lines {
                let tags = &set.tags[l.tags.clone()];
                let fields = &set.fields[l.fields.clone()];
                if let Err(reason) = m.line(*n, tags, fields, &table) {
                    rejects.push(Rejected { line: *n, reason });
                    continue;
                }
                rows_out.int(l.time_ns);
                for c in &m.cells[1..] {
                    match *c {
                        None => rows_out.null(),
                        Some(Cell::Tag(i)) => rows_out.text(&tags[i].1),
                        Some(Cell::Field(i)) => match &fields[i].1 {
                            FieldValue::Str(t) => rows_out.text(t),
                            FieldValue::Float(f) => rows_out.float(*f),
                            FieldValue::Int(i) => rows_out.int(*i),
                            FieldValue::UInt(u) => rows_out.uint(*u),
                            FieldValue::Bool(b) => rows_out.bool(*b),
                        },
                    }
                }
                if rows == 0 {
                    // Room for every line, if they are like the first: the rows grow once.
                    // At most what the body's values can take encoded (9 bytes for a 2-byte `k=1`-like value).
                    rows_out.reserve((rows_out.len() * lines.len()).min(text.len() * 5));
                }
                line_of.push(*n);
                rows += 1;
            }
        })
        .await;
        s.metrics.received(&table.to_string(), lines.len() as u64, rows_out.len() as u64);
        if rows > 0 {
            parts.push(Part { lane, data: rows_out.into_bytes(), first_line });
        }
    }
    let lines = line_of;
    s.metrics.stage("read_parse", started.elapsed().as_secs_f64());
    submit_and_answer(s, parts, rejects, |row| lines.get(row as usize - 1).copied().unwrap_or(0), total, idempotency_key(headers)).await
}

/// Bodies at least this large wait for a turn to be parsed.
const TURN_BYTES: usize = 16 << 10;

/// Runs the CPU-bound part of a large request (`big`) once it has one of
/// the turns (`Shared::parse_slots`: one fewer than the cores, at least
/// one), on this worker thread: so many large requests parse at once, and
/// a worker thread is left for the lanes' coordinators and COPY workers
/// and the other requests' I/O. This used to hand the worker's core to
/// another thread (`block_in_place`): that doubled chute serve's context
/// switches and cost about a tenth of its CPU, on cores it shares with
/// PostgreSQL.
async fn in_turn<T>(s: &Shared, big: bool, f: impl FnOnce() -> T) -> T {
    let _turn = if big { s.parse_slots.acquire().await.ok() } else { None };
    f()
}

/// Every tag and field of a measurement's lines, in order of appearance,
/// fields with the type they first have (a line that changes it is rejected).
fn wanted_columns(set: &LineSet<'_>, lines: &[(u64, LineAt<'_>)]) -> Vec<(String, Wanted)> {
    let mut out: Vec<(String, Wanted)> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (_, l) in lines {
        for (k, _) in &set.tags[l.tags.clone()] {
            if seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Tag));
            }
        }
        for (k, v) in &set.fields[l.fields.clone()] {
            if seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Field(v.field_type())));
            }
        }
    }
    out
}

/// Matches lines' tags and fields to a lane's columns. Lines of one request
/// nearly always name the same keys in the same order: a line whose keys
/// are the previous line's reuses its column slots instead of looking each
/// key up again.
struct Matcher<'c> {
    columns: &'c [LaneColumn],
    index: FxHashMap<&'c str, usize>,
    /// Per column: the field type the request first gave it, and in which line.
    types: Vec<Option<(FieldType, u64)>>,
    /// The previous line's keys (tags, then fields) and their columns.
    keys: Vec<String>,
    slots: Vec<usize>,
    /// The line's values per column (the first is the time).
    cells: Vec<Option<Cell>>,
}

impl<'c> Matcher<'c> {
    fn new(columns: &'c [LaneColumn]) -> Self {
        Matcher {
            columns,
            index: columns.iter().enumerate().map(|(i, c)| (c.name.as_str(), i)).collect(),
            types: vec![None; columns.len()],
            keys: Vec::new(),
            slots: Vec::new(),
            cells: vec![None; columns.len()],
        }
    }

    /// Fills `cells` for line `n`, or says why the line cannot be written.
    fn line(
        &mut self,
        n: u64,
        tags: &[(Cow<'_, str>, Cow<'_, str>)],
        fields: &[(Cow<'_, str>, FieldValue<'_>)],
        table: &QualifiedName,
    ) -> Result<(), String> {
        let same = self.keys.len() == tags.len() + fields.len()
            && tags.iter().map(|(k, _)| k).chain(fields.iter().map(|(k, _)| k)).zip(&self.keys).all(|(a, b)| a.as_ref() == b.as_str());
        if !same {
            self.keys.clear();
            self.slots.clear();
            for (k, what) in tags.iter().map(|(k, _)| (k, "tag")).chain(fields.iter().map(|(k, _)| (k, "field"))) {
                let slot = self.index.get(k.as_ref()).copied().filter(|&i| self.columns[i].kind != ColKind::Time);
                // A key with no column: the line is rejected; the next line looks its keys up again.
                let Some(slot) = slot else { return Err(missing(table, k, what)) };
                self.keys.push(k.to_string());
                self.slots.push(slot);
            }
        }
        // A field keeps one type within a request.
        for (j, (k, v)) in fields.iter().enumerate() {
            let (slot, t) = (self.slots[tags.len() + j], v.field_type());
            match self.types[slot] {
                Some((was, first)) if was != t => {
                    return Err(format!("field {k:?} is {} here but {} in line {first}", article(t), article(was)));
                }
                Some(_) => {}
                None => self.types[slot] = Some((t, n)),
            }
        }
        self.cells.iter_mut().for_each(|c| *c = None);
        for (j, _) in tags.iter().enumerate() {
            self.cells[self.slots[j]] = Some(Cell::Tag(j));
        }
        for (j, (k, v)) in fields.iter().enumerate() {
            let c = &self.columns[self.slots[tags.len() + j]];
            if !fits(c.kind, v.field_type()) {
                return Err(format!("field {k:?} is {} but column {:?} of {table} is {}", article(v.field_type()), c.name, c.type_name));
            }
            self.cells[self.slots[tags.len() + j]] = Some(Cell::Field(j));
        }
        Ok(())
    }
}

/// Where a column's value is: the line's tag or field of that index.
#[derive(Clone, Copy)]
enum Cell {
    Tag(usize),
    Field(usize),
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

#[cfg(test)]
mod tests {
    use chute_core::parse::lineproto::{LineSet, Precision, parse_lines_into};

    use super::*;

    fn col(name: &str, kind: ColKind) -> LaneColumn {
        LaneColumn { name: name.into(), kind, type_name: format!("{kind:?}") }
    }

    /// Runs the lines through one matcher: per line, the columns its values went to, or why not.
    fn matched(columns: &[LaneColumn], body: &str) -> Vec<Result<Vec<Option<String>>, String>> {
        let mut set = LineSet::default();
        let mut lines = Vec::new();
        parse_lines_into(body, Precision::Nanoseconds, 0, &mut set, |n, r| lines.push((n, r.expect("a good line"))));
        let table = QualifiedName { schema: None, name: "m".into() };
        let mut m = Matcher::new(columns);
        lines
            .iter()
            .map(|(n, l)| {
                let (tags, fields) = (&set.tags[l.tags.clone()], &set.fields[l.fields.clone()]);
                m.line(*n, tags, fields, &table).map(|()| {
                    m.cells
                        .iter()
                        .map(|c| match *c {
                            None => None,
                            Some(Cell::Tag(i)) => Some(format!("tag {}", tags[i].0)),
                            Some(Cell::Field(i)) => Some(format!("field {}", fields[i].0)),
                        })
                        .collect()
                })
            })
            .collect()
    }

    #[test]
    fn lines_with_other_keys_are_matched_again_and_types_stay_per_column() {
        let columns = [col("time", ColKind::Time), col("host", ColKind::Text), col("a", ColKind::Number), col("b", ColKind::Number)];
        let got = matched(&columns, "m,host=x a=1 1\nm,host=x b=2 2\nm,host=x a=1i 3\nm,zz=x a=1 4\nm,host=x a=3,b=4 5\nm,host=y a=5 6\n");
        let some = |v: &[Option<&str>]| Ok(v.iter().map(|s| s.map(str::to_owned)).collect::<Vec<_>>());
        assert_eq!(got[0], some(&[None, Some("tag host"), Some("field a"), None]));
        // The same number of keys, another key: not the previous line's slots.
        assert_eq!(got[1], some(&[None, Some("tag host"), None, Some("field b")]));
        assert!(got[2].as_ref().unwrap_err().contains("is an integer here but a float in line 1"), "{:?}", got[2]);
        assert!(got[3].as_ref().unwrap_err().contains("no column \"zz\""), "{:?}", got[3]);
        assert_eq!(got[4], some(&[None, Some("tag host"), Some("field a"), Some("field b")]));
        assert_eq!(got[5], some(&[None, Some("tag host"), Some("field a"), None]));
    }

    #[test]
    fn a_key_naming_the_time_column_or_a_field_the_column_cannot_hold_is_refused() {
        let columns = [col("time", ColKind::Time), col("t", ColKind::Time), col("n", ColKind::Integer)];
        let got = matched(&columns, "m t=1 1\nm n=1.5 2\nm n=2i 3\n");
        assert!(got[0].as_ref().unwrap_err().contains("no column \"t\""), "{:?}", got[0]);
        assert!(got[1].as_ref().unwrap_err().contains("is a float but column \"n\""), "{:?}", got[1]);
        assert!(got[2].is_err(), "n was a float in line 2: {:?}", got[2]);
    }
}
