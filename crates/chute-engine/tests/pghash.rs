//! chute's client-side partition hash against a real PostgreSQL 15 server.
//!
//! Values travel to the server as raw binary wire bytes (each goes through
//! the type's receive function, as in binary COPY), and the server answers
//! with its own send bytes and its own `hash*extended` result. Then rows are
//! inserted through hash-partitioned parents, and every row's leaf must be
//! the one `hash_remainder` predicts. `satisfies_hash_partition` with three
//! coprime moduli whose product exceeds 2^64 pins the full 64-bit partition
//! hash, not just its remainder modulo 7 or 13.

use std::collections::HashMap;
use std::error::Error;

use bytes::BytesMut;
use chute_core::generate::SplitMix64;
use chute_core::pghash::{HASH_PARTITION_SEED, HashKind, hash_remainder, hash_wire_value, partition_hash};
use tokio_postgres::Client;
use tokio_postgres::types::{IsNull, ToSql, Type, to_sql_checked};

/// Values per kind in the hash-function comparison, rows per routed table.
const VALUES: usize = 300;
const ROWS: usize = 400;

/// Pairwise coprime (prime) int4 moduli with a product above 2^64: agreeing
/// on the remainder for all three means agreeing on the whole 64-bit hash.
const PINNING_MODULI: [u64; 3] = [2_147_483_647, 2_147_483_629, 2_147_483_587];

/// One value's binary wire form, passed to the server as-is.
#[derive(Debug, Clone)]
struct Wire(Vec<u8>);

impl ToSql for Wire {
    fn to_sql(&self, _ty: &Type, out: &mut BytesMut) -> Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }

    fn accepts(_ty: &Type) -> bool {
        true
    }

    to_sql_checked!();
}

fn wires(values: &[Option<Vec<u8>>]) -> Vec<Option<Wire>> {
    values.iter().map(|v| v.clone().map(Wire)).collect()
}

/// One key type under test.
struct Case {
    kind: HashKind,
    /// The type values are received as in the hash-function comparison.
    sql_type: &'static str,
    /// The column type in the routed table (may add a typmod).
    column_type: &'static str,
    send: &'static str,
    /// The server's extended hash of `v` with seed `s`; `None` when PostgreSQL 15
    /// exposes none to SQL (bytea), which the routing test then covers.
    server_hash: Option<&'static str>,
    generate: fn(&mut SplitMix64) -> Vec<u8>,
}

fn case(
    kind: HashKind,
    sql_type: &'static str,
    send: &'static str,
    server_hash: Option<&'static str>,
    generate: fn(&mut SplitMix64) -> Vec<u8>,
) -> Case {
    Case { kind, sql_type, column_type: sql_type, send, server_hash, generate }
}

fn cases() -> Vec<Case> {
    vec![
        // bool_ops uses hashcharextended on the char 0 or 1.
        case(HashKind::Bool, "bool", "boolsend", Some("hashcharextended(CASE WHEN v THEN chr(1) ELSE '' END::\"char\", s)"), gen_bool),
        case(HashKind::Int2, "int2", "int2send", Some("hashint2extended(v, s)"), |r| gen_int(r, 2)),
        case(HashKind::Int4, "int4", "int4send", Some("hashint4extended(v, s)"), |r| gen_int(r, 4)),
        case(HashKind::Int8, "int8", "int8send", Some("hashint8extended(v, s)"), |r| gen_int(r, 8)),
        case(HashKind::Oid, "oid", "oidsend", Some("hashoidextended(v, s)"), |r| gen_int(r, 4)),
        case(HashKind::Float4, "float4", "float4send", Some("hashfloat4extended(v, s)"), gen_float4),
        case(HashKind::Float8, "float8", "float8send", Some("hashfloat8extended(v, s)"), gen_float8),
        case(HashKind::Numeric, "numeric", "numeric_send", Some("hash_numeric_extended(v, s)"), gen_numeric),
        case(HashKind::Text, "text", "textsend", Some("hashtextextended(v, s)"), |r| gen_text(r, 40).into_bytes()),
        case(HashKind::Text, "varchar", "varcharsend", Some("hashtextextended(v, s)"), |r| gen_text(r, 40).into_bytes()),
        case(HashKind::Text, "name", "namesend", Some("hashnameextended(v, s)"), gen_name),
        Case { column_type: "char(24)", ..case(HashKind::Bpchar, "bpchar", "bpcharsend", Some("hashbpcharextended(v, s)"), gen_bpchar) },
        case(HashKind::Bytea, "bytea", "byteasend", None, gen_bytea),
        // date_ops uses hashint4extended on the int4 a date is (what date_send shows).
        case(
            HashKind::Date,
            "date",
            "date_send",
            Some("hashint4extended(('x' || encode(date_send(v), 'hex'))::bit(32)::int4, s)"),
            gen_date,
        ),
        case(HashKind::Timestamp, "timestamp", "timestamp_send", Some("timestamp_hash_extended(v, s)"), gen_timestamp),
        // The session runs in UTC, so the cast keeps the microseconds.
        case(HashKind::Timestamptz, "timestamptz", "timestamptz_send", Some("timestamp_hash_extended(v::timestamp, s)"), gen_timestamp),
        case(HashKind::Uuid, "uuid", "uuid_send", Some("uuid_hash_extended(v, s)"), gen_uuid),
    ]
}

fn below(rng: &mut SplitMix64, n: u64) -> u64 {
    rng.next_u64() % n
}

fn gen_bool(rng: &mut SplitMix64) -> Vec<u8> {
    // boolrecv takes any non-zero byte as true.
    vec![[0u8, 1, 2, 0xff][below(rng, 4) as usize]]
}

/// Random big-endian integers of `width` bytes, often small or at the edges.
fn gen_int(rng: &mut SplitMix64, width: usize) -> Vec<u8> {
    let bits = width as u32 * 8;
    let v: i64 = match below(rng, 4) {
        0 => below(rng, 2001) as i64 - 1000,
        1 => [0, -1, 1, i64::MIN >> (64 - bits), i64::MAX >> (64 - bits)][below(rng, 5) as usize],
        _ => rng.next_u64() as i64,
    };
    v.to_be_bytes()[8 - width..].to_vec()
}

fn gen_float8(rng: &mut SplitMix64) -> Vec<u8> {
    let v: u64 = match below(rng, 6) {
        // Every bit pattern: NaNs with payloads, subnormals, infinities.
        0 | 1 => rng.next_u64(),
        2 => [0.0f64, -0.0, f64::NAN, -f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MIN_POSITIVE][below(rng, 7) as usize].to_bits(),
        _ => ((rng.next_f64() - 0.5) * 2e6).to_bits(),
    };
    v.to_be_bytes().to_vec()
}

fn gen_float4(rng: &mut SplitMix64) -> Vec<u8> {
    let v: u32 = match below(rng, 6) {
        0 | 1 => rng.next_u64() as u32,
        2 => [0.0f32, -0.0, f32::NAN, -f32::NAN, f32::INFINITY, f32::NEG_INFINITY][below(rng, 6) as usize].to_bits(),
        _ => (((rng.next_f64() - 0.5) * 2e4) as f32).to_bits(),
    };
    v.to_be_bytes().to_vec()
}

/// Numeric wire values, canonical or not: leading and trailing zero digits,
/// digits hidden by a short dscale, NaN and the infinities.
fn gen_numeric(rng: &mut SplitMix64) -> Vec<u8> {
    let (weight, sign, dscale, digits): (i16, u16, u16, Vec<i16>) = match below(rng, 16) {
        0 => (0, 0xC000, 0, vec![]),
        1 => (0, 0xD000, 0, vec![]),
        2 => (0, 0xF000, 0, vec![]),
        3 => (0, 0x0000, below(rng, 5) as u16, vec![]),
        _ => {
            let n = below(rng, 9) as usize;
            let weight = below(rng, 13) as i16 - 6;
            let digits: Vec<i16> = (0..n).map(|_| if below(rng, 4) == 0 { 0 } else { below(rng, 10_000) as i16 }).collect();
            let exact = ((n as i16 - weight - 1) * 4).max(0) as u16;
            let dscale = if below(rng, 4) == 0 { below(rng, 30) as u16 } else { exact };
            (weight, if below(rng, 2) == 0 { 0x0000 } else { 0x4000 }, dscale, digits)
        }
    };
    let mut w = Vec::new();
    w.extend((digits.len() as u16).to_be_bytes());
    w.extend(weight.to_be_bytes());
    w.extend(sign.to_be_bytes());
    w.extend(dscale.to_be_bytes());
    digits.iter().for_each(|d| w.extend(d.to_be_bytes()));
    w
}

const ALPHABET: &[&str] = &["a", "b", "Z", "0", "9", " ", "-", "ü", "ß", "é", "世", "界", "🚀", "ж", "\t"];

fn gen_text(rng: &mut SplitMix64, max_chars: u64) -> String {
    (0..below(rng, max_chars + 1)).map(|_| ALPHABET[below(rng, ALPHABET.len() as u64) as usize]).collect()
}

fn gen_name(rng: &mut SplitMix64) -> Vec<u8> {
    // namerecv rejects 64 bytes or more; 15 chars are at most 60 bytes.
    gen_text(rng, 15).into_bytes()
}

fn gen_bpchar(rng: &mut SplitMix64) -> Vec<u8> {
    // At most 24 characters before the padding, so char(24) accepts it.
    let mut s = gen_text(rng, 20);
    s.extend(std::iter::repeat_n(' ', below(rng, 5) as usize));
    s.into_bytes()
}

fn gen_bytea(rng: &mut SplitMix64) -> Vec<u8> {
    (0..below(rng, 40)).map(|_| rng.next_u64() as u8).collect()
}

fn gen_uuid(rng: &mut SplitMix64) -> Vec<u8> {
    (0..16).map(|_| rng.next_u64() as u8).collect()
}

fn gen_date(rng: &mut SplitMix64) -> Vec<u8> {
    // Valid days run from 4714-11-24 BC (-2451545) to 5874897-12-31; the ends are ±infinity.
    let v: i32 = match below(rng, 8) {
        0 => [i32::MIN, i32::MAX, -2_451_545, 2_145_031_948, 0, -1][below(rng, 6) as usize],
        1..=3 => below(rng, 40_000) as i32 - 20_000,
        _ => (below(rng, 2_147_483_493) as i64 - 2_451_545) as i32,
    };
    v.to_be_bytes().to_vec()
}

fn gen_timestamp(rng: &mut SplitMix64) -> Vec<u8> {
    // Valid microseconds run from 4714-11-24 BC to just before 294277 AD; the ends are ±infinity.
    const MIN: i64 = -211_813_488_000_000_000;
    const END: i64 = 9_223_371_331_200_000_000;
    let v: i64 = match below(rng, 8) {
        0 => [i64::MIN, i64::MAX, MIN, END - 1, 0, -1][below(rng, 6) as usize],
        1..=3 => below(rng, 4_000_000_000_000_000) as i64 - 2_000_000_000_000_000,
        _ => MIN.wrapping_add(below(rng, END.abs_diff(MIN)) as i64),
    };
    v.to_be_bytes().to_vec()
}

async fn utc_client(db: &chute_testkit::TestDb) -> Client {
    let client = db.client().await;
    client.batch_execute("SET TimeZone = 'UTC'").await.unwrap();
    client
}

#[tokio::test]
async fn each_kind_hashes_like_the_servers_extended_hash_function() {
    let db = chute_testkit::shared().fresh_db("pghash_fn").await;
    let client = utc_client(&db).await;
    let mut rng = SplitMix64::new(0x9A5E_0001);
    for case in cases() {
        let Some(server_hash) = case.server_hash else { continue };
        let sent: Vec<Vec<u8>> = (0..VALUES).map(|_| (case.generate)(&mut rng)).collect();
        let params: Vec<Wire> = sent.iter().cloned().map(Wire).collect();
        let sql = format!(
            "SELECT i, {send}(v), {server_hash} FROM unnest($1::{ty}[]) WITH ORDINALITY AS t(v, i), (SELECT $2::int8 AS s) AS seed",
            send = case.send,
            ty = case.sql_type
        );
        let statement = client.prepare(&sql).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
        for seed in [0, 7, HASH_PARTITION_SEED, rng.next_u64()] {
            let rows = client.query(&statement, &[&params, &(seed as i64)]).await.unwrap_or_else(|e| panic!("{sql} (seed {seed}): {e}"));
            assert_eq!(rows.len(), VALUES);
            for row in rows {
                let i = usize::try_from(row.get::<_, i64>(0) - 1).unwrap();
                let stored: Vec<u8> = row.get(1);
                let expected = row.get::<_, i64>(2) as u64;
                let ours = hash_wire_value(case.kind, &stored, seed).unwrap();
                assert_eq!(ours, expected, "{}: server sends {stored:02x?} (seed {seed})", case.sql_type);
                // The bytes as sent hash the same: the server's normalization
                // (bool bytes, NaN payloads, numeric zeros and hidden digits,
                // bpchar padding) changes nothing the hash sees.
                let raw = hash_wire_value(case.kind, &sent[i], seed).unwrap();
                assert_eq!(raw, expected, "{}: sent {:02x?}, stored {stored:02x?} (seed {seed})", case.sql_type, sent[i]);
            }
        }
    }
}

/// `(modulus, remainder)` of each leaf of `parent`, by leaf name, from the
/// bound the server stores (`FOR VALUES WITH (modulus 7, remainder 3)`).
async fn leaf_bounds(client: &Client, parent: &str) -> HashMap<String, (u64, u64)> {
    let rows = client
        .query(
            "SELECT c.oid::regclass::text, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid \
             WHERE i.inhparent = $1::text::regclass",
            &[&parent],
        )
        .await
        .unwrap();
    let mut bounds = HashMap::new();
    for row in rows {
        let bound: String = row.get(1);
        let numbers: Vec<u64> = bound.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).map(|s| s.parse().unwrap()).collect();
        assert!(bound.starts_with("FOR VALUES WITH (modulus ") && numbers.len() == 2, "unexpected bound {bound}");
        bounds.insert(row.get(0), (numbers[0], numbers[1]));
    }
    bounds
}

/// A hash-partitioned table with the given leaves.
async fn create_hash_partitioned(client: &Client, parent: &str, columns: &[(&str, &str)], leaves: &[(u64, u64)]) {
    let cols: Vec<String> = columns.iter().map(|(name, ty)| format!("{name} {ty}")).collect();
    let key: Vec<&str> = columns.iter().map(|(name, _)| *name).collect();
    let mut ddl = format!("CREATE TABLE {parent} ({}) PARTITION BY HASH ({});", cols.join(", "), key.join(", "));
    for (m, r) in leaves {
        ddl += &format!("CREATE TABLE {parent}_m{m}_r{r} PARTITION OF {parent} FOR VALUES WITH (MODULUS {m}, REMAINDER {r});");
    }
    client.batch_execute(&ddl).await.unwrap_or_else(|e| panic!("{ddl}: {e}"));
}

fn all_remainders(modulus: u64) -> Vec<(u64, u64)> {
    (0..modulus).map(|r| (modulus, r)).collect()
}

/// Inserts `rows` through `parent`, reads each back with the leaf it landed
/// in, and checks that leaf against `hash_remainder`. Returns the rows as stored.
async fn route_and_check(
    client: &Client,
    parent: &str,
    columns: &[(&str, &str, &str, HashKind)],
    rows: &[Vec<Option<Vec<u8>>>],
) -> Vec<Vec<Option<Vec<u8>>>> {
    let arrays: Vec<Vec<Option<Wire>>> =
        (0..columns.len()).map(|c| wires(&rows.iter().map(|row| row[c].clone()).collect::<Vec<_>>())).collect();
    let params: Vec<&(dyn ToSql + Sync)> = arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
    let unnest: Vec<String> = columns.iter().enumerate().map(|(i, (_, ty, _, _))| format!("${}::{ty}[]", i + 1)).collect();
    let insert = format!("INSERT INTO {parent} SELECT * FROM unnest({})", unnest.join(", "));
    let n = client.execute(&insert, &params).await.unwrap_or_else(|e| panic!("{insert}: {e}"));
    assert_eq!(n as usize, rows.len());

    let bounds = leaf_bounds(client, parent).await;
    let sends: Vec<String> = columns.iter().map(|(name, _, send, _)| format!("{send}({name})")).collect();
    let select = format!("SELECT tableoid::regclass::text, {} FROM {parent}", sends.join(", "));
    let stored = client.query(&select, &[]).await.unwrap();
    assert_eq!(stored.len(), rows.len());
    let mut leaves_seen = HashMap::new();
    let mut out = Vec::new();
    for row in stored {
        let leaf: String = row.get(0);
        let (modulus, remainder) = bounds[&leaf];
        let values: Vec<Option<Vec<u8>>> = (0..columns.len()).map(|c| row.get(c + 1)).collect();
        let keys: Vec<(HashKind, Option<&[u8]>)> = columns.iter().zip(&values).map(|(col, v)| (col.3, v.as_deref())).collect();
        assert_eq!(hash_remainder(&keys, modulus).unwrap(), remainder, "{parent}: row {values:02x?} is in {leaf}");
        *leaves_seen.entry(leaf).or_insert(0) += 1;
        out.push(values);
    }
    // With many distinct keys every leaf gets rows, so a constant hash could not pass.
    let distinct: std::collections::HashSet<_> = out.iter().collect();
    if distinct.len() >= 10 * bounds.len() {
        assert_eq!(leaves_seen.len(), bounds.len(), "{parent}: rows reached only {leaves_seen:?}");
    }
    out
}

/// `satisfies_hash_partition` agrees with our remainder for moduli that pin
/// all 64 bits of the partition hash, and rejects the next remainder.
async fn check_full_hash(client: &Client, parent: &str, columns: &[(&str, &str, &str, HashKind)], rows: &[Vec<Option<Vec<u8>>>]) {
    let arrays: Vec<Vec<Option<Wire>>> =
        (0..columns.len()).map(|c| wires(&rows.iter().map(|row| row[c].clone()).collect::<Vec<_>>())).collect();
    let mut remainders: Vec<Vec<i32>> = vec![Vec::new(); PINNING_MODULI.len()];
    for row in rows {
        let keys: Vec<(HashKind, Option<&[u8]>)> = columns.iter().zip(row).map(|(col, v)| (col.3, v.as_deref())).collect();
        let hash = partition_hash(&keys).unwrap();
        for (m, rs) in PINNING_MODULI.iter().zip(&mut remainders) {
            rs.push(i32::try_from(hash % m).unwrap());
        }
    }
    let mut params: Vec<&(dyn ToSql + Sync)> = arrays.iter().map(|a| a as &(dyn ToSql + Sync)).collect();
    params.extend(remainders.iter().map(|r| r as &(dyn ToSql + Sync)));

    let n = columns.len();
    let mut unnest: Vec<String> = columns.iter().enumerate().map(|(i, (_, ty, _, _))| format!("${}::{ty}[]", i + 1)).collect();
    unnest.extend((0..PINNING_MODULI.len()).map(|j| format!("${}::int4[]", n + j + 1)));
    let mut names: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
    names.extend((0..PINNING_MODULI.len()).map(|j| format!("r{j}")));
    let keys = (0..n).map(|i| format!("k{i}")).collect::<Vec<_>>().join(", ");
    let satisfies = |shift: &str| {
        PINNING_MODULI
            .iter()
            .enumerate()
            .map(|(j, m)| format!("satisfies_hash_partition('{parent}'::regclass, {m}, (r{j}{shift}) % {m}, {keys})"))
            .collect::<Vec<_>>()
    };
    let sql = format!(
        "SELECT count(*) FILTER (WHERE {}), count(*) FILTER (WHERE {}) FROM unnest({}) AS t({})",
        satisfies("").join(" AND "),
        satisfies(" + 1").join(" OR "),
        unnest.join(", "),
        names.join(", ")
    );
    let row = client.query_one(&sql, &params).await.unwrap_or_else(|e| panic!("{sql}: {e}"));
    assert_eq!(row.get::<_, i64>(0) as usize, rows.len(), "{parent}: the server's 64-bit hash differs for some rows");
    assert_eq!(row.get::<_, i64>(1), 0, "{parent}: satisfies_hash_partition accepted a wrong remainder");
}

fn random_rows(rng: &mut SplitMix64, generators: &[fn(&mut SplitMix64) -> Vec<u8>], null_one_in: u64) -> Vec<Vec<Option<Vec<u8>>>> {
    let mut rows: Vec<Vec<Option<Vec<u8>>>> =
        (0..ROWS).map(|_| generators.iter().map(|g| if below(rng, null_one_in) == 0 { None } else { Some(g(rng)) }).collect()).collect();
    // An all-NULL key hashes to 0 and so lands in remainder 0.
    rows.push(vec![None; generators.len()]);
    rows
}

#[tokio::test]
async fn single_column_keys_route_each_row_where_the_server_does() {
    let db = chute_testkit::shared().fresh_db("pghash_single").await;
    let client = utc_client(&db).await;
    let mut rng = SplitMix64::new(0x9A5E_0002);
    for (n, case) in cases().into_iter().enumerate() {
        let parent = format!("single_{n}_{}", case.sql_type);
        let modulus = if n % 2 == 0 { 7 } else { 13 };
        create_hash_partitioned(&client, &parent, &[("k", case.column_type)], &all_remainders(modulus)).await;
        let columns = [("k", case.column_type, case.send, case.kind)];
        let rows = random_rows(&mut rng, &[case.generate], 20);
        let stored = route_and_check(&client, &parent, &columns, &rows).await;
        check_full_hash(&client, &parent, &columns, &stored).await;
    }
}

#[tokio::test]
async fn multi_column_keys_with_nulls_route_each_row_where_the_server_does() {
    let db = chute_testkit::shared().fresh_db("pghash_multi").await;
    let client = utc_client(&db).await;
    let mut rng = SplitMix64::new(0x9A5E_0003);

    let dev_name = [("dev_id", "int4", "int4send", HashKind::Int4), ("name", "text", "textsend", HashKind::Text)];
    create_hash_partitioned(&client, "readings", &[("dev_id", "int4"), ("name", "text")], &all_remainders(13)).await;
    let rows = random_rows(&mut rng, &[|r| gen_int(r, 4), |r| gen_text(r, 30).into_bytes()], 6);
    let stored = route_and_check(&client, "readings", &dev_name, &rows).await;
    check_full_hash(&client, "readings", &dev_name, &stored).await;

    let three =
        [("a", "int8", "int8send", HashKind::Int8), ("b", "uuid", "uuid_send", HashKind::Uuid), ("c", "date", "date_send", HashKind::Date)];
    create_hash_partitioned(&client, "events", &[("a", "int8"), ("b", "uuid"), ("c", "date")], &all_remainders(7)).await;
    let rows = random_rows(&mut rng, &[|r| gen_int(r, 8), gen_uuid, gen_date], 5);
    let stored = route_and_check(&client, "events", &three, &rows).await;
    check_full_hash(&client, "events", &three, &stored).await;

    let mixed = [
        ("t", "timestamptz", "timestamptz_send", HashKind::Timestamptz),
        ("x", "numeric", "numeric_send", HashKind::Numeric),
        ("f", "float8", "float8send", HashKind::Float8),
        ("s", "char(24)", "bpcharsend", HashKind::Bpchar),
    ];
    let columns: Vec<(&str, &str)> = mixed.iter().map(|(name, ty, _, _)| (*name, *ty)).collect();
    create_hash_partitioned(&client, "metrics", &columns, &all_remainders(13)).await;
    let rows = random_rows(&mut rng, &[gen_timestamp, gen_numeric, gen_float8, gen_bpchar], 4);
    let stored = route_and_check(&client, "metrics", &mixed, &rows).await;
    check_full_hash(&client, "metrics", &mixed, &stored).await;
}

#[tokio::test]
async fn leaves_with_different_moduli_route_by_their_own_modulus() {
    let db = chute_testkit::shared().fresh_db("pghash_moduli").await;
    let client = db.client().await;
    let mut rng = SplitMix64::new(0x9A5E_0004);
    // Remainders 0 and 1 of 4 split further into 8ths for 2 and 3: (4,0) (4,1) (8,2) (8,6) (8,3) (8,7).
    let leaves = [(4, 0), (4, 1), (8, 2), (8, 6), (8, 3), (8, 7)];
    create_hash_partitioned(&client, "uneven", &[("k", "int8")], &leaves).await;
    let columns = [("k", "int8", "int8send", HashKind::Int8)];
    let rows = random_rows(&mut rng, &[|r| gen_int(r, 8)], 50);
    route_and_check(&client, "uneven", &columns, &rows).await;
}
