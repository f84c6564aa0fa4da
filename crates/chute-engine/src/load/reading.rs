//! Reading inputs as bytes: files (plain, gzip, zstd), stdin, and generated
//! streams (tsbs files made in process by `chute load --gen iot`).
//!
//! A source knows its identity (for exactly-once resume), its size when it
//! has one (for progress), and counts the bytes it has read before
//! decompression, so a progress bar shows the share of the file really read.

use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use chute_core::generate::{AnyWorkload, GenParams, StreamWorkload, workload};

use super::LoadError;

/// Where rows come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InputSpec {
    File(PathBuf),
    Stdin,
    /// The bytes of a file made in process, never written to disk.
    Generated(GeneratedInput),
}

/// Makes a [`StreamWorkload`] from its start; called once per read of the
/// input (the header is read before the load), so each call must make the
/// same bytes.
pub type StreamFactory = Arc<dyn Fn() -> Box<dyn StreamWorkload> + Send + Sync>;

/// A generated input: what it is called, what identifies its bytes for the
/// journal, and how to make them.
#[derive(Clone)]
pub struct GeneratedInput {
    /// How people and reject files name it (`generated iot`).
    pub name: String,
    /// The workload and every parameter that decides its bytes: the same
    /// identity must mean the same bytes, since resume skips by offset.
    pub identity: String,
    pub make: StreamFactory,
}

impl GeneratedInput {
    pub fn new(name: impl Into<String>, identity: impl Into<String>, make: StreamFactory) -> Self {
        GeneratedInput { name: name.into(), identity: identity.into(), make }
    }

    /// The stream workload `name` (`iot`, `devops`) of `rows` rows with
    /// parameters `p`, named `generated <name>` and identified by them all.
    /// Errors when `name` is no stream workload or `p` does not fit it.
    pub fn stream(name: &'static str, rows: u64, p: &GenParams) -> Result<Self, String> {
        if !matches!(workload(name, rows, p)?, AnyWorkload::Stream(_)) {
            return Err(format!("{name} makes rows of one table, not a stream"));
        }
        let identity = super::identity::stream(name, rows, p);
        let p = p.clone();
        let make: StreamFactory = Arc::new(move || match workload(name, rows, &p) {
            Ok(AnyWorkload::Stream(s)) => s,
            _ => unreachable!("{name} made a stream with these parameters when the input was made"),
        });
        Ok(GeneratedInput::new(format!("generated {name}"), identity, make))
    }
}

impl PartialEq for GeneratedInput {
    fn eq(&self, other: &Self) -> bool {
        self.identity == other.identity
    }
}

impl Eq for GeneratedInput {}

impl std::fmt::Debug for GeneratedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeneratedInput").field("name", &self.name).field("identity", &self.identity).finish()
    }
}

/// A [`StreamWorkload`] read like a file.
struct StreamReader {
    stream: Box<dyn StreamWorkload>,
    buf: Vec<u8>,
    at: usize,
}

impl Read for StreamReader {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
            if !self.stream.fill(&mut self.buf) {
                return Ok(0);
            }
        }
        let n = out.len().min(self.buf.len() - self.at);
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
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
            InputSpec::Generated(g) => g.name.clone(),
        }
    }

    /// The default reject file: `<input file name>.rejects` in the current
    /// directory, `stdin.rejects`, or `<workload>.rejects` for a generated input.
    pub fn default_reject_file(&self) -> PathBuf {
        match self {
            InputSpec::File(p) => PathBuf::from(format!("{}.rejects", p.file_name().map(|n| n.to_string_lossy()).unwrap_or_default())),
            InputSpec::Stdin => PathBuf::from("stdin.rejects"),
            InputSpec::Generated(g) => PathBuf::from(format!("{}.rejects", g.name.rsplit(' ').next().unwrap_or("generated"))),
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
pub struct ByteInput {
    pub spec: InputSpec,
    /// Path, size and modification time (files); "stdin" otherwise.
    pub identity: String,
    /// Size on disk, when known.
    pub total_bytes: Option<u64>,
    pub compression: Compression,
    /// Bytes read from the file or stdin so far (before decompression).
    pub read_bytes: Arc<AtomicU64>,
    /// Uncompressed, the `File` (or stdin) itself after the bytes peeked at,
    /// and `read_bytes` is counted by [`ByteInput::read`] and
    /// [`ByteInput::read_append`]: a `File` fills a buffer's spare room without
    /// zeroing it first, which a counting reader in between would make the
    /// standard library do for every chunk (2% of the CSV loader's CPU).
    /// Compressed, a decoder over a reader that counts what it reads.
    reader: Box<dyn Read + Send>,
}

impl ByteInput {
    /// Reads into `out`, as [`Read::read`].
    pub fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.reader.read(out)?;
        self.count(n);
        Ok(n)
    }

    /// Appends up to `asked` bytes to `buf`, into its spare room, stopping
    /// early only at the end of the input; the number appended.
    pub fn read_append(&mut self, buf: &mut Vec<u8>, asked: usize) -> io::Result<usize> {
        let before = buf.len();
        // What was appended before an error is counted too (it stays in `buf`).
        let read = (&mut self.reader).take(asked as u64).read_to_end(buf);
        self.count(buf.len() - before);
        read
    }

    fn count(&self, n: usize) {
        if self.compression == Compression::None {
            self.read_bytes.fetch_add(n as u64, Ordering::Relaxed);
        }
    }
}

impl std::fmt::Debug for ByteInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByteInput")
            .field("spec", &self.spec)
            .field("identity", &self.identity)
            .field("compression", &self.compression)
            .finish()
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
pub fn open(spec: &InputSpec, max_window: usize) -> Result<ByteInput, LoadError> {
    open_with(spec, max_window, None)
}

/// [`open`], and for an uncompressed stdin: when no byte arrives for
/// `idle_after`, a read fails with [`io::ErrorKind::WouldBlock`] so the
/// caller can send what it has instead of waiting for a full chunk (a live
/// stream's rows reach the table while the stream waits).
pub fn open_with(spec: &InputSpec, max_window: usize, idle_after: Option<std::time::Duration>) -> Result<ByteInput, LoadError> {
    let read_bytes = Arc::new(AtomicU64::new(0));
    // Armed below, once the input is known not to be compressed: a
    // decompressor must never see a read fail half-way.
    let idle = Arc::new(IdleSignal { after: idle_after, armed: std::sync::atomic::AtomicBool::new(false) });
    let (raw, identity, total_bytes): (Box<dyn Read + Send>, String, Option<u64>) = match spec {
        InputSpec::Stdin => {
            let pump = StdinPump::start(idle.clone())
                .map_err(|e| LoadError::Input { input: "stdin".into(), message: format!("cannot start a thread to read it: {e}") })?;
            (Box::new(pump), "stdin".into(), None)
        }
        InputSpec::Generated(g) => {
            let reader = StreamReader { stream: (g.make)(), buf: Vec::new(), at: 0 };
            (Box::new(reader), format!("generated:{}", g.identity), None)
        }
        InputSpec::File(p) => {
            let file = File::open(p).map_err(|e| LoadError::Input { input: p.display().to_string(), message: e.to_string() })?;
            let meta = file.metadata().map_err(|e| LoadError::Input { input: p.display().to_string(), message: e.to_string() })?;
            let mtime = meta.modified().ok().and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok()).map_or(0, |d| d.as_nanos());
            let canonical = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            (Box::new(file), super::identity::file(&canonical, meta.len(), mtime), Some(meta.len()))
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
        Compression::None => {
            idle.armed.store(true, Ordering::Relaxed);
            // The reader reads a chunk at a time into its own buffer: past
            // the bytes peeked at, a buffer between would only copy them.
            let peeked = io::Cursor::new(buffered.buffer().to_vec());
            // From here on the bytes are counted as they are read (the peeked ones again).
            let Counting { inner, count } = buffered.into_inner();
            count.store(0, Ordering::Relaxed);
            Box::new(peeked.chain(inner))
        }
        Compression::Gzip => Box::new(flate2::bufread::MultiGzDecoder::new(buffered)),
        Compression::Zstd => {
            if let Some(window) = zstd_window_size(&magic).filter(|w| *w > max_window as u64) {
                return Err(LoadError::Input {
                    input: spec.display_name(),
                    message: format!(
                        "it needs a {} MiB zstd window, more than the memory budget allows ({} MiB): recompress it with a smaller window (zstd without --long) or raise {}",
                        window >> 20,
                        max_window >> 20,
                        crate::setting::Setting::MemoryBudget
                    ),
                });
            }
            // Later frames are bounded by the decoder itself.
            let mut d = zstd::stream::read::Decoder::with_buffer(buffered)
                .map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
            let log = usize::BITS - 1 - max_window.max(1 << 10).leading_zeros();
            d.window_log_max(log).map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
            Box::new(d)
        }
    };
    Ok(ByteInput { spec: spec.clone(), identity, total_bytes, compression, read_bytes, reader })
}

/// When a read of stdin may give up waiting.
struct IdleSignal {
    after: Option<std::time::Duration>,
    armed: std::sync::atomic::AtomicBool,
}

/// Stdin read on a thread of its own, so that a read can stop waiting
/// (see [`open_with`]); pieces are handed over through a small queue.
struct StdinPump {
    rx: flume::Receiver<io::Result<Vec<u8>>>,
    piece: Vec<u8>,
    at: usize,
    idle: Arc<IdleSignal>,
}

impl StdinPump {
    fn start(idle: Arc<IdleSignal>) -> io::Result<StdinPump> {
        let (tx, rx) = flume::bounded(4);
        std::thread::Builder::new().name("chute-stdin".into()).spawn(move || {
            let mut stdin = io::stdin().lock();
            loop {
                let mut piece = vec![0u8; 256 << 10];
                match stdin.read(&mut piece) {
                    Ok(0) => return,
                    Ok(n) => {
                        piece.truncate(n);
                        if tx.send(Ok(piece)).is_err() {
                            return;
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                }
            }
        })?;
        Ok(StdinPump { rx, piece: Vec::new(), at: 0, idle })
    }
}

impl Read for StdinPump {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.at == self.piece.len() {
            let next = match self.idle.after.filter(|_| self.idle.armed.load(Ordering::Relaxed)) {
                Some(after) => match self.rx.recv_timeout(after) {
                    Ok(p) => Some(p),
                    Err(flume::RecvTimeoutError::Timeout) => return Err(io::ErrorKind::WouldBlock.into()),
                    Err(flume::RecvTimeoutError::Disconnected) => None,
                },
                None => self.rx.recv().ok(),
            };
            match next {
                None => return Ok(0),
                Some(p) => {
                    self.piece = p?;
                    self.at = 0;
                }
            }
        }
        let n = out.len().min(self.piece.len() - self.at);
        out[..n].copy_from_slice(&self.piece[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// Whether `path` is a file whose bytes are its records as they are (not
/// gzip or zstd), so a record can be read back from its offset.
pub fn is_plain_file(path: &std::path::Path) -> bool {
    // Only a regular file: reading a pipe's first bytes would take them away.
    if !std::fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let mut magic = [0u8; 4];
    match File::open(path).and_then(|mut f| f.read(&mut magic)) {
        Ok(n) => !(magic[..n].starts_with(&[0x1f, 0x8b]) || magic[..n] == [0x28, 0xb5, 0x2f, 0xfd]),
        Err(_) => false,
    }
}

/// The first bytes of the input: enough for a magic number and a zstd frame header.
fn peek<R: io::BufRead>(r: &mut R) -> io::Result<Vec<u8>> {
    Ok(r.fill_buf()?.iter().take(18).copied().collect())
}

/// The window a zstd frame needs to be decoded, read from its header
/// (RFC 8878, 3.1.1.1); `None` when `h` is too short to tell.
fn zstd_window_size(h: &[u8]) -> Option<u64> {
    let descriptor = *h.get(4)?;
    if descriptor & 0x20 == 0 {
        // Window_Descriptor: exponent and mantissa.
        let wd = *h.get(5)?;
        let base = 1u64 << (10 + u64::from(wd >> 3));
        return Some(base + base / 8 * u64::from(wd & 7));
    }
    // Single segment: the window is the whole content.
    let dict_len = [0, 1, 2, 4][usize::from(descriptor & 3)];
    let size_len = [1, 2, 4, 8][usize::from(descriptor >> 6)];
    let at = 5 + dict_len;
    let bytes = h.get(at..at + size_len)?;
    let size = bytes.iter().enumerate().fold(0u64, |v, (i, b)| v | u64::from(*b) << (8 * i));
    Some(if size_len == 2 { size + 256 } else { size })
}

#[cfg(test)]
mod tests {
    use super::zstd_window_size;

    #[test]
    fn zstd_window_from_the_frame_header() {
        // Window_Descriptor 0x58: exponent 11, mantissa 0 -> 2^21.
        assert_eq!(zstd_window_size(&[0x28, 0xb5, 0x2f, 0xfd, 0x04, 0x58]), Some(1 << 21));
        // Mantissa 3 adds 3/8.
        assert_eq!(zstd_window_size(&[0x28, 0xb5, 0x2f, 0xfd, 0x00, 0x5b]), Some((1 << 21) + 3 * (1 << 18)));
        // Single segment, 1-byte content size 100; 2-byte sizes add 256.
        assert_eq!(zstd_window_size(&[0x28, 0xb5, 0x2f, 0xfd, 0x20, 100]), Some(100));
        assert_eq!(zstd_window_size(&[0x28, 0xb5, 0x2f, 0xfd, 0x60, 0x00, 0x01]), Some(512));
        assert_eq!(zstd_window_size(&[0x28, 0xb5, 0x2f, 0xfd]), None);
        // A streamed frame of the zstd library: 2 MiB, as `zstd -lv` reports for it.
        let frame = zstd::encode_all(&b"hello"[..], 3).unwrap();
        assert_eq!(zstd_window_size(&frame), Some(2 << 20));
    }
}
