//! `chute bench`: every built-in scenario runs small against a real server
//! and leaves results.csv, rates.csv, report.html and the charts, with sane
//! content. Speed is not checked here (a test asserts behaviour).

use std::collections::HashMap;

use chute_testkit::shared;

use crate::common::{chute, open_tempdir, read_csv, run_expect};

const ROWS: &str = "20000";

fn num(row: &HashMap<String, String>, col: &str) -> f64 {
    row[col].parse().unwrap_or_else(|_| panic!("{col} = {:?} is not a number in {row:?}", row[col]))
}

/// What a bench run left behind.
struct BenchFiles {
    results: Vec<HashMap<String, String>>,
    db: chute_testkit::TestDb,
    out: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

/// Runs a scenario at ROWS rows in a fresh database and checks the files
/// every scenario must leave, with `cells` in this order.
async fn bench(hint: &str, scenario: &str, extra: &[&str], cells: &[&str]) -> BenchFiles {
    let db = shared().fresh_db(hint).await;
    let dir = open_tempdir();
    let out = dir.path().join("out");
    let (stdout, _) =
        run_expect(chute().args(["--url", &db.url(), "bench", scenario, "--rows", ROWS, "--out", out.to_str().unwrap()]).args(extra), 0);

    let results = read_csv(&out.join("results.csv"));
    let names: Vec<&str> = results.iter().map(|r| r["cell"].as_str()).collect();
    assert_eq!(names, cells, "the cells of {scenario}");
    for r in &results {
        assert_eq!(r["scenario"], scenario);
        assert_eq!(r["rows"], ROWS, "{r:?}");
        assert!(num(r, "rows_per_s") > 0.0 && num(r, "seconds") > 0.0 && num(r, "mb_per_s") > 0.0, "{r:?}");
        assert!(num(r, "table_bytes") > 0.0 && num(r, "wal_bytes") >= 0.0 && num(r, "partitions") >= 1.0, "{r:?}");
        assert!(num(r, "checkpoints_timed") >= 0.0 && num(r, "checkpoints_requested") >= 0.0, "{r:?}");
    }

    let rates = read_csv(&out.join("rates.csv"));
    for cell in cells {
        let rows: Vec<f64> = rates.iter().filter(|r| r["cell"] == *cell).map(|r| num(r, "rows_loaded")).collect();
        assert!(!rows.is_empty(), "no rates for {cell}");
        assert!(rows.windows(2).all(|w| w[0] <= w[1]), "rows go down for {cell}: {rows:?}");
        assert_eq!(rows.last().copied(), Some(20000.0), "{cell} ends at every row");
        let secs: Vec<f64> = rates.iter().filter(|r| r["cell"] == *cell).map(|r| num(r, "seconds")).collect();
        assert!(secs.windows(2).all(|w| w[0] <= w[1]), "time goes back for {cell}: {secs:?}");
    }

    let html = std::fs::read_to_string(out.join("report.html")).unwrap();
    let svg_files: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "svg"))
        .collect();
    assert_eq!(svg_files.len(), 4, "one file per chart: {svg_files:?}");
    assert_eq!(html.matches("<svg").count(), svg_files.len(), "every chart inline in the report");
    assert!(!html.contains("http://") && !html.contains("https://"), "the report fetches nothing");
    assert!(!html.contains("<script") && !html.contains("<link"), "no scripts or external styles");
    for cell in cells {
        assert!(html.contains(&format!("<td>{cell}</td>")), "{cell} in the report's table");
    }
    for f in &svg_files {
        let svg = std::fs::read_to_string(f).unwrap();
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\"") && svg.trim_end().ends_with("</svg>"), "{}", f.display());
    }
    crate::simulate::no_machine_path(&out, dir.path());
    for setting in ["shared_buffers", "max_wal_size", "checkpoint_timeout", "synchronous_commit", "wal_level"] {
        assert!(html.contains(&format!("<th>{setting}</th>")), "{setting} in the report");
    }

    // The stdout table has a line per cell; the bench left no table behind.
    for cell in cells {
        assert!(stdout.lines().any(|l| l.starts_with(&format!("{cell} "))), "{cell} in:\n{stdout}");
    }
    let left: bool = db.client().await.query_one("SELECT to_regnamespace('chute_bench') IS NULL", &[]).await.unwrap().get(0);
    assert!(left, "the bench schema was dropped");
    BenchFiles { results, db, out, _dir: dir }
}

fn column<'a>(f: &'a BenchFiles, col: &str) -> Vec<&'a str> {
    f.results.iter().map(|r| r[col].as_str()).collect()
}

#[tokio::test]
async fn partitioned_vs_single() {
    let f = bench("bench_pvs", "partitioned-vs-single", &[], &["single-idx0", "single-idx1", "hourly-idx0", "hourly-idx1"]).await;
    assert_eq!(column(&f, "layout"), ["single", "single", "range:1h", "range:1h"]);
    // tsbs iot fills two tables, readings and diagnostics.
    assert_eq!(column(&f, "partitions"), ["2", "2", "48", "48"], "a day of rows in hourly partitions made up front");
    assert_eq!(column(&f, "extra_indexes"), ["0", "1", "0", "1"]);
    assert_eq!(column(&f, "workers"), ["4", "4", "4", "4"], "4 COPY workers, as published");
    let html = std::fs::read_to_string(f.out.join("report.html")).unwrap();
    assert!(html.contains("Data: tsbs iot: 208 trucks, readings and diagnostics every"), "the report says what was loaded");
    let idx = |i: usize| num(&f.results[i], "index_bytes");
    assert!(idx(1) > idx(0) && idx(3) > idx(2), "the extra index takes room");
}

#[tokio::test]
async fn conditions() {
    let f = bench("bench_cond", "conditions", &["--repeat", "2"], &["plain", "weekly", "monthly"]).await;
    assert_eq!(column(&f, "runs"), ["2", "2", "2"], "each cell ran twice");
    for r in &f.results {
        assert!(num(r, "seconds_min") <= num(r, "seconds") && num(r, "seconds") <= num(r, "seconds_max"), "{r:?}");
    }
    assert_eq!(column(&f, "partitions"), ["1", "27", "6"], "half a year: 27 weeks (Monday to Monday) or 6 months");
    assert_eq!(column(&f, "batch_rows"), ["10000", "10000", "10000"]);
    let html = std::fs::read_to_string(f.out.join("report.html")).unwrap();
    assert!(html.contains("Data: conditions: 1000 devices"), "the report says what was loaded");
}

#[tokio::test]
async fn hash_vs_range() {
    // Few partitions keep the test short; the default is 200 and 800.
    let mut cells = Vec::new();
    for loader in ["psql", "chute"] {
        for order in ["sorted", "shuffled"] {
            for layout in ["single", "range4", "hash4", "range16", "hash16"] {
                cells.push(format!("{layout}-{order}-{loader}"));
            }
        }
    }
    let cells: Vec<&str> = cells.iter().map(String::as_str).collect();
    let f = bench("bench_hvr", "hash-vs-range", &["--partitions", "4,16"], &cells).await;
    assert_eq!(&column(&f, "partitions")[..5], ["1", "4", "4", "16", "16"]);
    assert_eq!(&column(&f, "layout")[..5], ["single", "ranges:4", "hash:4", "ranges:16", "hash:16"]);
    assert!(f.results[..10].iter().all(|r| r["loader"] == "psql-copy" && r["workers"] == "1" && r["batch_rows"].is_empty()));
    assert!(f.results[10..].iter().all(|r| r["loader"] == "chute"));
    // Shuffled input is the same rows: the same table size.
    assert_eq!(f.results[1]["table_bytes"], f.results[6]["table_bytes"]);
}

#[tokio::test]
async fn parallel_copy() {
    let f =
        bench("bench_pc", "parallel-copy", &["--workers", "1,2"], &["w1-logged", "w2-logged", "w1-unlogged", "w2-unlogged", "psql-copy"])
            .await;
    assert_eq!(column(&f, "workers"), ["1", "2", "1", "2", "1"]);
    assert_eq!(column(&f, "unlogged"), ["false", "false", "true", "true", "false"]);
    assert_eq!(column(&f, "index_bytes"), ["0", "0", "0", "0", "0"], "lineitem loads without indexes");
    let persistence: Vec<String> =
        f.db.client()
            .await
            .query("SELECT DISTINCT relpersistence::text FROM pg_class WHERE relnamespace = 'chute_bench'::regnamespace", &[])
            .await
            .map(|rows| rows.iter().map(|r| r.get(0)).collect())
            .unwrap_or_default();
    assert!(persistence.is_empty(), "the bench schema is gone: {persistence:?}");
}

#[tokio::test]
async fn custom_matrix_changes_one_dimension_per_cell() {
    let f = bench(
        "bench_custom",
        "custom",
        &[
            "--layout",
            "range:1h,range:1h+hash:4,hash:8",
            "--order",
            "sorted,shuffled",
            "--loader",
            "chute,chute-via-parent,psql-copy",
            "--indexes",
            "0,2",
            "--batch-rows",
            "5000,1000",
        ],
        &[
            "baseline",
            "layout=range:1h+hash:4",
            "layout=hash:8",
            "indexes=2",
            "order=shuffled",
            "loader=chute-via-parent",
            "loader=psql-copy",
            "batch-rows=1000",
        ],
    )
    .await;
    assert_eq!(column(&f, "partitions"), ["48", "192", "8", "48", "48", "48", "48", "48"]);
    assert_eq!(column(&f, "batch_rows"), ["5000", "5000", "5000", "5000", "5000", "5000", "", "1000"]);
    assert_eq!(f.results[5]["loader"], "chute-via-parent");
    let html = std::fs::read_to_string(f.out.join("report.html")).unwrap();
    assert!(html.contains("loader=chute-via-parent: rows went through the parent (--via-parent was given)"), "the report says why");
}

#[tokio::test]
async fn custom_with_another_workload() {
    let f = bench(
        "bench_custom_accounts",
        "custom",
        &["--workload", "accounts", "--layout", "ranges:4,hash:4", "--order", "sorted,shuffled"],
        &["baseline", "layout=hash:4", "order=shuffled"],
    )
    .await;
    assert_eq!(column(&f, "partitions"), ["4", "4", "4"]);
    assert_eq!(column(&f, "index_bytes"), ["0", "0", "0"], "pgbench loads accounts before its primary key");
    let html = std::fs::read_to_string(f.out.join("report.html")).unwrap();
    assert!(html.contains("Data: pgbench_accounts"), "the report says what was loaded");
}

#[test]
fn dry_run_lists_cells_and_options_that_do_not_apply_are_refused() {
    let (out, _) = run_expect(chute().args(["bench", "parallel-copy", "--dry-run", "--workers", "1,8"]), 0);
    assert!(out.contains("5 cells"), "{out}");
    assert!(out.contains("w8-unlogged") && out.contains("8 workers"), "{out}");
    let (_, err) = run_expect(chute().args(["bench", "conditions", "--dry-run", "--layout", "hash:4"]), 2);
    assert!(err.contains("define the custom scenario"), "{err}");
    let (_, err) = run_expect(chute().args(["bench", "custom", "--dry-run", "--layout", "range:5"]), 2);
    assert!(err.contains("ranges are over time"), "{err}");
    let (out, _) = run_expect(chute().args(["bench", "custom", "--dry-run", "--workload", "lineitem", "--layout", "single,range:1mon"]), 0);
    assert!(out.contains("-- data: TPC-H lineitem"), "{out}");
    let cases: &[(&[&str], &str)] = &[
        (&["--workload", "iot", "--order", "sorted,shuffled"], "cannot be shuffled"),
        (&["--workload", "iot", "--loader", "chute,psql-copy"], "psql \\copy loads CSV into one"),
        (&["--workload", "accounts", "--layout", "single,range:1h"], "time ranges do not apply; use ranges:N"),
        (&["--workload", "devops"], "choose conditions, iot, accounts, lineitem"),
    ];
    for (args, message) in cases {
        let (_, err) = run_expect(chute().args(["bench", "custom", "--dry-run"]).args(*args), 2);
        assert!(err.contains(message), "{args:?}: {err}");
    }
    let (_, err) = run_expect(chute().args(["bench", "conditions", "--dry-run", "--workload", "iot"]), 2);
    assert!(err.contains("--workload goes with custom"), "{err}");
}
