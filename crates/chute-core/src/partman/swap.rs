//! Filling a partition that exists already (made ahead by a premake, by
//! pg_partman, or by hand) the way a new one is backfilled: a standalone
//! table with the partition's columns, constraints and storage is filled
//! with `COPY … (FREEZE)` in the transaction that created it, the
//! partition's indexes are built after the rows, and then, in a short
//! locked step at the end of that transaction, the old partition (empty,
//! save rows that writers put there meanwhile, which move across) is
//! detached and dropped and the new table takes its name, its indexes'
//! names, its place in the parent, its owner, grants, policies, triggers
//! and comments.
//!
//! Pure: the engine reads [`SwapFacts`] from the catalog (without locking
//! the partition or its parent, which the locked step alone does) and runs
//! the statements of [`SwapPlan`] in that order.

use super::planner::grant_sql;
use super::snapshot::Grants;
use crate::ident::{QualifiedName, quote_ident, quote_literal};

/// What the catalog says about the partition to replace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapFacts {
    /// The partition.
    pub leaf: QualifiedName,
    /// Its parent (the table it is a partition of, not necessarily the root).
    pub parent: QualifiedName,
    /// The parent's DEFAULT partition: the DETACH and the ATTACH lock it.
    pub default_partition: Option<QualifiedName>,
    /// `pg_get_expr(relpartbound, …)`: `FOR VALUES FROM (…) TO (…)`.
    pub bound: String,
    /// `pg_get_partition_constraintdef`: the CHECK that makes the ATTACH scan-free.
    pub partition_constraint: Option<String>,
    pub unlogged: bool,
    pub tablespace: Option<String>,
    /// `reloptions`, e.g. `fillfactor=90`.
    pub reloptions: Vec<String>,
    pub columns: Vec<SwapColumn>,
    /// Its CHECK constraints (its own and those of its ancestors): name and `pg_get_constraintdef`.
    pub checks: Vec<(String, String)>,
    pub indexes: Vec<SwapIndex>,
    /// Owner, loading role and `relacl` entries.
    pub grants: Grants,
    pub row_security: bool,
    pub force_row_security: bool,
    /// `CREATE POLICY` statements naming the partition.
    pub policies: Vec<String>,
    /// `pg_get_triggerdef` of its own triggers (not those cloned from the parent, which the ATTACH makes).
    pub triggers: Vec<String>,
    pub comment: Option<String>,
    /// The columns of its parent's partition key (see [`super::backfill::analyze_sql`]).
    pub key_columns: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwapColumn {
    pub name: String,
    /// `format_type(atttypid, atttypmod)`.
    pub type_sql: String,
    /// The column's collation when it is not its type's, quoted.
    pub collation: Option<String>,
    pub not_null: bool,
    /// `pg_get_expr(adbin, …)` of its default…
    pub default: Option<String>,
    /// …or of its generation expression (a stored generated column).
    pub generated: Option<String>,
    /// `SET STORAGE` when it differs from the type's.
    pub storage: Option<&'static str>,
    /// `SET COMPRESSION`, when set.
    pub compression: Option<&'static str>,
    /// `SET STATISTICS`, when set.
    pub statistics: Option<i32>,
    pub comment: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SwapIndex {
    pub name: String,
    /// What follows `USING` in `pg_get_indexdef`.
    pub using: String,
    pub unique: bool,
    /// The kind of constraint it backs (`PRIMARY KEY` or `UNIQUE`), which has its name.
    pub constraint: Option<&'static str>,
}

/// The statements of one swap, in the order they run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwapPlan {
    /// The standalone table the rows are copied into.
    pub table: QualifiedName,
    /// Before the first COPY: the table with a CHECK of the partition's bounds.
    pub create: Vec<String>,
    /// After the last COPY: the partition's indexes (under temporary names)
    /// and the table's statistics.
    pub build: Vec<String>,
    /// The locked step's first statement, retried when its lock times out:
    /// the parent, its DEFAULT partition, then the partition.
    pub lock: String,
    /// Moves rows written into the old partition meanwhile.
    pub move_rows: String,
    /// Detach and drop the old partition, take its names and place, restore
    /// what belonged to it.
    pub swap: Vec<String>,
}

/// The swap plan for `facts`; `table` names the standalone table (in the partition's schema).
pub fn plan_swap(facts: &SwapFacts, table: &str) -> SwapPlan {
    let new = facts.leaf.with_name(table);
    let (leaf, parent, nq) = (facts.leaf.quoted(), facts.parent.quoted(), new.quoted());
    let mut defs: Vec<String> = facts.columns.iter().map(column_def).collect();
    defs.extend(facts.checks.iter().map(|(name, def)| format!("CONSTRAINT {} {def}", quote_ident(name))));
    if let Some(c) = &facts.partition_constraint {
        defs.push(format!("CONSTRAINT chute_bounds CHECK ({c})"));
    }
    let mut with = String::new();
    if !facts.reloptions.is_empty() {
        with = format!(" WITH ({})", facts.reloptions.join(", "));
    }
    if let Some(ts) = &facts.tablespace {
        with.push_str(&format!(" TABLESPACE {}", quote_ident(ts)));
    }
    let unlogged = if facts.unlogged { "UNLOGGED " } else { "" };
    let mut create = vec![format!("CREATE {unlogged}TABLE {nq} ({}){with}", defs.join(", "))];
    for c in &facts.columns {
        let col = quote_ident(&c.name);
        if let Some(s) = c.storage {
            create.push(format!("ALTER TABLE {nq} ALTER COLUMN {col} SET STORAGE {s}"));
        }
        if let Some(s) = c.compression {
            create.push(format!("ALTER TABLE {nq} ALTER COLUMN {col} SET COMPRESSION {s}"));
        }
        if let Some(n) = c.statistics {
            create.push(format!("ALTER TABLE {nq} ALTER COLUMN {col} SET STATISTICS {n}"));
        }
    }
    let temp = |i: usize| format!("{table}_i{i}");
    let mut build = Vec::new();
    for (i, ix) in facts.indexes.iter().enumerate() {
        let unique = if ix.unique { "UNIQUE " } else { "" };
        let name = quote_ident(&temp(i));
        build.push(format!("CREATE {unique}INDEX {name} ON {nq} USING {}", ix.using));
        if let Some(kind) = ix.constraint {
            // The ATTACH ties a constraint's index to the parent's only when it backs a constraint too.
            build.push(format!("ALTER TABLE {nq} ADD CONSTRAINT {name} {kind} USING INDEX {name}"));
        }
    }
    build.push(super::backfill::analyze_sql(&new, &facts.key_columns));
    let insertable: Vec<String> = facts.columns.iter().filter(|c| c.generated.is_none()).map(|c| quote_ident(&c.name)).collect();
    let cols = insertable.join(", ");
    let mut swap = vec![
        format!("ALTER TABLE {parent} DETACH PARTITION {leaf}"),
        format!("DROP TABLE {leaf}"),
        format!("ALTER TABLE {nq} RENAME TO {}", quote_ident(&facts.leaf.name)),
    ];
    for (i, ix) in facts.indexes.iter().enumerate() {
        // A constraint's index has the constraint's name: renaming the index renames both.
        swap.push(format!("ALTER INDEX {} RENAME TO {}", facts.leaf.with_name(temp(i)).quoted(), quote_ident(&ix.name)));
    }
    swap.push(format!("ALTER TABLE {parent} ATTACH PARTITION {leaf} {}", facts.bound));
    if facts.partition_constraint.is_some() {
        swap.push(format!("ALTER TABLE {leaf} DROP CONSTRAINT chute_bounds"));
    }
    swap.extend(grant_sql(&facts.grants, &facts.leaf));
    if facts.row_security {
        swap.push(format!("ALTER TABLE {leaf} ENABLE ROW LEVEL SECURITY"));
    }
    if facts.force_row_security {
        swap.push(format!("ALTER TABLE {leaf} FORCE ROW LEVEL SECURITY"));
    }
    swap.extend(facts.policies.iter().cloned());
    swap.extend(facts.triggers.iter().cloned());
    if let Some(c) = &facts.comment {
        swap.push(format!("COMMENT ON TABLE {leaf} IS {}", quote_literal(c)));
    }
    for c in &facts.columns {
        if let Some(text) = &c.comment {
            swap.push(format!("COMMENT ON COLUMN {leaf}.{} IS {}", quote_ident(&c.name), quote_literal(text)));
        }
    }
    SwapPlan {
        table: new.clone(),
        create,
        build,
        // ONLY: a partitioned table's lock would reach every partition.
        lock: format!(
            "LOCK TABLE ONLY {parent}, {}ONLY {leaf} IN ACCESS EXCLUSIVE MODE",
            facts.default_partition.as_ref().map_or(String::new(), |d| format!("ONLY {}, ", d.quoted()))
        ),
        move_rows: format!("INSERT INTO {nq} ({cols}) SELECT {cols} FROM {leaf}"),
        swap,
    }
}

fn column_def(c: &SwapColumn) -> String {
    let mut d = format!("{} {}", quote_ident(&c.name), c.type_sql);
    if let Some(coll) = &c.collation {
        d.push_str(&format!(" COLLATE {coll}"));
    }
    if c.not_null {
        d.push_str(" NOT NULL");
    }
    if let Some(g) = &c.generated {
        d.push_str(&format!(" GENERATED ALWAYS AS ({g}) STORED"));
    } else if let Some(e) = &c.default {
        d.push_str(&format!(" DEFAULT {e}"));
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partman::backfill::analyze_sql;

    fn facts() -> SwapFacts {
        SwapFacts {
            leaf: QualifiedName::new("m", "r_p2021_06_01_00"),
            parent: QualifiedName::new("m", "Odd\"r"),
            default_partition: None,
            bound: "FOR VALUES FROM ('2021-06-01 00:00:00+00') TO ('2021-06-01 01:00:00+00')".into(),
            partition_constraint: Some(
                "(\"time\" IS NOT NULL) AND (\"time\" >= '2021-06-01 00:00:00+00'::timestamp with time zone)".into(),
            ),
            unlogged: false,
            tablespace: None,
            reloptions: vec!["fillfactor=90".into()],
            columns: vec![
                SwapColumn { name: "time".into(), type_sql: "timestamp with time zone".into(), not_null: true, ..Default::default() },
                SwapColumn {
                    name: "name".into(),
                    type_sql: "text".into(),
                    collation: Some("\"C\"".into()),
                    default: Some("'x'::text".into()),
                    storage: Some("MAIN"),
                    comment: Some("it's".into()),
                    ..Default::default()
                },
                SwapColumn { name: "n2".into(), type_sql: "integer".into(), generated: Some("length(name)".into()), ..Default::default() },
            ],
            checks: vec![("pos".into(), "CHECK (n2 >= 0)".into())],
            indexes: vec![
                SwapIndex { name: "r_p_time_idx".into(), using: "btree (\"time\" DESC)".into(), unique: false, constraint: None },
                SwapIndex {
                    name: "r_p_pkey".into(),
                    using: "btree (name, \"time\")".into(),
                    unique: true,
                    constraint: Some("PRIMARY KEY"),
                },
            ],
            grants: Grants { owner: "alice".into(), current_user: "alice".into(), acl: vec!["carol=r/alice".into()] },
            row_security: true,
            force_row_security: false,
            policies: vec!["CREATE POLICY p ON m.r_p2021_06_01_00 USING (true)".into()],
            triggers: vec![],
            comment: Some("hour 0".into()),
            key_columns: vec!["time".into()],
        }
    }

    #[test]
    fn the_new_table_has_the_columns_constraints_and_storage_and_a_check_of_the_bounds() {
        let p = plan_swap(&facts(), "chute_swap_1_ab");
        assert_eq!(p.table, QualifiedName::new("m", "chute_swap_1_ab"));
        let c = &p.create[0];
        assert!(c.starts_with("CREATE TABLE \"m\".\"chute_swap_1_ab\" (\"time\" timestamp with time zone NOT NULL, "), "{c}");
        assert!(c.contains("\"name\" text COLLATE \"C\" DEFAULT 'x'::text"), "{c}");
        assert!(c.contains("\"n2\" integer GENERATED ALWAYS AS (length(name)) STORED"), "{c}");
        assert!(c.contains("CONSTRAINT \"pos\" CHECK (n2 >= 0)"), "{c}");
        assert!(c.contains("CONSTRAINT chute_bounds CHECK ((\"time\" IS NOT NULL) AND"), "{c}");
        assert!(c.ends_with(") WITH (fillfactor=90)"), "{c}");
        assert_eq!(p.create[1], "ALTER TABLE \"m\".\"chute_swap_1_ab\" ALTER COLUMN \"name\" SET STORAGE MAIN");
    }

    #[test]
    fn indexes_are_built_after_the_rows_and_take_the_old_names_in_the_swap() {
        let p = plan_swap(&facts(), "chute_swap_1_ab");
        assert_eq!(p.build[0], "CREATE INDEX \"chute_swap_1_ab_i0\" ON \"m\".\"chute_swap_1_ab\" USING btree (\"time\" DESC)");
        assert_eq!(p.build[1], "CREATE UNIQUE INDEX \"chute_swap_1_ab_i1\" ON \"m\".\"chute_swap_1_ab\" USING btree (name, \"time\")");
        assert_eq!(
            p.build[2],
            "ALTER TABLE \"m\".\"chute_swap_1_ab\" ADD CONSTRAINT \"chute_swap_1_ab_i1\" PRIMARY KEY USING INDEX \"chute_swap_1_ab_i1\""
        );
        assert_eq!(p.build.last().unwrap(), &analyze_sql(&QualifiedName::new("m", "chute_swap_1_ab"), &["time".into()]));
        assert_eq!(p.lock, "LOCK TABLE ONLY \"m\".\"Odd\"\"r\", ONLY \"m\".\"r_p2021_06_01_00\" IN ACCESS EXCLUSIVE MODE");
        assert_eq!(
            p.move_rows,
            "INSERT INTO \"m\".\"chute_swap_1_ab\" (\"time\", \"name\") SELECT \"time\", \"name\" FROM \"m\".\"r_p2021_06_01_00\""
        );
        let s = &p.swap;
        assert_eq!(s[0], "ALTER TABLE \"m\".\"Odd\"\"r\" DETACH PARTITION \"m\".\"r_p2021_06_01_00\"");
        assert_eq!(s[1], "DROP TABLE \"m\".\"r_p2021_06_01_00\"");
        assert_eq!(s[2], "ALTER TABLE \"m\".\"chute_swap_1_ab\" RENAME TO \"r_p2021_06_01_00\"");
        assert_eq!(s[3], "ALTER INDEX \"m\".\"chute_swap_1_ab_i0\" RENAME TO \"r_p_time_idx\"");
        assert_eq!(s[4], "ALTER INDEX \"m\".\"chute_swap_1_ab_i1\" RENAME TO \"r_p_pkey\"");
        let attach = s.iter().position(|x| x.contains("ATTACH PARTITION")).unwrap();
        assert!(s[attach].ends_with("\"m\".\"r_p2021_06_01_00\" FOR VALUES FROM ('2021-06-01 00:00:00+00') TO ('2021-06-01 01:00:00+00')"));
        assert_eq!(s[attach + 1], "ALTER TABLE \"m\".\"r_p2021_06_01_00\" DROP CONSTRAINT chute_bounds");
        let rest = &s[attach + 2..];
        assert!(rest.contains(&"GRANT SELECT ON \"m\".\"r_p2021_06_01_00\" TO \"carol\"".to_owned()), "{rest:?}");
        assert!(rest.contains(&"ALTER TABLE \"m\".\"r_p2021_06_01_00\" ENABLE ROW LEVEL SECURITY".to_owned()), "{rest:?}");
        assert!(rest.contains(&"CREATE POLICY p ON m.r_p2021_06_01_00 USING (true)".to_owned()), "{rest:?}");
        assert!(rest.contains(&"COMMENT ON TABLE \"m\".\"r_p2021_06_01_00\" IS 'hour 0'".to_owned()), "{rest:?}");
        assert!(rest.contains(&"COMMENT ON COLUMN \"m\".\"r_p2021_06_01_00\".\"name\" IS 'it''s'".to_owned()), "{rest:?}");
        assert!(!rest.iter().any(|x| x.contains("OWNER TO")), "the loading role owns it already: {rest:?}");
    }

    #[test]
    fn a_partition_owned_by_another_role_is_given_back_to_it_and_a_default_partition_is_locked_too() {
        let mut f = facts();
        f.default_partition = Some(QualifiedName::new("m", "r_default"));
        assert_eq!(
            plan_swap(&f, "t").lock,
            "LOCK TABLE ONLY \"m\".\"Odd\"\"r\", ONLY \"m\".\"r_default\", ONLY \"m\".\"r_p2021_06_01_00\" IN ACCESS EXCLUSIVE MODE"
        );
        f.grants.current_user = "bob".into();
        let s = plan_swap(&f, "t").swap;
        assert!(s.contains(&"ALTER TABLE \"m\".\"r_p2021_06_01_00\" OWNER TO \"alice\"".to_owned()), "{s:?}");
    }
}
