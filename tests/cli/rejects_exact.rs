//! Rejects are exact: a bad value rejects its own row and no other, a
//! batch where every row fails the same way stops the load instead of
//! rejecting row after row, and records too large for the memory budget are
//! refused without being held.

use std::io::Write;
use std::process::Stdio;
use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::{TestCluster, shared};

use crate::common::{chute, open_tempdir, run_expect, summary_value};

/// The `# input:line: reason` lines of a reject file.
fn reject_comments(path: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines().filter(|l| l.starts_with("# ")).map(str::to_owned).collect()
}

/// `rows` rows `k,1.0,<good value>` with the value at line `bad_line` bad.
fn rows_with_one_bad(rows: usize, bad_line: usize, good: &str, bad: &str) -> String {
    (1..=rows).map(|k| if k == bad_line { format!("{k},,{bad}\n") } else { format!("{k},1.0,{good}\n") }).collect()
}

/// Loads `body` (`rows` records) into a fresh `(k int, n numeric(5,2), j <ty>)`
/// and checks that exactly the record with `k = bad_k`, at file line
/// `bad_line`, is rejected and every other row is in the table.
async fn one_bad_value(db: &chute_testkit::TestDb, ty: &str, body: &str, rows: usize, bad_k: usize, bad_line: usize) {
    let table = format!("r_{}_{bad_k}", ty.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    let c = db.client().await;
    c.batch_execute(&format!("CREATE TABLE {table} (k int, n numeric(5,2), j {ty})")).await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join(format!("{table}.csv"));
    std::fs::write(&file, body).unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", &table, file.to_str().unwrap()]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), (rows - 1).to_string(), "{ty}: {out}");
    let comments = reject_comments(&dir.path().join(format!("{table}.csv.rejects")));
    assert_eq!(comments.len(), 1, "{ty}: exactly the bad row: {comments:?}");
    assert!(comments[0].contains(&format!(".csv:{bad_line}: ")), "{ty}: its own line number: {comments:?}");
    let r = c
        .query_one(
            &format!("SELECT count(*), (SELECT array_agg(g) FROM generate_series(1, {rows}) g WHERE g NOT IN (SELECT k FROM {table})) FROM {table}"),
            &[],
        )
        .await
        .unwrap();
    let (n, missing): (i64, Option<Vec<i32>>) = (r.get(0), r.get(1));
    assert_eq!((n, missing), ((rows - 1) as i64, Some(vec![bad_k as i32])), "{ty}: every good row is in the table");
}

#[tokio::test]
async fn a_bad_json_or_xml_value_rejects_only_its_own_row() {
    let db = shared().fresh_db("rejects_json").await;
    // The brief's small case: the server's error names the JSON text's line 1 first.
    let small = "1,1.0,\"{\"\"a\"\": 1}\"\n2,1.0,\"[1]\"\n3,1.0,\"2\"\n4,1.0,\"{}\"\n5,,\"[1, 2\"\n6,1.0,\"[3]\"\n";
    one_bad_value(&db, "jsonb", small, 6, 5, 5).await;
    // json and jsonb report the JSON text's own line; so does a domain over
    // one, whose input runs through the same parser. xml reports its line in
    // the detail, not the context, but is checked too.
    let xml = db.client().await.simple_query("SELECT xml_is_well_formed('<a/>')").await.is_ok();
    db.client().await.batch_execute("CREATE DOMAIN jdom AS jsonb CHECK (VALUE IS NOT NULL)").await.unwrap();
    let mut types = vec![
        ("json", "\"{\"\"a\"\": [1, 2]}\"", "\"[1, 2\""),
        ("jsonb", "\"{\"\"a\"\": [1, 2]}\"", "\"{\"\"a\"\": }\""),
        ("jdom", "\"[1]\"", "\"[1,\""),
    ];
    if xml {
        types.push(("xml", "<a>1</a>", "<a>1</b>"));
    } else {
        eprintln!("this server has no libxml: xml is not checked");
    }
    for (ty, good, bad) in types {
        one_bad_value(&db, ty, &rows_with_one_bad(10_000, 5000, good, bad), 10_000, 5000, 5000).await;
    }
    // A bad JSON text over three lines: the server names its line 3, and the
    // rows after it sit two lines further down the file.
    let body = rows_with_one_bad(10_000, 7000, "\"[1, 2]\"", "\"{\"\"a\"\":\n1,\n\"\"b\"\" }\"");
    one_bad_value(&db, "jsonb", &body, 10_000, 7000, 7000).await;
}

#[tokio::test]
async fn a_column_type_chute_did_not_encode_for_stops_the_load_at_once() {
    // An owned cluster: its log holds this test's lines only.
    let cluster = TestCluster::start();
    // float8 bytes into int4: too long ("incorrect binary data format", 22P03).
    stops_on_a_changed_column(&cluster, "v", "int4 USING v::int4", "22P03").await;
    // int4 bytes into int8: too short ("insufficient data left in message", 08P01).
    stops_on_a_changed_column(&cluster, "dev_id", "int8", "08P01").await;
}

/// Starts a load of 50,000 rows into `t`, changes `column`'s type to `to`
/// once chute has read the catalog, and checks the load stops at once with
/// `sqlstate`, rejecting nothing and leaving a short server log.
async fn stops_on_a_changed_column(cluster: &TestCluster, column: &str, to: &str, sqlstate: &str) {
    let db = cluster.fresh_db("rejects_mismatch").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t (time timestamptz, dev_id int, v float8)").await.unwrap();
    let dir = open_tempdir();
    let mut child = spawn(
        chute()
            .current_dir(dir.path())
            .args(["--url", &db.url(), "load", "t", "-", "--workers", "2", "--reject-file", "t.rejects"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    // Once chute has read the catalog and its workers are connected (it
    // opens stdin, and waits for its first bytes, in between), the column
    // changes type: chute goes on encoding float8 for an int4 column.
    let rows: String = (0..50_000).map(|i| format!("2021-06-08 00:00:00+00,{i},{i}.5\n")).collect();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(&rows.as_bytes()[..4]).unwrap();
    stdin.flush().unwrap();
    let began = Instant::now();
    loop {
        let n: i64 = c
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()", &[])
            .await
            .unwrap()
            .get(0);
        if n >= 3 {
            break;
        }
        assert!(began.elapsed() < Duration::from_secs(60), "chute's workers never connected");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.batch_execute(&format!("SET lock_timeout = '20s'; ALTER TABLE t ALTER COLUMN {column} TYPE {to}")).await.unwrap();
    let log = cluster.cluster.log_file();
    let log_before = std::fs::read_to_string(&log).unwrap_or_default().lines().count();
    stdin.write_all(&rows.as_bytes()[4..]).unwrap();
    drop(stdin);
    let out = exit_within(child, Duration::from_secs(60), "chute");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stops with exit 2:\n{stderr}");
    assert!(
        stderr.contains(&format!("every row fails on column {column}")) && stderr.contains(sqlstate) && stderr.contains("\\d public.t"),
        "names the table, the column, the SQLSTATE and what to do:\n{stderr}"
    );
    let n: i64 = c.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    let rejected =
        std::fs::read_to_string(dir.path().join("t.rejects")).map(|t| t.lines().filter(|l| l.starts_with("# ")).count()).unwrap_or(0);
    assert!(rejected <= 1, "rows are not rejected one by one: {rejected}");
    let log_lines = std::fs::read_to_string(&log).unwrap_or_default().lines().count() - log_before;
    assert!(log_lines < 100, "the server log grew by {log_lines} lines");
    eprintln!("{sqlstate}: the server log grew by {log_lines} lines");
}

/// Runs `cmd` to its end (at most `limit`), watching its peak resident set
/// (VmHWM in /proc, read every few milliseconds while it runs).
fn run_measuring_peak(cmd: &mut std::process::Command, limit: Duration) -> (std::process::Output, u64) {
    let child = spawn(cmd.stdout(Stdio::piped()).stderr(Stdio::piped()));
    let status = format!("/proc/{}/status", child.id());
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let watcher = {
        let peak = peak.clone();
        std::thread::spawn(move || {
            // The file goes away (or loses its Vm lines) when the process ends.
            while let Ok(text) = std::fs::read_to_string(&status) {
                let Some(kb) = text.lines().find_map(|l| l.strip_prefix("VmHWM:")) else { break };
                let kb: u64 = kb.trim().trim_end_matches("kB").trim().parse().unwrap_or(0);
                peak.fetch_max(kb, std::sync::atomic::Ordering::Relaxed);
                // The sampling rate of the peak.
                std::thread::sleep(Duration::from_millis(5));
            }
        })
    };
    let out = exit_within(child, limit, "chute");
    watcher.join().unwrap();
    (out, peak.load(std::sync::atomic::Ordering::Relaxed) / 1024)
}

/// Peak resident memory allowed to `chute load --memory-mb 32`, in MiB: the
/// budget plus the program, its buffers outside the budget (chunks being
/// read and parsed, the COPY connections') and the allocator's slack. A
/// debug build loading two million small good rows peaks at about 70 MiB;
/// before records and rejects were bounded, the two loads below took over
/// 340 and 190 MiB.
const PEAK_MIB_AT_32: u64 = 128;

#[tokio::test]
async fn records_larger_than_the_memory_budget_are_refused_not_held() {
    let db = shared().fresh_db("rejects_oversized").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE big (k int, note text)").await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("big.csv");
    // 3,000 small rows and three records of 60 MiB each (quoted, with
    // newlines and doubled quotes inside, so the reader must keep track of
    // quotes while it skips them and of lines for the rows after them).
    let piece = format!("{}\n\"\"{}", "x".repeat(1 << 20), "y".repeat(1000));
    let huge: String = piece.repeat(60 << 20 >> 20);
    let (mut body, mut big_lines, mut line) = (Vec::new(), Vec::new(), 1usize);
    let mut big_records = Vec::new();
    for k in 1..=3003usize {
        let record = if k % 1000 == 500 { format!("{k},\"{huge}\"\n") } else { format!("{k},small {k}\n") };
        if k % 1000 == 500 {
            big_lines.push(line);
            big_records.push(record.clone());
        }
        line += record.matches('\n').count();
        body.extend_from_slice(record.as_bytes());
    }
    std::fs::write(&file, &body).unwrap();
    drop(body);
    let (out, peak) = run_measuring_peak(
        chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "big", file.to_str().unwrap(), "--memory-mb", "32"]),
        Duration::from_secs(240),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary_value(&stdout, "rows loaded"), "3000");
    eprintln!("peak RSS with three 60 MiB records and --memory-mb 32: {peak} MiB");
    assert!(peak < PEAK_MIB_AT_32, "peak RSS {peak} MiB");
    let rejects = std::fs::read(dir.path().join("big.csv.rejects")).unwrap();
    let text = String::from_utf8(rejects).unwrap();
    let comments: Vec<&str> = text.lines().filter(|l| l.starts_with("# ") && l.contains("big.csv:")).collect();
    assert_eq!(comments.len(), 3, "{comments:?}");
    for (comment, line) in comments.iter().zip(&big_lines) {
        assert!(comment.contains(&format!("big.csv:{line}: the record is 60.")), "{comment}");
        assert!(comment.contains("raise --memory-mb to at least 241 MiB"), "{comment}");
    }
    // Each refused record is in the reject file whole, after its comment line.
    for record in &big_records {
        assert!(text.contains(&format!("to load it\n{record}")), "a refused record is copied whole");
    }
    let (n, small): (i64, i64) = {
        let r = c.query_one("SELECT count(*), count(*) FILTER (WHERE note = 'small ' || k) FROM big", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((n, small), (3000, 3000), "every small row loads");

    // A compressed input is not read back: the reject says so, with its line.
    let gz = dir.path().join("big.csv.gz");
    let mut enc = flate2::write::GzEncoder::new(std::fs::File::create(&gz).unwrap(), flate2::Compression::fast());
    enc.write_all(format!("4001,before\n4002,\"{huge}\"\n4003,after\n").as_bytes()).unwrap();
    enc.finish().unwrap();
    let (out, peak) = run_measuring_peak(
        chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "big", gz.to_str().unwrap(), "--memory-mb", "32"]),
        Duration::from_secs(240),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(summary_value(&stdout, "rows loaded"), "2");
    assert!(peak < PEAK_MIB_AT_32, "peak RSS {peak} MiB");
    let text = std::fs::read_to_string(dir.path().join("big.csv.gz.rejects")).unwrap();
    assert!(text.starts_with("# ") && text.contains("big.csv.gz:2: the record is 60."), "{text}");
    assert!(text.contains("not copied here") && text.len() < 1000, "no record bytes: {text}");
}

#[tokio::test]
async fn many_rejected_rows_take_no_memory_of_their_own() {
    let db = shared().fresh_db("rejects_many").await;
    db.client().await.batch_execute("CREATE TABLE many (k int)").await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("many.csv");
    // Two million rows, every other one refused by the parser.
    let body: String = (0..2_000_000).map(|i| if i % 2 == 0 { format!("{i}\n") } else { "x\n".to_owned() }).collect();
    std::fs::write(&file, body).unwrap();
    let (out, peak) = run_measuring_peak(
        chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "many", file.to_str().unwrap(), "--memory-mb", "32"]),
        Duration::from_secs(240),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(summary_value(&stdout, "rows rejected").starts_with("1000000 "), "{stdout}");
    eprintln!("peak RSS with a million rejects and --memory-mb 32: {peak} MiB");
    assert!(peak < PEAK_MIB_AT_32, "peak RSS {peak} MiB");
}

/// Thousands of rows the server refuses in one batch, on a server whose
/// lock table is small (max_locks_per_transaction at its default of 64, few
/// connections): every good row loads and every refused one is rejected.
/// Each refused row used to leave its savepoint behind (ROLLBACK TO keeps
/// it), nesting one subtransaction per reject until the server ran out of
/// lock memory (53200) and the load failed with nothing loaded.
#[tokio::test]
async fn thousands_of_refused_rows_in_one_batch_fit_a_small_lock_table() {
    let cluster = chute_testkit::TestCluster::start_with(&chute_testkit::ClusterSetup {
        settings: &[("max_connections", "20"), ("max_locks_per_transaction", "64")],
        ..Default::default()
    });
    let db = cluster.fresh_db("refused_many").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE odd (v int CHECK (v % 2 = 0))").await.unwrap();
    let dir = crate::common::open_tempdir();
    let rows: String = (1..=8000).map(|i| format!("{i}\n")).collect();
    std::fs::write(dir.path().join("v.csv"), rows).unwrap();
    let (out, err) = crate::common::run_expect(
        crate::common::chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "odd", "v.csv", "--workers", "1"]),
        1,
    );
    assert_eq!(crate::common::summary_value(&out, "rows loaded"), "4000", "{out}\n{err}");
    assert!(crate::common::summary_value(&out, "rows rejected").starts_with("4000"), "{out}");
    let n: i64 = c.query_one("SELECT count(*) FROM odd WHERE v % 2 = 0", &[]).await.unwrap().get(0);
    assert_eq!(n, 4000);
}
