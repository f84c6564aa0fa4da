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
//!
//! A body is parsed a slice at a time (`SLICE` bytes, cut at a line end):
//! what a slice's lines are parsed into is gone before the next slice, so a
//! request holds its body and the rows it becomes, not the parse of every
//! line at once; its memory reservation grows with them (see `memory`). A
//! line that is not UTF-8 is rejected like any bad line. With
//! `--create-tables`, lines that name keys their table lacks make the table
//! gain those columns, and the body is parsed again for the new lane.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use chute_core::ident::QualifiedName;
use chute_core::parse::lineproto::{LineAt, LineSet, Precision, parse_lines_into};

use super::Shared;
use super::catalog::Answer;
use super::create::Wanted;
use super::lanes::Lane;
use super::memory::Reservation;
use super::submit::{CHUNK_BYTES, Keyed, Part, Rejected, Rejects, idempotency_key, submit_and_answer};
use chute_engine::lines::matcher::{Matcher, Miss, name_problem};
use chute_engine::load::ValueRows;

pub(crate) async fn write_v1(
    State(s): State<Arc<Shared>>,
    Query(q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    let started = Instant::now();
    let r = write(&s, &q, &headers, body, q.get("db"), "v1").await;
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
    let r = write(&s, &q, &headers, body, q.get("bucket"), "v2").await;
    s.metrics.request("v2_write", r.status().as_u16(), started.elapsed().as_secs_f64());
    r
}

async fn write(
    s: &Shared,
    q: &HashMap<String, String>,
    headers: &HeaderMap,
    body: axum::body::Body,
    db: Option<&String>,
    api: &str,
) -> Response {
    let started = Instant::now();
    if let Err(r) = super::auth::check(&s.config.tokens, headers, q) {
        return r;
    }
    let schema = s.config.schema.as_ref().or(db.filter(|d| !d.is_empty()));
    let what = if api == "v1" { "database (db=)" } else { "bucket (bucket=)" };
    if let Some(reason) = schema.and_then(|sc| name_problem(what, sc)) {
        return super::error(StatusCode::BAD_REQUEST, "invalid", &reason);
    }
    let precision_text = q.get("precision").map_or("", String::as_str);
    let precision = match Precision::parse(precision_text) {
        Ok(p) => p,
        Err(e) => return super::error(StatusCode::BAD_REQUEST, "invalid", &e),
    };
    let mut reserved = s.memory.reservation();
    let body = match super::body::read(s, headers, body, &mut reserved).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let body = match super::body::decode(headers, body, s.config.body.max, &mut reserved) {
        Ok(b) => b,
        Err(r) => return r,
    };
    let key = idempotency_key(headers).map(|key| Keyed {
        key,
        digest: super::keys::digest(&[api.as_bytes(), schema.map_or(&b""[..], |s| s.as_bytes()), precision_text.as_bytes(), &body]),
    });
    let now_ns = chute_engine::clock::now_micros().saturating_mul(1000);
    let deadline = tokio::time::Instant::now() + s.config.request_timeout;
    let request = Request { s, body: &body, precision, now_ns, schema: schema.map(String::as_str), deadline };
    // Parsed again (at most twice) when --create-tables added columns its lines needed.
    let mut parsed = None;
    for _ in 0..3 {
        match request.parse(&mut reserved).await {
            Ok(Parsed::Done(p)) => {
                parsed = Some(p);
                break;
            }
            Ok(Parsed::Again) => continue,
            Err(r) => return r,
        }
    }
    let Some(parsed) = parsed else {
        return super::unavailable("the table's columns kept changing while the request was parsed: retry");
    };
    // The body is not needed any more: only its rows are held until the answer.
    let body_bytes = body.len();
    drop(body);
    let _ = reserved.resize(reserved.bytes().saturating_sub(body_bytes));
    s.metrics.stage("read_parse", started.elapsed().as_secs_f64());
    let Body { parts, rejects, line_of, total } = parsed;
    let line =
        |row: u64| line_of.get((row >> PART_BITS) as usize).and_then(|v| v.get((row & PART_MASK) as usize - 1)).copied().unwrap_or(0);
    submit_and_answer(s, parts, rejects, line, total, key, reserved).await
}

/// Rows of the request's `k`-th part are numbered from `k << PART_BITS` + 1.
const PART_BITS: u32 = 40;
const PART_MASK: u64 = (1 << PART_BITS) - 1;

/// Bodies are parsed this many bytes at a time (cut at a line end).
const SLICE: usize = 256 << 10;

/// Bodies at least this large wait for a turn to be parsed.
const TURN_BYTES: usize = 16 << 10;

/// What a request is parsed with.
struct Request<'b> {
    s: &'b Shared,
    body: &'b [u8],
    precision: Precision,
    now_ns: i64,
    schema: Option<&'b str>,
    deadline: tokio::time::Instant,
}

/// The body as rows per lane, what was rejected, and each part's rows' request lines.
struct Body {
    parts: Vec<Part>,
    rejects: Rejects,
    line_of: Vec<Vec<u64>>,
    total: usize,
}

enum Parsed {
    Done(Body),
    /// The tables gained columns: parse the body again.
    Again,
}

/// One table's rows of the request.
struct TableOut {
    table: QualifiedName,
    /// The lane, or why the table's lines are rejected.
    lane: Result<Arc<Lane>, String>,
    matcher: Option<Matcher>,
    rows: ValueRows,
    lines: Vec<u64>,
    cuts: Vec<(usize, u64)>,
    /// `--create-tables`: keys of lines that have no column yet.
    wanted: Vec<(String, Wanted)>,
}

impl TableOut {
    /// Bytes it holds (what the request's reservation covers).
    fn held(&self) -> usize {
        self.rows.capacity() + self.lines.capacity() * 8 + self.cuts.capacity() * 16
    }
}

impl Request<'_> {
    async fn parse(&self, reserved: &mut Reservation) -> Result<Parsed, Response> {
        let s = self.s;
        let base = reserved.bytes();
        let big = self.body.len() >= TURN_BYTES;
        let mut tables: BTreeMap<String, TableOut> = BTreeMap::new();
        let mut rejects = Rejects::default();
        let (mut total, mut line_base, mut at) = (0usize, 0u64, 0usize);
        while at < self.body.len() {
            let end = match memchr::memchr(b'\n', &self.body[(at + SLICE).min(self.body.len())..]) {
                Some(i) => (at + SLICE).min(self.body.len()) + i + 1,
                None => self.body.len(),
            };
            let (text, bad) = text_of(&self.body[at..end]);
            // A line that is not text ends the slice there.
            let end = bad.as_ref().map_or(end, |(_, after)| at + after);
            let mut set = LineSet::default();
            let mut by_table: BTreeMap<&str, Vec<(u64, LineAt<'_>)>> = BTreeMap::new();
            in_turn(s, big, || {
                parse_lines_into(text, self.precision, self.now_ns, &mut set, |n, r| {
                    total += 1;
                    match r {
                        Err(reason) => rejects.push(Rejected { line: line_base + n, reason }),
                        Ok(l) => {
                            let name: &str = match l.measurement {
                                std::borrow::Cow::Borrowed(b) => b,
                                // An escaped name (never empty): grouped apart, by its own text.
                                std::borrow::Cow::Owned(_) => "",
                            };
                            by_table.entry(name).or_default().push((line_base + n, l));
                        }
                    }
                })
            })
            .await;
            // Lines of escaped measurement names, grouped by their own text.
            if let Some(escaped) = by_table.remove("") {
                for (n, l) in escaped {
                    let name = l.measurement.to_string();
                    self.match_lines(&mut tables, &name, &set, &[(n, l)], &mut rejects, big).await?;
                }
            }
            for (name, lines) in &by_table {
                self.match_lines(&mut tables, name, &set, lines, &mut rejects, big).await?;
            }
            if let Some((reason, _)) = bad {
                total += 1;
                let newlines = memchr::memchr_iter(b'\n', text.as_bytes()).count() as u64;
                rejects.push(Rejected { line: line_base + newlines + 1, reason });
            }
            line_base += memchr::memchr_iter(b'\n', &self.body[at..end]).count() as u64;
            at = end;
            let held: usize = tables.values().map(TableOut::held).sum::<usize>() + rejects.bytes();
            reserved.need(base + held)?;
        }
        // --create-tables: the columns lines asked for, then everything again.
        let mut changed = false;
        for t in tables.values_mut() {
            if !t.wanted.is_empty() && t.lane.is_ok() {
                let wanted = std::mem::take(&mut t.wanted);
                match super::patiently(self.deadline, || s.lanes.lines(&t.table, &wanted, self.deadline)).await {
                    Ok(_) => changed = true,
                    Err(e) if !matches!(e.answer(), Answer::Refuse(_)) => return Err(super::lane_error(&e)),
                    // The lines stay rejected, each with its reason.
                    Err(_) => {}
                }
            }
        }
        if changed {
            let _ = reserved.resize(base);
            return Ok(Parsed::Again);
        }
        let mut parts = Vec::new();
        let mut line_of = Vec::new();
        for t in tables.into_values() {
            let Ok(lane) = t.lane else { continue };
            if t.lines.is_empty() {
                continue;
            }
            s.metrics.received(&t.table.to_string(), t.lines.len() as u64, t.rows.len() as u64);
            let rows = Some(t.lines.len() as u64);
            parts.push(Part { lane, data: t.rows.into_bytes(), first_line: ((parts.len() as u64) << PART_BITS) + 1, cuts: t.cuts, rows });
            line_of.push(t.lines);
        }
        Ok(Parsed::Done(Body { parts, rejects, line_of, total }))
    }

    /// Matches lines of measurement `name` (parsed into `set`) to its
    /// table's lane, made on first use, and appends their rows.
    async fn match_lines<'a>(
        &self,
        tables: &mut BTreeMap<String, TableOut>,
        name: &str,
        set: &LineSet<'a>,
        lines: &[(u64, LineAt<'a>)],
        rejects: &mut Rejects,
        big: bool,
    ) -> Result<(), Response> {
        let s = self.s;
        if !tables.contains_key(name) {
            let out = self.table_out(name, set, lines).await?;
            tables.insert(name.to_owned(), out);
        }
        let TableOut { table, lane, matcher, rows, lines: rows_lines, cuts, wanted } = tables.get_mut(name).expect("just made");
        let lane = match lane {
            Ok(l) => l.clone(),
            Err(reason) => {
                for (n, _) in lines {
                    rejects.push(Rejected { line: *n, reason: reason.clone() });
                }
                s.metrics.rejected(&table.to_string(), lines.len() as u64);
                return Ok(());
            }
        };
        let matcher = matcher.get_or_insert_with(|| Matcher::new(&lane.columns, s.config.create_tables));
        // Room for these lines' rows, if they are like the rows so far (the vector doubles past it).
        let per_row = if rows_lines.is_empty() { 9 * lane.columns.len() + 16 } else { rows.len() / rows_lines.len() + 1 };
        rows.reserve(per_row * lines.len());
        in_turn(s, big, || {
            for (n, l) in lines {
                let tags = &set.tags[l.tags.clone()];
                let fields = &set.fields[l.fields.clone()];
                if let Err(miss) = matcher.line(*n, tags, fields, table) {
                    if let Miss::NoColumn { key, tag, .. } = &miss
                        && s.config.create_tables
                    {
                        let want = if *tag {
                            Wanted::Tag
                        } else {
                            fields.iter().find(|(k, _)| k == key).map_or(Wanted::Tag, |(_, v)| Wanted::Field(v.field_type()))
                        };
                        if !wanted.iter().any(|(k, _)| k == key) {
                            wanted.push((key.clone(), want));
                        }
                    }
                    rejects.push(Rejected { line: *n, reason: miss.reason() });
                    continue;
                }
                if rows.len() - cuts.last().map_or(0, |c| c.0) >= CHUNK_BYTES {
                    cuts.push((rows.len(), rows_lines.len() as u64));
                }
                matcher.write_row(rows, l.time_ns, tags, fields);
                rows_lines.push(*n);
            }
        })
        .await;
        Ok(())
    }

    /// The table of measurement `name` and its lane (or why its lines are refused).
    async fn table_out(&self, name: &str, set: &LineSet<'_>, lines: &[(u64, LineAt<'_>)]) -> Result<TableOut, Response> {
        let s = self.s;
        let table = match self.schema {
            Some(sc) => QualifiedName::new(sc.to_owned(), name.to_owned()),
            None => QualifiedName { schema: None, name: name.to_owned() },
        };
        let lane = if let Some(reason) = name_problem("measurement", name) {
            Err(reason)
        } else {
            // What a new table needs: only with --create-tables.
            let wanted = if s.config.create_tables { wanted_columns(set, lines) } else { Vec::new() };
            match super::patiently(self.deadline, || s.lanes.lines(&table, &wanted, self.deadline)).await {
                Ok(l) => Ok(l),
                // What is wrong with this measurement rejects its lines; the rest of the request goes on.
                Err(e) if matches!(e.answer(), Answer::Refuse(_)) => Err(e.to_string()),
                Err(e) => return Err(super::lane_error(&e)),
            }
        };
        Ok(TableOut { table, lane, matcher: None, rows: ValueRows::default(), lines: Vec::new(), cuts: vec![(0, 0)], wanted: Vec::new() })
    }
}

/// The lines of `slice` up to the first that is not UTF-8 text and, when
/// there is one, why it is rejected and where it ends (after its newline).
fn text_of(slice: &[u8]) -> (&str, Option<(String, usize)>) {
    match std::str::from_utf8(slice) {
        Ok(t) => (t, None),
        Err(e) => {
            let good = e.valid_up_to();
            let line_start = memchr::memrchr(b'\n', &slice[..good]).map_or(0, |i| i + 1);
            let line_end = memchr::memchr(b'\n', &slice[good..]).map_or(slice.len(), |i| good + i + 1);
            let text = std::str::from_utf8(&slice[..line_start]).expect("valid up to here");
            (text, Some((format!("not UTF-8 text (byte {} of the line)", good - line_start + 1), line_end)))
        }
    }
}

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
/// fields with the type they first have (a line that changes it is
/// rejected), leaving out names PostgreSQL would cut.
fn wanted_columns(set: &LineSet<'_>, lines: &[(u64, LineAt<'_>)]) -> Vec<(String, Wanted)> {
    let mut out: Vec<(String, Wanted)> = Vec::new();
    let mut seen = rustc_hash::FxHashSet::default();
    for (_, l) in lines {
        for (k, _) in &set.tags[l.tags.clone()] {
            if k.len() <= chute_engine::lines::matcher::MAX_NAME && seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Tag));
            }
        }
        for (k, v) in &set.fields[l.fields.clone()] {
            if k.len() <= chute_engine::lines::matcher::MAX_NAME && seen.insert(k.as_ref()) {
                out.push((k.to_string(), Wanted::Field(v.field_type())));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slice_that_is_not_utf8_rejects_its_line() {
        assert_eq!(text_of(b"a\nb\n"), ("a\nb\n", None));
        let (text, bad) = text_of(b"m f=1\nm,t=\xff f=2\nm f=3\n");
        assert_eq!(text, "m f=1\n");
        let (reason, end) = bad.unwrap();
        assert!(reason.contains("byte 5 of the line"), "{reason}");
        assert_eq!(end, 16, "the bad line and its newline");
        let (text, bad) = text_of(b"\xc3");
        assert_eq!(text, "");
        assert_eq!(bad.unwrap().1, 1);
    }
}
