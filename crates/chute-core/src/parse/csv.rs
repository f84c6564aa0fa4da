//! PostgreSQL's CSV format, exactly as `COPY … (FORMAT csv)` in PostgreSQL 15
//! reads it.
//!
//! chute promises that a file that loads with `psql \copy … CSV` loads into the
//! same rows, so this parser follows the server's `CopyReadLineText` and
//! `CopyReadAttributesCSV` rather than RFC 4180 or a CSV crate: quotes may
//! start anywhere in a field (`ab"c,d"e` is `abc,de`), a doubled quote (or the
//! escape character, when one is set) inside quotes is a literal quote, an
//! unquoted field equal to the NULL string is NULL while a quoted one never
//! is (so `""` is an empty string and, with the default NULL string, an empty
//! unquoted field is NULL), and a line `\.` alone at a record start ends the
//! data. Newlines inside quotes belong to the field, which is why record
//! boundaries need quote parity from a known record start
//! ([`CsvParser::last_record_end`](crate::parse::Boundary::last_record_end)).
//!
//! Where PostgreSQL decides the line terminator from the first line and then
//! rejects any other, chute accepts `\n` and `\r\n` on every line and reports
//! a carriage return outside quotes anywhere else as a bad record (`\r`-only
//! files are rejected). That accepts every file PostgreSQL accepts except
//! `\r`-terminated ones, with the same rows.

use memchr::{memchr, memchr2, memchr3, memmem, memrchr};

use super::lines::{LineFormat, LineScan, end_marker_len, parse_lines, parse_message_lines};
use super::{Boundary, ChunkEnd, Fields, OptionsError, RecordError, RecordParser, RecordPos, check_ascii, check_delimiter_and_null};

/// `COPY … (FORMAT csv, …)` options.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CsvOptions {
    /// `DELIMITER`, default `,`.
    pub delimiter: u8,
    /// `QUOTE`, default `"`.
    pub quote: u8,
    /// `ESCAPE`, default: the quote character.
    pub escape: u8,
    /// `NULL`, default: the empty string (an unquoted empty field is NULL).
    pub null: Vec<u8>,
    /// `HEADER`: the first record (at input offset 0) is skipped unchecked.
    pub header: bool,
    /// The number of columns; a record with another number of fields is a bad
    /// record. `None` accepts any number.
    pub expected_fields: Option<usize>,
}

impl Default for CsvOptions {
    fn default() -> Self {
        CsvOptions { delimiter: b',', quote: b'"', escape: b'"', null: Vec::new(), header: false, expected_fields: None }
    }
}

/// Parses PostgreSQL CSV; see the module documentation.
#[derive(Debug, Clone)]
pub struct CsvParser {
    opts: CsvOptions,
}

impl CsvParser {
    /// Checks the options the way `COPY` does.
    pub fn new(opts: CsvOptions) -> Result<Self, OptionsError> {
        check_delimiter_and_null(opts.delimiter, &opts.null)?;
        check_ascii("quote", opts.quote)?;
        check_ascii("escape", opts.escape)?;
        for (name, byte) in [("quote", opts.quote), ("escape", opts.escape)] {
            if byte == b'\n' || byte == b'\r' {
                return Err(OptionsError::new(format!("COPY {name} cannot be newline or carriage return")));
            }
        }
        if opts.delimiter == opts.quote {
            return Err(OptionsError::new("COPY delimiter and quote must be different"));
        }
        if opts.null.contains(&opts.quote) {
            return Err(OptionsError::new("CSV quote character must not appear in the NULL specification"));
        }
        if opts.expected_fields == Some(0) {
            return Err(OptionsError::new("a CSV record has at least one field; expected_fields cannot be 0"));
        }
        Ok(CsvParser { opts })
    }

    pub fn options(&self) -> &CsvOptions {
        &self.opts
    }

    /// Given `from` just after an opening quote, returns the index just after
    /// the closing quote, or `None` when `buf` ends inside the quotes. The
    /// escape character (when it differs from the quote) makes a following
    /// quote or escape literal, as in `CopyReadLineText`.
    #[inline]
    fn skip_quoted(&self, buf: &[u8], from: usize) -> Option<usize> {
        let (q, e) = (self.opts.quote, self.opts.escape);
        if q == e {
            // A doubled quote closes and reopens: the caller sees the second
            // quote as an opening one, which is the same parity.
            return memchr(q, &buf[from..]).map(|k| from + k + 1);
        }
        let mut i = from;
        loop {
            let p = i + memchr2(q, e, &buf[i..])?;
            if buf[p] == q {
                return Some(p + 1);
            }
            i = if buf.get(p + 1).is_some_and(|&b| b == q || b == e) { p + 2 } else { p + 1 };
        }
    }

    /// Finds the end of the record starting at `start`. The scan is
    /// `special` when the record holds a quote, `broken` when the input ends
    /// inside quotes.
    #[inline]
    fn scan_record(&self, buf: &[u8], start: usize) -> LineScan {
        let q = self.opts.quote;
        let mut scan = LineScan::to_end(buf.len());
        let mut i = start;
        while let Some(k) = memchr3(b'\n', b'\r', q, &buf[i..]) {
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
                    match self.skip_quoted(buf, p + 1) {
                        Some(after) => i = after,
                        None => {
                            scan.broken = true;
                            return scan;
                        }
                    }
                }
            }
        }
        scan
    }

    /// Splits a record's content that contains quotes, as
    /// `CopyReadAttributesCSV` does. The quotes are known to be balanced.
    fn split_quoted(&self, content: &[u8], fields: &mut Fields) {
        let CsvOptions { delimiter: d, quote: q, escape: e, ref null, .. } = self.opts;
        let mut i = 0;
        loop {
            let field_start = i;
            let mut saw_quote = false;
            let (field_end, found_delimiter) = 'field: loop {
                let Some(k) = memchr2(d, q, &content[i..]) else {
                    fields.append(&content[i..]);
                    break (content.len(), false);
                };
                let p = i + k;
                fields.append(&content[i..p]);
                i = p + 1;
                if content[p] == d {
                    break (p, true);
                }
                saw_quote = true;
                loop {
                    let found = if q == e { memchr(q, &content[i..]) } else { memchr2(q, e, &content[i..]) };
                    let Some(k) = found else {
                        // Unreachable after scan_record; end the field rather than panic.
                        fields.append(&content[i..]);
                        break 'field (content.len(), false);
                    };
                    let p = i + k;
                    fields.append(&content[i..p]);
                    let after = content.get(p + 1).copied();
                    if content[p] == e
                        && let Some(b) = after.filter(|&b| b == q || b == e)
                    {
                        fields.append_byte(b);
                        i = p + 2;
                    } else if content[p] == q {
                        i = p + 1;
                        break;
                    } else {
                        // An escape character before anything else is itself.
                        fields.append_byte(content[p]);
                        i = p + 1;
                    }
                }
            };
            if !saw_quote && &content[field_start..field_end] == null.as_slice() {
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

impl LineFormat for CsvParser {
    const BROKEN: &'static str = "unterminated CSV quoted field";
    const BARE_CR: &'static str = "unquoted carriage return found in data";
    const BROKEN_HEADER_IS_ERROR: bool = false;

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

    /// `\.` alone on a line ends the data only at a record start: inside
    /// quotes it is data.
    #[inline]
    fn scan(&self, chunk: &[u8], start: usize) -> LineScan {
        match end_marker_len(&chunk[start..]) {
            Some(n) => LineScan { end_marker: true, next: start + n, ..LineScan::to_end(start) },
            None => self.scan_record(chunk, start),
        }
    }

    #[inline]
    fn split_special(&self, content: &[u8], fields: &mut Fields) {
        self.split_quoted(content, fields);
    }
}

impl RecordParser for CsvParser {
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

impl Boundary for CsvParser {
    fn last_record_end(&self, buf: &[u8], eof: bool) -> Option<usize> {
        if eof {
            return (!buf.is_empty()).then_some(buf.len());
        }
        let q = self.opts.quote;
        if memchr(q, buf).is_none() {
            return memrchr(b'\n', buf).map(|p| p + 1);
        }
        // Quote parity from the start: every newline outside quotes ends a record.
        let mut last = None;
        let mut i = 0;
        while let Some(k) = memchr2(b'\n', q, &buf[i..]) {
            let p = i + k;
            if buf[p] == b'\n' {
                last = Some(p + 1);
                i = p + 1;
            } else {
                match self.skip_quoted(buf, p + 1) {
                    Some(after) => i = after,
                    None => break,
                }
            }
        }
        last
    }

    fn carry(&self, buf: &[u8]) -> Option<Vec<u8>> {
        let (q, e) = (self.opts.quote, self.opts.escape);
        // An escape as the last byte may escape the next byte's quote.
        if q != e && buf.last() == Some(&e) {
            return None;
        }
        let mut i = 0;
        while let Some(k) = memchr2(b'\n', q, &buf[i..]) {
            let p = i + k;
            if buf[p] == b'\n' {
                // A record ends here: nothing to carry over.
                return None;
            }
            match self.skip_quoted(buf, p + 1) {
                Some(after) => i = after,
                None => return Some(vec![q]),
            }
        }
        // Outside quotes (a quote as the last byte, closing a field or the
        // first of a doubled pair, scans the same from the next byte on).
        Some(Vec::new())
    }

    fn first_record_end(&self, buf: &[u8]) -> Option<usize> {
        let scan = self.scan_record(buf, 0);
        (!scan.broken && scan.content_end < buf.len()).then_some(scan.next)
    }

    fn end_of_data(&self, chunk: &[u8]) -> Option<usize> {
        // `\.` is rare in data, so candidates are few; each is checked by
        // walking records from the last known record start.
        let mut record_start = 0;
        for p in memmem::find_iter(chunk, b"\\.") {
            if p > 0 && chunk[p - 1] != b'\n' {
                continue;
            }
            let Some(n) = end_marker_len(&chunk[p..]) else { continue };
            while record_start < p {
                record_start = self.scan_record(chunk, record_start).next;
            }
            if record_start == p {
                return Some(p + n);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse::tests_support::{Event, parse_all, parse_message_events};

    fn csv(opts: CsvOptions) -> CsvParser {
        CsvParser::new(opts).unwrap()
    }

    fn rows(p: &CsvParser, input: &[u8]) -> Vec<Vec<Option<String>>> {
        parse_all(p, input).0.into_iter().map(|e| e.unwrap_record().0).collect()
    }

    fn s(v: &str) -> Option<String> {
        Some(v.to_owned())
    }

    #[test]
    fn a_message_is_a_record_boundary() {
        // Issue 46 #1: an unterminated quote took the messages after it into one bad record.
        let p = csv(CsvOptions { expected_fields: Some(3), ..CsvOptions::default() });
        let events = parse_message_events(&p, &[b"T,a,1", b"T,\"b,2", b"T,c,3\n", b"T,d,4", b"\\.\nT,e,5", b"T,f,6\nT,g,7"]);
        type Seen = (usize, Result<Vec<Option<String>>, String>);
        let summary: Vec<Seen> = events
            .into_iter()
            .map(|(m, e)| match e {
                Event::Record(..) => (m, Ok(e.unwrap_record().0)),
                Event::Error(e) => (m, Err(e.reason)),
            })
            .collect();
        let row = |v: [&str; 3]| Ok(v.iter().map(|f| s(f)).collect::<Vec<_>>());
        assert_eq!(
            summary,
            vec![
                (0, row(["T", "a", "1"])),
                (1, Err("unterminated CSV quoted field".into())),
                (2, row(["T", "c", "3"])),
                (3, row(["T", "d", "4"])),
                (4, Err("data after the end-of-data marker \\. in this message (the marker ends its message's data)".into())),
                (5, row(["T", "f", "6"])),
                (5, row(["T", "g", "7"])),
            ]
        );
    }

    #[test]
    fn quoting_and_null_rules() {
        let p = csv(CsvOptions::default());
        assert_eq!(
            rows(&p, b"a,,\"\",\"x,y\"\n\"he said \"\"hi\"\"\",ab\"c,d\"e, sp \n"),
            vec![vec![s("a"), None, s(""), s("x,y")], vec![s("he said \"hi\""), s("abc,de"), s(" sp ")]]
        );
        let p = csv(CsvOptions { null: b"NULL".to_vec(), ..CsvOptions::default() });
        assert_eq!(rows(&p, b"NULL,\"NULL\",,\"\",NULLx\n"), vec![vec![None, s("NULL"), s(""), s(""), s("NULLx")]]);
    }

    #[test]
    fn escape_character_and_delimiter() {
        // With a separate escape character a doubled quote is no longer a
        // quote: `"q"""` is `q` closed, then an empty quoted part.
        let p = csv(CsvOptions { delimiter: b';', escape: b'\\', ..CsvOptions::default() });
        assert_eq!(rows(&p, b"\"a\\\"b\";\"c\\\\d\\e\";x\\y;\"q\"\"\"\n"), vec![vec![s("a\"b"), s("c\\d\\e"), s("x\\y"), s("q")]]);
    }

    #[test]
    fn newlines_inside_quotes_count_lines() {
        let p = csv(CsvOptions::default());
        let input = b"a,\"x\ny\nz\"\nb,c\r\n\"\r\n\",d";
        let (events, end) = parse_all(&p, input);
        assert_eq!(end, ChunkEnd::Complete);
        let got: Vec<_> = events.into_iter().map(Event::unwrap_record).collect();
        assert_eq!(got[0], (vec![s("a"), s("x\ny\nz")], RecordPos { line: 1, offset: 0, len: 10 }));
        assert_eq!(got[1], (vec![s("b"), s("c")], RecordPos { line: 4, offset: 10, len: 5 }));
        assert_eq!(got[2], (vec![s("\r\n"), s("d")], RecordPos { line: 5, offset: 15, len: 6 }));
    }

    #[test]
    fn header_is_skipped_only_at_offset_zero() {
        let p = csv(CsvOptions { header: true, ..CsvOptions::default() });
        let (events, _) = parse_all(&p, b"\"h\n1\",h2\nx,y\n");
        let got: Vec<_> = events.into_iter().map(Event::unwrap_record).collect();
        assert_eq!(got, vec![(vec![s("x"), s("y")], RecordPos { line: 3, offset: 9, len: 4 })]);
        let mut n = 0;
        let _ = p.parse_chunk(b"x,y\n", 3, 9, &mut |_, _| n += 1, &mut |e| panic!("{e}"));
        assert_eq!(n, 1);
        // An unterminated quote in the header swallows the input, as in PostgreSQL.
        assert_eq!(parse_all(&p, b"\"h\nx,y\n").0, vec![]);
        // A `\r`-only file is one broken "header" line: reported, not skipped.
        let (events, _) = parse_all(&p, b"h1,h2\rx,y\r");
        assert_eq!(
            events,
            vec![Event::Error(RecordError {
                pos: RecordPos { line: 1, offset: 0, len: 10 },
                reason: "unquoted carriage return found in data".into()
            })]
        );
    }

    #[test]
    fn end_of_data_marker() {
        let p = csv(CsvOptions::default());
        let input = b"a,b\n\"\n\\.\n\",c\n\\.\nafter,x\n";
        let (events, end) = parse_all(&p, input);
        assert_eq!(events.len(), 2);
        assert_eq!(events[1].clone().unwrap_record().0, vec![s("\n\\.\n"), s("c")]);
        assert_eq!(end, ChunkEnd::EndOfData { line: 5, offset: 13 });
        assert_eq!(p.end_of_data(input), Some(16));
        // CRLF ends the marker too; text after `\.` or `\.` at EOF is data.
        assert!(matches!(parse_all(&p, b"\\.\r\nx\n").1, ChunkEnd::EndOfData { line: 1, offset: 0 }));
        assert_eq!(rows(&p, b"\\.x\n\\."), vec![vec![s("\\.x")], vec![s("\\.")]]);
        assert_eq!(p.end_of_data(b"\\.x\n\\."), None);
        assert_eq!(p.end_of_data(b"\"\n\\.\n\"\n"), None);
    }

    #[test]
    fn crlf_and_bare_cr() {
        let p = csv(CsvOptions::default());
        let (events, _) = parse_all(&p, b"a,b\r\nc\rd,e\nf,\"g\rh\"\n");
        assert_eq!(events[0].clone().unwrap_record().0, vec![s("a"), s("b")]);
        let err = events[1].clone().unwrap_error();
        assert_eq!(err.reason, "unquoted carriage return found in data");
        assert_eq!(err.pos, RecordPos { line: 2, offset: 5, len: 6 });
        assert_eq!(events[2].clone().unwrap_record().0, vec![s("f"), s("g\rh")]);
    }

    #[test]
    fn wrong_field_counts_are_errors_and_parsing_continues() {
        let p = csv(CsvOptions { expected_fields: Some(2), ..CsvOptions::default() });
        let (events, _) = parse_all(&p, b"a,b,c\nd\n\ne,f\n");
        assert_eq!(events[0].clone().unwrap_error().to_string(), "line 1: extra data after last expected column");
        assert_eq!(events[1].clone().unwrap_error().to_string(), "line 2: missing data for column 2");
        assert_eq!(events[2].clone().unwrap_error().to_string(), "line 3: missing data for column 2");
        assert_eq!(events[3].clone().unwrap_record(), (vec![s("e"), s("f")], RecordPos { line: 4, offset: 9, len: 4 }));
    }

    #[test]
    fn unterminated_quote_at_eof() {
        let p = csv(CsvOptions::default());
        let input = b"a,b\nc,\"d\ne\n";
        let (events, _) = parse_all(&p, input);
        let err = events[1].clone().unwrap_error();
        assert_eq!(err.to_string(), "line 2: unterminated CSV quoted field");
        assert_eq!(err.pos.slice(input, 0), b"c,\"d\ne\n");
        assert_eq!(p.last_record_end(input, false), Some(4));
        assert_eq!(p.last_record_end(input, true), Some(input.len()));
    }

    #[test]
    fn boundary_respects_quote_parity() {
        let p = csv(CsvOptions::default());
        assert_eq!(p.last_record_end(b"a,\"b\nc\",d\ne,\"f\ng", false), Some(10));
        assert_eq!(p.last_record_end(b"a,\"\"\"\n\",\"\"\ne", false), Some(11));
        assert_eq!(p.last_record_end(b"abc", false), None);
        assert_eq!(p.last_record_end(b"", true), None);
        let p = csv(CsvOptions { escape: b'\\', ..CsvOptions::default() });
        assert_eq!(p.last_record_end(b"\"a\\\"\nb\"\nc", false), Some(8));
        assert_eq!(p.last_record_end(b"\"a\\\\\"\nb\"\nc", false), Some(6));
    }

    #[test]
    fn options_are_checked_like_copy() {
        assert!(CsvParser::new(CsvOptions { delimiter: b'"', ..CsvOptions::default() }).is_err());
        assert!(CsvParser::new(CsvOptions { delimiter: b'\n', ..CsvOptions::default() }).is_err());
        assert!(CsvParser::new(CsvOptions { null: b"a,b".to_vec(), ..CsvOptions::default() }).is_err());
        assert!(CsvParser::new(CsvOptions { null: b"\"".to_vec(), ..CsvOptions::default() }).is_err());
        assert!(CsvParser::new(CsvOptions { quote: 0xe9, ..CsvOptions::default() }).is_err());
        assert!(CsvParser::new(CsvOptions { delimiter: b'|', null: b"\\N".to_vec(), ..CsvOptions::default() }).is_ok());
    }
}
