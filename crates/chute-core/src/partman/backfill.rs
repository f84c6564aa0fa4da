//! The backfill path's DDL: a partition that a load creates for itself is
//! made standalone, filled with `COPY … (FREEZE)` in the transaction that
//! created it (rows frozen at once: no hint-bit rewrite, no anti-wraparound
//! vacuum later), and only then attached, which builds the parent's indexes
//! on it in one sorted pass each. Nothing outside that transaction sees the
//! partition before all its rows are in.
//!
//! Pure: the engine runs these statements in the one transaction, around
//! the COPYs.

use super::naming::partition_name;
use super::plan::PlanError;
use super::planner::grant_sql;
use super::policy::Policy;
use super::snapshot::Grants;
use crate::ident::{QualifiedName, dollar_quote, quote_ident, quote_literal};

/// The statements of one backfilled partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackfillLeaf {
    pub name: QualifiedName,
    pub from: i64,
    pub to: i64,
    /// Before the first COPY: the table without indexes, its owner and
    /// grants, and a CHECK of its bounds (each row is checked as it is
    /// copied, so the ATTACH needs no scan).
    pub create: Vec<String>,
    /// After the last COPY and [`BackfillLeaf::index_sql`]: gather its
    /// statistics, attach it (which builds the indexes not made before,
    /// those of constraints), and drop the CHECK (the partition constraint
    /// does its job from then on).
    pub attach: Vec<String>,
}

impl BackfillLeaf {
    /// The parent's indexes built on the filled table before the ATTACH, so
    /// each is one sorted pass that holds no lock on the parent (the ATTACH
    /// finds them and only attaches them). `defs` are what follows `USING`
    /// in `pg_get_indexdef` of each partitioned index that backs no
    /// constraint (those are made by the ATTACH).
    pub fn index_sql(&self, defs: &[String]) -> Vec<String> {
        defs.iter().map(|d| format!("CREATE INDEX ON {} USING {d}", self.name.quoted())).collect()
    }
}

/// Why a table's new partitions cannot be backfilled (the normal path
/// takes them), or `None`.
pub fn refusal(policy: &Policy, has_default: bool) -> Option<&'static str> {
    if policy.hash.is_some() {
        return Some("its partitions are sub-partitioned by hash");
    }
    if policy.distribution.is_some() {
        return Some("its partitions live on data nodes");
    }
    if has_default || policy.default_partition {
        return Some("it has a DEFAULT partition, which an ATTACH must scan");
    }
    None
}

/// The backfill statements for the interval `[from, to)` of `policy`'s table.
pub fn plan_backfill_leaf(policy: &Policy, grants: &Grants, from: i64, to: i64) -> Result<BackfillLeaf, PlanError> {
    let name = policy.parent.with_name(partition_name(policy, from)?);
    let (lo, hi) = (policy.key_type.literal(from)?, policy.key_type.literal(to)?);
    let key = policy.key_sql();
    let unlogged = if policy.unlogged { "UNLOGGED " } else { "" };
    let mut create = vec![format!(
        "CREATE {unlogged}TABLE {} (LIKE {} INCLUDING ALL EXCLUDING INDEXES){}",
        name.quoted(),
        policy.parent.quoted(),
        policy.storage_clause()
    )];
    create.extend(grant_sql(grants, &name));
    create.push(format!(
        "ALTER TABLE {} ADD CONSTRAINT chute_bounds CHECK ({key} IS NOT NULL AND {key} >= {lo} AND {key} < {hi})",
        name.quoted()
    ));
    let attach = vec![
        analyze_sql(&name, std::slice::from_ref(&policy.key)),
        format!("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", policy.parent.quoted(), name.quoted()),
        format!("ALTER TABLE {} DROP CONSTRAINT chute_bounds", name.quoted()),
    ];
    Ok(BackfillLeaf { name, from, to, create, attach })
}

/// The `ANALYZE` of a table filled by a load, before it takes its place:
/// statistics of the partition key (`key_columns`) at once, the rest left
/// to autovacuum, which analyzes the table after the load as it does after
/// any other loader's rows (an `ANALYZE` with a column list leaves the
/// server's count of rows changed since the last analysis as it is, so
/// autoanalyze still comes). Every column when autovacuum is off, for the
/// server or for the table, since nothing would come then. The server
/// chooses as the statement runs (a `DO` block whose dollar quote is a tag
/// the body does not contain). A full `ANALYZE` in the filling transaction
/// did not spare the autoanalyze either (the rows count as changes when
/// they commit, after it), and cost the server about as much CPU as the
/// rows' COPY (issue 34).
pub fn analyze_sql(table: &QualifiedName, key_columns: &[String]) -> String {
    let t = table.quoted();
    if key_columns.is_empty() {
        return format!("ANALYZE {t}");
    }
    let cols: Vec<String> = key_columns.iter().map(|c| quote_ident(c)).collect();
    let key_only = quote_literal(&format!("ANALYZE {t} ({})", cols.join(", ")));
    let all = quote_literal(&format!("ANALYZE {t}"));
    let reloption = format!(
        "(SELECT o.option_value FROM pg_class c, pg_options_to_table(c.reloptions) o WHERE c.oid = {}::regclass AND o.option_name = 'autovacuum_enabled')",
        quote_literal(&t)
    );
    let body = format!(
        " BEGIN IF current_setting('autovacuum')::bool AND coalesce({reloption}, 'on')::bool THEN EXECUTE {key_only}; ELSE EXECUTE {all}; END IF; END "
    );
    format!("DO {}", dollar_quote(&body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::partman::{HashSub, KeyType, Span};

    fn policy() -> Policy {
        Policy { premake: 2, ..Policy::new(QualifiedName::new("m", "Odd\"name"), "time", KeyType::Timestamptz, Span::parse("1h").unwrap()) }
    }

    #[test]
    fn the_leaf_is_made_standalone_without_indexes_and_attached_after() {
        let p = policy();
        // 2021-06-01T00:00:00Z
        let from = 1_622_505_600_000_000;
        let to = from + 3_600_000_000;
        let grants = Grants { owner: "alice".into(), current_user: "bob".into(), acl: vec!["carol=r/alice".into()] };
        let b = plan_backfill_leaf(&p, &grants, from, to).unwrap();
        assert_eq!(b.name, QualifiedName::new("m", partition_name(&p, from).unwrap()));
        assert!(b.name.name.starts_with("Odd\"name_p2021"), "{}", b.name);
        assert!(
            b.create[0]
                .starts_with(&format!("CREATE TABLE {} (LIKE \"m\".\"Odd\"\"name\" INCLUDING ALL EXCLUDING INDEXES)", b.name.quoted())),
            "{}",
            b.create[0]
        );
        assert!(b.create.iter().any(|s| s.contains("OWNER TO \"alice\"")), "{:?}", b.create);
        assert!(b.create.iter().any(|s| s.starts_with("GRANT SELECT ON") && s.ends_with("TO \"carol\"")), "{:?}", b.create);
        let check = b.create.last().unwrap();
        assert!(
            check.contains("CHECK (\"time\" IS NOT NULL AND \"time\" >= '2021-06-01 00:00:00+00' AND \"time\" < '2021-06-01 01:00:00+00')"),
            "{check}"
        );
        assert_eq!(b.attach.len(), 3);
        assert_eq!(b.attach[0], analyze_sql(&b.name, &["time".into()]));
        assert!(b.attach[1].starts_with("ALTER TABLE \"m\".\"Odd\"\"name\" ATTACH PARTITION"), "{}", b.attach[1]);
        assert!(b.attach[1].ends_with("FOR VALUES FROM ('2021-06-01 00:00:00+00') TO ('2021-06-01 01:00:00+00')"), "{}", b.attach[1]);
        assert!(b.attach[2].ends_with("DROP CONSTRAINT chute_bounds"));
        assert_eq!(
            b.index_sql(&["btree (\"time\" DESC)".into()]),
            [format!("CREATE INDEX ON {} USING btree (\"time\" DESC)", b.name.quoted())]
        );
    }

    #[test]
    fn layouts_an_attach_cannot_take_cheaply_are_refused_with_a_reason() {
        let mut p = policy();
        assert_eq!(refusal(&p, false), None);
        assert!(refusal(&p, true).unwrap().contains("DEFAULT"));
        p.hash = Some(HashSub { column: "dev".into(), modulus: 4 });
        assert!(refusal(&p, false).unwrap().contains("hash"));
    }

    #[test]
    fn the_key_is_analyzed_at_once_and_everything_when_autovacuum_is_off() {
        let t = QualifiedName::new("m", "we$chute$ird");
        let sql = analyze_sql(&t, &["ti'me".into(), "dev".into()]);
        // The dollar quote is one the body does not contain.
        assert!(sql.starts_with("DO $chute1$ BEGIN IF current_setting('autovacuum')::bool AND"), "{sql}");
        assert!(sql.ends_with(" END $chute1$"), "{sql}");
        assert!(sql.contains("c.oid = '\"m\".\"we$chute$ird\"'::regclass AND o.option_name = 'autovacuum_enabled'"), "{sql}");
        assert!(
            sql.contains(
                "THEN EXECUTE 'ANALYZE \"m\".\"we$chute$ird\" (\"ti''me\", \"dev\")'; ELSE EXECUTE 'ANALYZE \"m\".\"we$chute$ird\"';"
            ),
            "{sql}"
        );
        assert_eq!(analyze_sql(&t, &[]), "ANALYZE \"m\".\"we$chute$ird\"");
    }
}
