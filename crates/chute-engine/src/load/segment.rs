//! A segment: rows of one chunk for one target, encoded, with what each
//! row needs on its way (its record for a reject file, its line, its
//! input) and the acknowledgements of the chunks they came from. Segments
//! are gathered into batches (see `write::BatchPart`).

use super::ack::SegmentAcks;

/// Rows of one chunk for one target, encoded.
#[derive(Default)]
pub struct Segment {
    pub(crate) data: Vec<u8>,
    /// End of each row in `data`.
    pub(crate) row_ends: Vec<u32>,
    /// The original records, for reject files (copies; empty when records
    /// are kept by position, see `offsets`).
    pub(crate) raw: Vec<u8>,
    /// End of each record, as if the records were in `raw` one after another.
    pub(crate) raw_ends: Vec<u32>,
    /// Where each record starts in its input, when records are kept by
    /// position only (plain files: a reject file reads them back from there).
    pub(crate) offsets: Vec<u64>,
    pub(crate) lines: Vec<u64>,
    /// The input each row came from.
    pub(crate) inputs: Vec<u16>,
    /// The input ranges whose rows for this target are all here (see `journal`).
    pub(crate) ranges: Vec<(u32, u64, u64)>,
    /// The acknowledgements of the rows here, settled when they commit.
    pub(crate) acks: SegmentAcks,
}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment").finish_non_exhaustive()
    }
}

impl Segment {
    pub(crate) fn push(&mut self, row: &[u8], raw: &[u8], line: u64, input: usize) {
        self.data.extend_from_slice(row);
        self.pushed(raw, line, input);
    }

    /// [`Segment::push`] for a record kept by position: `len` bytes at `offset` of its input.
    pub(crate) fn push_ref(&mut self, row: &[u8], offset: u64, len: usize, line: u64, input: usize) {
        self.data.extend_from_slice(row);
        self.pushed_ref(offset, len, line, input);
    }

    /// Ends a row already written at the end of `data` (see [`Filed::staging`]),
    /// keeping a copy of its record.
    #[inline]
    pub(crate) fn pushed(&mut self, raw: &[u8], line: u64, input: usize) {
        self.inputs.push(input as u16);
        self.row_ends.push(self.data.len() as u32);
        self.raw.extend_from_slice(raw);
        self.raw_ends.push(self.raw.len() as u32);
        self.lines.push(line);
    }

    /// [`Segment::pushed`] for a record kept by position.
    #[inline]
    pub(crate) fn pushed_ref(&mut self, offset: u64, len: usize, line: u64, input: usize) {
        self.inputs.push(input as u16);
        self.row_ends.push(self.data.len() as u32);
        let end = self.raw_ends.last().copied().unwrap_or(0) + len as u32;
        self.raw_ends.push(end);
        self.offsets.push(offset);
        self.lines.push(line);
    }

    /// Makes room for `bytes` of rows in all, and for as many rows as that
    /// holds at the rows' size so far.
    pub(crate) fn reserve_for(&mut self, bytes: usize) {
        let (len, rows) = (self.data.len(), self.row_ends.len());
        if bytes <= self.data.capacity() || len == 0 {
            return;
        }
        let more_rows = (bytes - len) * rows / len + 1;
        self.data.reserve(bytes - len);
        self.row_ends.reserve(more_rows);
        self.raw_ends.reserve(more_rows);
        self.lines.reserve(more_rows);
        self.inputs.reserve(more_rows);
        if !self.offsets.is_empty() {
            self.offsets.reserve(more_rows);
        }
    }

    /// The end of the last whole row in `data` (bytes after it are a row
    /// being written).
    #[inline]
    pub(crate) fn rows_end(&self) -> usize {
        self.row_ends.last().map_or(0, |e| *e as usize)
    }

    /// Row `i`'s original record: a copy, or where it is in its input.
    pub(crate) fn record(&self, i: usize) -> (Vec<u8>, Option<(u64, u32)>) {
        let from = if i == 0 { 0 } else { self.raw_ends[i - 1] };
        match self.offsets.get(i) {
            Some(&offset) => (Vec::new(), Some((offset, self.raw_ends[i] - from))),
            None => (self.raw[from as usize..self.raw_ends[i] as usize].to_vec(), None),
        }
    }

    pub(crate) fn bytes(&self) -> usize {
        self.data.len() + self.raw.len() + self.row_ends.len() * 16 + self.offsets.len() * 8
    }
}
