use std::io::Write;
use std::process::Stdio;

use bytes::Bytes;
use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;
use futures_util::SinkExt;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

const TABLE: &str = "CREATE TABLE t (time timestamptz, dev_id int, v float8, note text)";

/// Rows that a CSV COPY accepts, in many spellings, and rows it refuses.
const GOOD: &str = "2021-06-08 00:00:00+00,1,1.5,plain
2021-06-08T00:00:10Z,2,-0.25,\"quoted, with comma\"
2021-06-08 02:00:20+02,3,1e3,\"multi
line\"
2021-06-08 00:00:30,4,,
\"2021-06-08 00:00:40.123456+00\",5,NaN,\"\"
Jan 5 2021 10:00,6,  7  ,server parses the date
2021-06-08 00:00:50.5-03:30,7,Infinity,\"say \"\"hi\"\"\"
";

#[tokio::test]
async fn csv_loads_like_the_servers_own_copy() {
    let db = shared().fresh_db("load_equiv").await;
    // Every session (chute's and ours) reads zoneless times in Berlin.
    db.client()
        .await
        .batch_execute(&format!("{TABLE}; CREATE TABLE ref (LIKE t); ALTER DATABASE {} SET TimeZone = 'Europe/Berlin'", db.name))
        .await
        .unwrap();
    let c = db.client().await;
    let dir = open_tempdir();
    let file = dir.path().join("good.csv");
    std::fs::write(&file, GOOD).unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "t", file.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "7");
    // The server's own CSV COPY of the same bytes.
    let sink = c.copy_in::<_, Bytes>("COPY ref FROM STDIN (FORMAT csv)").await.unwrap();
    futures_util::pin_mut!(sink);
    sink.send(Bytes::from_static(GOOD.as_bytes())).await.unwrap();
    sink.finish().await.unwrap();
    let diff: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM (TABLE t EXCEPT ALL TABLE ref) a) + (SELECT count(*) FROM (TABLE ref EXCEPT ALL TABLE t) b)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(diff, 0, "chute and COPY disagree");
}

#[tokio::test]
async fn bad_rows_go_to_the_reject_file_and_good_rows_load() {
    let db = shared().fresh_db("load_rejects").await;
    let c = db.client().await;
    c.batch_execute(TABLE).await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("mixed.csv");
    std::fs::write(
        &file,
        "2021-06-08 00:00:00+00,1,1,ok\n2021-06-08 00:00:00+00,x,1,bad int\n2021-06-08 00:00:00+00,3,1,\"ok\nacross lines\"\n2021-06-08 00:00:00+00,4\nnot a time,5,1,bad time\n2021-06-08 00:00:00+00,6,1,ok\n",
    )
    .unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "t", file.to_str().unwrap()]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "3");
    assert!(summary_value(&out, "rows rejected").starts_with("3 (see mixed.csv.rejects)"), "{out}");
    let rejects = std::fs::read_to_string(dir.path().join("mixed.csv.rejects")).unwrap();
    let comments: Vec<&str> = rejects.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(comments.len(), 3, "{rejects}");
    assert!(comments[0].contains(":2: column dev_id: invalid input syntax for type integer: \"x\""), "{rejects}");
    assert!(comments[1].contains(":5: missing data for column"), "{rejects}");
    assert!(
        comments[2].contains(":6: ") && comments[2].contains("not a time") && comments[2].contains("22007"),
        "the server's reason and SQLSTATE: {rejects}"
    );
    assert!(rejects.contains("\nnot a time,5,1,bad time\n"), "the original record: {rejects}");
    let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(n, 3);
    // A limit stops the load with exit code 2.
    let (_, err) = run_expect(
        chute().current_dir(dir.path()).args([
            "--url",
            &db.url(),
            "load",
            "t",
            file.to_str().unwrap(),
            "--max-rejects",
            "1",
            "--reject-file",
            "lim.rejects",
        ]),
        2,
    );
    assert!(err.contains("more than 1 rows were rejected"), "{err}");
}

fn rows(n: usize) -> String {
    (0..n).map(|i| format!("2021-06-08 00:{:02}:{:02}+00\t{i}\t{}.5\tnote {i}\n", (i / 60) % 60, i % 60, i)).collect()
}

#[tokio::test]
async fn gzip_zstd_and_stdin_in_text_format() {
    let db = shared().fresh_db("load_sources").await;
    let c = db.client().await;
    c.batch_execute(TABLE).await.unwrap();
    let dir = open_tempdir();
    let text = rows(3000);
    let gz = dir.path().join("a.tsv.gz");
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    enc.write_all(text.as_bytes()).unwrap();
    enc.finish().unwrap();
    let zst = dir.path().join("b.tsv.zst");
    std::fs::write(&zst, zstd::encode_all(text.as_bytes(), 3).unwrap()).unwrap();
    let (out, _) =
        run_expect(chute().args(["--url", &db.url(), "load", "t", "--format", "text", gz.to_str().unwrap(), zst.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "6000");
    let mut child = spawn(
        chute().args(["--url", &db.url(), "load", "t", "--format", "text", "-", "--json"]).stdin(Stdio::piped()).stdout(Stdio::piped()),
    );
    child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let out = exit_within(child, std::time::Duration::from_secs(60), "the load from stdin");
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["rows_loaded"], 3000);
    let row = c.query_one("SELECT count(*), count(DISTINCT dev_id), sum(v)::float8 FROM t", &[]).await.unwrap();
    assert_eq!(
        (row.get::<_, i64>(0), row.get::<_, i64>(1), row.get::<_, f64>(2)),
        (9000, 3000, 3.0 * (0..3000).map(|i| i as f64 + 0.5).sum::<f64>())
    );
}

#[tokio::test]
async fn jsonl_columns_defaults_and_epochs() {
    let db = shared().fresh_db("load_jsonl").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE ev (id bigserial, ts timestamptz NOT NULL, dev_id int, payload jsonb, source text DEFAULT 'feed')")
        .await
        .unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("ev.jsonl");
    std::fs::write(
        &file,
        "{\"ts\": \"2021-06-08T00:00:00Z\", \"dev_id\": 1, \"payload\": {\"a\": [1, 2]}}\n{\"dev_id\": 2, \"ts\": \"2021-06-08 01:00:00+01\", \"payload\": null, \"source\": \"left out by --columns\"}\n",
    )
    .unwrap();
    run_expect(
        chute().args(["--url", &db.url(), "load", "ev", file.to_str().unwrap(), "--format", "jsonl", "--columns", "ts,dev_id,payload"]),
        0,
    );
    let rows = c.query("SELECT id, ts = '2021-06-08T00:00:00Z', dev_id, payload::text, source FROM ev ORDER BY dev_id", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].get::<_, Option<String>>(3).as_deref(), Some("{\"a\": [1, 2]}"));
    assert!(rows.iter().all(|r| r.get::<_, bool>(1) && r.get::<_, String>(4) == "feed"), "defaults fill the other columns");
    // Unix epochs in milliseconds.
    let csv = dir.path().join("ms.csv");
    std::fs::write(&csv, "1623110400000,3\n1623110400500,4\n").unwrap();
    run_expect(chute().args(["--url", &db.url(), "load", "ev", csv.to_str().unwrap(), "--columns", "ts,dev_id", "--epoch", "ms"]), 0);
    let ms: Vec<String> =
        c.query("SELECT ts::text FROM ev WHERE dev_id IN (3, 4) ORDER BY dev_id", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(ms, ["2021-06-08 00:00:00+00", "2021-06-08 00:00:00.5+00"]);
}

#[tokio::test]
async fn a_json_key_the_table_has_no_column_for_is_a_reject_unless_ignored() {
    let db = shared().fresh_db("load_jsonl_unknown").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE cpu (time timestamptz NOT NULL, host text, usage float8)").await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("cpu.jsonl");
    std::fs::write(
        &file,
        concat!(
            "{\"time\": \"2024-01-01T00:00:00Z\", \"host\": \"a\", \"usage\": 1}\n",
            "{\"time\": \"2024-01-01T00:00:10Z\", \"host\": \"a\", \"usgae\": 5}\n",
            "{\"time\": \"2024-01-01T00:00:20Z\", \"HOST\": \"x\", \"usage\": 2}\n",
            "{\"time\": \"2024-01-01T00:00:30Z\", \"host\": \"b\", \"usage\": 3}\n",
        ),
    )
    .unwrap();
    let load = |extra: &[&str]| {
        let mut cmd = chute();
        cmd.current_dir(dir.path()).args(["--url", &db.url(), "load", "cpu", "cpu.jsonl", "--format", "jsonl"]).args(extra);
        cmd
    };
    let (out, _) = run_expect(&mut load(&[]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "2", "{out}");
    let rejects = std::fs::read_to_string(dir.path().join("cpu.jsonl.rejects")).unwrap();
    let comments: Vec<&str> = rejects.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(comments.len(), 2, "{rejects}");
    assert!(
        comments[0].ends_with(
            ":2: unknown column \"usgae\": the table has no such column; add it, or load with --ignore-unknown to drop such keys"
        ),
        "{rejects}"
    );
    assert!(comments[1].contains(":3: unknown column \"HOST\": the table has no such column (did you mean host?"), "{rejects}");
    assert!(rejects.contains("\"usgae\": 5}\n"), "the original record: {rejects}");
    let hosts: Vec<String> = c.query("SELECT host FROM cpu ORDER BY time", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(hosts, ["a", "b"]);
    // --ignore-unknown: what chute did before, every line loaded, the unknown keys dropped.
    c.batch_execute("TRUNCATE cpu").await.unwrap();
    let (out, _) = run_expect(&mut load(&["--ignore-unknown", "--load-id", "again"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "4", "{out}");
    let nulls: i64 = c.query_one("SELECT count(*) FILTER (WHERE usage IS NULL OR host IS NULL) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(nulls, 2);
    // The flag is for JSON lines only.
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "cpu", "x.csv", "--ignore-unknown"]), 2);
    assert!(err.contains("--ignore-unknown") && err.contains("--format jsonl"), "{err}");
}

#[tokio::test]
async fn a_parquet_file_inside_gzip_is_refused_not_read_as_csv() {
    let db = shared().fresh_db("load_parquet_gz").await;
    db.client().await.batch_execute("CREATE TABLE blobs (b bytea)").await.unwrap();
    let dir = open_tempdir();
    // A Parquet file's first and last bytes, gzipped: read as CSV it made rows of garbage.
    let path = dir.path().join("x.parquet.gz");
    let mut gz = flate2::write::GzEncoder::new(std::fs::File::create(&path).unwrap(), flate2::Compression::default());
    gz.write_all(b"PAR1\x15\x04\x15\x10,a\nb\n\x00PAR1").unwrap();
    gz.finish().unwrap();
    let (_, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "blobs", "x.parquet.gz"]), 2);
    assert!(err.contains("x.parquet.gz is a Parquet file inside gz compression"), "{err}");
    assert!(err.contains("decompress it first (gzip -d x.parquet.gz) and load x.parquet"), "{err}");
    let n: i64 = db.client().await.query_one("SELECT count(*) FROM blobs", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    // Parquet names mixed with others are refused too (they were all read as CSV).
    let (_, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "blobs", "a.parquet", "b.csv"]), 2);
    assert!(err.contains("b.csv is not a Parquet file like the others"), "{err}");
}

#[tokio::test]
async fn stdin_without_a_load_id_says_what_that_means_and_what_to_do() {
    let db = shared().fresh_db("load_stdin_notice").await;
    db.client().await.batch_execute(TABLE).await.unwrap();
    let mut child = chute()
        .args(["--url", &db.url(), "load", "t", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(b"2021-06-08 00:00:00+00,1,1.5,x\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        err.contains(
            "stdin without a load id is not journaled: if this load is interrupted it cannot be resumed, and running it again \
             loads every row again; give --load-id NAME to make it resumable"
        ),
        "{err}"
    );
}

#[tokio::test]
async fn a_missing_file_or_table_is_one_clear_error() {
    let db = shared().fresh_db("load_errors").await;
    db.client().await.batch_execute(TABLE).await.unwrap();
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "t", "/nonexistent/x.csv"]), 2);
    assert!(err.contains("cannot read /nonexistent/x.csv"), "{err}");
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "nope", "/dev/null"]), 2);
    assert!(err.contains("table nope does not exist"), "{err}");
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "t", "/dev/null", "--columns", "time,bogus"]), 2);
    assert!(err.contains("has no column \"bogus\""), "{err}");
}

#[tokio::test]
async fn a_zstd_file_whose_window_exceeds_the_budget_is_refused() {
    let db = shared().fresh_db("load_zstd_window").await;
    db.client().await.batch_execute(TABLE).await.unwrap();
    let dir = open_tempdir();
    let path = dir.path().join("long.csv.zst");
    let mut enc = zstd::stream::Encoder::new(std::fs::File::create(&path).unwrap(), 3).unwrap();
    enc.set_parameter(zstd::stream::raw::CParameter::WindowLog(27)).unwrap();
    enc.write_all(b"2021-06-08 00:00:00+00,1,1,x\n").unwrap();
    enc.finish().unwrap();
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "t", path.to_str().unwrap(), "--memory-mb", "64"]), 2);
    assert!(err.contains("needs a 128 MiB zstd window") && err.contains("raise --memory-mb"), "{err}");
    // With room for the window it loads.
    let (out, _) = run_expect(chute().args(["--url", &db.url(), "load", "t", path.to_str().unwrap(), "--memory-mb", "512"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
}

#[tokio::test]
async fn old_finished_loads_are_forgotten_and_unfinished_ones_kept() {
    let db = shared().fresh_db("load_prune").await;
    let c = db.client().await;
    c.batch_execute(TABLE).await.unwrap();
    let dir = open_tempdir();
    let url = db.url();
    for (name, id) in [("a.csv", "old-done"), ("b.csv", "new-done"), ("c.csv", "old-interrupted")] {
        std::fs::write(dir.path().join(name), "2021-06-08 00:00:00+00,1,1.5,x\n").unwrap();
        run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "t", name, "--load-id", id]), 0);
    }
    // Forty days ago: one load finished, one was stopped half-way.
    c.batch_execute(
        "UPDATE chute.loads SET finished_at = now() - interval '40 days' WHERE load_id IN ('old-done', 'old-interrupted');
         UPDATE chute.loads SET status = 'interrupted' WHERE load_id = 'old-interrupted'",
    )
    .await
    .unwrap();
    let (out, err) = run_expect(chute().args(["--url", &url, "load", "--forget-done-before", "30d"]), 0);
    assert_eq!(out.trim(), "forgot old-done", "{err}");
    assert!(err.contains("forgot 1 finished load older than 30d"), "{err}");
    let left: Vec<String> = c.query("SELECT load_id FROM chute.loads ORDER BY 1", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(left, ["new-done", "old-interrupted"]);
    let journal: i64 = c.query_one("SELECT count(*) FROM chute.load_journal WHERE load_id = 'old-done'", &[]).await.unwrap().get(0);
    assert_eq!(journal, 0, "its journal went with it");
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "--forget-done-before", "30d", "--json"]), 0);
    assert!(out.contains("\"forgotten\": []"), "{out}");
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "--forget-done-before", "soon"]), 2);
    assert!(err.contains("--forget-done-before"), "{err}");
}

#[tokio::test]
async fn a_live_stream_on_stdin_reaches_the_table_while_it_waits() {
    let db = shared().fresh_db("load_stream").await;
    let c = db.client().await;
    c.batch_execute(TABLE).await.unwrap();
    // No --flush-every: stdin sends what has waited a second by default.
    let mut child = spawn(
        chute()
            .args(["--url", &db.url(), "load", "t", "-", "--load-id", "stream"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    for round in 1..=3i64 {
        for i in 0..10 {
            writeln!(stdin, "2021-06-08 00:00:{i:02}+00,{round},{i},x").unwrap();
        }
        stdin.flush().unwrap();
        // The producer pauses with stdin open: the rows must not wait for more.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
        loop {
            let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
            if n == round * 10 {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "round {round}: {n} rows in the table while stdin stays open");
            // Polling pace; the deadline is above.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }
    drop(stdin);
    let out = exit_within(child, std::time::Duration::from_secs(60), "the load once its stdin closed");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary_value(&String::from_utf8_lossy(&out.stdout), "rows loaded"), "30");
    let (_, err) = run_expect(chute().args(["--url", &db.url(), "load", "t", "-", "--flush-every", "0s"]), 2);
    assert!(err.contains("--flush-every") && err.contains("must be longer than zero"), "{err}");
}
