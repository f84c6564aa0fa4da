//! JSON Lines: one JSON object per line, mapped onto configured columns.
//!
//! Event pipelines and log shippers write JSON Lines, and chute loads them
//! into ordinary columns: a record's fields are the object's values for the
//! configured column names, in column order. A string gives its unescaped
//! text, a number its literal exactly as written (never through `f64`, which
//! would change `0.1000000000000000055` or a 20-digit integer), `true`/`false`
//! those words, `null` or a missing key NULL, and an object or array its JSON
//! text as written (valid JSON for a `json`/`jsonb` column). When a key
//! repeats, the last value wins, as in `jsonb`. A line that is empty or only
//! whitespace is skipped; anything else that is not exactly one valid JSON
//! object is a bad record.
//!
//! A key that names no column of the table is a bad record too, as an
//! unknown column is in a CSV header or a line of line protocol: a typo
//! (`usgae`) or a column never added would otherwise load as NULL without a
//! word. Keys match columns exactly (`HOST` is not `host`; the reason then
//! names the column it differs from only in case). A key of a column the load
//! leaves out ([`UnknownKeys::other_columns`]: not among the columns chosen,
//! or generated) is skipped, and [`UnknownKeys::ignore`] skips every key that
//! is not a loaded column, after its value is checked: the rule of
//! PostgreSQL's own `json_populate_record`.
//!
//! The scanner is written here rather than taken from `serde_json` because it
//! never builds a value: it validates the line in one pass, records where each
//! wanted value lies (unescaping only strings that have escapes), and copies
//! those bytes into the reused [`Fields`]. Record boundaries are plain
//! newlines, since a raw newline cannot occur inside a JSON string.

use std::collections::{HashMap, HashSet};

use memchr::{memchr, memchr2, memrchr};

use super::{Boundary, ChunkEnd, Cursor, Fields, MAX_RECORD_BYTES, OptionsError, RecordError, RecordParser, RecordPos, TOO_LONG};

/// Deepest nesting of arrays and objects accepted (serde_json's default).
const MAX_DEPTH: usize = 128;

/// Parses JSON Lines into the configured columns; see the module documentation.
#[derive(Debug, Clone)]
pub struct JsonlParser {
    columns: Vec<String>,
    /// Column index by name, for keys that do not come in column order.
    index: HashMap<Box<[u8]>, usize>,
    unknown: UnknownKeys,
    /// `unknown.other_columns`, looked up by key.
    others: HashSet<Box<[u8]>>,
}

/// What a key that names no loaded column does to its record.
#[derive(Debug, Clone, Default)]
pub struct UnknownKeys {
    /// Skip every such key (its value is still checked) instead of refusing
    /// the record.
    pub ignore: bool,
    /// Columns of the table the load does not fill (left out of its column
    /// list, or generated): a key naming one is skipped, not refused.
    pub other_columns: Vec<String>,
    /// What to do about a refused key, appended to the reason ("add it, or
    /// …").
    pub hint: String,
}

/// Where a column's value is, once its line has been scanned.
#[derive(Debug, Clone, Copy)]
enum Slot {
    Null,
    /// Bytes of the line, copied as they are.
    Line(usize, usize),
    /// Bytes of the scratch buffer (a string that had escapes).
    Scratch(usize, usize),
}

/// Bad JSON: the byte index in the line and what was wrong there.
#[derive(Debug, Clone, Copy)]
struct JsonError {
    at: usize,
    what: &'static str,
}

type JsonResult<T> = Result<T, JsonError>;

/// A cursor over one line.
struct Scanner<'a> {
    line: &'a [u8],
    i: usize,
}

impl JsonlParser {
    /// A parser filling `columns` (JSON keys, matched exactly) in that order.
    pub fn new(columns: Vec<String>) -> Result<Self, OptionsError> {
        if columns.is_empty() {
            return Err(OptionsError::new("JSON Lines input needs at least one column"));
        }
        let mut index = HashMap::with_capacity(columns.len());
        for (i, c) in columns.iter().enumerate() {
            if index.insert(c.as_bytes().into(), i).is_some() {
                return Err(OptionsError::new(format!("column {c:?} is listed twice")));
            }
        }
        Ok(JsonlParser { columns, index, unknown: UnknownKeys::default(), others: HashSet::new() })
    }

    /// Sets what a key that names no loaded column does (by default the
    /// record is refused).
    pub fn unknown_keys(mut self, unknown: UnknownKeys) -> Self {
        self.others = unknown.other_columns.iter().map(|c| c.as_bytes().into()).collect();
        self.unknown = unknown;
        self
    }

    pub fn columns(&self) -> &[String] {
        &self.columns
    }

    /// Whether a key that names no loaded column refuses its record.
    #[inline]
    fn refuses(&self, key: &[u8]) -> bool {
        !self.unknown.ignore && !self.others.contains(key)
    }

    /// Why a record with these unknown keys is refused.
    fn unknown_reason(&self, keys: &[String]) -> String {
        let mut keys = keys.to_vec();
        let mut seen = HashSet::new();
        keys.retain(|k| seen.insert(k.clone()));
        let quoted: Vec<String> = keys.iter().map(|k| format!("{k:?}")).collect();
        let (what, such) = if keys.len() == 1 { ("column", "such column") } else { ("columns", "such columns") };
        let every = self.columns.iter().chain(&self.unknown.other_columns);
        let near: Vec<String> =
            keys.iter().filter_map(|k| every.clone().find(|c| c.eq_ignore_ascii_case(k))).map(|c| c.to_owned()).collect();
        let mut reason = format!("unknown {what} {}: the table has no {such}", quoted.join(", "));
        if !near.is_empty() {
            reason.push_str(&format!(" (did you mean {}? keys match columns exactly)", near.join(", ")));
        }
        if !self.unknown.hint.is_empty() {
            reason.push_str("; ");
            reason.push_str(&self.unknown.hint);
        }
        reason
    }

    /// The column a key names, trying first the column after the previous
    /// match (keys usually come in column order).
    #[inline]
    fn column(&self, key: &[u8], expected: usize) -> Option<usize> {
        if self.columns.get(expected).is_some_and(|c| c.as_bytes() == key) {
            return Some(expected);
        }
        self.index.get(key).copied()
    }

    /// Scans one line. `Ok(false)` for a blank line; otherwise fills `slots`
    /// (one per column), `scratch`, and `unknown` with the keys that refuse
    /// the record.
    fn scan_line(&self, line: &[u8], slots: &mut Vec<Slot>, scratch: &mut Vec<u8>, unknown: &mut Vec<Slot>) -> JsonResult<bool> {
        slots.clear();
        slots.resize(self.columns.len(), Slot::Null);
        scratch.clear();
        unknown.clear();
        let mut s = Scanner { line, i: 0 };
        s.skip_ws();
        match s.peek() {
            None => return Ok(false),
            Some(b'{') => s.i += 1,
            Some(_) => return Err(s.error("expected a JSON object")),
        }
        s.skip_ws();
        if s.peek() == Some(b'}') {
            s.i += 1;
        } else {
            let mut expected = 0;
            loop {
                if s.peek() != Some(b'"') {
                    return Err(s.error("expected a string key"));
                }
                let key = s.string(scratch)?;
                let key_bytes = match key {
                    Slot::Line(a, b) => &line[a..b],
                    Slot::Scratch(a, b) => &scratch[a..b],
                    Slot::Null => &[],
                };
                let column = self.column(key_bytes, expected);
                if column.is_none() && self.refuses(key_bytes) {
                    unknown.push(key);
                }
                s.skip_ws();
                s.expect(b':', "expected ':' after a key")?;
                s.skip_ws();
                let value = s.value(scratch, 1)?;
                if let Some(c) = column {
                    slots[c] = value;
                    expected = c + 1;
                }
                s.skip_ws();
                match s.peek() {
                    Some(b',') => s.i += 1,
                    Some(b'}') => {
                        s.i += 1;
                        break;
                    }
                    _ => return Err(s.error("expected ',' or '}' after a value")),
                }
                s.skip_ws();
            }
        }
        s.skip_ws();
        if s.i != line.len() {
            return Err(s.error("unexpected text after the object"));
        }
        Ok(true)
    }
}

impl Scanner<'_> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.line.get(self.i).copied()
    }

    #[inline]
    fn error(&self, what: &'static str) -> JsonError {
        JsonError { at: self.i, what }
    }

    #[inline]
    fn skip_ws(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.i += 1;
        }
    }

    #[inline]
    fn expect(&mut self, byte: u8, what: &'static str) -> JsonResult<()> {
        if self.peek() != Some(byte) {
            return Err(self.error(what));
        }
        self.i += 1;
        Ok(())
    }

    /// Checks unescaped string bytes: no control characters, valid UTF-8.
    #[inline]
    fn check_plain(&self, at: usize, bytes: &[u8]) -> JsonResult<()> {
        // One branch-free pass (it vectorises); UTF-8 is checked only when needed.
        let (control, high) = bytes.iter().fold((false, false), |(c, h), &b| (c | (b < 0x20), h | (b >= 0x80)));
        if control {
            return Err(JsonError { at, what: "control character in a string" });
        }
        if high && std::str::from_utf8(bytes).is_err() {
            return Err(JsonError { at, what: "invalid UTF-8 in a string" });
        }
        Ok(())
    }

    /// Reads four hex digits at `at`.
    fn hex4(&self, at: usize) -> JsonResult<u32> {
        let digits = self.line.get(at..at + 4).ok_or(JsonError { at, what: "truncated \\u escape" })?;
        digits.iter().try_fold(0u32, |v, &d| match (d as char).to_digit(16) {
            Some(x) => Ok(v * 16 + x),
            None => Err(JsonError { at, what: "invalid \\u escape" }),
        })
    }

    /// Reads a string at the opening quote: its contents in the line when it
    /// has no escapes, else unescaped into `scratch`.
    fn string(&mut self, scratch: &mut Vec<u8>) -> JsonResult<Slot> {
        let start = self.i + 1;
        let unterminated = JsonError { at: self.i, what: "unterminated string" };
        let p = start + memchr2(b'"', b'\\', &self.line[start..]).ok_or(unterminated)?;
        if self.line[p] == b'"' {
            self.check_plain(start, &self.line[start..p])?;
            self.i = p + 1;
            return Ok(Slot::Line(start, p));
        }
        let from = scratch.len();
        let mut i = start;
        loop {
            let p = i + memchr2(b'"', b'\\', &self.line[i..]).ok_or(JsonError { at: self.i, what: "unterminated string" })?;
            self.check_plain(i, &self.line[i..p])?;
            scratch.extend_from_slice(&self.line[i..p]);
            if self.line[p] == b'"' {
                self.i = p + 1;
                return Ok(Slot::Scratch(from, scratch.len()));
            }
            let bad = JsonError { at: p, what: "invalid escape in a string" };
            i = p + 2;
            match self.line.get(p + 1).copied().ok_or(bad)? {
                c @ (b'"' | b'\\' | b'/') => scratch.push(c),
                b'b' => scratch.push(0x08),
                b'f' => scratch.push(0x0c),
                b'n' => scratch.push(b'\n'),
                b'r' => scratch.push(b'\r'),
                b't' => scratch.push(b'\t'),
                b'u' => {
                    let mut code = self.hex4(p + 2)?;
                    i = p + 6;
                    if (0xdc00..0xe000).contains(&code) {
                        return Err(JsonError { at: p, what: "lone low surrogate in a \\u escape" });
                    }
                    if (0xd800..0xdc00).contains(&code) {
                        let lone = JsonError { at: p, what: "lone high surrogate in a \\u escape" };
                        if self.line.get(i..i + 2) != Some(b"\\u") {
                            return Err(lone);
                        }
                        let low = self.hex4(i + 2)?;
                        if !(0xdc00..0xe000).contains(&low) {
                            return Err(lone);
                        }
                        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                        i += 6;
                    }
                    let c = char::from_u32(code).ok_or(JsonError { at: p, what: "invalid \\u escape" })?;
                    scratch.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => return Err(bad),
            }
        }
    }

    /// Reads any value; `depth` is the nesting level of the value.
    fn value(&mut self, scratch: &mut Vec<u8>, depth: usize) -> JsonResult<Slot> {
        let start = self.i;
        match self.peek() {
            Some(b'"') => self.string(scratch),
            Some(b'{' | b'[') => {
                let keep = scratch.len();
                self.container(scratch, depth)?;
                scratch.truncate(keep);
                Ok(Slot::Line(start, self.i))
            }
            Some(b't') => self.literal(b"true").map(|()| Slot::Line(start, self.i)),
            Some(b'f') => self.literal(b"false").map(|()| Slot::Line(start, self.i)),
            Some(b'n') => self.literal(b"null").map(|()| Slot::Null),
            Some(b'-' | b'0'..=b'9') => self.number().map(|()| Slot::Line(start, self.i)),
            _ => Err(self.error("expected a value")),
        }
    }

    fn literal(&mut self, word: &'static [u8]) -> JsonResult<()> {
        if !self.line[self.i..].starts_with(word) {
            return Err(self.error("invalid literal"));
        }
        self.i += word.len();
        Ok(())
    }

    /// Checks a number's grammar (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`).
    fn number(&mut self) -> JsonResult<()> {
        let bad = self.error("invalid number");
        if self.peek() == Some(b'-') {
            self.i += 1;
        }
        match self.peek() {
            Some(b'0') => self.i += 1,
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(bad),
        }
        if self.peek() == Some(b'.') {
            self.i += 1;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(bad);
            }
            self.digits();
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.i += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.i += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(bad);
            }
            self.digits();
        }
        Ok(())
    }

    #[inline]
    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.i += 1;
        }
    }

    /// Checks an object or array at its opening bracket.
    fn container(&mut self, scratch: &mut Vec<u8>, depth: usize) -> JsonResult<()> {
        if depth >= MAX_DEPTH {
            return Err(self.error("objects and arrays nested too deeply"));
        }
        let close = if self.line[self.i] == b'{' { b'}' } else { b']' };
        self.i += 1;
        self.skip_ws();
        if self.peek() == Some(close) {
            self.i += 1;
            return Ok(());
        }
        loop {
            if close == b'}' {
                if self.peek() != Some(b'"') {
                    return Err(self.error("expected a string key"));
                }
                self.string(scratch)?;
                self.skip_ws();
                self.expect(b':', "expected ':' after a key")?;
                self.skip_ws();
            }
            self.value(scratch, depth + 1)?;
            self.skip_ws();
            match self.peek() {
                Some(b',') => self.i += 1,
                Some(b) if b == close => {
                    self.i += 1;
                    return Ok(());
                }
                _ => return Err(self.error("expected ',' or a closing bracket")),
            }
            self.skip_ws();
        }
    }
}

impl RecordParser for JsonlParser {
    fn parse_chunk(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        let mut cursor = Cursor::new(first_line, base_offset);
        let mut fields = Fields::new();
        let mut slots = Vec::with_capacity(self.columns.len());
        let mut scratch = Vec::new();
        let mut unknown = Vec::new();
        let mut start = 0;
        while start < chunk.len() {
            let (end, next) = match memchr(b'\n', &chunk[start..]) {
                Some(k) => (start + k, start + k + 1),
                None => (chunk.len(), chunk.len()),
            };
            let pos = cursor.pos(start, next);
            let line = &chunk[start..end];
            if next - start > MAX_RECORD_BYTES {
                on_error(RecordError { pos, reason: TOO_LONG.into() });
            } else {
                match self.scan_line(line, &mut slots, &mut scratch, &mut unknown) {
                    Ok(false) => {}
                    Ok(true) if !unknown.is_empty() => {
                        let keys: Vec<String> = unknown
                            .iter()
                            .map(|k| match *k {
                                Slot::Line(a, b) => String::from_utf8_lossy(&line[a..b]).into_owned(),
                                Slot::Scratch(a, b) => String::from_utf8_lossy(&scratch[a..b]).into_owned(),
                                Slot::Null => String::new(),
                            })
                            .collect();
                        on_error(RecordError { pos, reason: self.unknown_reason(&keys) });
                    }
                    Ok(true) => {
                        fields.clear();
                        for slot in &slots {
                            match *slot {
                                Slot::Null => fields.push_null(),
                                Slot::Line(a, b) => fields.push(&line[a..b]),
                                Slot::Scratch(a, b) => fields.push(&scratch[a..b]),
                            }
                        }
                        on_record(&fields, pos);
                    }
                    Err(e) => on_error(RecordError { pos, reason: format!("invalid JSON at byte {} of the line: {}", e.at + 1, e.what) }),
                }
            }
            cursor.line += u64::from(next > end);
            start = next;
        }
        ChunkEnd::Complete
    }

    /// A line ends every record, so messages that each end with one are
    /// parsed at once (what a Kafka source hands over); otherwise each on its own.
    fn parse_messages(
        &self,
        chunk: &[u8],
        starts: &[u32],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        let ends_lines = chunk.last().is_none_or(|b| *b == b'\n') && starts.iter().all(|s| *s == 0 || chunk[*s as usize - 1] == b'\n');
        if ends_lines {
            return self.parse_chunk(chunk, first_line, base_offset, on_record, on_error);
        }
        super::each_message(self, chunk, starts, first_line, base_offset, (on_record, on_error))
    }
}

impl Boundary for JsonlParser {
    fn last_record_end(&self, buf: &[u8], eof: bool) -> Option<usize> {
        if eof {
            return (!buf.is_empty()).then_some(buf.len());
        }
        memrchr(b'\n', buf).map(|p| p + 1)
    }

    fn carry(&self, _buf: &[u8]) -> Option<Vec<u8>> {
        // A JSON text holds no raw newline: every newline ends a record.
        Some(Vec::new())
    }

    fn first_record_end(&self, buf: &[u8]) -> Option<usize> {
        memchr::memchr(b'\n', buf).map(|p| p + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tests_support::parse_all;

    fn jsonl(columns: &[&str]) -> JsonlParser {
        JsonlParser::new(columns.iter().map(|c| c.to_string()).collect()).unwrap()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    fn ignoring(columns: &[&str]) -> JsonlParser {
        jsonl(columns).unknown_keys(UnknownKeys { ignore: true, ..UnknownKeys::default() })
    }

    #[test]
    fn values_map_to_columns() {
        let p = ignoring(&["a", "b", "c", "d", "e", "f"]);
        let input = br#"{"f": [1, {"x": "y\n"}], "a": "h\u00e9\"\ud83d\ude00", "b": -0.1000000000000000055e+10, "c": true, "zz": {"q": 1}, "d": null}"#;
        let (events, _) = parse_all(&p, input);
        let (fields, pos) = events[0].clone().unwrap_record();
        assert_eq!(fields, vec![s("hé\"😀"), s("-0.1000000000000000055e+10"), s("true"), None, None, s(r#"[1, {"x": "y\n"}]"#)]);
        assert_eq!(pos, RecordPos { line: 1, offset: 0, len: input.len() as u32 });
    }

    #[test]
    fn last_duplicate_wins_and_blank_lines_are_skipped() {
        let p = jsonl(&["a"]);
        let (events, _) = parse_all(&p, b"\n  \r\n{\"a\":1,\"a\":\"2\"}\r\n{}\n");
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].clone().unwrap_record(), (vec![s("2")], RecordPos { line: 3, offset: 5, len: 17 }));
        assert_eq!(events[1].clone().unwrap_record(), (vec![None], RecordPos { line: 4, offset: 22, len: 3 }));
    }

    #[test]
    fn invalid_lines_are_errors_and_parsing_continues() {
        let p = jsonl(&["a"]);
        let bad: &[&[u8]] = &[
            b"[1]",
            b"{\"a\":1",
            b"{\"a\":01}",
            b"{\"a\":1.}",
            b"{\"a\":tru}",
            b"{\"a\":\"\\x\"}",
            b"{\"a\":\"\\ud800\"}",
            b"{\"a\":\"\x01\"}",
            b"{\"a\":\"\xff\"}",
            b"{\"a\":1} x",
            b"{a:1}",
            b"{\"a\":[1,]}",
            b"{\"a\":1,}",
        ];
        for line in bad {
            let input = [*line, b"\n{\"a\":2}\n"].concat();
            let (events, _) = parse_all(&p, &input);
            let err = events[0].clone().unwrap_error();
            assert!(err.reason.starts_with("invalid JSON at byte"), "{err}");
            assert_eq!(err.pos.len as usize, line.len() + 1, "{}", String::from_utf8_lossy(line));
            assert_eq!(events[1].clone().unwrap_record().0, vec![s("2")]);
        }
        let deep = format!("{{\"a\":{}{}}}", "[".repeat(200), "]".repeat(200));
        assert!(parse_all(&p, deep.as_bytes()).0[0].clone().unwrap_error().reason.contains("nested too deeply"));
    }

    #[test]
    fn escaped_keys_match_columns() {
        let p = jsonl(&["a\"b", "é"]);
        let (events, _) = parse_all(&p, br#"{"\u00e9": 1, "a\"b": "x"}"#);
        assert_eq!(events[0].clone().unwrap_record().0, vec![s("x"), s("1")]);
    }

    #[test]
    fn a_key_that_names_no_column_refuses_its_record_and_says_what_to_do() {
        let hint = "add it, or load with --ignore-unknown to drop such keys";
        let p = jsonl(&["time", "host", "usage"]).unknown_keys(UnknownKeys {
            ignore: false,
            other_columns: vec!["note".into()],
            hint: hint.into(),
        });
        let input = concat!(
            "{\"time\": 1, \"host\": \"a\", \"usage\": 5}\n",
            "{\"time\": 2, \"host\": \"a\", \"usgae\": 5}\n",
            "{\"time\": 3, \"HOST\": \"x\", \"z\": [1], \"z\": 2}\n",
            "{\"time\": 4, \"note\": \"left out by the load\"}\n",
            "{\"time\": 5, \"usgae\": tru}\n",
        );
        let (events, _) = parse_all(&p, input.as_bytes());
        assert_eq!(events.len(), 5);
        assert_eq!(events[0].clone().unwrap_record().0, vec![s("1"), s("a"), s("5")]);
        let err = events[1].clone().unwrap_error();
        assert_eq!(err.reason, format!("unknown column \"usgae\": the table has no such column; {hint}"));
        assert_eq!((err.pos.line, err.pos.offset), (2, 37));
        let err = events[2].clone().unwrap_error();
        assert_eq!(
            err.reason,
            format!(
                "unknown columns \"HOST\", \"z\": the table has no such columns (did you mean host? keys match columns exactly); {hint}"
            )
        );
        // A column the load leaves out is skipped; bad JSON is bad JSON first.
        assert_eq!(events[3].clone().unwrap_record().0, vec![s("4"), None, None]);
        assert!(events[4].clone().unwrap_error().reason.starts_with("invalid JSON at byte"));
        // Ignoring unknown keys loads every line as before, the unknown keys dropped.
        let p = ignoring(&["time", "host", "usage"]);
        let (events, _) = parse_all(&p, input.as_bytes());
        assert_eq!(events[1].clone().unwrap_record().0, vec![s("2"), s("a"), None]);
        assert_eq!(events[2].clone().unwrap_record().0, vec![s("3"), None, None]);
    }

    #[test]
    fn options_are_checked() {
        assert!(JsonlParser::new(vec![]).is_err());
        assert!(JsonlParser::new(vec!["a".into(), "a".into()]).is_err());
    }
}
