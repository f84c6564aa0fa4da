//! The coordinator's pure parts, without a database: which input ranges a
//! batch claims, what a resume skips, and how the errors of many workers
//! are reported.

use std::collections::HashMap;

use chute_core::ident::QualifiedName;

use super::super::journal::{Committed, RangeSet};
use super::super::model::{Filed, RowPos, Segment, Target};
use super::super::routing::{LeafRef, Routed, Routing};
use super::super::{Errors, LoadError};
use super::combine;

fn seg(rows: &[&[u8]], range: (u32, u64, u64)) -> Segment {
    let mut s = Segment::default();
    for (i, r) in rows.iter().enumerate() {
        s.push(r, r, i as u64 + 1, range.0 as usize);
    }
    s.ranges.push(range);
    s
}

fn target(leaf: u32) -> Target {
    Target { table: 0, leaf: LeafRef::Leaf(leaf), text: false }
}

#[test]
fn a_batch_claims_the_ranges_of_the_chunks_whose_rows_it_holds_for_its_target() {
    // Two chunks, next to each other in input 0, with rows for leaf 1; the
    // second also has rows for leaf 2.
    let out = combine(vec![
        (target(1), seg(&[b"a", b"b"], (0, 0, 100))),
        (target(2), seg(&[b"x"], (0, 100, 200))),
        (target(1), seg(&[b"c"], (0, 100, 200))),
    ]);
    let one = &out[&target(1)];
    assert_eq!(one.row_ends.len(), 3);
    assert_eq!(one.data, b"abc");
    // Adjacent ranges of one input are claimed as one.
    assert_eq!(one.ranges, vec![(0, 0, 200)]);
    assert_eq!(out[&target(2)].ranges, vec![(0, 100, 200)]);
    // A segment's records and lines move with its rows.
    assert_eq!(one.lines, vec![1, 2, 1]);
    assert_eq!(one.record(2).0, b"c");
}

#[test]
fn ranges_of_different_inputs_or_with_a_gap_stay_apart() {
    let out = combine(vec![(target(1), seg(&[b"a"], (0, 0, 100))), (target(1), seg(&[b"b"], (1, 0, 50)))]);
    assert_eq!(out[&target(1)].ranges, vec![(0, 0, 100), (1, 0, 50)]);
}

#[test]
fn a_resume_skips_exactly_the_rows_in_ranges_committed_for_their_leaf() {
    let name = QualifiedName { schema: Some("public".into()), name: "t".into() };
    let routing = Routing::single(name.clone(), "(\"a\")".into());
    let mut by_target = HashMap::new();
    // Input 0: bytes [0, 100) and [300, 400) committed into public.t.
    by_target.insert(name.to_string(), vec![RangeSet::from_ranges(vec![(0, 100), (300, 400)])]);
    // One table: it is both leaf 0 and the parent.
    assert_eq!(routing.set_committed(&Committed { by_target, rows: 7, ..Default::default() }), 2);
    let mut filed = Filed::default();
    for offset in [0u64, 99, 100, 250, 300, 399, 400] {
        let at = RowPos { input: 0, line: offset + 1, offset, range: (0, 0, 500) };
        filed.file(&routing, Routed::To(LeafRef::Leaf(0)), 0, b"row", b"raw", at);
    }
    // 0, 99, 300 and 399 were committed; 100, 250 and 400 load.
    assert_eq!(filed.skipped, 4);
    let seg = filed.get(&target(0)).expect("rows were filed");
    assert_eq!(seg.lines, vec![101, 251, 401]);
    // The same rows as text (values the server parses) were never committed as text.
    assert!(!routing.is_committed(LeafRef::Leaf(0), true, 0, 0));
    // Another input's rows are not skipped.
    assert!(!routing.is_committed(LeafRef::Leaf(0), false, 1, 0));
}

#[test]
fn rows_encoded_where_the_last_went_are_filed_where_they_route_or_skipped() {
    let name = QualifiedName { schema: Some("public".into()), name: "t".into() };
    let routing = Routing::single(name.clone(), "(\"a\")".into());
    let mut by_target = HashMap::new();
    by_target.insert(name.to_string(), vec![RangeSet::from_ranges(vec![(30, 40)])]);
    routing.set_committed(&Committed { by_target, rows: 1, ..Default::default() });
    let mut filed = Filed::default();
    filed.by_ref = true;
    // Leaf 0, 0, 1, 0 (committed: skipped), 1, missing, 0.
    let rows: [(&[u8], Routed, u64); 7] = [
        (b"a0", Routed::To(LeafRef::Leaf(0)), 0),
        (b"b0", Routed::To(LeafRef::Leaf(0)), 10),
        (b"c1", Routed::To(LeafRef::Leaf(1)), 20),
        (b"d0", Routed::To(LeafRef::Leaf(0)), 30),
        (b"e1", Routed::To(LeafRef::Leaf(1)), 40),
        (b"f-", Routed::Missing { start: 7 }, 50),
        (b"g0", Routed::To(LeafRef::Leaf(0)), 60),
    ];
    for (row, routed, offset) in rows {
        filed.staging().extend_from_slice(row);
        let at = RowPos { input: 0, line: offset + 1, offset, range: (0, 0, 100) };
        filed.file_staged(&routing, routed, 0, b"0123456789", at);
    }
    assert_eq!(filed.skipped, 1);
    let zero = filed.get(&target(0)).expect("leaf 0 has rows");
    assert_eq!(zero.data, b"a0b0g0");
    assert_eq!((zero.row_ends.clone(), zero.offsets.clone(), zero.raw_ends.clone()), (vec![2, 4, 6], vec![0, 10, 60], vec![10, 20, 30]));
    let one = filed.get(&target(1)).expect("leaf 1 has rows");
    assert_eq!((one.data.as_slice(), one.lines.clone()), (&b"c1e1"[..], vec![21, 41]));
    assert_eq!(filed.pending.len(), 1);
    assert_eq!((filed.pending[0].row.as_slice(), filed.pending[0].start), (&b"f-"[..], 7));
}

#[test]
fn the_first_error_decides_and_the_others_are_reported_with_it() {
    let mut errors = Errors::default();
    assert!(!errors.any());
    assert!(Errors::default().into_error().is_none());
    errors.add(LoadError::Setup("worker 1: disk full".into()));
    errors.add(LoadError::Setup("worker 1: disk full".into()));
    errors.add(LoadError::Input { input: "t.csv".into(), message: "connection reset".into() });
    errors.add(LoadError::Setup("worker 3: out of memory".into()));
    assert!(errors.any());
    let e = errors.into_error().unwrap();
    let text = e.to_string();
    assert!(text.starts_with("worker 1: disk full (also: "), "{text}");
    assert!(text.contains("cannot read t.csv: connection reset") && text.contains("worker 3: out of memory"), "{text}");
    assert_eq!(text.matches("disk full").count(), 1, "{text}");
    // Whether the load is retried follows the first error.
    use crate::retry::Classify;
    assert!(!e.connection_lost());
}

#[test]
fn an_acknowledgement_fires_when_every_target_holding_its_rows_has_committed() {
    use super::super::ack::{AckId, AckRef, AckStatus};
    let (tx, rx) = flume::unbounded();
    let chunk = |tag: u64, start: u64| AckRef::new(AckId { input: 0, start, end: start + 100, tag, ..AckId::default() }, tx.clone());
    let (first, second) = (chunk(1, 0), chunk(2, 100));
    // The first chunk has rows for leaves 1 and 2, the second for leaf 1.
    let mut parts = vec![
        (target(1), seg(&[b"a", b"b"], (0, 0, 100))),
        (target(2), seg(&[b"x"], (0, 0, 100))),
        (target(1), seg(&[b"c"], (0, 100, 200))),
    ];
    for (i, (_, s)) in parts.iter_mut().enumerate() {
        s.acks.push(0, if i < 2 { first.share() } else { second.share() });
    }
    first.settle();
    second.settle();
    let mut out = combine(parts);
    let leaf1 = out.remove(&target(1)).unwrap();
    let leaf2 = out.remove(&target(2)).unwrap();
    // Leaf 1's batch commits with its first row rejected.
    leaf1.acks.commit(leaf1.row_ends.len(), &[0]);
    let c = rx.try_recv().expect("the second chunk's rows were all in leaf 1's batch");
    assert_eq!((c.id.tag, c.rows_committed), (2, 1));
    assert!(rx.try_recv().is_err(), "the first chunk still has a row for leaf 2");
    // Leaf 2's batch fails: its rows were never committed.
    drop(leaf2);
    let c = rx.try_recv().unwrap();
    assert_eq!((c.id.tag, c.status, c.rows_committed), (1, AckStatus::Failed, 1));
}
