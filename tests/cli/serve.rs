//! `chute serve` against a real server, spoken to over HTTP: line protocol
//! (v1 and v2, gzip), CSV and JSON Lines, bad lines next to good ones,
//! tokens, health, readiness, metrics, and SIGTERM.

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chute_testkit::process::{ChildGuard, spawn};
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, wait_for_blocking};

/// A running `chute serve` on a free loopback port, killed when dropped.
pub struct Server {
    pub child: ChildGuard,
    pub base: String,
    pub log: Arc<Mutex<String>>,
    /// Closed when the log's reader has read all of stderr (serve exited).
    log_done: std::sync::mpsc::Receiver<()>,
}

impl Server {
    pub fn start(url: &str, extra: &[&str]) -> Server {
        let listen: &[&str] = if extra.contains(&"--listen") { &[] } else { &["--listen", "127.0.0.1:0"] };
        let mut child = spawn(chute().args(["--url", url, "serve"]).args(listen).args(extra).stdout(Stdio::null()).stderr(Stdio::piped()));
        let stderr = child.stderr.take().unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let (done_tx, log_done) = std::sync::mpsc::channel::<()>();
        {
            let log = log.clone();
            std::thread::spawn(move || {
                let _done = done_tx;
                for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                    if let Some(addr) = line.strip_prefix("chute serve: listening on ") {
                        let _ = tx.send(addr.to_owned());
                    }
                    log.lock().unwrap().push_str(&(line + "\n"));
                }
            });
        }
        let base =
            rx.recv_timeout(Duration::from_secs(60)).unwrap_or_else(|_| panic!("chute serve did not start:\n{}", log.lock().unwrap()));
        Server { child, base, log, log_done }
    }

    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// SIGTERM, then the exit code and the whole log.
    pub fn terminate(mut self) -> (Option<i32>, String) {
        self.child.terminate();
        let status = self.child.wait_within(Duration::from_secs(120), "chute serve after SIGTERM");
        // The log is whole once its reader has seen the end of stderr.
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = self.log_done.recv_timeout(Duration::from_secs(10)) {
            panic!("chute serve exited, but its stderr was still open 10 s later:\n{}", self.log());
        }
        (status.code(), self.log())
    }
}

pub fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(120))).build().into()
}

/// POSTs `body` with `headers`: (status, body).
pub fn post(url: &str, headers: &[(&str, &str)], body: &[u8]) -> (u16, String) {
    let mut req = agent().post(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let mut resp = req.send(body).unwrap_or_else(|e| panic!("POST {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

pub fn get(url: &str) -> (u16, String) {
    let mut resp = agent().get(url).call().unwrap_or_else(|e| panic!("GET {url}: {e}"));
    let status = resp.status().as_u16();
    (status, resp.body_mut().read_to_string().unwrap_or_default())
}

/// The value of `name` (a metric's name, or its name and every label) on
/// serve's `/metrics` at `base`, summed over its label sets; 0 while it has none.
pub fn metric(base: &str, name: &str) -> f64 {
    let (_, text) = get(&format!("{base}/metrics"));
    text.lines()
        .filter(|l| l.strip_prefix(name).is_some_and(|rest| rest.starts_with([' ', '{'])))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Requests whose rows serve has handed to their tables' loads (they wait
/// for their commit from then on).
pub fn enqueued(base: &str) -> f64 {
    metric(base, "chute_request_stage_seconds_count{stage=\"enqueue\"}")
}

pub fn gzip(b: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(b).unwrap();
    e.finish().unwrap()
}

const CPU: &str = "time timestamptz not null, host text, region text, usage float8, count bigint, big numeric, ok boolean, msg text";

#[tokio::test]
async fn line_protocol_v1_and_v2_land_in_an_existing_partitioned_table() {
    let db = shared().fresh_db("serve_lp").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &[]);

    // v1, seconds; tags and fields in any order; a comment and a blank line.
    let body = "# from a device\ncpu,host=a,region=eu usage=0.5,count=3i,ok=t 1700000000\n\ncpu,region=us\\ west,host=b msg=\"say \\\"hi\\\"\",usage=1 1700000001\n";
    let (status, text) = post(&format!("{}/write?db=public&precision=s", s.base), &[], body.as_bytes());
    assert_eq!(status, 204, "{text}\n{}", s.log());
    // v2, milliseconds, gzip; an unsigned field into numeric.
    let body = "cpu,host=c usage=-2.5e3,big=18446744073709551615u,ok=false 1700000002123\n";
    let (status, text) = post(
        &format!("{}/api/v2/write?bucket=public&org=x&precision=ms", s.base),
        &[("Content-Encoding", "gzip"), ("Authorization", "Token ignored-without-token-file")],
        &gzip(body.as_bytes()),
    );
    assert_eq!(status, 204, "{text}\n{}", s.log());
    // Nanoseconds (the default): rounded to PostgreSQL's microseconds.
    let (status, text) = post(&format!("{}/api/v2/write?bucket=public", s.base), &[], b"cpu,host=d count=-7i 1700000003000001499\n");
    assert_eq!(status, 204, "{text}");

    // Answered only after commit: the rows are there now.
    let c = db.client().await;
    let rows = c
        .query(
            "SELECT to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), host, region, usage, count, big::text, ok, msg \
             FROM cpu ORDER BY time",
            &[],
        )
        .await
        .unwrap();
    let got: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
                r.get::<_, String>(0),
                r.get::<_, Option<String>>(1),
                r.get::<_, Option<String>>(2),
                r.get::<_, Option<f64>>(3),
                r.get::<_, Option<i64>>(4),
                r.get::<_, Option<String>>(5),
                r.get::<_, Option<bool>>(6),
                r.get::<_, Option<String>>(7)
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            r#"2023-11-14 22:13:20.000000|Some("a")|Some("eu")|Some(0.5)|Some(3)|None|Some(true)|None"#,
            r#"2023-11-14 22:13:21.000000|Some("b")|Some("us west")|Some(1.0)|None|None|None|Some("say \"hi\"")"#,
            r#"2023-11-14 22:13:22.123000|Some("c")|None|Some(-2500.0)|None|Some("18446744073709551615")|Some(false)|None"#,
            r#"2023-11-14 22:13:23.000001|Some("d")|None|None|Some(-7)|None|None|None"#,
        ]
    );
    // Straight into a leaf: the parent holds no row of its own.
    let n: i64 = c.query_one("SELECT count(*) FROM ONLY cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
}

#[tokio::test]
async fn bad_lines_get_400_naming_each_line_and_the_good_lines_are_committed() {
    let db = shared().fresh_db("serve_bad").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    // `small` is made by hand below: no chute policy, so it must be admitted.
    let s = Server::start(&url, &["--allow-table", "small"]);
    let body = [
        "cpu,host=a usage=1 1700000000000000000",            // 1 good
        "cpu,host=b\\ usage=2 1700000000000000000",          // 2 a backslash escapes the space: no field set
        "cpu,host=c usage=3i 1700000000000000000",           // 3 usage was a float in line 1
        "cpu,host=d usage=4 99999999999999999999",           // 4 timestamp out of range
        "cpu,host=e",                                        // 5 no field set
        "cpu,host=f nosuch=1 1700000000000000000",           // 6 no such column
        "cpu,host=g count=1.5 1700000000000000000",          // 7 a float into bigint
        "nosuchtable,host=h usage=1 1700000000000000000",    // 8 no such table
        "cpu,host=i msg=\"unterminated 1700000000000000000", // 9 no closing quote
        "cpu,host=z usage=9 1700000000000000001",            // 10 good
    ]
    .join("\n");
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[], body.as_bytes());
    assert_eq!(status, 400, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let lines: Vec<u64> = v["rejected"].as_array().unwrap().iter().map(|r| r["line"].as_u64().unwrap()).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9], "{text}");
    let reason =
        |line: u64| v["rejected"].as_array().unwrap().iter().find(|r| r["line"] == line).unwrap()["reason"].as_str().unwrap().to_owned();
    assert!(reason(3).contains("a float in line 1"), "{text}");
    assert!(reason(4).contains("out of range"), "{text}");
    assert!(reason(5).contains("field set is missing"), "{text}");
    assert!(reason(6).contains("no column \"nosuch\""), "{text}");
    assert!(reason(7).contains("column \"count\""), "{text}");
    assert!(reason(8).contains("does not exist"), "{text}");
    assert!(reason(9).contains("closing quote"), "{text}");
    assert!(v["message"].as_str().unwrap().starts_with("partial write: 8 of 10 lines rejected"), "{text}");
    assert!(v["error"].is_string(), "v1 clients read error");
    assert_eq!(v["rows_committed"], 2);
    let c = db.client().await;
    let hosts: Vec<String> = c.query("SELECT host FROM cpu ORDER BY time", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(hosts, vec!["a", "z"]);

    // A value the server refuses (out of the numeric's range) is named too.
    c.batch_execute("CREATE TABLE small (time timestamptz not null, v numeric(3,0)) PARTITION BY RANGE (time)").await.unwrap();
    c.batch_execute("CREATE TABLE small_all PARTITION OF small FOR VALUES FROM (MINVALUE) TO (MAXVALUE)").await.unwrap();
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[], b"small v=1 1\nsmall v=12345 2\nsmall v=3 3\n");
    assert_eq!(status, 400, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["line"], 2, "{text}");
    assert_eq!(v["rows_committed"], 2, "{text}");
    // A bad precision is refused before anything is read.
    let (status, text) = post(&format!("{}/write?db=public&precision=d", s.base), &[], b"cpu usage=1\n");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("ns, us, ms or s"), "{text}");
}

#[tokio::test]
async fn csv_and_json_lines_into_a_table_like_chute_load() {
    let db = shared().fresh_db("serve_tables").await;
    let url = db.url();
    create_time_partitioned(&url, "m", "time timestamptz not null, dev int, v float8", "1 day", &[]);
    let s = Server::start(&url, &["--schema", "public"]);
    let csv = "time,dev,v\n2024-01-01 00:00:00+00,1,0.5\n2024-01-02 00:00:00+00,2,oops\n2024-01-03 00:00:00+00,3,1.5\n";
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &[("Content-Type", "text/csv")], csv.as_bytes());
    assert_eq!(status, 400, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["line"], 3, "the body's own line number: {text}");
    let ndjson = "{\"time\":\"2024-01-04T00:00:00Z\",\"dev\":4,\"v\":2.5}\n{\"time\":\"2024-01-05T00:00:00Z\",\"dev\":5,\"v\":null}";
    let (status, text) = post(
        &format!("{}/v1/tables/m", s.base),
        &[("Content-Type", "application/x-ndjson"), ("Content-Encoding", "gzip")],
        &gzip(ndjson.as_bytes()),
    );
    assert_eq!(status, 204, "{text}");
    // A key the table has no column for (a typo, a case) is a rejected line, as an unknown CSV column is refused.
    let ndjson = "{\"time\":\"2024-01-06T00:00:00Z\",\"dev\":6,\"vv\":1}\n{\"time\":\"2024-01-07T00:00:00Z\",\"DEV\":7}\n{\"time\":\"2024-01-08T00:00:00Z\",\"dev\":8}";
    let (status, text) = post(&format!("{}/v1/tables/m", s.base), &[("Content-Type", "application/x-ndjson")], ndjson.as_bytes());
    assert_eq!(status, 400, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!((v["line"].as_u64(), v["rows_committed"].as_u64()), (Some(1), Some(1)), "{text}");
    let reasons: Vec<&str> = v["rejected"].as_array().unwrap().iter().map(|r| r["reason"].as_str().unwrap()).collect();
    assert_eq!(reasons[0], "unknown column \"vv\": the table has no such column; add it", "{text}");
    assert!(reasons[1].starts_with("unknown column \"DEV\": the table has no such column (did you mean dev?"), "{text}");
    let c = db.client().await;
    let devs: Vec<i32> = c.query("SELECT dev FROM m ORDER BY time", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(devs, vec![1, 3, 4, 5, 8]);
    let (status, text) = post(&format!("{}/v1/tables/nosuch", s.base), &[("Content-Type", "text/csv")], b"1,2\n");
    assert_eq!(status, 404, "{text}");
    assert!(text.contains("does not exist"), "{text}");
}

#[tokio::test]
async fn tokens_health_readiness_and_metrics() {
    let db = shared().fresh_db("serve_ops").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let dir = open_tempdir();
    let tokens = dir.path().join("tokens");
    std::fs::write(&tokens, "# tokens\ns3cret-token\n").unwrap();
    let s = Server::start(&url, &["--token-file", tokens.to_str().unwrap()]);
    let write = format!("{}/api/v2/write?bucket=public", s.base);
    let (status, text) = post(&write, &[], b"cpu usage=1 1\n");
    assert_eq!(status, 401, "{text}");
    let (status, _) = post(&write, &[("Authorization", "Token wrong")], b"cpu usage=1 1\n");
    assert_eq!(status, 401);
    let (status, text) = post(&write, &[("Authorization", "Token s3cret-token")], b"cpu usage=1 1\n");
    assert_eq!(status, 204, "{text}");
    let (status, text) = post(&format!("{}/write?db=public&u=me&p=s3cret-token", s.base), &[], b"cpu usage=2 2\n");
    assert_eq!(status, 204, "{text}");
    assert!(!s.log().contains("s3cret"), "a token was logged:\n{}", s.log());
    assert_eq!(get(&format!("{}/health", s.base)).0, 200);
    assert_eq!(get(&format!("{}/ready", s.base)).0, 200);
    let (status, text) = get(&format!("{}/metrics", s.base));
    assert_eq!(status, 200);
    assert!(text.contains("chute_rows_received_total{table=\"public.cpu\"} 2"), "{text}");
    assert!(text.contains("chute_ack_latency_seconds_bucket"), "{text}");
    // Plain HTTP beyond loopback needs saying so.
    let out = chute().args(["--url", &url, "serve", "--listen", "0.0.0.0:0"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--insecure-listen"));
}

#[tokio::test]
async fn sigterm_answers_requests_in_flight_then_exits_143() {
    let db = shared().fresh_db("serve_term").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    // A long --max-delay: requests wait for it, and SIGTERM arrives meanwhile.
    let s = Server::start(&url, &["--max-delay", "3s"]);
    let write = format!("{}/write?db=public", s.base);
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let write = write.clone();
            std::thread::spawn(move || {
                post(&write, &[], format!("cpu,host=h{i} usage={i} {}\n", 1_700_000_000_000_000_000i64 + i).as_bytes())
            })
        })
        .collect();
    wait_for_blocking("the 8 requests to wait for their batch", Duration::from_secs(60), || enqueued(&s.base) >= 8.0);
    let began = Instant::now();
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    for c in clients {
        let (status, text) = c.join().unwrap();
        assert_eq!(status, 204, "{text}\n{log}");
    }
    assert!(began.elapsed() < Duration::from_secs(30));
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 8, "every answered request is committed");
}

#[tokio::test]
async fn a_retried_idempotency_key_gets_the_same_answer_and_writes_nothing_twice() {
    let db = shared().fresh_db("serve_key").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    let good = b"cpu,host=a usage=1 1700000000000000000\ncpu,host=b usage=2 1700000100000000000\n";
    for _ in 0..3 {
        let (status, text) = post(&write, &[("Idempotency-Key", "k-1")], good);
        assert_eq!(status, 204, "{text}");
    }
    // A partly bad request: its answer is kept with the key.
    let mixed = b"cpu,host=c usage=3 1700000000000000000\ncpu,host=d usage=oops 1700000000000000000\n";
    let first = post(&write, &[("Idempotency-Key", "k-2")], mixed);
    assert_eq!(first.0, 400, "{}", first.1);
    assert_eq!(post(&write, &[("X-Request-Id", "k-2")], mixed), first);
    // Without a key, a repeat is a new request.
    assert_eq!(post(&write, &[], good).0, 204);
    let c = db.client().await;
    let hosts: Vec<String> = c.query("SELECT host FROM cpu ORDER BY host", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(hosts, vec!["a", "a", "b", "b", "c"]);
    let (_, metrics) = get(&format!("{}/metrics", s.base));
    assert!(metrics.contains("chute_idempotent_replays_total 3"), "{metrics}");
}

/// A key is the request's to the table it was written to: the table dropped
/// and made again (while chute serve runs, and across a restart of it), the
/// same key writes its rows into the new table instead of answering from a
/// record whose rows went with the old one.
#[tokio::test]
async fn an_idempotency_key_of_a_dropped_table_writes_into_the_new_one() {
    let db = shared().fresh_db("serve_key_drop").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let c = db.client().await;
    let count = async || -> i64 { c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0) };
    let good = b"cpu,host=a usage=1 1700000000000000000\ncpu,host=b usage=2 1700000100000000000\n";
    let key = [("Idempotency-Key", "batch-42")];
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(count().await, 2, "a retry writes nothing twice");
    // Keys recorded by chute of schema version 5 (no table with them): one
    // of a table that is still there, one of a table dropped and made again
    // before the upgrade, and one whose request was refused whole.
    create_time_partitioned(&url, "mem", CPU, "1 day", &[]);
    let mem = b"mem,host=a usage=1 1700000000000000000\nmem,host=b usage=2 1700000100000000000\n";
    let mem_key = [("Idempotency-Key", "batch-43")];
    assert_eq!(post(&write, &mem_key, mem).0, 204);
    let refused = [("Idempotency-Key", "batch-44")];
    assert_eq!(post(&write, &refused, b"mem,host=c usage=oops 1700000000000000000\n").0, 400);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    // The table made again, by hand, before the upgrade runs (nothing of chute's touches the schema).
    c.batch_execute(&format!(
        "ALTER TABLE chute.serve_requests DROP COLUMN rel; UPDATE chute.meta SET value = '5' WHERE key = 'schema_version';
         DROP TABLE cpu; CREATE TABLE cpu ({CPU}) PARTITION BY RANGE (time);
         CREATE TABLE cpu_nov PARTITION OF cpu FOR VALUES FROM ('2023-11-01') TO ('2023-12-01')"
    ))
    .await
    .unwrap();
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    let mem_rows = async || -> i64 { c.query_one("SELECT count(*) FROM mem", &[]).await.unwrap().get(0) };
    // The upgrade keeps the key whose rows the journal finds in a leaf that is still there...
    assert_eq!(post(&write, &mem_key, mem).0, 204);
    assert_eq!(mem_rows().await, 2, "a key of version 5 whose rows are there is kept\n{}", s.log());
    // ...and forgets the others: their rows are written now, into the table of that name.
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(count().await, 2, "a key of version 5 whose table was dropped before the upgrade is forgotten\n{}", s.log());
    assert_eq!(post(&write, &refused, b"mem,host=c usage=1 1700000000000000000\n").0, 204);
    assert_eq!(mem_rows().await, 3, "a key that wrote nothing is forgotten");

    c.batch_execute("DROP TABLE cpu").await.unwrap();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    // The lane finds its leaves gone and starts again: a retry may be answered 503 meanwhile.
    let began = Instant::now();
    let mut last = post(&write, &key, good);
    while last.0 != 204 && began.elapsed() < Duration::from_secs(60) {
        // A client's pause before its retry.
        std::thread::sleep(Duration::from_millis(250));
        last = post(&write, &key, good);
    }
    assert_eq!(last.0, 204, "{}\n{}", last.1, s.log());
    assert_eq!(count().await, 2, "the key's rows are in the new table, once\n{}", s.log());
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(count().await, 2, "and a retry there writes nothing twice");
    // Only the leaf dropped: a request without a key is answered "retry"
    // (503), never "rejected", and its retry makes the partition again.
    let leaf: String = c
        .query_one(
            "SELECT relid::regclass::text FROM pg_partition_tree('cpu') WHERE isleaf AND relid::regclass::text LIKE '%20231114'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    c.batch_execute(&format!("DROP TABLE {leaf}")).await.unwrap();
    let mut answers = vec![post(&write, &[], good)];
    while answers.last().unwrap().0 != 204 && answers.len() < 100 {
        // A client's pause before its retry.
        std::thread::sleep(Duration::from_millis(250));
        answers.push(post(&write, &[], good));
    }
    assert!(answers.iter().all(|(status, _)| [204, 503].contains(status)), "{answers:?}");
    assert_eq!(answers.last().unwrap().0, 204, "{answers:?}");
    assert_eq!(count().await, 2, "the retry's rows, in the new leaf\n{}", s.log());
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");

    c.batch_execute("DROP TABLE cpu").await.unwrap();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(post(&write, &key, good).0, 204);
    assert_eq!(count().await, 2, "after a restart of chute serve too\n{}", s.log());
}
