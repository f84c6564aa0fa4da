//! Records too large for the memory budget.
//!
//! A record is held whole at every stage of a load (the read buffer, its
//! parsed fields, its encoded row, its batch), so one record of 60 MB costs
//! several times that, whatever `--memory-mb` says. A record longer than a
//! quarter of the budget is therefore skipped by the reader as it streams
//! past, never held, and rejected with its line number and the `--memory-mb`
//! that would load it; the reject file gets its bytes straight from the
//! input file (see `RejectWriter`).

use chute_core::parse::{Format, count_lines};

use super::model::{ChunkOut, Oversized, Reject};

/// The longest record a load holds under a memory budget of `budget` bytes.
pub(crate) fn max_record(budget: usize) -> usize {
    (budget / 4).max(1 << 20)
}

impl Oversized {
    /// What the parse stage makes of it: one reject, no rows.
    pub(crate) fn reject(&self, input: usize) -> ChunkOut {
        const MIB: f64 = 1048576.0;
        let needed = (self.len * 4).div_ceil(1 << 20);
        let reason = format!(
            "the record is {:.1} MiB, more than the {:.0} MiB one record may take (a quarter of {budget}); \
             raise {budget} to at least {needed} MiB to load it",
            self.len as f64 / MIB,
            self.max as f64 / MIB,
            budget = crate::setting::Setting::MemoryBudget,
        );
        // Records past 4 GiB are not copied to the reject file.
        let at = u32::try_from(self.len).ok().map(|len| (self.offset, len));
        ChunkOut {
            rejects: vec![Reject { input, line: self.line, raw: Vec::new(), reason, at, ack: None, sqlstate: None }],
            range: (input as u32, self.offset, self.offset + self.len),
            ..ChunkOut::default()
        }
    }
}

/// The reader's state while it skips an oversized record: the read buffer
/// holds only a stand-in for what was dropped (see `Boundary::carry`), then
/// whatever was read since.
pub(crate) struct Skipping {
    record: Oversized,
    /// Bytes at the start of the buffer that stand in for dropped input.
    stand_in: usize,
}

impl Skipping {
    /// Starts skipping the record `buf` begins with, when the format can
    /// tell a stand-in for it; `line` and `offset` (the reader's position,
    /// at the start of `buf`) move past what is dropped.
    pub(crate) fn start(format: &dyn Format, buf: &mut Vec<u8>, line: &mut u64, offset: &mut u64, max: usize) -> Option<Skipping> {
        let stand_in = format.carry(buf)?;
        let mut s = Skipping { record: Oversized { line: *line, offset: *offset, len: 0, max }, stand_in: 0 };
        s.drop_read(buf, stand_in, line, offset);
        Some(s)
    }

    fn drop_read(&mut self, buf: &mut Vec<u8>, stand_in: Vec<u8>, line: &mut u64, offset: &mut u64) {
        let real = &buf[self.stand_in..];
        self.record.len += real.len() as u64;
        *line += count_lines(real);
        *offset += real.len() as u64;
        buf.clear();
        buf.extend_from_slice(&stand_in);
        self.stand_in = stand_in.len();
    }

    /// After more input was read into `buf`: the whole record once its end
    /// is there (the buffer then starts at the next record), else `None`
    /// with what was read dropped.
    pub(crate) fn advance(
        &mut self,
        format: &dyn Format,
        buf: &mut Vec<u8>,
        eof: bool,
        line: &mut u64,
        offset: &mut u64,
    ) -> Option<Oversized> {
        match format.first_record_end(buf).or(eof.then_some(buf.len())) {
            Some(end) => {
                let real = &buf[self.stand_in.min(end)..end];
                self.record.len += real.len() as u64;
                *line += count_lines(real);
                *offset += real.len() as u64;
                buf.drain(..end);
                Some(Oversized { ..self.record })
            }
            None => {
                if let Some(stand_in) = format.carry(buf) {
                    self.drop_read(buf, stand_in, line, offset);
                }
                None
            }
        }
    }
}
