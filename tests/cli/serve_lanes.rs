//! `chute serve`'s lanes under what requests and operators do to them
//! (issue 26): concurrent new columns (`--create-tables`), a CSV request
//! naming a column the table lacks, a TRUNCATE of a target table, and
//! SIGTERM while a lane is stuck behind a lock.

use std::time::{Duration, Instant};

use chute_testkit::shared;

use super::serve::{Server, post};
use crate::common::{column, create_time_partitioned, wait_for, waits_for_lock};

const CPU: &str = "time timestamptz not null, host text, usage float8";

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap().get(0)
}

#[tokio::test]
async fn concurrent_requests_adding_columns_all_land_on_few_connections_and_sigterm_stops_serve() {
    let db = shared().fresh_db("serve_columns").await;
    let url = db.url();
    let c = db.client().await;
    let s = Server::start(&url, &["--create-tables", "--lock-timeout", "500ms", "--request-timeout", "30s", "--shutdown-timeout", "5s"]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[], b"m,host=a f0=0 1700000000000000000\n").0, 204);
    // How many connections the database has, sampled while the requests run.
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let (sampled, first_sample) = std::sync::mpsc::channel();
    let sampler = {
        let (options, sampling, name) = (db.options.clone(), sampling.clone(), db.name.clone());
        // Its own thread and runtime: this one blocks on the clients below.
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            rt.block_on(async move {
                let c = options.connect().await.unwrap();
                let mut most = 0i64;
                while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                    let n: i64 = c.query_one("SELECT count(*) FROM pg_stat_activity WHERE datname = $1", &[&name]).await.unwrap().get(0);
                    most = most.max(n);
                    let _ = sampled.send(());
                    // The sampling rate.
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                most
            })
        })
    };
    first_sample.recv_timeout(Duration::from_secs(60)).expect("the sampler's first sample of the database's connections");
    let began = Instant::now();
    let clients: Vec<_> = (1..=30)
        .map(|i| {
            let write = write.clone();
            std::thread::spawn(move || post(&write, &[], format!("m,host=h{i} f{i}={i} {}\n", 1_700_000_000_000_000_000i64 + i).as_bytes()))
        })
        .collect();
    let answers: Vec<(u16, String)> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let took = began.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.join().unwrap();
    assert!(answers.iter().all(|a| a.0 == 204), "{answers:?}\n{}", s.log());
    let columns: Vec<String> =
        column(&c, "SELECT attname::text FROM pg_attribute WHERE attrelid = 'm'::regclass AND attname LIKE 'f%'").await;
    assert_eq!(columns.len(), 31, "{columns:?}");
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 31);
    for i in 1..=30 {
        assert_eq!(count(&c, &format!("SELECT count(*) FROM m WHERE f{i} = {i} AND host = 'h{i}'")).await, 1, "f{i}");
    }
    // One statement added what waiting requests asked for together: far fewer than 30 tables changes.
    let alters = s.log().matches("chute serve: added to public.m").count();
    assert!(alters < 30, "{alters} ALTER TABLEs\n{}", s.log());
    assert!(most <= 25, "{most} connections to the database at once");
    eprintln!("serve_columns: 30 new columns in {took:?}, {alters} ALTER TABLEs, at most {most} connections");
    let t = Instant::now();
    let (code, log) = s.terminate();
    eprintln!("serve_columns: SIGTERM took {:?}", t.elapsed());
    assert_eq!(code, Some(143), "{log}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
}

#[tokio::test]
async fn a_csv_request_naming_an_unknown_column_gets_400_at_once_and_leaves_its_table_working() {
    let db = shared().fresh_db("serve_csv_cols").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "m", "time timestamptz not null, dev int, v float8", "1 day", &[]);
    let s = Server::start(&url, &["--shutdown-timeout", "5s"]);
    let csv = [("Content-Type", "text/csv")];
    let t = Instant::now();
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &csv, b"time,dev,nosuch\n2024-01-01 00:00:00+00,1,2\n");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("no column \\\"nosuch\\\""), "{text}");
    assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
    let (status, text) = post(&format!("{}/v1/tables/m?columns=time,zz", s.base), &csv, b"2024-01-01 00:00:00+00,1\n");
    assert_eq!(status, 400, "{text}");
    let (status, text) = post(
        &format!("{}/v1/tables/m", s.base),
        &[("Content-Type", "application/x-ndjson")],
        b"{\"time\":\"2024-01-02T00:00:00Z\",\"dev\":2}\n",
    );
    assert_eq!(status, 204, "{text}");
    let (status, text) = post(&format!("{}/v1/tables/m?header=true", s.base), &csv, b"time,dev,v\n2024-01-01 00:00:00+00,1,2.5\n");
    assert_eq!(status, 204, "{text}");
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 2);
    let t = Instant::now();
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // No lane failed, so none was started again: not until serve exited.
    assert!(!log.contains("failed"), "{log}");
}

#[tokio::test]
async fn a_truncated_table_keeps_being_written_by_a_running_and_a_new_serve() {
    let db = shared().fresh_db("serve_truncate").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let key = [("Idempotency-Key", "before")];
    let before = b"cpu,host=before usage=1 1700000000000000000\n";
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &key, before).0, 204);
    c.batch_execute("TRUNCATE cpu").await.unwrap();
    assert_eq!(post(&write, &[], b"cpu,host=running usage=2 1700000000000000001\n").0, 204);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");

    let s = Server::start(&url, &["--request-timeout", "10s"]);
    let write = format!("{}/write?db=public", s.base);
    let (status, text) = post(&write, &[], b"cpu,host=new usage=3 1700000000000000002\n");
    assert_eq!(status, 204, "{text}\n{}", s.log());
    // The key recorded before the TRUNCATE keeps its answer; its row, removed by the TRUNCATE, is not written again.
    assert_eq!(post(&write, &key, before).0, 204);
    let hosts: Vec<String> = column(&c, "SELECT host FROM cpu ORDER BY time").await;
    assert_eq!(hosts, vec!["running", "new"]);
    // VACUUM FULL (rows kept, storage rewritten) and TRUNCATE again, under this serve and the next.
    c.batch_execute("VACUUM FULL cpu").await.unwrap();
    assert_eq!(post(&write, &[], b"cpu,host=vacuumed usage=4 1700000000000000003\n").0, 204);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    assert!(!log.contains("truncated or rewritten"), "{log}");
    c.batch_execute("TRUNCATE cpu").await.unwrap();
    let s = Server::start(&url, &["--request-timeout", "10s"]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[], b"cpu,host=last usage=5 1700000000000000004\n").0, 204, "{}", s.log());
    assert_eq!(column::<String>(&c, "SELECT host FROM cpu").await, vec!["last"]);
}

#[tokio::test]
async fn sigterm_ends_serve_within_its_deadline_while_a_lane_waits_on_a_lock() {
    let db = shared().fresh_db("serve_stuck").await;
    let url = db.url();
    let c = db.client().await;
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &["--shutdown-timeout", "2s"]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[], b"cpu,host=a usage=1 1700000000000000000\n").0, 204);
    // Another session holds the table: the lane's next COPY waits behind it.
    c.batch_execute("BEGIN; LOCK TABLE cpu IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let stuck = std::thread::spawn(move || post(&write, &[], b"cpu,host=b usage=2 1700000000000000001\n"));
    let watcher = db.client().await;
    wait_for("the lane's COPY to wait for the lock", Duration::from_secs(60), || waits_for_lock(&watcher, "^COPY|chute_targets")).await;
    let t = Instant::now();
    let (code, log) = s.terminate();
    let took = t.elapsed();
    assert_eq!(code, Some(143), "{log}");
    assert!(took < Duration::from_secs(2 + 5), "SIGTERM took {took:?}\n{log}");
    let (status, text) = stuck.join().unwrap();
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("--shutdown-timeout"), "{text}");
    c.batch_execute("ROLLBACK").await.unwrap();
    assert_eq!(column::<String>(&c, "SELECT host FROM cpu").await, vec!["a"], "nothing answered 503 was committed after all");
}
