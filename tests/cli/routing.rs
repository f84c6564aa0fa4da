//! The loader puts every row in the leaf the server itself would choose.

use chute_testkit::shared;

use crate::common::{chute, column, create_time_partitioned, open_tempdir, run_expect, summary_value};

/// Rows: id, time (over 30 hours from 2021-06-08, shuffled), dev_id, name, region.
fn csv(n: usize) -> String {
    let mut rng = chute_core::generate::SplitMix64::new(7);
    let base: jiff::Timestamp = "2021-06-08T00:00:00Z".parse().unwrap();
    let mut out = String::new();
    for id in 0..n {
        let time = base + jiff::SignedDuration::from_secs((rng.next_u64() % (30 * 3600)) as i64);
        let dev = rng.next_u64() % 500;
        let name = ["\"alpha\"", "\"beta\"", "gamma", "\"délta\"", "", "\"x y\""][(rng.next_u64() % 6) as usize];
        let region = ["eu", "us", "ap", "sa"][(rng.next_u64() % 4) as usize];
        out.push_str(&format!("{id},{},{dev},{name},{region}\n", time.strftime("%Y-%m-%d %H:%M:%S+00")));
    }
    out
}

const COLS: &str = "id int, time timestamptz not null, dev_id int, name text, region text";

/// Creates the same layout under two names with plain SQL.
fn layouts(p: &str) -> Vec<String> {
    vec![
        // range on time, then hash on (dev_id, name): multi-column with text
        format!(
            "CREATE TABLE {p}_rh ({COLS}) PARTITION BY RANGE (time);
             CREATE TABLE {p}_rh_a PARTITION OF {p}_rh FOR VALUES FROM ('2021-06-08') TO ('2021-06-08 12:00') PARTITION BY HASH (dev_id, name);
             CREATE TABLE {p}_rh_a0 PARTITION OF {p}_rh_a FOR VALUES WITH (MODULUS 3, REMAINDER 0);
             CREATE TABLE {p}_rh_a1 PARTITION OF {p}_rh_a FOR VALUES WITH (MODULUS 3, REMAINDER 1);
             CREATE TABLE {p}_rh_a2 PARTITION OF {p}_rh_a FOR VALUES WITH (MODULUS 3, REMAINDER 2);
             CREATE TABLE {p}_rh_rest PARTITION OF {p}_rh DEFAULT PARTITION BY LIST (region);
             CREATE TABLE {p}_rh_rest_eu PARTITION OF {p}_rh_rest FOR VALUES IN ('eu', 'us');
             CREATE TABLE {p}_rh_rest_other PARTITION OF {p}_rh_rest DEFAULT"
        ),
        // list on text, hash on text below one branch
        format!(
            "CREATE TABLE {p}_l ({COLS}) PARTITION BY LIST (name);
             CREATE TABLE {p}_l_ab PARTITION OF {p}_l FOR VALUES IN ('alpha', 'beta', NULL);
             CREATE TABLE {p}_l_g PARTITION OF {p}_l FOR VALUES IN ('gamma') PARTITION BY HASH (region);
             CREATE TABLE {p}_l_g0 PARTITION OF {p}_l_g FOR VALUES WITH (MODULUS 2, REMAINDER 0);
             CREATE TABLE {p}_l_g1 PARTITION OF {p}_l_g FOR VALUES WITH (MODULUS 2, REMAINDER 1);
             CREATE TABLE {p}_l_other PARTITION OF {p}_l DEFAULT"
        ),
    ]
}

#[tokio::test]
async fn every_row_lands_where_the_server_would_put_it() {
    let db = shared().fresh_db("route_same").await;
    let c = db.client().await;
    for (a, b) in layouts("a").into_iter().zip(layouts("b")) {
        c.batch_execute(&a).await.unwrap();
        c.batch_execute(&b).await.unwrap();
    }
    let dir = open_tempdir();
    let file = dir.path().join("rows.csv");
    std::fs::write(&file, csv(5000)).unwrap();
    for t in ["rh", "l"] {
        let (out, err) = run_expect(chute().args(["--url", &db.url(), "load", &format!("a_{t}"), file.to_str().unwrap()]), 0);
        assert!(!err.contains("through the parent"), "a_{t} should be routed by chute: {err}");
        assert!(summary_value(&out, "partitions touched").parse::<u32>().unwrap() > 2, "{out}");
        run_expect(chute().args(["--url", &db.url(), "load", &format!("b_{t}"), file.to_str().unwrap(), "--via-parent"]), 0);
        let misplaced: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM a_{t} x JOIN b_{t} y USING (id)
                     WHERE substr(x.tableoid::regclass::text, 3) <> substr(y.tableoid::regclass::text, 3)"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        let total: i64 = c.query_one(&format!("SELECT count(*) FROM a_{t}"), &[]).await.unwrap().get(0);
        assert_eq!((misplaced, total), (0, 5000), "layout {t}");
    }
}

#[tokio::test]
async fn just_in_time_partitions_under_four_workers_are_created_once() {
    let db = shared().fresh_db("route_jit").await;
    let url = db.url();
    create_time_partitioned(&url, "jit", COLS, "1h", &["--premake", "0"]);
    let dir = open_tempdir();
    let file = dir.path().join("rows.csv");
    std::fs::write(&file, csv(20_000)).unwrap();
    let (out, _) = run_expect(
        chute().args(["--url", &url, "load", "jit", file.to_str().unwrap(), "--workers", "4", "--parse-threads", "4", "--batch-mb", "1"]),
        0,
    );
    let c = db.client().await;
    let hours: i64 = c.query_one("SELECT count(DISTINCT date_trunc('hour', time)) FROM jit", &[]).await.unwrap().get(0);
    let parts: i64 = c
        .query_one("SELECT count(*) FROM pg_inherits WHERE inhparent = 'jit'::regclass AND inhrelid::regclass::text LIKE 'jit_p2021%'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(parts, hours, "one partition per hour that has rows");
    assert_eq!(summary_value(&out, "partitions created"), hours.to_string());
    let n: i64 = c.query_one("SELECT count(*) FROM jit", &[]).await.unwrap().get(0);
    assert_eq!(n, 20_000);
}

#[tokio::test]
async fn rows_ahead_of_max_future_and_without_partitions_are_refused() {
    let db = shared().fresh_db("route_refuse").await;
    let url = db.url();
    create_time_partitioned(&url, "fut", COLS, "1d", &[]);
    let dir = open_tempdir();
    let file = dir.path().join("f.csv");
    std::fs::write(&file, "1,2099-01-01 00:00:00+00,1,a,eu\n2,2021-06-08 00:00:00+00,1,a,eu\n").unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "fut", "f.csv"]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
    let rejects = std::fs::read_to_string(dir.path().join("f.csv.rejects")).unwrap();
    assert!(rejects.contains("further ahead than --max-future 1d"), "{rejects}");
    let (_, _) = run_expect(
        chute().current_dir(dir.path()).args([
            "--url",
            &url,
            "load",
            "fut",
            "f.csv",
            "--no-create-partitions",
            "--reject-file",
            "n.rejects",
        ]),
        1,
    );
    let rejects = std::fs::read_to_string(dir.path().join("n.rejects")).unwrap();
    assert!(rejects.contains("--max-future"), "{rejects}");
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM fut", &[]).await.unwrap().get(0);
    assert_eq!(n, 1, "the 2021 row is loaded once: the second run of the same file skips it");
    std::fs::write(&file, "3,2021-01-01 00:00:00+00,1,a,eu\n").unwrap();
    run_expect(
        chute().current_dir(dir.path()).args([
            "--url",
            &url,
            "load",
            "fut",
            "f.csv",
            "--no-create-partitions",
            "--reject-file",
            "m.rejects",
        ]),
        1,
    );
    let rejects = std::fs::read_to_string(dir.path().join("m.rejects")).unwrap();
    assert!(rejects.contains("--no-create-partitions"), "{rejects}");
}

#[tokio::test]
async fn a_parent_with_triggers_is_loaded_through_the_parent_with_a_notice() {
    let db = shared().fresh_db("route_trigger").await;
    let c = db.client().await;
    c.batch_execute(&format!(
        "CREATE TABLE trg ({COLS}) PARTITION BY LIST (region);
         CREATE TABLE trg_all PARTITION OF trg DEFAULT;
         CREATE TABLE audit (n int);
         CREATE FUNCTION count_rows() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO audit VALUES (1); RETURN NULL; END $$;
         CREATE TRIGGER t AFTER INSERT ON trg FOR EACH STATEMENT EXECUTE FUNCTION count_rows();"
    ))
    .await
    .unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("r.csv");
    std::fs::write(&file, csv(100)).unwrap();
    let (out, err) = run_expect(chute().args(["--url", &db.url(), "load", "trg", file.to_str().unwrap()]), 0);
    assert!(err.contains("through the parent") && err.contains("triggers"), "{err}");
    assert!(out.contains("routed by           the server"), "{out}");
    let fired: i64 = c.query_one("SELECT count(*) FROM audit", &[]).await.unwrap().get(0);
    assert!(fired >= 1, "the statement trigger ran");
}

#[tokio::test]
async fn a_historical_load_leaves_no_empty_partitions_after_its_newest_row() {
    let db = shared().fresh_db("route_ahead").await;
    let url = db.url();
    let cols = "time timestamptz not null, dev_id int, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8";
    create_time_partitioned(&url, "ahead", cols, "1h", &["--premake", "3"]);
    // Hours 0 to 2 of 2021-06-01, with a pause in the middle (the loader
    // used to make the policy's premake partitions ahead of the rows while
    // input paused): partitions are made ahead only near the present, so
    // a load of years-old rows leaves none after its newest row, whether
    // the partitions are backfilled (auto) or made first (off).
    let exe = env!("CARGO_BIN_EXE_chute");
    for (table, mode) in [("ahead", "auto"), ("ahead_off", "off")] {
        if table != "ahead" {
            create_time_partitioned(&url, table, cols, "1h", &["--premake", "3"]);
        }
        // The input pauses for a second between its two halves (the test's
        // subject: a pause longer than stdin's flush, 1 s by default).
        let script = format!(
            "set -o pipefail; {{ '{exe}' gen conditions --devices 100 --rows 108000 | head -n 36000; sleep 1; \
             '{exe}' gen conditions --devices 100 --rows 108000 | tail -n +36001; }} | '{exe}' --url '{url}' load {table} - --load-id {table} --backfill {mode}"
        );
        let out = std::process::Command::new("bash").args(["-c", &script]).output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(summary_value(&stdout, "rows loaded"), "108000");
        assert_eq!(summary_value(&stdout, "partitions created"), "3", "{stdout}");
        let c = db.client().await;
        let leaves: Vec<String> = column(
            &c,
            &format!(
                "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = '{table}'::regclass
                 AND inhrelid::regclass::text LIKE '{table}_p2021%' ORDER BY 1"
            ),
        )
        .await;
        assert_eq!(
            leaves,
            [format!("{table}_p20210601_0000"), format!("{table}_p20210601_0100"), format!("{table}_p20210601_0200")],
            "{mode}"
        );
        if mode == "auto" {
            assert!(summary_value(&stdout, "backfilled").starts_with("3 "), "{stdout}");
        }
    }
}
