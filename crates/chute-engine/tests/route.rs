//! The client-side router against a real PostgreSQL 15 server.
//!
//! Each layout is created with plain SQL. Seeded random rows (biased towards
//! bound values and their neighbours, NULLs, infinities) are staged in a
//! plain table, then inserted one by one through the parent, catching the
//! server's 23514 "no partition … found for row". The router, built by
//! `load_partition_tree` from the catalog, must then put every row exactly
//! where the server did (`tableoid`), and say `NoPartition` for exactly the
//! rows the server refused. The key bytes it routes on are the staged rows
//! read back in binary, i.e. the values as the server stores them.

use std::collections::{HashMap, HashSet};

use chute_core::generate::SplitMix64;
use chute_core::ident::{QualifiedName, quote_literal};
use chute_core::route::{Route, RouteError, Strategy};
use chute_engine::layout::{LayoutError, WireValue, load_partition_tree};
use tokio_postgres::Client;

/// Rows per layout.
const ROWS: usize = 2_500;

/// Makes one SQL value expression (or `NULL`).
type Gen = Box<dyn Fn(&mut SplitMix64) -> String + Send + Sync>;

/// One column of the root table, in root column order.
enum Col {
    /// The row's sequence number (`int8`), how rows are matched up.
    Id,
    Gen(Gen),
}

fn id() -> (&'static str, Col) {
    ("id", Col::Id)
}

fn col(name: &'static str, g: Gen) -> (&'static str, Col) {
    (name, Col::Gen(g))
}

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    rng.next_u64() % n
}

/// One of the given SQL expressions.
fn pick(values: &[&str]) -> Gen {
    let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    Box::new(move |rng| values[below(rng, values.len() as u64) as usize].clone())
}

/// NULL one time in `one_in`, else `g`.
fn nullable(one_in: u64, g: Gen) -> Gen {
    Box::new(move |rng| if below(rng, one_in) == 0 { "NULL".into() } else { g(rng) })
}

/// An integer in [lo, hi], or (half the time) an edge or one of its neighbours.
fn int(lo: i64, hi: i64, edges: &[i64]) -> Gen {
    let edges = edges.to_vec();
    Box::new(move |rng| {
        let v = if !edges.is_empty() && below(rng, 2) == 0 {
            let e = edges[below(rng, edges.len() as u64) as usize];
            let v = e.saturating_add(below(rng, 3) as i64 - 1);
            // A neighbour may not leave the type's range: stay inside [lo, hi] or at the edge itself.
            if v < lo.min(e) || v > hi.max(e) { e } else { v }
        } else {
            lo.saturating_add((rng.next_u64() % (hi.abs_diff(lo).saturating_add(1)).max(1)) as i64)
        };
        v.to_string()
    })
}

/// `g`'s value as a quoted literal (for types without a cast from integers, such as oid).
fn quoted(g: Gen) -> Gen {
    Box::new(move |rng| quote_literal(&g(rng)))
}

/// A timestamptz `base + n µs`, n from `int`.
fn ts(base: &'static str, lo: i64, hi: i64, edges: &[i64]) -> Gen {
    let n = int(lo, hi, edges);
    Box::new(move |rng| format!("('{base}'::timestamptz + {} * interval '1 microsecond')", n(rng)))
}

const HOUR: i64 = 3_600_000_000;

/// A string of up to `max` characters from `alphabet`, quoted.
fn text(alphabet: &'static [&'static str], max: u64) -> Gen {
    Box::new(move |rng| {
        let s: String = (0..below(rng, max + 1)).map(|_| alphabet[below(rng, alphabet.len() as u64) as usize]).collect();
        quote_literal(&s)
    })
}

const ALPHABET: &[&str] = &["a", "b", "m", "n", "z", "A", "M", "Z", "0", " ", "é", "ß", "世", "🚀", "'", "_"];

/// What one layout's check found.
#[derive(Debug)]
struct Report {
    leaves: usize,
    leaves_hit: usize,
    rejected: usize,
}

/// Stages `ROWS` random rows, inserts them through `parent` one by one, and
/// checks every row's leaf (or refusal) against the router.
async fn check(client: &Client, parent: &str, columns: Vec<(&'static str, Col)>, seed: u64) -> Report {
    let root_columns: Vec<String> = client
        .query(
            "SELECT attname::text FROM pg_attribute WHERE attrelid = $1::text::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&parent],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let names: Vec<&str> = columns.iter().map(|(n, _)| *n).collect();
    assert_eq!(root_columns, names, "{parent}: the test's columns are not the root's, in order");

    let mut rng = SplitMix64::new(seed);
    let rows: Vec<String> = (0..ROWS)
        .map(|i| {
            let values: Vec<String> = columns
                .iter()
                .map(|(_, c)| match c {
                    Col::Id => i.to_string(),
                    Col::Gen(g) => g(&mut rng),
                })
                .collect();
            format!("({})", values.join(", "))
        })
        .collect();
    let stage = format!("\"stage_{parent}\"");
    let rejected = format!("\"rejected_{parent}\"");
    client.batch_execute(&format!("CREATE TABLE {stage} (LIKE {parent}); CREATE TABLE {rejected} (id int8)")).await.unwrap();
    for chunk in rows.chunks(500) {
        let sql = format!("INSERT INTO {stage} VALUES {}", chunk.join(", "));
        client.batch_execute(&sql).await.unwrap_or_else(|e| panic!("{parent}: staging rows: {e:?}"));
    }
    let route_all = format!(
        "DO $$ DECLARE r {stage}%ROWTYPE; BEGIN
             FOR r IN SELECT * FROM {stage} LOOP
                 BEGIN INSERT INTO {parent} VALUES (r.*);
                 EXCEPTION WHEN check_violation THEN INSERT INTO {rejected} VALUES (r.id);
                 END;
             END LOOP;
         END $$"
    );
    client.batch_execute(&route_all).await.unwrap_or_else(|e| panic!("{parent}: inserting through the parent: {e:?}"));

    let tree = load_partition_tree(client, &QualifiedName::parse(parent).unwrap())
        .await
        .unwrap_or_else(|e| panic!("{parent}: building the router: {e}"));
    let placed: HashMap<i64, QualifiedName> = client
        .query(
            &format!(
                "SELECT p.id, n.nspname::text, c.relname::text FROM {parent} p
                 JOIN pg_class c ON c.oid = p.tableoid JOIN pg_namespace n ON n.oid = c.relnamespace"
            ),
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), QualifiedName::new(r.get::<_, String>(1), r.get::<_, String>(2))))
        .collect();
    let refused: HashSet<i64> = client.query(&format!("SELECT id FROM {rejected}"), &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(placed.len() + refused.len(), ROWS, "{parent}: rows went missing");

    let id_at = names.iter().position(|n| *n == "id").unwrap();
    let staged = client.query(&format!("SELECT * FROM {stage}"), &[]).await.unwrap();
    let mut mismatches = Vec::new();
    let mut hit = HashSet::new();
    for row in &staged {
        let fields: Vec<Option<Vec<u8>>> = (0..row.len()).map(|i| row.get::<_, Option<WireValue>>(i).map(|w| w.0)).collect();
        let id = i64::from_be_bytes(fields[id_at].as_deref().unwrap().try_into().unwrap());
        let borrowed: Vec<Option<&[u8]>> = fields.iter().map(|f| f.as_deref()).collect();
        let ours = tree.route_row(&borrowed);
        let server = placed.get(&id);
        let agree = match (ours, server) {
            (Route::Leaf(leaf), Some(name)) => &tree.leaf(leaf).name == name,
            (Route::NoPartition { .. }, None) => refused.contains(&id),
            _ => false,
        };
        if let Route::Leaf(leaf) = ours {
            hit.insert(leaf);
        }
        if !agree {
            mismatches.push(format!("row {id} {}: server {server:?}, router {ours:?}, key bytes {fields:02x?}", rows[id as usize]));
        }
    }
    assert!(
        mismatches.is_empty(),
        "{parent}: {} of {ROWS} rows routed differently:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(10)].join("\n")
    );
    Report { leaves: tree.leaves.len(), leaves_hit: hit.len(), rejected: refused.len() }
}

/// Every leaf got rows, and rows were refused exactly when the layout has holes.
fn assert_covers(report: &Report, parent: &str, expect_refusals: bool) {
    assert_eq!(report.leaves_hit, report.leaves, "{parent}: some leaves got no rows: {report:?}");
    assert_eq!(report.rejected > 0, expect_refusals, "{parent}: {report:?}");
}

#[tokio::test]
async fn range_layouts_route_like_the_server() {
    let db = chute_testkit::shared().fresh_db("route_range").await;
    let c = db.client().await;

    // Hourly on timestamptz, hour 3 missing (its rows go to the DEFAULT).
    let mut ddl = String::from("CREATE TABLE tz_hourly (id int8, time timestamptz, dev int, v float8) PARTITION BY RANGE (time);");
    for h in [0, 1, 2, 4, 5] {
        ddl += &format!(
            "CREATE TABLE tz_hourly_h{h} PARTITION OF tz_hourly FOR VALUES FROM ('2024-03-10 0{h}:00:00+00') TO ('2024-03-10 0{}:00:00+00');",
            h + 1
        );
    }
    ddl += "CREATE TABLE tz_hourly_default PARTITION OF tz_hourly DEFAULT;";
    c.batch_execute(&ddl).await.unwrap();
    let edges: Vec<i64> = (0..7).map(|h| h * HOUR).collect();
    let cols = vec![
        id(),
        col("time", nullable(50, ts("2024-03-10 00:00:00+00", -2 * HOUR, 8 * HOUR, &edges))),
        col("dev", int(0, 100, &[])),
        col("v", pick(&["1.5", "NULL"])),
    ];
    let r = check(&c, "tz_hourly", cols, 1).await;
    assert_covers(&r, "tz_hourly", false);

    // int8 with MINVALUE and MAXVALUE ends, a hole in the middle, no DEFAULT.
    c.batch_execute(
        "CREATE TABLE int8_ends (k int8, id int8) PARTITION BY RANGE (k);
         CREATE TABLE int8_ends_low PARTITION OF int8_ends FOR VALUES FROM (MINVALUE) TO (-1000);
         CREATE TABLE int8_ends_neg PARTITION OF int8_ends FOR VALUES FROM (-1000) TO (0);
         CREATE TABLE int8_ends_pos PARTITION OF int8_ends FOR VALUES FROM (0) TO (1000);
         CREATE TABLE int8_ends_high PARTITION OF int8_ends FOR VALUES FROM (5000) TO (MAXVALUE);",
    )
    .await
    .unwrap();
    let k = nullable(40, int(-3000, 8000, &[i64::MIN, -1000, 0, 1000, 5000, i64::MAX]));
    let r = check(&c, "int8_ends", vec![col("k", k), id()], 2).await;
    assert_covers(&r, "int8_ends", true);

    // Monthly on date with infinite ends and a missing April.
    c.batch_execute(
        "CREATE TABLE by_date (id int8, day date) PARTITION BY RANGE (day);
         CREATE TABLE by_date_past PARTITION OF by_date FOR VALUES FROM ('-infinity') TO ('2024-01-01');
         CREATE TABLE by_date_q1 PARTITION OF by_date FOR VALUES FROM ('2024-01-01') TO ('2024-04-01');
         CREATE TABLE by_date_may PARTITION OF by_date FOR VALUES FROM ('2024-05-01') TO ('2024-06-01');
         CREATE TABLE by_date_future PARTITION OF by_date FOR VALUES FROM ('2024-06-01') TO ('infinity');",
    )
    .await
    .unwrap();
    let days = int(-40, 200, &[0, 91, 121, 152]);
    let day: Gen = Box::new(move |rng| match below(rng, 20) {
        0 => "'infinity'".into(),
        1 => "'-infinity'".into(),
        2 => "NULL".into(),
        _ => format!("('2024-01-01'::date + {})", days(rng)),
    });
    let r = check(&c, "by_date", vec![id(), col("day", day)], 3).await;
    assert_covers(&r, "by_date", true);

    // text under COLLATE "C": byte order, upper case before lower case, UTF-8 above ASCII.
    c.batch_execute(
        "CREATE TABLE text_c (id int8, s text COLLATE \"C\") PARTITION BY RANGE (s);
         CREATE TABLE text_c_upper PARTITION OF text_c FOR VALUES FROM ('') TO ('a');
         CREATE TABLE text_c_a_m PARTITION OF text_c FOR VALUES FROM ('a') TO ('m');
         CREATE TABLE text_c_m_z PARTITION OF text_c FOR VALUES FROM ('m') TO ('z ');
         CREATE TABLE text_c_high PARTITION OF text_c FOR VALUES FROM ('é') TO (MAXVALUE);
         CREATE TABLE text_c_default PARTITION OF text_c DEFAULT;",
    )
    .await
    .unwrap();
    let r = check(&c, "text_c", vec![id(), col("s", nullable(30, text(ALPHABET, 4)))], 4).await;
    assert_covers(&r, "text_c", false);

    // The same under a key collation that differs from the column's: POSIX on a default-collation column.
    c.batch_execute(
        "CREATE TABLE text_posix (s varchar(10), id int8) PARTITION BY RANGE (s COLLATE \"POSIX\");
         CREATE TABLE text_posix_low PARTITION OF text_posix FOR VALUES FROM (MINVALUE) TO ('M');
         CREATE TABLE text_posix_mid PARTITION OF text_posix FOR VALUES FROM ('M') TO ('b');
         CREATE TABLE text_posix_high PARTITION OF text_posix FOR VALUES FROM ('n') TO (MAXVALUE);",
    )
    .await
    .unwrap();
    let r = check(&c, "text_posix", vec![col("s", text(ALPHABET, 3)), id()], 5).await;
    assert_covers(&r, "text_posix", true);

    // Two columns, MINVALUE/MAXVALUE inside tuples, holes, no DEFAULT.
    c.batch_execute(
        "CREATE TABLE multi (a int, b timestamptz, id int8) PARTITION BY RANGE (a, b);
         CREATE TABLE multi_a1 PARTITION OF multi FOR VALUES FROM (1, MINVALUE) TO (1, MAXVALUE);
         CREATE TABLE multi_a2_d1 PARTITION OF multi FOR VALUES FROM (2, MINVALUE) TO (2, '2024-01-02 00:00:00+00');
         CREATE TABLE multi_a2_d2 PARTITION OF multi FOR VALUES FROM (2, '2024-01-02 00:00:00+00') TO (2, '2024-01-03 00:00:00+00');
         CREATE TABLE multi_a3_a4 PARTITION OF multi FOR VALUES FROM (3, '2024-01-01 12:00:00+00') TO (5, MINVALUE);
         CREATE TABLE multi_a5_up PARTITION OF multi FOR VALUES FROM (5, MINVALUE) TO (MAXVALUE, MAXVALUE);",
    )
    .await
    .unwrap();
    let b = ts("2024-01-01 00:00:00+00", -24 * HOUR, 96 * HOUR, &[0, 12 * HOUR, 24 * HOUR, 48 * HOUR]);
    let cols = vec![col("a", nullable(50, int(-1, 7, &[1, 2, 3, 5]))), col("b", nullable(50, b)), id()];
    let r = check(&c, "multi", cols, 6).await;
    assert_covers(&r, "multi", true);
}

#[tokio::test]
async fn list_layouts_route_like_the_server() {
    let db = chute_testkit::shared().fresh_db("route_list").await;
    let c = db.client().await;

    c.batch_execute(
        "CREATE TABLE list_text (id int8, s text) PARTITION BY LIST (s);
         CREATE TABLE list_text_ab PARTITION OF list_text FOR VALUES IN ('a', 'b');
         CREATE TABLE list_text_c_null PARTITION OF list_text FOR VALUES IN ('c', NULL);
         CREATE TABLE list_text_odd PARTITION OF list_text FOR VALUES IN ('it''s', 'x y', '', 'é\\');
         CREATE TABLE list_text_default PARTITION OF list_text DEFAULT;",
    )
    .await
    .unwrap();
    let s = pick(&["'a'", "'b'", "'c'", "NULL", "'it''s'", "'x y'", "''", "'é\\'", "'A'", "'a '", "'d'", "'x  y'"]);
    let r = check(&c, "list_text", vec![id(), col("s", s)], 11).await;
    assert_covers(&r, "list_text", false);

    c.batch_execute(
        "CREATE TABLE list_int (k int, id int8) PARTITION BY LIST (k);
         CREATE TABLE list_int_small PARTITION OF list_int FOR VALUES IN (1, 2, 3);
         CREATE TABLE list_int_four PARTITION OF list_int FOR VALUES IN (4);
         CREATE TABLE list_int_odd PARTITION OF list_int FOR VALUES IN (-5, 100000, 2147483647, -2147483648);",
    )
    .await
    .unwrap();
    let k = nullable(30, int(-6, 6, &[100_000, i64::from(i32::MAX) - 1, i64::from(i32::MIN) + 1]));
    let r = check(&c, "list_int", vec![col("k", k), id()], 12).await;
    assert_covers(&r, "list_int", true);

    c.batch_execute(
        "CREATE TABLE list_bool (id int8, f bool) PARTITION BY LIST (f);
         CREATE TABLE list_bool_yes PARTITION OF list_bool FOR VALUES IN (true);
         CREATE TABLE list_bool_no PARTITION OF list_bool FOR VALUES IN (false);",
    )
    .await
    .unwrap();
    let r = check(&c, "list_bool", vec![id(), col("f", pick(&["true", "false", "NULL"]))], 13).await;
    assert_covers(&r, "list_bool", true);
}

#[tokio::test]
async fn hash_layouts_route_like_the_server() {
    let db = chute_testkit::shared().fresh_db("route_hash").await;
    let c = db.client().await;

    let mut ddl = String::from("CREATE TABLE hash8 (id int8, k int4) PARTITION BY HASH (k);");
    for r in 0..8 {
        ddl += &format!("CREATE TABLE hash8_r{r} PARTITION OF hash8 FOR VALUES WITH (MODULUS 8, REMAINDER {r});");
    }
    ddl += "CREATE TABLE hash5 (a int8, id int8, s text) PARTITION BY HASH (a, s);";
    for r in 0..5 {
        ddl += &format!("CREATE TABLE hash5_r{r} PARTITION OF hash5 FOR VALUES WITH (MODULUS 5, REMAINDER {r});");
    }
    ddl += "CREATE TABLE uneven (k int8, id int8) PARTITION BY HASH (k);";
    for (m, r) in [(4, 0), (4, 1), (8, 2), (8, 6), (8, 3), (8, 7)] {
        ddl += &format!("CREATE TABLE uneven_m{m}_r{r} PARTITION OF uneven FOR VALUES WITH (MODULUS {m}, REMAINDER {r});");
    }
    // Remainder 3 of 4 is missing: its rows have no partition.
    ddl += "CREATE TABLE holey (k int4, id int8) PARTITION BY HASH (k);";
    for r in 0..3 {
        ddl += &format!("CREATE TABLE holey_r{r} PARTITION OF holey FOR VALUES WITH (MODULUS 4, REMAINDER {r});");
    }
    c.batch_execute(&ddl).await.unwrap();

    let wide = |rng: &mut SplitMix64| (rng.next_u64() as i64).to_string();
    let r = check(&c, "hash8", vec![id(), col("k", nullable(40, int(i64::from(i32::MIN), i64::from(i32::MAX), &[0])))], 21).await;
    assert_covers(&r, "hash8", false);
    let cols = vec![col("a", nullable(10, Box::new(wide))), id(), col("s", nullable(10, text(ALPHABET, 6)))];
    let r = check(&c, "hash5", cols, 22).await;
    assert_covers(&r, "hash5", false);
    let r = check(&c, "uneven", vec![col("k", nullable(40, Box::new(wide))), id()], 23).await;
    assert_covers(&r, "uneven", false);
    let r = check(&c, "holey", vec![col("k", int(-100_000, 100_000, &[])), id()], 24).await;
    assert_covers(&r, "holey", true);
}

#[tokio::test]
async fn sub_partitioned_layouts_route_like_the_server() {
    let db = chute_testkit::shared().fresh_db("route_sub").await;
    let c = db.client().await;

    // chute's own shape: hourly ranges on time, each hashed on dev_id; one hour missing.
    let mut ddl = String::from("CREATE TABLE readings (time timestamptz, dev_id int, id int8, v float8) PARTITION BY RANGE (time);");
    for h in [0, 1, 3] {
        ddl += &format!(
            "CREATE TABLE readings_h{h} PARTITION OF readings FOR VALUES FROM ('2024-03-10 0{h}:00:00+00') TO ('2024-03-10 0{}:00:00+00')
             PARTITION BY HASH (dev_id);",
            h + 1
        );
        for r in 0..4 {
            ddl += &format!("CREATE TABLE readings_h{h}_r{r} PARTITION OF readings_h{h} FOR VALUES WITH (MODULUS 4, REMAINDER {r});");
        }
    }
    c.batch_execute(&ddl).await.unwrap();
    let edges: Vec<i64> = (0..5).map(|h| h * HOUR).collect();
    let cols = vec![
        col("time", ts("2024-03-10 00:00:00+00", -HOUR, 5 * HOUR, &edges)),
        col("dev_id", nullable(50, int(0, 10_000, &[]))),
        id(),
        col("v", pick(&["0.5"])),
    ];
    let r = check(&c, "readings", cols, 31).await;
    assert_covers(&r, "readings", true);

    // LIST on region, each region a RANGE on n; "eu" has a DEFAULT below it, "us" has a hole.
    c.batch_execute(
        "CREATE TABLE regions (id int8, region text, n int) PARTITION BY LIST (region);
         CREATE TABLE regions_eu PARTITION OF regions FOR VALUES IN ('eu', 'uk') PARTITION BY RANGE (n);
         CREATE TABLE regions_eu_low PARTITION OF regions_eu FOR VALUES FROM (MINVALUE) TO (0);
         CREATE TABLE regions_eu_high PARTITION OF regions_eu FOR VALUES FROM (0) TO (100);
         CREATE TABLE regions_eu_other PARTITION OF regions_eu DEFAULT;
         CREATE TABLE regions_us PARTITION OF regions FOR VALUES IN ('us') PARTITION BY RANGE (n);
         CREATE TABLE regions_us_a PARTITION OF regions_us FOR VALUES FROM (0) TO (50);
         CREATE TABLE regions_us_b PARTITION OF regions_us FOR VALUES FROM (60) TO (100);
         CREATE TABLE regions_rest PARTITION OF regions DEFAULT;",
    )
    .await
    .unwrap();
    let cols = vec![
        id(),
        col("region", pick(&["'eu'", "'uk'", "'us'", "'jp'", "NULL"])),
        col("n", nullable(30, int(-20, 120, &[0, 50, 60, 100]))),
    ];
    let r = check(&c, "regions", cols, 32).await;
    assert_covers(&r, "regions", true);

    // Three levels: RANGE on day, LIST on kind, HASH on dev; DEFAULTs at the first two levels.
    let mut ddl = String::from(
        "CREATE TABLE deep (day date, kind text, dev int8, id int8) PARTITION BY RANGE (day);
         CREATE TABLE deep_rest PARTITION OF deep DEFAULT;",
    );
    for d in 1..=2 {
        ddl += &format!(
            "CREATE TABLE deep_d{d} PARTITION OF deep FOR VALUES FROM ('2024-01-0{d}') TO ('2024-01-0{}') PARTITION BY LIST (kind);
             CREATE TABLE deep_d{d}_misc PARTITION OF deep_d{d} DEFAULT;",
            d + 1
        );
        for kind in ["temp", "hum"] {
            ddl += &format!("CREATE TABLE deep_d{d}_{kind} PARTITION OF deep_d{d} FOR VALUES IN ('{kind}') PARTITION BY HASH (dev);");
            for r in 0..3 {
                ddl += &format!(
                    "CREATE TABLE deep_d{d}_{kind}_r{r} PARTITION OF deep_d{d}_{kind} FOR VALUES WITH (MODULUS 3, REMAINDER {r});"
                );
            }
        }
    }
    c.batch_execute(&ddl).await.unwrap();
    let days = int(-1, 3, &[]);
    let day: Gen = Box::new(move |rng| format!("('2024-01-01'::date + {})", days(rng)));
    let cols = vec![
        col("day", day),
        col("kind", pick(&["'temp'", "'hum'", "'wind'", "NULL"])),
        col("dev", nullable(20, int(0, 1 << 40, &[]))),
        id(),
    ];
    let r = check(&c, "deep", cols, 33).await;
    assert_covers(&r, "deep", false);
    let tree = load_partition_tree(&c, &QualifiedName::parse("deep").unwrap()).await.unwrap();
    assert_eq!(tree.leaves.iter().map(|l| l.level).max(), Some(3));
    assert_eq!(tree.key_positions(), &[0, 1, 2]);
}

#[tokio::test]
async fn reordered_and_dropped_columns_map_to_root_positions() {
    let db = chute_testkit::shared().fresh_db("route_columns").await;
    let c = db.client().await;
    c.batch_execute(
        // The root has a dropped column before its key columns.
        "CREATE TABLE shuffled (junk int, a int, b text, id int8) PARTITION BY LIST (b);
         ALTER TABLE shuffled DROP COLUMN junk;
         -- A leaf with its columns in another order, attached.
         CREATE TABLE shuffled_x (id int8, b text, a int);
         ALTER TABLE shuffled ATTACH PARTITION shuffled_x FOR VALUES IN ('x');
         -- A sub-partitioned child with another order and a dropped column of its own,
         -- its key on a column whose attnum differs from the root's.
         CREATE TABLE shuffled_y (pad int, id int8, pad2 text, b text, a int) PARTITION BY RANGE (a);
         ALTER TABLE shuffled_y DROP COLUMN pad;
         ALTER TABLE shuffled_y DROP COLUMN pad2;
         CREATE TABLE shuffled_y_low (a int, id int8, b text);
         ALTER TABLE shuffled_y ATTACH PARTITION shuffled_y_low FOR VALUES FROM (MINVALUE) TO (10);
         CREATE TABLE shuffled_y_high PARTITION OF shuffled_y FOR VALUES FROM (10) TO (20);
         ALTER TABLE shuffled ATTACH PARTITION shuffled_y FOR VALUES IN ('y', 'z');
         CREATE TABLE shuffled_rest PARTITION OF shuffled DEFAULT;",
    )
    .await
    .unwrap();
    let cols = vec![col("a", nullable(20, int(-5, 25, &[10, 20]))), col("b", pick(&["'x'", "'y'", "'z'", "'w'", "NULL"])), id()];
    let r = check(&c, "shuffled", cols, 41).await;
    assert_covers(&r, "shuffled", true);
    let tree = load_partition_tree(&c, &QualifiedName::parse("shuffled").unwrap()).await.unwrap();
    assert_eq!(tree.top_level_key().columns[0].name, "b");
    assert_eq!(tree.top_level_key().columns[0].position, 1);
    assert_eq!(tree.key_positions(), &[0, 1]);
}

#[tokio::test]
async fn more_key_types_route_like_the_server() {
    let db = chute_testkit::shared().fresh_db("route_types").await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE floats (id int8, x float8) PARTITION BY RANGE (x);
         CREATE TABLE floats_neg PARTITION OF floats FOR VALUES FROM ('-Infinity') TO (0);
         CREATE TABLE floats_small PARTITION OF floats FOR VALUES FROM (0) TO (0.30000000000000004);
         CREATE TABLE floats_big PARTITION OF floats FOR VALUES FROM (0.30000000000000004) TO ('Infinity');
         CREATE TABLE floats_inf PARTITION OF floats FOR VALUES FROM ('Infinity') TO ('NaN');
         CREATE TABLE floats_nan PARTITION OF floats FOR VALUES FROM ('NaN') TO (MAXVALUE);

         CREATE TABLE reals (id int8, x float4) PARTITION BY LIST (x);
         CREATE TABLE reals_a PARTITION OF reals FOR VALUES IN (0, 1.5, 'NaN');
         CREATE TABLE reals_b PARTITION OF reals FOR VALUES IN (0.1, '-Infinity');

         CREATE TABLE nums (id int8, x numeric(12, 3)) PARTITION BY RANGE (x);
         CREATE TABLE nums_low PARTITION OF nums FOR VALUES FROM (MINVALUE) TO (-1.5);
         CREATE TABLE nums_mid PARTITION OF nums FOR VALUES FROM (-1.5) TO (0.001);
         CREATE TABLE nums_high PARTITION OF nums FOR VALUES FROM (0.001) TO (10000);
         CREATE TABLE nums_top PARTITION OF nums FOR VALUES FROM (10000) TO ('NaN');

         CREATE TABLE wide_nums (id int8, x numeric) PARTITION BY RANGE (x);
         CREATE TABLE wide_nums_neg PARTITION OF wide_nums FOR VALUES FROM ('-Infinity') TO (0);
         CREATE TABLE wide_nums_unit PARTITION OF wide_nums FOR VALUES FROM (0) TO (1.00000000000000000001);
         CREATE TABLE wide_nums_big PARTITION OF wide_nums FOR VALUES FROM (1.00000000000000000001) TO ('Infinity');
         CREATE TABLE wide_nums_nan PARTITION OF wide_nums FOR VALUES FROM ('NaN') TO (MAXVALUE);

         CREATE TABLE chars (id int8, c char(6)) PARTITION BY RANGE (c);
         CREATE TABLE chars_low PARTITION OF chars FOR VALUES FROM (MINVALUE) TO ('b');
         CREATE TABLE chars_mid PARTITION OF chars FOR VALUES FROM ('b') TO ('b a');
         CREATE TABLE chars_high PARTITION OF chars FOR VALUES FROM ('b a') TO (MAXVALUE);

         CREATE TABLE char_list (id int8, c char(4)) PARTITION BY LIST (c);
         CREATE TABLE char_list_ab PARTITION OF char_list FOR VALUES IN ('ab', 'a');
         CREATE TABLE char_list_rest PARTITION OF char_list DEFAULT;

         CREATE TABLE uuids (id int8, u uuid) PARTITION BY RANGE (u);
         CREATE TABLE uuids_low PARTITION OF uuids FOR VALUES FROM (MINVALUE) TO ('80000000-0000-0000-0000-000000000000');
         CREATE TABLE uuids_high PARTITION OF uuids FOR VALUES FROM ('80000000-0000-0000-0000-000000000000') TO ('f0000000-0000-0000-0000-000000000000');

         CREATE TABLE blobs (id int8, b bytea) PARTITION BY RANGE (b);
         CREATE TABLE blobs_low PARTITION OF blobs FOR VALUES FROM ('\\x') TO ('\\x7f');
         CREATE TABLE blobs_high PARTITION OF blobs FOR VALUES FROM ('\\x7f00') TO (MAXVALUE);

         CREATE TABLE stamps (id int8, t timestamp(3)) PARTITION BY RANGE (t);
         CREATE TABLE stamps_a PARTITION OF stamps FOR VALUES FROM ('2024-01-01 00:00:00') TO ('2024-01-01 00:00:00.5');
         CREATE TABLE stamps_b PARTITION OF stamps FOR VALUES FROM ('2024-01-01 00:00:00.5') TO ('infinity');

         CREATE TABLE smalls (id int8, k int2, o oid) PARTITION BY RANGE (k, o);
         CREATE TABLE smalls_a PARTITION OF smalls FOR VALUES FROM (-32768, 0) TO (0, 3000000000);
         CREATE TABLE smalls_b PARTITION OF smalls FOR VALUES FROM (0, 3000000000) TO (32767, 4294967295);",
    )
    .await
    .unwrap();

    let floats = pick(&[
        "0",
        "'-0'",
        "0.1",
        "0.2",
        "0.30000000000000004",
        "0.3",
        "'NaN'",
        "'Infinity'",
        "'-Infinity'",
        "-1e-300",
        "1e308",
        "5e-324",
        "NULL",
    ]);
    let r = check(&c, "floats", vec![id(), col("x", floats)], 51).await;
    assert_covers(&r, "floats", true);
    let reals = pick(&["0", "'-0'", "1.5", "0.1", "'NaN'", "'-Infinity'", "'Infinity'", "0.10000001", "NULL"]);
    let r = check(&c, "reals", vec![id(), col("x", reals)], 52).await;
    assert_covers(&r, "reals", true);
    // numeric(12, 3) rounds on the way in: -1.5005 becomes -1.501, 0.0004 becomes 0.000.
    let nums =
        pick(&["-1.5", "-1.5004", "-1.5005", "-1.4996", "0.001", "0.0005", "0.0004", "9999.9999", "10000", "'NaN'", "0", "-0.000", "NULL"]);
    let r = check(&c, "nums", vec![id(), col("x", nums)], 53).await;
    assert_covers(&r, "nums", true);
    let wide = pick(&[
        "'-Infinity'",
        "'Infinity'",
        "'NaN'",
        "0",
        "-0.0000000000000000000000001",
        "1",
        "1.00000000000000000000",
        "1.00000000000000000001",
        "1.000000000000000000010000",
        "1.000000000000000000009999",
        "123456789012345678901234567890",
        "-123456789012345678901234567890.5",
        "0.00000000000000000000000000000001",
    ]);
    let r = check(&c, "wide_nums", vec![id(), col("x", wide)], 60).await;
    assert_covers(&r, "wide_nums", true);
    // A tab sorts below the padding space: only comparing without trailing spaces gets E'b\t' right.
    let chars = pick(&["'a'", "'b'", "'b '", "'b  a'", "'b a'", "'ba'", "'a  '", "''", "'zz'", "NULL", "E'b\\t'", "E'b \\t'", "E'a\\t'"]);
    let r = check(&c, "chars", vec![id(), col("c", chars)], 54).await;
    assert_covers(&r, "chars", true);
    let r = check(&c, "char_list", vec![id(), col("c", pick(&["'ab'", "'ab  '", "'a'", "' a'", "'b'", "NULL"]))], 55).await;
    assert_covers(&r, "char_list", false);
    let uuid: Gen = Box::new(|rng| {
        let hex = format!("{:016x}{:016x}", rng.next_u64(), rng.next_u64());
        let hex = match below(rng, 4) {
            0 => "80000000000000000000000000000000".to_string(),
            1 => "7fffffffffffffffffffffffffffffff".to_string(),
            2 => format!("f{}", &hex[1..]),
            _ => hex,
        };
        format!("'{hex}'")
    });
    let r = check(&c, "uuids", vec![id(), col("u", nullable(30, uuid))], 56).await;
    assert_covers(&r, "uuids", true);
    let blob: Gen = Box::new(|rng| {
        let bytes: String = (0..below(rng, 3)).map(|_| format!("{:02x}", [0u8, 0x7e, 0x7f, 0x80, 0xff][below(rng, 5) as usize])).collect();
        format!("'\\x{bytes}'")
    });
    let r = check(&c, "blobs", vec![id(), col("b", blob)], 57).await;
    assert_covers(&r, "blobs", true);
    // timestamp(3) rounds on the way in: .4995 becomes .500 and lands in stamps_b.
    let stamps = pick(&[
        "'2024-01-01 00:00:00.4994'",
        "'2024-01-01 00:00:00.4995'",
        "'2024-01-01 00:00:00.5'",
        "'2023-12-31 23:59:59.9996'",
        "'infinity'",
        "'-infinity'",
    ]);
    let r = check(&c, "stamps", vec![id(), col("t", stamps)], 58).await;
    assert_covers(&r, "stamps", true);
    let cols = vec![
        id(),
        col("k", int(-32768, 32767, &[-32768, 0, 32767])),
        col("o", quoted(int(0, 4_294_967_295, &[0, 3_000_000_000, 4_294_967_295]))),
    ];
    let r = check(&c, "smalls", cols, 59).await;
    assert_covers(&r, "smalls", true);
}

#[tokio::test]
async fn a_foreign_partition_is_a_leaf() {
    let db = chute_testkit::shared().fresh_db("route_foreign").await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE EXTENSION postgres_fdw;
         DO $$ BEGIN
             EXECUTE format('CREATE SERVER loopback FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host %L, port %L, dbname %L)',
                            split_part(current_setting('unix_socket_directories'), ',', 1), current_setting('port'), current_database());
         END $$;
         CREATE USER MAPPING FOR CURRENT_USER SERVER loopback;
         CREATE TABLE remote_store (k int, id int8);
         CREATE TABLE sharded (k int, id int8) PARTITION BY RANGE (k);
         CREATE TABLE sharded_local PARTITION OF sharded FOR VALUES FROM (0) TO (100);
         CREATE FOREIGN TABLE sharded_remote PARTITION OF sharded FOR VALUES FROM (100) TO (200)
             SERVER loopback OPTIONS (table_name 'remote_store');",
    )
    .await
    .unwrap();
    let r = check(&c, "sharded", vec![col("k", int(-10, 210, &[0, 100, 200])), id()], 61).await;
    assert_covers(&r, "sharded", true);
    let tree = load_partition_tree(&c, &QualifiedName::parse("sharded").unwrap()).await.unwrap();
    let remote = tree.leaf_id(&QualifiedName::new("public", "sharded_remote")).unwrap();
    assert!(tree.leaf(remote).foreign);
    assert!(!tree.leaf(tree.leaf_id(&QualifiedName::new("public", "sharded_local")).unwrap()).foreign);
}

/// The reason a layout cannot be routed on the client.
async fn refusal(c: &Client, table: &str) -> (QualifiedName, String) {
    match load_partition_tree(c, &QualifiedName::parse(table).unwrap()).await {
        Err(LayoutError::Route(e @ RouteError::Unsupported { .. })) => {
            let text = e.to_string();
            let RouteError::Unsupported { table, reason } = e else { unreachable!() };
            assert!(text.contains(&table.to_string()) && text.contains(&reason), "{text}");
            (table, reason)
        }
        other => panic!("{table}: expected an unsupported layout, got {other:?}"),
    }
}

#[tokio::test]
async fn layouts_only_the_server_can_route_are_refused_with_the_reason() {
    let db = chute_testkit::shared().fresh_db("route_unsupported").await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE by_expr (a int, id int8) PARTITION BY RANGE ((a + 1));
         CREATE TABLE by_expr_p PARTITION OF by_expr FOR VALUES FROM (0) TO (10);
         CREATE TABLE by_pattern (s text, id int8) PARTITION BY RANGE (s text_pattern_ops);
         CREATE TABLE by_json (j jsonb) PARTITION BY LIST (j);
         -- Only the sub-partitioned level is unsupported; the error names it.
         CREATE TABLE outer_ok (a int, b int) PARTITION BY RANGE (a);
         CREATE TABLE outer_ok_p PARTITION OF outer_ok FOR VALUES FROM (0) TO (10) PARTITION BY HASH ((b * 2));",
    )
    .await
    .unwrap();
    let (table, reason) = refusal(&c, "by_expr").await;
    assert_eq!(table, QualifiedName::new("public", "by_expr"));
    assert!(reason.contains("expression (a + 1)"), "{reason}");
    let (_, reason) = refusal(&c, "by_pattern").await;
    assert!(reason.contains("text_pattern_ops"), "{reason}");
    let (_, reason) = refusal(&c, "by_json").await;
    assert!(reason.contains("type jsonb"), "{reason}");
    let (table, reason) = refusal(&c, "outer_ok").await;
    assert_eq!(table, QualifiedName::new("public", "outer_ok_p"));
    assert!(reason.contains("expression (b * 2)"), "{reason}");

    // A RANGE on text under a collation that does not sort byte-wise. The test
    // cluster is initialized without a locale, so its default collation is C;
    // use a libc or ICU collation if this server has one.
    let other: Option<String> = c
        .query_opt(
            "SELECT collname::text FROM pg_collation
             WHERE collencoding IN (-1, pg_char_to_encoding('UTF8')) AND collname NOT IN ('C', 'POSIX', 'ucs_basic', 'default')
               AND collisdeterministic
             ORDER BY collprovider = 'c' DESC, collname = 'und-x-icu' DESC, collname LIMIT 1",
            &[],
        )
        .await
        .unwrap()
        .map(|r| r.get(0));
    match other {
        Some(coll) => {
            c.batch_execute(&format!(
                "CREATE TABLE by_locale (s text COLLATE \"{coll}\", id int8) PARTITION BY RANGE (s);
                 CREATE TABLE by_locale_p PARTITION OF by_locale FOR VALUES FROM ('a') TO ('b');
                 CREATE TABLE list_locale (s text COLLATE \"{coll}\", id int8) PARTITION BY LIST (s);
                 CREATE TABLE list_locale_a PARTITION OF list_locale FOR VALUES IN ('a', 'B');
                 CREATE TABLE list_locale_rest PARTITION OF list_locale DEFAULT;"
            ))
            .await
            .unwrap();
            let (_, reason) = refusal(&c, "by_locale").await;
            assert!(reason.contains(&format!("collation \"{coll}\"")), "{reason}");
            // LIST needs only equality, which a deterministic collation keeps byte-wise.
            let r = check(&c, "list_locale", vec![col("s", pick(&["'a'", "'A'", "'b'", "'B'", "NULL"])), id()], 71).await;
            assert_covers(&r, "list_locale", false);
        }
        None => eprintln!("no collation other than C/POSIX on this server: the non-C RANGE case is not exercised"),
    }

    // Nondeterministic collations need ICU.
    let icu: bool = c.query_one("SELECT EXISTS (SELECT 1 FROM pg_collation WHERE collprovider = 'i')", &[]).await.unwrap().get(0);
    if icu {
        c.batch_execute(
            "CREATE COLLATION case_insensitive (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
             CREATE TABLE by_ci (s text COLLATE case_insensitive) PARTITION BY HASH (s);
             CREATE TABLE by_ci_list (s text COLLATE case_insensitive) PARTITION BY LIST (s);",
        )
        .await
        .unwrap();
        for table in ["by_ci", "by_ci_list"] {
            let (_, reason) = refusal(&c, table).await;
            assert!(reason.contains("nondeterministic collation \"case_insensitive\""), "{reason}");
        }
    } else {
        eprintln!("no ICU on this server: the nondeterministic collation case is not exercised");
    }

    match load_partition_tree(&c, &QualifiedName::parse("by_expr_p").unwrap()).await {
        Err(LayoutError::NotPartitioned(name)) => assert_eq!(name, QualifiedName::new("public", "by_expr_p")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(load_partition_tree(&c, &QualifiedName::parse("nope").unwrap()).await, Err(LayoutError::NoTable(_))));
}

#[tokio::test]
async fn a_partition_whose_detach_is_pending_takes_no_rows() {
    let db = chute_testkit::shared().fresh_db("route_pending").await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE pend (k int, id int8) PARTITION BY RANGE (k);
         CREATE TABLE pend_a PARTITION OF pend FOR VALUES FROM (0) TO (10);
         CREATE TABLE pend_b PARTITION OF pend FOR VALUES FROM (10) TO (20);
         CREATE TABLE pend_c PARTITION OF pend FOR VALUES FROM (20) TO (30);",
    )
    .await
    .unwrap();
    // A reader's snapshot makes the detach wait in its second phase; cancelling it then leaves it pending.
    let reader = db.client().await;
    reader.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pend").await.unwrap();
    let detacher = db.client().await;
    let pid: i32 = detacher.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let detach = tokio::spawn(async move { detacher.batch_execute("ALTER TABLE pend DETACH PARTITION pend_b CONCURRENTLY").await });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let pending = "SELECT coalesce(bool_or(inhdetachpending), false) FROM pg_inherits WHERE inhrelid = 'pend_b'::regclass";
    while !c.query_one(pending, &[]).await.unwrap().get::<_, bool>(0) {
        assert!(std::time::Instant::now() < deadline, "the detach never reached its second phase");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    c.execute("SELECT pg_cancel_backend($1)", &[&pid]).await.unwrap();
    assert!(detach.await.unwrap().is_err(), "the detach was cancelled");
    reader.batch_execute("COMMIT").await.unwrap();
    assert!(c.query_one(pending, &[]).await.unwrap().get::<_, bool>(0), "left half-detached");

    let r = check(&c, "pend", vec![col("k", int(-5, 35, &[10, 20])), id()], 81).await;
    assert_eq!(r.leaves, 2, "{r:?}");
    assert_covers(&r, "pend", true);
    let tree = load_partition_tree(&c, &QualifiedName::parse("pend").unwrap()).await.unwrap();
    assert!(tree.leaf_id(&QualifiedName::new("public", "pend_b")).is_none());
    assert!(matches!(tree.route_row(&[Some(&15i32.to_be_bytes()), None]), Route::NoPartition { .. }));
}

#[tokio::test]
async fn the_callers_session_settings_are_kept_and_do_not_change_bounds() {
    let db = chute_testkit::shared().fresh_db("route_session").await;
    let c = db.client().await;
    // Settings under which bounds print differently: rounded floats, local times, DMY dates, escaped backslashes.
    c.batch_execute(
        "SET extra_float_digits = -15; SET TimeZone = 'Pacific/Chatham'; SET DateStyle = 'SQL, DMY';
         SET standard_conforming_strings = off; SET IntervalStyle = 'sql_standard';
         CREATE TABLE sess (id int8, x float8, t timestamptz, s text) PARTITION BY RANGE (x, t, s);
         CREATE TABLE sess_a PARTITION OF sess FOR VALUES FROM (MINVALUE, MINVALUE, MINVALUE) TO (0.1234567890123, '2024-02-03 04:05:06.789+00', E'a\\\\b');
         CREATE TABLE sess_b PARTITION OF sess FOR VALUES FROM (0.1234567890123, '2024-02-03 04:05:06.789+00', E'a\\\\b') TO (MAXVALUE, MAXVALUE, MAXVALUE);",
    )
    .await
    .unwrap();
    let before = c
        .query_one(
            "SELECT current_setting('extra_float_digits'), current_setting('TimeZone'), current_setting('DateStyle'),
                    current_setting('standard_conforming_strings'), current_setting('IntervalStyle')",
            &[],
        )
        .await
        .unwrap();
    let before: Vec<String> = (0..5).map(|i| before.get(i)).collect();
    let tree = load_partition_tree(&c, &QualifiedName::parse("sess").unwrap()).await.unwrap();
    let after = c
        .query_one(
            "SELECT current_setting('extra_float_digits'), current_setting('TimeZone'), current_setting('DateStyle'),
                    current_setting('standard_conforming_strings'), current_setting('IntervalStyle')",
            &[],
        )
        .await
        .unwrap();
    let after: Vec<String> = (0..5).map(|i| after.get(i)).collect();
    assert_eq!(before, after);
    assert_eq!(before[0], "-15");

    // Rows at and around the bound: exact float, exact microsecond, a backslash in the text.
    let x = 0.1234567890123f64;
    let t = {
        let row = c.query_one("SELECT timestamptz_send('2024-02-03 04:05:06.789+00')", &[]).await.unwrap();
        row.get::<_, WireValue>(0).0
    };
    let later = (i64::from_be_bytes(t.clone().try_into().unwrap()) + 1).to_be_bytes().to_vec();
    let leaf = |x: f64, t: &[u8], s: &str| match tree.route_row(&[None, Some(&x.to_be_bytes()), Some(t), Some(s.as_bytes())]) {
        Route::Leaf(id) => tree.leaf(id).name.name.clone(),
        other => format!("{other:?}"),
    };
    assert_eq!(leaf(x, &t, "a\\b"), "sess_b");
    assert_eq!(leaf(x, &t, "a\\a"), "sess_a");
    assert_eq!(leaf(x, &later, ""), "sess_b");
    assert_eq!(leaf(f64::from_bits(x.to_bits() - 1), &later, "z"), "sess_a");
    assert_eq!(tree.top_level_key().strategy, Strategy::Range);
}
