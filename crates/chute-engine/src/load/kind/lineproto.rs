//! InfluxDB line protocol into one table (`chute consume --format
//! line-protocol`). A line's measurement must be the table's name; its tags
//! and fields go to the columns of the same names and its timestamp to the
//! table's time column, matched as `chute serve`'s write API matches them
//! (`crate::lines`) and encoded as its rows are (`values`), so a line lands
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

use super::super::model::{Chunk, ChunkOut, Filed, Reject, RowPos};
use super::super::{LoadError, LoadProgress, LoadSpec, target};
use super::values::{RowBufs, ValueRows, ValuesProcessor, next_row};
use super::{Kind, Prepared};
use crate::lines::matcher::{Matcher, Miss};
use crate::lines::{LaneColumn, line_columns};

/// Prepares a load of line protocol into the load's table.
pub(crate) async fn prepare(
    spec: &LoadSpec,
    precision: Precision,
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    if spec.columns.is_some() {
        return Err(LoadError::Setup("line protocol names its columns (tags and fields): leave out --columns".into()));
    }
    let info = target::resolve_load_table(control, spec, None).await?;
    let all = crate::catalog::columns_of(control, &info.name).await.map_err(|e| LoadError::sql("reading the table's columns", e))?;
    let columns = line_columns(all).ok_or_else(|| {
        LoadError::Setup(format!(
            "table {} has no time column for the lines' timestamps: name it \"time\" (or partition the table by a timestamp column)",
            info.name
        ))
    })?;
    let names: Vec<String> = columns.iter().map(|c| c.name.clone()).collect();
    let t = super::one_table(spec, control, progress, None, Some(&names)).await?;
    // Timestamps are nanoseconds once parsed, whatever the lines' precision.
    let ctx = chute_core::value::EncodeContext { epoch: Some(EpochUnit::Nanos), ..t.ctx };
    let values = ValuesProcessor { encoder: RowEncoder::new(t.plan.targets.clone(), ctx), routing: t.routing.clone() };
    let kind = Arc::new(LineProtocol { values, columns, table: t.info.name.clone(), precision });
    Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind))
}

struct LineProtocol {
    values: ValuesProcessor,
    /// The table's columns as lines fill them: time first (the encoder's order).
    columns: Vec<LaneColumn>,
    table: QualifiedName,
    precision: Precision,
}

impl Kind for LineProtocol {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let data = &chunk.data[..];
        let range = chunk.journal_range();
        let mut filed = Filed::default();
        let mut rc = self.values.routing.ctx();
        let mut bufs = RowBufs::default();
        let mut matcher = Matcher::new(&self.columns, false).any_types();
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
            if l.measurement != self.table.name.as_str() {
                reject(
                    &mut filed,
                    format!(
                        "measurement {:?} is not table {}: a consumer loads the lines of one measurement, into the table of its name",
                        l.measurement, self.table
                    ),
                );
                continue;
            }
            let (tags, fields) = (&set.tags[l.tags.clone()], &set.fields[l.fields.clone()]);
            match matcher.line(line, tags, fields, &self.table) {
                Ok(()) => {}
                Err(Miss::NoColumn { key, tag, .. }) => {
                    let what = if tag { "tag" } else { "field" };
                    let hint = format!("ALTER TABLE {} ADD COLUMN …", self.table.quoted());
                    reject(&mut filed, format!("table {} has no column {key:?} for {what} {key:?}: add it ({hint})", self.table));
                    continue;
                }
                Err(miss) => {
                    reject(&mut filed, miss.reason());
                    continue;
                }
            }
            row.data.clear();
            matcher.write_row(&mut row, l.time_ns, tags, fields);
            let mut values = Vec::with_capacity(self.columns.len());
            if next_row(&row.data, &mut 0, self.columns.len(), &mut values).is_some() {
                let pos = RowPos { input: chunk.input, line, offset, range };
                self.values.file_row(&values, pos, raw, &mut rc, &mut bufs, &mut filed);
            }
        }
        filed.finish(range)
    }
}
