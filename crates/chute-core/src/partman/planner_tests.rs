//! Planner tests: catalog states and clocks, no database.

use jiff::Timestamp;
use proptest::prelude::*;

use super::*;
use crate::ident::IdentError;
use crate::partman::policy::{HashSub, KeyType, Retention};
use crate::partman::snapshot::DefaultInfo;

fn us(s: &str) -> i64 {
    s.parse::<Timestamp>().unwrap().as_microsecond()
}

fn policy(interval: &str) -> Policy {
    Policy {
        max_future: Some(Span::parse("1d").unwrap()),
        ..Policy::new(QualifiedName::new("public", "metrics"), "time", KeyType::Timestamptz, Span::parse(interval).unwrap())
    }
}

fn empty() -> Snapshot {
    Snapshot { partitions: vec![], default: None, max_key: None, grants: Grants::default(), remote: None }
}

/// The snapshot after a plan ran: its created partitions exist.
fn applied(snap: &Snapshot, plan: &Plan) -> Snapshot {
    let mut s = snap.clone();
    for step in &plan.steps {
        match &step.kind {
            StepKind::CreatePartition { name, from, to, .. } => {
                s.partitions.push(PartitionInfo { name: name.clone(), from: *from, to: *to, detach_pending: false })
            }
            StepKind::DetachConcurrently { name } | StepKind::Detach { name } | StepKind::FinalizeDetach { name } => {
                s.partitions.retain(|p| &p.name != name)
            }
            StepKind::CreateDefault { name } => s.default = Some(DefaultInfo { name: name.clone(), row_intervals: vec![] }),
            _ => {}
        }
    }
    s
}

fn created(plan: &Plan) -> Vec<(String, i64, i64)> {
    plan.steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::CreatePartition { name, from, to, .. } => Some((name.name.clone(), *from, *to)),
            _ => None,
        })
        .collect()
}

#[test]
fn hourly_premake_from_the_interval_holding_now() {
    let p = policy("1h");
    let plan = plan_maintain(&p, &empty(), us("2026-11-22T10:30:00Z")).unwrap();
    let c = created(&plan);
    assert_eq!(c.len(), 5, "{plan}");
    assert_eq!(c[0], ("metrics_p20261122_1000".into(), us("2026-11-22T10:00:00Z"), us("2026-11-22T11:00:00Z")));
    assert_eq!(c[4].2, us("2026-11-22T15:00:00Z"));
    // Created standalone, checked, attached: never PARTITION OF on the live parent.
    let sql = plan.steps[0].sql.join(";\n");
    assert!(sql.contains("(LIKE \"public\".\"metrics\" INCLUDING ALL)"), "{sql}");
    assert!(sql.contains("ADD CONSTRAINT chute_bounds CHECK"), "{sql}");
    assert!(sql.contains("ATTACH PARTITION \"public\".\"metrics_p20261122_1000\" FOR VALUES FROM ('2026-11-22 10:00:00+00') TO ('2026-11-22 11:00:00+00')"), "{sql}");
    assert!(!sql.contains("PARTITION OF \"public\".\"metrics\""), "{sql}");
    assert!(plan.steps.iter().all(|s| s.transactional));
}

#[test]
fn maintain_is_idempotent() {
    for interval in ["15min", "1h", "1d", "1w", "1mon", "1y"] {
        let p = policy(interval);
        let now = us("2026-11-22T10:30:00Z");
        let first = plan_maintain(&p, &empty(), now).unwrap();
        assert!(!first.is_empty());
        let again = plan_maintain(&p, &applied(&empty(), &first), now).unwrap();
        assert!(again.is_empty(), "{interval}: second run planned:\n{again}");
    }
}

#[test]
fn daily_and_monthly_names_use_the_utc_start() {
    let d = plan_maintain(&policy("1d"), &empty(), us("2026-11-22T10:30:00Z")).unwrap();
    assert_eq!(created(&d)[0].0, "metrics_p20261122");
    let m = plan_maintain(&policy("1mon"), &empty(), us("2026-11-22T10:30:00Z")).unwrap();
    assert_eq!(
        created(&m).iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["metrics_p202611", "metrics_p202612", "metrics_p202701", "metrics_p202702", "metrics_p202703"]
    );
    let mut berlin = policy("1d");
    berlin.tz = "Europe/Berlin".into();
    let b = plan_maintain(&berlin, &empty(), us("2026-11-22T10:30:00Z")).unwrap();
    assert_eq!(created(&b)[0].0, "metrics_p20261121_2300");
}

#[test]
fn berlin_days_around_both_dst_changes_have_no_gap_or_overlap() {
    let mut p = policy("1d");
    p.tz = "Europe/Berlin".into();
    for (now, long) in [("2026-03-28T12:00:00Z", 23), ("2026-10-24T12:00:00Z", 25)] {
        let plan = plan_maintain(&p, &empty(), us(now)).unwrap();
        let c = created(&plan);
        for w in c.windows(2) {
            assert_eq!(w[0].2, w[1].1, "gap or overlap in {plan}");
        }
        let hours: Vec<i64> = c.iter().map(|(_, f, t)| (t - f) / 3_600_000_000).collect();
        assert_eq!(hours[1], long, "{hours:?}");
        assert!(hours.iter().all(|h| [23, 24, 25].contains(h)));
    }
}

#[test]
fn a_backfill_row_gets_only_its_own_interval_and_a_far_future_row_is_refused() {
    let p = policy("1d");
    let now = us("2026-11-22T10:30:00Z");
    let plan = plan_ensure(&p, &empty(), &[us("2021-03-04T05:06:07Z")]).unwrap();
    assert_eq!(created(&plan), vec![("metrics_p20210304".into(), us("2021-03-04T00:00:00Z"), us("2021-03-05T00:00:00Z"))]);
    let limits = key_limits(&p, None, now).unwrap();
    assert!(check_key(&p, &limits, us("2021-03-04T05:06:07Z")).is_ok());
    let refusal = check_key(&p, &limits, us("2027-11-22T00:00:00Z")).unwrap_err();
    assert!(matches!(refusal, RowRefusal::TooFarAhead { .. }), "{refusal}");
    assert!(check_key(&p, &limits, us("2026-11-23T10:00:00Z")).is_ok(), "within a day ahead is fine");
}

#[test]
fn retention_drops_detaches_and_refuses_old_rows() {
    let mut p = policy("1d");
    p.retention = Some(Retention { keep: Span::parse("7d").unwrap(), mode: RetentionMode::Drop, schema: None });
    let now = us("2026-11-22T10:30:00Z");
    let old = PartitionInfo {
        name: QualifiedName::new("public", "metrics_p20261101"),
        from: us("2026-11-01T00:00:00Z"),
        to: us("2026-11-02T00:00:00Z"),
        detach_pending: false,
    };
    let recent = PartitionInfo {
        name: QualifiedName::new("public", "metrics_p20261120"),
        from: us("2026-11-20T00:00:00Z"),
        to: us("2026-11-21T00:00:00Z"),
        detach_pending: false,
    };
    let mut snap = empty();
    snap.partitions = vec![old.clone(), recent];
    let plan = plan_maintain(&p, &snap, now).unwrap();
    let kinds: Vec<&StepKind> = plan.steps.iter().map(|s| &s.kind).filter(|k| !matches!(k, StepKind::CreatePartition { .. })).collect();
    assert_eq!(kinds, [&StepKind::DetachConcurrently { name: old.name.clone() }, &StepKind::DropPartition { name: old.name.clone() }]);
    let detach = plan.steps.iter().find(|s| matches!(s.kind, StepKind::DetachConcurrently { .. })).unwrap();
    assert!(!detach.transactional, "DETACH CONCURRENTLY cannot run in a transaction");
    let limits = key_limits(&p, None, now).unwrap();
    assert!(matches!(check_key(&p, &limits, us("2026-11-02T00:00:00Z")), Err(RowRefusal::PastRetention { .. })));
    assert!(check_key(&p, &limits, us("2026-11-20T00:00:00Z")).is_ok());

    p.retention = Some(Retention { keep: Span::parse("7d").unwrap(), mode: RetentionMode::Detach, schema: Some("archive".into()) });
    let plan = plan_maintain(&p, &snap, now).unwrap();
    assert!(plan.steps.iter().any(|s| matches!(&s.kind, StepKind::MoveToSchema { schema, .. } if schema == "archive")));
    assert!(!plan.steps.iter().any(|s| matches!(s.kind, StepKind::DropPartition { .. })));
}

#[test]
fn with_a_default_partition_retention_uses_plain_detach() {
    let mut p = policy("1d");
    p.default_partition = true;
    p.retention = Some(Retention { keep: Span::parse("7d").unwrap(), mode: RetentionMode::Drop, schema: None });
    let mut snap = empty();
    snap.default = Some(DefaultInfo { name: QualifiedName::new("public", "metrics_default"), row_intervals: vec![] });
    snap.partitions.push(PartitionInfo {
        name: QualifiedName::new("public", "metrics_p20261101"),
        from: us("2026-11-01T00:00:00Z"),
        to: us("2026-11-02T00:00:00Z"),
        detach_pending: false,
    });
    let plan = plan_maintain(&p, &snap, us("2026-11-22T10:30:00Z")).unwrap();
    let detach = plan.steps.iter().find(|s| matches!(s.kind, StepKind::Detach { .. })).expect("a plain detach");
    assert!(detach.transactional);
    assert!(!plan.steps.iter().any(|s| matches!(s.kind, StepKind::DetachConcurrently { .. })));
}

#[test]
fn an_interrupted_detach_is_finalized_first() {
    let mut p = policy("1d");
    p.retention = Some(Retention { keep: Span::parse("7d").unwrap(), mode: RetentionMode::Drop, schema: None });
    let mut snap = empty();
    let name = QualifiedName::new("public", "metrics_p20261101");
    snap.partitions.push(PartitionInfo {
        name: name.clone(),
        from: us("2026-11-01T00:00:00Z"),
        to: us("2026-11-02T00:00:00Z"),
        detach_pending: true,
    });
    let plan = plan_maintain(&p, &snap, us("2026-11-22T10:30:00Z")).unwrap();
    assert_eq!(plan.steps[0].kind, StepKind::FinalizeDetach { name: name.clone() });
    assert!(plan.steps[0].sql[0].ends_with("FINALIZE"));
    assert_eq!(plan.steps[1].kind, StepKind::DropPartition { name });
}

#[test]
fn rows_in_default_get_partitions_and_are_moved() {
    let mut p = policy("1d");
    p.default_partition = true;
    let mut snap = empty();
    let stray = us("2026-01-05T00:00:00Z");
    snap.default = Some(DefaultInfo { name: QualifiedName::new("public", "metrics_default"), row_intervals: vec![stray] });
    let plan = plan_maintain(&p, &snap, us("2026-11-22T10:30:00Z")).unwrap();
    let step = &plan.steps[0];
    assert!(matches!(step.kind, StepKind::CreatePartition { from, moves_default_rows: true, .. } if from == stray), "{plan}");
    assert!(step.sql.iter().any(|s| s.starts_with("WITH moved AS (DELETE FROM \"public\".\"metrics_default\"")), "{plan}");
}

#[test]
fn range_plus_hash_creates_children_before_attaching() {
    let mut p = policy("1d");
    p.hash = Some(HashSub { column: "dev_id".into(), modulus: 4 });
    p.unlogged = true;
    let plan = plan_maintain(&p, &empty(), us("2026-11-22T10:30:00Z")).unwrap();
    let sql = &plan.steps[0].sql;
    assert!(
        sql[0].starts_with("CREATE TABLE \"public\".\"metrics_p20261122\" (LIKE") && sql[0].ends_with("PARTITION BY HASH (\"dev_id\")"),
        "{sql:?}"
    );
    let children: Vec<&String> = sql.iter().filter(|s| s.contains("FOR VALUES WITH (MODULUS 4")).collect();
    assert_eq!(children.len(), 4);
    assert!(
        children[0].starts_with("CREATE UNLOGGED TABLE \"public\".\"metrics_p20261122_h0\" PARTITION OF \"public\".\"metrics_p20261122\"")
    );
    let attach = sql.iter().position(|s| s.contains("ATTACH PARTITION")).unwrap();
    assert!(sql.iter().position(|s| s.contains("REMAINDER 3")).unwrap() < attach);
}

#[test]
fn integer_keys_premake_after_the_newest_row() {
    let mut p = policy("1d");
    p.key = "id".into();
    p.key_type = KeyType::Int8;
    p.interval = Span::Integer(100_000);
    p.max_future = None;
    p.premake = 2;
    let mut snap = empty();
    snap.max_key = Some(250_000);
    let c = created(&plan_maintain(&p, &snap, 0).unwrap());
    assert_eq!(
        c,
        vec![
            ("metrics_p200000".into(), 200_000, 300_000),
            ("metrics_p300000".into(), 300_000, 400_000),
            ("metrics_p400000".into(), 400_000, 500_000)
        ]
    );
}

#[test]
fn names_over_63_bytes_are_refused_before_any_ddl() {
    let mut p = policy("1h");
    p.parent = QualifiedName::new("public", "a".repeat(50));
    let err = plan_create(&p, &Existing::Partitioned, &empty(), us("2026-11-22T10:30:00Z")).unwrap_err();
    assert!(matches!(err, PlanError::Name(IdentError::TooLong { .. })), "{err}");
    assert!(err.to_string().contains("63 bytes"));
}

#[test]
fn grants_are_copied_with_grant_options() {
    let g = Grants {
        owner: "owner".into(),
        current_user: "admin".into(),
        acl: vec!["owner=arwdDxt/owner".into(), "loader=ar*/owner".into(), "=r/owner".into()],
    };
    let sql = grant_sql(&g, &QualifiedName::new("s", "t"));
    assert_eq!(
        sql,
        [
            "ALTER TABLE \"s\".\"t\" OWNER TO \"owner\"",
            "GRANT INSERT ON \"s\".\"t\" TO \"loader\"",
            "GRANT SELECT ON \"s\".\"t\" TO \"loader\" WITH GRANT OPTION",
            "GRANT SELECT ON \"s\".\"t\" TO PUBLIC",
        ]
    );
}

#[test]
fn start_creates_every_interval_from_there() {
    let mut p = policy("1d");
    p.start = Some(us("2026-11-10T12:00:00Z"));
    p.premake = 1;
    let c = created(&plan_maintain(&p, &empty(), us("2026-11-22T10:30:00Z")).unwrap());
    assert_eq!(c.first().unwrap().1, us("2026-11-10T00:00:00Z"));
    assert_eq!(c.len(), 14);
}

#[test]
fn absurd_plans_are_refused() {
    let mut p = policy("1min");
    p.start = Some(us("1990-01-01T00:00:00Z"));
    assert!(matches!(plan_maintain(&p, &empty(), us("2026-11-22T10:30:00Z")), Err(PlanError::TooMany(_))));
}

const ZONES: &[&str] = &["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "America/Sao_Paulo"];
const INTERVALS: &[&str] = &["15min", "1h", "6h", "1d", "2d", "1w", "1mon", "3mon", "1y"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    /// For random policies and clocks, the planned partitions cover
    /// [start or the interval holding now, now + premake intervals] with no
    /// gap, no overlap and no empty range.
    #[test]
    fn planned_partitions_cover_without_gaps(
        zone_i in 0..ZONES.len(), interval_i in 0..INTERVALS.len(), premake in 0u32..6,
        now in 946_684_800_000_000i64..2_524_608_000_000_000, start_back in proptest::option::of(0i64..40 * 86_400_000_000),
    ) {
        let mut p = policy(INTERVALS[interval_i]);
        p.tz = ZONES[zone_i].into();
        p.premake = premake;
        p.start = start_back.map(|b| now - b);
        let plan = plan_maintain(&p, &empty(), now).unwrap();
        let c = created(&plan);
        prop_assert!(!c.is_empty());
        for (_, f, t) in &c {
            prop_assert!(f < t, "empty range");
        }
        for w in c.windows(2) {
            prop_assert_eq!(w[0].2, w[1].1, "gap or overlap");
        }
        let tz = p.zone().unwrap();
        let first = p.start.unwrap_or(now).min(now);
        prop_assert!(c[0].1 <= first, "does not reach back to the start");
        prop_assert!(c[0].2 > first);
        prop_assert!(c[0].1 <= now && c.iter().any(|(_, f, t)| *f <= now && now < *t), "now is not covered");
        // premake full intervals after the one holding now
        let holding = c.iter().position(|(_, f, t)| *f <= now && now < *t).unwrap();
        prop_assert_eq!(c.len() - 1 - holding, premake as usize);
        // names are distinct and within the limit
        let mut names: Vec<&String> = c.iter().map(|(n, _, _)| n).collect();
        names.sort();
        names.dedup();
        prop_assert_eq!(names.len(), c.len());
        // each boundary is where the policy's floor puts it
        for (_, f, _) in &c {
            prop_assert_eq!(p.interval.floor(*f, &tz).unwrap(), *f);
        }
    }
}

#[test]
fn no_table_name_ends_the_empty_check_body() {
    let sql = empty_check("\"we$chute$ird%\"", "we$chute$ird%");
    let tag = sql[3..].split_whitespace().next().unwrap();
    assert!(sql.ends_with(tag) && sql.matches(tag).count() == 2, "{sql}");
    assert!(sql.contains("USING MESSAGE"), "{sql}");
}

#[test]
fn forgetting_a_policy_quotes_the_names_and_touches_retention_records_only_when_kept() {
    let parent = QualifiedName::new("o'brien", "we'ird");
    let plan = plan_forget(&parent, "maintained:\"o'brien\".\"we'ird\"", false);
    assert_eq!(plan.steps.len(), 1);
    assert!(matches!(&plan.steps[0].kind, StepKind::ForgetConfig { table } if *table == parent));
    assert_eq!(
        plan.steps[0].sql,
        [
            "DELETE FROM chute.partition_config WHERE parent_schema = 'o''brien' AND parent_table = 'we''ird'",
            "DELETE FROM chute.meta WHERE key = 'maintained:\"o''brien\".\"we''ird\"'",
        ]
    );
    let with = plan_forget(&parent, "k", true);
    assert_eq!(with.steps[0].sql[2], "DELETE FROM chute.retention_inflight WHERE parent_schema = 'o''brien' AND parent_table = 'we''ird'");
}
