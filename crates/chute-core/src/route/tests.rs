//! Trees built by hand: bound semantics (MINVALUE/MAXVALUE, inclusive lower and
//! exclusive upper ends, NULLs, DEFAULT), sub-partitioning, and refusals. The
//! integration test in chute-engine checks the same against a real server.

use super::*;
use crate::generate::SplitMix64;

fn q(name: &str) -> QualifiedName {
    QualifiedName::new("public", name)
}

fn col(name: &str, position: usize, type_oid: u32) -> KeyColumnSpec {
    let collation = if matches!(type_oid, 25 | 1043 | 1042 | 19) { KeyCollation::C("C".into()) } else { KeyCollation::None };
    KeyColumnSpec {
        name: name.into(),
        position: Some(position),
        type_oid,
        type_name: format!("oid {type_oid}"),
        collation,
        opclass: "default".into(),
        default_opclass: true,
    }
}

fn table(name: &str, strategy: Strategy, key: Vec<KeyColumnSpec>, partitions: Vec<PartitionSpec>) -> TableSpec {
    TableSpec { name: q(name), strategy, key, partitions }
}

fn leaf(name: &str, bound: BoundSpec) -> PartitionSpec {
    PartitionSpec { name: q(name), bound, kind: PartitionKind::Table }
}

fn sub(bound: BoundSpec, spec: TableSpec) -> PartitionSpec {
    PartitionSpec { name: spec.name.clone(), bound, kind: PartitionKind::Partitioned(spec) }
}

fn i64v(v: i64) -> RangeDatum {
    RangeDatum::Value(v.to_be_bytes().to_vec())
}

fn i32v(v: i32) -> RangeDatum {
    RangeDatum::Value(v.to_be_bytes().to_vec())
}

fn range(from: Vec<RangeDatum>, to: Vec<RangeDatum>) -> BoundSpec {
    BoundSpec::Range { from, to }
}

use RangeDatum::{MaxValue as MAX, MinValue as MIN};

/// The name of the leaf a row goes to, or `!parent` for no partition.
fn routed(tree: &PartitionTree, row: &[Option<&[u8]>]) -> String {
    match tree.route_row(row) {
        Route::Leaf(id) => tree.leaf(id).name.name.clone(),
        Route::NoPartition { parent, .. } => format!("!{}", parent.name),
        Route::BadKey { position } => format!("bad {position}"),
    }
}

fn int8_tree(with_default: bool) -> PartitionTree {
    let mut parts = vec![
        leaf("low", range(vec![MIN], vec![i64v(-100)])),
        leaf("mid", range(vec![i64v(0)], vec![i64v(100)])),
        leaf("mid2", range(vec![i64v(100)], vec![i64v(200)])),
        leaf("high", range(vec![i64v(1_000)], vec![MAX])),
    ];
    if with_default {
        parts.push(leaf("def", BoundSpec::Default));
    }
    PartitionTree::build(&table("t", Strategy::Range, vec![col("k", 1, 20)], parts)).unwrap()
}

#[test]
fn range_lower_bounds_are_inclusive_and_upper_bounds_exclusive() {
    let tree = int8_tree(false);
    let at = |v: i64| routed(&tree, &[None, Some(&v.to_be_bytes())]);
    assert_eq!(at(i64::MIN), "low");
    assert_eq!(at(-101), "low");
    assert_eq!(at(-100), "!t", "the upper bound is exclusive");
    assert_eq!(at(-1), "!t");
    assert_eq!(at(0), "mid", "the lower bound is inclusive");
    assert_eq!(at(99), "mid");
    assert_eq!(at(100), "mid2", "adjacent partitions share a bound");
    assert_eq!(at(199), "mid2");
    assert_eq!(at(200), "!t");
    assert_eq!(at(999), "!t");
    assert_eq!(at(1_000), "high");
    assert_eq!(at(i64::MAX), "high", "MAXVALUE is above every value");
    assert_eq!(routed(&tree, &[None, None]), "!t", "NULL has no range partition");
    assert_eq!(tree.route_row(&[None, None]), Route::NoPartition { parent: &q("t"), level: 0 });
}

#[test]
fn rows_no_range_accepts_go_to_the_default_partition() {
    let tree = int8_tree(true);
    let at = |v: Option<i64>| routed(&tree, &[None, v.map(|v| v.to_be_bytes()).as_ref().map(|b| &b[..])]);
    assert_eq!(at(Some(-100)), "def");
    assert_eq!(at(Some(500)), "def");
    assert_eq!(at(Some(50)), "mid");
    assert_eq!(at(None), "def");
}

/// Reference semantics for integer range keys: MINVALUE and MAXVALUE become
/// ∓infinity and bounds compare with rows lexicographically.
fn reference_cmp(bound: &[Option<i64>], is_min: &[bool], row: &[i64]) -> Ordering {
    for ((b, &min), &r) in bound.iter().zip(is_min).zip(row) {
        let o = match b {
            None if min => Ordering::Less,
            None => Ordering::Greater,
            Some(b) => b.cmp(&r),
        };
        if o != Ordering::Equal {
            return o;
        }
    }
    Ordering::Equal
}

#[test]
fn multi_column_bounds_with_minvalue_and_maxvalue_match_lexicographic_semantics() {
    // (a int4, b int8): a = 1 whole, a = 2 split on b, (3, 5) up to (4, MINVALUE), a >= 5 whole.
    type Bound = (Vec<Option<i64>>, Vec<bool>);
    let bounds: Vec<(&str, Bound, Bound)> = vec![
        ("a1", (vec![Some(1), None], vec![false, true]), (vec![Some(1), None], vec![false, false])),
        ("a2_low", (vec![Some(2), None], vec![false, true]), (vec![Some(2), Some(0)], vec![false, false])),
        ("a2_mid", (vec![Some(2), Some(0)], vec![false, false]), (vec![Some(2), Some(10)], vec![false, false])),
        ("a3_a4", (vec![Some(3), Some(5)], vec![false, false]), (vec![Some(4), None], vec![false, true])),
        ("a5_up", (vec![Some(5), None], vec![false, true]), (vec![None, None], vec![false, false])),
    ];
    let datums = |(values, mins): &Bound| -> Vec<RangeDatum> {
        values
            .iter()
            .zip(mins)
            .enumerate()
            .map(|(i, (v, &min))| match v {
                Some(v) if i == 0 => i32v(*v as i32),
                Some(v) => i64v(*v),
                None if min => MIN,
                None => MAX,
            })
            .collect()
    };
    let parts = bounds.iter().map(|(name, lo, hi)| leaf(name, range(datums(lo), datums(hi)))).collect();
    let tree = PartitionTree::build(&table("m", Strategy::Range, vec![col("a", 0, 23), col("b", 2, 20)], parts)).unwrap();
    for a in -1..=7i64 {
        for b in [-1_000, -11, -1, 0, 1, 4, 5, 6, 9, 10, 11, 1_000] {
            let row = [a, b];
            let expected: Vec<&str> = bounds
                .iter()
                .filter(|(_, lo, hi)| {
                    reference_cmp(&lo.0, &lo.1, &row) != Ordering::Greater && reference_cmp(&hi.0, &hi.1, &row) == Ordering::Greater
                })
                .map(|(name, _, _)| *name)
                .collect();
            assert!(expected.len() <= 1, "overlapping reference bounds for {row:?}");
            let expected = expected.first().map_or("!m".to_string(), |n| n.to_string());
            let a4 = (a as i32).to_be_bytes();
            let b8 = b.to_be_bytes();
            assert_eq!(routed(&tree, &[Some(&a4), None, Some(&b8)]), expected, "row ({a}, {b})");
        }
    }
    // Spot checks of the intent.
    let row = |a: i32, b: i64| routed(&tree, &[Some(&a.to_be_bytes()), None, Some(&b.to_be_bytes())]);
    assert_eq!(row(1, i64::MIN), "a1");
    assert_eq!(row(1, i64::MAX), "a1");
    assert_eq!(row(2, 10), "!m");
    assert_eq!(row(3, 4), "!m");
    assert_eq!(row(3, 5), "a3_a4");
    assert_eq!(row(4, i64::MIN), "!m", "(4, MINVALUE) is below every (4, b)");
    assert_eq!(row(i32::MAX, 0), "a5_up");
    // A NULL in any key column: no partition (no DEFAULT here).
    assert_eq!(routed(&tree, &[Some(&2i32.to_be_bytes()), None, None]), "!m");
}

#[test]
fn random_multi_column_layouts_agree_with_the_reference() {
    let mut rng = SplitMix64::new(7);
    for round in 0..200 {
        // Disjoint partitions from a sorted list of distinct random points.
        let mut points: Vec<(Vec<Option<i64>>, Vec<bool>)> = Vec::new();
        while points.len() < 8 {
            let a = (rng.next_u64() % 5) as i64;
            let b = (rng.next_u64() % 7) as i64 - 3;
            let p = match rng.next_u64() % 4 {
                0 => (vec![Some(a), None], vec![false, true]),
                1 => (vec![Some(a), None], vec![false, false]),
                _ => (vec![Some(a), Some(b)], vec![false, false]),
            };
            points.push(p);
        }
        let key = |p: &(Vec<Option<i64>>, Vec<bool>)| -> (i64, i64) {
            (p.0[0].unwrap(), p.0[1].unwrap_or(if p.1[1] { i64::MIN } else { i64::MAX }))
        };
        points.sort_by_key(key);
        points.dedup_by_key(|p| key(p));
        let mut bounds = Vec::new();
        for (i, w) in points.windows(2).enumerate() {
            if !rng.next_u64().is_multiple_of(3) {
                bounds.push((format!("p{i}"), w[0].clone(), w[1].clone()));
            }
        }
        let datums = |(values, mins): &(Vec<Option<i64>>, Vec<bool>)| -> Vec<RangeDatum> {
            values.iter().zip(mins).map(|(v, &min)| v.map_or(if min { MIN } else { MAX }, i64v)).collect()
        };
        let parts = bounds.iter().map(|(name, lo, hi)| leaf(name, range(datums(lo), datums(hi)))).collect();
        let tree = PartitionTree::build(&table("r", Strategy::Range, vec![col("a", 0, 20), col("b", 1, 20)], parts)).unwrap();
        for a in -1..=5 {
            for b in -4..=4 {
                let row = [a, b];
                let expected = bounds
                    .iter()
                    .find(|(_, lo, hi)| {
                        reference_cmp(&lo.0, &lo.1, &row) != Ordering::Greater && reference_cmp(&hi.0, &hi.1, &row) == Ordering::Greater
                    })
                    .map_or("!r".to_string(), |(name, _, _)| name.clone());
                let got = routed(&tree, &[Some(&a.to_be_bytes()), Some(&b.to_be_bytes())]);
                assert_eq!(got, expected, "round {round}, row {row:?}, bounds {bounds:?}");
            }
        }
    }
}

#[test]
fn float_ranges_put_nan_above_infinity_and_minus_zero_at_zero() {
    let f = |v: f64| RangeDatum::Value(v.to_be_bytes().to_vec());
    let parts = vec![
        leaf("neg", range(vec![MIN], vec![f(0.0)])),
        leaf("pos", range(vec![f(0.0)], vec![f(f64::INFINITY)])),
        leaf("inf", range(vec![f(f64::INFINITY)], vec![f(f64::NAN)])),
        leaf("nan", range(vec![f(f64::NAN)], vec![MAX])),
    ];
    let tree = PartitionTree::build(&table("f", Strategy::Range, vec![col("x", 0, 701)], parts)).unwrap();
    let at = |v: f64| routed(&tree, &[Some(&v.to_be_bytes())]);
    assert_eq!(at(-0.0), "pos");
    assert_eq!(at(0.0), "pos");
    assert_eq!(at(-1e-300), "neg");
    assert_eq!(at(f64::NEG_INFINITY), "neg");
    assert_eq!(at(f64::MAX), "pos");
    assert_eq!(at(f64::INFINITY), "inf");
    assert_eq!(at(f64::NAN), "nan");
    assert_eq!(at(-f64::NAN), "nan");
}

#[test]
fn text_ranges_compare_bytes_and_bpchar_ignores_trailing_spaces() {
    let s = |v: &str| RangeDatum::Value(v.as_bytes().to_vec());
    let parts = vec![leaf("a_m", range(vec![s("a")], vec![s("m")])), leaf("m_up", range(vec![s("m")], vec![MAX]))];
    let tree = PartitionTree::build(&table("t", Strategy::Range, vec![col("s", 0, 25)], parts.clone())).unwrap();
    let at = |v: &str| routed(&tree, &[Some(v.as_bytes())]);
    assert_eq!(at("a"), "a_m");
    assert_eq!(at("Z"), "!t", "upper case sorts below lower case in C");
    assert_eq!(at("lzzz"), "a_m");
    assert_eq!(at("m"), "m_up");
    assert_eq!(at("é"), "m_up", "multi-byte UTF-8 sorts above ASCII");
    assert_eq!(at(""), "!t");

    let padded = vec![leaf("a_m", range(vec![s("a    ")], vec![s("m    ")])), leaf("m_up", range(vec![s("m   ")], vec![MAX]))];
    let tree = PartitionTree::build(&table("c", Strategy::Range, vec![col("s", 0, 1042)], padded)).unwrap();
    let at = |v: &str| routed(&tree, &[Some(v.as_bytes())]);
    assert_eq!(at("a    "), "a_m");
    assert_eq!(at("a"), "a_m");
    assert_eq!(at("m"), "m_up");
    assert_eq!(at("l    "), "a_m");
}

#[test]
fn list_partitions_match_values_and_nulls() {
    let s = |v: &str| Some(v.as_bytes().to_vec());
    let parts = vec![
        leaf("ab", BoundSpec::List(vec![s("a"), s("b")])),
        leaf("c_null", BoundSpec::List(vec![s("c"), None])),
        leaf("empty_string", BoundSpec::List(vec![s("")])),
        leaf("other", BoundSpec::Default),
    ];
    let tree = PartitionTree::build(&table("l", Strategy::List, vec![col("s", 0, 25)], parts)).unwrap();
    let at = |v: Option<&str>| routed(&tree, &[v.map(str::as_bytes)]);
    assert_eq!(at(Some("a")), "ab");
    assert_eq!(at(Some("b")), "ab");
    assert_eq!(at(Some("c")), "c_null");
    assert_eq!(at(None), "c_null");
    assert_eq!(at(Some("")), "empty_string");
    assert_eq!(at(Some("a ")), "other", "text keeps trailing spaces");
    assert_eq!(at(Some("A")), "other");

    // Without a NULL partition or a DEFAULT, NULL has nowhere to go.
    let bools = vec![leaf("yes", BoundSpec::List(vec![Some(vec![1])]))];
    let tree = PartitionTree::build(&table("b", Strategy::List, vec![col("f", 0, 16)], bools)).unwrap();
    assert_eq!(routed(&tree, &[Some(&[1])]), "yes");
    assert_eq!(routed(&tree, &[Some(&[7])]), "yes", "any non-zero byte is true");
    assert_eq!(routed(&tree, &[Some(&[0])]), "!b");
    assert_eq!(routed(&tree, &[None]), "!b");

    // bpchar lists compare without trailing spaces; numerics by value.
    let padded = vec![leaf("ab", BoundSpec::List(vec![s("ab   ")]))];
    let tree = PartitionTree::build(&table("p", Strategy::List, vec![col("c", 0, 1042)], padded)).unwrap();
    assert_eq!(routed(&tree, &[Some(b"ab")]), "ab");
    assert_eq!(routed(&tree, &[Some(b"ab ")]), "ab");
    assert_eq!(routed(&tree, &[Some(b" ab")]), "!p");
}

#[test]
fn hash_partitions_with_mixed_moduli_route_by_the_row_hash() {
    // (4,0) (4,1) (8,2) (8,6) (8,3) (8,7): every residue modulo 8 is covered once.
    let leaves = [(4, 0), (4, 1), (8, 2), (8, 6), (8, 3), (8, 7)];
    let parts = leaves.iter().map(|&(m, r)| leaf(&format!("m{m}_r{r}"), BoundSpec::Hash { modulus: m, remainder: r })).collect();
    let tree = PartitionTree::build(&table("h", Strategy::Hash, vec![col("k", 0, 20), col("s", 1, 25)], parts)).unwrap();
    let mut rng = SplitMix64::new(3);
    let mut seen = std::collections::HashSet::new();
    for i in 0..2_000u64 {
        let k = (rng.next_u64() as i64).to_be_bytes();
        let s = format!("dev-{}", rng.next_u64() % 1000);
        let k = (!i.is_multiple_of(7)).then_some(&k[..]);
        let s = (!i.is_multiple_of(5)).then_some(s.as_bytes());
        let keys = [(HashKind::Int8, k), (HashKind::Text, s)];
        let rem8 = hash_remainder(&keys, 8).unwrap();
        let expected = leaves.iter().find(|&&(m, r)| rem8 % m == r).map(|(m, r)| format!("m{m}_r{r}")).unwrap();
        let got = routed(&tree, &[k, s]);
        assert_eq!(got, expected);
        seen.insert(got);
    }
    assert_eq!(seen.len(), leaves.len());
    // All-NULL keys hash to 0.
    assert_eq!(routed(&tree, &[None, None]), "m4_r0");
}

#[test]
fn a_missing_hash_remainder_has_no_partition() {
    let parts = vec![leaf("r0", BoundSpec::Hash { modulus: 2, remainder: 0 })];
    let tree = PartitionTree::build(&table("h", Strategy::Hash, vec![col("k", 0, 23)], parts)).unwrap();
    let mut outcomes = std::collections::HashSet::new();
    for v in 0..100i32 {
        outcomes.insert(routed(&tree, &[Some(&v.to_be_bytes())]));
    }
    assert_eq!(outcomes, ["r0".to_string(), "!h".to_string()].into_iter().collect());
}

/// Range on day (int4 at position 2) with per-day hash or list sub-partitions.
fn two_level_tree() -> PartitionTree {
    let hashed = table(
        "d0",
        Strategy::Hash,
        vec![col("dev", 0, 23)],
        (0..3).map(|r| leaf(&format!("d0_h{r}"), BoundSpec::Hash { modulus: 3, remainder: r })).collect(),
    );
    let listed = table(
        "d1",
        Strategy::List,
        vec![col("dev", 0, 23)],
        vec![leaf("d1_small", BoundSpec::List(vec![Some(1i32.to_be_bytes().to_vec()), Some(2i32.to_be_bytes().to_vec())]))],
    );
    let listed_with_default = table(
        "d2",
        Strategy::List,
        vec![col("dev", 0, 23)],
        vec![leaf("d2_one", BoundSpec::List(vec![Some(1i32.to_be_bytes().to_vec())])), leaf("d2_rest", BoundSpec::Default)],
    );
    let parts = vec![
        sub(range(vec![i32v(0)], vec![i32v(1)]), hashed),
        sub(range(vec![i32v(1)], vec![i32v(2)]), listed),
        sub(BoundSpec::Default, listed_with_default),
    ];
    PartitionTree::build(&table("top", Strategy::Range, vec![col("day", 2, 1082)], parts)).unwrap()
}

#[test]
fn sub_partitions_route_level_by_level() {
    let tree = two_level_tree();
    let row = |dev: i32, day: i32| {
        let (dev, day) = (dev.to_be_bytes(), day.to_be_bytes());
        routed(&tree, &[Some(&dev), None, Some(&day)])
    };
    assert!(row(5, 0).starts_with("d0_h"));
    assert_eq!(row(1, 1), "d1_small");
    assert_eq!(row(3, 1), "!d1", "the sub-partitioned table that has no match is named");
    assert_eq!(row(1, 7), "d2_one", "the top-level DEFAULT is itself partitioned");
    assert_eq!(row(9, -3), "d2_rest");
    let dev = 3i32.to_be_bytes();
    let day = 1i32.to_be_bytes();
    assert_eq!(tree.route_row(&[Some(&dev), None, Some(&day)]), Route::NoPartition { parent: &q("d1"), level: 1 });

    assert_eq!(tree.root(), &q("top"));
    assert_eq!(tree.top_level_key().strategy, Strategy::Range);
    assert_eq!(tree.top_level_key().columns, vec![KeyColumn { name: "day".into(), position: 2, type_oid: 1082 }]);
    assert_eq!(tree.key_positions(), &[0, 2]);
    assert_eq!(tree.leaves.len(), 6);
    assert!(tree.leaves.iter().all(|l| l.level == 2 && !l.foreign));
    let id = tree.leaf_id(&q("d2_rest")).unwrap();
    assert_eq!(tree.leaf(id).name, q("d2_rest"));
}

#[test]
fn malformed_key_values_are_reported_by_position() {
    let tree = two_level_tree();
    assert_eq!(tree.route_row(&[None, None, Some(&[0, 0, 1])]), Route::BadKey { position: 2 });
    let day = 0i32.to_be_bytes();
    assert_eq!(tree.route_row(&[Some(&[1, 2]), None, Some(&day)]), Route::BadKey { position: 0 }, "in a hash sub-partition");
    let tree = int8_tree(true);
    assert_eq!(tree.route_row(&[None, Some(&[0; 4])]), Route::BadKey { position: 1 });
}

#[test]
fn foreign_leaves_are_leaves() {
    let mut p = leaf("remote", range(vec![MIN], vec![MAX]));
    p.kind = PartitionKind::Foreign;
    let tree = PartitionTree::build(&table("t", Strategy::Range, vec![col("k", 0, 20)], vec![p])).unwrap();
    assert_eq!(tree.route_row(&[Some(&5i64.to_be_bytes())]), Route::Leaf(0));
    assert!(tree.leaves[0].foreign);
}

fn unsupported_reason(spec: &TableSpec) -> String {
    match PartitionTree::build(spec) {
        Err(e @ RouteError::Unsupported { .. }) => {
            let text = e.to_string();
            assert!(text.contains(&format!("rows of {} cannot", spec.name)), "{text} does not name the table");
            text
        }
        other => panic!("expected Unsupported, got {other:?}"),
    }
}

#[test]
fn keys_only_the_server_can_route_are_refused_with_the_reason() {
    let mut expr = col("(a + 1)", 0, 23);
    expr.position = None;
    let text = unsupported_reason(&table("e", Strategy::Range, vec![expr], vec![]));
    assert!(text.contains("public.e") && text.contains("expression (a + 1)"), "{text}");

    let mut en = col("s", 0, 25);
    en.collation = KeyCollation::Deterministic("en_US".into());
    let text = unsupported_reason(&table("t", Strategy::Range, vec![en.clone()], vec![]));
    assert!(text.contains("collation \"en_US\""), "{text}");
    // LIST and HASH only need equality, which a deterministic collation keeps byte-wise.
    assert!(PartitionTree::build(&table("t", Strategy::List, vec![en.clone()], vec![])).is_ok());
    assert!(PartitionTree::build(&table("t", Strategy::Hash, vec![en], vec![])).is_ok());

    let mut nd = col("s", 0, 25);
    nd.collation = KeyCollation::Nondeterministic("case_insensitive".into());
    for strategy in [Strategy::Range, Strategy::List, Strategy::Hash] {
        let text = unsupported_reason(&table("n", strategy, vec![nd.clone()], vec![]));
        assert!(text.contains("nondeterministic collation \"case_insensitive\""), "{text}");
    }

    let mut pattern = col("s", 0, 25);
    pattern.default_opclass = false;
    pattern.opclass = "text_pattern_ops".into();
    let text = unsupported_reason(&table("o", Strategy::Range, vec![pattern], vec![]));
    assert!(text.contains("text_pattern_ops"), "{text}");

    let mut json = col("j", 0, 114);
    json.type_name = "json".into();
    let text = unsupported_reason(&table("j", Strategy::List, vec![json.clone()], vec![]));
    assert!(text.contains("type json"), "{text}");
    let text = unsupported_reason(&table("j", Strategy::Hash, vec![json], vec![]));
    assert!(text.contains("type json"), "{text}");

    // "char" (18) can be neither compared nor hashed by the router.
    let mut ch = col("c", 0, 18);
    ch.type_name = "\"char\"".into();
    unsupported_reason(&table("ch", Strategy::Range, vec![ch], vec![]));

    // The refusal of a sub-partitioned table names that table.
    let mut expr = col("(b * 2)", 1, 23);
    expr.position = None;
    let inner = table("sub", Strategy::Hash, vec![expr], vec![]);
    let outer = table("outer", Strategy::Range, vec![col("a", 0, 23)], vec![sub(range(vec![MIN], vec![MAX]), inner)]);
    match PartitionTree::build(&outer) {
        Err(RouteError::Unsupported { table, .. }) => assert_eq!(table, q("sub")),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bounds_postgres_would_never_store_are_refused() {
    let int8 = || vec![col("k", 0, 20)];
    let invalid = |spec: TableSpec| matches!(PartitionTree::build(&spec), Err(RouteError::InvalidBound { .. }));
    let overlap = vec![leaf("a", range(vec![i64v(0)], vec![i64v(10)])), leaf("b", range(vec![i64v(5)], vec![i64v(20)]))];
    assert!(invalid(table("t", Strategy::Range, int8(), overlap)));
    let empty = vec![leaf("a", range(vec![i64v(10)], vec![i64v(10)]))];
    assert!(invalid(table("t", Strategy::Range, int8(), empty)));
    let malformed = vec![leaf("a", range(vec![RangeDatum::Value(vec![1, 2])], vec![MAX]))];
    assert!(invalid(table("t", Strategy::Range, int8(), malformed)));
    let arity = vec![leaf("a", range(vec![i64v(0), i64v(0)], vec![MAX, MAX]))];
    assert!(invalid(table("t", Strategy::Range, int8(), arity)));
    let two_defaults = vec![leaf("a", BoundSpec::Default), leaf("b", BoundSpec::Default)];
    assert!(invalid(table("t", Strategy::Range, int8(), two_defaults)));
    let wrong_kind = vec![leaf("a", BoundSpec::Hash { modulus: 2, remainder: 0 })];
    assert!(invalid(table("t", Strategy::Range, int8(), wrong_kind)));
    let twice = vec![leaf("a", BoundSpec::List(vec![Some(vec![1])])), leaf("b", BoundSpec::List(vec![Some(vec![2])]))];
    assert!(invalid(table("t", Strategy::List, vec![col("f", 0, 16)], twice)), "2 and 1 are both true");
    let bad_remainder = vec![leaf("a", BoundSpec::Hash { modulus: 2, remainder: 2 })];
    assert!(invalid(table("t", Strategy::Hash, int8(), bad_remainder)));
    let not_dividing =
        vec![leaf("a", BoundSpec::Hash { modulus: 3, remainder: 0 }), leaf("b", BoundSpec::Hash { modulus: 4, remainder: 1 })];
    assert!(invalid(table("t", Strategy::Hash, int8(), not_dividing)));
    let hash_default = vec![leaf("a", BoundSpec::Default)];
    assert!(invalid(table("t", Strategy::Hash, int8(), hash_default)));
}

#[test]
fn a_table_without_partitions_routes_nothing() {
    let tree = PartitionTree::build(&table("empty", Strategy::Hash, vec![col("k", 0, 23)], vec![])).unwrap();
    assert_eq!(routed(&tree, &[Some(&1i32.to_be_bytes())]), "!empty");
    let tree = PartitionTree::build(&table("empty", Strategy::List, vec![col("k", 0, 23)], vec![])).unwrap();
    assert_eq!(routed(&tree, &[None]), "!empty");
}

#[test]
fn keys_wider_than_the_small_scratch_array_route_the_same() {
    // Six int8 columns: rows equal to a bound in the first five columns decide on the sixth.
    let bound = |v: i64, last: RangeDatum| {
        let mut d: Vec<RangeDatum> = (0..5).map(|_| i64v(v)).collect();
        d.push(last);
        d
    };
    let parts = vec![
        leaf("low", range(bound(0, MIN), bound(0, i64v(10)))),
        leaf("high", range(bound(0, i64v(10)), bound(1, MIN))),
        leaf("one", range(bound(1, MIN), bound(1, MAX))),
    ];
    let key: Vec<KeyColumnSpec> = (0..6).map(|i| col(&format!("c{i}"), i, 20)).collect();
    let tree = PartitionTree::build(&table("wide", Strategy::Range, key.clone(), parts)).unwrap();
    let row = |head: i64, last: i64| -> Vec<[u8; 8]> {
        let mut r: Vec<[u8; 8]> = (0..5).map(|_| head.to_be_bytes()).collect();
        r.push(last.to_be_bytes());
        r
    };
    let at = |r: &[[u8; 8]]| routed(&tree, &r.iter().map(|b| Some(&b[..])).collect::<Vec<_>>());
    assert_eq!(at(&row(0, -5)), "low");
    assert_eq!(at(&row(0, 10)), "high");
    assert_eq!(at(&row(1, i64::MAX)), "one");
    assert_eq!(at(&row(2, 0)), "!wide");
    let mut with_null: Vec<Option<&[u8]>> = row(1, 0).iter().map(|_| None).collect();
    with_null[5] = Some(&[0; 8]);
    assert_eq!(routed(&tree, &with_null), "!wide");

    let parts = (0..3).map(|r| leaf(&format!("h{r}"), BoundSpec::Hash { modulus: 3, remainder: r })).collect();
    let tree = PartitionTree::build(&table("wideh", Strategy::Hash, key, parts)).unwrap();
    let mut rng = SplitMix64::new(11);
    for _ in 0..200 {
        let values: Vec<[u8; 8]> = (0..6).map(|_| rng.next_u64().to_be_bytes()).collect();
        let fields: Vec<Option<&[u8]>> = values.iter().enumerate().map(|(i, v)| (i != 2).then_some(&v[..])).collect();
        let keys: Vec<(HashKind, Option<&[u8]>)> = fields.iter().map(|f| (HashKind::Int8, *f)).collect();
        assert_eq!(routed(&tree, &fields), format!("h{}", hash_remainder(&keys, 3).unwrap()));
    }
    let mut bad = vec![Some(&[0u8; 8][..]); 6];
    bad[4] = Some(&[1, 2, 3]);
    assert_eq!(tree.route_row(&bad), Route::BadKey { position: 4 });
}
