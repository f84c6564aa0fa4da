//! Kinds: the format-specific part of a load. A kind turns a chunk of input
//! into rows for targets (parse, encode, route) on the parse threads; it is
//! made once per load, before any row moves, by the load's input
//! (`Input::prepare`). Delimited text (CSV, text, JSON lines), tsbs files,
//! rows a service parsed itself (`values`), line protocol (`lineproto`),
//! rows a workload makes (`generated`), Prometheus samples (`samples`) and
//! Arrow record batches (`columnar`: Parquet, Arrow IPC, data frames) are
//! the kinds today; a new format is a new kind its input prepares, and
//! touches neither the coordinator nor the sinks.

use std::sync::Arc;

use chute_core::parse::Format;
use chute_core::value::EncodeContext;

use super::model::{Chunk, ChunkOut};
use super::routing::Routing;
use super::target::{self, ColumnPlan};
use super::{LoadError, LoadProgress, LoadSpec};
use crate::catalog::TableInfo;

pub mod delimited;
pub(crate) mod generated;
pub(crate) mod tsbs;
pub mod values;

/// Turns a chunk of input into rows for targets.
///
/// Contract. `process` is called from several parse threads at once, on
/// chunks in any order, and never blocks on I/O: a row that needs the
/// database before it can be routed (a tsbs tag set without an id, a key
/// only the server can parse) goes to the coordinator in the result
/// (`pending_tags`, `server_keys`). Every row of the chunk is filed exactly
/// once: into the segment of its target, among the rows waiting for their
/// partition, among the rejects (with its line and the reason), or counted
/// as skipped (an earlier run of the load committed it). That is what lets
/// the chunk's acknowledgement be shared out to the holders of its rows
/// (`ChunkOut::attach`): a row filed nowhere would let the acknowledgement
/// fire before that row is committed. The result's `budget` counts every
/// byte it holds (`Filed::finish` computes it): the parse thread takes that
/// much of the load's memory budget before handing the result on, and each
/// holder gives its share back when its rows are done. A record the kind
/// cannot read is a reject with its reason, never an error: nothing in a
/// chunk fails the load.
pub trait Kind: Send + Sync {
    fn process(&self, chunk: &Chunk) -> ChunkOut;
}

/// Finds a header to skip at the start of an input: `Some((bytes, lines))`,
/// or `None` when more bytes are needed.
pub type SkipHeader = fn(&[u8]) -> Result<Option<(usize, u64)>, String>;

/// Everything kind-specific a load needs, made before any row moves by its
/// input (`Input::prepare`).
pub struct Prepared {
    pub(crate) tables: Vec<Arc<Routing>>,
    pub(crate) kind: Arc<dyn Kind>,
    /// Cuts read input into chunks (the format's boundary finder); none
    /// where chunks come whole (generated rows, a service's requests).
    pub(crate) boundary: Option<Arc<dyn Format>>,
    /// Bytes and lines to skip at the start of every input (a tsbs header).
    pub(crate) skip: Option<SkipHeader>,
    pub(crate) tags: Option<tsbs::tags::TagResolver>,
    pub(crate) via_parent_reason: Option<String>,
    pub(crate) summary_table: String,
    /// Rows keep their records by position, not as copies (see `Filed::by_ref`).
    pub(crate) by_ref: bool,
    /// Columnar input: the data's columns the load reads, by name (the
    /// source decodes no others); empty for the other kinds.
    pub(crate) read_columns: Vec<String>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared").field("tables", &self.summary_table).finish_non_exhaustive()
    }
}

impl Prepared {
    /// With `columns`, the data's columns the load reads by name (a columnar
    /// source decodes no others).
    pub fn with_read_columns(self, columns: Vec<String>) -> Prepared {
        Prepared { read_columns: columns, ..self }
    }

    /// The data's columns the load reads by name (empty: not a columnar load).
    pub fn read_columns(&self) -> &[String] {
        &self.read_columns
    }

    /// One table's load whose chunks come whole (no boundary to find, no
    /// header, no tags), kept by copy: what most kinds need; a kind sets
    /// the rest with struct update syntax.
    pub fn one_table(routing: Arc<Routing>, via_parent_reason: Option<String>, info: &TableInfo, kind: Arc<dyn Kind>) -> Prepared {
        Prepared {
            tables: vec![routing],
            kind,
            boundary: None,
            skip: None,
            tags: None,
            via_parent_reason,
            summary_table: info.name.to_string(),
            by_ref: false,
            read_columns: Vec::new(),
        }
    }
}

/// The one table of a load into one table, with its columns planned and
/// its routing built.
pub struct OneTable {
    pub info: TableInfo,
    /// Every column of the table.
    pub columns: Vec<target::TableColumn>,
    pub plan: ColumnPlan,
    pub routing: Arc<Routing>,
    pub via_parent_reason: Option<String>,
    pub ctx: EncodeContext,
}

impl std::fmt::Debug for OneTable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OneTable").finish_non_exhaustive()
    }
}

/// Resolves the load's table (made from `workload` when it is missing and
/// the load makes it), plans its `columns` (all, in table order, when
/// `None`) and builds its routing.
pub async fn one_table(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
    workload: Option<&dyn chute_core::generate::Workload>,
    columns: Option<&[String]>,
) -> Result<OneTable, LoadError> {
    let info = target::resolve_load_table(control, spec, workload).await?;
    plan_table(spec, control, progress, info, columns).await
}

/// Plans the `columns` (all, in table order, when `None`) of a load's table
/// and builds its routing.
pub async fn plan_table(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
    info: TableInfo,
    columns: Option<&[String]>,
) -> Result<OneTable, LoadError> {
    let all = target::table_columns(control, info.oid).await?;
    let plan = target::plan_columns(&info.name, &all, columns)?;
    let ctx = EncodeContext { session_tz: session_zone(control).await, epoch: spec.epoch };
    let (routing, via_parent_reason) = super::routing::build(spec, control, &info, &plan, progress).await?;
    Ok(OneTable { info, columns: all, plan, routing: Arc::new(routing), via_parent_reason, ctx })
}

/// The session TimeZone, which text COPY uses for timestamps without an offset.
pub(crate) async fn session_zone(client: &tokio_postgres::Client) -> Option<jiff::tz::TimeZone> {
    let name: String = client.query_one("SHOW TimeZone", &[]).await.ok()?.get(0);
    chute_core::partman::interval::zone(&name).ok()
}
