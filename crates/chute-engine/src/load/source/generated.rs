//! Rows a workload makes (`chute load --gen`, the demo, the bench): chunks
//! are ranges of sequence numbers, made into rows by the parse threads (see
//! `kind::generated`), so a row's identity for resume is its sequence number.

use std::sync::atomic::{AtomicBool, Ordering};

use super::super::LoadError;
use super::super::ack::{AckId, AckRef, Completion};
use super::super::model::{Chunk, Payload};
use super::Source;

/// Rows per chunk of generated input.
const ROWS_PER_CHUNK: u64 = 16_384;

/// Generated rows: chunks are ranges of sequence numbers, made by the parse threads.
pub(crate) struct GenSource {
    pub(crate) rows: u64,
}

impl Source for GenSource {
    fn read(self: Box<Self>, tx: &flume::Sender<Chunk>, cancel: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError> {
        let mut at = 0;
        while at < self.rows && !cancel.load(Ordering::Relaxed) {
            let to = (at + ROWS_PER_CHUNK).min(self.rows);
            let id = AckId { input: 0, start: at, end: to, first_line: at + 1, end_line: to + 1, tag: at / ROWS_PER_CHUNK };
            let ack = Some(AckRef::new(id, acks.clone()));
            let chunk = Chunk { input: 0, first_line: at + 1, base_offset: at, ack, payload: Payload::Numbered { from: at, to } };
            if tx.send(chunk).is_err() {
                break;
            }
            at = to;
        }
        Ok(())
    }
}
