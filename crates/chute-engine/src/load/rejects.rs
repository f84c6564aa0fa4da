//! The reject file: each rejected record as a `# input:line: reason` line
//! followed by the record exactly as it was in the input (read back from
//! the file for records kept by position). Shared by the coordinator and
//! the sink's workers behind a mutex; a resume appends without repeating.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use super::LoadError;
use super::model::Reject;

/// Copies `len` bytes at `offset` of a plain input file (a record kept by
/// position) to `out` in pieces, so a large record is never held whole.
/// Returns the last byte copied. `Err(Ok(e))`: the input failed; `Err(Err(e))`: `out` did.
fn copy_record(
    path: &std::path::Path,
    offset: u64,
    len: u32,
    out: &mut impl Write,
) -> Result<Option<u8>, Result<std::io::Error, std::io::Error>> {
    use std::io::Seek;
    let mut f = std::fs::File::open(path).map_err(Ok)?;
    f.seek(std::io::SeekFrom::Start(offset)).map_err(Ok)?;
    let mut f = f.take(u64::from(len));
    let mut piece = vec![0u8; (len as usize).min(64 << 10)];
    let (mut left, mut last) = (len as usize, None);
    while left > 0 {
        let n = f.read(&mut piece).map_err(Ok)?;
        if n == 0 {
            return Err(Ok(std::io::ErrorKind::UnexpectedEof.into()));
        }
        out.write_all(&piece[..n]).map_err(Err)?;
        last = Some(piece[n - 1]);
        left -= n;
    }
    Ok(last)
}

/// What the reject file needs to know of the input.
#[derive(Clone)]
pub struct RejectOrigin {
    /// The file when none is given.
    pub default_path: Option<PathBuf>,
    /// Plain input files, by input, to read records kept by position from.
    pub plain_files: Vec<Option<PathBuf>>,
    /// Generated rows keep no records: they are made again from their
    /// sequence number.
    pub regenerate: Option<Arc<dyn chute_core::generate::Workload>>,
    /// Rejects go here instead of the file (a Kafka dead-letter topic).
    pub dead_letter: Option<Arc<dyn DeadLetter>>,
}

impl std::fmt::Debug for RejectOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RejectOrigin").field("default_path", &self.default_path).finish_non_exhaustive()
    }
}

impl RejectOrigin {
    /// No default file, `inputs` inputs none of which is a plain file,
    /// nothing to regenerate, no dead letters: what an input sets, it sets
    /// with struct update syntax over this.
    pub fn nowhere(inputs: usize) -> RejectOrigin {
        RejectOrigin { default_path: None, plain_files: vec![None; inputs], regenerate: None, dead_letter: None }
    }
}

/// Somewhere other than a file that takes rejected records: each is sent,
/// then `flush` returns once all sent are safe (before their rows' ranges commit).
pub trait DeadLetter: Send + Sync {
    fn send(&self, input: &str, line: u64, raw: &[u8], reason: &str) -> Result<(), String>;
    fn flush(&self) -> Result<(), String>;
    /// How people read where it is (`dead-letter topic T`).
    fn name(&self) -> String;
}

/// Writes rejected records: a comment line with where and why, then the
/// record exactly as it was in the input.
pub(crate) struct RejectWriter {
    /// Generated input keeps no raw records: they are made again from their
    /// sequence number (the line number minus one).
    workload: Option<Arc<dyn chute_core::generate::Workload>>,
    path: Option<std::path::PathBuf>,
    names: Vec<String>,
    /// Plain input files, by input index, to read records kept by position from.
    files: Vec<Option<std::path::PathBuf>>,
    pending: Vec<Reject>,
    file: Option<std::io::BufWriter<std::fs::File>>,
    written: bool,
    /// (input, line) of the rejects an earlier run of this load wrote to the
    /// file, so a resume does not write them again; each is forgotten once
    /// met again, since a resume reads every row once. Within a run no row is
    /// rejected twice (a retried batch filters its own, see `copy`), so
    /// nothing else is remembered and memory stays flat however many rows
    /// are rejected.
    seen: HashSet<(usize, u64)>,
    /// Resuming: append to the file (after reading what it holds); otherwise
    /// start it afresh.
    append: bool,
    /// The SQLSTATE of the first reject that has one (the report's).
    first_sqlstate: Option<String>,
    /// Rejects go here instead of the file (see `RejectOrigin`).
    dead_letter: Option<Arc<dyn DeadLetter>>,
}

impl RejectWriter {
    pub(crate) fn new(path: Option<std::path::PathBuf>, inputs: &[String], origin: &RejectOrigin, resuming: bool) -> Self {
        let workload = origin.regenerate.clone();
        let path = path.or_else(|| origin.default_path.clone());
        let names: Vec<String> = if workload.is_some() { vec!["generated row".into()] } else { inputs.to_vec() };
        let mut seen = HashSet::new();
        if resuming && let Some(text) = path.as_ref().and_then(|p| std::fs::read_to_string(p).ok()) {
            for line in text.lines().filter_map(|l| l.strip_prefix("# ")) {
                for (i, n) in names.iter().enumerate() {
                    if let Some(rest) = line.strip_prefix(n.as_str()).and_then(|r| r.strip_prefix(':'))
                        && let Some(num) = rest.split(':').next().and_then(|d| d.parse::<u64>().ok())
                    {
                        seen.insert((i, num));
                    }
                }
            }
        }
        let files = origin.plain_files.clone();
        let dead_letter = origin.dead_letter.clone();
        RejectWriter {
            workload,
            path,
            names,
            files,
            pending: Vec::new(),
            file: None,
            written: false,
            seen,
            append: resuming,
            first_sqlstate: None,
            dead_letter,
        }
    }

    /// Queues a reject; `false` when the file already has it.
    /// The row's acknowledgement is told why now, and settled once the
    /// reject is on file (at once when the file has it already).
    pub(crate) fn add(&mut self, mut r: Reject) -> bool {
        if self.first_sqlstate.is_none() {
            self.first_sqlstate.clone_from(&r.sqlstate);
        }
        if let Some(a) = &r.ack {
            a.rejected(r.line, &r.reason);
        }
        if !self.seen.is_empty() && self.seen.remove(&(r.input, r.line)) {
            if let Some(a) = r.ack.take() {
                a.settle();
            }
            return false;
        }
        self.pending.push(r);
        true
    }

    pub(crate) fn flush_pending(&mut self) -> Result<(), LoadError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        if let Some(d) = self.dead_letter.clone() {
            let err = |message: String| LoadError::RejectFile { path: d.name(), message };
            let mut acks = Vec::new();
            for mut r in self.pending.drain(..) {
                acks.extend(r.ack.take());
                let name = self.names.get(r.input).map(String::as_str).unwrap_or("input");
                d.send(name, r.line, &r.raw, &r.reason).map_err(err)?;
            }
            d.flush().map_err(err)?;
            self.written = true;
            acks.into_iter().for_each(super::ack::AckRef::settle);
            return Ok(());
        }
        let Some(path) = self.path.clone() else {
            // No file to keep them: the reasons went to their acknowledgements.
            self.pending.drain(..).filter_map(|r| r.ack).for_each(super::ack::AckRef::settle);
            return Ok(());
        };
        let err = |e: std::io::Error| LoadError::RejectFile { path: path.display().to_string(), message: e.to_string() };
        if self.file.is_none() {
            let f =
                std::fs::OpenOptions::new().create(true).append(self.append).write(true).truncate(!self.append).open(&path).map_err(err)?;
            self.file = Some(std::io::BufWriter::new(f));
        }
        let f = self.file.as_mut().expect("opened above");
        let mut acks = Vec::new();
        for mut r in self.pending.drain(..) {
            acks.extend(r.ack.take());
            if r.raw.is_empty()
                && let Some(w) = &self.workload
            {
                w.write_csv(r.line.saturating_sub(1), &mut r.raw);
            }
            let name = self.names.get(r.input).map(String::as_str).unwrap_or("input");
            // A record kept by position in an input that cannot be read back (an oversized one from stdin).
            let lost = if r.raw.is_empty() && r.at.is_some() && !matches!(self.files.get(r.input), Some(Some(_))) {
                " (the record is not copied here: only an uncompressed file is read back)"
            } else {
                ""
            };
            writeln!(f, "# {name}:{}: {}{lost}", r.line, r.reason.replace('\n', " ")).map_err(err)?;
            let last = match (r.at, self.files.get(r.input)) {
                (Some((offset, len)), Some(Some(input))) if r.raw.is_empty() => {
                    copy_record(input, offset, len, f).map_err(|e| match e {
                        Ok(e) => LoadError::Input { input: input.display().to_string(), message: e.to_string() },
                        Err(e) => err(e),
                    })?
                }
                _ => {
                    f.write_all(&r.raw).map_err(err)?;
                    r.raw.last().copied()
                }
            };
            if last != Some(b'\n') {
                f.write_all(b"\n").map_err(err)?;
            }
        }
        f.flush().map_err(err)?;
        self.written = true;
        acks.into_iter().for_each(super::ack::AckRef::settle);
        Ok(())
    }

    /// The SQLSTATE of the first reject that had one.
    pub(crate) fn first_sqlstate(&self) -> Option<String> {
        self.first_sqlstate.clone()
    }

    pub(crate) fn path_if_written(&self) -> Option<String> {
        if let Some(d) = &self.dead_letter {
            return self.written.then(|| d.name());
        }
        self.written.then(|| self.path.as_ref().map(|p| p.display().to_string())).flatten()
    }
}
