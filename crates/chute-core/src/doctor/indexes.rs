//! Index rules: never used, duplicated, or a prefix of another index.
//!
//! Every index costs each row written to its table one more btree insert; an
//! index nobody reads is pure write cost. These rules never propose dropping
//! an index that enforces something (primary key, unique, exclusion or any
//! other constraint) or the only index that serves a foreign key's columns.

use super::{Evidence, Finding, Severity, human_bytes};
use crate::ident::QualifiedName;

/// What the engine reads about one top-level index (a partitioned index
/// counts its partitions' scans and sizes).
#[derive(Debug, Clone, PartialEq)]
pub struct IndexFacts {
    pub oid: u32,
    pub name: QualifiedName,
    pub table: QualifiedName,
    pub definition: String,
    pub access_method: String,
    /// Per key column (not INCLUDE columns): attribute number, operator
    /// class, collation and options, as one comparable string each.
    pub key_columns: Vec<String>,
    /// INCLUDE columns, in the same form.
    pub include_columns: Vec<String>,
    pub expressions: Option<String>,
    pub predicate: Option<String>,
    pub primary: bool,
    pub unique: bool,
    /// The constraint this index backs (primary key, unique, exclusion, or a
    /// foreign key in another table referencing through it).
    pub constraint: Option<String>,
    /// A foreign key of the table whose columns lead this index.
    pub serves_foreign_key: Option<String>,
    /// Whether it is a partitioned index (then it cannot be dropped CONCURRENTLY).
    pub partitioned: bool,
    /// `idx_scan` since the statistics were reset, summed over partitions.
    pub scans: i64,
    pub bytes: i64,
    /// Rows inserted and updated in the table since the reset (`n_tup_ins + n_tup_upd`).
    pub rows_written: i64,
}

impl IndexFacts {
    /// Enforces something, so it is never proposed for dropping.
    pub fn is_protected(&self) -> bool {
        self.primary || self.unique || self.constraint.is_some()
    }

    fn same_definition(&self, other: &IndexFacts) -> bool {
        self.table == other.table
            && self.access_method == other.access_method
            && self.key_columns == other.key_columns
            && self.include_columns == other.include_columns
            && self.expressions == other.expressions
            && self.predicate == other.predicate
    }

    /// Whether this index's keys are a strict prefix of `other`'s, so a
    /// btree scan on this one can use `other` instead.
    fn is_prefix_of(&self, other: &IndexFacts) -> bool {
        self.table == other.table
            && self.access_method == "btree"
            && other.access_method == "btree"
            && self.expressions.is_none()
            && other.expressions.is_none()
            && self.predicate.is_none()
            && other.predicate.is_none()
            && self.include_columns.is_empty()
            && self.key_columns.len() < other.key_columns.len()
            && other.key_columns.starts_with(&self.key_columns)
    }

    fn drop_sql(&self) -> String {
        if self.partitioned {
            format!("DROP INDEX {};", self.name.quoted())
        } else {
            format!("DROP INDEX CONCURRENTLY {};", self.name.quoted())
        }
    }

    fn cost(&self, stats_since: &str) -> Evidence {
        Evidence::new(
            "pg_relation_size, pg_stat_user_tables",
            format!(
                "{} on disk; {} rows written to {} since {stats_since}, each one more insert into this index",
                human_bytes(self.bytes),
                self.rows_written,
                self.table
            ),
        )
    }
}

/// Findings over every index of the tables looked at. `stats_since` says
/// when the statistics start ("2026-11-01 10:00:00+00" or "the server's
/// start"), for the evidence.
pub fn findings(indexes: &[IndexFacts], stats_since: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    let mut dropped: Vec<u32> = Vec::new();
    // Duplicates: keep the protected one, else the oldest; drop the others.
    for (i, a) in indexes.iter().enumerate() {
        if dropped.contains(&a.oid) {
            continue;
        }
        let twins: Vec<&IndexFacts> = indexes[i + 1..].iter().filter(|b| a.same_definition(b)).collect();
        if twins.is_empty() {
            continue;
        }
        let group: Vec<&IndexFacts> = std::iter::once(a).chain(twins).collect();
        let keep = group.iter().find(|x| x.is_protected()).copied().unwrap_or(a);
        for d in group.iter().filter(|x| x.oid != keep.oid && !x.is_protected()) {
            dropped.push(d.oid);
            out.push(Finding {
                kind: "duplicate_index",
                severity: Severity::Warning,
                object: d.name.to_string(),
                summary: format!("{} duplicates {} (same table, same definition)", d.name, keep.name),
                evidence: vec![Evidence::new("pg_index", format!("{} and {}: {}", d.name, keep.name, d.definition)), d.cost(stats_since)],
                fix: vec![d.drop_sql()],
            });
        }
    }
    // Prefixes: a non-enforcing index whose keys lead another btree index.
    for a in indexes {
        if dropped.contains(&a.oid) || a.is_protected() {
            continue;
        }
        let Some(longer) = indexes.iter().find(|b| b.oid != a.oid && !dropped.contains(&b.oid) && a.is_prefix_of(b)) else {
            continue;
        };
        dropped.push(a.oid);
        out.push(Finding {
            kind: "prefix_index",
            severity: Severity::Warning,
            object: a.name.to_string(),
            summary: format!("{} is a prefix of {}, which serves the same lookups", a.name, longer.name),
            evidence: vec![
                Evidence::new("pg_index", format!("{}: {}", a.name, a.definition)),
                Evidence::new("pg_index", format!("{}: {}", longer.name, longer.definition)),
                a.cost(stats_since),
            ],
            fix: vec![a.drop_sql()],
        });
    }
    // Never scanned, on a table that is written to.
    for a in indexes {
        if dropped.contains(&a.oid) || a.is_protected() || a.serves_foreign_key.is_some() || a.scans > 0 || a.rows_written == 0 {
            continue;
        }
        out.push(Finding {
            kind: "unused_index",
            severity: Severity::Warning,
            object: a.name.to_string(),
            summary: format!("{} has never been scanned since {stats_since}, but every row written to {} updates it", a.name, a.table),
            evidence: vec![
                Evidence::new(
                    "pg_stat_user_indexes",
                    format!(
                        "idx_scan = 0 since {stats_since} (on this server only: each replica keeps its own statistics, check them before dropping)"
                    ),
                ),
                a.cost(stats_since),
            ],
            fix: vec![a.drop_sql()],
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn idx(oid: u32, name: &str, keys: &[&str]) -> IndexFacts {
        IndexFacts {
            oid,
            name: QualifiedName::new("public", name),
            table: QualifiedName::new("public", "t"),
            definition: format!("CREATE INDEX {name} ON t USING btree (...)"),
            access_method: "btree".into(),
            key_columns: keys.iter().map(|k| k.to_string()).collect(),
            include_columns: vec![],
            expressions: None,
            predicate: None,
            primary: false,
            unique: false,
            constraint: None,
            serves_foreign_key: None,
            partitioned: false,
            scans: 5,
            bytes: 8192,
            rows_written: 100,
        }
    }

    #[test]
    fn a_duplicate_of_a_primary_key_is_dropped_never_the_key() {
        let mut pk = idx(2, "t_pkey", &["1"]);
        pk.primary = true;
        pk.unique = true;
        pk.constraint = Some("t_pkey".into());
        let dup = idx(3, "t_id", &["1"]);
        let f = findings(&[pk, dup], "x");
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].kind, "duplicate_index");
        assert_eq!(f[0].fix, vec!["DROP INDEX CONCURRENTLY \"public\".\"t_id\";"]);
    }

    #[test]
    fn two_enforcing_twins_are_left_alone() {
        let mut a = idx(2, "a", &["1"]);
        a.unique = true;
        let mut b = idx(3, "b", &["1"]);
        b.unique = true;
        assert!(findings(&[a, b], "x").is_empty());
    }

    #[test]
    fn prefix_and_unused_are_reported_once_each() {
        let short = idx(2, "short", &["1"]);
        let long = idx(3, "long", &["1", "2"]);
        let mut unused = idx(4, "other", &["3"]);
        unused.scans = 0;
        let f = findings(&[short, long, unused], "x");
        let kinds: Vec<_> = f.iter().map(|f| (f.kind, f.object.as_str())).collect();
        assert_eq!(kinds, vec![("prefix_index", "public.short"), ("unused_index", "public.other")]);
    }

    #[test]
    fn unique_prefix_and_foreign_key_index_are_kept() {
        let mut short = idx(2, "short", &["1"]);
        short.unique = true;
        let long = idx(3, "long", &["1", "2"]);
        let mut fk = idx(4, "fk", &["5"]);
        fk.scans = 0;
        fk.serves_foreign_key = Some("t_ref_fkey".into());
        let mut idle = idx(5, "idle", &["6"]);
        idle.scans = 0;
        idle.rows_written = 0;
        assert!(findings(&[short, long, fk, idle], "x").is_empty());
    }

    #[test]
    fn partitioned_indexes_are_dropped_without_concurrently() {
        let mut p = idx(2, "p", &["1"]);
        p.partitioned = true;
        p.scans = 0;
        assert_eq!(findings(&[p], "x")[0].fix, vec!["DROP INDEX \"public\".\"p\";"]);
    }
}
