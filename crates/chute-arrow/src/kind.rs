//! Parquet and Arrow record batches into one table (see `load::columnar`).
//!
//! The data's columns are matched to the table's by name. Before any row
//! moves, every input's schema is read and each column's Arrow type checked
//! against its column's type (`chute_core::arrow::check`): a pairing chute
//! does not load is refused with the column, both types and the cast to
//! use. Values are then written straight from the Arrow arrays into binary
//! COPY rows (no text on the way) and routed on the encoded row like any
//! other. A row with a value only the server can read (a string for a type
//! chute does not encode, say) travels as text, as a CSV row of the same
//! values would; a value PostgreSQL refuses is a reject with the server's
//! message and SQLSTATE.
//!
//! Rows are numbered in their input (see `source::columnar`): a reject's
//! "line" is its row number plus one, and its record in the reject file is
//! the row's values as a CSV line.

use std::sync::Arc;

use arrow_schema::SchemaRef;
use chute_core::arrow::{self as encode, Bad, Pg, PgColumn, Values};
use chute_core::parse::Fields;
use chute_core::rowenc::{RowEncoder, write_text_row};
use chute_core::value::{EncodeContext, PgType};

use chute_engine::load::kind::{Kind, one_table};
use chute_engine::load::model::{Chunk, ChunkOut, Filed, Payload, Reject, RowPos};
use chute_engine::load::routing::Routing;
use chute_engine::load::{LoadError, LoadProgress, LoadSpec, Prepared, file_text_row};

use crate::files::{self as columnar, ColumnarInput};

/// `time without time zone` and `interval`: their oids.
const TIME_OID: u32 = 1083;
const INTERVAL_OID: u32 = 1186;

/// Reads the inputs' schemas, matches their columns to the table's and
/// checks every pairing of types, before any row moves.
pub(crate) async fn prepare(
    spec: &LoadSpec,
    inputs: &[ColumnarInput],
    control: &tokio_postgres::Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let schemas = inputs.iter().map(columnar::schema).collect::<Result<Vec<SchemaRef>, _>>()?;
    let first = schemas.first().ok_or_else(|| LoadError::Setup("no input to load".into()))?;
    let names: Vec<String> = match spec.columns() {
        Some(c) => c.to_vec(),
        None => {
            // A pandas index kept as a column is data only where the table has a column of its name.
            let index = encode::pandas_index_columns(first);
            let have = if index.is_empty() {
                Vec::new()
            } else {
                chute_engine::catalog::columns_of(control, spec.table()).await.unwrap_or_default()
            };
            first.fields().iter().map(|f| f.name().clone()).filter(|n| !index.contains(n) || have.iter().any(|c| &c.name == n)).collect()
        }
    };
    for (input, schema) in inputs.iter().zip(&schemas) {
        for n in &names {
            if schema.field_with_name(n).is_err() {
                let have: Vec<&str> = schema.fields().iter().map(|f| f.name().as_str()).collect();
                return Err(LoadError::Input {
                    input: input.display_name(),
                    message: format!("it has no column {n:?} (it has {})", have.join(", ")),
                });
            }
        }
    }
    let t = one_table(spec, control, progress, None, Some(&names)).await.map_err(|e| match e {
        LoadError::Setup(m) if spec.columns().is_none() => LoadError::Setup(format!(
            "{m}: the data's columns are matched to the table's by name; load a subset with {} A,B,… or add the column to the table",
            chute_engine::setting::Setting::Columns
        )),
        other => other,
    })?;
    let mut columns = Vec::with_capacity(t.plan.targets.len());
    for target in &t.plan.targets {
        let type_name = t.columns.iter().find(|c| c.name == target.name).map_or_else(String::new, |c| c.type_name.clone());
        let pg = pg_type(control, target.type_oid).await?;
        columns.push(PgColumn { name: target.name.clone(), type_name, pg, typmod: target.typmod });
    }
    let mut refused: Vec<String> = Vec::new();
    for schema in &schemas {
        for c in &columns {
            let field = schema.field_with_name(&c.name).map_err(|e| LoadError::Setup(e.to_string()))?;
            if let Err(r) = encode::check(field, c) {
                let r = r.to_string();
                if !refused.contains(&r) {
                    refused.push(r);
                }
            }
        }
    }
    if !refused.is_empty() {
        return Err(LoadError::Setup(refused.join("; ")));
    }
    let kind = Arc::new(ColumnarKind {
        columns,
        encoder: RowEncoder::new(t.plan.targets.clone(), t.ctx.clone()),
        routing: t.routing.clone(),
        ctx: t.ctx,
    });
    Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind).with_read_columns(names))
}

/// How the encoder sees a column's type: domains as their base type,
/// arrays with their element type, enums as text.
async fn pg_type(control: &tokio_postgres::Client, oid: u32) -> Result<Pg, LoadError> {
    let mut oid = oid;
    let mut array_of: Option<u32> = None;
    // A domain's base, an array's element (and its domain's base): a few steps at most.
    for _ in 0..8 {
        if let Some(t) = PgType::from_oid(oid) {
            return Ok(wrap(Pg::Known(t), array_of));
        }
        if oid == TIME_OID || oid == INTERVAL_OID {
            return Ok(wrap(if oid == TIME_OID { Pg::Time } else { Pg::Interval }, array_of));
        }
        let row = control
            .query_one("SELECT typtype::text, typbasetype::int8, typelem::int8, typcategory::text FROM pg_type WHERE oid = $1", &[&oid])
            .await
            .map_err(|e| LoadError::sql("reading a column's type", e))?;
        let (typtype, base, elem, category): (String, i64, i64, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
        if typtype == "d" {
            oid = base as u32;
        } else if category == "A" && elem != 0 && array_of.is_none() {
            array_of = Some(elem as u32);
            oid = elem as u32;
        } else if typtype == "e" {
            // An enum's binary form is its label's text.
            return Ok(wrap(Pg::Known(PgType::Text), array_of));
        } else {
            return Ok(wrap(Pg::Other, array_of));
        }
    }
    Ok(Pg::Other)
}

fn wrap(pg: Pg, array_of: Option<u32>) -> Pg {
    match array_of {
        Some(elem_oid) => Pg::Array { elem: Box::new(pg), elem_oid },
        None => pg,
    }
}

/// Encodes and routes record batches into one table.
struct ColumnarKind {
    /// The table's columns the data fills, in COPY order.
    columns: Vec<PgColumn>,
    /// For rows that travel as text (a value only the server reads).
    encoder: RowEncoder,
    routing: Arc<Routing>,
    ctx: EncodeContext,
}

/// A row's values as a CSV line (NULL as an empty field): its record in a reject file.
fn record(values: &[Box<dyn Values + '_>], i: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    let mut text = Vec::with_capacity(32);
    for (j, v) in values.iter().enumerate() {
        if j > 0 {
            out.push(b',');
        }
        if v.is_null(i) {
            continue;
        }
        text.clear();
        v.text(i, &mut text);
        if text.is_empty() || text.iter().any(|b| matches!(b, b',' | b'"' | b'\n' | b'\r')) {
            out.push(b'"');
            for &b in &text {
                if b == b'"' {
                    out.push(b'"');
                }
                out.push(b);
            }
            out.push(b'"');
        } else {
            out.extend_from_slice(&text);
        }
    }
    out
}

impl Kind for ColumnarKind {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let Payload::Other(any) = &chunk.payload else {
            return Filed::default().finish((chunk.input as u32, chunk.base_offset, chunk.base_offset));
        };
        let Some(batch) = any.downcast_ref::<arrow_array::RecordBatch>() else {
            return Filed::default().finish((chunk.input as u32, chunk.base_offset, chunk.base_offset));
        };
        let rows = batch.num_rows();
        let range = (chunk.input as u32, chunk.base_offset, chunk.base_offset + rows as u64);
        let mut filed = Filed::default();
        let mut values: Vec<Box<dyn Values + '_>> = Vec::with_capacity(self.columns.len());
        for c in &self.columns {
            match batch.column_by_name(&c.name) {
                Some(a) => values.push(encode::bind(a.as_ref(), c, &self.ctx)),
                None => {
                    // The schema was checked: only a stream whose batches change their columns gets here.
                    for i in 0..rows {
                        let reason = format!("the data has no column {:?} here", c.name);
                        filed.rejects.push(Reject::new(chunk.input, chunk.first_line + i as u64, Vec::new(), reason));
                    }
                    return filed.finish(range);
                }
            }
        }
        let routing = &self.routing;
        let mut rc = routing.ctx();
        let mut row = Vec::with_capacity(256);
        let mut fields = Fields::new();
        let mut text = Vec::new();
        let count = (self.columns.len() as i16).to_be_bytes();
        for i in 0..rows {
            let pos = RowPos { input: chunk.input, line: chunk.first_line + i as u64, offset: chunk.base_offset + i as u64, range };
            row.clear();
            row.extend_from_slice(&count);
            let mut failed = None;
            for (j, v) in values.iter().enumerate() {
                if let Err(bad) = encode::write_field(v.as_ref(), i, &mut row) {
                    failed = Some((j, bad));
                    break;
                }
            }
            match failed {
                None => {
                    let routed = routing.route(&mut rc, &row);
                    filed.file(routing, routed, 0, &row, &[], pos);
                }
                Some((_, Bad::NeedsServer)) => {
                    // The way a CSV row of the same values goes: as text, parsed by the server.
                    fields.clear();
                    for v in &values {
                        if v.is_null(i) {
                            fields.push_null();
                        } else {
                            text.clear();
                            v.text(i, &mut text);
                            fields.push(&text);
                        }
                    }
                    row.clear();
                    write_text_row(&fields, &mut row);
                    let raw = record(&values, i);
                    file_text_row(&self.encoder, (0, routing), &rc, &fields, &row, &raw, pos, &mut filed);
                }
                Some((j, Bad::Invalid { message, sqlstate })) => {
                    let reason = format!("column {}: {message} (SQLSTATE {sqlstate})", self.columns[j].name);
                    filed.rejects.push(Reject::new(chunk.input, pos.line, record(&values, i), reason).with_sqlstate(sqlstate));
                }
            }
        }
        filed.finish(range)
    }
}
