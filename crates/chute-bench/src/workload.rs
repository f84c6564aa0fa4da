//! The rows each scenario loads, chosen in one place.
//!
//! The published experiments use four workloads, and the bench loads the
//! real generators of `chute_core::generate` for each: tsbs `iot` (a tsbs
//! stream into `readings` and `diagnostics`, through the loader's tsbs path
//! as `chute load --gen iot` runs it), `conditions`, pgbench_accounts
//! (`accounts`, keyed by the integer `aid`) and TPC-H `lineitem`. A
//! [`BenchWorkload`] carries what the runner needs to make a cell's tables
//! (columns, the partition key and its range, the hash column, indexes) and
//! its rows; scenarios only choose a [`WorkloadKind`] and a [`DataShape`].

use std::sync::Arc;

use chute_core::generate::{AnyWorkload, Conditions, GenParams, StreamWorkload, Workload, workload};
use chute_core::ident::quote_ident;
use chute_core::parse::tsbs::parse_tsbs_header;
use chute_core::partman::KeyType;
use chute_core::value::PgType;

use crate::cell::Order;
use crate::permutation::Permutation;

/// The workloads of the published experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// tsbs `iot`: trucks' readings and diagnostics with their tags.
    Iot,
    /// `conditions`: time, dev_id, data1..data5 float8.
    Conditions,
    /// pgbench_accounts (keyed by account id).
    Accounts,
    /// TPC-H lineitem (7 columns).
    Lineitem,
}

/// Every workload, for `--workload`.
pub const WORKLOAD_KINDS: &[WorkloadKind] = &[WorkloadKind::Conditions, WorkloadKind::Iot, WorkloadKind::Accounts, WorkloadKind::Lineitem];

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Iot => "iot",
            WorkloadKind::Conditions => "conditions",
            WorkloadKind::Accounts => "accounts",
            WorkloadKind::Lineitem => "lineitem",
        }
    }

    pub fn parse(text: &str) -> Result<WorkloadKind, String> {
        WORKLOAD_KINDS.iter().copied().find(|k| k.name() == text.trim()).ok_or_else(|| {
            format!("no workload {text:?}: choose {}", WORKLOAD_KINDS.iter().map(|k| k.name()).collect::<Vec<_>>().join(", "))
        })
    }
}

/// Where the generated rows lie in time and how many keys they spread over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataShape {
    /// The first row's time, microseconds since the Unix epoch (a fixed
    /// date, so no run depends on the wall clock).
    pub start_micros: i64,
    /// The rows are spread evenly over this much time, whatever their number.
    pub span_micros: i64,
    /// Devices (conditions) or at most this many trucks (iot).
    pub devices: u32,
}

/// Where a cell's rows come from.
#[derive(Debug, Clone)]
pub enum BenchRows {
    /// Rows of one table, addressable by sequence number (so they can be shuffled).
    Table(Arc<dyn Workload>),
    /// A tsbs stream (iot): loaded through the loader's tsbs path into the
    /// tables its header names, exactly `rows` records.
    Tsbs { params: GenParams, rows: u64 },
}

/// One table a cell loads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchTable {
    pub name: String,
    /// Column definitions for `CREATE TABLE (…)`.
    pub columns_sql: String,
    /// The data fields, in order: extra index `i` covers field `i`.
    pub field_columns: Vec<String>,
}

/// A workload ready for the bench: its rows and what its tables need.
#[derive(Debug, Clone)]
pub struct BenchWorkload {
    pub kind: WorkloadKind,
    pub rows: BenchRows,
    /// The tables the rows go to (iot: readings and diagnostics; else one).
    pub tables: Vec<BenchTable>,
    /// The partition key of range layouts, and its type.
    pub key_column: String,
    pub key_type: KeyType,
    /// The smallest and largest key value of any row: microseconds since
    /// the Unix epoch for time keys, the integer itself otherwise.
    pub key_first: i64,
    pub key_last: i64,
    /// The column hash layouts partition on.
    pub hash_column: String,
    /// Index column lists every table of the scenario gets (`time`, `tags_id, time DESC` …).
    pub base_indexes: Vec<String>,
    /// What the rows are, in a sentence, for the report.
    pub description: String,
    /// Bytes of one binary COPY row (on average, for iot), to turn
    /// `--batch-rows` into the loader's batch size in bytes.
    pub row_bytes: usize,
}

impl BenchWorkload {
    /// The index column list for extra index `i` of `table`, tsbs style:
    /// `(field, key DESC)`; `None` when the table has no field `i`.
    pub fn extra_index(&self, table: &BenchTable, i: u32) -> Option<String> {
        table.field_columns.get(i as usize).map(|f| format!("{}, {} DESC", quote_ident(f), quote_ident(&self.key_column)))
    }

    /// The rows of one table in the given order (`None` for a tsbs stream,
    /// whose order is its own).
    pub fn ordered(&self, order: Order, rows: u64, seed: u64) -> Option<Arc<dyn Workload>> {
        match (&self.rows, order) {
            (BenchRows::Table(w), Order::Sorted) => Some(w.clone()),
            (BenchRows::Table(w), Order::Shuffled) => Some(Arc::new(Shuffled::new(w.clone(), rows, seed))),
            (BenchRows::Tsbs { .. }, _) => None,
        }
    }
}

/// Data fields of `conditions` (X = 5 in the published experiment).
const FIELDS: u16 = 5;

/// TPC-H's ship dates lie in 1992-01-02..=1998-12-31 (days since 1970-01-01).
const LINEITEM_FIRST_DAY: i64 = 8036;
const LINEITEM_LAST_DAY: i64 = 10_591;
const DAY_MICROS: i64 = 86_400_000_000;

/// An iot step's records: readings and diagnostics of every truck, of which
/// tsbs (and chute's generator) lose 10%.
const IOT_RECORDS_PER_TRUCK_STEP: f64 = 1.8;
/// The steps are spaced for this many times the rows asked for, so the row
/// limit, not the end of the span, ends the stream.
const IOT_MARGIN: f64 = 1.25;
/// At least this many steps, so every hourly partition of a day gets rows.
const IOT_MIN_STEPS: u64 = 48;
/// Binary rows of readings (about 123 bytes) and diagnostics (about 75)
/// average about 100 bytes.
const IOT_ROW_BYTES: usize = 100;

/// The one place that chooses the rows of a scenario (see the module docs).
pub fn workload_for(kind: WorkloadKind, rows: u64, seed: u64, shape: DataShape) -> Result<BenchWorkload, String> {
    let rows = rows.max(1);
    match kind {
        WorkloadKind::Conditions => Ok(conditions(rows, seed, shape)),
        WorkloadKind::Iot => iot(rows, seed, shape),
        WorkloadKind::Accounts | WorkloadKind::Lineitem => {
            let params = GenParams { seed, ..GenParams::default() };
            let AnyWorkload::Rows(w) = workload(kind.name(), rows, &params)? else { unreachable!("{} makes rows", kind.name()) };
            let table = BenchTable {
                name: String::new(),
                columns_sql: w.column_sql().join(", "),
                field_columns: w.columns().into_iter().skip(1).filter(|(_, t)| *t != PgType::Bpchar).map(|(n, _)| n).collect(),
            };
            let row_bytes = row_bytes(w.as_ref());
            Ok(if kind == WorkloadKind::Accounts {
                BenchWorkload {
                    kind,
                    rows: BenchRows::Table(w),
                    tables: vec![table],
                    key_column: "aid".into(),
                    key_type: KeyType::Int4,
                    key_first: 1,
                    key_last: rows as i64,
                    hash_column: "aid".into(),
                    // pgbench -i copies the rows in before it adds the primary key.
                    base_indexes: vec![],
                    description: format!(
                        "pgbench_accounts as pgbench -i fills it: aid 1..{rows}, {} branches, filler char(84); no index during the load (pgbench adds its primary key after)",
                        rows.div_ceil(100_000)
                    ),
                    row_bytes,
                }
            } else {
                BenchWorkload {
                    kind,
                    rows: BenchRows::Table(w),
                    tables: vec![table],
                    key_column: "l_shipdate".into(),
                    key_type: KeyType::Date,
                    key_first: LINEITEM_FIRST_DAY * DAY_MICROS,
                    key_last: LINEITEM_LAST_DAY * DAY_MICROS,
                    hash_column: "l_orderkey".into(),
                    base_indexes: vec![],
                    description: "TPC-H lineitem, the 7-column cut (4 bigints, 2 dates, char(25)) with TPC-H's keys and dates; no indexes"
                        .into(),
                    row_bytes,
                }
            })
        }
    }
}

fn row_bytes(w: &dyn Workload) -> usize {
    let mut row = Vec::new();
    w.encode_row(0, &mut row);
    row.len().max(1)
}

fn conditions(rows: u64, seed: u64, shape: DataShape) -> BenchWorkload {
    let devices = shape.devices.max(1);
    let ticks = rows.div_ceil(u64::from(devices)).max(1);
    // The first tick at the start, the last just before the span ends, so
    // the rows reach every partition of the span whatever their number.
    let step = if ticks > 1 { ((shape.span_micros - 1) / (ticks as i64 - 1)).max(1) } else { shape.span_micros };
    let generator = Conditions { start_micros: shape.start_micros, step_micros: step, devices, fields: FIELDS, seed };
    let columns_sql = generator
        .columns()
        .iter()
        .map(|(name, ty)| {
            // Key columns are NOT NULL, as the published schema has them.
            let not_null = if matches!(name.as_str(), "time" | "dev_id") { " NOT NULL" } else { "" };
            format!("{} {}{not_null}", quote_ident(name), ty.name())
        })
        .collect::<Vec<_>>()
        .join(", ");
    let description = format!(
        "conditions: {devices} devices, one row each every {} over {}, {FIELDS} float8 fields; index on time",
        human_micros(step),
        human_micros(shape.span_micros)
    );
    let row_bytes = row_bytes(&generator);
    BenchWorkload {
        kind: WorkloadKind::Conditions,
        key_first: generator.time_micros(0),
        key_last: generator.time_micros(rows - 1),
        rows: BenchRows::Table(Arc::new(generator)),
        tables: vec![BenchTable { name: String::new(), columns_sql, field_columns: (1..=FIELDS).map(|i| format!("data{i}")).collect() }],
        key_column: "time".into(),
        key_type: KeyType::Timestamptz,
        hash_column: "dev_id".into(),
        base_indexes: vec![quote_ident("time")],
        description,
        row_bytes,
    }
}

/// tsbs iot over the shape's span: as many trucks as the shape allows while
/// keeping at least [`IOT_MIN_STEPS`] steps, the steps spaced so that the row
/// limit is reached inside the span.
fn iot(rows: u64, seed: u64, shape: DataShape) -> Result<BenchWorkload, String> {
    let trucks = u64::from(shape.devices.max(1)).min((rows / (2 * IOT_MIN_STEPS)).max(1)) as u32;
    let steps = ((rows as f64 * IOT_MARGIN / (IOT_RECORDS_PER_TRUCK_STEP * f64::from(trucks))).ceil() as u64).max(2);
    let step_micros = (shape.span_micros / steps as i64).max(1);
    let params = GenParams {
        seed,
        scale: trucks,
        from_micros: shape.start_micros,
        to_micros: Some(shape.start_micros + shape.span_micros),
        step_micros,
        fields: FIELDS,
    };
    let AnyWorkload::Stream(mut stream) = workload("iot", rows, &params)? else { unreachable!("iot is a stream") };
    let header = first_header(stream.as_mut())?;
    let mut tables = Vec::new();
    for (m, (name, fields)) in header.measurements.iter().enumerate() {
        let columns = header.measurement_columns_sql(m).ok_or("the iot header lists no tags")?;
        tables.push(BenchTable { name: name.clone(), columns_sql: columns.join(", "), field_columns: fields.clone() });
    }
    Ok(BenchWorkload {
        kind: WorkloadKind::Iot,
        rows: BenchRows::Tsbs { params, rows },
        description: format!(
            "tsbs iot: {trucks} trucks, readings and diagnostics every {} over {} ({}), with tsbs's missing readings, NULL fields and late rows; \
             indexes (tags_id, time DESC) and (time DESC) on each table",
            human_micros(step_micros),
            human_micros(shape.span_micros),
            tables.iter().map(|t| t.name.as_str()).collect::<Vec<_>>().join(" and "),
        ),
        tables,
        key_column: "time".into(),
        key_type: KeyType::Timestamptz,
        key_first: shape.start_micros,
        key_last: shape.start_micros + shape.span_micros - 1,
        hash_column: "tags_id".into(),
        base_indexes: vec![r#""tags_id", "time" DESC"#.to_owned(), r#""time" DESC"#.to_owned()],
        row_bytes: IOT_ROW_BYTES,
    })
}

/// The header block a stream starts with.
fn first_header(stream: &mut dyn StreamWorkload) -> Result<chute_core::parse::tsbs::TsbsHeader, String> {
    let mut buf = Vec::new();
    while stream.fill(&mut buf) {
        if let Some((header, _, _)) = parse_tsbs_header(&buf).map_err(|e| e.to_string())? {
            return Ok(header);
        }
    }
    Err("the iot stream has no header".into())
}

/// `86 s`, `1.5 h`, `6 d`: a duration as people read it.
fn human_micros(micros: i64) -> String {
    let s = micros as f64 / 1e6;
    match s {
        s if s < 120.0 => format!("{s:.0} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s if s < 172_800.0 => format!("{:.0} h", s / 3600.0),
        s => format!("{:.0} days", s / 86_400.0),
    }
}

/// A workload whose row `seq` is the inner workload's row `perm(seq)`: the
/// same rows, in a seeded random order, still regenerable by sequence number.
#[derive(Debug)]
pub struct Shuffled {
    inner: Arc<dyn Workload>,
    perm: Permutation,
    rows: u64,
    seed: u64,
}

impl Shuffled {
    pub fn new(inner: Arc<dyn Workload>, rows: u64, seed: u64) -> Self {
        Shuffled { inner, perm: Permutation::new(rows, seed), rows, seed }
    }
}

impl Workload for Shuffled {
    fn identity(&self) -> String {
        format!("shuffled v1 rows={} seed={} of {}", self.rows, self.seed, self.inner.identity())
    }

    fn columns(&self) -> Vec<(String, PgType)> {
        self.inner.columns()
    }

    fn encode_row(&self, seq: u64, out: &mut Vec<u8>) {
        self.inner.encode_row(self.perm.apply(seq), out);
    }

    fn write_csv(&self, seq: u64, out: &mut Vec<u8>) {
        self.inner.write_csv(self.perm.apply(seq), out);
    }

    fn time_micros(&self, seq: u64) -> i64 {
        self.inner.time_micros(self.perm.apply(seq))
    }

    fn column_sql(&self) -> Vec<String> {
        self.inner.column_sql()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: DataShape = DataShape { start_micros: 1_609_459_200_000_000, span_micros: 86_400_000_000, devices: 10 };

    fn table_rows(w: &BenchWorkload) -> Arc<dyn Workload> {
        w.ordered(Order::Sorted, 0, 0).expect("rows of a table")
    }

    #[test]
    fn shuffled_rows_are_the_same_rows() {
        let w = workload_for(WorkloadKind::Conditions, 1000, 1, SHAPE).unwrap();
        let shuffled = w.ordered(Order::Shuffled, 1000, 7).unwrap();
        let rows = |g: &dyn Workload| {
            let mut all: Vec<Vec<u8>> = (0..1000)
                .map(|i| {
                    let mut r = Vec::new();
                    g.write_csv(i, &mut r);
                    r
                })
                .collect();
            all.sort();
            all
        };
        assert_eq!(rows(&*table_rows(&w)), rows(&*shuffled));
        let times: Vec<i64> = (0..1000).map(|i| shuffled.time_micros(i)).collect();
        assert!(!times.is_sorted(), "shuffled rows come out of time order");
    }

    #[test]
    fn conditions_span_the_shape_and_end_at_key_last() {
        let w = workload_for(WorkloadKind::Conditions, 1000, 1, SHAPE).unwrap();
        let g = table_rows(&w);
        assert_eq!(g.time_micros(0), SHAPE.start_micros);
        assert_eq!(w.key_first, SHAPE.start_micros);
        assert_eq!(g.time_micros(999), w.key_last);
        assert!(w.key_last < SHAPE.start_micros + SHAPE.span_micros);
        assert!(w.key_last > SHAPE.start_micros + SHAPE.span_micros * 9 / 10);
        assert_eq!(w.extra_index(&w.tables[0], 0).as_deref(), Some(r#""data1", "time" DESC"#));
        assert_eq!(w.extra_index(&w.tables[0], 5), None);
        assert!(w.tables[0].columns_sql.starts_with(r#""time" timestamptz NOT NULL, "dev_id" int4 NOT NULL, "data1" float8"#));
        assert_eq!(w.row_bytes, 82);
    }

    #[test]
    fn accounts_and_lineitem_are_the_real_generators() {
        let a = workload_for(WorkloadKind::Accounts, 250_000, 1, SHAPE).unwrap();
        assert_eq!(a.tables[0].columns_sql, r#""aid" int, "bid" int, "abalance" int, "filler" char(84)"#);
        assert_eq!((a.key_first, a.key_last, a.key_type), (1, 250_000, KeyType::Int4));
        assert_eq!(a.hash_column, "aid");
        assert_eq!(table_rows(&a).time_micros(249_999), 250_000);
        assert_eq!(a.tables[0].field_columns, ["bid", "abalance"]);
        assert!(a.description.contains("3 branches"), "{}", a.description);

        let l = workload_for(WorkloadKind::Lineitem, 10_000, 1, SHAPE).unwrap();
        assert!(l.tables[0].columns_sql.contains(r#""l_shipdate" date"#), "{}", l.tables[0].columns_sql);
        assert_eq!(l.key_type, KeyType::Date);
        let g = table_rows(&l);
        for seq in 0..10_000 {
            let t = g.time_micros(seq);
            assert!((l.key_first..=l.key_last).contains(&t), "row {seq}: {t}");
        }
    }

    #[test]
    fn iot_is_a_tsbs_stream_into_readings_and_diagnostics() {
        let rows = 20_000;
        let w = workload_for(WorkloadKind::Iot, rows, 1, DataShape { devices: 1000, ..SHAPE }).unwrap();
        let names: Vec<&str> = w.tables.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["diagnostics", "readings"], "in the header's order");
        assert!(
            w.tables[1].columns_sql.starts_with(r#"time timestamptz NOT NULL, tags_id integer, "name" text, "latitude" double precision"#),
            "{}",
            w.tables[1].columns_sql
        );
        assert_eq!(w.extra_index(&w.tables[0], 0).as_deref(), Some(r#""fuel_state", "time" DESC"#));
        assert!(w.ordered(Order::Sorted, rows, 1).is_none());
        let BenchRows::Tsbs { params, rows: limit } = &w.rows else { panic!("iot is a stream") };
        assert_eq!(*limit, rows);
        // The stream holds exactly `rows` records, all inside the span.
        let AnyWorkload::Stream(mut s) = workload("iot", rows, params).unwrap() else { panic!() };
        let mut buf = Vec::new();
        while s.fill(&mut buf) {}
        assert_eq!(s.rows(), rows);
        let text = String::from_utf8(buf).unwrap();
        let times: Vec<i64> = text.lines().filter(|l| !l.starts_with("tags")).filter_map(|l| l.split(',').nth(1)?.parse().ok()).collect();
        assert_eq!(times.len() as u64, rows);
        let last_ns = *times.iter().max().unwrap();
        assert!(last_ns / 1000 <= w.key_last, "the last record at {last_ns} ns is past the span");
        // 20,000 rows / 96 = 208 trucks, so at least 48 steps.
        assert!(w.description.starts_with("tsbs iot: 208 trucks"), "{}", w.description);
    }

    #[test]
    fn workloads_parse_by_name() {
        for k in WORKLOAD_KINDS {
            assert_eq!(WorkloadKind::parse(k.name()).unwrap(), *k);
        }
        assert!(WorkloadKind::parse("devops").unwrap_err().contains("conditions, iot, accounts, lineitem"));
    }
}
