//! The Time Series Benchmark Suite's `--format=timescaledb` files.
//!
//! The published TimescaleDB/PostgreSQL ingest figures chute measures itself
//! against were produced by feeding these files to tsbs's own loader, so chute
//! reads them as that loader does. A file opens with a header block — a
//! `tags,<name> <type>,…` line, one `<measurement>,<field>,…` line per
//! measurement, and an empty line ([`parse_tsbs_header`]) — followed by one
//! record per row, two lines each: `tags,<key>=<value>,…` and
//! `<measurement>,<unix time in ns>,<values in header order>`. An empty tag
//! value or field value is NULL. Tags that the header does not list (devops
//! writes `port=…`, `server=…`, `path=…` and so on) go into the loader's
//! `additional_tags jsonb` column; tsbs's loader marshals them with Go's
//! `encoding/json`, and since the column is `jsonb` only the keys and string
//! values matter, so chute writes `{"port": "16949", "server": "redis_61511"}`
//! (jsonb's own spacing, keys in input order). A row without extra tags has
//! NULL there, as with tsbs.
//!
//! Tags are matched to header columns by key (tsbs's loader goes by position;
//! the generator always writes the header's tags first and in order, so both
//! agree on every file it writes). A record is a `tags,` line and every line up
//! to the next `tags,` line, so the boundary finder cuts only before a `tags,`
//! line; exactly one non-empty data line must follow the tags line. Lines may
//! end in `\r\n` (Go's line scanner drops the `\r` too).
//!
//! A record's [`RecordPos::line`] is its `tags,` line; errors about the data
//! line name that line too (`(data line N)`), and [`TsbsRecord::data_line`]
//! gives it, because that is the line people look for in a reject file.

use memchr::{memchr, memchr_iter, memmem};

use crate::ident::quote_ident;

use super::{Boundary, ChunkEnd, Cursor, Fields, MAX_RECORD_BYTES, RecordError, RecordParser, RecordPos, TOO_LONG};

/// The header block of a tsbs file.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TsbsHeader {
    /// Tag columns, in order: name and type as written (`string`, `float32` …).
    pub tags: Vec<(String, String)>,
    /// Measurements in header order, each with its field names in order.
    pub measurements: Vec<(String, Vec<String>)>,
}

/// The SQL type of a tag column of tsbs type `t` (`string`, `float32`, `int64` …).
pub fn tag_sql_type(t: &str) -> &'static str {
    match t {
        "float32" | "float64" | "float" => "double precision",
        "int" | "int32" | "int64" => "bigint",
        _ => "text",
    }
}

impl TsbsHeader {
    /// Column definitions of measurement `m`'s table as chute makes it, the
    /// schema of the published runs: `time timestamptz NOT NULL, tags_id
    /// integer, <first tag> text, <fields> double precision, additional_tags
    /// jsonb`. `None` when there is no measurement `m` or no tag.
    pub fn measurement_columns_sql(&self, m: usize) -> Option<Vec<String>> {
        let (_, fields) = self.measurements.get(m)?;
        let (first_tag, _) = self.tags.first()?;
        let mut defs =
            vec!["time timestamptz NOT NULL".to_owned(), "tags_id integer".to_owned(), format!("{} text", quote_ident(first_tag))];
        defs.extend(fields.iter().map(|f| format!("{} double precision", quote_ident(f))));
        defs.push("additional_tags jsonb".into());
        Some(defs)
    }
}

/// Parses the header block at the start of a tsbs file.
///
/// Returns the header, the bytes it takes (including its empty line) and the
/// number of lines it takes, or `Ok(None)` when `buf` does not hold the whole
/// block yet (read more; at end of input that means the file has no complete
/// header). The first record starts at that byte offset, on the next line.
pub fn parse_tsbs_header(buf: &[u8]) -> Result<Option<(TsbsHeader, usize, u64)>, RecordError> {
    let mut header = TsbsHeader::default();
    let mut start = 0;
    let mut line = 1;
    while let Some(k) = memchr(b'\n', &buf[start..]) {
        let next = start + k + 1;
        let cursor = Cursor::new(line, start as u64);
        let fail = |reason: String| cursor.error(0, next - start, reason);
        let text = std::str::from_utf8(&buf[start..next - 1]).map_err(|_| fail("the tsbs header is not valid UTF-8".into()))?.trim();
        if line == 1 {
            let mut defs = text.split(',');
            if defs.next() != Some("tags") {
                return Err(fail(format!("a tsbs file starts with a `tags,<name> <type>,…` line, not {text:?}")));
            }
            for def in defs {
                let Some((name, kind)) = def.split_once(' ').filter(|(n, k)| !n.is_empty() && !k.is_empty() && !k.contains(' ')) else {
                    return Err(fail(format!("tag definition {def:?} is not `<name> <type>`")));
                };
                if header.tags.iter().any(|(n, _)| n == name) {
                    return Err(fail(format!("tag {name:?} is listed twice")));
                }
                header.tags.push((name.to_owned(), kind.to_owned()));
            }
        } else if text.is_empty() {
            return Ok(Some((header, next, line)));
        } else {
            let mut names = text.split(',');
            let name = names.next().unwrap_or_default();
            let fields: Vec<String> = names.map(str::to_owned).collect();
            if name.is_empty() || fields.iter().any(String::is_empty) {
                return Err(fail(format!("measurement line {text:?} has an empty name")));
            }
            if header.measurements.iter().any(|(m, _)| m == name) {
                return Err(fail(format!("measurement {name:?} is listed twice")));
            }
            header.measurements.push((name.to_owned(), fields));
        }
        start = next;
        line += 1;
    }
    Ok(None)
}

/// One tsbs row, as handed to [`TsbsParser::parse_records`]'s callback.
#[derive(Debug, Clone, Copy)]
pub struct TsbsRecord<'a> {
    /// Index into [`TsbsHeader::measurements`].
    pub measurement: usize,
    /// Unix time in nanoseconds.
    pub time_ns: i64,
    /// One field per header tag, in header order; a missing or empty tag is NULL.
    pub tags: &'a Fields,
    /// The tags the header does not list, as a JSON object (`{"k": "v", …}`);
    /// `None` when there are none.
    pub additional_tags: Option<&'a [u8]>,
    /// One field per field of the measurement, in header order; empty is NULL.
    pub values: &'a Fields,
    /// The line of the data line (the record's position names its tags line).
    pub data_line: u64,
}

/// Parses tsbs records after the header; see the module documentation.
#[derive(Debug, Clone)]
pub struct TsbsParser {
    header: TsbsHeader,
}

/// Reused buffers for one chunk.
#[derive(Debug, Default)]
struct Scratch {
    /// Per header tag: where its value lies in the tags line.
    spans: Vec<Option<(usize, usize)>>,
    tags: Fields,
    values: Fields,
    json: Vec<u8>,
}

/// What [`TsbsParser::parse_record`] found, beyond the [`TsbsRecord`].
#[derive(Debug, Clone, Copy)]
struct DataLine<'c> {
    measurement: usize,
    time_ns: i64,
    /// The time as written.
    time: &'c [u8],
    line: u64,
}

/// The line starting at `start`: the end of its content (without `\n` or
/// `\r\n`) and the start of the next line.
#[inline]
fn line_at(chunk: &[u8], start: usize) -> (usize, usize) {
    let (end, next) = match memchr(b'\n', &chunk[start..]) {
        Some(k) => (start + k, start + k + 1),
        None => (chunk.len(), chunk.len()),
    };
    let end = if end > start && chunk[end - 1] == b'\r' { end - 1 } else { end };
    (end, next)
}

/// A decimal `i64` with an optional minus sign, nothing else.
fn parse_i64(digits: &[u8]) -> Option<i64> {
    let (negative, digits) = match digits.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, digits),
    };
    if digits.is_empty() {
        return None;
    }
    // Accumulate negatively so that i64::MIN fits.
    let mut value: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        value = value.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative { Some(value) } else { value.checked_neg() }
}

/// Appends `s` to `out` as a JSON string.
fn push_json_string(out: &mut Vec<u8>, s: &[u8]) {
    out.push(b'"');
    for &b in s {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x00..=0x1f => out.extend_from_slice(format!("\\u{b:04x}").as_bytes()),
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

impl TsbsParser {
    pub fn new(header: TsbsHeader) -> Self {
        TsbsParser { header }
    }

    pub fn header(&self) -> &TsbsHeader {
        &self.header
    }

    /// The header tag named `key`, trying position `guess` first.
    #[inline]
    fn tag_index(&self, key: &[u8], guess: usize) -> Option<usize> {
        let tags = &self.header.tags;
        if tags.get(guess).is_some_and(|(name, _)| name.as_bytes() == key) {
            return Some(guess);
        }
        tags.iter().position(|(name, _)| name.as_bytes() == key)
    }

    /// Reads the tags line's items (after `tags,`) into `scratch.tags` and `scratch.json`.
    fn parse_tags(&self, items: &[u8], scratch: &mut Scratch) -> Result<(), String> {
        scratch.spans.clear();
        scratch.spans.resize(self.header.tags.len(), None);
        scratch.json.clear();
        let mut start = 0;
        let mut guess = 0;
        for end in memchr_iter(b',', items).chain(std::iter::once(items.len())) {
            let item = &items[start..end];
            let Some(eq) = memchr(b'=', item) else {
                return Err(format!("tag {:?} has no '='", String::from_utf8_lossy(item)));
            };
            let (key, value) = (&item[..eq], &item[eq + 1..]);
            match self.tag_index(key, guess) {
                Some(t) => {
                    scratch.spans[t] = Some((start + eq + 1, end));
                    guess = t + 1;
                }
                None => {
                    scratch.json.extend_from_slice(if scratch.json.is_empty() { b"{" } else { b", " });
                    push_json_string(&mut scratch.json, key);
                    scratch.json.extend_from_slice(b": ");
                    push_json_string(&mut scratch.json, value);
                }
            }
            start = end + 1;
        }
        if !scratch.json.is_empty() {
            scratch.json.push(b'}');
            // JSON is UTF-8; the other tags are checked by the server as text.
            if std::str::from_utf8(&scratch.json).is_err() {
                return Err("tags not in the header are not valid UTF-8, so they cannot go into additional_tags".into());
            }
        }
        scratch.tags.clear();
        for span in &scratch.spans {
            match *span {
                Some((a, b)) if b > a => scratch.tags.push(&items[a..b]),
                _ => scratch.tags.push_null(),
            }
        }
        Ok(())
    }

    /// Reads a data line into `scratch.values`: measurement, time, values.
    fn parse_data<'c>(&self, data: &'c [u8], scratch: &mut Scratch) -> Result<(usize, i64, &'c [u8]), String> {
        let name_end = memchr(b',', data).ok_or("the data line has no time")?;
        let name = &data[..name_end];
        let measurement = self
            .header
            .measurements
            .iter()
            .position(|(m, _)| m.as_bytes() == name)
            .ok_or_else(|| format!("measurement {:?} is not in the tsbs header", String::from_utf8_lossy(name)))?;
        let rest = &data[name_end + 1..];
        let time_end = memchr(b',', rest).unwrap_or(rest.len());
        let time = &rest[..time_end];
        let time_ns =
            parse_i64(time).ok_or_else(|| format!("time {:?} is not an integer of nanoseconds", String::from_utf8_lossy(time)))?;
        scratch.values.clear();
        if time_end < rest.len() {
            let values = &rest[time_end + 1..];
            let mut start = 0;
            for end in memchr_iter(b',', values).chain(std::iter::once(values.len())) {
                if end > start {
                    scratch.values.push(&values[start..end]);
                } else {
                    scratch.values.push_null();
                }
                start = end + 1;
            }
        }
        let expected = self.header.measurements[measurement].1.len();
        if scratch.values.len() != expected {
            return Err(format!(
                "measurement {:?} has {expected} fields in the header but the data line has {} values",
                self.header.measurements[measurement].0,
                scratch.values.len()
            ));
        }
        Ok((measurement, time_ns, time))
    }

    /// Parses the record `chunk[start..next]` whose lines are known; `line`
    /// is its first line.
    fn parse_record<'c>(
        &self,
        chunk: &'c [u8],
        start: usize,
        next: usize,
        line: u64,
        scratch: &mut Scratch,
    ) -> Result<DataLine<'c>, String> {
        if next - start > MAX_RECORD_BYTES {
            return Err(TOO_LONG.into());
        }
        let (tags_end, mut p) = line_at(chunk, start);
        let Some(items) = chunk[start..tags_end].strip_prefix(b"tags,") else {
            return Err("expected a line starting with \"tags,\"".into());
        };
        // The data line: the only non-empty line before the next record.
        let mut data = None;
        let mut extra = 0;
        let mut line_no = line + 1;
        while p < next {
            let (end, after) = line_at(chunk, p);
            if end > p {
                if data.is_none() {
                    data = Some((p, end, line_no));
                } else {
                    extra += 1;
                }
            }
            line_no += 1;
            p = after;
        }
        let Some((data_start, data_end, data_line)) = data else {
            return Err("the tags line has no data line after it".into());
        };
        if extra > 0 {
            return Err(format!("{} lines follow the tags line; expected one data line (data line {data_line})", extra + 1));
        }
        self.parse_tags(items, scratch)?;
        let (measurement, time_ns, time) =
            self.parse_data(&chunk[data_start..data_end], scratch).map_err(|e| format!("{e} (data line {data_line})"))?;
        Ok(DataLine { measurement, time_ns, time, line: data_line })
    }

    /// Walks the records of a chunk, calling `on_record` with the record,
    /// the time as written, and its position.
    fn walk(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&TsbsRecord<'_>, &[u8], RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) {
        let mut cursor = Cursor::new(first_line, base_offset);
        let mut scratch = Scratch::default();
        let mut start = 0;
        while start < chunk.len() {
            let next = record_end(chunk, start);
            let pos = cursor.pos(start, next);
            match self.parse_record(chunk, start, next, cursor.line, &mut scratch) {
                Ok(data) => {
                    let record = TsbsRecord {
                        measurement: data.measurement,
                        time_ns: data.time_ns,
                        tags: &scratch.tags,
                        additional_tags: (!scratch.json.is_empty()).then_some(scratch.json.as_slice()),
                        values: &scratch.values,
                        data_line: data.line,
                    };
                    on_record(&record, data.time, pos);
                }
                Err(reason) => on_error(RecordError { pos, reason }),
            }
            cursor.line += super::count_lines(&chunk[start..next]);
            start = next;
        }
    }

    /// Parses every record of `chunk` (cut by this parser's [`Boundary`],
    /// after the header), with the same contract as
    /// [`RecordParser::parse_chunk`] but handing out [`TsbsRecord`]s.
    pub fn parse_records(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&TsbsRecord<'_>, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) {
        self.walk(chunk, first_line, base_offset, &mut |record, _, pos| on_record(record, pos), on_error);
    }
}

/// The start of the next record after the one at `start`: the next line that
/// begins with `tags,`, or the end of the chunk.
#[inline]
fn record_end(chunk: &[u8], start: usize) -> usize {
    let mut p = start;
    loop {
        let Some(k) = memchr(b'\n', &chunk[p..]) else { return chunk.len() };
        p += k + 1;
        if p == chunk.len() || chunk[p..].starts_with(b"tags,") {
            return p;
        }
    }
}

/// The generic form, for code that handles every format alike: the fields
/// are the measurement name, the time as written, the header's tags, the
/// additional tags (JSON or NULL), then the measurement's values.
impl RecordParser for TsbsParser {
    fn parse_chunk(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        let mut flat = Fields::new();
        self.walk(
            chunk,
            first_line,
            base_offset,
            &mut |record, time, pos| {
                flat.clear();
                flat.push(self.header.measurements[record.measurement].0.as_bytes());
                flat.push(time);
                for tag in record.tags.iter() {
                    match tag {
                        Some(v) => flat.push(v),
                        None => flat.push_null(),
                    }
                }
                match record.additional_tags {
                    Some(json) => flat.push(json),
                    None => flat.push_null(),
                }
                for value in record.values.iter() {
                    match value {
                        Some(v) => flat.push(v),
                        None => flat.push_null(),
                    }
                }
                on_record(&flat, pos);
            },
            on_error,
        );
        ChunkEnd::Complete
    }
}

impl Boundary for TsbsParser {
    fn last_record_end(&self, buf: &[u8], eof: bool) -> Option<usize> {
        if eof {
            return (!buf.is_empty()).then_some(buf.len());
        }
        // A record is complete once the next one's `tags,` line has begun.
        memmem::rfind(buf, b"\ntags,").map(|p| p + 1)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::io::Read;
    use std::path::PathBuf;

    use super::*;
    use crate::parse::count_lines;
    use crate::parse::tests_support::{Event, parse_all, parse_chunk_events, parse_chunked};

    const HEADER: &[u8] = b"tags,name string,fleet string,load float32\nreadings,lat,lon\ndiag,fuel\n\n";

    fn parser() -> (TsbsParser, usize, u64) {
        let (header, consumed, lines) = parse_tsbs_header(HEADER).unwrap().unwrap();
        (TsbsParser::new(header), consumed, lines)
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn header_block() {
        let (p, consumed, lines) = parser();
        assert_eq!((consumed, lines), (HEADER.len(), 4));
        assert_eq!(
            p.header(),
            &TsbsHeader {
                tags: vec![("name".into(), "string".into()), ("fleet".into(), "string".into()), ("load".into(), "float32".into())],
                measurements: vec![("readings".into(), vec!["lat".into(), "lon".into()]), ("diag".into(), vec!["fuel".into()])],
            }
        );
        for cut in 0..HEADER.len() {
            assert_eq!(parse_tsbs_header(&HEADER[..cut]).unwrap(), None, "cut at {cut}");
        }
        assert_eq!(parse_tsbs_header(b"tags,a string\r\nm,x\r\n\r\nrest").unwrap().map(|(_, n, l)| (n, l)), Some((22, 3)));
        let err = parse_tsbs_header(b"tags,a string\nm,x\nm,y\n\n").unwrap_err();
        assert_eq!(err.to_string(), "line 3: measurement \"m\" is listed twice");
        assert_eq!(err.pos, RecordPos { line: 3, offset: 18, len: 4 });
        assert!(parse_tsbs_header(b"cpu,a\n\n").is_err());
        assert!(parse_tsbs_header(b"tags,a\n\n").is_err());
    }

    #[test]
    fn records_with_nulls_and_additional_tags() {
        let (p, consumed, lines) = parser();
        let body = b"tags,name=t1,fleet=,load=5,port=1\"2,server=s\nreadings,-5,1.5,\ntags,fleet=N,name=t2\r\ndiag,10,7\r\n";
        let mut got = Vec::new();
        p.parse_records(
            body,
            lines + 1,
            consumed as u64,
            &mut |r, pos| {
                let tags: Vec<_> = r.tags.iter().map(|t| t.map(|v| String::from_utf8_lossy(v).into_owned())).collect();
                let values: Vec<_> = r.values.iter().map(|t| t.map(|v| String::from_utf8_lossy(v).into_owned())).collect();
                let json = r.additional_tags.map(|j| String::from_utf8(j.to_vec()).unwrap());
                got.push((r.measurement, r.time_ns, tags, json, values, r.data_line, pos));
            },
            &mut |e| panic!("{e}"),
        );
        assert_eq!(
            got[0],
            (
                0,
                -5,
                vec![s("t1"), None, s("5")],
                s(r#"{"port": "1\"2", "server": "s"}"#),
                vec![s("1.5"), None],
                6,
                RecordPos { line: 5, offset: consumed as u64, len: 62 }
            )
        );
        let json: serde_json::Value = serde_json::from_str(got[0].3.as_deref().unwrap()).unwrap();
        assert_eq!(json["port"], "1\"2");
        let mut errors = Vec::new();
        p.parse_records(b"tags,name=a,x=\xff\nreadings,1,1,2\n", 1, 0, &mut |_, _| panic!(), &mut |e| errors.push(e.reason));
        assert_eq!(errors, ["tags not in the header are not valid UTF-8, so they cannot go into additional_tags"]);
        assert_eq!(
            got[1],
            (1, 10, vec![s("t2"), s("N"), None], None, vec![s("7")], 8, RecordPos { line: 7, offset: 62 + consumed as u64, len: 33 })
        );
    }

    #[test]
    fn malformed_records_are_errors_and_parsing_continues() {
        let (p, _, _) = parser();
        let body: &[u8] = b"tags,name=a\ncpu,1,2\n\
            tags,name=a\nreadings,x,1,2\n\
            tags,name=a\nreadings,1,1\n\
            tags,name=a\n\
            tags,name\nreadings,1,1,2\n\
            tags,name=a\nreadings,1,1,2\nreadings,1,1,2\n\
            tags,name=ok\n\nreadings,1,1,2\n";
        let (events, _) = parse_all(&p, body);
        let reasons: Vec<String> = events[..6].iter().map(|e| e.clone().unwrap_error().to_string()).collect();
        assert_eq!(
            reasons,
            vec![
                "line 1: measurement \"cpu\" is not in the tsbs header (data line 2)",
                "line 3: time \"x\" is not an integer of nanoseconds (data line 4)",
                "line 5: measurement \"readings\" has 2 fields in the header but the data line has 1 values (data line 6)",
                "line 7: the tags line has no data line after it",
                "line 8: tag \"name\" has no '='",
                "line 10: 2 lines follow the tags line; expected one data line (data line 11)",
            ]
        );
        let (fields, pos) = events[6].clone().unwrap_record();
        assert_eq!(fields, vec![s("readings"), s("1"), s("ok"), None, None, None, s("1"), s("2")]);
        assert_eq!(pos.line, 13);
        assert_eq!(pos.len, 29);
    }

    #[test]
    fn boundary_cuts_before_tags_lines() {
        let (p, _, _) = parser();
        let body = b"tags,name=a\nreadings,1,1,2\ntags,name=b\nreadings,1,1,2\n";
        assert_eq!(p.last_record_end(body, false), Some(27));
        assert_eq!(p.last_record_end(&body[..32], false), Some(27));
        assert_eq!(p.last_record_end(&body[..31], false), None);
        assert_eq!(p.last_record_end(&body[..27], false), None);
        assert_eq!(p.last_record_end(&body[..27], true), Some(27));
    }

    /// `$CHUTE_TEST_DATA`, or the repository's own `tests/data`.
    fn data_file(name: &str) -> Vec<u8> {
        let dir = std::env::var_os("CHUTE_TEST_DATA")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/data"));
        let path = dir.join(name);
        let file = std::fs::File::open(&path).unwrap_or_else(|e| {
            panic!("cannot open {} ({e}); set CHUTE_TEST_DATA to the directory holding the tsbs test files", path.display())
        });
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(file).read_to_end(&mut out).unwrap();
        out
    }

    /// Per measurement: rows, NULLs per field, rows with additional tags.
    #[derive(Debug, Default, PartialEq, Eq)]
    struct Counts {
        rows: usize,
        nulls: BTreeMap<String, usize>,
        with_additional_tags: usize,
    }

    fn count_file(name: &str) -> BTreeMap<String, Counts> {
        let input = data_file(name);
        let (header, consumed, lines) = parse_tsbs_header(&input).unwrap().expect("a complete header");
        let p = TsbsParser::new(header.clone());
        let body = &input[consumed..];
        let mut counts: BTreeMap<String, Counts> = BTreeMap::new();
        let mut last_line = 0;
        p.parse_records(
            body,
            lines + 1,
            consumed as u64,
            &mut |r, pos| {
                let (m, fields) = &header.measurements[r.measurement];
                let c = counts.entry(m.clone()).or_default();
                c.rows += 1;
                for (i, f) in fields.iter().enumerate() {
                    *c.nulls.entry(f.clone()).or_default() += usize::from(r.values.is_null(i));
                }
                if let Some(json) = r.additional_tags {
                    c.with_additional_tags += 1;
                    let v: serde_json::Value = serde_json::from_slice(json).expect("additional_tags is JSON");
                    assert!(v.as_object().unwrap().values().all(|v| v.is_string()));
                }
                assert_eq!(r.data_line, pos.line + 1);
                last_line = pos.line + 1;
            },
            &mut |e| panic!("{name}: {e}"),
        );
        assert_eq!(last_line, count_lines(&input), "{name}: the last data line is the file's last line");
        // Cutting the body into chunks (64 KiB reads) changes nothing.
        let mut whole = Vec::new();
        let _ = parse_chunk_events(&p, body, lines + 1, consumed as u64, &mut whole);
        let (chunked, _) = parse_chunked(&p, body, lines + 1, consumed as u64, &[65_536, 10_007]);
        assert!(whole == chunked, "{name}: chunked parse differs");
        assert!(whole.iter().all(|e| matches!(e, Event::Record(..))));
        counts
    }

    #[test]
    fn tsbs_iot_file_matches_readme() {
        let counts = count_file("tsbs_iot_s50_2h.tsbs.gz");
        assert_eq!(counts.keys().collect::<Vec<_>>(), ["diagnostics", "readings"]);
        assert_eq!(counts["readings"].rows, 32_478);
        assert_eq!(counts["diagnostics"].rows, 32_385);
        assert_eq!(counts["readings"].nulls["latitude"], 435);
        assert_eq!(counts["diagnostics"].nulls["fuel_state"], 1_206);
        assert_eq!(counts["readings"].with_additional_tags + counts["diagnostics"].with_additional_tags, 0);
    }

    #[test]
    fn tsbs_cpuonly_file_matches_readme() {
        let counts = count_file("tsbs_cpuonly_s20_2h.tsbs.gz");
        assert_eq!(counts.len(), 1);
        assert_eq!(counts["cpu"].rows, 14_400);
        assert_eq!(counts["cpu"].with_additional_tags, 0);
    }

    #[test]
    fn tsbs_devops_file_matches_readme() {
        let counts = count_file("tsbs_devops_s5_1h.tsbs.gz");
        let names = ["cpu", "disk", "diskio", "kernel", "mem", "net", "nginx", "postgresl", "redis"];
        assert_eq!(counts.keys().map(String::as_str).collect::<Vec<_>>(), names);
        for name in names {
            assert_eq!(counts[name].rows, 1_800, "{name}");
            let expected = if ["disk", "diskio", "net", "nginx", "redis"].contains(&name) { 1_800 } else { 0 };
            assert_eq!(counts[name].with_additional_tags, expected, "{name}");
        }
    }
}
