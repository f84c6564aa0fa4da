//! Index rules: never used, duplicated, or a prefix of another index.
//!
//! Every index costs each row written to its table one more btree insert; an
//! index nobody reads is pure write cost. These rules never propose dropping
//! an index that enforces something (primary key, unique, exclusion or any
//! other constraint) or the only index that serves a foreign key's columns.
//!
//! "Never scanned" is only said of a stated window (`--index-window`, a
//! week by default). The statistics do not say when an index was made, and
//! on a fresh database every index the application will need has no scan
//! yet: so chute records, per index, since when its scan count has been
//! what it is ([`Watch`], kept in `chute.index_watch`), and an index is
//! unused once that record, and the statistics, cover the whole window with
//! no scan. Until then the advice is "not enough history yet".

use serde::Serialize;

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
    /// The table's oid, which a [`Watch`] is kept with.
    pub table_oid: u32,
    /// No scan since this instant (µs since the epoch), as far as chute
    /// has watched ([`judge`]); `None` while it has not watched the index.
    pub unscanned_since: Option<i64>,
}

/// chute's record of one index: its scan count was `scans` at `since` (µs
/// since the epoch) and has not changed since, as far as chute has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watch {
    pub since: i64,
    pub scans: i64,
}

/// An index's record after looking at its scan count `scans` at `now`,
/// with the statistics counting since `stats_start` (the last reset, or
/// the last time the server lost them: a crash or an immediate stop).
/// The record's `since` is the start of the time without a scan.
///
/// - No record yet: watched from now.
/// - The statistics began again after the record: the index existed then
///   and its count started from 0 there.
/// - Any other count than the record's (more scans, or fewer: a partition
///   with scans was dropped, or its counters were reset): scanned, watched
///   again from now.
pub fn judge(record: Option<Watch>, scans: i64, stats_start: i64, now: i64) -> Watch {
    let Some(w) = record else { return Watch { since: now, scans } };
    let base = if stats_start > w.since { Watch { since: stats_start, scans: 0 } } else { w };
    if scans == base.scans { base } else { Watch { since: now, scans } }
}

/// The window index advice needs, and what `judge` made of each index:
/// how many could be judged, how many wait for more history.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IndexHistory {
    /// `--index-window`, as given.
    pub window: String,
    /// When the statistics start (their last reset or loss).
    pub stats_start: String,
    /// Indexes that could be dropped for want of use (no constraint, no
    /// foreign key, a table written to) that chute has not watched go a
    /// whole window without a scan (yet).
    pub waiting: usize,
    /// When the first of those can be judged, if none is scanned before.
    pub first_judged_at: Option<String>,
    /// Why chute cannot keep the record here (a standby, no privilege).
    pub not_recorded: Option<String>,
}

impl IndexHistory {
    /// One line for people: "not enough history yet" while indexes wait.
    pub fn summary(&self) -> String {
        let mut s = if self.waiting == 0 {
            format!("from scans over windows of {} or more", self.window)
        } else {
            format!(
                "not enough history yet for {} index(es): an index is called unused after {} without a scan{}",
                self.waiting,
                self.window,
                self.first_judged_at.as_ref().map(|t| format!(" (the first can be judged at {t})")).unwrap_or_default()
            )
        };
        if let Some(why) = &self.not_recorded {
            s.push_str(&format!("; chute cannot record index scans here: {why}"));
        }
        s
    }
}

/// Whether `a` could be proposed for dropping for want of use.
fn droppable_if_unused(a: &IndexFacts) -> bool {
    !a.is_protected() && a.serves_foreign_key.is_none() && a.rows_written > 0
}

/// The indexes waiting for history at `now` with a window of `window` µs,
/// and the earliest instant one of them can be judged.
pub fn waiting(indexes: &[IndexFacts], window: i64, now: i64) -> (usize, Option<i64>) {
    let mut n = 0;
    let mut first: Option<i64> = None;
    for a in indexes.iter().filter(|a| droppable_if_unused(a)) {
        match a.unscanned_since {
            Some(s) if s <= now.saturating_sub(window) => {}
            Some(s) => {
                n += 1;
                let at = s.saturating_add(window);
                first = Some(first.map_or(at, |f| f.min(at)));
            }
            None => n += 1,
        }
    }
    (n, first)
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

/// When index advice is given: over `window` µs up to `now`, with
/// `window_text` for messages.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    pub micros: i64,
    pub text: &'a str,
    pub now: i64,
}

/// Findings over every index of the tables looked at. `stats_since` says
/// when the statistics start ("2026-11-01 10:00:00+00" or "the server's
/// start"), for the evidence; an index is unused only when it has had no
/// scan for the whole `window`.
pub fn findings(indexes: &[IndexFacts], stats_since: &str, window: Window<'_>) -> Vec<Finding> {
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
    // Not scanned for the whole window, on a table that is written to.
    let judged_before = window.now.saturating_sub(window.micros);
    for a in indexes {
        let Some(since) = a.unscanned_since.filter(|s| *s <= judged_before) else { continue };
        if dropped.contains(&a.oid) || !droppable_if_unused(a) {
            continue;
        }
        let since = instant_text(since);
        out.push(Finding {
            kind: "unused_index",
            severity: Severity::Warning,
            object: a.name.to_string(),
            summary: format!(
                "{} has not been scanned since {since} ({} or more), but every row written to {} updates it",
                a.name, window.text, a.table
            ),
            evidence: vec![
                Evidence::new(
                    "pg_stat_user_indexes, chute.index_watch",
                    format!(
                        "idx_scan = {} at {since} and now (on this server only: each replica keeps its own statistics, check them before dropping)",
                        a.scans
                    ),
                ),
                a.cost(stats_since),
            ],
            fix: vec![a.drop_sql()],
        });
    }
    out
}

/// An instant (µs since the epoch) as `2026-11-27 17:42:00+00`.
pub fn instant_text(micros: i64) -> String {
    match jiff::Timestamp::from_microsecond(micros) {
        Ok(t) => t.to_zoned(jiff::tz::TimeZone::UTC).strftime("%Y-%m-%d %H:%M:%S+00").to_string(),
        Err(_) => micros.to_string(),
    }
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
            table_oid: 1,
            unscanned_since: None,
        }
    }

    const DAY: i64 = 86_400_000_000;
    const NOW: i64 = 1_000 * DAY;
    const WEEK: Window<'static> = Window { micros: 7 * DAY, text: "7d", now: NOW };

    /// An index without a scan since `since`.
    fn quiet(oid: u32, name: &str, keys: &[&str], since: i64) -> IndexFacts {
        IndexFacts { scans: 0, unscanned_since: Some(since), ..idx(oid, name, keys) }
    }

    #[test]
    fn a_duplicate_of_a_primary_key_is_dropped_never_the_key() {
        let mut pk = idx(2, "t_pkey", &["1"]);
        pk.primary = true;
        pk.unique = true;
        pk.constraint = Some("t_pkey".into());
        let dup = idx(3, "t_id", &["1"]);
        let f = findings(&[pk, dup], "x", WEEK);
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
        assert!(findings(&[a, b], "x", WEEK).is_empty());
    }

    #[test]
    fn prefix_and_unused_are_reported_once_each() {
        let short = idx(2, "short", &["1"]);
        let long = idx(3, "long", &["1", "2"]);
        let unused = quiet(4, "other", &["3"], NOW - 8 * DAY);
        let f = findings(&[short, long, unused], "x", WEEK);
        let kinds: Vec<_> = f.iter().map(|f| (f.kind, f.object.as_str())).collect();
        assert_eq!(kinds, vec![("prefix_index", "public.short"), ("unused_index", "public.other")]);
    }

    #[test]
    fn unique_prefix_and_foreign_key_index_are_kept() {
        let mut short = idx(2, "short", &["1"]);
        short.unique = true;
        let long = idx(3, "long", &["1", "2"]);
        let mut fk = quiet(4, "fk", &["5"], NOW - 8 * DAY);
        fk.serves_foreign_key = Some("t_ref_fkey".into());
        let mut idle = quiet(5, "idle", &["6"], NOW - 8 * DAY);
        idle.rows_written = 0;
        assert!(findings(&[short, long, fk, idle], "x", WEEK).is_empty());
    }

    #[test]
    fn partitioned_indexes_are_dropped_without_concurrently() {
        let mut p = quiet(2, "p", &["1"], NOW - 8 * DAY);
        p.partitioned = true;
        assert_eq!(findings(&[p], "x", WEEK)[0].fix, vec!["DROP INDEX \"public\".\"p\";"]);
    }

    #[test]
    fn an_index_is_unused_only_after_a_whole_window_without_a_scan() {
        // Watched for six days: not yet, and it says when it can be judged.
        let young = quiet(2, "young", &["1"], NOW - 6 * DAY);
        assert!(findings(std::slice::from_ref(&young), "x", WEEK).is_empty());
        assert_eq!(waiting(std::slice::from_ref(&young), WEEK.micros, NOW), (1, Some(NOW + DAY)));
        // Never watched (nothing recorded): never called unused.
        let unknown = IndexFacts { scans: 0, ..idx(3, "unknown", &["2"]) };
        assert!(findings(std::slice::from_ref(&unknown), "x", WEEK).is_empty());
        assert_eq!(waiting(&[unknown], WEEK.micros, NOW), (1, None));
        // Eight days without a scan: unused, saying since when.
        let old = quiet(4, "old", &["3"], NOW - 8 * DAY);
        let f = findings(std::slice::from_ref(&old), "x", WEEK);
        assert_eq!(f.len(), 1);
        assert!(f[0].summary.contains(&format!("not been scanned since {} (7d or more)", instant_text(NOW - 8 * DAY))), "{}", f[0].summary);
        assert_eq!(waiting(&[old], WEEK.micros, NOW), (0, None));
    }

    #[test]
    fn the_record_restarts_at_each_scan_and_at_a_statistics_reset() {
        // First seen: watched from now.
        assert_eq!(judge(None, 3, 0, NOW), Watch { since: NOW, scans: 3 });
        let w = Watch { since: NOW - 8 * DAY, scans: 3 };
        // No scan since: kept.
        assert_eq!(judge(Some(w), 3, 0, NOW), w);
        // Scanned since: from now.
        assert_eq!(judge(Some(w), 4, 0, NOW), Watch { since: NOW, scans: 4 });
        // Fewer scans (a scanned partition dropped): from now.
        assert_eq!(judge(Some(w), 1, 0, NOW), Watch { since: NOW, scans: 1 });
        // Statistics reset two days ago, no scan since: quiet from the reset.
        assert_eq!(judge(Some(w), 0, NOW - 2 * DAY, NOW), Watch { since: NOW - 2 * DAY, scans: 0 });
        // Reset, then scanned: from now.
        assert_eq!(judge(Some(w), 2, NOW - 2 * DAY, NOW), Watch { since: NOW, scans: 2 });
        // The statistics started before the record: the record stands.
        assert_eq!(judge(Some(w), 3, NOW - 9 * DAY, NOW), w);
    }
}
