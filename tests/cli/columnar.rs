//! `chute load` of Parquet files and Arrow IPC files and streams (issue 33),
//! against a real server, with files written by pyarrow (from PyPI into
//! target/pyarrow by scripts/ensure-deps): every type loads as the server
//! reads the same value (pyarrow's CSV export through COPY, or the server's
//! cast of the text where CSV cannot carry the type), a pairing chute does
//! not load is refused before any row moves, a killed load resumes without
//! doubles, and `--create` makes a partitioned table from the file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use chute_testkit::process::spawn;
use chute_testkit::shared;
use futures_util::SinkExt;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

/// The Python of the venv that holds pyarrow, pandas and polars (made by scripts/ensure-deps).
pub fn python() -> PathBuf {
    // Tests run in parallel: the venv is made once, by whichever asks first.
    static MADE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    MADE.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let py = root.join("target/pyarrow/bin/python");
        let ready = || {
            Command::new(&py)
                .args(["-c", "import pyarrow, pandas, polars"])
                .env("PYTHONDONTWRITEBYTECODE", "1")
                .status()
                .is_ok_and(|s| s.success())
        };
        if !ready() {
            let status = Command::new("bash").arg(root.join("scripts/ensure-deps")).arg("--pyarrow").status();
            assert!(status.is_ok_and(|s| s.success()) && ready(), "cannot make target/pyarrow: run scripts/ensure-deps --pyarrow");
        }
        py
    })
    .clone()
}

/// Runs a Python script (text) in `dir` with the venv's Python; panics with its output on failure.
pub fn run_python(dir: &Path, script: &str, args: &[&str]) -> String {
    let path = dir.join("script.py");
    std::fs::write(&path, script).unwrap();
    let out = Command::new(python()).current_dir(dir).arg(&path).args(args).env("PYTHONDONTWRITEBYTECODE", "1").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "python failed:\n{stdout}\n{stderr}");
    stdout.into_owned()
}

async fn copy_csv(c: &tokio_postgres::Client, table: &str, file: &Path, header: bool) {
    let sql = format!("COPY {table} FROM STDIN (FORMAT csv{})", if header { ", HEADER" } else { "" });
    let sink = c.copy_in::<_, Bytes>(&sql).await.unwrap();
    futures_util::pin_mut!(sink);
    sink.send(Bytes::from(std::fs::read(file).unwrap())).await.unwrap();
    sink.finish().await.unwrap();
}

/// Columns of `got` that differ from the reference anywhere: `name: got vs want` per row.
async fn differences(c: &tokio_postgres::Client, got: &str, columns: &[(String, String, String)]) -> Vec<String> {
    let mut diffs = Vec::new();
    for (name, ty, how) in columns {
        let reference = if how == "csv" { "ref" } else { "ref_extra" };
        let cmp = if ty == "json" { "::jsonb" } else { "" };
        let sql = format!(
            "SELECT g.id, g.{name}::text, r.{name}::text FROM {got} g JOIN {reference} r USING (id)
             WHERE g.{name}{cmp} IS DISTINCT FROM r.{name}{cmp} ORDER BY g.id"
        );
        for row in c.query(&sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")) {
            let (id, g, r): (i32, Option<String>, Option<String>) = (row.get(0), row.get(1), row.get(2));
            diffs.push(format!("{got}.{name} ({ty}) row {id}: chute {g:?}, server {r:?}"));
        }
    }
    diffs
}

#[tokio::test]
async fn every_type_loads_as_the_server_reads_the_same_value() {
    let db = shared().fresh_db("col_types").await;
    let url = db.url();
    // Wall times into timestamptz are read in the session's zone: one with daylight saving time.
    db.client()
        .await
        .batch_execute("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET timezone = ''America/New_York''', current_database()); END $$")
        .await
        .unwrap();
    let c = db.client().await;
    let dir = open_tempdir();
    run_python(dir.path(), include_str!("columnar_types.py"), &[]);
    let spec: Vec<(String, String, String)> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("columns.json")).unwrap()).unwrap();
    let defs = |how: Option<&str>| {
        let cols: Vec<String> = spec.iter().filter(|(_, _, h)| how.is_none_or(|w| w == h)).map(|(n, t, _)| format!("{n} {t}")).collect();
        format!("id int PRIMARY KEY, {}", cols.join(", "))
    };
    for t in ["t_parquet", "t_arrow", "t_stream", "t_stdin"] {
        c.batch_execute(&format!("CREATE TABLE {t} ({})", defs(None))).await.unwrap();
    }
    c.batch_execute(&format!("CREATE TABLE ref ({}); CREATE TABLE ref_extra ({})", defs(Some("csv")), defs(Some("extra")))).await.unwrap();
    copy_csv(&c, "ref", &dir.path().join("types.csv"), true).await;
    copy_csv(&c, "ref_extra", &dir.path().join("extra.csv"), false).await;

    for (table, file) in [("t_parquet", "types.parquet"), ("t_arrow", "types.arrow"), ("t_stream", "types.arrows")] {
        let (out, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", table, file]), 0);
        assert_eq!(summary_value(&out, "rows loaded"), "6", "{table}: {err}");
    }
    // An Arrow IPC stream on stdin.
    let stream = std::fs::File::open(dir.path().join("types.arrows")).unwrap();
    let out =
        chute().current_dir(dir.path()).args(["--url", &url, "load", "t_stdin", "-", "--format", "arrow"]).stdin(stream).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary_value(&String::from_utf8_lossy(&out.stdout), "rows loaded"), "6");

    let mut diffs = Vec::new();
    for t in ["t_parquet", "t_arrow", "t_stream", "t_stdin"] {
        diffs.extend(differences(&c, t, &spec).await);
    }
    assert!(diffs.is_empty(), "{} values differ:\n{}", diffs.len(), diffs.join("\n"));
    // The check can fail: a changed value is seen.
    c.batch_execute("UPDATE t_parquet SET f32 = 0.2 WHERE id = 1").await.unwrap();
    assert_eq!(differences(&c, "t_parquet", &spec).await.len(), 1);
}

const MIXED: &str = r#"
import sys
import pyarrow as pa, pyarrow.parquet as pq
# Refused pairings: a float into an integer column, a bool into a timestamptz column.
pq.write_table(pa.table({"id": pa.array([1, 2], pa.int32()), "v": pa.array([1.5, 2.0]), "t": pa.array([True, False])}), "refused.parquet")
# Values PostgreSQL refuses: 40000 into smallint (chute knows), a string the server cannot read as a time.
pq.write_table(pa.table({
    "id": pa.array([1, 2, 3, 4], pa.int32()),
    "v": pa.array([1, 40000, 3, None], pa.int32()),
    "t": pa.array(["2024-01-01 00:00:00+00", "2024-01-01 01:00:00+00", "not a time", "2024-01-01 03:00:00+00"]),
    "extra": pa.array(["a", "b", "c", "d"]),
}), "bad.parquet")
"#;

#[tokio::test]
async fn a_pairing_chute_does_not_load_is_refused_before_any_row_and_bad_values_are_rejects_with_their_sqlstate() {
    let db = shared().fresh_db("col_refuse").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE r (id int, v integer, t timestamptz); CREATE TABLE s (id int, v smallint, t timestamptz)").await.unwrap();
    let dir = open_tempdir();
    run_python(dir.path(), MIXED, &[]);

    let (_, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "r", "refused.parquet"]), 2);
    for want in [
        r#"column "v" is integer, but the data's "v" is double"#,
        "cast the data's column to int32",
        r#"ALTER TABLE … ALTER COLUMN "v" TYPE double precision USING "v"::double precision"#,
        r#"column "t" is timestamp with time zone, but the data's "t" is bool"#,
    ] {
        assert!(err.contains(want), "no {want:?} in:\n{err}");
    }
    let n: i64 = c.query_one("SELECT count(*) FROM r", &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "nothing moved");

    // A data column the table does not have: refused with what to do.
    let (_, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "s", "bad.parquet"]), 2);
    assert!(err.contains("has no column \"extra\"") && err.contains("--columns"), "{err}");
    // --columns picks the data's columns by name (the others are not read).
    let (out, err) = run_expect(
        chute().current_dir(dir.path()).args([
            "--url",
            &url,
            "load",
            "s",
            "bad.parquet",
            "--columns",
            "t,v,id",
            "--reject-file",
            "bad.rejects",
        ]),
        1,
    );
    assert_eq!(summary_value(&out, "rows loaded"), "2", "{err}");
    let ids: Vec<i32> = crate::common::column(&c, "SELECT id FROM s ORDER BY id").await;
    assert_eq!(ids, [1, 4]);
    let rejects = std::fs::read_to_string(dir.path().join("bad.rejects")).unwrap();
    assert!(rejects.contains("value \"40000\" is out of range for type smallint") && rejects.contains("22003"), "{rejects}");
    assert!(rejects.contains("22007") && rejects.contains("not a time"), "{rejects}");
}

const ROWS: &str = r#"
import sys, datetime
import pyarrow as pa, pyarrow.parquet as pq
n = int(sys.argv[1])
start = int(datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc).timestamp()) * 10**6
ids = pa.array(range(n), pa.int64())
step = int(sys.argv[4])  # microseconds between rows
time = pa.array([start + i * step for i in range(n)], pa.timestamp("us", tz="UTC"))
dev = pa.array([i % 100 for i in range(n)], pa.int32())
vals = pa.array([i * 0.5 for i in range(n)], pa.float64())
pq.write_table(pa.table({"time": time, "id": ids, "dev_id": dev, "value": vals}), sys.argv[2], row_group_size=int(sys.argv[3]))
"#;

async fn counts(c: &tokio_postgres::Client, table: &str) -> (i64, i64, i64) {
    let exists: bool = c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&table]).await.unwrap().get(0);
    if !exists {
        return (0, 0, 0);
    }
    let r = c.query_one(&format!("SELECT count(*), count(DISTINCT id), coalesce(sum(id), 0)::int8 FROM {table}"), &[]).await.unwrap();
    (r.get(0), r.get(1), r.get(2))
}

#[tokio::test]
async fn a_parquet_load_killed_again_and_again_then_resumed_has_every_row_once() {
    let db = shared().fresh_db("col_kill").await;
    let url = db.url();
    let c = db.client().await;
    let dir = open_tempdir();
    let n: i64 = 400_000;
    // 0.1 s apart: 12 hourly partitions.
    run_python(dir.path(), ROWS, &[&n.to_string(), "k.parquet", "30000", "100000"]);
    let load = ["--url", url.as_str(), "load", "k", "k.parquet", "--create", "--key", "time", "--interval", "1h", "--batch-mb", "1"];
    for _ in 0..3 {
        let before = counts(&c, "k").await.0;
        let mut child = spawn(chute().current_dir(dir.path()).args(load).stdout(Stdio::null()).stderr(Stdio::null()));
        // Killed once this run has committed something (or has ended).
        let began = std::time::Instant::now();
        loop {
            if !child.running() || counts(&c, "k").await.0 > before {
                break;
            }
            assert!(began.elapsed() < Duration::from_secs(120), "no progress in 120 s");
            // Polling pace; the deadline is above.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        child.kill();
    }
    let partial = counts(&c, "k").await.0;
    assert!(partial < n, "the load was killed before it finished ({partial} rows)");
    let (out, err) = run_expect(chute().current_dir(dir.path()).args(load), 0);
    assert!(err.contains("exists already"), "{err}");
    let (total, distinct, sum) = counts(&c, "k").await;
    assert_eq!((total, distinct, sum), (n, n, n * (n - 1) / 2), "every row once:\n{out}\n{err}");
    // The same command once more loads nothing.
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(load), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{out}");
    assert_eq!(counts(&c, "k").await.0, n);
}

#[tokio::test]
async fn create_makes_an_hourly_partitioned_table_from_the_file() {
    let db = shared().fresh_db("col_create").await;
    let url = db.url();
    let c = db.client().await;
    let dir = open_tempdir();
    run_python(dir.path(), ROWS, &["1000", "m.parquet", "300", "10000000"]);
    let (out, err) = run_expect(
        chute().current_dir(dir.path()).args(["--url", &url, "load", "m", "m.parquet", "--create", "--key", "time", "--interval", "1h"]),
        0,
    );
    assert_eq!(summary_value(&out, "rows loaded"), "1000", "{err}");
    assert!(err.contains("created m"), "{err}");
    let types: Vec<String> = crate::common::column(
        &c,
        "SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'm'::regclass AND attnum > 0 ORDER BY attnum",
    )
    .await;
    assert_eq!(types, ["time timestamp with time zone", "id bigint", "dev_id integer", "value double precision"]);
    // 1000 rows 10 s apart from 2024-01-01 00:00 UTC: hours 00 to 02.
    let leaves: i64 = c.query_one("SELECT count(*) FROM pg_partition_tree('m') WHERE isleaf", &[]).await.unwrap().get(0);
    let hours: i64 = c.query_one("SELECT count(DISTINCT date_trunc('hour', time)) FROM m", &[]).await.unwrap().get(0);
    assert_eq!(hours, 3);
    assert!(leaves >= 3, "{leaves} partitions");
    let parent_rows: i64 = c.query_one("SELECT count(*) FROM ONLY m", &[]).await.unwrap().get(0);
    assert_eq!(parent_rows, 0);
    // --create with a key needs its interval.
    let (_, err) =
        run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "m2", "m.parquet", "--create", "--key", "time"]), 2);
    assert!(err.contains("--key and --interval"), "{err}");
}

const UPSERT: &str = r#"
import datetime
import pyarrow as pa, pyarrow.parquet as pq
t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
def table(ids, v):
    return pa.table({
        "time": pa.array([t0 + datetime.timedelta(seconds=10 * i) for i in ids], pa.timestamp("us", tz="UTC")),
        "id": pa.array(ids, pa.int64()),
        "v": pa.array([v] * len(ids)),
    })
pq.write_table(table(list(range(1000)), 1.0), "first.parquet", row_group_size=300)
# Every tenth row again with another value, one key twice in the file (the later wins), and ten new rows.
again = list(range(0, 1000, 10)) + [1000 + i for i in range(10)]
second = pa.concat_tables([table(again, 2.0), table([0], 3.0)])
pq.write_table(second, "second.parquet", row_group_size=50)
"#;

#[tokio::test]
async fn a_parquet_file_upserts_like_a_csv_file() {
    let db = shared().fresh_db("col_upsert").await;
    let url = db.url();
    let c = db.client().await;
    let dir = open_tempdir();
    run_python(dir.path(), UPSERT, &[]);
    run_expect(
        chute()
            .args(["--url", &url, "partition", "create", "up", "--key", "time", "--interval", "1h", "--now", "2024-01-01T00:00:00Z"])
            .args(["--columns", "time timestamptz not null, id bigint not null, v float8, primary key (time, id)"]),
        0,
    );
    let (out, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "up", "first.parquet"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1000", "{err}");
    let (out, err) =
        run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "up", "second.parquet", "--on-conflict", "update"]), 0);
    // id 0 is updated twice: once by its first row in the file, once by its later one.
    assert_eq!((summary_value(&out, "  inserted"), summary_value(&out, "  updated")), ("10", "101"), "{out}\n{err}");
    let r = c.query_one("SELECT count(*), sum(v), (SELECT v FROM up WHERE id = 0) FROM up", &[]).await.unwrap();
    let (rows, sum, first): (i64, f64, f64) = (r.get(0), r.get(1), r.get(2));
    // 1,010 rows: 900 at 1.0 (untouched), 99 updated and 10 new at 2.0, id 0 at 3.0 (the file's later row).
    assert_eq!((rows, sum, first), (1010, 900.0 + 109.0 * 2.0 + 3.0, 3.0), "{out}\n{err}");
}

const PANDAS: &str = r#"
import pandas as pd
df = pd.DataFrame({"time": pd.date_range("2024-01-01", periods=99, freq="min", tz="UTC"), "id": range(99)})
df[df.id % 3 != 0].to_parquet("filtered.parquet")  # its index (1, 2, 4, 5, …) becomes a column __index_level_0__
"#;

#[tokio::test]
async fn a_parquet_file_of_a_filtered_pandas_frame_loads_without_its_index() {
    let db = shared().fresh_db("col_pandas_index").await;
    let url = db.url();
    let c = db.client().await;
    let dir = open_tempdir();
    run_python(dir.path(), PANDAS, &[]);
    c.batch_execute(
        "CREATE TABLE pd (time timestamptz, id bigint); CREATE TABLE pd_keep (time timestamptz, id bigint, __index_level_0__ int)",
    )
    .await
    .unwrap();
    for table in ["pd", "pd_keep"] {
        let (out, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", table, "filtered.parquet"]), 0);
        assert_eq!(summary_value(&out, "rows loaded"), "66", "{table}: {err}");
    }
    // Where the table has a column of its name, the index is loaded like any column.
    let kept: i64 = c.query_one("SELECT count(*) FROM pd_keep WHERE __index_level_0__ = id", &[]).await.unwrap().get(0);
    assert_eq!(kept, 66);
    // --create makes no column of it.
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "pd_made", "filtered.parquet", "--create"]), 0);
    let columns: Vec<String> = c
        .query("SELECT attname::text FROM pg_attribute WHERE attrelid = 'pd_made'::regclass AND attnum > 0 ORDER BY attnum", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(columns, ["time", "id"]);
}
