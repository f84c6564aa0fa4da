//! The rows each scenario loads, chosen in one place.
//!
//! The published experiments use four workloads (tsbs `iot`, `conditions`,
//! pgbench_accounts, TPC-H lineitem). Only `conditions` exists in
//! `chute_core::generate` so far; the others are being written. Until they
//! land, [`workload_for`] gives every scenario a `conditions` generator shaped
//! to stand in (same schema, span and device count chosen per scenario) and
//! says so in [`BenchWorkload::stand_in`], which the report prints. Switching
//! to the real workloads is a change to [`workload_for`] alone (through
//! `generate::workload(name, rows, &GenParams)` once it exists): scenarios
//! only use the column names and SQL that [`BenchWorkload`] carries.

use std::sync::Arc;

use chute_core::generate::{Conditions, Workload};
use chute_core::value::PgType;

use crate::cell::Order;
use crate::permutation::Permutation;

/// The workloads of the published experiments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadKind {
    /// tsbs `iot` (readings with tags, 2-3 btree indexes).
    Iot,
    /// `conditions`: time, dev_id, data1..data5 float8.
    Conditions,
    /// pgbench_accounts (keyed by account id).
    Accounts,
    /// TPC-H lineitem.
    Lineitem,
}

impl WorkloadKind {
    pub fn name(self) -> &'static str {
        match self {
            WorkloadKind::Iot => "iot",
            WorkloadKind::Conditions => "conditions",
            WorkloadKind::Accounts => "accounts",
            WorkloadKind::Lineitem => "lineitem",
        }
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
    /// Distinct values of the hash column (devices).
    pub devices: u32,
}

/// A workload ready for the bench: the generator and what the table needs.
#[derive(Debug, Clone)]
pub struct BenchWorkload {
    pub kind: WorkloadKind,
    pub generator: Arc<dyn Workload>,
    /// Column definitions for `CREATE TABLE (…)`.
    pub columns_sql: String,
    /// The column time ranges partition on.
    pub time_column: String,
    /// The column hash layouts partition on.
    pub hash_column: String,
    /// Index column lists every table of the scenario gets (`time`, `dev_id, time DESC` …).
    pub base_indexes: Vec<String>,
    /// Columns that extra index `i` (from 0) covers, ahead of time: the data fields.
    pub field_columns: Vec<String>,
    /// Set while a stand-in replaces the real workload: what stands in, and how.
    pub stand_in: Option<String>,
    /// The time of the last row (the partition manager makes partitions up to it).
    pub last_micros: i64,
}

impl BenchWorkload {
    /// The index column list for extra index `i`, tsbs style: `(field, time DESC)`.
    pub fn extra_index(&self, i: u32) -> Option<String> {
        self.field_columns.get(i as usize).map(|f| format!("{f}, {} DESC", self.time_column))
    }

    /// The generator in the given order.
    pub fn ordered(&self, order: Order, rows: u64, seed: u64) -> Arc<dyn Workload> {
        match order {
            Order::Sorted => self.generator.clone(),
            Order::Shuffled => Arc::new(Shuffled::new(self.generator.clone(), rows, seed)),
        }
    }

    /// The size of one binary COPY row (the rows are fixed-width), to turn
    /// `--batch-rows` into the loader's batch size in bytes.
    pub fn row_bytes(&self) -> usize {
        let mut row = Vec::new();
        self.generator.encode_row(0, &mut row);
        row.len().max(1)
    }
}

/// Data fields of `conditions` (X = 5 in the published experiment).
const FIELDS: u16 = 5;

/// The one place that chooses the rows of a scenario (see the module docs).
pub fn workload_for(kind: WorkloadKind, rows: u64, seed: u64, shape: DataShape) -> BenchWorkload {
    let devices = shape.devices.max(1);
    let ticks = rows.div_ceil(u64::from(devices)).max(1);
    // The first tick at the start, the last just before the span ends, so
    // the rows reach every partition of the span whatever their number.
    let step = if ticks > 1 { ((shape.span_micros - 1) / (ticks as i64 - 1)).max(1) } else { shape.span_micros };
    let generator = Conditions { start_micros: shape.start_micros, step_micros: step, devices, fields: FIELDS, seed };
    let last_micros = generator.time_micros(rows.saturating_sub(1));
    let columns_sql = column_sql(&generator.columns());
    let fields: Vec<String> = (1..=FIELDS).map(|i| format!("data{i}")).collect();
    let (base_indexes, stand_in) = match kind {
        WorkloadKind::Conditions => (vec!["time".to_owned()], None),
        WorkloadKind::Iot => (
            vec!["dev_id, time DESC".to_owned(), "time DESC".to_owned()],
            Some(
                "tsbs iot is not in chute_core::generate yet: conditions rows stand in (dev_id for tags_id, \
                 data1..data5 for the readings fields), with tsbs's indexes (dev_id, time DESC) and (time DESC)"
                    .to_owned(),
            ),
        ),
        WorkloadKind::Accounts => (
            vec!["time".to_owned()],
            Some(
                "pgbench_accounts is not in chute_core::generate yet: conditions rows stand in, keyed by dev_id \
                 (hash layouts on dev_id, range layouts on time, so sorted input fills one range partition at a time)"
                    .to_owned(),
            ),
        ),
        WorkloadKind::Lineitem => {
            (vec![], Some("TPC-H lineitem is not in chute_core::generate yet: conditions rows stand in, loaded without indexes".to_owned()))
        }
    };
    BenchWorkload {
        kind,
        generator: Arc::new(generator),
        columns_sql,
        time_column: "time".into(),
        hash_column: "dev_id".into(),
        base_indexes,
        field_columns: fields,
        stand_in,
        last_micros,
    }
}

fn column_sql(columns: &[(String, PgType)]) -> String {
    columns
        .iter()
        .map(|(name, ty)| {
            // Key columns are NOT NULL, as the published schemas have them.
            let not_null = if matches!(name.as_str(), "time" | "dev_id") { " NOT NULL" } else { "" };
            format!("{name} {}{not_null}", ty.name())
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// A workload whose row `seq` is the inner workload's row `perm(seq)`: the
/// same rows, in a seeded random order, still regenerable by sequence number.
#[derive(Debug)]
pub struct Shuffled {
    inner: Arc<dyn Workload>,
    perm: Permutation,
}

impl Shuffled {
    pub fn new(inner: Arc<dyn Workload>, rows: u64, seed: u64) -> Self {
        Shuffled { inner, perm: Permutation::new(rows, seed) }
    }
}

impl Workload for Shuffled {
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
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: DataShape = DataShape { start_micros: 1_609_459_200_000_000, span_micros: 86_400_000_000, devices: 10 };

    #[test]
    fn shuffled_rows_are_the_same_rows() {
        let w = workload_for(WorkloadKind::Conditions, 1000, 1, SHAPE);
        let shuffled = w.ordered(Order::Shuffled, 1000, 7);
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
        assert_eq!(rows(&*w.generator), rows(&*shuffled));
        let times: Vec<i64> = (0..1000).map(|i| shuffled.time_micros(i)).collect();
        assert!(!times.is_sorted(), "shuffled rows come out of time order");
    }

    #[test]
    fn rows_span_the_shape_and_end_at_last_micros() {
        let w = workload_for(WorkloadKind::Iot, 1000, 1, SHAPE);
        assert_eq!(w.generator.time_micros(0), SHAPE.start_micros);
        assert_eq!(w.generator.time_micros(999), w.last_micros);
        assert!(w.last_micros < SHAPE.start_micros + SHAPE.span_micros);
        assert!(w.last_micros > SHAPE.start_micros + SHAPE.span_micros * 9 / 10);
        assert!(w.stand_in.is_some());
        assert_eq!(w.extra_index(0).as_deref(), Some("data1, time DESC"));
        assert_eq!(w.extra_index(5), None);
        assert!(w.columns_sql.starts_with("time timestamptz NOT NULL, dev_id int4 NOT NULL, data1 float8"), "{}", w.columns_sql);
        assert_eq!(w.row_bytes(), 82);
    }
}
