//! Files, stdin and streams made in process, read as bytes and cut into
//! chunks at record ends: delimited text ([`Files`]) and tsbs files
//! ([`TsbsFiles`], whose headers name their tables).

use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use futures_util::FutureExt;
use futures_util::future::BoxFuture;

use super::super::kind::delimited::TextFormat;
use super::super::kind::{self, Prepared};
use super::super::reading::{self, InputSpec};
use super::super::rejects::RejectOrigin;
use super::super::source::files::FileSource;
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Delivery, Identity, Input, Opened};

/// Delimited text (CSV, COPY text, JSON lines) read from files, stdin (at
/// most once) or streams made in process, into one table.
#[derive(Debug, Clone)]
pub struct Files {
    inputs: Vec<InputSpec>,
    format: TextFormat,
}

impl Files {
    /// `inputs` read in turn in `format`; stdin may be one of them, once.
    pub fn new(inputs: Vec<InputSpec>, format: TextFormat) -> Result<Files, LoadError> {
        check_inputs(&inputs)?;
        Ok(Files { inputs, format })
    }

    /// Every input is a plain file: a rejected row's record can be read back
    /// from it, so rows in flight need not carry a copy.
    fn by_ref(&self) -> bool {
        !self.inputs.is_empty() && self.inputs.iter().all(|i| matches!(i, InputSpec::File(p) if reading::is_plain_file(p)))
    }
}

fn check_inputs(inputs: &[InputSpec]) -> Result<(), LoadError> {
    if inputs.is_empty() {
        return Err(LoadError::Setup("no input to load: name a file, or - for stdin".into()));
    }
    if inputs.iter().filter(|i| **i == InputSpec::Stdin).count() > 1 {
        return Err(LoadError::Setup("stdin (-) can be read only once".into()));
    }
    Ok(())
}

impl Input for Files {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>> {
        kind::delimited::prepare(spec, self.format, (self.by_ref(), true), control, progress).boxed()
    }

    fn open(&self, spec: &LoadSpec, prepared: &Prepared) -> Result<Opened, LoadError> {
        open_files(&self.inputs, spec, prepared, spec.table.to_string())
    }

    fn is_live(&self) -> bool {
        self.inputs.contains(&InputSpec::Stdin)
    }
}

/// Time Series Benchmark Suite files (or streams made in process): the
/// tables come from their headers, which must be the same.
#[derive(Debug, Clone)]
pub struct TsbsFiles {
    inputs: Vec<InputSpec>,
}

impl TsbsFiles {
    pub fn new(inputs: Vec<InputSpec>) -> Result<TsbsFiles, LoadError> {
        check_inputs(&inputs)?;
        if inputs.contains(&InputSpec::Stdin) {
            return Err(LoadError::Setup("tsbs input is read from files (their headers name the tables), not stdin".into()));
        }
        Ok(TsbsFiles { inputs })
    }
}

impl Input for TsbsFiles {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>> {
        kind::tsbs::prepare(spec, &self.inputs, control, progress).boxed()
    }

    fn open(&self, spec: &LoadSpec, prepared: &Prepared) -> Result<Opened, LoadError> {
        // tsbs names its tables in a schema of the load's choosing: the schema-qualified tables tell the loads apart.
        open_files(&self.inputs, spec, prepared, prepared.summary_table.clone())
    }
}

/// Opens every input (so a missing file fails before anything is loaded)
/// into one source that reads them in turn; `table` names the load's
/// tables in its id.
fn open_files(inputs: &[InputSpec], spec: &LoadSpec, prepared: &Prepared, table: String) -> Result<Opened, LoadError> {
    let boundary = prepared.boundary.clone().ok_or_else(|| LoadError::Setup("this input's kind finds no record boundaries".into()))?;
    let mut opened = Vec::with_capacity(inputs.len());
    for i in inputs {
        let idle = if *i == InputSpec::Stdin { spec.flush_every } else { None };
        opened.push(reading::open_with(i, spec.memory_budget / 2, idle)?);
    }
    let total_bytes = opened.iter().map(|i| i.total_bytes).sum::<Option<u64>>();
    let identity = (!inputs.contains(&InputSpec::Stdin)).then(|| Identity::Inputs {
        table,
        ids: opened.iter().map(|i| i.identity.clone()).collect(),
        generated: inputs.iter().all(|i| matches!(i, InputSpec::Generated(_))),
    });
    let plain_files = inputs
        .iter()
        .map(|i| match i {
            InputSpec::File(p) if reading::is_plain_file(p) => Some(p.clone()),
            _ => None,
        })
        .collect();
    let bytes_read = Arc::new(AtomicU64::new(0));
    let source = FileSource {
        inputs: opened,
        format: boundary,
        skip: prepared.skip,
        chunk_bytes: spec.chunk_bytes,
        flush_every: spec.flush_every,
        max_record: super::super::oversized::max_record(spec.memory_budget),
        bytes_read: bytes_read.clone(),
    };
    let mut o = Opened::new(Box::new(source), Delivery::Rerun, bytes_read);
    o.names = inputs.iter().map(InputSpec::display_name).collect();
    o.identity = identity;
    o.total_bytes = total_bytes;
    o.rejects = RejectOrigin { default_path: inputs.first().map(InputSpec::default_reject_file), plain_files, ..RejectOrigin::nowhere(0) };
    Ok(o)
}
