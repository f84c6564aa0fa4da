//! The kind of delimited text into one table: CSV, text (PostgreSQL's COPY
//! text format) and JSON lines, parsed, encoded and routed on the parse
//! threads.

use std::sync::Arc;

use chute_core::parse::csv::{CsvOptions, CsvParser};
use chute_core::parse::jsonl::{JsonlParser, UnknownKeys};
use chute_core::parse::text::{TextOptions, TextParser};
use chute_core::parse::{ChunkEnd, Fields, Format, RecordError, RecordPos};
use chute_core::rowenc::{Memo, RowEncoder, RowOutcome, write_text_row};

use super::super::model::{Chunk, ChunkOut, Filed, Payload, Reject, RowPos};
use super::super::routing::Routing;
use super::super::target::{ColumnPlan, TableColumn};
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Kind, Prepared};
use crate::setting::Setting;

/// The delimited text formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TextFormat {
    Csv,
    /// PostgreSQL's COPY text format.
    Text,
    /// JSON lines: an object a line, its keys naming columns.
    Jsonl,
}

/// The parser of `format` for the planned columns; `ignorable`: the user
/// can choose to drop JSON keys the table lacks (the hint says how).
fn make_format(
    spec: &LoadSpec,
    format: TextFormat,
    plan: &ColumnPlan,
    table: &[TableColumn],
    ignorable: bool,
) -> Result<Box<dyn Format>, LoadError> {
    let setup = |e: chute_core::parse::OptionsError| LoadError::Setup(e.to_string());
    Ok(match format {
        TextFormat::Csv => {
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
        TextFormat::Text => {
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
        TextFormat::Jsonl => {
            // A key the table has no column for is refused, unless the load ignores such keys.
            let other_columns = table.iter().filter(|c| !plan.targets.iter().any(|t| t.name == c.name)).map(|c| c.name.clone()).collect();
            let hint =
                if ignorable { format!("add it, or load with {} to drop such keys", Setting::IgnoreUnknown) } else { "add it".to_owned() };
            let unknown = UnknownKeys { ignore: spec.ignore_unknown, other_columns, hint };
            Box::new(JsonlParser::new(plan.targets.iter().map(|t| t.name.clone()).collect()).map_err(setup)?.unknown_keys(unknown))
        }
    })
}

/// Prepares a load of delimited text into one table; `by_ref`: rows keep
/// their records by position (every input is a plain file, see
/// `Filed::by_ref`); `ignorable`: the load's user can choose to drop JSON
/// keys the table lacks (`ignore_unknown`: a service's clients cannot).
pub async fn prepare(
    spec: &LoadSpec,
    format: TextFormat,
    (by_ref, ignorable): (bool, bool),
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let t = super::one_table(spec, control, progress, None, spec.columns.as_deref()).await?;
    let parser: Arc<dyn Format> = Arc::from(make_format(spec, format, &t.plan, &t.columns, ignorable)?);
    let kind = Arc::new(Delimited {
        format: parser.clone(),
        encoder: RowEncoder::new(t.plan.targets.clone(), t.ctx),
        routing: t.routing.clone(),
        by_ref,
    });
    Ok(Prepared { boundary: Some(parser), by_ref, ..Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind) })
}

/// csv, text and jsonl into one table: parse, encode, route.
struct Delimited {
    format: Arc<dyn Format>,
    encoder: RowEncoder,
    routing: Arc<Routing>,
    /// Every input is a plain file: a rejected row's record can be read back
    /// from it, so rows in flight need not carry a copy (half the memory per
    /// row, so twice the rows per batch under the same budget).
    by_ref: bool,
}

impl Kind for Delimited {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let (encoder, routing) = (&self.encoder, &self.routing);
        let range = chunk.journal_range();
        // A record's line and journal position: its message's offset, for messages.
        let place = |line: u64, offset: u64| chunk.place(line, offset);
        // Most of a chunk's rows go to one target: its segment gets room for them at once.
        let mut filed = Filed::default();
        (filed.by_ref, filed.reserve) = (self.by_ref, chunk.data().len());
        let mut row = Vec::new();
        let mut memo = Memo::default();
        let mut rc = routing.ctx();
        let mut parse_errors = Vec::new();
        let mut on_record = |fields: &Fields, pos: RecordPos| {
            let raw = pos.slice(chunk.data(), chunk.base_offset);
            let (line, offset) = place(pos.line, pos.offset);
            let at = RowPos { input: chunk.input, line, offset, range };
            // Encoded where the last row went: filed there without a copy when it goes there too.
            let staging = filed.staging();
            let start = staging.len();
            match encoder.encode_memo(fields, staging, &mut memo) {
                RowOutcome::Binary => {
                    let routed = routing.route(&mut rc, &staging[start..]);
                    filed.file_staged(routing, routed, 0, raw, at);
                }
                RowOutcome::NeedsServer { .. } => {
                    // The server parses this row; chute routes it on its key.
                    row.clear();
                    write_text_row(fields, &mut row);
                    super::super::text_route::file_text_row(encoder, (0, routing), &rc, fields, &row, raw, at, &mut filed);
                }
                RowOutcome::Invalid { column, reason } => {
                    let reason = format!("column {}: {reason}", encoder.columns[column].name);
                    filed.rejects.push(Reject::new(chunk.input, line, raw.to_vec(), reason))
                }
                RowOutcome::FieldCount { expected, found } => {
                    filed.rejects.push(Reject::new(chunk.input, line, raw.to_vec(), format!("expected {expected} fields, found {found}")))
                }
            }
        };
        let mut on_error = |e: RecordError| {
            let raw = e.pos.slice(chunk.data(), chunk.base_offset).to_vec();
            parse_errors.push(Reject::new(chunk.input, place(e.pos.line, e.pos.offset).0, raw, e.reason));
        };
        let _: ChunkEnd = match &chunk.payload {
            // A message is a record boundary: a bad one never takes the next ones with it.
            Payload::Messages { marks, .. } => {
                self.format.parse_messages(chunk.data(), &marks.starts, chunk.first_line, chunk.base_offset, &mut on_record, &mut on_error)
            }
            // The reader already cut the input at an end-of-data marker.
            _ => self.format.parse_chunk(chunk.data(), chunk.first_line, chunk.base_offset, &mut on_record, &mut on_error),
        };
        filed.rejects.append(&mut parse_errors);
        filed.finish(range)
    }
}
