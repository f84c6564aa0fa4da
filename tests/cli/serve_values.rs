//! Line protocol reaches its lane as parsed values (no CSV in between): every
//! field type into every kind of column lands exactly as the same values
//! written as CSV and loaded with `chute load --epoch ns` (what serve did
//! before), bad values are rejected naming their lines, and a lone request
//! is committed as soon as a COPY worker is free, not after `--max-delay`.

use std::time::{Duration, Instant};

use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, wait_for, wait_for_blocking, waits_for_lock};
use crate::serve::{Server, post};

const COLS: &str = "time timestamptz not null, host text, code varchar(4), f8 float8, f4 float4, n numeric, n2 numeric(6,2), \
                    i2 int2, i4 int4, i8 int8, b boolean, addr inet, doc jsonb, at timestamptz";
const LIST: &str = "time,host,code,f8,f4,n,n2,i2,i4,i8,b,addr,doc,at";

fn rejected_lines(text: &str) -> Vec<(u64, String)> {
    let v: serde_json::Value = serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"));
    v["rejected"].as_array().unwrap().iter().map(|r| (r["line"].as_u64().unwrap(), r["reason"].as_str().unwrap().to_owned())).collect()
}

#[tokio::test]
async fn every_field_type_lands_like_the_same_values_loaded_from_csv() {
    let db = shared().fresh_db("serve_values").await;
    let url = db.url();
    create_time_partitioned(&url, "v", COLS, "1 day", &[]);
    create_time_partitioned(&url, "w", COLS, "1 day", &[]);
    let s = Server::start(&url, &[]);

    // Each good line with the CSV row serve used to write for it (columns in LIST's order).
    let first = [
        (
            r#"v,host=a f8=1.5,f4=0.1,n=3.14159,n2=3.14159,i2=7i,i4=-8i,i8=9223372036854775807i,b=t,code="ab",addr="10.0.0.1/8",doc="{\"k\": [1, 2.50]}",at="2024-02-29 12:00:00+05" 1700000000000000001"#,
            // This row goes to the server as text (inet, jsonb, a timestamp in text): its time as ISO text.
            r#"2023-11-14 22:13:20+00,"a","ab",1.5,0.1,3.14159,3.14159,7,-8,9223372036854775807,true,"10.0.0.1/8","{""k"": [1, 2.50]}","2024-02-29 12:00:00+05""#,
        ),
        (
            r#"v,host=b\ c,code=x f8=-0.0,f4=1e-10,n=-1e-7,i2=-32768i,b=false,at="epoch" 1700000000000000002"#,
            r#"2023-11-14 22:13:20+00,"b c","x",-0.0,1e-10,-1e-7,,-32768,,,false,,,"epoch""#,
        ),
        ("v,host=c i2=40000i 1700000000000000003", ""),
        (r#"v,host=d addr="not an address" 1700000000000000004"#, ""),
        (r#"v,host=e f8=1e300,f4=2.5,i8=-1i,doc="null" 1700000001499999999"#, r#"1700000001499999999,"e",,1e300,2.5,,,,,-1,,,"null","#),
        ("v,host=f f4=3.5e39 1700000000000000006", ""),
        (r#"v,host=g\,h code="q\"t",n2=-999.995 1700000000000000007"#, r#"1700000000000000007,"g,h","q""t",,,,-999.995,,,,,,,"#),
    ];
    // Another request, milliseconds: other types into the same columns.
    let second = [
        (
            "v,host=m f8=5i,i8=5u,n=18446744073709551615u,n2=12i 1700000000123",
            r#"1700000000123000000,"m",,5,,18446744073709551615,12,,,5,,,,"#,
        ),
        ("v,host=n i8=9223372036854775808u 1700000000124", ""),
        ("v,host=o f8=-7i,b=true,i4=2147483647i 1700000000125", r#"1700000000125000000,"o",,-7,,,,,2147483647,,true,,,"#),
    ];
    let body = |lines: &[(&str, &str)]| lines.iter().map(|(l, _)| *l).collect::<Vec<_>>().join("\n");
    let (status, text) = post(&format!("{}/write?db=public", s.base), &[], body(&first).as_bytes());
    assert_eq!(status, 400, "{text}\n{}", s.log());
    let rejects = rejected_lines(&text);
    assert_eq!(rejects.iter().map(|r| r.0).collect::<Vec<_>>(), [3, 4, 6], "{text}");
    assert!(rejects[0].1.contains("i2") && rejects[0].1.contains("out of range"), "{text}");
    assert!(rejects[1].1.contains("inet"), "the server's own reason: {text}");
    assert!(rejects[2].1.contains("f4") && rejects[2].1.contains("out of range"), "{text}");
    let (status, text) = post(&format!("{}/write?db=public&precision=ms", s.base), &[], body(&second).as_bytes());
    assert_eq!(status, 400, "{text}");
    let rejects = rejected_lines(&text);
    assert_eq!(rejects.iter().map(|r| r.0).collect::<Vec<_>>(), [2], "{text}");
    assert!(rejects[0].1.contains("i8"), "{text}");

    // The same values as CSV, through chute load: the rows serve used to make
    // (but for rows the server parses: their epoch was rejected then).
    let dir = open_tempdir();
    let csv = dir.path().join("w.csv");
    let rows: Vec<&str> = first.iter().chain(&second).map(|(_, c)| *c).filter(|c| !c.is_empty()).collect();
    std::fs::write(&csv, rows.join("\n") + "\n").unwrap();
    run_expect(chute().args(["--url", &url, "load", "w", csv.to_str().unwrap(), "--columns", LIST, "--epoch", "ns"]), 0);

    let c = db.client().await;
    let all = |t: &str| format!("SELECT to_jsonb(x)::text FROM {t} x ORDER BY time, host");
    let got: Vec<String> = c.query(&all("v"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    let want: Vec<String> = c.query(&all("w"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(got.len(), 6);
    assert_eq!(got, want);
    // Spot checks against the values themselves, not only against the other path.
    let row: (f64, f32, String, i64) = {
        let r = c.query_one("SELECT f8, f4, n::text, i8 FROM v WHERE host = 'a'", &[]).await.unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3))
    };
    assert_eq!(row, (1.5, 0.1, "3.14159".to_owned(), i64::MAX));
    let n2: String = c.query_one("SELECT n2::text FROM v WHERE host = 'g,h'", &[]).await.unwrap().get(0);
    assert_eq!(n2, "-1000.00");
    let us: String = c.query_one("SELECT to_char(time AT TIME ZONE 'UTC', 'SS.US') FROM v WHERE host = 'e'", &[]).await.unwrap().get(0);
    assert_eq!(us, "21.500000", "nanoseconds rounded to microseconds as before");
}

#[tokio::test]
async fn a_lone_request_is_committed_without_waiting_for_max_delay() {
    let db = shared().fresh_db("serve_idle").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    let s = Server::start(&url, &["--max-delay", "60s"]);
    let url_w = format!("{}/write?db=public&precision=s", s.base);
    // The lane starts on the first request; the next ones find it running.
    let (status, text) = post(&url_w, &[], b"cpu,host=a usage=1 1700000000\n");
    assert_eq!(status, 204, "{text}\n{}", s.log());
    for i in 0..3 {
        let began = Instant::now();
        let (status, text) = post(&url_w, &[], format!("cpu,host=b{i} usage=2 170000000{i}\n").as_bytes());
        assert_eq!(status, 204, "{text}");
        // The COPY workers are idle: nothing waits for --max-delay (60 s).
        assert!(began.elapsed() < Duration::from_secs(20), "took {:?}", began.elapsed());
    }
    let n: i64 = db.client().await.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 4);
}

#[tokio::test]
async fn batch_rows_sends_each_batch_at_that_many_rows_while_the_workers_are_busy() {
    let db = shared().fresh_db("serve_batch_rows").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    // One COPY worker, and --max-delay longer than a request may wait (60 s):
    // while the worker is busy, only --batch-rows sends what gathered (once
    // it is free, whatever gathered goes at once).
    let s = Server::start(&url, &["--workers", "1", "--max-delay", "120s", "--batch-rows", "100"]);
    let url_w = format!("{}/write?db=public&precision=s", s.base);
    let (status, text) = post(&url_w, &[], b"cpu,host=a usage=1 1700000000\n");
    assert_eq!(status, 204, "{text}\n{}", s.log());
    // The worker's next COPY waits behind this lock…
    let holder = db.client().await;
    holder.batch_execute("BEGIN; LOCK TABLE cpu IN ACCESS EXCLUSIVE MODE").await.unwrap();
    let began = Instant::now();
    let requests: Vec<_> = (0..3)
        .map(|r| {
            let url_w = url_w.clone();
            let body: String = (0..100).map(|i| format!("cpu,host=r{r}_{i} usage={i} {}\n", 1_700_000_100 + r * 1000 + i)).collect();
            std::thread::spawn(move || post(&url_w, &[], body.as_bytes()))
        })
        .collect();
    // …while three requests of 100 rows arrive: the first goes to the
    // worker, the others are sent as batches of their own as they reach 100
    // rows. The lock goes once the worker waits for it and every request's
    // rows are with the table's load.
    let watcher = db.client().await;
    wait_for("the worker's COPY to wait for the lock", Duration::from_secs(60), || waits_for_lock(&watcher, "^COPY|chute_targets")).await;
    wait_for_blocking("the three requests to reach the table's load", Duration::from_secs(60), || crate::serve::enqueued(&s.base) >= 4.0);
    holder.batch_execute("COMMIT").await.unwrap();
    for r in requests {
        let (status, text) = r.join().unwrap();
        assert_eq!(status, 204, "{text}\n{}", s.log());
    }
    assert!(began.elapsed() < Duration::from_secs(40), "the requests waited {:?}", began.elapsed());
    let n: i64 = db.client().await.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 301);
    // Without --batch-rows the two requests that waited would share one
    // batch of 200 rows once the worker was free; with it, every batch
    // left at 100 rows or fewer.
    let (_, metrics) = crate::serve::get(&format!("{}/metrics", s.base));
    let value = |name: &str| -> f64 {
        metrics.lines().find(|l| l.starts_with(name)).and_then(|l| l.rsplit(' ').next()?.parse().ok()).unwrap_or(-1.0)
    };
    let (batches, small) = (value("chute_batch_rows_count"), value("chute_batch_rows_bucket{le=\"100\"}"));
    assert_eq!(batches, 4.0, "{metrics}");
    assert_eq!(small, batches, "{metrics}");
}
