//! Generated rows as a load's input (`chute load --gen`, the demo, the bench):
//! no file, no parsing; each row is encoded straight into binary COPY.
//! Chunks are ranges of sequence numbers, so a row's identity for resume is
//! its sequence number.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use chute_core::generate::Workload;

use super::pipeline::{Chunk, ChunkOut, ChunkProcessor, LeafRef, Prepared, RouteMode, Routed, Routing, Segment, Target, finish_chunk};
use super::target;
use super::{LoadError, LoadProgress, LoadSpec};

/// Rows per chunk of generated input.
const ROWS_PER_CHUNK: u64 = 16_384;

pub(crate) fn emit_ranges(rows: u64, tx: &flume::Sender<Chunk>, cancel: &AtomicBool) {
    let mut at = 0;
    while at < rows && !cancel.load(Ordering::Relaxed) {
        let to = (at + ROWS_PER_CHUNK).min(rows);
        if tx.send(Chunk { input: 0, data: Vec::new(), first_line: at + 1, base_offset: at, seq: Some((at, to)) }).is_err() {
            return;
        }
        at = to;
    }
}

pub(crate) async fn prepare(
    spec: &LoadSpec,
    workload: Arc<dyn Workload>,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let info = target::resolve(control, &spec.table).await?;
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
    let mut via_parent_reason = None;
    let mode = if spec.via_parent {
        via_parent_reason = Some("--via-parent was given".to_owned());
        RouteMode::Parent
    } else if let Some(reason) = target::parent_only_reason(&info) {
        progress.notice(&format!("loading through the parent: {reason}"));
        via_parent_reason = Some(reason);
        RouteMode::Parent
    } else if info.relkind == 'r' {
        RouteMode::Single
    } else {
        let reason = format!("client-side routing into the partitions of {} is not available yet", info.name);
        progress.notice(&format!("loading through the parent: {reason}"));
        via_parent_reason = Some(reason);
        RouteMode::Parent
    };
    let routing = Arc::new(Routing { leaves: vec![info.name.clone()], parent: info.name.clone(), mode, copy_list: plan.copy_list });
    Ok(Prepared {
        tables: vec![routing.clone()],
        processor: Arc::new(GenProcessor { workload, routing }),
        boundary: None,
        skip: None,
        tags: None,
        via_parent_reason,
        summary_table: info.name.to_string(),
    })
}

struct GenProcessor {
    workload: Arc<dyn Workload>,
    routing: Arc<Routing>,
}

impl ChunkProcessor for GenProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let mut segments: HashMap<Target, Segment> = HashMap::new();
        let (from, to) = chunk.seq.unwrap_or((0, 0));
        let mut row = Vec::with_capacity(256);
        for seq in from..to {
            row.clear();
            self.workload.encode_row(seq, &mut row);
            // No raw record is kept: a reject file regenerates row `line - 1`.
            let Routed::To(leaf) = self.routing.route(&row);
            segments.entry(Target { table: 0, leaf, text: false }).or_default().push(&row, &[], seq + 1);
        }
        let _ = LeafRef::Parent;
        finish_chunk(segments, Vec::new(), 0)
    }
}
