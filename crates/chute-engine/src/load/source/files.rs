//! Files, stdin and streams made in process (behind `reading::ByteInput`), read in
//! turn and cut into chunks at record ends, skipping a header (tsbs) and
//! records too large for the memory budget (see `oversized`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use chute_core::parse::{Format, count_lines};

use super::super::LoadError;
use super::super::ack::{AckId, AckRef, Completion};
use super::super::kind::SkipHeader;
use super::super::model::{Chunk, Payload};
use super::super::reading;
use super::Source;

/// Files and stdin (plain, gzip or zstd): read in turn, cut at record ends.
pub(crate) struct FileSource {
    pub(crate) inputs: Vec<reading::ByteInput>,
    pub(crate) format: std::sync::Arc<dyn Format>,
    pub(crate) skip: Option<SkipHeader>,
    pub(crate) chunk_bytes: usize,
    pub(crate) flush_every: Option<Duration>,
    pub(crate) max_record: usize,
    /// Input bytes read so far (before decompression), for progress.
    pub(crate) bytes_read: std::sync::Arc<AtomicU64>,
}

impl Source for FileSource {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, cancel: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError> {
        let cut = Cutting {
            format: self.format.as_ref(),
            skip: self.skip,
            chunk_bytes: self.chunk_bytes,
            flush_every: self.flush_every,
            max_record: self.max_record,
        };
        read_inputs(self.inputs, cut, out, cancel, &self.bytes_read, acks)
    }
}

/// How the reader cuts its inputs into chunks.
pub(crate) struct Cutting<'a> {
    pub(crate) format: &'a dyn Format,
    /// Skips a header block (tsbs).
    pub(crate) skip: Option<SkipHeader>,
    pub(crate) chunk_bytes: usize,
    /// Send what is buffered when the input pauses or it has waited this long.
    pub(crate) flush_every: Option<Duration>,
    /// A record longer than this is skipped and rejected, not held.
    pub(crate) max_record: usize,
}

/// Reads every input in turn and cuts it into chunks at record ends.
fn read_inputs(
    inputs: Vec<reading::ByteInput>,
    cut: Cutting<'_>,
    tx: &flume::Sender<Chunk>,
    cancel: &AtomicBool,
    bytes_read: &AtomicU64,
    acks: &flume::Sender<Completion>,
) -> Result<(), LoadError> {
    let Cutting { format, skip, chunk_bytes, flush_every, max_record } = cut;
    let mut done_before = 0u64;
    let mut tag = 0u64;
    let mut ack = |input: usize, start: u64, end: u64, first_line: u64, end_line: u64| {
        tag += 1;
        AckRef::new(AckId { input: input as u32, start, end, first_line, end_line, tag }, acks.clone())
    };
    for (index, mut input) in inputs.into_iter().enumerate() {
        let name = input.spec.display_name();
        let io_err = |e: std::io::Error| LoadError::Input { input: name.clone(), message: e.to_string() };
        let mut buf: Vec<u8> = Vec::with_capacity(chunk_bytes * 2);
        let (mut line, mut offset) = (1u64, 0u64);
        let mut eof = false;
        let mut skipping = skip;
        // A record too large to hold, being skipped: `buf` starts with its stand-in.
        let mut big: Option<super::super::oversized::Skipping> = None;
        while !eof || !buf.is_empty() || big.is_some() {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            if !fill(&mut input, &mut buf, (chunk_bytes, flush_every), cancel, &mut eof).map_err(io_err)? {
                return Ok(());
            }
            bytes_read.store(done_before + input.read_bytes.load(Ordering::Relaxed), Ordering::Relaxed);
            if let Some(f) = skipping {
                match f(&buf).map_err(|message| LoadError::Input { input: name.clone(), message })? {
                    Some((bytes, lines)) => {
                        buf.drain(..bytes);
                        // The header has no rows: acknowledged at once, so the committed prefix starts at 0.
                        ack(index, offset, offset + bytes as u64, line, line + lines).settle();
                        offset += bytes as u64;
                        line += lines;
                        skipping = None;
                    }
                    None if eof => return Err(LoadError::Input { input: name, message: "the file ends inside its header".into() }),
                    None => continue,
                }
            }
            if let Some(b) = big.as_mut() {
                if let Some(whole) = b.advance(format, &mut buf, eof, &mut line, &mut offset) {
                    big = None;
                    let ack = Some(ack(index, whole.offset, offset, whole.line, line));
                    let chunk =
                        Chunk { input: index, first_line: whole.line, base_offset: whole.offset, ack, payload: Payload::Oversized(whole) };
                    if tx.send(chunk).is_err() {
                        return Ok(());
                    }
                }
                continue;
            }
            let Some(mut end) = format.last_record_end(&buf, eof) else {
                if eof {
                    break;
                }
                if buf.len() > max_record
                    && let Some(b) = super::super::oversized::Skipping::start(format, &mut buf, &mut line, &mut offset, max_record)
                {
                    big = Some(b);
                    continue;
                }
                if buf.len() > 256 << 20 {
                    return Err(no_record_end(name, line));
                }
                continue;
            };
            let mut stop = false;
            if let Some(n) = format.end_of_data(&buf[..end]) {
                end = n;
                stop = true;
            }
            let rest = buf.split_off(end);
            let lines = count_lines(&buf);
            let data = std::mem::replace(&mut buf, rest);
            if !data.is_empty() {
                let ack = Some(ack(index, offset, offset + end as u64, line, line + lines));
                if tx.send(Chunk::records(index, data, line, offset, ack)).is_err() {
                    return Ok(());
                }
            }
            line += lines;
            offset += end as u64;
            if stop {
                break;
            }
        }
        done_before += input.read_bytes.load(Ordering::Relaxed);
        bytes_read.store(done_before, Ordering::Relaxed);
    }
    Ok(())
}

/// Reads up to one chunk's worth past what `buf` holds; with `flush_every`,
/// stops early when the input pauses or what is buffered has waited that
/// long, so the whole records are sent. Sets `eof` at the end of the input.
/// `Ok(false)`: a stop was heard while the input paused.
fn fill(
    input: &mut reading::ByteInput,
    buf: &mut Vec<u8>,
    (chunk_bytes, flush_every): (usize, Option<Duration>),
    cancel: &AtomicBool,
    eof: &mut bool,
) -> std::io::Result<bool> {
    let want = buf.len() + chunk_bytes;
    let filling = Instant::now();
    while buf.len() < want && !*eof {
        let at = buf.len();
        let read = if flush_every.is_none() {
            // Read into the buffer's spare room (no zeroing first) until the chunk is full or the input ends.
            let asked = want - at;
            buf.reserve(asked);
            input.read_append(buf, asked).inspect(|&n| *eof |= n < asked)
        } else {
            buf.resize(want, 0);
            let read = input.read(&mut buf[at..]);
            buf.truncate(at + read.as_ref().map_or(0, |&n| n));
            read
        };
        // `None`: the input paused (a live stream waits for its producer).
        let n = match read {
            Ok(n) => Some(n),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => None,
            Err(e) => return Err(e),
        };
        // A paused stream is waited for in pieces: a stop is heard between them.
        if n.is_none() && cancel.load(Ordering::Relaxed) {
            return Ok(false);
        }
        match n {
            Some(0) => *eof = true,
            Some(_) if flush_every.is_none_or(|f| filling.elapsed() < f) => {}
            _ if !buf.is_empty() => break,
            _ => {}
        }
    }
    Ok(true)
}

/// No record ends in a quarter gigabyte: the input is not what the format says.
fn no_record_end(input: String, line: u64) -> LoadError {
    LoadError::Input {
        input,
        message: format!(
            "no record ends within 256 MiB after line {line}: an unterminated quote, or the wrong {}?",
            crate::setting::Setting::Format
        ),
    }
}
