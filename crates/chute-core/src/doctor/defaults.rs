//! Rows in the DEFAULT partition of a partitioned table chute does not
//! manage (one made by pg_partman's `create_parent`, or by hand).
//!
//! Such rows cost every new partition a scan of the DEFAULT (PostgreSQL
//! checks that none of them belongs to it), and a partition whose range they
//! fall in cannot be made at all until they move. chute's own tables get
//! `chute partition maintain`; pg_partman's get its `partition_data_proc`,
//! which makes the partitions and moves the rows; any other table gets the
//! SQL that does the same: per interval that holds rows, a table made like
//! the parent, the rows moved into it, then attached. The interval is taken
//! from the partitions the table has (a calendar span that reproduces each
//! of them, else their common width), and each new range is clipped to the
//! gap between its neighbours, so it never overlaps one.

use jiff::tz::TimeZone;

use super::{Evidence, Finding, Severity};
use crate::ident::{QualifiedName, quote_ident, quote_literal};
use crate::partman::interval::Span;
use crate::partman::policy::KeyType;

/// How new ranges for a RANGE-partitioned table are cut.
#[derive(Debug, Clone, PartialEq)]
pub enum Slots {
    /// A span of the calendar (a day, a week, a month…) in a time zone,
    /// as `chute partition` cuts it.
    Calendar { span: Span, zone: String },
    /// Ranges of `width`, one of them starting at `origin`.
    Fixed { width: i64, origin: i64 },
}

impl Slots {
    /// The range of these slots that holds `k`.
    pub fn around(&self, k: i64) -> Option<(i64, i64)> {
        match self {
            Slots::Calendar { span, zone } => {
                let tz = crate::partman::interval::zone(zone).ok()?;
                let from = span.floor(k, &tz).ok()?;
                Some((from, span.next(from, &tz).ok()?))
            }
            Slots::Fixed { width, origin } => {
                let from = origin.checked_add(k.checked_sub(*origin)?.div_euclid(*width).checked_mul(*width)?)?;
                Some((from, from.checked_add(*width)?))
            }
        }
    }

    /// In words, for the evidence.
    pub fn describe(&self, key_type: KeyType) -> String {
        match self {
            Slots::Calendar { span, zone } => format!("{span} in {zone}"),
            Slots::Fixed { width, .. } if key_type.is_time() => format!("{} s", width / 1_000_000),
            Slots::Fixed { width, .. } => format!("{width}"),
        }
    }
}

/// The calendar spans tried, longest first.
const CALENDAR: &[&str] = &["1y", "6mon", "3mon", "1mon", "1w", "1d"];

/// The slots a table's partitions follow: a calendar span (in UTC or
/// `zone`, the server's time zone, in which pg_partman cuts them) that
/// reproduces every bounded partition, else the most common width, lined
/// up with a partition of that width. `None` without a bounded partition.
pub fn infer_slots(key_type: KeyType, partitions: &[(i64, i64)], zone: &str) -> Option<Slots> {
    let bounded: Vec<(i64, i64)> = partitions.iter().copied().filter(|(a, b)| *a != i64::MIN && *b != i64::MAX && a < b).collect();
    if bounded.is_empty() {
        return None;
    }
    if key_type.is_time() {
        let zones: Vec<&str> = if zone == "UTC" { vec!["UTC"] } else { vec!["UTC", zone] };
        for span in CALENDAR.iter().filter_map(|s| Span::parse(s).ok()) {
            for z in &zones {
                let Ok(tz) = crate::partman::interval::zone(z) else { continue };
                if bounded.iter().all(|(a, b)| span.floor(*a, &tz).ok() == Some(*a) && span.next(*a, &tz).ok() == Some(*b)) {
                    return Some(Slots::Calendar { span, zone: (*z).to_owned() });
                }
            }
        }
    }
    let mut widths: Vec<i64> = bounded.iter().map(|(a, b)| b - a).collect();
    widths.sort_unstable();
    let mut best = (widths[0], 0);
    let mut run = (widths[0], 0);
    for w in widths {
        run = if w == run.0 { (w, run.1 + 1) } else { (w, 1) };
        if run.1 > best.1 {
            best = run;
        }
    }
    let origin = bounded.iter().find(|(a, b)| b - a == best.0).map(|(a, _)| *a)?;
    Some(Slots::Fixed { width: best.0, origin })
}

/// The slots for a table with no bounded partition to learn from: days in
/// UTC for time keys, one range over the rows' keys for integers.
pub fn fallback_slots(key_type: KeyType, min_key: i64, max_key: i64) -> Slots {
    if key_type.is_time() {
        Slots::Calendar { span: Span::parse("1d").expect("a valid span"), zone: "UTC".into() }
    } else {
        Slots::Fixed { width: max_key.saturating_sub(min_key).saturating_add(1).max(1), origin: min_key }
    }
}

/// The range of `slots` around `k`, clipped to the gap between the
/// partitions (sorted, not overlapping) that `k` falls in.
pub fn clipped(slots: &Slots, partitions: &[(i64, i64)], k: i64) -> Option<(i64, i64)> {
    let (mut from, mut to) = slots.around(k)?;
    for (a, b) in partitions {
        if *b <= k {
            from = from.max(*b);
        } else if *a > k {
            to = to.min(*a);
        }
    }
    (from <= k && k < to).then_some((from, to))
}

/// Who keeps the partitions of a table.
#[derive(Debug, Clone, PartialEq)]
pub enum Keeper {
    /// pg_partman, installed in `schema`, knows the table as `parent` (its
    /// `part_config.parent_table`).
    Partman { schema: String, parent: String },
    /// Nobody: partitions were made by hand.
    Hand,
}

/// How the table is partitioned, with what the fix needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Layout {
    /// RANGE on one column of a time or integer type; `ranges` are the new
    /// partitions that take the DEFAULT's rows (key values), `truncated`
    /// when there are more than were read.
    Range { key: String, key_type: KeyType, slots: Slots, ranges: Vec<(i64, i64)>, truncated: bool },
    /// LIST on one column; `values` are the DEFAULT's distinct keys as SQL
    /// literals (`NULL` for a NULL key).
    List { key: String, values: Vec<String>, truncated: bool },
    /// Anything else, with its key as `pg_get_partkeydef` prints it.
    Other { partkey: String },
}

/// A partitioned table whose DEFAULT partition holds rows.
#[derive(Debug, Clone, PartialEq)]
pub struct DefaultRows {
    pub parent: QualifiedName,
    pub default: QualifiedName,
    pub rows: i64,
    /// Rows whose (range) key is NULL: only the DEFAULT can hold those.
    pub null_keys: i64,
    pub keeper: Keeper,
    pub layout: Layout,
    /// Names taken in the parent's schema, for the new partitions' names.
    pub taken: Vec<String>,
}

/// The finding for one table.
pub fn finding(d: &DefaultRows) -> Result<Finding, crate::partman::interval::IntervalError> {
    let (t, def) = (&d.parent, &d.default);
    let mut evidence = vec![Evidence::new("count(*) on the DEFAULT partition", format!("{def}: {} rows", d.rows))];
    let mut summary = format!(
        "{} rows of {t} sit in its DEFAULT partition {def}: every new partition must scan them, and a partition for their range cannot be made until they move",
        d.rows
    );
    if d.null_keys > 0 {
        summary.push_str(&format!(
            "; {} of them have a NULL key, which only the DEFAULT can hold: give them a key or delete them",
            d.null_keys
        ));
    }
    let fix = match (&d.keeper, &d.layout) {
        (Keeper::Partman { schema, parent }, _) => {
            evidence.push(Evidence::new(
                &format!("{schema}.part_config"),
                format!("pg_partman keeps {parent}; partition_data_proc makes the partitions the rows need and moves them"),
            ));
            vec![format!("CALL {}.partition_data_proc({});", quote_ident(schema), quote_literal(parent))]
        }
        (Keeper::Hand, Layout::Range { key, key_type, slots, ranges, truncated }) => {
            evidence.push(Evidence::new(
                "pg_partitioned_table, pg_inherits",
                format!(
                    "partitioned by RANGE ({key}); new partitions of {} (as its partitions are), each clipped to the gap it falls in{}",
                    slots.describe(*key_type),
                    if *truncated {
                        format!("; the first {} ranges (run the doctor again for the rest)", ranges.len())
                    } else {
                        String::new()
                    }
                ),
            ));
            let mut taken = d.taken.clone();
            let mut fix = Vec::new();
            for (from, to) in ranges {
                let name = fresh_name(&t.name, &range_suffix(*key_type, *from, *to)?, &mut taken);
                let (lo, hi) = (key_type.literal(*from)?, key_type.literal(*to)?);
                let q = quote_ident(key);
                let rows = format!("{q} >= {lo} AND {q} < {hi}");
                // IS NOT NULL lets ATTACH prove the CHECK implies the bounds (a
                // CHECK passes a NULL), so it need not scan the new table.
                let check = format!("{q} IS NOT NULL AND {rows}");
                fix.push(move_rows(t, def, &t.with_name(name), (&rows, &check), &format!("FROM ({lo}) TO ({hi})")));
            }
            fix
        }
        (Keeper::Hand, Layout::List { key, values, truncated }) => {
            evidence.push(Evidence::new(
                "pg_partitioned_table, pg_inherits",
                format!(
                    "partitioned by LIST ({key}); the DEFAULT's {}values go to one new partition",
                    if *truncated { format!("first {} ", values.len()) } else { String::new() }
                ),
            ));
            let mut taken = d.taken.clone();
            let name = fresh_name(&t.name, "_moved", &mut taken);
            let q = quote_ident(key);
            let plain: Vec<&str> = values.iter().map(String::as_str).filter(|v| *v != "NULL").collect();
            let mut conditions = Vec::new();
            if !plain.is_empty() {
                conditions.push(format!("{q} IN ({})", plain.join(", ")));
            }
            if plain.len() < values.len() {
                conditions.push(format!("{q} IS NULL"));
            }
            let rows = conditions.join(" OR ");
            vec![move_rows(t, def, &t.with_name(name), (&rows, &rows), &format!("IN ({})", values.join(", ")))]
        }
        (Keeper::Hand, Layout::Other { partkey }) => {
            evidence.push(Evidence::new("pg_partitioned_table", format!("partitioned by {partkey}")));
            vec![format!(
                "-- for each range of keys the rows of {def} hold, in one transaction: CREATE TABLE new (LIKE {} INCLUDING ALL); WITH moved AS (DELETE FROM {} WHERE <the range> RETURNING *) INSERT INTO new SELECT * FROM moved; ALTER TABLE {} ATTACH PARTITION new FOR VALUES <the range>;",
                t.quoted(),
                def.quoted(),
                t.quoted()
            )]
        }
    };
    Ok(Finding { kind: "default_rows", severity: Severity::Warning, object: t.to_string(), summary, evidence, fix })
}

/// One transaction: a table like the parent, the rows (`condition.0`)
/// moved into it, a CHECK (`condition.1`) that spares ATTACH a scan of it,
/// the ATTACH, the CHECK dropped.
fn move_rows(parent: &QualifiedName, default: &QualifiedName, new: &QualifiedName, condition: (&str, &str), bound: &str) -> String {
    let (p, d, n) = (parent.quoted(), default.quoted(), new.quoted());
    let (rows, check) = condition;
    format!(
        "BEGIN; CREATE TABLE {n} (LIKE {p} INCLUDING ALL); \
         WITH moved AS (DELETE FROM {d} WHERE {rows} RETURNING *) INSERT INTO {n} SELECT * FROM moved; \
         ALTER TABLE {n} ADD CONSTRAINT chute_bounds CHECK ({check}); \
         ALTER TABLE {p} ATTACH PARTITION {n} FOR VALUES {bound}; \
         ALTER TABLE {n} DROP CONSTRAINT chute_bounds; COMMIT;"
    )
}

/// `_pYYYYMMDD` (with `_HHMM` when the range does not start at midnight
/// UTC or is shorter than a day) for time keys, `_pN` for integers.
fn range_suffix(key_type: KeyType, from: i64, to: i64) -> Result<String, crate::partman::interval::IntervalError> {
    if !key_type.is_time() {
        return Ok(if from < 0 { format!("_pm{}", from.unsigned_abs()) } else { format!("_p{from}") });
    }
    let day = 86_400_000_000;
    let at = crate::partman::interval::to_timestamp(from)?.to_zoned(TimeZone::UTC);
    Ok(if from.rem_euclid(day) == 0 && to - from >= day {
        at.strftime("_p%Y%m%d").to_string()
    } else {
        at.strftime("_p%Y%m%d_%H%M").to_string()
    })
}

/// `base` + `suffix`, cut to PostgreSQL's 63 bytes, with `_2`, `_3`… until
/// it is not in `taken` (which it then joins).
fn fresh_name(base: &str, suffix: &str, taken: &mut Vec<String>) -> String {
    for n in 1.. {
        let tail = if n == 1 { suffix.to_owned() } else { format!("{suffix}_{n}") };
        let mut head = base.to_owned();
        while head.len() + tail.len() > 63 {
            head.pop();
        }
        let name = format!("{head}{tail}");
        if !taken.contains(&name) {
            taken.push(name.clone());
            return name;
        }
    }
    unreachable!("some suffix is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: i64 = 86_400_000_000;

    fn ts(s: &str) -> i64 {
        s.parse::<jiff::Timestamp>().unwrap().as_microsecond()
    }

    #[test]
    fn the_interval_is_the_one_the_partitions_follow() {
        let days: Vec<(i64, i64)> = (0..5).map(|i| (ts("2026-11-23T00:00:00Z") + i * DAY, ts("2026-11-24T00:00:00Z") + i * DAY)).collect();
        assert_eq!(
            infer_slots(KeyType::Timestamptz, &days, "UTC"),
            Some(Slots::Calendar { span: Span::parse("1d").unwrap(), zone: "UTC".into() })
        );
        let months = [(ts("2026-10-01T00:00:00Z"), ts("2026-11-01T00:00:00Z")), (ts("2026-11-01T00:00:00Z"), ts("2026-12-01T00:00:00Z"))];
        assert_eq!(
            infer_slots(KeyType::Timestamptz, &months, "UTC"),
            Some(Slots::Calendar { span: Span::parse("1mon").unwrap(), zone: "UTC".into() })
        );
        // Months at Berlin midnight (pg_partman cuts them in the server's zone).
        let berlin = [(ts("2026-09-30T22:00:00Z"), ts("2026-10-31T23:00:00Z")), (ts("2026-10-31T23:00:00Z"), ts("2026-11-30T23:00:00Z"))];
        assert_eq!(
            infer_slots(KeyType::Timestamptz, &berlin, "Europe/Berlin"),
            Some(Slots::Calendar { span: Span::parse("1mon").unwrap(), zone: "Europe/Berlin".into() })
        );
        // Six-hour partitions starting at 03:00: their width, lined up with them.
        let odd: Vec<(i64, i64)> =
            (0..3).map(|i| (3 * 3_600_000_000 + i * 6 * 3_600_000_000, 9 * 3_600_000_000 + i * 6 * 3_600_000_000)).collect();
        let slots = infer_slots(KeyType::Timestamptz, &odd, "UTC").unwrap();
        assert_eq!(slots, Slots::Fixed { width: 6 * 3_600_000_000, origin: 3 * 3_600_000_000 });
        assert_eq!(slots.around(-3_600_000_000), Some((-3 * 3_600_000_000, 3 * 3_600_000_000)));
        // Integer ranges of 1000, and none to learn from.
        assert_eq!(
            infer_slots(KeyType::Int8, &[(0, 1000), (1000, 2000), (i64::MIN, 0)], "UTC"),
            Some(Slots::Fixed { width: 1000, origin: 0 })
        );
        assert_eq!(infer_slots(KeyType::Int8, &[(i64::MIN, 0)], "UTC"), None);
    }

    #[test]
    fn a_new_range_never_overlaps_a_partition() {
        // Monthly slots, but partitions of irregular ranges around the row.
        let slots = Slots::Calendar { span: Span::parse("1mon").unwrap(), zone: "UTC".into() };
        let parts = [(ts("2026-10-01T00:00:00Z"), ts("2026-11-10T00:00:00Z")), (ts("2026-11-20T00:00:00Z"), ts("2027-01-01T00:00:00Z"))];
        assert_eq!(clipped(&slots, &parts, ts("2026-11-15T00:00:00Z")), Some((parts[0].1, parts[1].0)));
        assert_eq!(clipped(&slots, &parts, ts("2025-03-15T00:00:00Z")), Some((ts("2025-03-01T00:00:00Z"), ts("2025-04-01T00:00:00Z"))));
        assert_eq!(clipped(&slots, &[(i64::MIN, 0), (10, i64::MAX)], 5).map(|r| r.0), Some(0));
    }

    fn hand_made(layout: Layout) -> DefaultRows {
        DefaultRows {
            parent: QualifiedName::new("public", "readings"),
            default: QualifiedName::new("public", "readings_default"),
            rows: 2,
            null_keys: 0,
            keeper: Keeper::Hand,
            layout,
            taken: vec!["readings_p20251005".into()],
        }
    }

    #[test]
    fn rows_of_a_hand_made_range_table_move_into_new_partitions() {
        let day = Slots::Calendar { span: Span::parse("1d").unwrap(), zone: "UTC".into() };
        let from = ts("2025-10-05T00:00:00Z");
        let f = finding(&hand_made(Layout::Range {
            key: "time".into(),
            key_type: KeyType::Timestamptz,
            slots: day,
            ranges: vec![(from, from + DAY)],
            truncated: false,
        }))
        .unwrap();
        assert_eq!(f.kind, "default_rows");
        assert_eq!(f.object, "public.readings");
        assert_eq!(f.fix.len(), 1);
        let sql = &f.fix[0];
        // The name it would have is taken: the next one.
        assert!(sql.contains("CREATE TABLE \"public\".\"readings_p20251005_2\" (LIKE \"public\".\"readings\" INCLUDING ALL)"), "{sql}");
        assert!(sql.contains("DELETE FROM \"public\".\"readings_default\" WHERE \"time\" >= '2025-10-05 00:00:00+00' AND \"time\" < '2025-10-06 00:00:00+00'"), "{sql}");
        assert!(sql.contains("FOR VALUES FROM ('2025-10-05 00:00:00+00') TO ('2025-10-06 00:00:00+00')"), "{sql}");
        assert!(sql.starts_with("BEGIN;") && sql.ends_with("COMMIT;"), "{sql}");
    }

    #[test]
    fn pg_partman_tables_get_partition_data_proc_and_list_tables_one_partition() {
        let mut d = hand_made(Layout::Other { partkey: "RANGE (a, b)".into() });
        d.keeper = Keeper::Partman { schema: "partman".into(), parent: "public.readings".into() };
        assert_eq!(finding(&d).unwrap().fix, vec!["CALL \"partman\".partition_data_proc('public.readings');"]);
        let f = finding(&hand_made(Layout::List { key: "site".into(), values: vec!["'b''x'".into(), "NULL".into()], truncated: false }))
            .unwrap();
        let sql = &f.fix[0];
        assert!(sql.contains("WHERE \"site\" IN ('b''x') OR \"site\" IS NULL"), "{sql}");
        assert!(sql.contains("FOR VALUES IN ('b''x', NULL)"), "{sql}");
    }

    #[test]
    fn names_fit_63_bytes() {
        let mut taken = Vec::new();
        let long = "x".repeat(70);
        let a = fresh_name(&long, "_p20251005", &mut taken);
        let b = fresh_name(&long, "_p20251005", &mut taken);
        assert!(a.len() <= 63 && b.len() <= 63 && a != b && a.ends_with("_p20251005") && b.ends_with("_p20251005_2"));
    }
}
