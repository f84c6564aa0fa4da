//! The columnar input of a load: its files and streams (see `files`),
//! their kind (`kind`) and their source (`source`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use chute_engine::load::{Delivery, Identity, Input, LoadError, LoadProgress, LoadSpec, Opened, Prepared, RejectOrigin};

use crate::files::{ColumnarInput, open};

/// Parquet files, Arrow IPC files and streams, and record batch streams
/// made in process (a data frame), into one table: rows as record batches,
/// numbered in their input.
#[derive(Debug, Clone)]
pub struct Columnar {
    inputs: Vec<ColumnarInput>,
}

impl Columnar {
    pub fn new(inputs: Vec<ColumnarInput>) -> Result<Columnar, LoadError> {
        if inputs.is_empty() {
            return Err(LoadError::Setup("no input to load".into()));
        }
        Ok(Columnar { inputs })
    }

    pub fn inputs(&self) -> &[ColumnarInput] {
        &self.inputs
    }
}

impl Input for Columnar {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> futures_util::future::BoxFuture<'a, Result<Prepared, LoadError>> {
        use futures_util::FutureExt;
        crate::kind::prepare(spec, &self.inputs, control, progress).boxed()
    }

    fn open(&self, spec: &LoadSpec, prepared: &Prepared) -> Result<Opened, LoadError> {
        // Every input opened (a stream taken) before any row moves.
        let opened = self.inputs.iter().map(open).collect::<Result<Vec<_>, _>>()?;
        let names: Vec<String> = opened.iter().map(|o| o.name.clone()).collect();
        let table = spec.table().to_string();
        let identity = opened.iter().map(|o| o.identity.clone()).collect::<Option<Vec<String>>>().map(|ids| Identity::Inputs {
            table,
            ids,
            generated: false,
        });
        let total_bytes = opened.iter().map(|o| o.size).sum::<Option<u64>>();
        let default_path = names.first().map(|n| {
            let file = Path::new(n).file_name().map_or_else(|| n.clone(), |f| f.to_string_lossy().into_owned());
            PathBuf::from(format!("{file}.rejects"))
        });
        let bytes_read = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let source = crate::source::ColumnarSource {
            inputs: opened,
            columns: prepared.read_columns().to_vec(),
            decoders: spec.parse_threads(),
            bytes_read: bytes_read.clone(),
        };
        let mut o = Opened::new(Box::new(source), Delivery::Rerun, bytes_read);
        o.rejects = RejectOrigin { default_path, ..RejectOrigin::nowhere(self.inputs.len()) };
        o.names = names;
        o.identity = identity;
        o.total_bytes = total_bytes;
        Ok(o)
    }

    fn is_live(&self) -> bool {
        self.inputs.iter().any(|i| matches!(i, ColumnarInput::Stream(s) if s.live))
    }
}
