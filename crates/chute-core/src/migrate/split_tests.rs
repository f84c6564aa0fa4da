//! Split planner tests: the statements each step runs, no database.

use super::*;
use crate::ident::QualifiedName;
use crate::partman::interval::Span;
use crate::partman::{KeyType, StepKind};

const DAY: i64 = 86_400_000_000;

fn policy(table: &str) -> Policy {
    Policy { premake: 2, ..Policy::new(QualifiedName::new("public", table), "time", KeyType::Timestamptz, Span::parse("1d").unwrap()) }
}

fn columns() -> SplitColumns {
    SplitColumns { names: vec!["id".into(), "time".into(), "status".into()], identity_always: false }
}

fn fk() -> ForeignKey {
    ForeignKey {
        name: "orders_customer_fk".into(),
        definition: "FOREIGN KEY (c) REFERENCES public.customers(id)".into(),
        validated: true,
        referenced: "public.customers".into(),
    }
}

fn all_sql(plan: &Plan) -> String {
    plan.steps.iter().flat_map(|s| s.sql.iter().map(String::as_str)).collect::<Vec<_>>().join(";\n")
}

#[test]
fn the_sync_trigger_is_planned_afresh_on_each_call_and_the_setup_ends_with_it() {
    let p = policy("orders");
    let names = Names::new(&p.parent).unwrap();
    let plan = plan_sync_trigger(&names, &["id".into(), "time".into()], &columns());
    let step = &plan.steps[0];
    assert!(step.transactional);
    let function = step.sql.iter().find(|s| s.starts_with("CREATE FUNCTION")).unwrap();
    assert!(function.contains("SET plan_cache_mode = force_custom_plan"), "{function}");
    assert!(function.contains("DELETE FROM \"public\".\"orders_chute_split\" WHERE (\"id\", \"time\") = (OLD.\"id\", OLD.\"time\")"));
    // The DEFAULT partition is the one for older keys after the cutover.
    assert!(step.sql.iter().any(|s| s == "CREATE TABLE \"public\".\"orders_pmin\" PARTITION OF \"public\".\"orders_chute_split\" DEFAULT"));
    assert!(step.sql.iter().any(|s| s.contains("phase = 'copying'") && s.contains("copy_started_at = now()")));
    assert!(step.sql.last().unwrap().contains("pg_locks WHERE pid = pg_backend_pid()"), "the footprint is measured last");
}

#[test]
fn a_table_named_with_the_dollar_quote_tag_gets_another_tag_and_every_name_quoted() {
    let p = policy("m$chute$\"x");
    let names = Names::new(&p.parent).unwrap();
    let leaves = split_leaves(&p, DAY, 3 * DAY).unwrap();
    let mut plan = plan_staging_parent(&p, &names);
    plan.extend(plan_staging_leaves(&p, &names, &leaves, &Grants::default()).unwrap());
    plan.extend(plan_sync_trigger(&names, &["id".into()], &columns()));
    plan.extend(plan_copy_batch(&names, &columns(), 0, 10, false).unwrap());
    let c = Cutover { leaves: &leaves, hi: 3 * DAY, early: Some(&names.early), grants: &Grants::default(), keep_old: false };
    plan.extend(plan_cutover(&p, &names, c).unwrap());
    plan.extend(plan_flatten_step(&p, &names, &leaves[..1], Some((leaves[1].from, leaves[1].to))).unwrap());
    let sql = all_sql(&plan);
    let function = plan.steps.iter().flat_map(|s| &s.sql).find(|s| s.starts_with("CREATE FUNCTION")).unwrap();
    assert!(function.contains("AS $chute1$ BEGIN") && function.ends_with("END $chute1$"), "{function}");
    assert_eq!(function.matches("$chute1$").count(), 2, "{function}");
    // Every generated name appears quoted, never bare.
    let quoted = "\"m$chute$\"\"x";
    for suffix in ["_chute_split\"", "_chute_old\"", "_pmin\"", "_chute_sync\"", "_p19700102\""] {
        assert!(sql.contains(&format!("{quoted}{suffix}")), "{suffix} not quoted in:\n{sql}");
    }
    // Every other mention is the progress row's literal.
    let bare = sql.replace(quoted, "").replace("'m$chute$\"x'", "");
    assert!(!bare.contains("m$chute$"), "a name went in unquoted:\n{sql}");
}

#[test]
fn leaves_are_made_a_batch_at_a_time_without_touching_the_table() {
    let p = policy("orders");
    let names = Names::new(&p.parent).unwrap();
    let leaves = split_leaves(&p, 0, 5 * DAY).unwrap();
    let plan = plan_staging_leaves(&p, &names, &leaves[..3], &Grants::default()).unwrap();
    assert_eq!(plan.steps.len(), 1);
    assert!(plan.steps[0].description.contains("create 3 leaves (orders_p19700101 … orders_p19700103)"), "{plan}");
    let sql = all_sql(&plan);
    assert_eq!(sql.matches("ATTACH PARTITION").count(), 3);
    // The table is only read (LIKE): never altered or locked.
    assert!(!sql.contains("ALTER TABLE \"public\".\"orders\" ") && !sql.contains("LOCK"), "{sql}");
    assert!(sql.contains("CHECK (\"time\" IS NOT NULL AND \"time\" >= '1970-01-01 00:00:00+00' AND \"time\" < '1970-01-02 00:00:00+00')"));
}

#[test]
fn a_copy_batch_counts_only_rows_it_inserted_and_records_its_locks() {
    let names = Names::new(&policy("orders").parent).unwrap();
    let plan = plan_copy_batch(&names, &columns(), 10, 20, false).unwrap();
    let sql = &plan.steps[0].sql;
    assert!(sql[0].contains("ctid >= '(10,0)'::tid AND ctid < '(20,0)'::tid FOR SHARE"), "{sql:?}");
    assert!(sql[0].contains("ON CONFLICT DO NOTHING RETURNING 1") && sql[0].contains("(SELECT count(*) FROM copied)"), "{sql:?}");
    assert!(!sql[0].contains("copy_done"));
    assert!(sql[1].contains("batch_locks = l.n"), "{sql:?}");
    let last = plan_copy_batch(&names, &columns(), 10, 20, true).unwrap();
    assert!(last.steps[0].sql[0].contains("ctid >= '(10,0)'::tid FOR SHARE") && last.steps[0].sql[0].contains("copy_done = true"));
    let count = all_sql(&plan_count_moved(&names));
    assert!(count.contains("rows_total = c.n, rows_moved = c.n") && count.contains("FROM \"public\".\"orders_chute_old\""), "{count}");
}

#[test]
fn foreign_keys_go_on_the_leaves_not_valid_then_validated_then_on_the_staging_parent() {
    let names = Names::new(&policy("orders").parent).unwrap();
    let leaf = names.table.with_name("orders_p19700101");
    let k = fk();
    let add = all_sql(&plan_leaf_foreign_keys(&names, &[(leaf.clone(), &k)]));
    assert!(
        add.contains(
            "ALTER TABLE \"public\".\"orders_p19700101\" ADD CONSTRAINT \"orders_customer_fk\" FOREIGN KEY (c) REFERENCES public.customers(id) NOT VALID"
        ),
        "{add}"
    );
    let validate = all_sql(&plan_validate_foreign_keys(&names, &[(leaf, k.name.clone())]));
    assert!(validate.contains("ALTER TABLE \"public\".\"orders_p19700101\" VALIDATE CONSTRAINT \"orders_customer_fk\""), "{validate}");
    let parent = all_sql(&plan_staging_foreign_keys(&names, &[&k]));
    assert!(parent.contains("ALTER TABLE \"public\".\"orders_chute_split\" ADD CONSTRAINT \"orders_customer_fk\" FOREIGN KEY"), "{parent}");
    assert!(!parent.contains("NOT VALID"), "{parent}");
}

#[test]
fn the_cutover_keeps_older_keys_in_a_minvalue_partition() {
    let p = policy("orders");
    let names = Names::new(&p.parent).unwrap();
    let leaves = split_leaves(&p, 3 * DAY + 5, 10 * DAY).unwrap();
    let grants = Grants::default();
    let c = Cutover { leaves: &leaves, hi: 10 * DAY, early: Some(&names.early), grants: &grants, keep_old: false };
    let plan = plan_cutover(&p, &names, c).unwrap();
    assert!(matches!(&plan.steps[0].kind, StepKind::Migrate { phase, .. } if phase == "cutover"));
    let sql = all_sql(&plan);
    let detach = sql.find("ALTER TABLE \"public\".\"orders_chute_split\" DETACH PARTITION \"public\".\"orders_pmin\"").expect("detached");
    let check =
        sql.find("ADD CONSTRAINT chute_bounds CHECK (\"time\" IS NOT NULL AND \"time\" < '1970-01-04 00:00:00+00')").expect("check");
    let attach = sql
        .find("ALTER TABLE \"public\".\"orders\" ATTACH PARTITION \"public\".\"orders_pmin\" FOR VALUES FROM (MINVALUE) TO ('1970-01-04 00:00:00+00')")
        .expect("attached for the keys before the oldest leaf");
    assert!(detach < check && check < attach, "{sql}");
    assert!(!sql.contains("RENAME"), "{sql}");
    assert!(sql.contains(
        "ATTACH PARTITION \"public\".\"orders_chute_split\" FOR VALUES FROM ('1970-01-04 00:00:00+00') TO ('1970-01-11 00:00:00+00')"
    ));
    // A split set up by an older chute: its DEFAULT partition is renamed.
    let c = Cutover { leaves: &leaves, hi: 10 * DAY, early: Some(&names.legacy_early), grants: &grants, keep_old: false };
    let sql = all_sql(&plan_cutover(&p, &names, c).unwrap());
    assert!(sql.contains("ALTER TABLE \"public\".\"orders_chute_early\" RENAME TO \"orders_pmin\""), "{sql}");
    // None at all (older still), or no rows to split: a new, empty one up to hi.
    let c = Cutover { leaves: &[], hi: 10 * DAY, early: None, grants: &grants, keep_old: true };
    let sql = all_sql(&plan_cutover(&p, &names, c).unwrap());
    assert!(sql.contains("CREATE TABLE \"public\".\"orders_pmin\" (LIKE \"public\".\"orders\" INCLUDING ALL)"), "{sql}");
    assert!(
        sql.contains("FOR VALUES FROM (MINVALUE) TO ('1970-01-11 00:00:00+00')")
            && sql.contains("DROP TABLE \"public\".\"orders_chute_split\"")
    );
    assert!(!sql.contains("DROP TABLE \"public\".\"orders_chute_old\""), "--keep-old: {sql}");
}

#[test]
fn steps_that_make_writers_wait_first_wait_out_maintenance_without_blocking_them() {
    let p = policy("orders");
    let names = Names::new(&p.parent).unwrap();
    let leaves = split_leaves(&p, 0, 3 * DAY).unwrap();
    let grants = Grants::default();
    let quiet = |plan: &Plan| plan.steps[0].sql[0].clone();
    let c = Cutover { leaves: &leaves, hi: 3 * DAY, early: Some(&names.early), grants: &grants, keep_old: false };
    let cutover = plan_cutover(&p, &names, c).unwrap();
    assert_eq!(quiet(&cutover), "LOCK TABLE \"public\".\"orders\", \"public\".\"orders_chute_split\" IN SHARE UPDATE EXCLUSIVE MODE");
    assert_eq!(cutover.steps[0].sql[2], "LOCK TABLE \"public\".\"orders\" IN ACCESS EXCLUSIVE MODE");
    let flatten = plan_flatten_step(&p, &names, &leaves[..1], None).unwrap();
    assert_eq!(quiet(&flatten), "LOCK TABLE \"public\".\"orders\" IN SHARE UPDATE EXCLUSIVE MODE");
    let trigger = plan_sync_trigger(&names, &["id".into()], &columns());
    assert_eq!(quiet(&trigger), "LOCK TABLE \"public\".\"orders_chute_old\" IN SHARE UPDATE EXCLUSIVE MODE");
    let k = fk();
    let leaf = names.table.with_name("orders_p19700101");
    let fks = plan_leaf_foreign_keys(&names, &[(leaf.clone(), &k), (names.early.clone(), &k)]);
    assert_eq!(
        quiet(&fks),
        "LOCK TABLE \"public\".\"orders_p19700101\", \"public\".\"orders_pmin\", public.customers IN SHARE UPDATE EXCLUSIVE MODE"
    );
    assert!(quiet(&plan_staging_foreign_keys(&names, &[&k])).ends_with("public.customers IN SHARE UPDATE EXCLUSIVE MODE"));
    // The lock footprint counts objects, not modes.
    assert!(cutover.steps[0].sql.last().unwrap().contains("SELECT DISTINCT locktype"));
}

#[test]
fn the_flatten_moves_leaves_and_their_checks_go_afterwards_without_the_tables_lock() {
    let p = policy("orders");
    let names = Names::new(&p.parent).unwrap();
    let leaves = split_leaves(&p, 0, 3 * DAY).unwrap();
    let step = all_sql(&plan_flatten_step(&p, &names, &leaves[..2], Some((leaves[2].from, leaves[2].to))).unwrap());
    assert!(!step.contains("DROP CONSTRAINT") && !step.contains("phase = 'done'"), "{step}");
    let last = all_sql(&plan_flatten_step(&p, &names, &leaves[2..], None).unwrap());
    assert!(last.contains("DROP TABLE \"public\".\"orders_chute_split\"") && !last.contains("phase = 'done'"), "{last}");
    let names_of: Vec<QualifiedName> = leaves.iter().map(|l| l.name.clone()).collect();
    let tidy = plan_drop_bounds(&names, &names_of[..2], false);
    let sql = &tidy.steps[0].sql;
    assert_eq!(sql[0], "LOCK TABLE \"public\".\"orders_p19700101\", \"public\".\"orders_p19700102\" IN SHARE UPDATE EXCLUSIVE MODE");
    assert_eq!(sql[1], "ALTER TABLE \"public\".\"orders_p19700101\" DROP CONSTRAINT chute_bounds");
    assert!(!all_sql(&tidy).contains("\"public\".\"orders\" ") && !all_sql(&tidy).contains("phase = 'done'"));
    assert!(all_sql(&plan_drop_bounds(&names, &names_of[2..], true)).contains("phase = 'done'"));
    assert!(all_sql(&plan_drop_bounds(&names, &[], true)).starts_with("UPDATE chute.migrations SET phase = 'done'"));
}
