//! Helpers shared by the parsers' tests: collect what a parser reports, and
//! feed an input through a boundary finder the way a reader would.
//!
//! The chunk-equivalence property (cutting anywhere the boundary finder
//! allows changes nothing) is the core promise of this module, so every
//! format's tests use the same reader simulation rather than each its own.

use std::cell::RefCell;

use super::{ChunkEnd, Format, RecordError, RecordPos, count_lines};

/// One thing a parser reported, owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    Record(Vec<Option<Vec<u8>>>, RecordPos),
    Error(RecordError),
}

impl Event {
    /// The record's fields as (lossy) strings and its position; panics on an error.
    pub fn unwrap_record(self) -> (Vec<Option<String>>, RecordPos) {
        match self {
            Event::Record(fields, pos) => (fields.into_iter().map(|f| f.map(|v| String::from_utf8_lossy(&v).into_owned())).collect(), pos),
            Event::Error(e) => panic!("expected a record, got error {e}"),
        }
    }

    pub fn unwrap_error(self) -> RecordError {
        match self {
            Event::Error(e) => e,
            Event::Record(fields, pos) => panic!("expected an error, got record {fields:?} at {pos:?}"),
        }
    }
}

/// Parses one chunk, collecting its events.
pub fn parse_chunk_events(p: &dyn Format, chunk: &[u8], first_line: u64, base_offset: u64, events: &mut Vec<Event>) -> ChunkEnd {
    // Both callbacks push to one list, so records and errors keep their order.
    let out = RefCell::new(std::mem::take(events));
    let end = p.parse_chunk(
        chunk,
        first_line,
        base_offset,
        &mut |f, pos| out.borrow_mut().push(Event::Record(f.iter().map(|v| v.map(<[u8]>::to_vec)).collect(), pos)),
        &mut |e| out.borrow_mut().push(Event::Error(e)),
    );
    *events = out.into_inner();
    end
}

/// Parses `messages` as one chunk of whole messages (Kafka's): each event
/// with the index of the message its record starts in.
pub fn parse_message_events(p: &dyn Format, messages: &[&[u8]]) -> Vec<(usize, Event)> {
    let (mut chunk, mut starts) = (Vec::new(), Vec::new());
    for m in messages {
        starts.push(chunk.len() as u32);
        chunk.extend_from_slice(m);
    }
    let message = |pos: &RecordPos| starts.partition_point(|s| u64::from(*s) <= pos.offset) - 1;
    let out = RefCell::new(Vec::new());
    let end = p.parse_messages(
        &chunk,
        &starts,
        1,
        0,
        &mut |f, pos| out.borrow_mut().push((message(&pos), Event::Record(f.iter().map(|v| v.map(<[u8]>::to_vec)).collect(), pos))),
        &mut |e| out.borrow_mut().push((message(&e.pos), Event::Error(e))),
    );
    assert_eq!(end, ChunkEnd::Complete);
    out.into_inner()
}

/// Parses `input` as one chunk starting at line 1, offset 0.
pub fn parse_all(p: &dyn Format, input: &[u8]) -> (Vec<Event>, ChunkEnd) {
    let mut events = Vec::new();
    let end = parse_chunk_events(p, input, 1, 0, &mut events);
    (events, end)
}

/// Reads `input` (from `base_offset`, line `first_line`) in pieces of the
/// given sizes (cycled), cutting chunks where `last_record_end` allows and
/// stopping where `end_of_data` says, as the engine's reader does.
pub fn parse_chunked(p: &dyn Format, input: &[u8], first_line: u64, base_offset: u64, reads: &[usize]) -> (Vec<Event>, ChunkEnd) {
    let mut events = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let (mut line, mut offset) = (first_line, base_offset);
    let mut fed = 0;
    let mut reads = reads.iter().cycle();
    loop {
        let eof = fed == input.len();
        if !eof {
            let n = (*reads.next().expect("at least one read size")).clamp(1, input.len() - fed);
            pending.extend_from_slice(&input[fed..fed + n]);
            fed += n;
        }
        let eof = fed == input.len();
        let Some(end) = p.last_record_end(&pending, eof) else {
            if eof {
                assert!(pending.is_empty(), "no record end at EOF with {} bytes pending", pending.len());
                return (events, ChunkEnd::Complete);
            }
            continue;
        };
        assert!(end > 0 && end <= pending.len(), "boundary {end} outside 1..={}", pending.len());
        let chunk = &pending[..end];
        let stop = p.end_of_data(chunk);
        let chunk = &chunk[..stop.unwrap_or(end)];
        let result = parse_chunk_events(p, chunk, line, offset, &mut events);
        match (stop, result) {
            (None, ChunkEnd::Complete) => {}
            (Some(_), ChunkEnd::EndOfData { .. }) => return (events, result),
            other => panic!("end_of_data and parse_chunk disagree: {other:?}"),
        }
        line += count_lines(chunk);
        offset += end as u64;
        pending.drain(..end);
    }
}
