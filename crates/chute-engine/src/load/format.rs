//! The format side of a load: which parser reads the input (csv, text,
//! JSON lines; tsbs and generated rows have their own modules) and the
//! `ChunkProcessor` that turns a chunk into rows for targets (parse, encode,
//! route) on the parse threads.

use std::sync::Arc;

use chute_core::parse::csv::{CsvOptions, CsvParser};
use chute_core::parse::jsonl::JsonlParser;
use chute_core::parse::text::{TextOptions, TextParser};
use chute_core::parse::{ChunkEnd, Fields, Format, RecordError, RecordPos};
use chute_core::rowenc::{RowEncoder, RowOutcome, write_text_row};
use chute_core::value::EncodeContext;

use super::model::{Chunk, ChunkOut, ChunkProcessor, Filed, Reject, RowPos};
use super::routing::Routing;
use super::source::{self, InputSpec};
use super::target::{self, ColumnPlan};
use super::{InputFormat, LoadError, LoadProgress, LoadSpec};

fn make_format(spec: &LoadSpec, plan: &ColumnPlan) -> Result<Box<dyn Format>, LoadError> {
    let setup = |e: chute_core::parse::OptionsError| LoadError::Setup(e.to_string());
    Ok(match spec.format {
        InputFormat::Csv => {
            let mut o = CsvOptions::default();
            if let Some(d) = spec.delimiter {
                o.delimiter = d;
            }
            if let Some(n) = &spec.null {
                o.null = n.as_bytes().to_vec();
            }
            o.header = spec.header;
            o.expected_fields = Some(plan.targets.len());
            Box::new(CsvParser::new(o).map_err(setup)?)
        }
        InputFormat::Text => {
            let mut o = TextOptions::default();
            if let Some(d) = spec.delimiter {
                o.delimiter = d;
            }
            if let Some(n) = &spec.null {
                o.null = n.as_bytes().to_vec();
            }
            o.header = spec.header;
            o.expected_fields = Some(plan.targets.len());
            Box::new(TextParser::new(o).map_err(setup)?)
        }
        InputFormat::Jsonl => Box::new(JsonlParser::new(plan.targets.iter().map(|t| t.name.clone()).collect()).map_err(setup)?),
        InputFormat::Tsbs | InputFormat::Values => return Err(LoadError::Setup(format!("{:?} input is prepared separately", spec.format))),
    })
}

/// The session TimeZone, which text COPY uses for timestamps without an offset.
pub(crate) async fn session_zone(client: &tokio_postgres::Client) -> Option<jiff::tz::TimeZone> {
    let name: String = client.query_one("SHOW TimeZone", &[]).await.ok()?.get(0);
    chute_core::partman::interval::zone(&name).ok()
}

/// Finds a header to skip at the start of an input: `Some((bytes, lines))`,
/// or `None` when more bytes are needed.
pub(crate) type SkipHeader = fn(&[u8]) -> Result<Option<(usize, u64)>, String>;

/// Everything format-specific a load needs, made before any row moves.
pub(crate) struct Prepared {
    pub tables: Vec<Arc<Routing>>,
    pub processor: Arc<dyn ChunkProcessor>,
    /// Cuts the input into chunks (the format's boundary finder); none for
    /// generated input.
    pub boundary: Option<Arc<dyn Format>>,
    /// Bytes and lines to skip at the start of every input (a tsbs header).
    pub skip: Option<SkipHeader>,
    pub tags: Option<super::tsbs::tags::TagResolver>,
    pub via_parent_reason: Option<String>,
    pub summary_table: String,
    /// Rows keep their records by position, not as copies (see `Filed::by_ref`).
    pub by_ref: bool,
}

/// Prepares a load of csv, text or jsonl into one table.
pub(crate) async fn prepare_single(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let info = target::resolve_load_table(control, spec, None).await?;
    let columns = target::table_columns(control, info.oid).await?;
    let plan = target::plan_columns(&info.name, &columns, spec.columns.as_deref())?;
    let ctx = EncodeContext { session_tz: session_zone(control).await, epoch: spec.epoch };
    let (routing, via_parent_reason) = super::routing::build(spec, control, &info, &plan, progress).await?;
    let routing = Arc::new(routing);
    if spec.format == InputFormat::Values {
        // Parsed already: no format cuts or parses the chunks.
        let processor =
            Arc::new(super::values::ValuesProcessor { encoder: RowEncoder::new(plan.targets.clone(), ctx), routing: routing.clone() });
        return Ok(Prepared {
            tables: vec![routing],
            processor,
            boundary: None,
            skip: None,
            tags: None,
            via_parent_reason,
            summary_table: info.name.to_string(),
            by_ref: false,
        });
    }
    let format: Arc<dyn Format> = Arc::from(make_format(spec, &plan)?);
    let by_ref = !spec.inputs.is_empty() && spec.inputs.iter().all(|i| matches!(i, InputSpec::File(p) if source::is_plain_file(p)));
    let processor = Arc::new(GenericProcessor {
        format: format.clone(),
        encoder: RowEncoder::new(plan.targets.clone(), ctx),
        routing: routing.clone(),
        by_ref,
    });
    Ok(Prepared {
        tables: vec![routing],
        processor,
        boundary: Some(format),
        skip: None,
        tags: None,
        via_parent_reason,
        summary_table: info.name.to_string(),
        by_ref,
    })
}

/// csv, text and jsonl into one table: parse, encode, route.
struct GenericProcessor {
    format: Arc<dyn Format>,
    encoder: RowEncoder,
    routing: Arc<Routing>,
    /// Every input is a plain file: a rejected row's record can be read back
    /// from it, so rows in flight need not carry a copy (half the memory per
    /// row, so twice the rows per batch under the same budget).
    by_ref: bool,
}

impl ChunkProcessor for GenericProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let (encoder, routing) = (&self.encoder, &self.routing);
        let range = (chunk.input as u32, chunk.base_offset, chunk.base_offset + chunk.data.len() as u64);
        let mut filed = Filed { by_ref: self.by_ref, ..Filed::default() };
        let mut row = Vec::with_capacity(512);
        let mut rc = routing.ctx();
        let mut parse_errors = Vec::new();
        let mut on_record = |fields: &Fields, pos: RecordPos| {
            let raw = pos.slice(&chunk.data, chunk.base_offset);
            let at = RowPos { input: chunk.input, line: pos.line, offset: pos.offset, range };
            row.clear();
            match encoder.encode(fields, &mut row) {
                RowOutcome::Binary => {
                    let routed = routing.route(&mut rc, &row);
                    filed.file(routing, routed, 0, &row, raw, at);
                }
                RowOutcome::NeedsServer { .. } => {
                    // The server parses this row; chute routes it on its key.
                    write_text_row(fields, &mut row);
                    super::text_route::file_text_row(encoder, routing, &rc, fields, &row, raw, at, &mut filed);
                }
                RowOutcome::Invalid { column, reason } => {
                    let reason = format!("column {}: {reason}", encoder.columns[column].name);
                    filed.rejects.push(Reject::new(chunk.input, pos.line, raw.to_vec(), reason))
                }
                RowOutcome::FieldCount { expected, found } => filed.rejects.push(Reject::new(
                    chunk.input,
                    pos.line,
                    raw.to_vec(),
                    format!("expected {expected} fields, found {found}"),
                )),
            }
        };
        let mut on_error = |e: RecordError| {
            let raw = e.pos.slice(&chunk.data, chunk.base_offset).to_vec();
            parse_errors.push(Reject::new(chunk.input, e.pos.line, raw, e.reason));
        };
        // The reader already cut the input at an end-of-data marker.
        let _: ChunkEnd = self.format.parse_chunk(&chunk.data, chunk.first_line, chunk.base_offset, &mut on_record, &mut on_error);
        filed.rejects.append(&mut parse_errors);
        filed.finish(range)
    }
}
