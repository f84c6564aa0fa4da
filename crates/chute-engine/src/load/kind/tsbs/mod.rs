//! Loading Time Series Benchmark Suite files.
//!
//! A tsbs file names its own tables: a header lists the tags and, per
//! measurement, the fields. chute creates (or reuses) the `tags` table, unique
//! over all tag columns with `NULLS NOT DISTINCT` so re-runs and empty tag
//! values never duplicate a tag set, and one table per measurement with the
//! schema and indexes of the published runs. Each row needs the id of its tag
//! set: parse threads look it up in a shared cache; rows with a tag set not
//! seen yet wait while the coordinator inserts it, then get the id patched
//! into their already encoded bytes.
//!
//! Tables that exist already (the published runs' DDL, maybe with some
//! fields altered to `real`, maybe managed by pg_partman) are loaded as they
//! are: every value is encoded to its column's type, and a tag set is looked
//! up with `IS NOT DISTINCT FROM` before it is inserted, under an advisory
//! lock, so a `tags` table whose unique index treats NULLs as distinct still
//! gets one row per tag set.

use std::sync::Arc;

use chute_core::encode::PG_EPOCH_OFFSET_MICROS;
use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::parse::tsbs::{TsbsHeader, TsbsParser, TsbsRecord, parse_tsbs_header, tag_sql_type};
use chute_core::parse::{Fields, RecordError, RecordPos};
use chute_core::value::{EncodeContext, PgType, ValueError, encode_text};
use tokio_postgres::Client;

use super::super::model::{Chunk, ChunkOut, Filed, PendingRow, Reject, RowPos};
use super::super::reading::{self, InputSpec};
use super::super::routing::Routing;
use super::super::target;
use super::super::{LoadError, LoadProgress, LoadSpec};
use super::{Kind, Prepared};

pub(crate) mod tags;

use tags::{TagCache, TagResolver};

/// Where the int4 `tags_id` value sits in an encoded row: after the field
/// count (2), the time field (4 + 8) and tags_id's length word (4).
pub(crate) const TAGS_ID_AT: usize = 2 + 12 + 4;

/// Reads the header of a tsbs file.
fn read_header(spec: &InputSpec) -> Result<TsbsHeader, LoadError> {
    let mut input = reading::open(spec, 64 << 20)?;
    let mut buf = Vec::new();
    let mut piece = vec![0u8; 64 << 10];
    loop {
        let n = input.read(&mut piece).map_err(|e| LoadError::Input { input: spec.display_name(), message: e.to_string() })?;
        buf.extend_from_slice(&piece[..n]);
        match parse_tsbs_header(&buf) {
            Ok(Some((h, _, _))) => return Ok(h),
            Ok(None) if n == 0 || buf.len() > 16 << 20 => {
                return Err(LoadError::Input {
                    input: spec.display_name(),
                    message: "no complete tsbs header block (tags line, measurement lines, empty line)".into(),
                });
            }
            Ok(None) => {}
            Err(e) => return Err(LoadError::Input { input: spec.display_name(), message: e.to_string() }),
        }
    }
}

fn skip_header(buf: &[u8]) -> Result<Option<(usize, u64)>, String> {
    parse_tsbs_header(buf).map(|h| h.map(|(_, bytes, lines)| (bytes, lines))).map_err(|e| e.to_string())
}

/// Creates or reuses the tables and builds the kind.
pub(crate) async fn prepare(
    spec: &LoadSpec,
    inputs: &[InputSpec],
    control: &Client,
    progress: &mut dyn LoadProgress,
) -> Result<Prepared, LoadError> {
    let header = one_header(inputs)?;
    let schema = tables_schema(spec, control).await?;
    let tags = tags_table(control, &schema, &header).await?;
    let first_tag = header.tags.first().map(|(n, _)| n.clone()).ok_or_else(|| LoadError::Setup("the tsbs header lists no tags".into()))?;
    let mut tables = Vec::new();
    let mut types = Vec::new();
    for (index, (m, fields)) in header.measurements.iter().enumerate() {
        let name = QualifiedName::new(schema.clone(), m.clone());
        make_measurement_table(spec, control, progress, &header, index, &name).await?;
        let mut cols = vec!["time".to_owned(), "tags_id".to_owned(), first_tag.clone()];
        cols.extend(fields.iter().cloned());
        cols.push("additional_tags".into());
        let info = target::resolve(control, &name).await?;
        let columns = target::table_columns(control, info.oid).await?;
        let plan = target::plan_columns(&info.name, &columns, Some(&cols))?;
        types.push(column_types(&info.name, &plan)?);
        let (routing, _) = super::super::routing::build(spec, control, &info, &plan, progress).await?;
        tables.push(Arc::new(routing));
    }
    let cache: TagCache = Arc::default();
    let kind = Arc::new(TsbsProcessor { parser: TsbsParser::new(header.clone()), cache: cache.clone(), tables: tables.clone(), types });
    Ok(Prepared {
        boundary: Some(Arc::new(TsbsParser::new(header.clone()))),
        tables,
        kind,
        skip: Some(skip_header),
        tags: Some(TagResolver { cache, sql: tags.sql, lock_key: tags.lock_key as i32 }),
        via_parent_reason: None,
        // Schema-qualified: the same file loaded into two schemas is two loads in `chute load --status`.
        summary_table: header
            .measurements
            .iter()
            .map(|(m, _)| QualifiedName::new(schema.clone(), m.clone()).to_string())
            .collect::<Vec<_>>()
            .join(", "),
        by_ref: false,
        read_columns: Vec::new(),
    })
}

/// The header every input shares (their tables must be the same).
fn one_header(inputs: &[InputSpec]) -> Result<TsbsHeader, LoadError> {
    let first = inputs.first().ok_or_else(|| LoadError::Setup("tsbs input needs a file".into()))?;
    let header = read_header(first)?;
    for other in &inputs[1..] {
        if read_header(other)? != header {
            return Err(LoadError::Setup(format!(
                "{} has a different tsbs header than {}: load them separately",
                other.display_name(),
                first.display_name()
            )));
        }
    }
    Ok(header)
}

/// The schema the tables go in: the load's (made if missing), or the
/// connection's current schema.
async fn tables_schema(spec: &LoadSpec, control: &Client) -> Result<String, LoadError> {
    match &spec.tsbs_schema {
        Some(schema) => {
            control
                .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)))
                .await
                .map_err(|e| LoadError::sql(format!("creating schema {schema}"), e))?;
            Ok(schema.clone())
        }
        None => control
            .query_one("SELECT current_schema()::text", &[])
            .await
            .map_err(|e| LoadError::sql("reading the schema", e))?
            .try_get::<_, Option<String>>(0)
            .map_err(|e| LoadError::sql("reading the schema", e))?
            .ok_or_else(|| LoadError::Setup("no schema on the search_path to create the tsbs tables in: name one for the tables".into())),
    }
}

/// The tags table, as found or made: the statement that finds or inserts a
/// tag set's id, and the advisory lock key it runs under.
struct Tags {
    sql: String,
    lock_key: u32,
}

async fn tags_table(control: &Client, schema: &str, header: &TsbsHeader) -> Result<Tags, LoadError> {
    let tag_cols: Vec<String> = header.tags.iter().map(|(n, _)| quote_ident(n)).collect();
    let tags_table = QualifiedName::new(schema.to_owned(), "tags");
    let defs: Vec<String> = header.tags.iter().map(|(n, t)| format!("{} {}", quote_ident(n), tag_sql_type(t))).collect();
    // NULLS NOT DISTINCT needs PostgreSQL 15; on 14 the tag-set lookup
    // (IS NOT DISTINCT FROM, under the tags table's advisory lock) alone keeps
    // one row per tag set.
    let version: i32 = control
        .query_one("SELECT current_setting('server_version_num')::int4", &[])
        .await
        .map_err(|e| LoadError::sql("reading the server version", e))?
        .get(0);
    let ddl = format!(
        "CREATE TABLE IF NOT EXISTS {} (id serial PRIMARY KEY, {}, UNIQUE {}({}))",
        tags_table.quoted(),
        defs.join(", "),
        if version >= 150000 { "NULLS NOT DISTINCT " } else { "" },
        tag_cols.join(", ")
    );
    control.batch_execute(&ddl).await.map_err(|e| LoadError::sql("creating the tags table", e))?;
    let have_typed: Vec<(String, String)> = crate::catalog::columns_of(control, &tags_table)
        .await
        .map_err(|e| LoadError::sql("reading the tags table", e))?
        .into_iter()
        .map(|c| (c.name, c.type_name))
        .collect();
    let have: Vec<String> = have_typed.iter().map(|(n, _)| n.clone()).collect();
    let missing: Vec<&str> = header.tags.iter().map(|(n, _)| n.as_str()).filter(|n| !have.iter().any(|h| h == n)).collect();
    if !missing.is_empty() {
        return Err(LoadError::Setup(format!(
            "{tags_table} exists with other tag columns ({}) than this file's ({}): load each tsbs use case into its own database or schema (e.g. PGOPTIONS='-c search_path=iot')",
            have.iter().filter(|h| *h != "id").cloned().collect::<Vec<_>>().join(", "),
            header.tags.iter().map(|(n, _)| n.as_str()).collect::<Vec<_>>().join(", ")
        )));
    }
    // Each value cast to its column's type as the table has it.
    let casts: Vec<String> = header
        .tags
        .iter()
        .enumerate()
        .map(|(i, (n, _))| {
            let ty = have_typed.iter().find(|(h, _)| h == n).map(|(_, t)| t.as_str()).unwrap_or("text");
            format!("${}::text::{ty}", i + 1)
        })
        .collect();
    let v_cols: Vec<String> = (0..header.tags.len()).map(|i| format!("c{i}")).collect();
    // Found first, inserted only when not found: a unique index that treats
    // NULLs as distinct would take every NULL-tagged set again.
    let sql = format!(
        "WITH v ({vc}) AS (SELECT {casts}),
         found AS (SELECT x.id FROM {t} x, v WHERE ({xcols}) IS NOT DISTINCT FROM ({vc}) ORDER BY x.id LIMIT 1),
         ins AS (INSERT INTO {t} ({cols}) SELECT {vc} FROM v WHERE NOT EXISTS (SELECT FROM found) ON CONFLICT DO NOTHING RETURNING id)
         SELECT id FROM found UNION ALL SELECT id FROM ins",
        vc = v_cols.join(", "),
        casts = casts.join(", "),
        t = tags_table.quoted(),
        cols = tag_cols.join(", "),
        xcols = tag_cols.iter().map(|c| format!("x.{c}")).collect::<Vec<_>>().join(", "),
    );
    let lock_key: u32 = control
        .query_one("SELECT to_regclass($1)::oid", &[&tags_table.quoted()])
        .await
        .map_err(|e| LoadError::sql("reading the tags table", e))?
        .get(0);
    Ok(Tags { sql, lock_key })
}

/// Makes a measurement's table when it does not exist, with the indexes of
/// the published runs (partitioned by time when the load has an interval).
async fn make_measurement_table(
    spec: &LoadSpec,
    control: &Client,
    progress: &mut dyn LoadProgress,
    header: &TsbsHeader,
    index: usize,
    name: &QualifiedName,
) -> Result<(), LoadError> {
    let exists: bool = control
        .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name.quoted()])
        .await
        .map_err(|e| LoadError::sql("looking for a table", e))?
        .get(0);
    if exists {
        return Ok(());
    }
    let defs = header.measurement_columns_sql(index).expect("a measurement of this header, which has tags");
    let q = name.quoted();
    match spec.tsbs_interval {
        Some(interval) => {
            // Partitioned by time; partitions appear just in time as rows need them.
            let policy = chute_core::partman::Policy {
                max_future: Some(chute_core::partman::Span::parse("1d").expect("static")),
                ..chute_core::partman::Policy::new(name.clone(), "time", chute_core::partman::KeyType::Timestamptz, interval)
            };
            let req = crate::partman::CreateRequest { policy, like: None, columns: Some(defs.join(", ")), start: None };
            let mut mgr = crate::partman::PartitionManager::connect(&spec.target, Default::default()).await?;
            mgr.create(req, crate::clock::now_micros(), false, &mut crate::exec::quiet).await?;
        }
        None => control
            .batch_execute(&format!("CREATE TABLE {q} ({})", defs.join(", ")))
            .await
            .map_err(|e| LoadError::sql(format!("creating {name}"), e))?,
    }
    control
        .batch_execute(&format!("CREATE INDEX ON {q} (tags_id, time DESC); CREATE INDEX ON {q} (time DESC)"))
        .await
        .map_err(|e| LoadError::sql(format!("indexing {name}"), e))?;
    progress.notice(&format!("created {name}"));
    Ok(())
}

struct TsbsProcessor {
    parser: TsbsParser,
    cache: TagCache,
    tables: Vec<Arc<Routing>>,
    /// Per table, the type of each loaded column (time, tags_id, first tag,
    /// fields, additional_tags).
    types: Vec<Vec<PgType>>,
}

/// The types a measurement table's columns are encoded to, checked once:
/// `time` a timestamp, `tags_id` an integer (its id is patched into the
/// encoded row), every other column a type chute encodes.
fn column_types(table: &QualifiedName, plan: &target::ColumnPlan) -> Result<Vec<PgType>, LoadError> {
    let mut types = Vec::with_capacity(plan.targets.len());
    for (i, t) in plan.targets.iter().enumerate() {
        let ty = match (i, t.ty) {
            (0, Some(ty @ (PgType::Timestamptz | PgType::Timestamp))) => ty,
            (0, _) => {
                return Err(LoadError::Setup(format!(
                    "column \"time\" of {table} is not a timestamptz or timestamp: load tsbs files into a table whose time column is one"
                )));
            }
            (1, Some(PgType::Int4)) => PgType::Int4,
            (1, _) => {
                return Err(LoadError::Setup(format!(
                    "column \"tags_id\" of {table} is not an integer (int4): alter it to integer, the type of tags.id (serial)"
                )));
            }
            (_, Some(ty)) => ty,
            (_, None) => {
                return Err(LoadError::Setup(format!(
                    "column {:?} of {table} has a type chute does not encode for tsbs files (oid {}): alter it to real, double precision, numeric, text or jsonb",
                    t.name, t.type_oid
                )));
            }
        };
        types.push(ty);
    }
    Ok(types)
}

fn tag_key(tags: &Fields, key: &mut Vec<u8>) {
    key.clear();
    for t in tags.iter() {
        match t {
            None => key.push(0xff),
            Some(v) => {
                key.extend_from_slice(&(v.len() as u32).to_le_bytes());
                key.extend_from_slice(v);
            }
        }
    }
}

/// Encodes one tsbs record for its measurement table, each value to its
/// column's type (`types`, see [`column_types`]); `Err` is a reject reason.
fn encode_record(rec: &TsbsRecord<'_>, types: &[PgType], row: &mut Vec<u8>) -> Result<(), String> {
    let ctx = EncodeContext::default();
    let fields = 3 + rec.values.len() + 1;
    if types.len() != fields {
        return Err(format!("the record has {fields} columns, its table {} (a chute bug)", types.len()));
    }
    row.extend_from_slice(&(fields as i16).to_be_bytes());
    // timestamptz and timestamp share their binary form: microseconds since 2000 (UTC for timestamp).
    row.extend_from_slice(&8i32.to_be_bytes());
    row.extend_from_slice(&(rec.time_ns.div_euclid(1000) - PG_EPOCH_OFFSET_MICROS).to_be_bytes());
    row.extend_from_slice(&4i32.to_be_bytes());
    row.extend_from_slice(&0i32.to_be_bytes());
    let values = std::iter::once(rec.tags.get(0)).chain(rec.values.iter()).chain(std::iter::once(rec.additional_tags));
    for (v, ty) in values.zip(&types[2..]) {
        match v {
            Some(v) => put(row, *ty, v, &ctx)?,
            None => row.extend_from_slice(&(-1i32).to_be_bytes()),
        }
    }
    Ok(())
}

fn put(row: &mut Vec<u8>, ty: PgType, v: &[u8], ctx: &EncodeContext) -> Result<(), String> {
    let at = row.len();
    row.extend_from_slice(&[0; 4]);
    match encode_text(ty, v, ctx, row) {
        Ok(()) => {
            let len = (row.len() - at - 4) as i32;
            row[at..at + 4].copy_from_slice(&len.to_be_bytes());
            Ok(())
        }
        Err(ValueError::Invalid(r)) => Err(r),
        Err(ValueError::NeedsServer) => {
            Err(format!("{:?} is not a value chute reads as {} in tsbs files", String::from_utf8_lossy(v), ty.name()))
        }
    }
}

impl Kind for TsbsProcessor {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let range = (chunk.input as u32, chunk.base_offset, chunk.base_offset + chunk.data().len() as u64);
        let mut filed = Filed::default();
        let mut pending = Vec::new();
        let mut row = Vec::with_capacity(256);
        let mut key = Vec::with_capacity(128);
        let mut ctxs: Vec<_> = self.tables.iter().map(|t| t.ctx()).collect();
        let cache = self.cache.read().expect("tag cache").clone();
        let mut parse_errors = Vec::new();
        let mut on_record = |rec: &TsbsRecord<'_>, pos: RecordPos| {
            let raw = pos.slice(chunk.data(), chunk.base_offset);
            let at = RowPos { input: chunk.input, line: rec.data_line, offset: pos.offset, range };
            row.clear();
            if let Err(reason) = encode_record(rec, &self.types[rec.measurement], &mut row) {
                filed.rejects.push(Reject::new(chunk.input, rec.data_line, raw.to_vec(), reason));
                return;
            }
            tag_key(rec.tags, &mut key);
            let table = rec.measurement as u16;
            match cache.get(&key) {
                Some(id) => {
                    row[TAGS_ID_AT..TAGS_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
                    let routing = &self.tables[rec.measurement];
                    let routed = routing.route(&mut ctxs[rec.measurement], &row);
                    filed.file(routing, routed, table, &row, raw, at);
                }
                None => {
                    let tags = rec.tags.iter().map(|t| t.map(|v| String::from_utf8_lossy(v).into_owned())).collect();
                    let route = Routing::same_version(&ctxs[rec.measurement]);
                    pending.push(PendingRow { table, key: key.clone(), tags, row: row.clone(), raw: raw.to_vec(), at, route });
                }
            }
        };
        let mut on_error = |e: RecordError| {
            let raw = e.pos.slice(chunk.data(), chunk.base_offset).to_vec();
            parse_errors.push(Reject::new(chunk.input, e.pos.line, raw, e.reason))
        };
        self.parser.parse_records(chunk.data(), chunk.first_line, chunk.base_offset, &mut on_record, &mut on_error);
        filed.rejects.append(&mut parse_errors);
        let mut out = filed.finish(range);
        out.budget += pending.iter().map(PendingRow::bytes).sum::<usize>();
        out.pending_tags = pending;
        out
    }
}
