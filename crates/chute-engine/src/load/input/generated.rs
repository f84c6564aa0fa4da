//! Rows a workload makes (`chute load --gen`, the demo, the bench): no
//! bytes, no parsing; a row's identity is its sequence number.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use chute_core::generate::Workload;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::super::kind::{self, Prepared};
use super::super::rejects::RejectOrigin;
use super::super::source::generated::GenSource;
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Delivery, Identity, Input, Opened};

/// `rows` rows of `workload`, into the load's table (made from the
/// workload's columns when it is missing).
#[derive(Clone)]
pub struct Generated {
    workload: Arc<dyn Workload>,
    rows: u64,
}

impl Generated {
    pub fn new(workload: Arc<dyn Workload>, rows: u64) -> Generated {
        Generated { workload, rows }
    }
}

impl std::fmt::Debug for Generated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Generated").field("workload", &self.workload.identity()).field("rows", &self.rows).finish()
    }
}

impl Input for Generated {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>> {
        kind::generated::prepare(spec, self.workload.clone(), control, progress).boxed()
    }

    fn open(&self, spec: &LoadSpec, _: &Prepared) -> Result<Opened, LoadError> {
        let mut o = Opened::new(Box::new(GenSource { rows: self.rows }), Delivery::Rerun, Arc::new(AtomicU64::new(0)));
        o.identity = Some(Identity::Workload { table: spec.table.to_string(), workload: self.workload.clone(), rows: self.rows });
        o.rejects = RejectOrigin {
            default_path: Some("generated.rejects".into()),
            regenerate: Some(self.workload.clone()),
            ..RejectOrigin::nowhere(1)
        };
        o.numbered = true;
        Ok(o)
    }
}
