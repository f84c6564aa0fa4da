//! `chute gen`: the files it writes load with chute into the rows that
//! `chute load --gen` makes in-process, and tsbs files load with zero rejects.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

use chute_testkit::shared;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// `chute gen WORKLOAD --create=TABLE`, run in the database.
async fn create_table(c: &tokio_postgres::Client, workload: &str, table: &str, extra: &[&str]) {
    let (sql, _) = run_expect(chute().args(["gen", workload, &format!("--create={table}")]).args(extra), 0);
    c.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Writes `chute gen WORKLOAD --rows N` to a CSV file, loads it into
/// `table`, loads the same rows in-process (`--gen`) into `table`_gen, and
/// checks that the two tables hold the same rows.
async fn csv_matches_in_process(db_name: &str, workload: &str, table: &str, rows: u64, extra: &[&str]) -> chute_testkit::TestDb {
    let db = shared().fresh_db(db_name).await;
    let c = db.client().await;
    let in_process = format!("{table}_gen");
    create_table(&c, workload, table, extra).await;
    create_table(&c, workload, &in_process, extra).await;
    let dir = open_tempdir();
    let file = dir.path().join(format!("{workload}.csv"));
    let rows_arg = rows.to_string();
    run_expect(chute().args(["gen", workload, "--rows", &rows_arg, "--out", file.to_str().unwrap()]).args(extra), 0);
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", table, file.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), rows_arg);
    assert_eq!(summary_value(&out, "rows rejected"), "0");
    let (out, _) = run_expect(
        chute().current_dir(dir.path()).args(["--url", &db.url(), "load", &in_process, "--gen", workload, "--rows", &rows_arg]).args(extra),
        0,
    );
    assert_eq!(summary_value(&out, "rows loaded"), rows_arg);
    let diff = count(
        &c,
        &format!(
            "SELECT (SELECT count(*) FROM (TABLE {table} EXCEPT ALL TABLE {in_process}) a) + (SELECT count(*) FROM (TABLE {in_process} EXCEPT ALL TABLE {table}) b)"
        ),
    )
    .await;
    assert_eq!(diff, 0, "{workload}: the CSV file and the in-process rows differ");
    db
}

#[tokio::test]
async fn lineitem_csv_loads_with_tpch_values() {
    let db = csv_matches_in_process("gen_lineitem", "lineitem", "lineitem", 1000, &[]).await;
    let c = db.client().await;
    let row = c
        .query_one(
            "SELECT count(*), count(DISTINCT l_orderkey), min(l_linenumber), max(l_linenumber),
                    min(least(l_shipdate, l_commitdate)) >= '1992-01-01' AND max(greatest(l_shipdate, l_commitdate)) <= '1998-12-31',
                    bool_and(octet_length(l_comment) = 25 AND length(l_comment) BETWEEN 10 AND 25),
                    bool_and(l_partkey BETWEEN 1 AND 200000 AND l_suppkey BETWEEN 1 AND 10000)
             FROM lineitem",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1000);
    let orders = row.get::<_, i64>(1);
    assert!((1000 / 7..=1000 / 2).contains(&orders), "{orders} orders");
    assert_eq!((row.get::<_, i64>(2), row.get::<_, i64>(3)), (1, 7));
    assert!(row.get::<_, bool>(4), "dates in TPC-H's range");
    assert!(row.get::<_, bool>(5), "comments are char(25)");
    assert!(row.get::<_, bool>(6), "part and supplier keys in range");
    // Each order's lines are numbered 1..n.
    let gaps = count(&c, "SELECT count(*) FROM (SELECT l_orderkey FROM lineitem GROUP BY 1 HAVING max(l_linenumber) <> count(*)) x").await;
    assert_eq!(gaps, 0);
}

#[tokio::test]
async fn accounts_csv_loads_as_pgbench_fills_it() {
    let db = csv_matches_in_process("gen_accounts", "accounts", "pgbench_accounts", 1000, &[]).await;
    let c = db.client().await;
    let row = c
        .query_one(
            "SELECT count(*), sum(aid), min(aid), max(aid), max(bid), sum(abalance), bool_and(length(filler) = 0 AND octet_length(filler) = 84) FROM pgbench_accounts",
            &[],
        )
        .await
        .unwrap();
    assert_eq!(row.get::<_, i64>(0), 1000);
    assert_eq!(row.get::<_, i64>(1), 1000 * 1001 / 2);
    assert_eq!((row.get::<_, i32>(2), row.get::<_, i32>(3), row.get::<_, i32>(4)), (1, 1000, 1));
    assert_eq!(row.get::<_, i64>(5), 0);
    assert!(row.get::<_, bool>(6), "filler is 84 blanks");
}

#[tokio::test]
async fn conditions_fields_and_devices_reach_both_paths() {
    let extra = ["--fields", "3", "--devices", "7"];
    let db = csv_matches_in_process("gen_conditions", "conditions", "conditions", 100, &extra).await;
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(DISTINCT dev_id) FROM conditions").await, 7);
    assert_eq!(count(&c, "SELECT count(*) FROM conditions WHERE time = '2021-06-01T00:00:10Z'").await, 7);
    assert_eq!(count(&c, "SELECT count(*) FROM pg_attribute WHERE attrelid = 'conditions'::regclass AND attname LIKE 'data%'").await, 3);
}

/// Data lines per measurement in a tsbs file.
fn tsbs_rows(file: &std::path::Path, measurement: &str) -> i64 {
    let text = std::fs::read_to_string(file).unwrap();
    let header_end = text.find("\n\n").unwrap();
    text[header_end..].lines().filter(|l| l.starts_with(&format!("{measurement},"))).count() as i64
}

#[tokio::test]
async fn iot_file_loads_with_zero_rejects() {
    let db = shared().fresh_db("gen_iot").await;
    let dir = open_tempdir();
    let file = dir.path().join("iot.tsbs");
    let args = ["gen", "iot", "--scale", "5", "--from", "2021-06-08T00:00:00Z", "--to", "2021-06-08T02:00:00Z", "--out"];
    run_expect(chute().args(args).arg(&file), 0);
    let (out, _) =
        run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "--format", "tsbs", file.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows rejected"), "0");
    let c = db.client().await;
    for m in ["readings", "diagnostics"] {
        let (loaded, written) = (count(&c, &format!("SELECT count(*) FROM {m}")).await, tsbs_rows(&file, m));
        assert_eq!(loaded, written, "{m}");
        // 5 trucks, 720 steps, about 10% of readings missing as in tsbs.
        assert!((5 * 720 * 85 / 100..5 * 720 * 95 / 100).contains(&loaded), "{m}: {loaded}");
    }
    assert!(count(&c, "SELECT count(*) FROM readings WHERE latitude IS NULL").await > 0);
    assert!(count(&c, "SELECT count(*) FROM diagnostics WHERE fuel_state IS NULL").await > 0);
    assert!(count(&c, "SELECT count(*) FROM tags WHERE name IS NULL OR fleet IS NULL OR driver IS NULL OR model IS NULL").await > 0);
    assert_eq!(count(&c, "SELECT count(DISTINCT name) FROM tags WHERE name IS NOT NULL").await, 5);
    assert_eq!(count(&c, "SELECT count(*) FROM readings WHERE time < '2021-06-08T00:00:00Z' OR time >= '2021-06-08T02:00:00Z'").await, 0);
}

/// Every row of a tsbs measurement table but its tags_id (ids follow the
/// order tag sets were first seen, which parallel parsing does not fix).
fn rows_of(schema: &str, table: &str) -> String {
    format!("SELECT to_jsonb(r) - 'tags_id' FROM {schema}.{table} r")
}

#[tokio::test]
async fn iot_in_process_loads_what_the_file_holds_and_resumes() {
    let db = shared().fresh_db("gen_iot_inproc").await;
    let dir = open_tempdir();
    let file = dir.path().join("iot.tsbs");
    let size = ["--scale", "7", "--rows", "6000", "--seed", "3"];
    run_expect(chute().args(["gen", "iot", "--out"]).arg(&file).args(size), 0);
    let url = db.url();
    let from_file = ["--url", &url, "load", "--format", "tsbs", "--schema", "from_file", file.to_str().unwrap()];
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(from_file), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "6000");
    let in_process = ["--url", &url, "load", "--gen", "iot", "--schema", "in_process", "--interval", "1h"];
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(in_process).args(size), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "6000");
    assert_eq!(summary_value(&out, "rows rejected"), "0");
    let c = db.client().await;
    for m in ["readings", "diagnostics"] {
        let (a, b) = (rows_of("from_file", m), rows_of("in_process", m));
        let diff =
            count(&c, &format!("SELECT (SELECT count(*) FROM ({a} EXCEPT ALL {b}) x) + (SELECT count(*) FROM ({b} EXCEPT ALL {a}) y)"))
                .await;
        assert_eq!(diff, 0, "{m}: the in-process rows differ from the file's");
        assert!(count(&c, &format!("SELECT count(*) FROM in_process.{m}")).await > 2000, "{m}");
    }
    // Hourly partitions, as --interval asked.
    let leaves = count(&c, "SELECT count(*) FROM pg_partition_tree('in_process.readings') WHERE isleaf").await;
    assert!(leaves >= 2, "{leaves} leaves");
    // The same command again: every row is in the journal already.
    let (out, err) = run_expect(chute().current_dir(dir.path()).args(in_process).args(size), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "0", "{err}");
    assert!(err.contains("6000 rows were committed by earlier runs"), "{err}");
    assert_eq!(count(&c, "SELECT (SELECT count(*) FROM in_process.readings) + (SELECT count(*) FROM in_process.diagnostics)").await, 6000);
}

#[tokio::test]
async fn devops_file_loads_every_host_at_every_step() {
    let db = shared().fresh_db("gen_devops").await;
    let dir = open_tempdir();
    let file = dir.path().join("cpu.tsbs");
    let args = ["gen", "devops", "--scale", "4", "--from", "2021-06-08", "--to", "2021-06-08T01:00:00Z", "--interval", "1min", "--out"];
    run_expect(chute().args(args).arg(&file), 0);
    let (out, _) =
        run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "--format", "tsbs", file.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "240");
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(*) FROM cpu").await, 240);
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, 4);
    assert_eq!(count(&c, "SELECT count(DISTINCT time) FROM cpu").await, 60);
    assert_eq!(count(&c, "SELECT count(*) FROM cpu WHERE usage_user NOT BETWEEN 0 AND 100").await, 0);
}

#[test]
fn the_same_seed_writes_the_same_bytes_in_order() {
    let run = |seed: &str| run_expect(chute().args(["gen", "lineitem", "--rows", "100000", "--seed", seed]), 0).0;
    let a = run("5");
    assert_eq!(a, run("5"));
    assert_ne!(a, run("6"));
    assert_eq!(a.lines().count(), 100_000);
    // Chunks written by several threads come out in order.
    let (accounts, _) = run_expect(chute().args(["gen", "accounts", "--rows", "100001", "--header"]), 0);
    let mut lines = accounts.lines();
    assert_eq!(lines.next(), Some("aid,bid,abalance,filler"));
    for (i, line) in lines.enumerate() {
        assert!(line.starts_with(&format!("{},", i + 1)), "line {i}: {line}");
    }
    assert!(accounts.ends_with("100001,2,0,\"\"\n"));
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let exe = env!("CARGO_BIN_EXE_chute");
    let out =
        Command::new("bash").args(["-c", &format!("set -o pipefail; '{exe}' gen conditions --rows 10 | head -1")]).output().expect("bash");
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);
    // A reader that leaves long before the end.
    let mut child =
        chute().args(["gen", "conditions", "--rows", "100000000"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.starts_with("2021-06-01T00:00:00Z,0,"), "{first}");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn impossible_combinations_name_what_to_do_instead() {
    let cases: &[(&[&str], &str)] = &[
        (&["gen", "iot", "--format", "csv"], "writes a tsbs file"),
        (&["gen", "lineitem", "--format", "tsbs"], "tsbs files come from iot and devops"),
        (&["gen", "accounts", "--scale", "3"], "choose the size with --rows"),
        (&["gen", "lineitem", "--to", "2021-06-02"], "--to does not apply to lineitem"),
        (&["gen", "iot", "--fields", "3"], "--fields does not apply to iot"),
        (&["gen", "iot", "--create"], "chute load --format tsbs"),
        (&["gen", "conditions", "--out", "x.csv.gz"], "| gzip > x.csv.gz"),
        (&["gen", "conditions", "--interval", "0s"], "--interval"),
        (&["gen", "iot", "--from", "2021-06-02", "--to", "2021-06-01"], "end time must be after the start"),
        (&["--url", "postgres://nobody@127.0.0.1:1/x", "load", "t", "--gen", "iot"], "iot makes its own tables"),
        (&["--url", "postgres://nobody@127.0.0.1:1/x", "load", "--gen", "lineitem"], "chute load lineitem --gen lineitem"),
        (&["--url", "postgres://nobody@127.0.0.1:1/x", "load", "t", "--rows", "5", "--seed", "1"], "--rows, --seed go with --gen"),
        (&["--url", "postgres://nobody@127.0.0.1:1/x", "load", "t", "--schema", "s"], "--schema goes with"),
        (&["--url", "postgres://nobody@127.0.0.1:1/x", "load", "t", "--gen", "accounts", "--from", "2021-01-01"], "--from does not apply"),
    ];
    for (args, message) in cases {
        let (_, err) = run_expect(chute().args(*args), 2);
        assert!(err.contains(message), "{args:?}: {err}");
    }
}

#[test]
fn help_shows_examples() {
    let (out, _) = run_expect(chute().args(["gen", "--help"]), 0);
    for text in ["EXAMPLES:", "chute gen iot", "chute load --format tsbs", "--create", "lineitem", "accounts", "devops"] {
        assert!(out.contains(text), "chute gen --help lacks {text:?}:\n{out}");
    }
}
