//! The kind of generated rows (`chute load --gen`, the demo, the bench): no
//! file, no parsing; each row of a chunk's sequence numbers (see
//! `source::generated`) is encoded straight into binary COPY.

use std::sync::Arc;

use chute_core::generate::Workload;

use super::super::model::{Chunk, ChunkOut, Filed, Payload, RowPos};
use super::super::routing::Routing;
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Kind, Prepared};

pub(crate) async fn prepare(
    spec: &LoadSpec,
    workload: Arc<dyn Workload>,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let wanted = workload.columns();
    let names: Vec<String> = wanted.iter().map(|(n, _)| n.clone()).collect();
    let t = super::one_table(spec, control, progress, Some(workload.as_ref()), Some(&names)).await?;
    for ((name, ty), c) in wanted.iter().zip(&t.plan.targets) {
        if c.type_oid != ty.oid() {
            return Err(LoadError::Setup(format!(
                "column {name:?} of {} is {}, but the workload makes {}: create the table with the workload's types",
                t.info.name,
                t.columns.iter().find(|c| &c.name == name).map(|c| c.type_name.as_str()).unwrap_or("?"),
                ty.name()
            )));
        }
    }
    let kind = Arc::new(GenProcessor { workload, routing: t.routing.clone() });
    Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind))
}

struct GenProcessor {
    workload: Arc<dyn Workload>,
    routing: Arc<Routing>,
}

impl Kind for GenProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let Payload::Numbered { from, to } = chunk.payload else { return ChunkOut::default() };
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
