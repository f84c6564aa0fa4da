//! The built-in scenarios: published experiments as matrices of cells.
//!
//! Each scenario fixes a workload, the span its rows cover and a list of
//! cells that differ in the variable the experiment is about. They run small
//! by default (`--rows` scales every cell alike); options that would change
//! what a scenario compares are refused rather than silently ignored.
//! `custom` builds a matrix from the command line: the first value of every
//! dimension is the baseline, and each other value makes one cell that
//! changes that dimension alone.

use chute_core::partman::interval::{Span, Unit};

use crate::cell::{Cell, Layout, Loader, Order};
use crate::workload::{DataShape, WorkloadKind};

/// 2021-01-01T00:00:00Z: every scenario's rows start here, whatever the clock says.
pub const DATA_START_MICROS: i64 = 1_609_459_200_000_000;

const HOUR: i64 = 3_600_000_000;
const DAY: i64 = 24 * HOUR;

/// The scenarios `chute bench` knows, with what each reproduces.
pub const SCENARIOS: &[(&str, &str)] = &[
    (
        "partitioned-vs-single",
        "tsbs IoT: hourly partitions vs one table, with 0 and 1 extra field index (227,590 vs 104,611 rows/s published)",
    ),
    (
        "conditions",
        "conditions (X=5 fields, batches of 10,000 rows): plain vs weekly vs monthly partitions (325 K vs 265 K rows/s published)",
    ),
    (
        "hash-vs-range",
        "pgbench_accounts: 200-800 range or hash partitions vs one table, ordered and unordered input (published: range COPY +20-25% time, hash +60-180% time vs unpartitioned)",
    ),
    (
        "parallel-copy",
        "TPC-H lineitem: 1..N parallel COPY streams, logged vs unlogged (published: 6.7-9.0 M rows/s with 24 parallel COPY over 16 data nodes)",
    ),
    ("custom", "a matrix from --workload, --layout, --indexes, --order, --loader, --workers, --batch-rows (first value = baseline)"),
];

/// What the command line asks of a scenario. Empty lists mean "the scenario's default".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatrixOptions {
    pub rows: u64,
    /// The machine's cores (the loader's default worker count).
    pub cores: usize,
    pub workers: Vec<usize>,
    pub batch_rows: Vec<u64>,
    pub unlogged: bool,
    /// hash-vs-range: partition counts.
    pub partitions: Vec<u32>,
    /// custom: dimensions.
    pub layouts: Vec<Layout>,
    pub indexes: Vec<u32>,
    pub orders: Vec<Order>,
    pub loaders: Vec<Loader>,
    /// custom: the rows (default conditions).
    pub workload: Option<WorkloadKind>,
    /// Runs of each cell (the median run is reported).
    pub repeat: u32,
}

impl MatrixOptions {
    pub fn new(rows: u64, cores: usize) -> Self {
        MatrixOptions {
            rows,
            cores,
            workers: vec![],
            batch_rows: vec![],
            unlogged: false,
            partitions: vec![],
            layouts: vec![],
            indexes: vec![],
            orders: vec![],
            loaders: vec![],
            workload: None,
            repeat: 1,
        }
    }
}

/// A scenario, ready to run.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub name: String,
    /// What the published experiment found, for the report.
    pub reproduces: String,
    pub workload: WorkloadKind,
    pub shape: DataShape,
    pub cells: Vec<Cell>,
    /// Runs of each cell, each on a fresh table; the median run is reported.
    pub repeat: u32,
}

/// Extra field indexes beyond this would index columns the workload lacks.
pub const MAX_EXTRA_INDEXES: u32 = 5;

pub fn build(name: &str, o: &MatrixOptions) -> Result<Scenario, String> {
    if o.rows == 0 {
        return Err("--rows must be at least 1".into());
    }
    if o.workers.contains(&0) {
        return Err("--workers must be at least 1".into());
    }
    if o.batch_rows.contains(&0) {
        return Err("--batch-rows must be at least 1".into());
    }
    if name != "custom" && !(o.layouts.is_empty() && o.indexes.is_empty() && o.orders.is_empty() && o.loaders.is_empty()) {
        return Err(format!("--layout, --indexes, --order and --loader define the custom scenario; {name} has its own cells"));
    }
    if name != "custom" && o.workload.is_some() {
        return Err(format!("--workload goes with custom; {name} loads the workload of the experiment it reproduces"));
    }
    if name != "hash-vs-range" && !o.partitions.is_empty() {
        return Err("--partitions goes with hash-vs-range".into());
    }
    if name != "custom" && o.batch_rows.len() > 1 {
        return Err(format!("{name} takes one --batch-rows value; only custom compares several"));
    }
    if !matches!(name, "custom" | "parallel-copy") && o.workers.len() > 1 {
        return Err(format!("{name} takes one --workers value; parallel-copy and custom compare several"));
    }
    if o.indexes.iter().any(|&i| i > MAX_EXTRA_INDEXES) {
        return Err(format!("--indexes: at most {MAX_EXTRA_INDEXES} extra indexes (one per data field)"));
    }
    let mut s = match name {
        "partitioned-vs-single" => partitioned_vs_single(o),
        "conditions" => conditions(o),
        "hash-vs-range" => hash_vs_range(o)?,
        "parallel-copy" => parallel_copy(o)?,
        "custom" => custom(o),
        other => {
            let names: Vec<&str> = SCENARIOS.iter().map(|(n, _)| *n).collect();
            return Err(format!("unknown scenario {other:?}: choose one of {}", names.join(", ")));
        }
    };
    if !(1..=100).contains(&o.repeat) {
        return Err("--repeat must be 1 to 100".into());
    }
    s.repeat = o.repeat;
    s.reproduces = SCENARIOS.iter().find(|(n, _)| *n == name).map(|(_, d)| (*d).to_owned()).unwrap_or_default();
    Ok(s)
}

/// A cell with the scenario-wide settings; the scenario changes one field.
fn base(o: &MatrixOptions, name: &str, layout: Layout, default_workers: usize) -> Cell {
    Cell {
        name: name.to_owned(),
        layout,
        extra_indexes: 0,
        order: Order::Sorted,
        loader: Loader::Chute,
        workers: o.workers.first().copied().unwrap_or(default_workers),
        batch_rows: o.batch_rows.first().copied(),
        rows: o.rows,
        unlogged: o.unlogged,
    }
}

fn scenario(name: &str, workload: WorkloadKind, span_micros: i64, devices: u32, cells: Vec<Cell>) -> Scenario {
    Scenario {
        name: name.to_owned(),
        reproduces: String::new(),
        workload,
        shape: DataShape { start_micros: DATA_START_MICROS, span_micros, devices },
        cells,
        repeat: 1,
    }
}

fn time(n: u32, unit: Unit) -> Span {
    Span::Time { n, unit }
}

/// tsbs IoT: 4 COPY workers (as published), a day of data in 24 hourly partitions.
fn partitioned_vs_single(o: &MatrixOptions) -> Scenario {
    let mut cells = Vec::new();
    for (label, layout) in [("single", Layout::Single), ("hourly", Layout::Range(time(1, Unit::Hours)))] {
        for idx in [0, 1] {
            cells.push(Cell { extra_indexes: idx, ..base(o, &format!("{label}-idx{idx}"), layout, 4) });
        }
    }
    scenario("partitioned-vs-single", WorkloadKind::Iot, DAY, 1000, cells)
}

/// conditions: half a year of data (27 weekly or 6 monthly partitions), batches of 10,000 rows.
fn conditions(o: &MatrixOptions) -> Scenario {
    let cells =
        [("plain", Layout::Single), ("weekly", Layout::Range(time(1, Unit::Weeks))), ("monthly", Layout::Range(time(1, Unit::Months)))]
            .into_iter()
            .map(|(name, layout)| Cell {
                batch_rows: Some(o.batch_rows.first().copied().unwrap_or(10_000)),
                ..base(o, name, layout, o.cores)
            })
            .collect();
    scenario("conditions", WorkloadKind::Conditions, 181 * DAY, 1000, cells)
}

/// pgbench_accounts: the same rows into one table, P range partitions or P
/// hash partitions, sorted and shuffled, through the server's COPY into the
/// parent (as pgbench loads) and through chute's client-side routing.
fn hash_vs_range(o: &MatrixOptions) -> Result<Scenario, String> {
    let counts = if o.partitions.is_empty() { vec![200, 800] } else { o.partitions.clone() };
    let most = *counts.iter().max().expect("not empty");
    if counts.contains(&0) || most > 10_000 {
        return Err("--partitions: each count must be 1 to 10000".into());
    }
    // As pgbench -i --partitions=P: P equal ranges of aid, or P hash partitions.
    let mut layouts = vec![("single".to_owned(), Layout::Single)];
    for &p in &counts {
        layouts.push((format!("range{p}"), Layout::Ranges(p)));
        layouts.push((format!("hash{p}"), Layout::Hash(p)));
    }
    let mut cells = Vec::new();
    for (loader, tag) in [(Loader::PsqlCopy, "psql"), (Loader::Chute, "chute")] {
        for order in [Order::Sorted, Order::Shuffled] {
            for (label, layout) in &layouts {
                let mut c = base(o, &format!("{label}-{order}-{tag}"), *layout, o.cores);
                c.order = order;
                c.loader = loader;
                cells.push(psql_fixups(c));
            }
        }
    }
    Ok(scenario("hash-vs-range", WorkloadKind::Accounts, DAY, 1000, cells))
}

/// lineitem: one table without indexes, 1..N COPY streams, logged and unlogged;
/// one psql \copy stream as the server's own reference.
fn parallel_copy(o: &MatrixOptions) -> Result<Scenario, String> {
    if o.unlogged {
        return Err("parallel-copy compares logged and unlogged tables itself; leave out --unlogged".into());
    }
    let streams = if o.workers.is_empty() { vec![1, 2, 4] } else { o.workers.clone() };
    let mut cells = Vec::new();
    for unlogged in [false, true] {
        for &w in &streams {
            let tag = if unlogged { "unlogged" } else { "logged" };
            cells.push(Cell { workers: w, unlogged, ..base(o, &format!("w{w}-{tag}"), Layout::Single, w) });
        }
    }
    cells.push(psql_fixups(Cell { loader: Loader::PsqlCopy, ..base(o, "psql-copy", Layout::Single, 1) }));
    Ok(scenario("parallel-copy", WorkloadKind::Lineitem, DAY, 1000, cells))
}

/// custom: the baseline cell, then one cell per other value of each dimension.
fn custom(o: &MatrixOptions) -> Scenario {
    let first = |v: &[u64]| v.first().copied();
    let baseline = Cell {
        extra_indexes: o.indexes.first().copied().unwrap_or(0),
        order: o.orders.first().copied().unwrap_or(Order::Sorted),
        loader: o.loaders.first().copied().unwrap_or(Loader::Chute),
        batch_rows: first(&o.batch_rows),
        ..base(o, "baseline", o.layouts.first().copied().unwrap_or(Layout::Single), o.cores)
    };
    let mut cells = vec![psql_fixups(baseline.clone())];
    let mut vary = |name: String, change: &dyn Fn(&mut Cell)| {
        let mut c = Cell { name, ..baseline.clone() };
        change(&mut c);
        cells.push(psql_fixups(c));
    };
    for &l in o.layouts.iter().skip(1) {
        vary(format!("layout={l}"), &|c| c.layout = l);
    }
    for &i in o.indexes.iter().skip(1) {
        vary(format!("indexes={i}"), &|c| c.extra_indexes = i);
    }
    for &r in o.orders.iter().skip(1) {
        vary(format!("order={r}"), &|c| c.order = r);
    }
    for &l in o.loaders.iter().skip(1) {
        vary(format!("loader={l}"), &|c| c.loader = l);
    }
    for &w in o.workers.iter().skip(1) {
        vary(format!("workers={w}"), &|c| c.workers = w);
    }
    for &b in o.batch_rows.iter().skip(1) {
        vary(format!("batch-rows={b}"), &|c| c.batch_rows = Some(b));
    }
    // Two days: 48 hourly or 2 daily partitions.
    scenario("custom", o.workload.unwrap_or(WorkloadKind::Conditions), 2 * DAY, 1000, cells)
}

/// psql \copy is one stream with the server's own batching.
fn psql_fixups(mut c: Cell) -> Cell {
    if c.loader == Loader::PsqlCopy {
        c.workers = 1;
        c.batch_rows = None;
    }
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &Scenario) -> Vec<&str> {
        s.cells.iter().map(|c| c.name.as_str()).collect()
    }

    #[test]
    fn every_listed_scenario_builds_with_unique_cell_names() {
        for (name, _) in SCENARIOS {
            let s = build(name, &MatrixOptions::new(1000, 2)).unwrap();
            let mut n = names(&s);
            n.sort();
            n.dedup();
            assert_eq!(n.len(), s.cells.len(), "{name}: duplicate cell names");
            assert!(s.cells.iter().all(|c| c.rows == 1000));
            assert!(!s.reproduces.is_empty());
        }
    }

    #[test]
    fn partitioned_vs_single_changes_layout_and_indexes() {
        let s = build("partitioned-vs-single", &MatrixOptions::new(1000, 2)).unwrap();
        assert_eq!(names(&s), ["single-idx0", "single-idx1", "hourly-idx0", "hourly-idx1"]);
        assert!(s.cells.iter().all(|c| c.workers == 4 && c.loader == Loader::Chute));
        assert_eq!(s.cells[3].layout.to_string(), "range:1h");
        assert_eq!(s.cells[3].extra_indexes, 1);
    }

    #[test]
    fn hash_vs_range_range_partitions_match_the_hash_counts() {
        let mut o = MatrixOptions::new(1000, 2);
        o.partitions = vec![20, 80];
        let s = build("hash-vs-range", &o).unwrap();
        assert_eq!(s.cells.len(), 2 * 2 * 5);
        let layout = |n: &str| s.cells.iter().find(|c| c.name == n).unwrap().layout.to_string();
        assert_eq!(layout("range20-sorted-psql"), "ranges:20");
        assert_eq!(layout("range80-shuffled-chute"), "ranges:80");
        assert_eq!(layout("hash80-sorted-chute"), "hash:80");
        assert_eq!(s.workload, WorkloadKind::Accounts);
        assert!(s.cells.iter().filter(|c| c.loader == Loader::PsqlCopy).all(|c| c.workers == 1));
    }

    #[test]
    fn parallel_copy_varies_streams_and_logging() {
        let mut o = MatrixOptions::new(1000, 2);
        o.workers = vec![1, 3];
        let s = build("parallel-copy", &o).unwrap();
        assert_eq!(names(&s), ["w1-logged", "w3-logged", "w1-unlogged", "w3-unlogged", "psql-copy"]);
        assert_eq!(s.cells[3].workers, 3);
        assert!(s.cells[3].unlogged);
        o.unlogged = true;
        assert!(build("parallel-copy", &o).unwrap_err().contains("--unlogged"));
    }

    #[test]
    fn custom_changes_one_dimension_per_cell() {
        let mut o = MatrixOptions::new(500, 2);
        o.layouts = vec![Layout::Single, Layout::parse("range:1h").unwrap()];
        o.orders = vec![Order::Sorted, Order::Shuffled];
        o.loaders = vec![Loader::Chute, Loader::PsqlCopy];
        o.workers = vec![2, 4];
        let s = build("custom", &o).unwrap();
        assert_eq!(names(&s), ["baseline", "layout=range:1h", "order=shuffled", "loader=psql-copy", "workers=4"]);
        let b = &s.cells[0];
        let changed = |c: &Cell| {
            [c.layout != b.layout, c.order != b.order, c.loader != b.loader, c.workers != b.workers && c.loader == b.loader]
                .iter()
                .filter(|x| **x)
                .count()
        };
        assert!(s.cells[1..].iter().all(|c| changed(c) == 1));
    }

    #[test]
    fn options_that_do_not_apply_are_refused() {
        let mut o = MatrixOptions::new(1000, 2);
        o.layouts = vec![Layout::Single];
        assert!(build("conditions", &o).is_err());
        let mut o = MatrixOptions::new(1000, 2);
        o.workers = vec![1, 2];
        assert!(build("conditions", &o).unwrap_err().contains("one --workers"));
        let mut o = MatrixOptions::new(1000, 2);
        o.partitions = vec![4];
        assert!(build("conditions", &o).is_err());
        let mut o = MatrixOptions::new(1000, 2);
        o.workload = Some(WorkloadKind::Accounts);
        assert!(build("conditions", &o).unwrap_err().contains("--workload goes with custom"));
        assert_eq!(build("custom", &o).unwrap().workload, WorkloadKind::Accounts);
        assert!(build("nope", &MatrixOptions::new(1, 2)).unwrap_err().contains("partitioned-vs-single"));
        assert!(build("conditions", &MatrixOptions::new(0, 2)).is_err());
    }

    #[test]
    fn conditions_batches_ten_thousand_rows() {
        let s = build("conditions", &MatrixOptions::new(1000, 2)).unwrap();
        assert_eq!(names(&s), ["plain", "weekly", "monthly"]);
        assert!(s.cells.iter().all(|c| c.batch_rows == Some(10_000)));
    }
}
