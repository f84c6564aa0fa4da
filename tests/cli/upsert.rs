//! Upserts (`chute load --on-conflict nothing|update`) against a real
//! server: every expected table is built by SQL from the same rows and
//! compared row by row.

use std::io::Write;
use std::time::{Duration, Instant};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, open_tempdir, run_expect};

/// Devices per minute of time: key `k` is device `k % DEVS` at minute `k / DEVS` after the base.
const DEVS: u64 = 1000;

/// An hour ten days ago: every row's time is in the past, within the table's policy.
fn base() -> String {
    let now = jiff::Timestamp::now() - jiff::SignedDuration::from_hours(240);
    let secs = now.as_second() - now.as_second().rem_euclid(3600);
    jiff::Timestamp::from_second(secs).unwrap().strftime("%Y-%m-%d %H:%M:%S+00").to_string()
}

/// The time of key `k`, as CSV.
fn time_of(base: &jiff::Timestamp, k: u64) -> String {
    (*base + jiff::SignedDuration::from_mins((k / DEVS) as i64)).strftime("%Y-%m-%d %H:%M:%S+00").to_string()
}

/// Writes rows `time,dev,v,seq`, one per `(key, v, seq)`.
fn write_rows(path: &std::path::Path, base: &str, rows: impl Iterator<Item = (u64, i64, i64)>) {
    let base: jiff::Timestamp = base.replace("+00", "Z").replace(' ', "T").parse().unwrap();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for (k, v, seq) in rows {
        writeln!(f, "{},{},{v},{seq}", time_of(&base, k), k % DEVS).unwrap();
    }
    f.flush().unwrap();
}

/// SQL for key `k`'s time and device (`k` an expression).
fn key_sql(base: &str, k: &str) -> String {
    format!("'{base}'::timestamptz + ({k} / {DEVS}) * interval '1 minute' AS time, ({k} % {DEVS})::int AS dev")
}

/// An hourly partitioned table `name (time, dev, v, seq)` with the primary key (dev, time).
async fn hourly(c: &tokio_postgres::Client, url: &str, name: &str) {
    run_expect(
        chute().args([
            "--url",
            url,
            "partition",
            "create",
            name,
            "--columns",
            "time timestamptz not null, dev int not null, v float8, seq bigint",
            "--key",
            "time",
            "--interval",
            "1h",
        ]),
        0,
    );
    c.batch_execute(&format!("ALTER TABLE {name} ADD PRIMARY KEY (dev, time)")).await.unwrap();
}

fn load(url: &str, dir: &std::path::Path, table: &str, file: &str, extra: &[&str]) -> std::process::Command {
    let mut cmd = chute();
    cmd.current_dir(dir).args(["--url", url, "load", table, file, "--json"]).args(extra);
    cmd
}

/// The summary's upsert counts (inserted, updated, unchanged).
fn counts(stdout: &str) -> (u64, u64, u64) {
    let v: serde_json::Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: not JSON:\n{stdout}"));
    let u = &v["upsert"];
    let n = |f: &str| u[f].as_u64().unwrap_or_else(|| panic!("no upsert.{f} in {stdout}"));
    (n("inserted"), n("updated"), n("unchanged"))
}

/// Rows of `a` not in `b` plus rows of `b` not in `a` (both `SELECT time, dev, v, seq …`).
async fn difference(c: &tokio_postgres::Client, a: &str, b: &str) -> i64 {
    let sql = format!("SELECT (SELECT count(*) FROM (({a}) EXCEPT ALL ({b})) x) + (SELECT count(*) FROM (({b}) EXCEPT ALL ({a})) y)");
    c.query_one(&sql, &[]).await.unwrap().get(0)
}

async fn one_i64(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn nothing_twice_keeps_every_row_and_update_changes_exactly_the_corrected_ones() {
    const N: u64 = 1_000_000;
    let db = shared().fresh_db("upsert_twice").await;
    let (url, c) = (db.url(), db.client().await);
    hourly(&c, &url, "up").await;
    let dir = open_tempdir();
    let base = base();
    write_rows(&dir.path().join("a.csv"), &base, (0..N).map(|k| (k, k as i64, 0)));

    let (out, _) = run_expect(&mut load(&url, dir.path(), "up", "a.csv", &["--on-conflict", "nothing"]), 0);
    assert_eq!(counts(&out), (N, 0, 0), "{out}");
    // The same file again (another load id: the journal would skip it otherwise): every row is there already.
    let (out, _) = run_expect(&mut load(&url, dir.path(), "up", "a.csv", &["--on-conflict", "nothing", "--load-id", "again"]), 0);
    assert_eq!(counts(&out), (0, 0, N), "{out}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM up").await, N as i64);

    // A corrected copy of every tenth row, in reverse order.
    c.batch_execute("CREATE TABLE before AS SELECT dev, time, xmin::text AS x FROM up").await.unwrap();
    write_rows(&dir.path().join("b.csv"), &base, (0..N).rev().filter(|k| k % 10 == 0).map(|k| (k, -(k as i64), 1)));
    let (out, _) = run_expect(&mut load(&url, dir.path(), "up", "b.csv", &["--on-conflict", "update"]), 0);
    assert_eq!(counts(&out), (0, N / 10, 0), "{out}");
    let expected = format!(
        "SELECT {}, CASE WHEN k % 10 = 0 THEN -k ELSE k END::float8 AS v, (k % 10 = 0)::int::int8 AS seq FROM generate_series(0, {}) k",
        key_sql(&base, "k"),
        N - 1
    );
    assert_eq!(difference(&c, "SELECT time, dev, v, seq FROM up", &expected).await, 0, "the table differs from the expected rows");
    // Untouched: exactly the corrected rows have a new row version.
    let touched = one_i64(&c, "SELECT count(*) FROM up JOIN before b USING (dev, time) WHERE up.xmin::text <> b.x").await;
    assert_eq!(touched, (N / 10) as i64);
    let wrong = one_i64(&c, "SELECT count(*) FROM up JOIN before b USING (dev, time) WHERE up.xmin::text <> b.x AND up.seq <> 1").await;
    assert_eq!(wrong, 0, "only corrected rows changed");

    // The same corrections again: nothing would change, so nothing is written.
    let (out, _) = run_expect(&mut load(&url, dir.path(), "up", "b.csv", &["--on-conflict", "update", "--load-id", "b2"]), 0);
    assert_eq!(counts(&out), (0, 0, N / 10), "{out}");
}

/// Rows with repeated keys, across and within batches: row `j` has key
/// `(j * 7919) % keys`, a value that goes up and down, and `seq = j`.
fn duplicates(n: u64, keys: u64) -> impl Iterator<Item = (u64, i64, i64)> {
    (0..n).map(move |j| ((j * 7919) % keys, ((j * 37) % 1001) as i64, j as i64))
}

#[tokio::test]
async fn duplicates_in_one_input_resolve_in_input_order() {
    let db = shared().fresh_db("upsert_dups").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let base = base();
    // 60 000 rows over 5 000 keys (12 rows a key), in several 1 MiB batches on 4 workers.
    write_rows(&dir.path().join("d.csv"), &base, duplicates(60_000, 5_000));
    c.batch_execute("CREATE TABLE raw (time timestamptz, dev int, v float8, seq bigint)").await.unwrap();
    run_expect(&mut load(&url, dir.path(), "raw", "d.csv", &[]), 0);
    // Into a new partition, backfilled (filled without its unique index,
    // then the repeats resolved before the index is built), and the normal
    // way (merged into a partition that has it): the same table, the same counts.
    let cases = [
        ("last", &["--on-conflict", "update"][..], "seq DESC", true),
        ("first", &["--on-conflict", "nothing"][..], "seq", true),
        // Only v is overwritten: the first row of a key keeps its seq.
        ("last_v", &["--on-conflict", "update", "--update-columns", "v"][..], "seq DESC", true),
        // Applied one at a time, "update if larger" keeps the first row with the largest value (never backfilled).
        ("largest", &["--on-conflict", "update", "--update-if", "excluded.v > t.v"][..], "v DESC, seq", false),
    ];
    for (name, flags, order, backfills) in cases {
        let mut seen = None;
        for backfill in ["on", "off"] {
            let table = format!("{name}_{backfill}");
            hourly(&c, &url, &table).await;
            let mode = if backfills { backfill } else { "auto" };
            let extra = ["--workers", "4", "--batch-mb", "1", "--backfill", mode];
            let (out, _) = run_expect(&mut load(&url, dir.path(), &table, "d.csv", &[flags, &extra[..]].concat()), 0);
            let v: serde_json::Value = serde_json::from_str(&out).unwrap();
            let backfilled = v["partitions_backfilled"].as_u64().unwrap_or_else(|| panic!("{out}"));
            assert_eq!(backfilled > 0, backfills && backfill == "on", "{table}: {out}");
            let (inserted, updated, unchanged) = counts(&out);
            assert_eq!((inserted, inserted + updated + unchanged), (5_000, 60_000), "{table}: {out}");
            // v is (j * 37) % 1001 for the key's j-th row: the same counts either way.
            assert_eq!(*seen.get_or_insert((inserted, updated, unchanged)), (inserted, updated, unchanged), "{table}: {out}");
            let expected = if name == "last_v" {
                // The first row's seq, the last row's v.
                "SELECT f.time, f.dev, l.v, f.seq FROM (SELECT DISTINCT ON (dev, time) * FROM raw ORDER BY dev, time, seq) f \
                 JOIN (SELECT DISTINCT ON (dev, time) * FROM raw ORDER BY dev, time, seq DESC) l USING (dev, time)"
                    .to_owned()
            } else {
                format!("SELECT DISTINCT ON (dev, time) time, dev, v, seq FROM raw ORDER BY dev, time, {order}")
            };
            let sql = format!("SELECT time, dev, v, seq FROM {table}");
            assert_eq!(difference(&c, &sql, &expected).await, 0, "{table}: the table differs from SQL's resolution ({order})");
        }
        if name == "first" {
            assert_eq!(seen, Some((5_000, 0, 55_000)));
        }
        if name == "last" {
            assert_eq!(seen, Some((5_000, 55_000, 0)), "every later row of a key has another seq");
        }
    }
}

/// A key with a NULL conflicts with nothing under a unique index's default
/// (every such row is inserted, none was dropped as a repeat of another),
/// and with the NULL already there under `NULLS NOT DISTINCT`. The second
/// also takes the merge's way around a unique violation: `nothing` inserts
/// new keys without ON CONFLICT, which fails on that NULL, and goes again
/// with it.
#[tokio::test]
async fn keys_with_a_null_conflict_as_their_unique_index_says() {
    let db = shared().fresh_db("upsert_nulls").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    std::fs::write(dir.path().join("n.csv"), ",1,1\n,2,2\n5,3,3\n5,4,4\n7,5,5\n").unwrap();
    let cases = [
        ("distinct", "", "nothing", (3, 0, 2), "(,0,0) (,1,1) (,2,2) (5,3,3) (7,0,0)"),
        ("distinct", "", "update", (3, 2, 0), "(,0,0) (,1,1) (,2,2) (5,4,4) (7,5,5)"),
        ("not_distinct", "NULLS NOT DISTINCT", "nothing", (1, 0, 4), "(,0,0) (5,3,3) (7,0,0)"),
        ("not_distinct", "NULLS NOT DISTINCT", "update", (1, 4, 0), "(,2,2) (5,4,4) (7,5,5)"),
    ];
    for (name, nulls, action, want, rows) in cases {
        let table = format!("{name}_{action}");
        c.batch_execute(&format!(
            "CREATE TABLE {table} (dev int, seq bigint, v float8, UNIQUE {nulls} (dev)); INSERT INTO {table} VALUES (NULL, 0, 0), (7, 0, 0)"
        ))
        .await
        .unwrap();
        let (out, _) = run_expect(&mut load(&url, dir.path(), &table, "n.csv", &["--on-conflict", action]), 0);
        assert_eq!(counts(&out), want, "{table}: {out}");
        let got: String = c
            .query_one(&format!("SELECT string_agg(t::text, ' ' ORDER BY dev NULLS FIRST, seq) FROM {table} t"), &[])
            .await
            .unwrap()
            .get(0);
        assert_eq!(got, rows, "{table}");
    }
}

#[tokio::test]
async fn four_loads_with_overlapping_keys_at_once_neither_deadlock_nor_fail() {
    const KEYS: u64 = 40_000;
    let db = shared().fresh_db("upsert_four").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let base = base();
    c.batch_execute(
        "CREATE TABLE h (time timestamptz not null, dev int not null, v float8, seq bigint, PRIMARY KEY (dev, time)) PARTITION BY HASH (dev);
         DO $$ BEGIN FOR i IN 0..399 LOOP
             EXECUTE format('CREATE TABLE h_%s PARTITION OF h FOR VALUES WITH (MODULUS 400, REMAINDER %s)', i, i);
         END LOOP; END $$",
    )
    .await
    .unwrap();
    hourly(&c, &url, "hr").await;
    // Load i writes every key, in an order of its own, as v = seq = i.
    let steps = [1u64, 7_919, 104_729, 31_337];
    for (i, step) in steps.iter().enumerate() {
        let n = i as i64 + 1;
        write_rows(&dir.path().join(format!("h{n}.csv")), &base, (0..KEYS).map(|j| ((j * step) % KEYS, n, n)));
    }
    // Into the hourly table: four identical inputs.
    write_rows(&dir.path().join("same.csv"), &base, (0..KEYS).rev().map(|k| (k, k as i64, 9)));
    for (table, files) in [("h", ["h1.csv", "h2.csv", "h3.csv", "h4.csv"]), ("hr", ["same.csv"; 4])] {
        let children: Vec<_> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let action = if table == "h" && i >= 2 { "nothing" } else { "update" };
                let id = format!("{table}-{i}");
                spawn(
                    load(&url, dir.path(), table, f, &["--on-conflict", action, "--load-id", &id, "--workers", "3", "--batch-mb", "1"])
                        .stdout(std::process::Stdio::piped())
                        .stderr(std::process::Stdio::piped()),
                )
            })
            .collect();
        for child in children {
            let out = exit_within(child, Duration::from_secs(120), "an upsert load");
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(0), "{table}: {err}");
            assert!(!err.to_lowercase().contains("deadlock"), "{table}: {err}");
        }
        assert_eq!(one_i64(&c, &format!("SELECT count(DISTINCT (dev, time)) FROM {table}")).await, KEYS as i64);
        assert_eq!(one_i64(&c, &format!("SELECT count(*) FROM {table}")).await, KEYS as i64);
    }
    // Each row is one load's version of it.
    assert_eq!(one_i64(&c, "SELECT count(*) FROM h WHERE v::int8 <> seq OR seq NOT BETWEEN 1 AND 4").await, 0);
    let serial = format!("SELECT {}, k::float8 AS v, 9::int8 AS seq FROM generate_series(0, {}) k", key_sql(&base, "k"), KEYS - 1);
    assert_eq!(difference(&c, "SELECT time, dev, v, seq FROM hr", &serial).await, 0, "identical inputs: the serial result");
}

#[tokio::test]
async fn a_killed_upsert_resumes_to_the_table_an_uninterrupted_run_makes() {
    let db = shared().fresh_db("upsert_kill").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let base = base();
    // 400 000 rows over 150 000 keys (repeats across batches), into tables
    // that already hold some of the keys.
    write_rows(&dir.path().join("k.csv"), &base, duplicates(400_000, 150_000));
    write_rows(&dir.path().join("pre.csv"), &base, (0..200_000).step_by(3).map(|k| (k, -1, -1)));
    for t in ["killed", "whole"] {
        hourly(&c, &url, t).await;
        run_expect(&mut load(&url, dir.path(), t, "pre.csv", &[]), 0);
    }
    let flags = ["--on-conflict", "update", "--update-if", "excluded.v >= t.v", "--workers", "2", "--batch-mb", "1"];
    run_expect(&mut load(&url, dir.path(), "whole", "k.csv", &flags), 0);

    let mut child =
        spawn(load(&url, dir.path(), "killed", "k.csv", &flags).stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()));
    let began = Instant::now();
    while one_i64(&c, "SELECT count(*) FROM killed WHERE seq >= 0").await == 0 {
        assert!(child.running(), "the load ended before any batch was seen");
        assert!(began.elapsed() < Duration::from_secs(60), "no batch committed within 60 s");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(child.running(), "the load ended before it could be killed: make the input larger");
    child.kill();
    let partial = one_i64(&c, "SELECT count(*) FROM killed WHERE seq >= 0").await;
    let whole = one_i64(&c, "SELECT count(*) FROM whole WHERE seq >= 0").await;
    assert!(partial < whole, "killed part-way ({partial} of {whole} rows from the file)");

    run_expect(&mut load(&url, dir.path(), "killed", "k.csv", &flags), 0);
    let d = difference(&c, "SELECT time, dev, v, seq FROM killed", "SELECT time, dev, v, seq FROM whole").await;
    assert_eq!(d, 0, "the resumed table differs from an uninterrupted run's");
}

#[tokio::test]
async fn refusals_name_the_problem_and_the_fix_before_any_row_moves() {
    let db = shared().fresh_db("upsert_refuse").await;
    let (url, c) = (db.url(), db.client().await);
    let dir = open_tempdir();
    let base = base();
    write_rows(&dir.path().join("r.csv"), &base, (0..100).map(|k| (k, 1, 1)));
    let refused = |table: &str, extra: &[&str]| {
        let (_, err) = run_expect(&mut load(&url, dir.path(), table, "r.csv", extra), 2);
        err
    };

    // No key at all.
    c.batch_execute("CREATE TABLE nokey (time timestamptz, dev int, v float8, seq bigint)").await.unwrap();
    let err = refused("nokey", &["--on-conflict", "nothing"]);
    assert!(err.contains("no primary key and no unique index") && err.contains("ADD PRIMARY KEY"), "{err}");

    // Two unique indexes and no primary key: name them, ask for --conflict-key.
    c.batch_execute(
        "CREATE TABLE two (time timestamptz not null, dev int not null, v float8, seq bigint);
         CREATE UNIQUE INDEX two_a ON two (dev, time); CREATE UNIQUE INDEX two_b ON two (seq)",
    )
    .await
    .unwrap();
    let err = refused("two", &["--on-conflict", "update"]);
    assert!(err.contains("two_a") && err.contains("two_b") && err.contains("--conflict-key"), "{err}");
    // Naming one works.
    let (out, _) = run_expect(&mut load(&url, dir.path(), "two", "r.csv", &["--on-conflict", "nothing", "--conflict-key", "seq"]), 0);
    assert_eq!(counts(&out), (1, 0, 99), "every row has seq 1: the first is kept\n{out}");

    // A key without the partition key.
    hourly(&c, &url, "p").await;
    let err = refused("p", &["--on-conflict", "nothing", "--conflict-key", "dev"]);
    assert!(err.contains("lacks the partition key column time") && err.contains("--conflict-key dev,time"), "{err}");

    // A key not unique-indexed on every leaf: leaves made before the parent's index have their own; one lacks it.
    c.batch_execute(
        "CREATE TABLE q (time timestamptz not null, dev int not null, v float8, seq bigint) PARTITION BY RANGE (time);
         CREATE TABLE q_a PARTITION OF q FOR VALUES FROM (MINVALUE) TO ('2000-01-01');
         CREATE TABLE q_b PARTITION OF q FOR VALUES FROM ('2000-01-01') TO (MAXVALUE);
         CREATE UNIQUE INDEX ON q_a (dev, time)",
    )
    .await
    .unwrap();
    let err = refused("q", &["--on-conflict", "nothing", "--conflict-key", "dev,time"]);
    assert!(err.contains("is not unique-indexed on") && err.contains("CREATE UNIQUE INDEX ON"), "{err}");

    // update where the leaves' unique indexes differ.
    c.batch_execute(
        "CREATE TABLE u (time timestamptz not null, dev int not null, v float8, seq bigint, PRIMARY KEY (dev, time)) PARTITION BY RANGE (time);
         CREATE TABLE u_a PARTITION OF u FOR VALUES FROM (MINVALUE) TO ('2000-01-01');
         CREATE TABLE u_b PARTITION OF u FOR VALUES FROM ('2000-01-01') TO (MAXVALUE);
         CREATE UNIQUE INDEX ON u_b (seq, time)",
    )
    .await
    .unwrap();
    let err = refused("u", &["--on-conflict", "update"]);
    assert!(err.contains("different unique indexes") && err.contains("--on-conflict nothing"), "{err}");

    // A condition that does not parse, or names what is not there: refused by the server before any row moves.
    for cond in ["excluded.v >", "excluded.nope > t.v"] {
        let err = refused("p", &["--on-conflict", "update", "--update-if", cond]);
        assert!(err.contains("--update-if") && err.contains("excluded.updated_at > t.updated_at"), "{cond}: {err}");
    }
    let err = refused("p", &["--on-conflict", "nothing", "--update-if", "true"]);
    assert!(err.contains("--on-conflict update"), "{err}");
    let err = refused("p", &["--on-conflict", "update", "--update-columns", "dev"]);
    assert!(err.contains("conflict key"), "{err}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM p").await, 0, "nothing was loaded by a refused run");
    // Backfill with an upsert whose repeats only a merge can decide: refused, saying why.
    let err = refused("p", &["--on-conflict", "update", "--update-if", "excluded.v > t.v", "--backfill", "on"]);
    assert!(err.contains("--update-if") && err.contains("--backfill auto"), "{err}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM p").await, 0, "nothing was loaded by a refused run");
}

#[tokio::test]
async fn serve_into_a_table_set_to_update_keeps_one_row_per_key_across_retries() {
    use crate::serve::{Server, post};
    let db = shared().fresh_db("upsert_serve").await;
    let (url, c) = (db.url(), db.client().await);
    let cols = "time timestamptz not null, host text not null, usage float8, primary key (host, time)";
    let (_, err) = run_expect(
        chute().args([
            "--url",
            &url,
            "partition",
            "create",
            "m",
            "--columns",
            cols,
            "--key",
            "time",
            "--interval",
            "1d",
            "--on-conflict",
            "update",
        ]),
        0,
    );
    assert!(err.contains("upserts: on conflict update on (host, time)"), "{err}");
    let now = jiff::Timestamp::now().as_second() - 3600;
    let body = |v: u32| (0..50).map(|i| format!("m,host=h{} usage={v} {}\n", i % 5, now - i64::from(i / 5))).collect::<String>();
    let s = Server::start(&url, &[]);
    let write = format!("{}/write?db=public&precision=s", s.base);
    // A client retrying the same points (no Idempotency-Key), then sending a correction.
    for v in [1, 1, 1, 2] {
        let (status, text) = post(&write, &[], body(v).as_bytes());
        assert_eq!(status, 204, "{text}\n{}", s.log());
    }
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m").await, 50, "one row per key");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m WHERE usage = 2").await, 50, "every row took the last values");

    // A request may choose its own action only where the table allows it.
    let csv = |v: u32| {
        (0..50).map(|i| format!("{},h{},{v}\n", jiff::Timestamp::from_second(now - i64::from(i / 5)).unwrap(), i % 5)).collect::<String>()
    };
    let table = |q: &str| format!("{}/v1/tables/m?columns=time,host,usage{q}", s.base);
    let (status, text) = post(&table("&on_conflict=nothing"), &[("Content-Type", "text/csv")], csv(3).as_bytes());
    assert_eq!(status, 403, "{text}");
    assert!(text.contains("--per-request"), "{text}");
    run_expect(chute().args(["--url", &url, "partition", "set", "m", "--on-conflict", "update", "--per-request"]), 0);
    let (status, text) = post(&table("&on_conflict=nothing"), &[("Content-Type", "text/csv")], csv(3).as_bytes());
    assert_eq!(status, 204, "{text}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m WHERE usage = 2").await, 50, "nothing: the rows there stay");
    let (status, text) = post(&table(""), &[("Content-Type", "text/csv")], csv(4).as_bytes());
    assert_eq!(status, 204, "{text}");
    assert_eq!(one_i64(&c, "SELECT count(*) FROM m WHERE usage = 4").await, 50, "the table's update");
    let (status, text) = post(&table("&on_conflict=sometimes"), &[("Content-Type", "text/csv")], csv(5).as_bytes());
    assert_eq!(status, 400, "{text}");

    // Back to refusing: `error` clears the setting.
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "set", "m", "--on-conflict", "error"]), 0);
    assert!(err.contains("does not upsert"), "{err}");
    let (_, err) =
        run_expect(chute().args(["--url", &url, "partition", "set", "m", "--on-conflict", "nothing", "--conflict-key", "host"]), 2);
    assert!(err.contains("lacks the partition key column time"), "{err}");
}
