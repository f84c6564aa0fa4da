//! PostgreSQL's text COPY format, exactly as `COPY … (FORMAT text)` in
//! PostgreSQL 15 reads it.
//!
//! This is what `pg_dump` and `COPY … TO` write by default, so chute must read
//! it byte for byte like the server (`CopyReadLineText` and
//! `CopyReadAttributesText`): fields are separated by the delimiter (TAB by
//! default), a backslash escapes the next byte (`\b \f \n \r \t \v \\`, octal
//! `\d` to `\ddd`, hex `\xh` and `\xhh`, anything else stands for itself,
//! including the delimiter and a raw newline), and a field whose *raw* bytes
//! equal the NULL string (`\N` by default) is NULL. Because a backslash
//! consumes the byte after it, a backslash before a raw newline makes the
//! newline data and the record continues on the next physical line — the
//! server does exactly that — and the boundary finder agrees: a newline ends a
//! record only after an even run of backslashes.
//!
//! An unescaped `\.` followed by a line terminator ends the data, even in the
//! middle of a line (the bytes before it on that line are still a record), and
//! `\.` followed by anything else is "end-of-copy marker corrupt". As in the
//! CSV parser, `\n` and `\r\n` both end lines and any other raw carriage
//! return is a bad record.

use memchr::{memchr2, memchr3, memmem, memrchr};

use super::lines::{LineFormat, LineScan, end_marker_len, parse_lines, parse_message_lines};
use super::{Boundary, ChunkEnd, Fields, OptionsError, RecordError, RecordParser, RecordPos, check_delimiter_and_null};

/// `COPY … (FORMAT text, …)` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextOptions {
    /// `DELIMITER`, default TAB.
    pub delimiter: u8,
    /// `NULL`, default `\N`, compared with the raw (still escaped) field.
    pub null: Vec<u8>,
    /// `HEADER`: the first record (at input offset 0) is skipped unchecked.
    pub header: bool,
    /// The number of columns; `None` accepts any number of fields.
    pub expected_fields: Option<usize>,
}

impl Default for TextOptions {
    fn default() -> Self {
        TextOptions { delimiter: b'\t', null: b"\\N".to_vec(), header: false, expected_fields: None }
    }
}

/// Parses PostgreSQL's text format; see the module documentation.
#[derive(Debug, Clone)]
pub struct TextParser {
    opts: TextOptions,
}

/// Whether a backslash escapes `buf[p]`: true when an odd run of backslashes
/// stands right before it. (The byte before such a run is never itself a
/// pending escape, so the run alone decides, from any point after a record
/// start.)
#[inline]
fn is_escaped(buf: &[u8], p: usize) -> bool {
    !buf[..p].iter().rev().take_while(|&&b| b == b'\\').count().is_multiple_of(2)
}

/// Decodes the escape after a backslash (`rest` is non-empty): the byte it
/// stands for and how many bytes of `rest` it used.
#[inline]
fn unescape(rest: &[u8]) -> (u8, usize) {
    let c = rest[0];
    match c {
        b'0'..=b'7' => {
            let mut value = u32::from(c - b'0');
            let mut used = 1;
            while used < 3
                && let Some(&d @ b'0'..=b'7') = rest.get(used)
            {
                value = value * 8 + u32::from(d - b'0');
                used += 1;
            }
            // `\777` is 511; PostgreSQL keeps the low byte.
            (value as u8, used)
        }
        b'x' => match rest.get(1).and_then(|&h| hex_value(h)) {
            Some(high) => match rest.get(2).and_then(|&h| hex_value(h)) {
                Some(low) => (high * 16 + low, 3),
                None => (high, 2),
            },
            None => (b'x', 1),
        },
        b'b' => (0x08, 1),
        b'f' => (0x0c, 1),
        b'n' => (b'\n', 1),
        b'r' => (b'\r', 1),
        b't' => (b'\t', 1),
        b'v' => (0x0b, 1),
        _ => (c, 1),
    }
}

#[inline]
fn hex_value(h: u8) -> Option<u8> {
    (h as char).to_digit(16).map(|d| d as u8)
}

impl TextParser {
    /// Checks the options the way `COPY` does.
    pub fn new(opts: TextOptions) -> Result<Self, OptionsError> {
        check_delimiter_and_null(opts.delimiter, &opts.null)?;
        if b"\\.abcdefghijklmnopqrstuvwxyz0123456789".contains(&opts.delimiter) {
            return Err(OptionsError::new(format!("COPY delimiter cannot be \"{}\"", opts.delimiter as char)));
        }
        if opts.expected_fields == Some(0) {
            return Err(OptionsError::new("a text record has at least one field; expected_fields cannot be 0"));
        }
        Ok(TextParser { opts })
    }

    pub fn options(&self) -> &TextOptions {
        &self.opts
    }

    /// Finds the end of the record starting at `start`: its line end, or
    /// an unescaped end marker, which ends the data even in the middle of a
    /// line. The scan is `special` when the record holds a backslash,
    /// `broken` when `\.` is followed by anything but a line end.
    #[inline]
    fn scan_record(&self, buf: &[u8], start: usize) -> LineScan {
        let mut scan = LineScan::to_end(buf.len());
        let mut i = start;
        while let Some(k) = memchr3(b'\n', b'\r', b'\\', &buf[i..]) {
            let p = i + k;
            match buf[p] {
                b'\n' => {
                    (scan.content_end, scan.next) = (p, p + 1);
                    return scan;
                }
                b'\r' if buf.get(p + 1) == Some(&b'\n') => {
                    (scan.content_end, scan.next) = (p, p + 2);
                    return scan;
                }
                b'\r' => {
                    scan.bare_cr = true;
                    i = p + 1;
                }
                _ => {
                    scan.special = true;
                    if buf.get(p + 1) == Some(&b'.') {
                        if let Some(n) = end_marker_len(&buf[p..]) {
                            (scan.content_end, scan.next, scan.end_marker) = (p, p + n, true);
                            return scan;
                        }
                        scan.broken = true;
                    }
                    // The escaped byte, whatever it is (a newline too), is data.
                    i = (p + 2).min(buf.len());
                }
            }
        }
        scan
    }

    /// Splits a record's content that contains backslashes, as
    /// `CopyReadAttributesText` does: unescape while looking for the end of
    /// the field, then compare the raw field with the NULL string.
    fn split_escaped(&self, content: &[u8], fields: &mut Fields) {
        let d = self.opts.delimiter;
        let mut i = 0;
        loop {
            let field_start = i;
            let (field_end, found_delimiter) = loop {
                let Some(k) = memchr2(d, b'\\', &content[i..]) else {
                    fields.append(&content[i..]);
                    break (content.len(), false);
                };
                let p = i + k;
                fields.append(&content[i..p]);
                if content[p] == d {
                    i = p + 1;
                    break (p, true);
                }
                if p + 1 == content.len() {
                    // A backslash at the very end (only at EOF) is dropped.
                    i = p + 1;
                    break (p, false);
                }
                let (byte, used) = unescape(&content[p + 1..]);
                fields.append_byte(byte);
                i = p + 1 + used;
            };
            if content[field_start..field_end] == *self.opts.null {
                fields.finish_null();
            } else {
                fields.finish();
            }
            if !found_delimiter {
                return;
            }
        }
    }
}

impl LineFormat for TextParser {
    const BROKEN: &'static str = "end-of-copy marker corrupt";
    const BARE_CR: &'static str = "literal carriage return found in data";
    const BROKEN_HEADER_IS_ERROR: bool = true;

    #[inline]
    fn delimiter(&self) -> u8 {
        self.opts.delimiter
    }

    #[inline]
    fn null(&self) -> &[u8] {
        &self.opts.null
    }

    #[inline]
    fn header(&self) -> bool {
        self.opts.header
    }

    #[inline]
    fn expected_fields(&self) -> Option<usize> {
        self.opts.expected_fields
    }

    #[inline]
    fn scan(&self, chunk: &[u8], start: usize) -> LineScan {
        self.scan_record(chunk, start)
    }

    #[inline]
    fn split_special(&self, content: &[u8], fields: &mut Fields) {
        self.split_escaped(content, fields);
    }
}

impl RecordParser for TextParser {
    fn parse_chunk(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        parse_lines(self, chunk, first_line, base_offset, on_record, on_error)
    }

    fn parse_messages(
        &self,
        chunk: &[u8],
        starts: &[u32],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        parse_message_lines(self, chunk, starts, first_line, base_offset, on_record, on_error)
    }
}

impl Boundary for TextParser {
    fn last_record_end(&self, buf: &[u8], eof: bool) -> Option<usize> {
        if eof {
            return (!buf.is_empty()).then_some(buf.len());
        }
        // From the back: the last newline that no backslash escapes.
        let mut end = buf.len();
        while let Some(p) = memrchr(b'\n', &buf[..end]) {
            if !is_escaped(buf, p) {
                return Some(p + 1);
            }
            end = p;
        }
        None
    }

    fn carry(&self, buf: &[u8]) -> Option<Vec<u8>> {
        // Only an odd run of backslashes at the end matters: it escapes what follows.
        let odd = !buf.iter().rev().take_while(|&&b| b == b'\\').count().is_multiple_of(2);
        Some(if odd { vec![b'\\'] } else { Vec::new() })
    }

    fn first_record_end(&self, buf: &[u8]) -> Option<usize> {
        memchr::memchr_iter(b'\n', buf).find(|&p| !is_escaped(buf, p)).map(|p| p + 1)
    }

    fn end_of_data(&self, chunk: &[u8]) -> Option<usize> {
        memmem::find_iter(chunk, b"\\.").filter(|&p| !is_escaped(chunk, p)).find_map(|p| end_marker_len(&chunk[p..]).map(|n| p + n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tests_support::{Event, parse_all, parse_message_events};

    fn text(opts: TextOptions) -> TextParser {
        TextParser::new(opts).unwrap()
    }

    fn rows(p: &TextParser, input: &[u8]) -> Vec<Vec<Option<String>>> {
        parse_all(p, input).0.into_iter().map(|e| e.unwrap_record().0).collect()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn a_message_is_a_record_boundary() {
        // Issue 46 #1: a message ending in a backslash joined the next one.
        let p = text(TextOptions { delimiter: b',', expected_fields: Some(2), ..TextOptions::default() });
        let events = parse_message_events(&p, &[b"T,a", b"T,b\\", b"T,c\n", b"T,d"]);
        let rows: Vec<(usize, Vec<Option<String>>)> = events.into_iter().map(|(m, e)| (m, e.unwrap_record().0)).collect();
        // The backslash at its message's end escapes nothing (as at the end of a file).
        assert_eq!(rows, vec![(0, vec![s("T"), s("a")]), (1, vec![s("T"), s("b")]), (2, vec![s("T"), s("c")]), (3, vec![s("T"), s("d")])]);
    }

    #[test]
    fn escapes_match_postgres() {
        let p = text(TextOptions::default());
        // Checked against PostgreSQL 15: `\x4g` is 0x04 then g, `\xg` is x,
        // `\q` is q, `\<TAB>` is a TAB inside the field, `\N\N` is not NULL.
        assert_eq!(rows(&p, b"\\101\\x41\\x4g\\xg\\q\\\\\t\\N\t\\\t\\N\\N\n"), vec![vec![s("AA\x04gxgq\\"), None, s("\tNN")]]);
        let (events, _) = parse_all(&p, b"\\b\\f\\n\\r\\t\\v\\777\\0a\n");
        assert_eq!(
            events,
            vec![Event::Record(vec![Some(b"\x08\x0c\n\r\t\x0b\xff\0a".to_vec())], RecordPos { line: 1, offset: 0, len: 20 })]
        );
        assert_eq!(rows(&p, b"a\t\tb\n\n"), vec![vec![s("a"), s(""), s("b")], vec![s("")]]);
    }

    #[test]
    fn null_string_is_compared_raw() {
        let p = text(TextOptions { null: b"x\\y".to_vec(), ..TextOptions::default() });
        assert_eq!(rows(&p, b"x\\y\txy\t\\N\n"), vec![vec![None, s("xy"), s("N")]]);
        let p = text(TextOptions { null: Vec::new(), delimiter: b'|', ..TextOptions::default() });
        assert_eq!(rows(&p, b"|a|\\N\n"), vec![vec![None, s("a"), s("N")]]);
    }

    #[test]
    fn escaped_newline_continues_the_record() {
        let p = text(TextOptions::default());
        let input = b"a\\\tb\tc\\\nd\ne\tf\n";
        let (events, _) = parse_all(&p, input);
        let got: Vec<_> = events.into_iter().map(Event::unwrap_record).collect();
        assert_eq!(got[0], (vec![s("a\tb"), s("c\nd")], RecordPos { line: 1, offset: 0, len: 10 }));
        assert_eq!(got[1], (vec![s("e"), s("f")], RecordPos { line: 3, offset: 10, len: 4 }));
        assert_eq!(p.last_record_end(b"a\\\nb", false), None);
        assert_eq!(p.last_record_end(b"a\\\\\nb", false), Some(4));
        assert_eq!(p.last_record_end(b"x\na\\\\\\\nb", false), Some(2));
    }

    #[test]
    fn trailing_backslash_at_eof_is_dropped() {
        let p = text(TextOptions::default());
        assert_eq!(rows(&p, b"a\tb\\"), vec![vec![s("a"), s("b")]]);
    }

    #[test]
    fn crlf_and_bare_cr() {
        let p = text(TextOptions::default());
        let (events, _) = parse_all(&p, b"a\tb\r\nc\rd\na\\\r\n\\r\n");
        assert_eq!(events[0].clone().unwrap_record().0, vec![s("a"), s("b")]);
        assert_eq!(events[1].clone().unwrap_error().to_string(), "line 2: literal carriage return found in data");
        assert_eq!(events[2].clone().unwrap_record().0, vec![s("a\r")]);
        assert_eq!(events[3].clone().unwrap_record().0, vec![s("\r")]);
    }

    #[test]
    fn end_of_data_marker() {
        let p = text(TextOptions::default());
        let input = b"a\tb\n\\\\.\nc\td\\.\nafter\n";
        let (events, end) = parse_all(&p, input);
        let got: Vec<_> = events.into_iter().map(Event::unwrap_record).collect();
        assert_eq!(got[1].0, vec![s("\\.")]);
        assert_eq!(got[2], (vec![s("c"), s("d")], RecordPos { line: 3, offset: 8, len: 6 }));
        assert_eq!(end, ChunkEnd::EndOfData { line: 3, offset: 11 });
        assert_eq!(p.end_of_data(input), Some(14));
        assert_eq!(parse_all(&p, b"\\.\r\nx\n"), (vec![], ChunkEnd::EndOfData { line: 1, offset: 0 }));
        let (events, end) = parse_all(&p, b"a\\.b\tc\nd\n\\.");
        assert_eq!(end, ChunkEnd::Complete);
        assert_eq!(events[0].clone().unwrap_error().reason, "end-of-copy marker corrupt");
        assert_eq!(events[1].clone().unwrap_record().0, vec![s("d")]);
        assert_eq!(events[2].clone().unwrap_error().reason, "end-of-copy marker corrupt");
    }

    #[test]
    fn header_and_field_counts() {
        let p = text(TextOptions { header: true, expected_fields: Some(2), ..TextOptions::default() });
        let (events, _) = parse_all(&p, b"h1\th2\nx\ty\nz\n1\t2\t3\n");
        assert_eq!(events[0].clone().unwrap_record(), (vec![s("x"), s("y")], RecordPos { line: 2, offset: 6, len: 4 }));
        assert_eq!(events[1].clone().unwrap_error().to_string(), "line 3: missing data for column 2");
        assert_eq!(events[2].clone().unwrap_error().to_string(), "line 4: extra data after last expected column");
        let (events, _) = parse_all(&p, b"h1\th2\rx\ty\r");
        assert_eq!(events[0].clone().unwrap_error().reason, "literal carriage return found in data");
    }

    #[test]
    fn options_are_checked_like_copy() {
        assert!(TextParser::new(TextOptions { delimiter: b'\\', ..TextOptions::default() }).is_err());
        assert!(TextParser::new(TextOptions { delimiter: b'a', ..TextOptions::default() }).is_err());
        assert!(TextParser::new(TextOptions { delimiter: b'N', ..TextOptions::default() }).is_err());
        assert!(TextParser::new(TextOptions { delimiter: b'|', ..TextOptions::default() }).is_ok());
    }
}
