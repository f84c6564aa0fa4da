//! Input record parsers, and the boundary finders that let several threads
//! parse one input.
//!
//! chute reads bytes (a file, stdin, a decompressor) and must turn them into
//! rows faster than PostgreSQL can store them. One thread cannot parse that
//! fast, so a reader cuts its buffer into *chunks* that begin at a record start
//! and end at a record end ([`Boundary::last_record_end`]) and hands each chunk
//! with its first line number and byte offset to a worker, which parses it
//! with a [`RecordParser`] on its own. Every record comes out with its
//! [`RecordPos`] — the line for reject files, the byte offset for the
//! exactly-once resume journal — and the result never depends on where the
//! chunks were cut (the property tests check that against parsing the whole
//! input at once).
//!
//! Formats: [`csv`] and [`text`] follow PostgreSQL's `COPY … (FORMAT csv)` and
//! `COPY … (FORMAT text)` as `psql \copy` feeds them to a PostgreSQL 15 server
//! (the rule of the project: a file that loads with `\copy` loads with chute
//! into the same rows); [`jsonl`] reads one JSON object per line; [`tsbs`]
//! reads the Time Series Benchmark Suite's `--format=timescaledb` files.
//! CSV and text share one record loop (`lines.rs`): they differ only in how
//! they scan a record, split one with quotes or escapes, and name its flaws.
//! [`FileFormat::from_names`] says which columnar format a load's file names
//! say, for every front end.
//!
//! # Shape of the hot path
//!
//! A parser is configured once, is `Send + Sync`, and keeps no state between
//! chunks. Per chunk it allocates one [`Fields`] (a byte buffer plus end
//! offsets and NULL flags) and reuses it for every record, so nothing is
//! allocated per record or per field; only a malformed record allocates (its
//! [`RecordError`] message). Records are handed out through `&mut dyn FnMut`
//! callbacks rather than generic closures so that the engine can hold a
//! `Box<dyn Format>` chosen at run time; that costs one indirect call per
//! record, a few nanoseconds against the tens of nanoseconds the record's bytes
//! take, while the per-byte work stays inlined inside each parser.
//!
//! Every scan over bytes is a `memchr`/`memchr2`/`memchr3`/`memmem` search
//! (SIMD, tens of GB/s on long runs), never a byte-at-a-time state machine:
//! finding a record's end is one search per line (plus one per quote or
//! backslash when the record has any), and splitting fields is one search per
//! delimiter. Design speed, as measured ad hoc on the 2-core development
//! machine (one core; 7-field 73-byte rows, the same rows as JSON objects,
//! and the tsbs iot file's 190-byte record pairs): CSV about 8-11 M rows/s,
//! text about 14 M, JSON Lines 4-5 M, tsbs 2-3 M; the CSV boundary scan runs at
//! 10-20 GB/s without quotes and above 3.5 GB/s with a quoted field in every
//! row, and the other formats find their boundary searching backwards from
//! the buffer's end, which costs next to nothing. That is several times what
//! the 1 M rows/s target on 2 cores needs; a benchmark in `chute-bench`, not
//! a test, is where speed is tracked.

pub mod csv;
mod file_format;
pub mod json_array;
pub mod jsonl;
pub mod lineproto;
mod lines;
pub mod text;
pub mod tsbs;

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod skip_tests;
#[cfg(test)]
pub(crate) mod tests_support;

pub use csv::{CsvOptions, CsvParser};
pub use file_format::FileFormat;
pub use jsonl::{JsonlParser, UnknownKeys};
pub use text::{TextOptions, TextParser};
pub use tsbs::{TsbsHeader, TsbsParser, TsbsRecord, parse_tsbs_header};

/// Records longer than this are rejected. PostgreSQL cannot hold a line of
/// 1 GiB or more in its line buffer either, so no input that loads with
/// `\copy` is affected, and [`RecordPos::len`] always fits its `u32`.
pub const MAX_RECORD_BYTES: usize = (1 << 30) - 1;

/// One parsed record's fields, reused across records (no allocation per field
/// or record once its buffers have grown to the widest record).
///
/// Parsers push complete fields ([`Fields::push`], [`Fields::push_null`]) or
/// build one piece by piece ([`Fields::append`] … [`Fields::finish`]) when a
/// value has to be unescaped.
#[derive(Debug, Clone, Default)]
pub struct Fields {
    /// The fields' bytes: each copied in turn, or a whole record's content
    /// copied at once with its delimiters still between them ([`Fields::hold`]).
    buf: Vec<u8>,
    /// Field `i` is `buf[spans[i].0..spans[i].1]`; a NULL field's end is
    /// [`NULL_END`]. (One vector, not three: a field is one push.)
    spans: Vec<(usize, usize)>,
    /// Where the field being built starts in `buf`.
    open: usize,
}

/// The end of a NULL field's span in [`Fields`] (no field ends there: a
/// record is shorter than [`MAX_RECORD_BYTES`]).
const NULL_END: usize = usize::MAX;

/// Two records' fields are equal when their values are, however they were
/// kept.
impl PartialEq for Fields {
    fn eq(&self, other: &Fields) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for Fields {}

impl Fields {
    pub fn new() -> Self {
        Fields::default()
    }

    /// The number of fields.
    #[inline]
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Field `i`'s bytes, or `None` when it is NULL. Panics when `i >= len()`.
    #[inline]
    pub fn get(&self, i: usize) -> Option<&[u8]> {
        match self.spans[i] {
            (_, NULL_END) => None,
            (start, end) => Some(&self.buf[start..end]),
        }
    }

    /// Whether field `i` is NULL. Panics when `i >= len()`.
    #[inline]
    pub fn is_null(&self, i: usize) -> bool {
        self.spans[i].1 == NULL_END
    }

    /// The fields in order, `None` for NULL.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Option<&[u8]>> + '_ {
        (0..self.len()).map(|i| self.get(i))
    }

    /// Forgets every field (and any partly built one), keeping the allocations.
    #[inline]
    pub fn clear(&mut self) {
        self.buf.clear();
        self.spans.clear();
        self.open = 0;
    }

    /// Adds a whole field.
    #[inline]
    pub fn push(&mut self, value: &[u8]) {
        self.buf.extend_from_slice(value);
        self.finish();
    }

    /// Adds a NULL field.
    #[inline]
    pub fn push_null(&mut self) {
        self.finish_null();
    }

    /// Appends bytes to the field being built.
    #[inline]
    pub fn append(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// Appends one byte to the field being built.
    #[inline]
    pub fn append_byte(&mut self, byte: u8) {
        self.buf.push(byte);
    }

    /// Ends the field being built: everything appended since the previous
    /// field is its value.
    #[inline]
    pub fn finish(&mut self) {
        self.spans.push((self.open, self.buf.len()));
        self.open = self.buf.len();
    }

    /// Ends the field being built as NULL, dropping whatever was appended to
    /// it (a text-format field is unescaped before it is known to be NULL).
    #[inline]
    pub fn finish_null(&mut self) {
        self.buf.truncate(self.open);
        self.spans.push((self.open, NULL_END));
    }

    /// Copies a record's content in one piece (one copy, not one per
    /// field) and returns where it starts in the buffer; its fields are then
    /// added with [`Fields::mark`] by their place in it.
    #[inline]
    pub(crate) fn hold(&mut self, content: &[u8]) -> usize {
        let base = self.buf.len();
        self.buf.extend_from_slice(content);
        self.open = self.buf.len();
        base
    }

    /// Adds the field at `buf[start..end]` of a record [`Fields::hold`] holds,
    /// or a NULL.
    #[inline]
    pub(crate) fn mark(&mut self, start: usize, end: usize, null: bool) {
        self.spans.push((start, if null { NULL_END } else { end }));
    }
}

/// Where a record came from — for reject files and for exactly-once resume.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RecordPos {
    /// 1-based physical line where the record starts (a quoted or escaped
    /// newline inside a record starts a new physical line, so the record after
    /// it starts further down).
    pub line: u64,
    /// Byte offset of the record's first byte in the whole input.
    pub offset: u64,
    /// The record's length in bytes, including its line terminator.
    pub len: u32,
}

impl RecordPos {
    /// The record's bytes, given the chunk it was parsed from and the chunk's
    /// base offset.
    pub fn slice<'c>(&self, chunk: &'c [u8], base_offset: u64) -> &'c [u8] {
        let start = (self.offset - base_offset) as usize;
        &chunk[start..start + self.len as usize]
    }
}

/// A record that could not be parsed. The record is skipped and parsing goes
/// on with the next one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {}: {}", .pos.line, .reason)]
pub struct RecordError {
    pub pos: RecordPos,
    pub reason: String,
}

/// How parsing a chunk ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[must_use = "EndOfData means nothing after the marker is data: stop reading"]
pub enum ChunkEnd {
    /// Every record of the chunk was reported.
    Complete,
    /// An end-of-data marker (`\.`, CSV and text formats) was met: the input's
    /// data ends there. Nothing after the marker in this chunk was reported,
    /// and no later chunk holds data. `offset` is the absolute byte offset of
    /// the marker's backslash and `line` its line.
    EndOfData { line: u64, offset: u64 },
}

/// Parses the records of a chunk.
///
/// Contract: `chunk` begins at a record start and ends at a record end (as cut
/// by the same format's [`Boundary`]); `first_line` is the 1-based line of its
/// first byte and `base_offset` that byte's offset in the whole input. Every
/// record is reported once, in input order, either to `on_record` (its
/// fields, valid only during the call) or to `on_error`; a malformed record
/// never stops the chunk. The raw bytes of any record are
/// `pos.slice(chunk, base_offset)`. Calls for different chunks may run
/// concurrently on one parser; a parser holds no state between calls.
///
/// A header line (CSV and text `header` option) is the record at input offset
/// 0, so it is skipped by the call whose `base_offset` is 0 and by no other.
pub trait RecordParser: Send + Sync {
    fn parse_chunk(
        &self,
        chunk: &[u8],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd;

    /// Parses a chunk of whole messages (Kafka's), message `i` being
    /// `chunk[starts[i]..starts[i + 1]]` (the last one runs to the chunk's
    /// end). A message is a record boundary: no record spans two messages
    /// (an unterminated quote or a trailing backslash makes its own
    /// message's record bad, never the next message's records), and an
    /// end-of-data marker ends only its own message. Positions are as in
    /// [`RecordParser::parse_chunk`], relative to the whole chunk; the result is
    /// always [`ChunkEnd::Complete`]. By default each message is parsed on
    /// its own.
    fn parse_messages(
        &self,
        chunk: &[u8],
        starts: &[u32],
        first_line: u64,
        base_offset: u64,
        on_record: &mut dyn FnMut(&Fields, RecordPos),
        on_error: &mut dyn FnMut(RecordError),
    ) -> ChunkEnd {
        each_message(self, chunk, starts, first_line, base_offset, (on_record, on_error))
    }
}

/// A parser's two callbacks: for each record, and for each bad one.
type Callbacks<'a> = (&'a mut dyn FnMut(&Fields, RecordPos), &'a mut dyn FnMut(RecordError));

/// [`RecordParser::parse_messages`] by parsing each message as a chunk of its own.
fn each_message<P: RecordParser + ?Sized>(
    parser: &P,
    chunk: &[u8],
    starts: &[u32],
    first_line: u64,
    base_offset: u64,
    (on_record, on_error): Callbacks<'_>,
) -> ChunkEnd {
    for (i, start) in starts.iter().enumerate() {
        let (start, end) = (*start as usize, starts.get(i + 1).map_or(chunk.len(), |e| *e as usize));
        let _ = parser.parse_chunk(&chunk[start..end], first_line, base_offset + start as u64, on_record, on_error);
    }
    ChunkEnd::Complete
}

/// Finds record boundaries so a reader can cut its buffer into chunks that
/// parse independently.
pub trait Boundary: Send + Sync {
    /// Given `buf` (bytes starting at a record start), returns the end of the
    /// last complete record in `buf` (exclusive), or `None` if `buf` holds no
    /// complete record yet. `eof` = no more input after `buf`: then everything
    /// left is the last record (complete without a trailing newline, or
    /// malformed, which the parser then reports), so the answer is `buf.len()`
    /// for any non-empty `buf`.
    ///
    /// The next chunk starts after [`count_lines`]`(&buf[..end])` more lines.
    fn last_record_end(&self, buf: &[u8], eof: bool) -> Option<usize>;

    /// If an end-of-data marker (`\.`) ends the data inside `chunk` (a whole
    /// chunk as cut by [`Boundary::last_record_end`]), returns `n` such that
    /// `chunk[..n]` ends with the marker's line: parse `chunk[..n]` (it yields
    /// [`ChunkEnd::EndOfData`]) and stop reading, since nothing after `n` is
    /// data. Lets a reader stop before it hands later chunks to workers. The
    /// search is one `memmem` pass; a candidate is verified only when found.
    fn end_of_data(&self, chunk: &[u8]) -> Option<usize> {
        let _ = chunk;
        None
    }

    /// Skipping a record too large to hold: `buf` starts at a record start
    /// and holds no complete record. Returns a few bytes that, put in place
    /// of `buf`, leave a boundary scan in the same state (inside a quoted
    /// field or not, an escape pending or not), so the reader can drop what
    /// it has read of the record and still find where it ends. `None`: not
    /// known yet at this byte (read more and ask again), or the format
    /// cannot skip a record (the reader then holds it whole).
    fn carry(&self, buf: &[u8]) -> Option<Vec<u8>> {
        let _ = buf;
        None
    }

    /// The end (exclusive) of the first record in `buf`, which starts at a
    /// record start, if that record is complete; `None` for a format whose
    /// [`Boundary::carry`] is `None`.
    fn first_record_end(&self, buf: &[u8]) -> Option<usize> {
        let _ = buf;
        None
    }
}

/// A format: a parser and its boundary finder. Every parser in this module is
/// one, so the engine can hold a `Box<dyn Format>`.
pub trait Format: RecordParser + Boundary {}

impl<T: RecordParser + Boundary> Format for T {}

/// Number of `'\n'` in `buf`: how many lines a chunk spans.
#[inline]
pub fn count_lines(buf: &[u8]) -> u64 {
    // memchr's iterator count is specialised to a vectorised counter.
    memchr::memchr_iter(b'\n', buf).count() as u64
}

/// Options that cannot work together (PostgreSQL rejects the same
/// combinations in `COPY`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct OptionsError(String);

impl OptionsError {
    fn new(message: impl Into<String>) -> Self {
        OptionsError(message.into())
    }
}

/// Tracks the line and offset of records as a parser walks a chunk, and
/// builds their positions and errors.
#[derive(Debug, Clone, Copy)]
struct Cursor {
    base_offset: u64,
    line: u64,
}

impl Cursor {
    fn new(first_line: u64, base_offset: u64) -> Self {
        Cursor { base_offset, line: first_line }
    }

    /// The position of the record `chunk[start..next]` starting on the current line.
    #[inline]
    fn pos(&self, start: usize, next: usize) -> RecordPos {
        let len = next - start;
        RecordPos { line: self.line, offset: self.base_offset + start as u64, len: u32::try_from(len).unwrap_or(u32::MAX) }
    }

    /// The error for the record `chunk[start..next]`.
    #[inline]
    fn error(&self, start: usize, next: usize, reason: impl Into<String>) -> RecordError {
        RecordError { pos: self.pos(start, next), reason: reason.into() }
    }
}

/// The reason given for a record over [`MAX_RECORD_BYTES`].
const TOO_LONG: &str = "record is 1 GiB or longer (PostgreSQL's limit too)";

/// Checks an ASCII option byte the way `COPY` does.
fn check_ascii(name: &str, byte: u8) -> Result<(), OptionsError> {
    if byte.is_ascii() { Ok(()) } else { Err(OptionsError::new(format!("COPY {name} must be a single one-byte character"))) }
}

/// The checks `COPY` makes of a delimiter and NULL string in every format.
fn check_delimiter_and_null(delimiter: u8, null: &[u8]) -> Result<(), OptionsError> {
    check_ascii("delimiter", delimiter)?;
    if delimiter == b'\n' || delimiter == b'\r' {
        return Err(OptionsError::new("COPY delimiter cannot be newline or carriage return"));
    }
    if null.contains(&b'\n') || null.contains(&b'\r') {
        return Err(OptionsError::new("COPY null representation cannot use newline or carriage return"));
    }
    if null.contains(&delimiter) {
        return Err(OptionsError::new("COPY delimiter character must not appear in the NULL specification"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_hold_values_and_nulls() {
        let mut f = Fields::new();
        f.push(b"ab");
        f.push_null();
        f.append(b"c");
        f.append_byte(b'd');
        f.finish();
        f.push(b"");
        f.append(b"dropped");
        f.finish_null();
        assert_eq!(f.len(), 5);
        assert_eq!(f.iter().collect::<Vec<_>>(), vec![Some(&b"ab"[..]), None, Some(b"cd"), Some(b""), None]);
        assert!(f.is_null(4));
        f.clear();
        assert!(f.is_empty());
        f.push(b"x");
        assert_eq!(f.get(0), Some(&b"x"[..]));
    }

    #[test]
    fn record_error_displays_line_and_reason() {
        let e = RecordError { pos: RecordPos { line: 7, offset: 10, len: 3 }, reason: "bad".into() };
        assert_eq!(e.to_string(), "line 7: bad");
        assert_eq!(e.pos.slice(b"0123456789", 5), b"567");
    }

    #[test]
    fn counts_lines() {
        assert_eq!(count_lines(b""), 0);
        assert_eq!(count_lines(b"a\nb\r\n\n"), 3);
        assert_eq!(count_lines(&b"x\n".repeat(1000)), 1000);
    }
}
