//! What PostgreSQL's two line formats share: the record loop of
//! `COPY … (FORMAT csv)` and `COPY … (FORMAT text)`.
//!
//! Both read a record as a line (which a quote or a backslash may stretch
//! over several), report a header line's flaws without splitting it, split
//! a record without quotes or escapes at every delimiter and one with them
//! their own way, check the field count, count the lines a record spans and
//! stop at the end-of-data marker `\.`. [`parse_lines`] is that loop, once;
//! a format says what differs through [`LineFormat`]: how a record is
//! scanned, how a record with quotes or escapes is split, and what its
//! flaws are called. The loop is generic, so each format gets its own copy
//! from the compiler with its scan inlined, as when each wrote it out.

use super::{ChunkEnd, Cursor, Fields, MAX_RECORD_BYTES, RecordError, RecordPos, TOO_LONG};

/// What scanning one record from its start found.
#[derive(Debug, Clone, Copy)]
pub(super) struct LineScan {
    /// End of the record's content (before its `\n`, `\r\n` or end marker).
    pub content_end: usize,
    /// Start of the next record.
    pub next: usize,
    /// The record holds the format's special byte (a quote in CSV, a
    /// backslash in text): its fields need [`LineFormat::split_special`], and
    /// newlines inside it may be data.
    pub special: bool,
    /// A carriage return that does not end the line (outside quotes).
    pub bare_cr: bool,
    /// The format's own flaw ([`LineFormat::BROKEN`]): an unterminated quote
    /// in CSV, `\.` followed by something other than a line end in text.
    pub broken: bool,
    /// The record ends with the end-of-data marker, which starts at
    /// `content_end` (at the record's start: no record, only the marker).
    pub end_marker: bool,
}

impl LineScan {
    /// A record that runs to `end` (the end of the buffer) with nothing
    /// found yet: what a scan starts from.
    #[inline]
    pub fn to_end(end: usize) -> Self {
        LineScan { content_end: end, next: end, special: false, bare_cr: false, broken: false, end_marker: false }
    }
}

/// What a line format does its own way inside [`parse_lines`].
pub(super) trait LineFormat {
    /// Why a record whose scan is `broken` is bad.
    const BROKEN: &'static str;
    /// Why a record with a bare carriage return is bad.
    const BARE_CR: &'static str;
    /// Whether a broken header line is reported. PostgreSQL reads a CSV
    /// header as one record without splitting it, so an unterminated quote
    /// there just swallows the rest of the input; a text header with a
    /// corrupt marker is an error.
    const BROKEN_HEADER_IS_ERROR: bool;

    fn delimiter(&self) -> u8;
    /// The NULL string, compared with a field's raw bytes.
    fn null(&self) -> &[u8];
    /// Whether the record at input offset 0 is a header line.
    fn header(&self) -> bool;
    fn expected_fields(&self) -> Option<usize>;

    /// Scans the record starting at `start`, or the end marker there.
    fn scan(&self, chunk: &[u8], start: usize) -> LineScan;

    /// Splits a record's content that holds the special byte into `fields`.
    fn split_special(&self, content: &[u8], fields: &mut Fields);
}

/// The record loop of a line format: see [`RecordParser`](super::RecordParser)
/// for the contract.
#[inline]
pub(super) fn parse_lines<F: LineFormat>(
    format: &F,
    chunk: &[u8],
    first_line: u64,
    base_offset: u64,
    on_record: &mut dyn FnMut(&Fields, RecordPos),
    on_error: &mut dyn FnMut(RecordError),
) -> ChunkEnd {
    let mut fields = Fields::new();
    let header = format.header() && base_offset == 0;
    parse_span(format, chunk, 0, Cursor::new(first_line, base_offset), header, &mut fields, (on_record, on_error))
}

/// The record loop over a chunk of whole messages: see
/// [`RecordParser::parse_messages`](super::RecordParser::parse_messages).
/// Each message is parsed as if it were all of its input (a quote or a
/// backslash stretches a record to its message's end, never further), with
/// one `Fields` for them all; data after an end-of-data marker in a message
/// is that message's error, not silently dropped.
pub(super) fn parse_message_lines<F: LineFormat>(
    format: &F,
    chunk: &[u8],
    starts: &[u32],
    first_line: u64,
    base_offset: u64,
    on_record: &mut dyn FnMut(&Fields, RecordPos),
    on_error: &mut dyn FnMut(RecordError),
) -> ChunkEnd {
    let mut fields = Fields::new();
    for (i, start) in starts.iter().enumerate() {
        let (start, end) = (*start as usize, starts.get(i + 1).map_or(chunk.len(), |e| *e as usize));
        let header = format.header() && base_offset + start as u64 == 0;
        // The message's end is the buffer's end for its scans.
        let message = &chunk[..end];
        let cursor = Cursor::new(first_line, base_offset);
        if let ChunkEnd::EndOfData { offset, .. } = parse_span(format, message, start, cursor, header, &mut fields, (on_record, on_error)) {
            let marker = (offset - base_offset) as usize;
            let after = marker + end_marker_len(&message[marker..]).unwrap_or(message.len() - marker);
            if message[after..].iter().any(|b| !b.is_ascii_whitespace()) {
                let reason = "data after the end-of-data marker \\. in this message (the marker ends its message's data)";
                on_error(cursor.error(after, end, reason));
            }
        }
    }
    ChunkEnd::Complete
}

/// The record loop from `start` to the end of `chunk`.
#[inline]
fn parse_span<F: LineFormat>(
    format: &F,
    chunk: &[u8],
    mut start: usize,
    mut cursor: Cursor,
    mut header: bool,
    fields: &mut Fields,
    (on_record, on_error): super::Callbacks<'_>,
) -> ChunkEnd {
    let base_offset = cursor.base_offset;
    while start < chunk.len() {
        let scan = format.scan(chunk, start);
        let pos = cursor.pos(start, scan.next);
        if header {
            // A header line's fields are not looked at, but a broken line is
            // an error: a `\r`-only file would otherwise vanish silently into
            // its "header". If it holds the end marker, the data ends there.
            header = false;
            if (F::BROKEN_HEADER_IS_ERROR || !scan.broken)
                && let Some(problem) = line_problem::<F>(start, &scan)
            {
                on_error(RecordError { pos, reason: problem.into() });
            }
        } else if !(scan.end_marker && scan.content_end == start) {
            // (A marker alone on its line is no record; one after data ends
            // a last record, which PostgreSQL still loads.)
            match fields_of(format, chunk, start, &scan, fields) {
                Ok(()) => on_record(fields, pos),
                Err(reason) => on_error(RecordError { pos, reason }),
            }
        }
        if scan.end_marker {
            let line = cursor.line + super::count_lines(&chunk[start..scan.content_end]);
            return ChunkEnd::EndOfData { line, offset: base_offset + scan.content_end as u64 };
        }
        cursor.line += if scan.special { super::count_lines(&chunk[start..scan.next]) } else { u64::from(scan.next > scan.content_end) };
        start = scan.next;
    }
    ChunkEnd::Complete
}

/// What is wrong with a scanned record as a line, before its fields are
/// looked at. PostgreSQL finds these while reading a header line too.
#[inline]
fn line_problem<F: LineFormat>(start: usize, scan: &LineScan) -> Option<&'static str> {
    if scan.next - start > MAX_RECORD_BYTES {
        Some(TOO_LONG)
    } else if scan.broken {
        Some(F::BROKEN)
    } else if scan.bare_cr {
        Some(F::BARE_CR)
    } else {
        None
    }
}

/// Splits one scanned record into `fields`, or says why it is bad.
#[inline]
fn fields_of<F: LineFormat>(format: &F, chunk: &[u8], start: usize, scan: &LineScan, fields: &mut Fields) -> Result<(), String> {
    if let Some(problem) = line_problem::<F>(start, scan) {
        return Err(problem.into());
    }
    fields.clear();
    let content = &chunk[start..scan.content_end];
    if scan.special {
        format.split_special(content, fields);
    } else {
        split_plain(content, format.delimiter(), format.null(), fields);
    }
    check_field_count(format.expected_fields(), fields.len())
}

/// Checks a record's field count against the configured column count, with
/// PostgreSQL's messages (columns are numbered from 1; chute's engine knows
/// their names and may add them).
fn check_field_count(expected: Option<usize>, found: usize) -> Result<(), String> {
    match expected {
        Some(n) if found > n => Err("extra data after last expected column".into()),
        Some(n) if found < n => Err(format!("missing data for column {}", found + 1)),
        _ => Ok(()),
    }
}

/// Splits `content` (no quotes, no escapes) at every `delimiter` into
/// `fields`, treating a field equal to `null` as NULL.
///
/// The delimiters are found sixteen bytes at a time (SSE2, which every
/// x86-64 CPU has; eight at a time with SWAR on other CPUs and in the last
/// bytes): a record's fields are a few bytes each, too short for a SIMD
/// search per field to pay for its set-up (that was a fifth of the CSV
/// loader's parse time), so the whole record is scanned in blocks and the
/// block's delimiters are taken from one bit mask.
#[inline]
fn split_plain(content: &[u8], delimiter: u8, null: &[u8], fields: &mut Fields) {
    let base = fields.hold(content);
    let mut start = 0;
    let mut field = |end: usize| {
        fields.mark(base + start, base + end, &content[start..end] == null);
        start = end + 1;
    };
    // Where the current block starts in `content` (`base` is where `content` starts in `fields`).
    let mut at = 0;
    #[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
    for block in content.chunks_exact(16) {
        let mut found = block_mask(block.try_into().expect("16 bytes"), delimiter);
        while found != 0 {
            field(at + found.trailing_zeros() as usize);
            found &= found - 1;
        }
        at += 16;
    }
    let words = content[at..].chunks_exact(8);
    let tail = words.remainder();
    for word in words {
        let mut found = byte_mask(u64::from_le_bytes(word.try_into().expect("8 bytes")), delimiter);
        while found != 0 {
            field(at + (found.trailing_zeros() / 8) as usize);
            found &= found - 1;
        }
        at += 8;
    }
    for (k, &b) in tail.iter().enumerate() {
        if b == delimiter {
            field(at + k);
        }
    }
    field(content.len());
}

/// Bit `i` set for each byte `i` of `block` that equals `byte`.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[inline]
fn block_mask(block: &[u8; 16], byte: u8) -> u32 {
    use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8, _mm_set1_epi8};
    // SAFETY: `block` is 16 readable bytes, which an unaligned load reads,
    // and SSE2 is enabled on every x86-64 target (the `cfg` above).
    unsafe {
        let v = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
        _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(byte as i8))) as u32
    }
}

/// The high bit of each byte of `word` that equals `byte`, and no other bit
/// (exact: no false positives from carries between bytes).
#[inline]
fn byte_mask(word: u64, byte: u8) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    let x = word ^ u64::from_ne_bytes([byte; 8]);
    // A byte's high bit ends up set iff the byte of `x` is zero.
    !(((x & LOW7) + LOW7) | x | LOW7)
}

/// Whether `rest` (the bytes after a record start) is PostgreSQL's
/// end-of-data marker line `\.`, and if so its length with its terminator.
/// `\n` and `\r\n` both end it, as they end any line here.
#[inline]
pub(super) fn end_marker_len(rest: &[u8]) -> Option<usize> {
    match rest {
        [b'\\', b'.', b'\n', ..] => Some(3),
        [b'\\', b'.', b'\r', b'\n', ..] => Some(4),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn byte_mask_marks_exactly_the_equal_bytes(word: [u8; 8], pick in 0usize..9, byte: u8) {
            // Half the cases hold the byte searched for (`pick` < 8 puts it there).
            let mut word = word;
            if pick < 8 {
                word[pick] = byte;
            }
            let want = word.iter().enumerate().fold(0u64, |m, (i, &b)| if b == byte { m | 0x80 << (8 * i) } else { m });
            prop_assert_eq!(byte_mask(u64::from_le_bytes(word), byte), want);
        }

        #[test]
        fn split_plain_splits_at_every_delimiter(content in proptest::collection::vec(prop_oneof![Just(b','), any::<u8>()], 0..80)) {
            let mut fields = Fields::new();
            split_plain(&content, b',', b"", &mut fields);
            let want: Vec<Option<&[u8]>> = content.split(|&b| b == b',').map(|f| if f.is_empty() { None } else { Some(f) }).collect();
            prop_assert_eq!(fields.iter().collect::<Vec<_>>(), want);
        }
    }
}
