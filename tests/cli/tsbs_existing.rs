//! tsbs files into tables that exist already: the published RDS experiment's
//! DDL (fields altered to `real`, a tags table whose unique index treats NULLs
//! as distinct, hourly partitions made by pg_partman with a DEFAULT), and
//! resuming a killed load whose chunks meet new tag sets across partitions.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use chute_core::generate::SplitMix64;
use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, open_tempdir, run_expect};

fn iot_sample() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/tsbs_iot_s50_2h.tsbs.gz");
    assert!(p.is_file(), "test data {} is missing", p.display());
    p.to_string_lossy().into_owned()
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// The tsbs-on-RDS schema, partitioned hourly by pg_partman 4.x (`native`,
/// with its DEFAULT partition), with partitions for the sample's two hours.
const PARTMAN_DDL: &str = "
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
CREATE TABLE tags (id serial PRIMARY KEY, name text, fleet text, driver text, model text, device_version text,
    load_capacity double precision, fuel_capacity double precision, nominal_fuel_consumption double precision);
CREATE UNIQUE INDEX uniq1 ON tags (name, fleet, driver, model, device_version, load_capacity, fuel_capacity, nominal_fuel_consumption);
CREATE TABLE readings (time timestamptz NOT NULL, tags_id integer, name text, latitude double precision, longitude double precision,
    elevation double precision, velocity double precision, heading double precision, grade double precision,
    fuel_consumption double precision, additional_tags jsonb) PARTITION BY RANGE (time);
ALTER TABLE readings ALTER COLUMN elevation TYPE real, ALTER COLUMN velocity TYPE real, ALTER COLUMN heading TYPE real,
    ALTER COLUMN grade TYPE real, ALTER COLUMN fuel_consumption TYPE real;
CREATE TABLE diagnostics (time timestamptz NOT NULL, tags_id integer, name text, fuel_state double precision,
    current_load double precision, status double precision, additional_tags jsonb) PARTITION BY RANGE (time);
CREATE INDEX ON readings (tags_id, time DESC);
CREATE INDEX ON readings (time DESC);
CREATE INDEX ON readings USING brin (time);
CREATE INDEX ON readings (velocity, time DESC);
CREATE INDEX ON diagnostics (tags_id, time DESC);
CREATE INDEX ON diagnostics (time DESC);
CREATE INDEX ON diagnostics USING brin (time);
CREATE INDEX ON diagnostics (fuel_state, time DESC);
SELECT partman.create_parent('public.readings', 'time', 'native', '1 hour');
SELECT partman.create_parent('public.diagnostics', 'time', 'native', '1 hour');
SELECT partman.create_partition_time('public.readings', ARRAY['2021-06-08 00:00+00', '2021-06-08 01:00+00', '2021-06-08 02:00+00']::timestamptz[]);
SELECT partman.create_partition_time('public.diagnostics', ARRAY['2021-06-08 00:00+00', '2021-06-08 01:00+00', '2021-06-08 02:00+00']::timestamptz[]);
";

/// What the sample holds: distinct tag lines, and per measurement the rows
/// and the sum of each field (read as f32 for the `real` columns).
struct Expected {
    tag_sets: usize,
    rows: BTreeMap<String, i64>,
    elevation_sum: f64,
    latitude_sum: f64,
}

fn expected_from_sample(path: &str) -> Expected {
    let mut text = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(path).unwrap()).read_to_string(&mut text).unwrap();
    let body = text.split_once("\n\n").unwrap().1;
    let (mut tag_sets, mut rows) = (HashSet::new(), BTreeMap::new());
    let (mut elevation_sum, mut latitude_sum) = (0f64, 0f64);
    for line in body.lines() {
        if line.starts_with("tags,") {
            tag_sets.insert(line.to_owned());
            continue;
        }
        let f: Vec<&str> = line.split(',').collect();
        *rows.entry(f[0].to_owned()).or_insert(0) += 1;
        if f[0] == "readings" {
            // readings,<ns>,latitude,longitude,elevation,…
            latitude_sum += f[2].parse::<f64>().unwrap_or(0.0);
            elevation_sum += f64::from(f[4].parse::<f32>().unwrap_or(0.0));
        }
    }
    Expected { tag_sets: tag_sets.len(), rows, elevation_sum, latitude_sum }
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

#[tokio::test]
async fn tsbs_into_the_rds_partman_ddl_loads_every_row_with_one_tag_row_per_set() {
    let db = shared().fresh_db("tsbs_partman").await;
    let c = db.client().await;
    c.batch_execute(PARTMAN_DDL).await.unwrap();
    let file = iot_sample();
    let want = expected_from_sample(&file);
    run_expect(chute().args(["--url", &db.url(), "load", "--format", "tsbs", &file]), 0);

    for (table, rows) in &want.rows {
        assert_eq!(count(&c, &format!("SELECT count(*) FROM {table}")).await, *rows, "{table}");
        // pg_partman's partitions cover the data: nothing in its DEFAULT partition.
        assert_eq!(count(&c, &format!("SELECT count(*) FROM {table}_default")).await, 0, "{table}_default");
    }
    assert_eq!(want.rows["readings"], 32_478);
    assert_eq!(count(&c, "SELECT count(*) FROM readings WHERE latitude IS NULL").await, 435);
    assert_eq!(count(&c, "SELECT count(*) FROM diagnostics WHERE fuel_state IS NULL").await, 1_206);
    // Values, to the type of each column: `real` fields hold the f32 of the input.
    let r = c.query_one("SELECT sum(elevation::float8), sum(latitude) FROM readings", &[]).await.unwrap();
    let (elevation, latitude): (f64, f64) = (r.get(0), r.get(1));
    assert!(close(elevation, want.elevation_sum), "elevation sum {elevation} vs input {}", want.elevation_sum);
    assert!(close(latitude, want.latitude_sum), "latitude sum {latitude} vs input {}", want.latitude_sum);
    let r = c
        .query_one(
            "SELECT r.latitude, r.elevation, r.heading, r.fuel_consumption, t.fleet FROM readings r JOIN tags t ON t.id = r.tags_id
             WHERE r.time = '2021-06-08 00:00:00+00' AND r.name = 'truck_4'",
            &[],
        )
        .await
        .unwrap();
    assert_eq!((r.get::<_, f64>(0), r.get::<_, f32>(1), r.get::<_, f32>(2), r.get::<_, f32>(3)), (83.2359, 408.0, 165.0, 25.0));
    assert_eq!(r.get::<_, String>(4), "West");
    // Every row's tags_id names its own tag set.
    assert_eq!(
        count(&c, "SELECT count(*) FROM readings r JOIN tags t ON t.id = r.tags_id WHERE r.name IS NOT DISTINCT FROM t.name").await,
        want.rows["readings"]
    );
    // One tags row per distinct tag set, NULL tags included.
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, want.tag_sets as i64);
    let distinct = "SELECT count(*) FROM (SELECT DISTINCT name, fleet, driver, model, device_version, load_capacity, fuel_capacity,
                    nominal_fuel_consumption FROM tags) x";
    assert_eq!(count(&c, distinct).await, want.tag_sets as i64);
    assert!(count(&c, "SELECT count(*) FROM tags WHERE fleet IS NULL OR driver IS NULL OR model IS NULL").await > 0, "NULL tags met");

    // Two more loads of the same file at once (other load ids) find every tag set: no new tags row.
    loads_at_once(&db.url(), &file, ["again-1", "again-2"]);
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, want.tag_sets as i64);
    assert_eq!(count(&c, "SELECT count(*) FROM readings").await, 3 * want.rows["readings"]);
}

/// Loads of the tsbs `file` at once, one per load id; each must succeed.
fn loads_at_once(url: &str, file: &str, ids: [&str; 2]) {
    let children = ids.map(|id| {
        spawn(chute().args(["--url", url, "load", "--format", "tsbs", file, "--load-id", id]).stdout(Stdio::null()).stderr(Stdio::piped()))
    });
    for child in children {
        let out = exit_within(child, Duration::from_secs(300), "a tsbs load");
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

#[tokio::test]
async fn new_tag_sets_in_parallel_loads_get_one_tags_row_each() {
    // Two loaders at once, each meeting every tag set first (no earlier load
    // filled the tags table), NULL tags included.
    let db = shared().fresh_db("tsbs_tags_race").await;
    let c = db.client().await;
    // All fields double precision here, so only the tag lookup is tested.
    let ddl: String = PARTMAN_DDL.lines().filter(|l| !l.contains("TYPE real")).collect::<Vec<_>>().join("\n");
    c.batch_execute(&ddl).await.unwrap();
    let file = iot_sample();
    let want = expected_from_sample(&file);
    loads_at_once(&db.url(), &file, ["one", "two"]);
    assert_eq!(count(&c, "SELECT count(*) FROM tags").await, want.tag_sets as i64);
    assert_eq!(count(&c, "SELECT count(*) FROM diagnostics").await, 2 * want.rows["diagnostics"]);
}

/// A tsbs file whose every chunk meets new tag sets (some with a NULL tag)
/// and rows spread over hours not made yet: rows with a new tag set and
/// rows with a known one share a chunk and a leaf.
fn spread_file(rows: usize) -> Vec<u8> {
    let mut rng = SplitMix64::new(5);
    let now_h = jiff::Timestamp::now().as_second() / 3600;
    let base_h = now_h - (rows / 1500) as i64 - 48;
    let mut out = b"tags,name string,fleet string\nreadings,v1,v2\n\n".to_vec();
    for i in 0..rows {
        let truck = if rng.next_u64().is_multiple_of(4) { i / 150 } else { (rng.next_u64() as usize) % (i / 150 + 1) };
        let fleet = if truck % 7 == 3 { String::new() } else { format!("f{}", truck % 5) };
        let hour = base_h + (i / 1500) as i64 + (rng.next_u64() % 6) as i64;
        let ns = (hour * 3600 + (rng.next_u64() % 3600) as i64) * 1_000_000_000 + i as i64;
        out.extend_from_slice(format!("tags,name=truck_{truck},fleet={fleet}\nreadings,{ns},{},{}\n", i, rng.next_u64() % 1000).as_bytes());
    }
    out
}

/// Rows with their tag values, as one fingerprint: count, distinct, hash sum.
async fn fingerprint(c: &tokio_postgres::Client, schema: &str) -> (i64, i64, i64) {
    let sql = format!(
        "SELECT count(*), count(DISTINCT x), coalesce(sum(hashtext(x)::int8), 0)::int8 FROM
         (SELECT (r.time, r.name, t.name, t.fleet, r.v1, r.v2)::text x FROM {schema}.readings r JOIN {schema}.tags t ON t.id = r.tags_id) y"
    );
    let r = c.query_one(&sql, &[]).await.unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Journal claims of one load that two batches make for the same leaf and
/// input range: a chunk's rows for a leaf split over two batches.
async fn split_claims(c: &tokio_postgres::Client, load_id: &str) -> i64 {
    let sql = "WITH r AS (SELECT batch_id, target, input, unnest(starts) s, unnest(ends) e FROM chute.load_journal WHERE load_id = $1)
               SELECT count(*) FROM r a JOIN r b ON a.target = b.target AND a.input = b.input AND a.batch_id < b.batch_id
               AND a.s < b.e AND b.s < a.e";
    c.query_one(sql, &[&load_id]).await.unwrap().get(0)
}

#[tokio::test]
async fn a_killed_tsbs_load_with_new_tag_sets_across_partitions_resumes_every_row() {
    let db = shared().fresh_db("tsbs_resume").await;
    let url = db.url();
    let dir = open_tempdir();
    let rows = 300_000;
    std::fs::write(dir.path().join("spread.tsbs"), spread_file(rows)).unwrap();
    let load = |schema: &str, id: &str| {
        let mut cmd = chute();
        cmd.current_dir(dir.path()).args([
            "--url",
            &url,
            "load",
            "--format",
            "tsbs",
            "--interval",
            "1h",
            "--schema",
            schema,
            "--load-id",
            id,
            // A small budget holds parsed chunks back while partitions are
            // made, so chunks meet a newer tree at merge than at parse.
            "--memory-mb",
            "8",
            "spread.tsbs",
        ]);
        cmd
    };
    let c = db.client().await;
    // A clean load: no chunk's rows for one leaf are claimed by two batches.
    run_expect(&mut load("reference", "reference"), 0);
    assert_eq!(split_claims(&c, "reference").await, 0, "a chunk's rows for one leaf went in two batches");
    let want = fingerprint(&c, "reference").await;
    assert_eq!(want.0, rows as i64);

    let mut rng = SplitMix64::new(9);
    for _ in 0..8 {
        let mut child = spawn(load("k", "k").stdout(Stdio::null()).stderr(Stdio::null()));
        // The kill at a random point (of a seeded sequence) is the test's subject.
        tokio::time::sleep(Duration::from_millis(150 + rng.next_u64() % 1500)).await;
        child.kill();
    }
    let (out, _) = run_expect(&mut load("k", "k"), 0);
    assert_eq!(fingerprint(&c, "k").await, want, "after 8 kills and a resume:\n{out}");
    assert_eq!(split_claims(&c, "k").await, 0, "a chunk's rows for one leaf went in two batches");
}
