//! Loads that lose nothing: rejects, exactly-once resume, retries, clean stops.

use std::collections::BTreeSet;
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use chute_core::generate::SplitMix64;
use chute_testkit::process::{ChildGuard, exit_within, spawn};
use chute_testkit::{TestCluster, shared};

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value, wait_for};

/// A fingerprint of a table's rows: count, distinct rows, and a hash sum.
async fn fingerprint(c: &tokio_postgres::Client, table: &str) -> (i64, i64, i64) {
    let r = c
        .query_one(&format!("SELECT count(*), count(DISTINCT t), coalesce(sum(hashtext(t::text)::int8), 0)::int8 FROM {table} t"), &[])
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Waits until the load `child` runs has committed rows into `table`, and
/// is still running: what comes next happens in the middle of the load.
async fn until_mid_load(c: &tokio_postgres::Client, table: &str, child: &mut ChildGuard) {
    let sql = format!("SELECT EXISTS (SELECT 1 FROM {table})");
    wait_for("the load's first committed rows", Duration::from_secs(120), || async {
        c.query_one(&sql, &[]).await.unwrap().get::<_, bool>(0)
    })
    .await;
    assert!(child.running(), "the load ended before anything could happen in its middle");
}

#[tokio::test]
async fn a_million_rows_with_one_percent_bad_of_every_kind() {
    let db = shared().fresh_db("rel_bad").await;
    let url = db.url();
    let cols = "id bigint not null, time timestamptz not null, dev_id int not null check (dev_id >= 0), v float8, note text, primary key (id, time)";
    create_time_partitioned(&url, "r", cols, "1d", &["--retention", "30d"]);
    let now = jiff::Timestamp::now();
    let day = |d: i64| (now - jiff::SignedDuration::from_hours(24 * d)).strftime("%Y-%m-%d %H:%M:%S+00").to_string();
    let recent = day(0);
    let c = db.client().await;
    // Rows whose id the file repeats: unique violations.
    c.batch_execute(&format!("INSERT INTO r SELECT 10000000 + i, '{recent}', 1, 0, 'seed' FROM generate_series(0, 999) i")).await.unwrap();

    let mut rng = SplitMix64::new(11);
    let mut file = Vec::with_capacity(70 << 20);
    let mut bad_lines = BTreeSet::new();
    let total = 1_000_000u64;
    let (mut dups, mut line) = (0u64, 0u64);
    for id in 0..total {
        line += 1;
        let kind = if rng.next_u64().is_multiple_of(100) { 1 + rng.next_u64() % 11 } else { 0 };
        let t = day(1 + (rng.next_u64() % 10) as i64);
        let good = format!("{id},{t},{},{},note {id}\n", rng.next_u64() % 1000, rng.next_f64());
        let row: Vec<u8> = match kind {
            0 => good.into_bytes(),
            1 => format!("{id},{t},5\n").into_bytes(),                          // missing fields
            2 => format!("{id},{t},12x,1.0,n\n").into_bytes(),                  // bad number
            3 => format!("{id},2021-13-45 99:00:00+00,1,1.0,n\n").into_bytes(), // bad timestamp
            4 => [format!("{id},{t},1,1.0,").as_bytes(), b"bad \xff\xfe utf8\n"].concat(),
            5 => [format!("{id},{t},1,1.0,").as_bytes(), b"nul \x00 byte\n"].concat(),
            6 => format!("{id},{t},,1.0,null dev\n").into_bytes(), // NOT NULL (server)
            7 => format!("{id},{t},-5,1.0,check\n").into_bytes(),  // CHECK (server)
            8 => {
                dups += 1;
                format!("{},{recent},1,1.0,dup\n", 10000000 + (dups % 1000)).into_bytes() // unique (server)
            }
            9 => format!("{id},{t},99999999999,1.0,n\n").into_bytes(), // out of range
            10 => format!("{id},{},1,1.0,n\n", (now + jiff::SignedDuration::from_hours(24 * 365)).strftime("%Y-%m-%d %H:%M:%S+00"))
                .into_bytes(), // max-future
            _ => format!("{id},{},1,1.0,n\n", day(60)).into_bytes(),   // past retention
        };
        if kind != 0 {
            bad_lines.insert(line);
        }
        file.extend_from_slice(&row);
    }
    let dir = open_tempdir();
    std::fs::write(dir.path().join("big.csv"), &file).unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "r", "big.csv"]), 1);
    let loaded: u64 = summary_value(&out, "rows loaded").parse().unwrap();
    assert_eq!(loaded, total - bad_lines.len() as u64, "{out}");
    let rejects = std::fs::read(dir.path().join("big.csv.rejects")).unwrap();
    let rejects = String::from_utf8_lossy(&rejects);
    let lines: BTreeSet<u64> =
        rejects.lines().filter_map(|l| l.strip_prefix("# big.csv:")).map(|l| l.split(':').next().unwrap().parse().unwrap()).collect();
    assert_eq!(lines.len(), bad_lines.len(), "one reject per bad line");
    assert_eq!(lines, bad_lines, "every bad line, with its line number");
    for reason in
        ["23502", "23514", "23505", "out of range for type integer", "invalid byte sequence", "--max-future", "retention", "missing data"]
    {
        assert!(rejects.contains(reason), "no reject says {reason:?}");
    }
    let n: i64 = c.query_one("SELECT count(*) FROM r WHERE note <> 'seed'", &[]).await.unwrap().get(0);
    assert_eq!(n as u64, loaded);
}

#[tokio::test]
async fn killed_ten_times_then_resumed_the_table_equals_the_input() {
    let db = shared().fresh_db("rel_kill").await;
    let url = db.url();
    let cols = "time timestamptz, dev_id int, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8";
    db.client().await.batch_execute(&format!("CREATE TABLE k ({cols}); CREATE TABLE reference ({cols})")).await.unwrap();
    let rows = "2000000";
    let dir = open_tempdir();
    let mut rng = SplitMix64::new(3);
    for _ in 0..10 {
        let mut child = spawn(
            chute()
                .current_dir(dir.path())
                .args(["--url", &url, "load", "k", "--gen", "conditions", "--rows", rows])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        // The kill at a random point (of a seeded sequence) is the test's subject.
        tokio::time::sleep(Duration::from_millis(100 + rng.next_u64() % 1200)).await;
        child.kill();
    }
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "k", "--gen", "conditions", "--rows", rows]), 0);
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "reference", "--gen", "conditions", "--rows", rows]), 0);
    let c = db.client().await;
    let (got, want) = (fingerprint(&c, "k").await, fingerprint(&c, "reference").await);
    assert_eq!(got, want, "after 10 kills and a resume:\n{out}");
    assert_eq!(got.0, 2_000_000);
    assert_eq!(got.0, got.1, "no duplicate");
}

#[tokio::test]
async fn a_killed_csv_load_resumes_by_byte_offset() {
    let db = shared().fresh_db("rel_kill_csv").await;
    let url = db.url();
    let c = db.client().await;
    c.batch_execute("CREATE TABLE kc (id int, note text); CREATE TABLE kc_ref (id int, note text)").await.unwrap();
    let dir = open_tempdir();
    let mut f = std::io::BufWriter::new(std::fs::File::create(dir.path().join("kc.csv")).unwrap());
    for i in 0..400_000 {
        writeln!(f, "{i},\"row {i}, with a comma\nand a newline\"").unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let mut rng = SplitMix64::new(5);
    for _ in 0..3 {
        let mut child = spawn(
            chute()
                .current_dir(dir.path())
                .args(["--url", &url, "load", "kc", "kc.csv", "--batch-mb", "1"])
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
        );
        // The kill at a random point (of a seeded sequence) is the test's subject.
        tokio::time::sleep(Duration::from_millis(150 + rng.next_u64() % 600)).await;
        child.kill();
    }
    // Changing workers and batch size between runs does not matter.
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "kc", "kc.csv", "--workers", "3", "--batch-mb", "2"]), 0);
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "kc_ref", "kc.csv"]), 0);
    assert_eq!(fingerprint(&c, "kc").await, fingerprint(&c, "kc_ref").await);
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "--status"]), 0);
    assert!(out.contains("done"), "{out}");
}

#[tokio::test]
async fn a_server_restart_mid_load_is_retried_to_exact_counts() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("rel_restart").await;
    db.client()
        .await
        .batch_execute(
            "CREATE TABLE rs (time timestamptz, dev_id int, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8)",
        )
        .await
        .unwrap();
    let url = db.url();
    let mut child = spawn(
        chute()
            .args(["--url", &url, "load", "rs", "--gen", "conditions", "--rows", "1500000", "--batch-mb", "1"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let watcher = db.client().await;
    until_mid_load(&watcher, "rs", &mut child).await;
    cluster.cluster.restart(chute_engine::local::StopMode::Fast).unwrap();
    let out = exit_within(child, Duration::from_secs(300), "the load through the restart");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let c = db.client().await;
    let (n, distinct, _) = fingerprint(&c, "rs").await;
    assert_eq!((n, distinct), (1_500_000, 1_500_000), "{stdout}\n{stderr}");
}

#[tokio::test]
async fn duplicate_keys_are_rejected_with_23505_and_all_else_loads() {
    let db = shared().fresh_db("rel_unique").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE u (id int PRIMARY KEY, v text); INSERT INTO u VALUES (5, 'old'), (50, 'old')").await.unwrap();
    let dir = open_tempdir();
    let body: String = (0..100).map(|i| format!("{i},new\n")).collect();
    std::fs::write(dir.path().join("u.csv"), body).unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "u", "u.csv"]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "98");
    let rejects = std::fs::read_to_string(dir.path().join("u.csv.rejects")).unwrap();
    assert_eq!(rejects.matches("23505").count(), 2, "{rejects}");
    assert!(rejects.contains("# u.csv:6:") && rejects.contains("# u.csv:51:"), "{rejects}");
    // Each comment is followed by the record exactly as the file has it (read
    // back from the file by its position: rows in flight keep no copy).
    let records: Vec<&str> = rejects.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(records, ["5,new", "50,new"], "{rejects}");
    // The same rows from stdin, where no file can be read back: copies are kept.
    c.batch_execute("TRUNCATE u; INSERT INTO u VALUES (5, 'old'), (50, 'old')").await.unwrap();
    let body = std::fs::read(dir.path().join("u.csv")).unwrap();
    let mut child = spawn(
        chute()
            .current_dir(dir.path())
            .args(["--url", &db.url(), "load", "u", "-", "--reject-file", "stdin.rejects"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
    );
    child.stdin.take().unwrap().write_all(&body).unwrap();
    assert_eq!(child.wait_within(Duration::from_secs(120), "the load from stdin").code(), Some(1));
    let rejects = std::fs::read_to_string(dir.path().join("stdin.rejects")).unwrap();
    let records: Vec<&str> = rejects.lines().filter(|l| !l.starts_with('#')).collect();
    assert_eq!(records, ["5,new", "50,new"], "{rejects}");
}

#[tokio::test]
async fn sigint_stops_cleanly_with_130_and_the_rerun_finishes() {
    let db = shared().fresh_db("rel_sigint").await;
    db.client()
        .await
        .batch_execute(
            "CREATE TABLE s (time timestamptz, dev_id int, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8)",
        )
        .await
        .unwrap();
    let url = db.url();
    let mut child = spawn(
        chute()
            .args(["--url", &url, "load", "s", "--gen", "conditions", "--rows", "3000000"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let watcher = db.client().await;
    until_mid_load(&watcher, "s", &mut child).await;
    child.interrupt();
    let out = exit_within(child, Duration::from_secs(120), "the load after SIGINT");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("rows committed in this run") && stderr.contains("run the same command again"), "{stderr}");
    run_expect(chute().args(["--url", &url, "load", "s", "--gen", "conditions", "--rows", "3000000"]), 0);
    let c = db.client().await;
    let (n, distinct, _) = fingerprint(&c, "s").await;
    assert_eq!((n, distinct), (3_000_000, 3_000_000));
}

#[tokio::test]
async fn sigint_while_waiting_for_an_unreachable_server_exits_130_at_once() {
    // A port nothing listens on: every connection attempt is refused, so the load waits (--retry-for 5min).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = open_tempdir();
    std::fs::write(dir.path().join("x.csv"), "2024-01-01 00:00:00+00,1\n").unwrap();
    let url = format!("postgresql://postgres@127.0.0.1:{port}/postgres");
    let mut child = chute_testkit::process::spawn(
        chute().current_dir(dir.path()).args(["--url", &url, "load", "t", "x.csv"]).stdout(Stdio::null()).stderr(Stdio::piped()),
    );
    let mut lines = chute_testkit::process::Lines::new(child.stderr.take().unwrap());
    // The load says once that it waits for the server: it is in its retry now.
    lines.wait_until("the load's notice that it retries", Duration::from_secs(30), |l| l.contains("retrying for up to"));
    child.interrupt();
    let signalled = std::time::Instant::now();
    let status = child.wait_within(Duration::from_secs(10), "a load waiting for the server after SIGINT");
    let stderr = lines.rest();
    assert_eq!(status.code(), Some(130), "{stderr}");
    assert!(signalled.elapsed() < Duration::from_secs(3), "{:?}: {stderr}", signalled.elapsed());
    assert!(stderr.contains("chute: stopped:"), "{stderr}");
}

#[tokio::test]
async fn a_hostile_table_name_is_just_a_name() {
    let db = shared().fresh_db("rel_names").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE \"x\"\"; DROP TABLE y; --\" (a int); CREATE TABLE y (a int)").await.unwrap();
    let dir = open_tempdir();
    std::fs::write(dir.path().join("n.csv"), "1\n2\n").unwrap();
    run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "\"x\"\"; DROP TABLE y; --\"", "n.csv"]), 0);
    let n: i64 = c.query_one("SELECT count(*) FROM \"x\"\"; DROP TABLE y; --\"", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
    let y: bool = c.query_one("SELECT to_regclass('y') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(y, "y survived");
}
