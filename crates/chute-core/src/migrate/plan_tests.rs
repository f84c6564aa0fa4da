//! Migration planner tests: catalog states, no database.

use super::*;
use crate::migrate::{Facts, check};
use crate::partman::interval::Span;
use crate::partman::{Grants, KeyType};

fn policy() -> Policy {
    Policy { premake: 2, ..Policy::new(QualifiedName::new("public", "orders"), "time", KeyType::Timestamptz, Span::parse("1d").unwrap()) }
}

fn facts() -> Facts {
    Facts {
        table: QualifiedName::new("public", "orders"),
        relkind: 'r',
        persistence: 'p',
        key_type: Some("timestamp with time zone".into()),
        key_not_null: true,
        primary_key: Some(vec!["id".into()]),
        primary_key_name: Some("orders_pkey".into()),
        unique: vec![],
        plain_indexes: vec![("orders_time_idx".into(), "USING btree (\"time\")".into())],
        referencing_fks: vec![],
        views: vec![],
        matviews: vec![],
        triggers: vec![],
        publications: vec![],
        inheritance: vec![],
        identity_columns: vec![],
        generated_columns: vec![],
        owned_sequences: vec![],
        grants: Grants::default(),
        comment: None,
        replica_identity: 'd',
    }
}

const DAY: i64 = 86_400_000_000;

fn phases(plan: &Plan) -> Vec<String> {
    plan.steps
        .iter()
        .map(|s| match &s.kind {
            StepKind::Migrate { phase, .. } => phase.clone(),
            k => panic!("unexpected step {k:?}"),
        })
        .collect()
}

#[test]
fn a_fresh_run_plans_every_step_and_a_rerun_only_what_is_left() {
    let names = Names::new(&policy().parent).unwrap();
    let hi = 10 * DAY;
    let fresh = plan_swap(&policy(), &facts(), &names, Progress::default(), true, hi).unwrap();
    assert_eq!(phases(&fresh), ["extend-primary-key", "unique-constraint", "new-parent", "range-check", "validate", "swap", "policy"]);
    let swap = &fresh.steps[5];
    assert!(swap.transactional);
    assert_eq!(swap.sql.iter().filter(|s| s.contains("ATTACH PARTITION")).count(), 3, "the old table and 2 premade: {swap:?}");
    assert!(swap.sql.iter().any(|s| s.contains("FOR VALUES FROM (MINVALUE) TO ('1970-01-11 00:00:00+00')")), "{swap:?}");

    // Killed while building the index concurrently, after the new parent: the
    // invalid index goes first; nothing done is done again.
    let progress = Progress { new_parent_exists: true, pk_index: Some(false), pk_constraint: false, range_check: None };
    let rerun = plan_swap(&policy(), &facts(), &names, progress, true, hi).unwrap();
    assert_eq!(
        phases(&rerun),
        ["drop-invalid-index", "extend-primary-key", "unique-constraint", "range-check", "validate", "swap", "policy"]
    );

    let progress = Progress { new_parent_exists: true, pk_index: Some(true), pk_constraint: true, range_check: Some(false) };
    let rerun = plan_swap(&policy(), &facts(), &names, progress, true, hi).unwrap();
    assert_eq!(phases(&rerun), ["validate", "swap", "policy"]);
}

#[test]
fn preconditions_name_their_fix() {
    let f = facts();
    let p = check(&f, "time", false);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].fix.contains("--extend-primary-key"), "{p:?}");
    assert!(check(&f, "time", true).is_empty());
    let mut f = facts();
    f.key_not_null = false;
    f.referencing_fks = vec!["lines_order_fk on lines".into()];
    f.persistence = 'u';
    let p = check(&f, "time", true);
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(p.iter().any(|p| p.fix.contains("SET NOT NULL")), "{p:?}");
}

#[test]
fn upper_bound_leaves_one_whole_interval_and_leaves_cover_up_to_it() {
    let p = policy();
    let now = 5 * DAY + 3_600_000_000;
    assert_eq!(upper_bound(&p, Some(DAY), now).unwrap(), 7 * DAY);
    assert_eq!(upper_bound(&p, Some(8 * DAY), now).unwrap(), 10 * DAY, "rows ahead of the clock move the bound");
    let leaves = split_leaves(&p, DAY + 5, 7 * DAY).unwrap();
    assert_eq!(leaves.len(), 6);
    assert_eq!((leaves[0].from, leaves[5].to), (DAY, 7 * DAY));
    assert_eq!(leaves[0].name.name, "orders_p19700102");
}

#[test]
fn abort_removes_what_exists() {
    let names = Names::new(&policy().parent).unwrap();
    let progress = Progress { new_parent_exists: true, pk_index: Some(true), pk_constraint: true, range_check: Some(true) };
    let plan = plan_abort(&names, progress);
    assert_eq!(plan.steps.len(), 3);
    assert!(plan_abort(&names, Progress::default()).is_empty());
}

#[test]
fn early_rows_get_one_leaf_per_interval_and_the_cutover_refuses_rows_it_did_not_plan_for() {
    let p = policy();
    // Two keys in one day, one a week earlier: two leaves, oldest first.
    let leaves = early_leaves(&p, &[10 * DAY + 5, 10 * DAY + DAY / 2, 3 * DAY + 1]).unwrap();
    assert_eq!(leaves.iter().map(|l| (l.from, l.to)).collect::<Vec<_>>(), vec![(3 * DAY, 4 * DAY), (10 * DAY, 11 * DAY)]);
    let names = Names::new(&p.parent).unwrap();
    let columns = SplitColumns { names: vec!["id".into(), "time".into()], identity_always: false };
    let grants = Grants::default();
    let c = Cutover { leaves: &[], has_early: true, early: &leaves, columns: &columns, grants: &grants, keep_old: false };
    let plan = plan_cutover(&p, &names, c).unwrap();
    let sql = plan.steps[0].sql.join(";\n");
    let moved = sql.find("DELETE FROM \"public\".\"orders_chute_early\"").expect("the early rows are moved");
    let guard = sql.find(EARLY_ROWS_MOVED).expect("the guard");
    let dropped = sql.find("DROP TABLE \"public\".\"orders_chute_early\"").expect("the early partition is dropped");
    assert!(moved < guard && guard < dropped, "{sql}");
    // Without the DEFAULT partition (a split set up by an older chute), none of it.
    let c = Cutover { leaves: &[], has_early: false, early: &[], columns: &columns, grants: &grants, keep_old: false };
    assert!(!plan_cutover(&p, &names, c).unwrap().steps[0].sql.join(";").contains("early"));
}
