//! Generated rows as a load's input (`chute load --gen`, the demo, the bench):
//! no file, no parsing; each row is encoded straight into binary COPY.
//! Chunks are ranges of sequence numbers, so a row's identity for resume is
//! its sequence number.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chute_core::generate::Workload;

use super::ack::{AckId, AckRef, Completion};
use super::format::Prepared;
use super::input::Source;
use super::model::{Chunk, ChunkOut, ChunkProcessor, Filed, RowPos};
use super::routing::Routing;
use super::target;
use super::{LoadError, LoadProgress, LoadSpec};

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
            let chunk =
                Chunk { input: 0, data: Vec::new(), first_line: at + 1, base_offset: at, seq: Some((at, to)), oversized: None, ack };
            if tx.send(chunk).is_err() {
                break;
            }
            at = to;
        }
        Ok(())
    }
}

pub(crate) async fn prepare(
    spec: &LoadSpec,
    workload: Arc<dyn Workload>,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let info = target::resolve_load_table(control, spec, Some(workload.as_ref())).await?;
    let columns = target::table_columns(control, info.oid).await?;
    let wanted = workload.columns();
    let names: Vec<String> = wanted.iter().map(|(n, _)| n.clone()).collect();
    let plan = target::plan_columns(&info.name, &columns, Some(&names))?;
    for ((name, ty), t) in wanted.iter().zip(&plan.targets) {
        if t.type_oid != ty.oid() {
            return Err(LoadError::Setup(format!(
                "column {name:?} of {} is {}, but the workload makes {}: create the table with the workload's types",
                info.name,
                columns.iter().find(|c| &c.name == name).map(|c| c.type_name.as_str()).unwrap_or("?"),
                ty.name()
            )));
        }
    }
    let (routing, via_parent_reason) = super::routing::build(spec, control, &info, &plan, progress).await?;
    let routing = Arc::new(routing);
    Ok(Prepared {
        tables: vec![routing.clone()],
        processor: Arc::new(GenProcessor { workload, routing }),
        boundary: None,
        skip: None,
        tags: None,
        via_parent_reason,
        summary_table: info.name.to_string(),
        by_ref: false,
    })
}

struct GenProcessor {
    workload: Arc<dyn Workload>,
    routing: Arc<Routing>,
}

impl ChunkProcessor for GenProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let (from, to) = chunk.seq.unwrap_or((0, 0));
        let range = (0, from, to);
        let mut filed = Filed::default();
        let mut row = Vec::with_capacity(256);
        let mut rc = self.routing.ctx();
        for seq in from..to {
            row.clear();
            self.workload.encode_row(seq, &mut row);
            // No raw record is kept: a reject file regenerates row `line - 1`.
            let routed = self.routing.route(&mut rc, &row);
            filed.file(&self.routing, routed, 0, &row, &[], RowPos { input: 0, line: seq + 1, offset: seq, range });
        }
        filed.finish(range)
    }
}
