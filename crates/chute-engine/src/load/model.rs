//! The load's data model: what moves between its stages. A chunk of input
//! (`Chunk`) becomes, on a parse thread, rows encoded for targets
//! (`Segment`s keyed by `Target`), rejects and rows waiting for a partition
//! or for the server (`ChunkOut`); the coordinator gathers segments into
//! batches for the sink. Nothing here does I/O.

use rustc_hash::FxHashMap;

use super::ack::AckRef;
use super::routing::{LeafRef, RouteCtx, Routed, Routing};
pub use super::segment::Segment;

/// Where a row goes: a leaf of one of the load's tables, or that table's
/// parent (the server routes), in binary or (for values the server must
/// parse) text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Target {
    pub table: u16,
    pub leaf: LeafRef,
    pub text: bool,
}

/// Maps keyed by target are on the per-row path; a target is a few small
/// integers, which rustc-hash's Fx hash handles at a fraction of SipHash's cost.
pub(crate) type TargetMap<V> = FxHashMap<Target, V>;

/// A piece of input: whole records (or rows to make, or a record batch),
/// with where it starts in its input and the acknowledgement its rows share.
pub struct Chunk {
    pub input: usize,
    pub first_line: u64,
    /// Where the chunk starts in its input: a byte offset, a sequence
    /// number, or a row index, whatever its rows are journaled by.
    pub base_offset: u64,
    /// Fires once every row of the chunk is committed or rejected (see `ack`).
    pub ack: Option<AckRef>,
    pub payload: Payload,
}

impl std::fmt::Debug for Chunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Chunk").finish_non_exhaustive()
    }
}

/// What a chunk holds. Each input sends the payloads its kind reads; the
/// engine itself looks only at `Oversized` (a reject, never rows).
pub enum Payload {
    /// Whole records read from an input's bytes, cut at a record end.
    Records(Vec<u8>),
    /// Whole messages (Kafka): their records, and where each message starts
    /// and which offset it has. A message's rows are journaled, skipped and
    /// rejected at their message's offset, not at their byte.
    Messages { data: Vec<u8>, marks: Marks },
    /// Rows a workload makes: the sequence numbers `from..to`.
    Numbered { from: u64, to: u64 },
    /// `rows` rows one after another in a form of the input's own (a
    /// service's parsed values), journaled by their index from the chunk's
    /// offset, not by their bytes: a retry whose rows encode to other bytes
    /// (the table gained a column) still finds each row at its place.
    Rows { data: Vec<u8>, rows: u64 },
    /// A record too large for the memory budget, skipped by the reader: it
    /// becomes a reject, never rows.
    Oversized(Oversized),
    /// Rows in a form of the input's own (an Arrow record batch), read by
    /// the kind that input prepared and by no other.
    Other(Box<dyn std::any::Any + Send>),
}

impl std::fmt::Debug for Payload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Payload").finish_non_exhaustive()
    }
}

impl Chunk {
    /// Records read from an input (cut at a record end).
    pub fn records(input: usize, data: Vec<u8>, first_line: u64, base_offset: u64, ack: Option<AckRef>) -> Chunk {
        Chunk { input, first_line, base_offset, ack, payload: Payload::Records(data) }
    }

    /// The chunk's records as bytes (records or messages; empty for the other payloads).
    pub fn data(&self) -> &[u8] {
        match &self.payload {
            Payload::Records(data) | Payload::Messages { data, .. } | Payload::Rows { data, .. } => data,
            _ => &[],
        }
    }

    /// The journal range the chunk covers: (input, start, end), in bytes of
    /// its input, or in offsets of its messages.
    pub fn journal_range(&self) -> (u32, u64, u64) {
        match &self.payload {
            Payload::Messages { marks, .. } => (self.input as u32, marks.range.0, marks.range.1),
            Payload::Numbered { from, to } => (self.input as u32, *from, *to),
            Payload::Rows { rows, .. } => (self.input as u32, self.base_offset, self.base_offset + rows),
            _ => (self.input as u32, self.base_offset, self.base_offset + self.data().len() as u64),
        }
    }

    /// A record's line and journal position from where it was read (`line`,
    /// and `offset` in bytes of the input): for messages, both are its
    /// message's offset.
    pub fn place(&self, line: u64, offset: u64) -> (u64, u64) {
        match &self.payload {
            Payload::Messages { marks, .. } => {
                let o = marks.offset_at(offset - self.base_offset);
                (o, o)
            }
            _ => (line, offset),
        }
    }
}

/// Where each message of a chunk starts in its `data`, and its offset in
/// its partition: a message's rows take its offset as their journal
/// position and their "line" (one message may hold several rows; a chunk
/// holds whole messages, so every row of one message for one leaf is in
/// one batch).
pub struct Marks {
    /// Byte where each message starts in the chunk's data, ascending.
    pub starts: Vec<u32>,
    pub offsets: Vec<u64>,
    /// The offsets the chunk covers (from the end of the one before).
    pub range: (u64, u64),
}

impl std::fmt::Debug for Marks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Marks").finish_non_exhaustive()
    }
}

impl Marks {
    /// The offset of the message holding byte `at` of the chunk's data.
    pub(crate) fn offset_at(&self, at: u64) -> u64 {
        let i = self.starts.partition_point(|s| u64::from(*s) <= at);
        self.offsets[i.saturating_sub(1)]
    }
}

/// A rejected record with where it came from.
pub struct Reject {
    pub(crate) input: usize,
    pub(crate) line: u64,
    pub(crate) raw: Vec<u8>,
    pub(crate) reason: String,
    /// With `raw` empty: the record is `len` bytes at `offset` of its input file.
    pub(crate) at: Option<(u64, u32)>,
    /// The acknowledgement of the row's input: told the reason, settled
    /// once the reject is on file.
    pub(crate) ack: Option<AckRef>,
    /// The SQLSTATE of the refusal, when it has one (the server's, or the
    /// one the server would give: 22003 for a number out of range).
    pub(crate) sqlstate: Option<String>,
}

impl std::fmt::Debug for Reject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reject").finish_non_exhaustive()
    }
}

impl Reject {
    /// A reject with its record copied (`raw`), not yet acknowledged.
    pub fn new(input: usize, line: u64, raw: Vec<u8>, reason: String) -> Reject {
        Reject { input, line, raw, reason, at: None, ack: None, sqlstate: None }
    }

    /// [`Reject::new`] with the refusal's SQLSTATE.
    pub fn with_sqlstate(mut self, sqlstate: &str) -> Reject {
        self.sqlstate = Some(sqlstate.to_owned());
        self
    }

    /// Its share of the memory budget while it waits to be written.
    pub(crate) fn bytes(&self) -> usize {
        std::mem::size_of::<Reject>() + self.raw.len() + self.reason.len() + 32
    }
}

/// What a parse thread made of one chunk.
#[derive(Default)]
pub struct ChunkOut {
    pub(crate) segments: Vec<(Target, Segment)>,
    pub(crate) rejects: Vec<Reject>,
    /// Rows whose tag set has no id yet (tsbs): resolved by the coordinator.
    pub(crate) pending_tags: Vec<PendingRow>,
    /// Rows whose time partition does not exist yet.
    pub(crate) pending_parts: Vec<PendingPart>,
    pub(crate) budget: usize,
    /// The chunk's input range: (input, start, end) in bytes or sequence numbers.
    pub(crate) range: (u32, u64, u64),
    /// Rows an earlier run of this load committed already.
    pub(crate) skipped: u64,
    /// The part of `budget` that `rejects` take: given back once they are
    /// written (a chunk of short bad rows is mostly rejects).
    pub(crate) reject_bytes: usize,
    /// Text rows whose key the server must parse before they are routed.
    pub(crate) server_keys: Vec<ServerKeyed>,
    /// The chunk's acknowledgement, shared out to its rows by the coordinator.
    pub(crate) ack: Option<AckRef>,
}

impl std::fmt::Debug for ChunkOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkOut").finish_non_exhaustive()
    }
}

impl ChunkOut {
    /// Gives every row here a share of `ack` (rows resolved later, on the
    /// coordinator, get theirs from `self.ack`).
    pub(crate) fn attach(&mut self, ack: Option<AckRef>) {
        if let Some(ack) = &ack {
            ack.skipped(self.skipped);
            attach_filed(ack, self.segments.iter_mut().map(|(_, s)| s), &mut self.pending_parts, &mut self.rejects);
        }
        self.ack = ack;
    }
}

/// Shares `ack` with rows of one chunk: each segment, waiting row and reject.
pub(crate) fn attach_filed<'a>(
    ack: &AckRef,
    segments: impl Iterator<Item = &'a mut Segment>,
    pending: &mut [PendingPart],
    rejects: &mut [Reject],
) {
    for s in segments {
        if s.acks.is_empty() && !s.row_ends.is_empty() {
            s.acks.push(0, ack.share());
        }
    }
    for p in pending {
        p.ack.get_or_insert_with(|| ack.share());
    }
    for r in rejects {
        r.ack.get_or_insert_with(|| ack.share());
    }
}

/// A row waiting for its partition to be created.
pub(crate) struct PendingPart {
    pub table: u16,
    pub start: i64,
    pub row: Vec<u8>,
    pub raw: Vec<u8>,
    pub line: u64,
    /// The row's position (for the journal) and its chunk's range.
    pub offset: u64,
    pub range: (u32, u64, u64),
    /// `Some`: a text row the server parses, routed on this key's wire value.
    pub key: Option<Vec<u8>>,
    /// The acknowledgement of the row's chunk.
    pub ack: Option<AckRef>,
}

impl PendingPart {
    /// Its share of the memory budget.
    pub(crate) fn bytes(&self) -> usize {
        self.row.len() + self.raw.len()
    }
}

/// Where a row came from, for journal, resume and reject file.
#[derive(Clone, Copy)]
pub struct RowPos {
    pub input: usize,
    pub line: u64,
    pub offset: u64,
    pub range: (u32, u64, u64),
}

impl std::fmt::Debug for RowPos {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowPos").finish_non_exhaustive()
    }
}

/// What one chunk's rows became.
#[derive(Default)]
pub struct Filed {
    /// One segment per target, in the order their first rows came.
    pub(crate) segments: Vec<(Target, Segment)>,
    /// Where each target's segment is in `segments`.
    index: TargetMap<usize>,
    /// The segment the last row went to (`None` before the first): the next
    /// row most likely goes there too (rows in time order fill one
    /// partition for long runs), so it is found without a hash lookup and
    /// [`Filed::staging`] encodes into it.
    last: Option<usize>,
    /// Where a row is written by [`Filed::staging`] before any segment exists,
    /// and where a row written into the wrong segment is moved through.
    spare: Vec<u8>,
    /// Bytes the first segment reserves for its rows (a chunk's rows mostly
    /// go to one target: reserving once spares the copies of growing).
    pub(crate) reserve: usize,
    pub(crate) pending: Vec<PendingPart>,
    pub rejects: Vec<Reject>,
    pub(crate) skipped: u64,
    /// Keep rows' records by position instead of copying them (plain files).
    pub(crate) by_ref: bool,
    pub(crate) server_keys: Vec<ServerKeyed>,
}

impl std::fmt::Debug for Filed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Filed").finish_non_exhaustive()
    }
}

impl Filed {
    /// The segment for `target`, made when it has none yet.
    #[inline]
    pub(crate) fn segment(&mut self, target: Target) -> &mut Segment {
        let i = match self.last {
            Some(i) if self.segments[i].0 == target => i,
            _ => {
                let i = *self.index.entry(target).or_insert_with(|| {
                    let mut seg = Segment::default();
                    seg.data.reserve(std::mem::take(&mut self.reserve));
                    self.segments.push((target, seg));
                    self.segments.len() - 1
                });
                self.last = Some(i);
                i
            }
        };
        &mut self.segments[i].1
    }

    /// The segment for `target`, if it has one.
    #[cfg(test)]
    pub(crate) fn get(&self, target: &Target) -> Option<&Segment> {
        self.index.get(target).map(|&i| &self.segments[i].1)
    }

    /// Where to encode the next row before it is routed: the end of the
    /// segment the last row went to (most rows stay there, and are then
    /// filed without a copy). Append one row, then call [`Filed::file_staged`];
    /// on any other outcome leave the buffer as it was.
    #[inline]
    pub fn staging(&mut self) -> &mut Vec<u8> {
        match self.last {
            Some(i) => &mut self.segments[i].1.data,
            None => &mut self.spare,
        }
    }

    /// The row [`Filed::staging`] holds, as `row` for [`Filed::file`].
    fn staged(&self) -> &[u8] {
        match self.last {
            Some(i) => {
                let seg = &self.segments[i].1;
                &seg.data[seg.rows_end()..]
            }
            None => &self.spare,
        }
    }

    /// Forgets the row [`Filed::staging`] holds.
    fn unstage(&mut self) {
        match self.last {
            Some(i) => {
                let seg = &mut self.segments[i].1;
                let end = seg.rows_end();
                seg.data.truncate(end);
            }
            None => self.spare.clear(),
        }
    }

    /// [`Filed::file`] for the row [`Filed::staging`] holds.
    #[inline]
    pub fn file_staged(&mut self, routing: &Routing, routed: Routed, table: u16, raw: &[u8], at: RowPos) {
        if let (Routed::To(leaf), Some(i)) = (&routed, self.last) {
            let target = Target { table, leaf: *leaf, text: false };
            if self.segments[i].0 == target && !routing.is_committed(*leaf, false, at.input, at.offset) {
                let seg = &mut self.segments[i].1;
                if self.by_ref {
                    seg.pushed_ref(at.offset, raw.len(), at.line, at.input);
                } else {
                    seg.pushed(raw, at.line, at.input);
                }
                return;
            }
        }
        // Another target, or no row at all: moved through `spare`.
        let mut row = std::mem::take(&mut self.spare);
        if self.last.is_some() {
            row.clear();
            row.extend_from_slice(self.staged());
        }
        self.unstage();
        self.file(routing, routed, table, &row, raw, at);
        row.clear();
        self.spare = row;
    }

    /// Files a routed row: into its segment, the pending list or the rejects,
    /// or nowhere when an earlier run committed it.
    pub fn file(&mut self, routing: &Routing, routed: Routed, table: u16, row: &[u8], raw: &[u8], at: RowPos) {
        match routed {
            Routed::To(leaf) => {
                if routing.is_committed(leaf, false, at.input, at.offset) {
                    self.skipped += 1;
                } else {
                    let by_ref = self.by_ref;
                    let seg = self.segment(Target { table, leaf, text: false });
                    if by_ref {
                        seg.push_ref(row, at.offset, raw.len(), at.line, at.input);
                    } else {
                        seg.push(row, raw, at.line, at.input);
                    }
                }
            }
            Routed::Missing { start } => self.pending.push(PendingPart {
                table,
                start,
                row: row.to_vec(),
                raw: raw.to_vec(),
                line: at.line,
                offset: at.offset,
                range: at.range,
                key: None,
                ack: None,
            }),
            Routed::Reject(reason) => self.rejects.push(Reject::new(at.input, at.line, raw.to_vec(), reason)),
        }
    }

    /// Packs the chunk's results with the budget they take.
    pub fn finish(mut self, range: (u32, u64, u64)) -> ChunkOut {
        self.rejects.sort_by_key(|r| r.line);
        let mut segments = self.segments;
        for (_, s) in &mut segments {
            s.ranges.push(range);
        }
        let reject_bytes = self.rejects.iter().map(Reject::bytes).sum::<usize>();
        let budget = segments.iter().map(|(_, s)| s.bytes()).sum::<usize>()
            + self.pending.iter().map(PendingPart::bytes).sum::<usize>()
            + self.server_keys.iter().map(ServerKeyed::bytes).sum::<usize>()
            + reject_bytes;
        ChunkOut {
            reject_bytes,
            segments,
            rejects: self.rejects,
            pending_tags: Vec::new(),
            pending_parts: self.pending,
            budget,
            range,
            skipped: self.skipped,
            server_keys: self.server_keys,
            ack: None,
        }
    }
}

/// A text row whose key only the server can parse.
pub(crate) struct ServerKeyed {
    /// The key's text.
    pub key: Vec<u8>,
    /// The row in COPY text format.
    pub row: Vec<u8>,
    pub raw: Vec<u8>,
    pub at: RowPos,
}

impl ServerKeyed {
    /// Its share of the memory budget (the row and its record, as a pending row counts them).
    pub(crate) fn bytes(&self) -> usize {
        self.row.len() + self.raw.len()
    }
}

/// A row whose tag set has no id yet.
pub(crate) struct PendingRow {
    pub table: u16,
    pub key: Vec<u8>,
    pub tags: Vec<Option<String>>,
    pub row: Vec<u8>,
    pub raw: Vec<u8>,
    pub at: RowPos,
    /// The tree version the rest of its chunk was routed with: routed with a
    /// newer one, it could go to a leaf its chunk's other rows still wait
    /// for, and a batch would claim the chunk for that leaf without them.
    pub route: RouteCtx,
}

impl PendingRow {
    pub(crate) fn bytes(&self) -> usize {
        self.row.len() + self.raw.len()
    }
}

/// A record too large to hold, skipped whole: where it is and how long.
pub struct Oversized {
    pub(crate) line: u64,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// The longest record the budget allows.
    pub(crate) max: usize,
}

impl std::fmt::Debug for Oversized {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oversized").finish_non_exhaustive()
    }
}
