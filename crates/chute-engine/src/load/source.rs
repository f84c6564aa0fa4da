//! Inputs: files (plain, gzip, zstd) and stdin, read as raw bytes.
//!
//! A source knows its identity (for exactly-once resume), its size when it
//! has one (for progress), and counts the bytes it has read before
//! decompression, so a progress bar shows the share of the file really read.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::LoadError;

/// Where rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    File(PathBuf),
    Stdin,
}

impl InputSpec {
    pub fn parse(arg: &str) -> InputSpec {
        if arg == "-" { InputSpec::Stdin } else { InputSpec::File(PathBuf::from(arg)) }
    }

    /// How people and reject files name it.
    pub fn display_name(&self) -> String {
        match self {
            InputSpec::File(p) => p.display().to_string(),
            InputSpec::Stdin => "stdin".into(),
        }
    }

    /// The default reject file: `<input file name>.rejects` in the current
    /// directory, or `stdin.rejects`.
    pub fn default_reject_file(&self) -> PathBuf {
        match self {
            InputSpec::File(p) => PathBuf::from(format!("{}.rejects", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())),
            InputSpec::Stdin => PathBuf::from("stdin.rejects"),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Zstd,
}

/// An open input.
pub struct Input {
    pub spec: InputSpec,
    /// Path, size and modification time (files); "stdin" otherwise.
    pub identity: String,
    /// Size on disk, when known.
    pub total_bytes: Option<u64>,
    pub compression: Compression,
    /// Bytes read from the file or stdin so far (before decompression).
    pub read_bytes: Arc<AtomicU64>,
    pub reader: Box<dyn Read + Send>,
}

impl std::fmt::Debug for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Input").field("spec", &self.spec).field("identity", &self.identity).field("compression", &self.compression).finish()
    }
}

struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Opens an input; compression is recognized by magic bytes. A zstd frame
/// whose window exceeds `max_window` is refused (it would blow the memory
/// budget).
pub fn open(spec: &InputSpec, max_window: usize) -> Result<Input, LoadError> {
    let read_bytes = Arc::new(AtomicU64::new(0));
    let (raw, identity, total_bytes): (Box<dyn Read + Send>, String, Option<u64>) = match spec {
        InputSpec::Stdin => (Box::new(io::stdin()), "stdin".into(), None),
        InputSpec::File(p) => {
            let file = File::open(p).map_err(|e| LoadError::Input { input: p.display().to_string(), message: e.to_string() })?;
            let meta = file.metadata().map_err(|e| LoadError::Input { input: p.display().to_string(), message: e.to_string() })?;
            let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            (Box::new(file), format!("{}:{}:{}", canonical.display(), meta.len(), mtime), Some(meta.len()))
        }
    };
    let mut buffered = BufReader::with_capacity(1 << 20, Counting { inner: raw, count: read_bytes.clone() });
    let magic = peek(&mut buffered).map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
    let compression = if magic.starts_with(&[0x1f, 0x8b]) {
        Compression::Gzip
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Compression::Zstd
    } else {
        Compression::None
    };
    let reader: Box<dyn Read + Send> = match compression {
        Compression::None => Box::new(buffered),
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Zstd => {
            let mut d = zstd::stream::read::Decoder::with_buffer(buffered)
                .map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
            let log = usize::BITS - 1 - max_window.max(1 << 10).leading_zeros();
            d.window_log_max(log).map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
            Box::new(ZstdWindowCheck { inner: d, name: spec.display_name(), max_window })
        }
    };
    Ok(Input { spec: spec.clone(), identity, total_bytes, compression, read_bytes, reader })
}

fn peek<R: io::BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    Ok(r.fill_buf()?.iter().take(4).copied().collect())
}

/// Turns zstd's "window too large" into a message that says what to do.
struct ZstdWindowCheck<R> {
    inner: R,
    name: String,
    max_window: usize,
}

impl<R: Read> Read for ZstdWindowCheck<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read(buf).map_err(|e| {
            if e.to_string().contains("window") || e.to_string().contains("memory") {
                io::Error::other(format!(
                    "{} needs a zstd window larger than the memory budget allows ({} MiB): recompress it with a smaller window (zstd without --long) or raise --memory",
                    self.name,
                    self.max_window >> 20
                ))
            } else {
                e
            }
        })
    }
}

/// The identity of a file input without opening it for reading.
pub fn file_exists(p: &Path) -> bool {
    p.is_file()
}
