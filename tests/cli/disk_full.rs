//! A full disk: a table whose partitions live in a tablespace on a small
//! tmpfs (`chute_testkit::small_disk`) that the rows fill. `chute load`
//! stops with the server's disk_full (53100) and what to do, keeping what it
//! committed; `chute serve` answers 503 with Retry-After and keeps every
//! acknowledged row. Once space is freed, the same load finishes and the
//! same request (its key) is written, each exactly once. `chute consume`
//! stops as the load does (exit 2, 53100 and what to do); the same command
//! run again once space is freed loads every message once.

use std::io::Write;
use std::time::Duration;

use chute_testkit::shared;
use chute_testkit::small_disk::SmallDisk;

use crate::common::{chute, open_tempdir, run_expect, summary_value};
use crate::serve::{Server, agent};

/// `m (time, id, pad)` by day over January 2024, its partitions in a new
/// tablespace `space` on `disk`.
async fn table_on(c: &tokio_postgres::Client, disk: &SmallDisk, space: &str) {
    c.batch_execute(&format!("CREATE TABLESPACE \"{space}\" LOCATION '{}'", disk.path().display())).await.unwrap();
    c.batch_execute("CREATE TABLE m (time timestamptz NOT NULL, id bigint NOT NULL, pad text) PARTITION BY RANGE (time)").await.unwrap();
    for day in 1..=31 {
        let (from, to) = (format!("2024-01-{day:02}"), if day == 31 { "2024-02-01".to_owned() } else { format!("2024-01-{:02}", day + 1) });
        c.batch_execute(&format!("CREATE TABLE m_{day} PARTITION OF m FOR VALUES FROM ('{from}') TO ('{to}') TABLESPACE \"{space}\""))
            .await
            .unwrap();
    }
}

async fn counts(c: &tokio_postgres::Client) -> (i64, i64) {
    let r = c.query_one("SELECT count(*), count(DISTINCT id) FROM m", &[]).await.unwrap();
    (r.get(0), r.get(1))
}

/// Row `k`: its time in January 2024, its id, 200 bytes of padding.
fn row(k: u64) -> String {
    format!("2024-01-{:02} {:02}:{:02}:00+00,{k},{}\n", 1 + k % 31, (k / 31) % 24, (k / 744) % 60, "x".repeat(200))
}

async fn drop_tablespace(c: &tokio_postgres::Client, space: &str) {
    c.batch_execute("DROP TABLE m").await.unwrap();
    c.batch_execute(&format!("DROP TABLESPACE \"{space}\"")).await.unwrap();
}

#[tokio::test]
async fn a_load_stops_on_a_full_disk_and_the_same_command_finishes_exactly_once() {
    const N: u64 = 200_000;
    let db = shared().fresh_db("disk_full_load").await;
    let (url, c) = (db.url(), db.client().await);
    let disk = SmallDisk::mount(16);
    let space = format!("small_{}", db.name);
    table_on(&c, &disk, &space).await;
    let dir = open_tempdir();
    {
        let mut f = std::io::BufWriter::new(std::fs::File::create(dir.path().join("a.csv")).unwrap());
        for k in 0..N {
            f.write_all(row(k).as_bytes()).unwrap();
        }
    }
    // About 50 MB of rows for 16 MB of disk.
    let load = || {
        let mut cmd = chute();
        cmd.current_dir(dir.path()).args(["--url", &url, "load", "m", "a.csv", "--retry-for", "5s"]);
        cmd
    };
    let out = load().output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "the load cannot have finished: {err}");
    assert!(err.contains("53100") && err.contains("No space left on device"), "the server's reason: {err}");
    assert!(err.contains("free space"), "what to do: {err}");
    let (rows, distinct) = counts(&c).await;
    assert!(rows < N as i64, "{rows}");
    assert_eq!(rows, distinct, "nothing twice");

    disk.grow(256);
    let (out, err) = run_expect(&mut load(), 0);
    assert_eq!(counts(&c).await, (N as i64, N as i64), "{out}\n{err}");
    let loaded: i64 = summary_value(&out, "rows loaded").split_whitespace().next().unwrap().parse().unwrap();
    assert_eq!(loaded + rows, N as i64, "the second run loaded what was left: {out}");
    drop_tablespace(&c, &space).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn consume_stops_on_a_full_disk_and_the_same_command_finishes_exactly_once() {
    const N: u64 = 200_000;
    const TOPIC: &str = "disk_full_consume";
    let db = shared().fresh_db("disk_full_consume").await;
    let (url, c) = (db.url(), db.client().await);
    let disk = SmallDisk::mount(16);
    let space = format!("small_{}", db.name);
    table_on(&c, &disk, &space).await;
    let broker = chute_testkit::kafka::shared();
    broker.create_topic(TOPIC, 3);
    // About 50 MB of rows for 16 MB of disk, a row a message.
    let producer = broker.producer();
    for k in 0..N {
        let line = row(k);
        let m =
            chute_testkit::kafka::Message { partition: Some((k % 3) as i32), payload: line.trim_end().as_bytes(), ..Default::default() };
        producer.send(TOPIC, &m);
    }
    producer.flush();
    let dir = open_tempdir();
    let consume = || {
        let mut cmd = chute();
        cmd.current_dir(dir.path())
            .args(["--url", &url, "consume", "m", "--brokers", &broker.bootstrap(), "--topic", TOPIC, "--format", "csv"])
            .args(["--until-end", "--json", "--retry-for", "5s"]);
        cmd
    };
    let out = consume().output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "the consumer cannot have finished: {err}");
    assert!(err.contains("53100") && err.contains("No space left on device"), "the server's reason: {err}");
    assert!(err.contains("free space") && err.contains("the same chute command run again"), "what to do: {err}");
    let (rows, distinct) = counts(&c).await;
    assert!(rows < N as i64, "{rows}");
    assert_eq!(rows, distinct, "nothing twice");

    disk.grow(256);
    let (out, err) = run_expect(&mut consume(), 0);
    assert_eq!(counts(&c).await, (N as i64, N as i64), "{out}\n{err}");
    let report: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(report["rows_loaded"].as_i64().unwrap() + rows, N as i64, "the second run loaded what was left: {out}");
    drop_tablespace(&c, &space).await;
}

/// POSTs `body` to serve's table door with `key`: (status, Retry-After, body).
fn post_keyed(base: &str, key: &str, body: &str) -> (u16, Option<String>, String) {
    let mut resp = agent()
        .post(&format!("{base}/v1/tables/m"))
        .header("Content-Type", "text/csv")
        .header("Idempotency-Key", key)
        .send(body.as_bytes())
        .unwrap_or_else(|e| panic!("POST: {e}"));
    let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
    (resp.status().as_u16(), retry_after, resp.body_mut().read_to_string().unwrap())
}

#[tokio::test]
async fn serve_answers_503_on_a_full_disk_and_keeps_every_acknowledged_row() {
    let db = shared().fresh_db("disk_full_serve").await;
    let (url, c) = (db.url(), db.client().await);
    let disk = SmallDisk::mount(16);
    let space = format!("small_{}", db.name);
    table_on(&c, &disk, &space).await;
    let s = Server::start(&url, &["--schema", "public", "--allow-table", "public.m", "--retry-for", "5s", "--request-timeout", "30s"]);
    // Requests of 5,000 rows (about 1.2 MB) until the disk is full.
    let (mut acknowledged, mut failed) = (0u64, None);
    for r in 0..100u64 {
        let body: String = (r * 5_000..(r + 1) * 5_000).map(row).collect();
        let (status, retry_after, text) = post_keyed(&s.base, &format!("req-{r}"), &body);
        match status {
            204 => acknowledged += 5_000,
            503 => {
                assert_eq!(retry_after.as_deref(), Some("1"), "{text}");
                assert!(text.contains("53100") || text.contains("No space left"), "the reason: {text}");
                failed = Some((r, body));
                break;
            }
            other => panic!("request {r}: {other} {text}\n{}", s.log()),
        }
    }
    let (r, body) = failed.unwrap_or_else(|| panic!("the disk never filled:\n{}", s.log()));
    assert!(acknowledged > 0);
    let (rows, distinct) = counts(&c).await;
    assert_eq!(rows, distinct, "nothing twice");
    assert!(
        rows >= acknowledged as i64 && rows < acknowledged as i64 + 5_000,
        "every acknowledged row, and no more than the failed request: {rows}"
    );

    disk.grow(256);
    // The failed request again with its key, until serve's lane is back.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let (status, _, text) = post_keyed(&s.base, &format!("req-{r}"), &body);
        if status == 204 {
            break;
        }
        assert_eq!(status, 503, "{text}");
        assert!(std::time::Instant::now() < deadline, "the request was never written after space was freed: {text}\n{}", s.log());
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(counts(&c).await, (acknowledged as i64 + 5_000, acknowledged as i64 + 5_000));
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    drop_tablespace(&c, &space).await;
}
