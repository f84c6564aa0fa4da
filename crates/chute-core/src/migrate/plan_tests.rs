//! Migration planner tests: catalog states, no database.

use super::*;
use crate::migrate::split::split_leaves;
use crate::migrate::{Facts, ForeignKey, RlsPolicy, RowSecurity, check};
use crate::partman::interval::Span;
use crate::partman::{Grants, KeyType};

pub(super) fn policy() -> Policy {
    Policy { premake: 2, ..Policy::new(QualifiedName::new("public", "orders"), "time", KeyType::Timestamptz, Span::parse("1d").unwrap()) }
}

pub(super) fn facts() -> Facts {
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
        foreign_keys: vec![],
        checks: vec![],
        row_security: RowSecurity::default(),
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
    // Autovacuum is waited out before writers are made to wait.
    assert_eq!(swap.sql[0], "LOCK TABLE \"public\".\"orders\" IN SHARE UPDATE EXCLUSIVE MODE");
    assert!(swap.sql[1].contains("set_config('chute.lock_asked'"), "{swap:?}");
    assert_eq!(swap.sql[2], "LOCK TABLE \"public\".\"orders\" IN ACCESS EXCLUSIVE MODE");
    assert!(swap.sql.last().unwrap().contains("longest_lock_ms = greatest"), "{swap:?}");
    assert!(fresh.steps[3].sql[0].ends_with("IN SHARE UPDATE EXCLUSIVE MODE"), "the range CHECK too: {:?}", fresh.steps[3]);
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
fn foreign_keys_and_row_security_go_to_the_new_parent_and_a_not_valid_key_is_refused() {
    let mut f = facts();
    f.foreign_keys = vec![ForeignKey {
        name: "orders_customer_fk".into(),
        definition: "FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE".into(),
        validated: true,
        referenced: "public.customers".into(),
    }];
    f.row_security = RowSecurity {
        enabled: true,
        forced: true,
        policies: vec![RlsPolicy {
            name: "own rows".into(),
            permissive: false,
            command: "SELECT".into(),
            roles: vec!["public".into(), "Sales".into()],
            using: Some("(owner = CURRENT_USER)".into()),
            check: None,
        }],
    };
    let names = Names::new(&policy().parent).unwrap();
    let plan = plan_swap(&policy(), &f, &names, Progress::default(), true, 10 * DAY).unwrap();
    let at = |want: &str| plan.steps.iter().position(|s| matches!(&s.kind, StepKind::Migrate { phase, .. } if phase == want)).unwrap();
    let new_parent = &plan.steps[at("new-parent")];
    let np = "\"public\".\"orders_chute_new\"";
    let want = [
        format!("ALTER TABLE {np} ENABLE ROW LEVEL SECURITY"),
        format!("ALTER TABLE {np} FORCE ROW LEVEL SECURITY"),
        format!("CREATE POLICY \"own rows\" ON {np} AS RESTRICTIVE FOR SELECT TO PUBLIC, \"Sales\" USING ((owner = CURRENT_USER))"),
        format!(
            "ALTER TABLE {np} ADD CONSTRAINT \"orders_customer_fk\" FOREIGN KEY (customer_id) REFERENCES public.customers(id) ON DELETE CASCADE"
        ),
    ];
    for w in &want {
        assert!(new_parent.sql.contains(w), "{w} missing from {:#?}", new_parent.sql);
    }
    // Added while the new parent has no partition: before the swap attaches one.
    assert!(at("new-parent") < at("swap"));
    assert!(check(&f, "time", true).is_empty());
    f.foreign_keys[0].validated = false;
    let p = check(&f, "time", true);
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].what.contains("orders_customer_fk") && p[0].what.contains("NOT VALID"), "{p:?}");
    assert!(p[0].fix.contains("VALIDATE CONSTRAINT \"orders_customer_fk\""), "{p:?}");
}

#[test]
fn the_inventory_names_every_object_and_what_happens_to_it() {
    let mut f = facts();
    f.foreign_keys = vec![ForeignKey {
        name: "fk1".into(),
        definition: "FOREIGN KEY (c) REFERENCES public.c(id)".into(),
        validated: true,
        referenced: "public.customers".into(),
    }];
    f.checks = vec![("positive".into(), "CHECK (v > 0)".into())];
    f.grants = Grants { owner: "app".into(), current_user: "postgres".into(), acl: vec!["app=arwdDxt/app".into(), "=r/app".into()] };
    f.row_security = RowSecurity {
        enabled: true,
        forced: false,
        policies: vec![RlsPolicy {
            name: "p1".into(),
            permissive: true,
            command: "ALL".into(),
            roles: vec!["public".into()],
            using: None,
            check: None,
        }],
    };
    let names = Names::new(&policy().parent).unwrap();
    let lines = crate::migrate::inventory::lines(&f, &names, &policy(), true);
    let text = lines.join("\n");
    for want in [
        "primary key orders_pkey (id): made on the new parent as (id, time)",
        "index orders_time_idx",
        "check constraint positive",
        "foreign key fk1 (FOREIGN KEY (c) REFERENCES public.c(id)): added to the new parent while it is empty (no scan)",
        "grants (app=arwdDxt/app, =r/app)",
        "row-level security (enabled): the same on the new parent",
        "policy p1 (permissive ALL to public)",
        "keys before the oldest interval: in public.orders_pmin",
    ] {
        assert!(text.contains(want), "{want:?} missing from:\n{text}");
    }
    let bare = crate::migrate::inventory::lines(&facts(), &names, &policy(), false).join("\n");
    assert!(bare.contains("row-level security: off, and no policies") && !bare.contains("foreign key"), "{bare}");
}
