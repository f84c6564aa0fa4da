//! Planner tests of distributed tables (scale-out): remote tables as steps
//! on their nodes, foreign partitions on the coordinator, retention on both.

use jiff::Timestamp;

use super::*;
use crate::partman::policy::{Distribution, HashSub, KeyType, Placement, Retention};
use crate::partman::snapshot::RemoteDdl;

fn us(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_microsecond()
}

fn distributed() -> Policy {
    Policy {
        premake: 0,
        hash: Some(HashSub { column: "dev_id".into(), modulus: 4 }),
        distribution: Some(Distribution { nodes: vec!["n1".into(), "n2".into(), "n3".into()], placement: None }),
        ..Policy::new(QualifiedName::new("public", "m"), "time", KeyType::Timestamptz, Span::parse("1d").unwrap())
    }
}

fn snap() -> Snapshot {
    Snapshot {
        partitions: vec![],
        default: None,
        max_key: None,
        grants: Grants::default(),
        remote: Some(RemoteDdl {
            columns: "\"time\" timestamptz NOT NULL, dev_id int".into(),
            indexes: vec!["USING btree (\"time\")".into()],
        }),
    }
}

#[test]
fn shards_are_made_on_their_nodes_before_the_coordinator_attaches_them() {
    let plan = plan_maintain(&distributed(), &snap(), us("2026-11-22T10:30:00Z")).unwrap();
    // Four remote tables, round-robin over three nodes, then the coordinator's step.
    let nodes: Vec<Option<&str>> = plan.steps.iter().map(|s| s.node.as_deref()).collect();
    assert_eq!(nodes, [Some("n1"), Some("n2"), Some("n3"), Some("n1"), None], "{plan}");
    let remote = &plan.steps[1].sql;
    assert!(remote.iter().any(|s| s.starts_with("CREATE TABLE IF NOT EXISTS \"public\".\"m_p20261122_h1\" (\"time\" timestamptz NOT NULL, dev_id int, CONSTRAINT chute_bounds CHECK (\"time\" IS NOT NULL AND \"time\" >= '2026-11-22 00:00:00+00' AND \"time\" < '2026-11-23 00:00:00+00'))")), "{remote:?}");
    assert!(
        remote
            .iter()
            .any(|s| s == "CREATE INDEX IF NOT EXISTS \"m_p20261122_h1_i0\" ON \"public\".\"m_p20261122_h1\" USING btree (\"time\")"),
        "{remote:?}"
    );
    let local = &plan.steps[4].sql;
    let foreign: Vec<&String> = local.iter().filter(|s| s.starts_with("CREATE FOREIGN TABLE")).collect();
    assert_eq!(foreign.len(), 4);
    assert!(
        foreign[3].ends_with("REMAINDER 3) SERVER \"chute_node_n1\" OPTIONS (schema_name 'public', table_name 'm_p20261122_h3')"),
        "{}",
        foreign[3]
    );
    let attach = local.iter().position(|s| s.contains("ATTACH PARTITION")).unwrap();
    assert!(local.iter().rposition(|s| s.starts_with("CREATE FOREIGN TABLE")).unwrap() < attach);
    // --dry-run says where each step runs.
    assert!(plan.to_string().contains("(on data node n2): create public.m_p20261122_h1"), "{plan}");
}

#[test]
fn retention_drops_the_shards_on_their_nodes_after_the_coordinator() {
    let mut p = distributed();
    p.retention = Some(Retention { keep: Span::parse("2d").unwrap(), mode: RetentionMode::Drop, schema: None });
    let mut s = snap();
    let old = p.parent.with_name("m_p20261101");
    s.partitions.push(PartitionInfo {
        name: old.clone(),
        from: us("2026-11-01T00:00:00Z"),
        to: us("2026-11-02T00:00:00Z"),
        detach_pending: false,
    });
    let plan = plan_maintain(&p, &s, us("2026-11-22T10:30:00Z")).unwrap();
    let drop = plan.steps.iter().position(|s| matches!(&s.kind, StepKind::DropPartition { name } if *name == old)).unwrap();
    let remote: Vec<(&str, &Vec<String>)> = plan.steps[drop + 1..drop + 5].iter().map(|s| (s.node.as_deref().unwrap(), &s.sql)).collect();
    assert_eq!(remote[2].0, "n3");
    assert_eq!(remote[2].1, &vec!["DROP TABLE IF EXISTS \"public\".\"m_p20261101_h2\"".to_owned()]);
}

#[test]
fn a_distributed_policy_needs_shards_and_no_default() {
    let mut p = distributed();
    p.hash = None;
    assert!(p.validate().is_err());
    let mut p = distributed();
    p.default_partition = true;
    assert!(p.validate().is_err());
    assert!(distributed().validate().is_ok());
}

#[test]
fn placed_time_partitions_go_round_robin_and_retention_drops_them_on_their_node() {
    let mut p = distributed();
    p.hash = None;
    p.premake = 5;
    p.distribution.as_mut().unwrap().placement = Some(Placement::RoundRobin);
    p.validate().unwrap();
    let plan = plan_maintain(&p, &snap(), us("2026-11-22T10:30:00Z")).unwrap();
    // Each day: its table on a node, then the foreign table attached on the coordinator.
    let placed: Vec<&str> = plan.steps.iter().filter_map(|s| s.node.as_deref()).collect();
    assert_eq!(placed.len(), 6);
    for w in placed.windows(2) {
        assert_ne!(w[0], w[1], "consecutive days on the same node: {plan}");
    }
    assert_eq!(placed[0], placed[3]);
    let local = &plan.steps[1].sql;
    assert!(
        local[0].starts_with("CREATE FOREIGN TABLE \"public\".\"m_p20261122\" (\"time\" timestamptz NOT NULL, dev_id int) SERVER"),
        "{local:?}"
    );
    assert!(local[1].starts_with("ALTER TABLE \"public\".\"m\" ATTACH PARTITION \"public\".\"m_p20261122\""), "{local:?}");
    // Monthly intervals: consecutive months on consecutive nodes too.
    let mut m = p.clone();
    m.interval = Span::parse("1mon").unwrap();
    let plan = plan_maintain(&m, &snap(), us("2026-11-22T10:30:00Z")).unwrap();
    let placed: Vec<&str> = plan.steps.iter().filter_map(|s| s.node.as_deref()).collect();
    for w in placed.windows(2) {
        assert_ne!(w[0], w[1], "{plan}");
    }
    // Retention: the coordinator's partition, then its table on the node that holds it.
    p.retention = Some(Retention { keep: Span::parse("2d").unwrap(), mode: RetentionMode::Drop, schema: None });
    let mut s = snap();
    let from = us("2026-11-01T00:00:00Z");
    let old = p.parent.with_name("m_p20261101");
    s.partitions.push(PartitionInfo { name: old.clone(), from, to: us("2026-11-02T00:00:00Z"), detach_pending: false });
    let plan = plan_maintain(&p, &s, us("2026-11-22T10:30:00Z")).unwrap();
    let drop = plan.steps.iter().position(|s| matches!(&s.kind, StepKind::DropPartition { name } if *name == old)).unwrap();
    let remote = &plan.steps[drop + 1];
    assert_eq!(remote.node.as_deref(), Some(p.distribution.as_ref().unwrap().node_of_partition(&p, "m_p20261101", from)));
    assert_eq!(remote.sql, vec!["DROP TABLE IF EXISTS \"public\".\"m_p20261101\"".to_owned()]);
    // Hash placement is stable and spreads.
    let mut h = p.clone();
    h.distribution.as_mut().unwrap().placement = Some(Placement::Hash);
    let d = h.distribution.clone().unwrap();
    let nodes: std::collections::BTreeSet<&str> = (1..=20).map(|i| d.node_of_partition(&h, &format!("m_p202611{i:02}"), 0)).collect();
    assert_eq!(nodes.len(), 3);
}
