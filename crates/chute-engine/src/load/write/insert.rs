//! Loading rows with batched `INSERT`s, for a parent whose row-level
//! security applies to the loading role.
//!
//! PostgreSQL refuses `COPY FROM` into a table with row-level security that
//! applies to the current role (SQLSTATE 0A000), but the policies' `WITH
//! CHECK` must still judge every row, so those rows go through the parent as
//! one `INSERT … SELECT FROM unnest(…)` per batch part: one array parameter
//! per column, built from the rows the encoder already wrote. Binary rows
//! become binary arrays of the column's own type (the same bytes COPY would
//! have carried, so the same values); text rows (values only the server can
//! parse) become `text[]` arrays cast to the column's type, which runs the
//! same input functions as COPY's text format. Everything else (the
//! transaction, the journal entry committed with the rows, isolating a row a
//! policy refuses) is the COPY path's.

use bytes::{BufMut, BytesMut};
use tokio_postgres::Transaction;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

use super::super::LoadError;
use super::super::target::ColumnPlan;

/// The statements for one table, made once per load.
#[derive(Debug)]
pub(crate) struct InsertPlan {
    /// For binary rows: `INSERT INTO t (…) SELECT * FROM unnest($1::int4[], …)`.
    binary_sql: String,
    /// For text rows: `INSERT INTO t (…) SELECT u.c1::int4, … FROM unnest($1::text[], …) u(c1, …)`.
    text_sql: String,
    /// Each column's type oid (the element type of its binary array).
    types: Vec<u32>,
}

const TEXT_OID: u32 = 25;

impl InsertPlan {
    /// Reads each target column's SQL type name (with its typmod) and whether
    /// it has an array type, which `unnest` needs.
    pub(crate) async fn new(client: &tokio_postgres::Client, table: &str, oid: u32, plan: &ColumnPlan) -> Result<InsertPlan, LoadError> {
        let names: Vec<&str> = plan.targets.iter().map(|t| t.name.as_str()).collect();
        let rows = client
            .query(
                "SELECT format_type(a.atttypid, a.atttypmod), t.typarray <> 0
                 FROM unnest($2::text[]) WITH ORDINALITY n(name, i)
                 JOIN pg_attribute a ON a.attrelid = $1 AND a.attname = n.name
                 JOIN pg_type t ON t.oid = a.atttypid
                 ORDER BY n.i",
                &[&oid, &names],
            )
            .await
            .map_err(|e| LoadError::sql("reading column types for INSERT", e))?;
        if rows.len() != names.len() {
            return Err(LoadError::Setup(format!("the columns of {table} changed while the load started: run it again")));
        }
        let mut binary_args = Vec::new();
        let mut text_args = Vec::new();
        let mut casts = Vec::new();
        let mut aliases = Vec::new();
        for (i, row) in rows.iter().enumerate() {
            let ty: String = row.get(0);
            if !row.get::<_, bool>(1) {
                return Err(LoadError::Setup(format!(
                    "column {} of {table} has type {ty}, which has no array type, so it cannot be loaded through INSERT under row-level security: \
                     load as a role the policies do not apply to (the owner, or one with BYPASSRLS)",
                    names[i]
                )));
            }
            binary_args.push(format!("${}::{ty}[]", i + 1));
            text_args.push(format!("${}::text[]", i + 1));
            casts.push(format!("u.c{i}::{ty}"));
            aliases.push(format!("c{i}"));
        }
        let into = format!("INSERT INTO {table} {}", plan.copy_list);
        Ok(InsertPlan {
            binary_sql: format!("{into} SELECT * FROM unnest({})", binary_args.join(", ")),
            text_sql: format!("{into} SELECT {} FROM unnest({}) AS u({})", casts.join(", "), text_args.join(", "), aliases.join(", ")),
            types: plan.targets.iter().map(|t| t.type_oid).collect(),
        })
    }
}

/// One array parameter, sent as the bytes of PostgreSQL's binary array format.
#[derive(Debug)]
struct RawArray(Vec<u8>);

impl ToSql for RawArray {
    fn to_sql(&self, _: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn std::error::Error + Sync + Send>> {
        out.put_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

/// Column arrays being filled row by row (binary array format: dimensions,
/// null flag, element type, then each element as length and bytes).
struct Arrays {
    cols: Vec<Vec<u8>>,
    nulls: Vec<bool>,
}

const HEADER_LEN: usize = 20;

impl Arrays {
    fn new(types: impl Iterator<Item = u32>, rows: usize) -> Arrays {
        let cols: Vec<Vec<u8>> = types
            .map(|oid| {
                let mut a = Vec::with_capacity(HEADER_LEN + rows * 12);
                a.extend_from_slice(&1i32.to_be_bytes()); // one dimension
                a.extend_from_slice(&0i32.to_be_bytes()); // has nulls: set at the end
                a.extend_from_slice(&oid.to_be_bytes());
                a.extend_from_slice(&(rows as i32).to_be_bytes());
                a.extend_from_slice(&1i32.to_be_bytes()); // lower bound
                a
            })
            .collect();
        let nulls = vec![false; cols.len()];
        Arrays { cols, nulls }
    }

    fn push(&mut self, col: usize, value: Option<&[u8]>) -> Result<(), String> {
        let a = self.cols.get_mut(col).ok_or_else(|| format!("a row has more than {} fields", self.nulls.len()))?;
        match value {
            None => {
                a.extend_from_slice(&(-1i32).to_be_bytes());
                self.nulls[col] = true;
            }
            Some(v) => {
                a.extend_from_slice(&(v.len() as i32).to_be_bytes());
                a.extend_from_slice(v);
            }
        }
        Ok(())
    }

    fn finish(mut self) -> Vec<RawArray> {
        for (a, null) in self.cols.iter_mut().zip(&self.nulls) {
            a[4..8].copy_from_slice(&i32::from(*null).to_be_bytes());
        }
        self.cols.into_iter().map(RawArray).collect()
    }
}

/// Splits one binary COPY row (field count, then length and bytes per field) into `arrays`.
fn push_binary_row(row: &[u8], arrays: &mut Arrays) -> Result<(), String> {
    let bad = || "a binary row ends early".to_owned();
    let n = i16::from_be_bytes(row.get(..2).ok_or_else(bad)?.try_into().expect("2 bytes"));
    let mut at = 2usize;
    for col in 0..n.max(0) as usize {
        let len = i32::from_be_bytes(row.get(at..at + 4).ok_or_else(bad)?.try_into().expect("4 bytes"));
        at += 4;
        if len < 0 {
            arrays.push(col, None)?;
        } else {
            let end = at + len as usize;
            arrays.push(col, Some(row.get(at..end).ok_or_else(bad)?))?;
            at = end;
        }
    }
    Ok(())
}

/// Splits one COPY text row (as `rowenc::write_text_row` writes it) into `arrays`.
fn push_text_row(row: &[u8], arrays: &mut Arrays, scratch: &mut Vec<u8>) -> Result<(), String> {
    let row = row.strip_suffix(b"\n").unwrap_or(row);
    for (col, field) in row.split(|b| *b == b'\t').enumerate() {
        if field == b"\\N" {
            arrays.push(col, None)?;
            continue;
        }
        scratch.clear();
        let mut bytes = field.iter();
        while let Some(&b) = bytes.next() {
            if b != b'\\' {
                scratch.push(b);
                continue;
            }
            scratch.push(match bytes.next() {
                Some(b't') => b'\t',
                Some(b'n') => b'\n',
                Some(b'r') => b'\r',
                Some(&other) => other,
                None => b'\\',
            });
        }
        arrays.push(col, Some(scratch))?;
    }
    Ok(())
}

/// Rows for one INSERT: encoded as the COPY sink would send them.
pub(crate) struct Rows<'a> {
    /// The rows one after another; row `i` ends at `row_ends[i]`.
    pub body: &'a [u8],
    pub row_ends: &'a [u32],
    /// COPY text rows rather than binary ones.
    pub text: bool,
    /// The target, for a message.
    pub target: &'a str,
}

/// Inserts rows `a..b` in one statement; returns the rows inserted.
pub(crate) async fn insert_rows(
    txn: &Transaction<'_>,
    plan: &InsertPlan,
    part: Rows<'_>,
    a: usize,
    b: usize,
) -> Result<u64, tokio_postgres::Error> {
    let types: Box<dyn Iterator<Item = u32>> =
        if part.text { Box::new(std::iter::repeat_n(TEXT_OID, plan.types.len())) } else { Box::new(plan.types.iter().copied()) };
    let mut arrays = Arrays::new(types, b - a);
    let mut scratch = Vec::new();
    for i in a..b {
        let start = if i == 0 { 0 } else { part.row_ends[i - 1] as usize };
        let row = &part.body[start..part.row_ends[i] as usize];
        let split = if part.text { push_text_row(row, &mut arrays, &mut scratch) } else { push_binary_row(row, &mut arrays) };
        // chute wrote these rows itself: a malformed one is a bug, not bad input.
        split.unwrap_or_else(|e| panic!("row {i} of a batch for {}: {e}", part.target));
    }
    let params = arrays.finish();
    let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p as &(dyn ToSql + Sync)).collect();
    let sql = if part.text { &plan.text_sql } else { &plan.binary_sql };
    txn.execute(sql.as_str(), &refs).await
}

/// Batched INSERTs through the parent (row-level security applies).
#[derive(Debug)]
pub(crate) struct InsertWriter(pub InsertPlan);

impl super::Writer for InsertWriter {
    fn sql(&self, target: &chute_core::ident::QualifiedName, copy_list: &str, text: bool) -> String {
        // Not sent: the rows go in as INSERTs; kept for messages that show a part's statement.
        super::copy_sql(&target.quoted(), copy_list, text)
    }

    fn write<'a>(
        &'a self,
        txn: &'a Transaction<'_>,
        part: &'a super::BatchPart,
        rows: std::ops::Range<usize>,
        _fast: bool,
        _turns: &'a super::merge::Turns,
    ) -> futures_util::future::BoxFuture<'a, Result<(u64, crate::load::UpsertCounts), tokio_postgres::Error>> {
        Box::pin(async move {
            let r = Rows { body: &part.body, row_ends: &part.seg.row_ends, text: part.text, target: &part.target_name };
            Ok((insert_rows(txn, &self.0, r, rows.start, rows.end).await?, Default::default()))
        })
    }

    /// A policy's `WITH CHECK` refusing a row is 42501 (the role's
    /// privileges on the table were checked before the load began).
    fn refused_row(&self, e: &tokio_postgres::Error) -> bool {
        e.code() == Some(&tokio_postgres::error::SqlState::INSUFFICIENT_PRIVILEGE)
    }

    fn fill_refusal(&self) -> Option<String> {
        Some("row-level security applies: rows go in as INSERTs through the parent".to_owned())
    }

    fn swap_refusal(&self) -> Option<String> {
        Some("row-level security applies: rows go in as INSERTs through the parent".to_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_rows_are_unescaped_and_nulls_flagged() {
        let mut arrays = Arrays::new([TEXT_OID, TEXT_OID].into_iter(), 2);
        let mut scratch = Vec::new();
        push_text_row(b"a\\tb\\\\c\t\\N\n", &mut arrays, &mut scratch).unwrap();
        push_text_row(b"x\\ny\tz\n", &mut arrays, &mut scratch).unwrap();
        let out = arrays.finish();
        let col0 = &out[0].0;
        assert_eq!(&col0[4..8], &0i32.to_be_bytes(), "no NULL in column 0");
        assert_eq!(&col0[12..16], &2i32.to_be_bytes(), "two elements");
        assert_eq!(&col0[HEADER_LEN..HEADER_LEN + 4], &5i32.to_be_bytes());
        assert_eq!(&col0[HEADER_LEN + 4..HEADER_LEN + 9], b"a\tb\\c");
        assert_eq!(&col0[HEADER_LEN + 9..HEADER_LEN + 13], &3i32.to_be_bytes());
        assert_eq!(&col0[HEADER_LEN + 13..], b"x\ny");
        let col1 = &out[1].0;
        assert_eq!(&col1[4..8], &1i32.to_be_bytes(), "column 1 has a NULL");
        assert_eq!(&col1[HEADER_LEN..HEADER_LEN + 4], &(-1i32).to_be_bytes());
    }

    #[test]
    fn binary_rows_keep_their_field_bytes() {
        let mut row = Vec::new();
        row.extend_from_slice(&2i16.to_be_bytes());
        row.extend_from_slice(&4i32.to_be_bytes());
        row.extend_from_slice(&7i32.to_be_bytes());
        row.extend_from_slice(&(-1i32).to_be_bytes());
        let mut arrays = Arrays::new([23u32, 25].into_iter(), 1);
        push_binary_row(&row, &mut arrays).unwrap();
        let out = arrays.finish();
        assert_eq!(&out[0].0[8..12], &23u32.to_be_bytes());
        assert_eq!(&out[0].0[HEADER_LEN..], &[0, 0, 0, 4, 0, 0, 0, 7]);
        assert_eq!(&out[1].0[HEADER_LEN..], &(-1i32).to_be_bytes());
        assert!(push_binary_row(&row[..7], &mut Arrays::new([23u32, 25].into_iter(), 1)).is_err());
    }
}
