//! InfluxDB line protocol into one table (`chute consume --format
//! line-protocol`). A line's measurement must be the table's name; its tags
//! and fields go to the columns of the same names and its timestamp to the
//! table's time column, matched as `chute serve`'s write API matches them
//! (`super::matcher`) and encoded as its rows are (`values`), so a line lands
//! as it would through serve. A line that does not parse, names another
//! measurement, or a key the table has no column for, is rejected with why;
//! the other lines of its message load.
//!
//! Unlike one request to serve, the lines of a chunk are not one batch the
//! sender chose: a field may be an integer in one line and a float in the
//! next, as long as its column takes both.

use std::sync::Arc;

use chute_core::ident::QualifiedName;
use chute_core::parse::lineproto::{LineAt, LineSet, Precision, parse_lines_into};
use chute_core::rowenc::RowEncoder;
use chute_core::value::EpochUnit;

use super::matcher::{Matcher, Miss};
use super::{LaneColumn, line_columns};
use crate::load::kind::values::{RowBufs, ValueRows, ValuesProcessor, next_row};
use crate::load::kind::{Kind, Prepared, plan_table};
use crate::load::model::{Chunk, ChunkOut, Filed, Reject, RowPos};
use crate::load::{LoadError, LoadProgress, LoadSpec, target};

/// Prepares a load of line protocol: into the load's table, or, when its
/// name is `-`, into the tables of its schema (the search_path's first
/// without one) that lines can fill, each line into the table its
/// measurement names.
pub async fn prepare(
    spec: &LoadSpec,
    precision: Precision,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    if spec.columns.is_some() {
        return Err(LoadError::Setup("line protocol names its columns (tags and fields): leave out --columns".into()));
    }
    let by_measurement = spec.table.name == "-";
    let infos = if by_measurement {
        let schema = match &spec.table.schema {
            Some(s) => s.clone(),
            None => current_schema(control).await?,
        };
        let mut infos = Vec::new();
        for name in schema_tables(control, &schema).await? {
            infos.push(target::resolve(control, &QualifiedName::new(schema.clone(), name)).await?);
        }
        infos
    } else {
        vec![target::resolve_load_table(control, spec, None).await?]
    };
    let mut tables = Vec::new();
    let mut routings = Vec::new();
    let mut via_parent_reason = None;
    for info in infos {
        let all = crate::catalog::columns_of(control, &info.name).await.map_err(|e| LoadError::sql("reading the table's columns", e))?;
        let Some(columns) = line_columns(all) else {
            if by_measurement {
                continue;
            }
            return Err(LoadError::Setup(format!(
                "table {} has no time column for the lines' timestamps: name it \"time\" (or partition the table by a timestamp column)",
                info.name
            )));
        };
        let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
        let t = plan_table(spec, control, progress, info, Some(&names)).await?;
        // Timestamps are nanoseconds once parsed, whatever the lines' precision.
        let ctx = chute_core::value::EncodeContext { epoch: Some(EpochUnit::Nanos), ..t.ctx };
        let table = u16::try_from(tables.len()).map_err(|_| LoadError::Setup("more than 65535 tables for the lines".into()))?;
        let values = ValuesProcessor { encoder: RowEncoder::new(t.plan.targets.clone(), ctx), routing: t.routing.clone(), table };
        via_parent_reason = via_parent_reason.or(t.via_parent_reason);
        routings.push(t.routing);
        tables.push(LineTable { values, columns, name: t.info.name });
    }
    if tables.is_empty() {
        return Err(LoadError::Setup(format!(
            "schema {} has no table lines can fill (one with a time column): make them first, named by the measurements",
            spec.table.schema.as_deref().unwrap_or("of the search_path")
        )));
    }
    let summary_table = tables.iter().map(|t| t.name.to_string()).collect::<Vec<_>>().join(", ");
    let by_name = tables.iter().enumerate().map(|(i, t)| (t.name.name.clone(), i)).collect();
    let kind = Arc::new(LineProtocol { tables, by_name, by_measurement, precision });
    Ok(Prepared {
        tables: routings,
        kind,
        boundary: None,
        skip: None,
        tags: None,
        via_parent_reason,
        summary_table,
        by_ref: false,
        read_columns: Vec::new(),
    })
}

async fn current_schema(control: &tokio_postgres::Client) -> Result<String, LoadError> {
    let row = control.query_one("SELECT current_schema()::text", &[]).await.map_err(|e| LoadError::sql("reading the schema", e))?;
    row.get::<_, Option<String>>(0)
        .ok_or_else(|| LoadError::Setup("no schema on the search_path for the measurements' tables: name one, as SCHEMA.-".into()))
}

/// The tables of `schema` (not their partitions), by name.
async fn schema_tables(control: &tokio_postgres::Client, schema: &str) -> Result<Vec<String>, LoadError> {
    let rows = control
        .query(
            "SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1",
            &[&schema],
        )
        .await
        .map_err(|e| LoadError::sql(format!("listing the tables of schema {schema}"), e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// One table lines fill.
struct LineTable {
    values: ValuesProcessor,
    /// Its columns as lines fill them: time first (the encoder's order).
    columns: Vec<LaneColumn>,
    name: QualifiedName,
}

struct LineProtocol {
    tables: Vec<LineTable>,
    /// Table index by name (`-`: a line's measurement names its table).
    by_name: std::collections::HashMap<String, usize>,
    by_measurement: bool,
    precision: Precision,
}

impl LineProtocol {
    /// The table of a line's measurement, or why there is none.
    fn table_of(&self, measurement: &str) -> Result<usize, String> {
        if let Some(&i) = self.by_name.get(measurement) {
            return Ok(i);
        }
        let first = &self.tables[0].name;
        Err(if self.by_measurement {
            format!(
                "no table {} for measurement {measurement:?}: make it (with a time column), then load this reject file's lines",
                first.with_name(measurement)
            )
        } else {
            format!(
                "measurement {measurement:?} is not table {first}: a consumer loads the lines of one measurement, into the table of its name (or of every measurement, into the tables they name, with TABLE -)"
            )
        })
    }
}

impl Kind for LineProtocol {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let data = chunk.data();
        let range = chunk.journal_range();
        let mut filed = Filed::default();
        let mut rcs: Vec<_> = self.tables.iter().map(|t| t.values.routing.ctx()).collect();
        let mut matchers: Vec<_> = self.tables.iter().map(|t| Matcher::new(&t.columns, false).any_types()).collect();
        let mut bufs = RowBufs::default();
        let mut set = LineSet::default();
        let mut row = ValueRows::default();
        // Lines without a timestamp take the time they were read.
        let now_ns = crate::clock::now_micros().saturating_mul(1000);
        let mut start = 0;
        for (i, end) in memchr::memchr_iter(b'\n', data).chain(std::iter::once(data.len())).enumerate() {
            let raw = &data[start..end];
            let (line, offset) = chunk.place(chunk.first_line + i as u64, chunk.base_offset + start as u64);
            start = end + 1;
            let reject = |filed: &mut Filed, reason: String| filed.rejects.push(Reject::new(chunk.input, line, raw.to_vec(), reason));
            let Ok(text) = std::str::from_utf8(raw) else {
                reject(&mut filed, "the line is not UTF-8".into());
                continue;
            };
            set.tags.clear();
            set.fields.clear();
            let mut parsed: Option<Result<LineAt<'_>, String>> = None;
            parse_lines_into(text, self.precision, now_ns, &mut set, |_, r| parsed = Some(r));
            let l = match parsed {
                // A blank or comment line: no row.
                None => continue,
                Some(Err(reason)) => {
                    reject(&mut filed, reason);
                    continue;
                }
                Some(Ok(l)) => l,
            };
            let t = match self.table_of(&l.measurement) {
                Ok(t) => t,
                Err(reason) => {
                    reject(&mut filed, reason);
                    continue;
                }
            };
            let (table, matcher) = (&self.tables[t], &mut matchers[t]);
            let (tags, fields) = (&set.tags[l.tags.clone()], &set.fields[l.fields.clone()]);
            match matcher.line(line, tags, fields, &table.name) {
                Ok(()) => {}
                Err(Miss::NoColumn { key, tag, .. }) => {
                    let what = if tag { "tag" } else { "field" };
                    let hint = format!("ALTER TABLE {} ADD COLUMN …", table.name.quoted());
                    reject(&mut filed, format!("table {} has no column {key:?} for {what} {key:?}: add it ({hint})", table.name));
                    continue;
                }
                Err(miss) => {
                    reject(&mut filed, miss.reason());
                    continue;
                }
            }
            row.data.clear();
            matcher.write_row(&mut row, l.time_ns, tags, fields);
            let mut values = Vec::with_capacity(table.columns.len());
            if next_row(&row.data, &mut 0, table.columns.len(), &mut values).is_some() {
                let pos = RowPos { input: chunk.input, line, offset, range };
                table.values.file_row(&values, pos, raw, &mut rcs[t], &mut bufs, &mut filed);
            }
        }
        filed.finish(range)
    }
}
