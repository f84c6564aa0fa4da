//! Parquet files, Arrow IPC files and streams, and record batch streams,
//! read as record batches and sent as chunks of at most `CHUNK_ROWS` rows
//! (slices of a batch: no copy). A chunk's offset is the index of its first
//! row in its input, counted over row groups and batches in file order: the
//! same rows get the same numbers in every run, so the journal's ranges
//! (rows, not bytes, for these inputs) let a resumed load skip exactly the
//! rows an earlier run committed.
//!
//! A Parquet file's row groups are decoded on `decoders` threads at once,
//! each taking every n-th row group, and sent on in file order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use arrow_array::RecordBatch;

use chute_engine::load::LoadError;
use chute_engine::load::ack::{AckId, AckRef, Completion};
use chute_engine::load::model::{Chunk, Payload};
use chute_engine::load::source::Source;

use crate::files::{How, OpenedFile};

/// Rows in one chunk: about a megabyte of binary rows for a dozen columns.
pub(crate) const CHUNK_ROWS: usize = 8192;

/// Columnar inputs, read in turn.
pub(crate) struct ColumnarSource {
    pub(crate) inputs: Vec<OpenedFile>,
    /// The columns to read, by name (the others are not decoded).
    pub(crate) columns: Vec<String>,
    /// Threads decoding a Parquet file's row groups.
    pub(crate) decoders: usize,
    /// Input bytes read so far (files: as row groups are read), for progress.
    pub(crate) bytes_read: Arc<AtomicU64>,
}

/// Sends a file's batches as chunks, numbering their rows.
struct Emitter<'a> {
    out: &'a flume::Sender<Chunk>,
    cancel: &'a AtomicBool,
    acks: &'a flume::Sender<Completion>,
    input: usize,
    row: u64,
    tag: u64,
}

impl Emitter<'_> {
    /// `false`: the load is stopping.
    fn emit(&mut self, batch: RecordBatch) -> bool {
        let mut at = 0;
        while at < batch.num_rows() {
            if self.cancel.load(Ordering::Relaxed) {
                return false;
            }
            let n = CHUNK_ROWS.min(batch.num_rows() - at);
            let (start, end) = (self.row, self.row + n as u64);
            self.tag += 1;
            let id = AckId { input: self.input as u32, start, end, first_line: start + 1, end_line: end + 1, tag: self.tag };
            let chunk = Chunk {
                input: self.input,
                first_line: start + 1,
                base_offset: start,
                ack: Some(AckRef::new(id, self.acks.clone())),
                payload: Payload::Other(Box::new(batch.slice(at, n))),
            };
            if self.out.send(chunk).is_err() {
                return false;
            }
            self.row = end;
            at += n;
        }
        !self.cancel.load(Ordering::Relaxed)
    }
}

impl Source for ColumnarSource {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, cancel: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError> {
        let mut done_before = 0u64;
        for (index, input) in self.inputs.into_iter().enumerate() {
            let mut emit = Emitter { out, cancel, acks, input: index, row: 0, tag: 0 };
            let name = input.name.clone();
            let bad = |e: &dyn std::fmt::Display| LoadError::Input { input: name.clone(), message: e.to_string() };
            let size = input.size.unwrap_or(0);
            let projection: Vec<usize> = self.columns.iter().filter_map(|c| input.schema.index_of(c).ok()).collect();
            let going = match input.how {
                How::Parquet(path) => parquet(&path, &projection, self.decoders.max(1), &mut emit, &bad)?,
                How::IpcFile(path) => {
                    let file = std::fs::File::open(&path).map_err(|e| bad(&e))?;
                    let reader = arrow_ipc::reader::FileReader::try_new(file, Some(projection)).map_err(|e| bad(&e))?;
                    batches(reader, &mut emit, &bad)?
                }
                How::IpcStream(path) => {
                    let file = std::fs::File::open(&path).map_err(|e| bad(&e))?;
                    let reader =
                        arrow_ipc::reader::StreamReader::try_new(std::io::BufReader::with_capacity(1 << 20, file), Some(projection))
                            .map_err(|e| bad(&e))?;
                    batches(reader, &mut emit, &bad)?
                }
                How::Stream(reader) => batches(reader, &mut emit, &bad)?,
            };
            done_before += size;
            self.bytes_read.store(done_before, Ordering::Relaxed);
            if !going {
                return Ok(());
            }
        }
        Ok(())
    }
}

/// Every batch of a reader; `false` when the load stopped first.
fn batches(
    reader: impl Iterator<Item = Result<RecordBatch, arrow_schema::ArrowError>>,
    emit: &mut Emitter<'_>,
    bad: &dyn Fn(&dyn std::fmt::Display) -> LoadError,
) -> Result<bool, LoadError> {
    for batch in reader {
        if !emit.emit(batch.map_err(|e| bad(&e))?) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// A Parquet file's row groups, decoded on `decoders` threads, sent in order.
fn parquet(
    path: &std::path::Path,
    projection: &[usize],
    decoders: usize,
    emit: &mut Emitter<'_>,
    bad: &dyn Fn(&dyn std::fmt::Display) -> LoadError,
) -> Result<bool, LoadError> {
    use parquet::arrow::ProjectionMask;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let err = |e: &dyn std::fmt::Display| LoadError::Input { input: path.display().to_string(), message: e.to_string() };
    let builder = |groups: Option<Vec<usize>>| -> Result<_, LoadError> {
        let file = std::fs::File::open(path).map_err(|e| err(&e))?;
        let b = ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| err(&e))?;
        let mask = ProjectionMask::roots(b.parquet_schema(), projection.iter().copied());
        let b = b.with_projection(mask).with_batch_size(CHUNK_ROWS);
        let b = match groups {
            Some(g) => b.with_row_groups(g),
            None => b,
        };
        b.build().map_err(|e| err(&e))
    };
    let groups = {
        let file = std::fs::File::open(path).map_err(|e| bad(&e))?;
        ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?.metadata().num_row_groups()
    };
    let decoders = decoders.min(groups);
    if decoders <= 1 {
        return batches(builder(None)?, emit, bad);
    }
    // Decoder t reads row groups t, t + n, t + 2n, …, each ended by `None`.
    type Decoded = Result<Option<RecordBatch>, LoadError>;
    std::thread::scope(|scope| {
        let mut queues: Vec<flume::Receiver<Decoded>> = Vec::with_capacity(decoders);
        for t in 0..decoders {
            let (tx, rx) = flume::bounded::<Decoded>(2);
            queues.push(rx);
            let (builder, err) = (&builder, &err);
            scope.spawn(move || {
                for g in (t..groups).step_by(decoders) {
                    let reader = match builder(Some(vec![g])) {
                        Ok(r) => r,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    for b in reader {
                        let sent = tx.send(b.map(Some).map_err(|e| err(&e)));
                        if sent.is_err() {
                            return;
                        }
                    }
                    if tx.send(Ok(None)).is_err() {
                        return;
                    }
                }
            });
        }
        for g in 0..groups {
            loop {
                match queues[g % decoders].recv() {
                    Ok(Ok(Some(batch))) => {
                        if !emit.emit(batch) {
                            return Ok(false);
                        }
                    }
                    Ok(Ok(None)) => break,
                    Ok(Err(e)) => return Err(e),
                    Err(_) => return Err(bad(&"a decoding thread stopped")),
                }
            }
        }
        Ok(true)
    })
}
