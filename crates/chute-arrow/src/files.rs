//! Columnar inputs: Parquet files, Arrow IPC files and streams, and record
//! batch streams made in process (stdin's Arrow IPC stream, a Python data
//! frame). Arrow data is not cut at byte boundaries: a row's position is its
//! index in its input (row groups and batches in file order, rows in order),
//! which stays the same from one run to the next and is what the journal
//! records, so a resumed load skips exactly the rows an earlier run
//! committed (see `source::columnar`).
//!
//! Every input is opened, and its schema read, before any row moves: a
//! column the table cannot take is refused with both types and the cast
//! to use (see `kind::columnar`).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatchReader;
use arrow_schema::SchemaRef;

use chute_engine::load::LoadError;

/// One columnar input of a load.
#[derive(Debug, Clone)]
pub enum ColumnarInput {
    /// A Parquet file, an Arrow IPC file (`.arrow`, `.feather` v2) or an
    /// Arrow IPC stream written to a file: told apart by their first bytes.
    File(PathBuf),
    /// Record batches read once, in order (stdin's Arrow IPC stream, a data
    /// frame handed over through the Arrow C stream interface).
    Stream(BatchStream),
}

impl std::fmt::Debug for BatchStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BatchStream").field("name", &self.name).finish()
    }
}

impl ColumnarInput {
    pub fn display_name(&self) -> String {
        match self {
            ColumnarInput::File(p) => p.display().to_string(),
            ColumnarInput::Stream(s) => s.name.clone(),
        }
    }
}

/// A stream of record batches with its schema, read by one load only.
#[derive(Clone)]
pub struct BatchStream {
    name: String,
    schema: SchemaRef,
    reader: Arc<Mutex<Option<Box<dyn RecordBatchReader + Send>>>>,
    /// Read from a pipe as it is written (stdin), not handed over whole.
    pub(crate) live: bool,
}

impl BatchStream {
    /// `name` is how messages and reject files call it (`stdin`, `data`).
    pub fn new(name: impl Into<String>, reader: Box<dyn RecordBatchReader + Send>) -> BatchStream {
        BatchStream { name: name.into(), schema: reader.schema(), reader: Arc::new(Mutex::new(Some(reader))), live: false }
    }

    /// Stdin as an Arrow IPC stream (its schema is read now).
    pub fn stdin() -> Result<BatchStream, LoadError> {
        let reader = arrow_ipc::reader::StreamReader::try_new(std::io::BufReader::with_capacity(1 << 20, std::io::stdin()), None)
            .map_err(|e| LoadError::Input { input: "stdin".into(), message: format!("not an Arrow IPC stream: {e}") })?;
        Ok(BatchStream { live: true, ..BatchStream::new("stdin", Box::new(reader)) })
    }

    pub fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    /// The reader, taken once.
    fn take(&self) -> Result<Box<dyn RecordBatchReader + Send>, LoadError> {
        self.reader
            .lock()
            .map_err(|_| LoadError::Setup("the stream's reader was poisoned".into()))?
            .take()
            .ok_or_else(|| LoadError::Input { input: self.name.clone(), message: "it was read already: a stream is read once".into() })
    }
}

/// What a file holds, by its first bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FileKind {
    Parquet,
    IpcFile,
    IpcStream,
}

fn input_err(path: &Path, message: impl Into<String>) -> LoadError {
    LoadError::Input { input: path.display().to_string(), message: message.into() }
}

pub(crate) fn file_kind(path: &Path) -> Result<FileKind, LoadError> {
    let mut head = [0u8; 8];
    let mut f = File::open(path).map_err(|e| input_err(path, e.to_string()))?;
    let n = f.read(&mut head).map_err(|e| input_err(path, e.to_string()))?;
    let head = &head[..n];
    if head.starts_with(b"PAR1") {
        Ok(FileKind::Parquet)
    } else if head.starts_with(b"ARROW1") {
        Ok(FileKind::IpcFile)
    } else if head.starts_with(&[0xff, 0xff, 0xff, 0xff]) {
        Ok(FileKind::IpcStream)
    } else if head.starts_with(&[0x1f, 0x8b]) || head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Err(input_err(path, "it is compressed as a whole (gzip or zstd): Parquet and Arrow files compress inside; decompress it first"))
    } else {
        Err(input_err(path, "neither a Parquet file (PAR1) nor an Arrow IPC file (ARROW1) or stream"))
    }
}

/// An input opened for reading: its schema and identity.
pub(crate) struct OpenedFile {
    pub name: String,
    pub schema: SchemaRef,
    /// Path, size and modification time (files): the load id is derived
    /// from it; `None` for a stream.
    pub identity: Option<String>,
    pub size: Option<u64>,
    pub how: How,
}

pub(crate) enum How {
    Parquet(PathBuf),
    IpcFile(PathBuf),
    IpcStream(PathBuf),
    Stream(Box<dyn RecordBatchReader + Send>),
}

/// The schema of an input (files are opened and closed; a stream's is known).
pub(crate) fn schema(input: &ColumnarInput) -> Result<SchemaRef, LoadError> {
    match input {
        ColumnarInput::Stream(s) => Ok(s.schema()),
        ColumnarInput::File(p) => file_schema(p, file_kind(p)?),
    }
}

fn file_schema(p: &Path, kind: FileKind) -> Result<SchemaRef, LoadError> {
    let file = File::open(p).map_err(|e| input_err(p, e.to_string()))?;
    let bad = |e: &dyn std::fmt::Display| input_err(p, e.to_string());
    Ok(match kind {
        FileKind::Parquet => {
            parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(file).map_err(|e| bad(&e))?.schema().clone()
        }
        FileKind::IpcFile => arrow_ipc::reader::FileReader::try_new(file, None).map_err(|e| bad(&e))?.schema(),
        FileKind::IpcStream => arrow_ipc::reader::StreamReader::try_new(std::io::BufReader::new(file), None).map_err(|e| bad(&e))?.schema(),
    })
}

/// Opens an input for the load's reader (a stream is taken: read once).
pub(crate) fn open(input: &ColumnarInput) -> Result<OpenedFile, LoadError> {
    match input {
        ColumnarInput::Stream(s) => {
            Ok(OpenedFile { name: s.name.clone(), schema: s.schema(), identity: None, size: None, how: How::Stream(s.take()?) })
        }
        ColumnarInput::File(p) => {
            let kind = file_kind(p)?;
            let schema = file_schema(p, kind)?;
            let meta = std::fs::metadata(p).map_err(|e| input_err(p, e.to_string()))?;
            let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            let how = match kind {
                FileKind::Parquet => How::Parquet(p.clone()),
                FileKind::IpcFile => How::IpcFile(p.clone()),
                FileKind::IpcStream => How::IpcStream(p.clone()),
            };
            Ok(OpenedFile {
                name: p.display().to_string(),
                schema,
                identity: Some(chute_engine::load::file_identity(&canonical, meta.len(), mtime)),
                size: Some(meta.len()),
                how,
            })
        }
    }
}
