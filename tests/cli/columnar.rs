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
use chute_testkit::shared;
use futures_util::SinkExt;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

/// The Python of the venv that holds pyarrow, pandas and polars (made by scripts/ensure-deps).
pub fn python() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let py = root.join("target/pyarrow/bin/python");
    let ready = || Command::new(&py).args(["-c", "import pyarrow, pandas, polars"]).status().is_ok_and(|s| s.success());
    if !ready() {
        let status = Command::new("bash").arg(root.join("scripts/ensure-deps")).arg("--pyarrow").status();
        assert!(status.is_ok_and(|s| s.success()) && ready(), "cannot make target/pyarrow: run scripts/ensure-deps --pyarrow");
    }
    py
}

/// Runs a Python script (text) in `dir` with the venv's Python; panics with its output on failure.
pub fn run_python(dir: &Path, script: &str, args: &[&str]) -> String {
    let path = dir.join("script.py");
    std::fs::write(&path, script).unwrap();
    let out = Command::new(python()).current_dir(dir).arg(&path).args(args).output().unwrap();
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
