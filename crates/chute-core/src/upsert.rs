//! Upserts: what a write does with a row whose key is already in the table,
//! and the SQL that does it after the rows are staged.
//!
//! COPY has no `ON CONFLICT`, so a load that upserts COPYs each leaf's batch
//! into a staging table of its session and merges it with one `INSERT …
//! SELECT … ON CONFLICT` (see `chute-engine`'s merge sink). This module is
//! the part of that which needs no server: the setting as it is stored
//! ([`OnConflict`]), the statements ([`MergeSql`]), and how many times a key
//! occurs in a batch ([`key_multiplicity`], [`order_by_key`]), which decides whether the batch
//! merges in one statement or in rounds.
//!
//! Rows apply as if one by one in input order. `DO NOTHING` does that by
//! itself when the staged rows are read in the order they were COPYed (a
//! later duplicate conflicts with the row just inserted). `DO UPDATE` may not
//! touch a row twice in one statement, so a batch whose keys repeat merges in
//! rounds: round *k* takes the *k*-th occurrence of each key, in input order,
//! so every round applies on top of the one before, `--update-if` included.

use crate::ident::quote_ident;

/// What happens to an incoming row whose conflict key is in the table already.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ConflictAction {
    /// The row is refused, as COPY refuses it (a rejected row): no upsert.
    Error,
    /// The row already there stays.
    Nothing,
    /// The row already there takes the incoming row's values.
    Update,
}

impl ConflictAction {
    pub fn name(self) -> &'static str {
        match self {
            ConflictAction::Error => "error",
            ConflictAction::Nothing => "nothing",
            ConflictAction::Update => "update",
        }
    }

    pub fn parse(text: &str) -> Option<ConflictAction> {
        match text.trim().to_ascii_lowercase().as_str() {
            "error" => Some(ConflictAction::Error),
            "nothing" => Some(ConflictAction::Nothing),
            "update" => Some(ConflictAction::Update),
            _ => None,
        }
    }
}

impl std::fmt::Display for ConflictAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// An upsert as a load asks for it, or as a table keeps it
/// (`chute.partition_config.on_conflict`, JSON).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OnConflict {
    pub action: ConflictAction,
    /// The columns whose values identify a row (default: the primary key,
    /// or the table's one unique index).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<Vec<String>>,
    /// `Update`: the columns overwritten (default: every loaded column not in the key).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_columns: Option<Vec<String>>,
    /// `Update`: a row is overwritten only where this SQL condition holds
    /// (`t` is the row in the table, `excluded` the incoming one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub update_if: Option<String>,
    /// A table's setting: a `chute serve` request may choose another action
    /// for its own rows (`on_conflict=…`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_request: bool,
}

impl OnConflict {
    pub fn new(action: ConflictAction) -> OnConflict {
        OnConflict { action, key: None, update_columns: None, update_if: None, per_request: false }
    }

    /// The setting in the words of the command line (`update on (a, b) if …`).
    pub fn describe(&self) -> String {
        let mut s = self.action.name().to_owned();
        if let Some(k) = &self.key {
            s.push_str(&format!(" on ({})", k.join(", ")));
        }
        if let Some(c) = &self.update_columns {
            s.push_str(&format!(" set ({})", c.join(", ")));
        }
        if let Some(w) = &self.update_if {
            s.push_str(&format!(" if {w}"));
        }
        s
    }
}

/// The columns of one merge statement, quoted, and what the merge does.
#[derive(Debug, Clone)]
pub struct MergeSql {
    pub action: ConflictAction,
    /// The staging table, qualified and quoted (`pg_temp."chute_stage_0"`).
    pub stage: String,
    /// The loaded columns, in COPY order.
    pub columns: Vec<String>,
    pub key: Vec<String>,
    /// `Update`: each overwritten column, and how a new value is told from
    /// the one in the table.
    pub update: Vec<(String, Compare)>,
    pub update_if: Option<String>,
    /// The key's unique index is `NULLS NOT DISTINCT` (PostgreSQL 15): keys
    /// with a NULL conflict like any other. Otherwise they never conflict.
    pub nulls_conflict: bool,
    /// The key's types are byte-canonical (integers, timestamps, text under
    /// a deterministic collation, …): their `=` is the unique index's
    /// equality, so an anti-join finds exactly the rows that conflict.
    pub key_exact: bool,
}

/// Where the rows of one merge statement come from.
#[derive(Debug, Clone, Copy)]
pub enum Source {
    /// Every staged row, in the order it was COPYed.
    Stage,
    /// The rows of round `$1` of the staged rows: the `$1`-th occurrence of
    /// each key, in the order they were COPYed (the staging table is filled
    /// in order; see the module's doc); every row whose key has a NULL is
    /// in round 1.
    StageRound,
}

impl MergeSql {
    /// A name for the round number that no loaded column has.
    fn round_column(&self) -> String {
        let mut name = "chute_round".to_owned();
        while self.columns.iter().any(|c| *c == quote_ident(&name)) {
            name.push('_');
        }
        quote_ident(&name)
    }

    /// One statement that merges the rows of `source` into `target` (a
    /// leaf, or a parent that routes: `leaf` false) and returns one row:
    /// rows read (round sources; 0 for [`Source::Stage`], whose count the
    /// COPY gave), rows inserted, rows updated (int8 each). Rows read and
    /// neither inserted nor updated were left unchanged.
    pub fn statement(&self, target: &str, leaf: bool, source: Source) -> String {
        let cols = self.columns.join(", ");
        let keys = self.key.join(", ");
        let (src, src_sql, counted) = self.source(source);
        let insert = format!("INSERT INTO {target} AS t ({cols}) SELECT {cols} FROM {src} s ON CONFLICT ({keys}) {}", self.action_sql());
        match (self.action, leaf) {
            (ConflictAction::Update, true) => format!(
                "WITH {src_sql}chute_m AS ({insert} RETURNING t.xmax = 0 AS chute_new) \
                 SELECT {counted}::int8, count(*) FILTER (WHERE chute_new)::int8, count(*) FILTER (WHERE NOT chute_new)::int8 FROM chute_m"
            ),
            // A partitioned table does not return system columns: the rows
            // whose key is there already are counted first, in the
            // statement's snapshot (exact but for writers of the same keys
            // outside this load at the same moment).
            (ConflictAction::Update, false) => {
                let matches = self.key_same("o", "s");
                format!(
                    "WITH {src_sql}chute_old AS (SELECT count(*) AS n FROM {src} s WHERE EXISTS (SELECT 1 FROM {target} o WHERE {matches})), \
                     chute_m AS ({insert} RETURNING 1) \
                     SELECT {counted}::int8, ((SELECT count(*) FROM {src}) - (SELECT n FROM chute_old))::int8, \
                            (count(*) - ((SELECT count(*) FROM {src}) - (SELECT n FROM chute_old)))::int8 FROM chute_m"
                )
            }
            _ => format!("WITH {src_sql}chute_m AS ({insert} RETURNING 1) SELECT {counted}::int8, count(*)::int8, 0::int8 FROM chute_m"),
        }
    }

    /// `nothing` only: one statement that inserts the rows of `source`
    /// whose key `target` does not hold yet, without `ON CONFLICT`, and
    /// returns the row [`MergeSql::statement`] returns. `ON CONFLICT` makes
    /// each inserted row a speculative insertion (an extra lock and WAL
    /// record per row); an anti-join probing the same unique index took
    /// 0.7x the time on PostgreSQL 15 (1 M staged rows, 30% present). A writer outside
    /// the load that inserts one of these keys between the probe and the
    /// insert makes it fail with a unique violation (23505): the caller
    /// rolls back to a savepoint and runs [`MergeSql::statement`]. `None`
    /// but for `nothing` on a `key_exact` key. Keys with a NULL never
    /// match, as they never conflict.
    pub fn insert_new(&self, target: &str, source: Source) -> Option<String> {
        if self.action != ConflictAction::Nothing || !self.key_exact {
            return None;
        }
        let cols = self.columns.join(", ");
        let (src, src_sql, counted) = self.source(source);
        let matches = self.key_equal("o", "s");
        Some(format!(
            "WITH {src_sql}chute_m AS (INSERT INTO {target} AS t ({cols}) SELECT {cols} FROM {src} s \
             WHERE NOT EXISTS (SELECT 1 FROM {target} o WHERE {matches}) RETURNING 1) \
             SELECT {counted}::int8, count(*)::int8, 0::int8 FROM chute_m"
        ))
    }

    /// SQL true for a row whose key conflicts with no row: a key with a
    /// NULL, under a unique index's default NULLS DISTINCT.
    fn never_conflicts(&self) -> String {
        match self.nulls_conflict {
            true => "false".to_owned(),
            false => self.key.iter().map(|k| format!("{k} IS NULL")).collect::<Vec<_>>().join(" OR "),
        }
    }

    /// `a.k1 = b.k1 AND …` over the key's columns.
    fn key_equal(&self, a: &str, b: &str) -> String {
        self.key.iter().map(|k| format!("{a}.{k} = {b}.{k}")).collect::<Vec<_>>().join(" AND ")
    }

    /// Whether two rows' keys conflict: [`MergeSql::key_equal`], NULLs equal
    /// under a `NULLS NOT DISTINCT` index.
    fn key_same(&self, a: &str, b: &str) -> String {
        if !self.nulls_conflict {
            return self.key_equal(a, b);
        }
        self.key.iter().map(|k| format!("{a}.{k} IS NOT DISTINCT FROM {b}.{k}")).collect::<Vec<_>>().join(" AND ")
    }

    /// The FROM item of a merge, the WITH item that makes it (or nothing),
    /// and the SQL that counts the rows it read.
    fn source(&self, source: Source) -> (String, String, String) {
        let cols = self.columns.join(", ");
        let keys = self.key.join(", ");
        let round = self.round_column();
        // All rows whose key conflicts with nothing are in the first round.
        let any_null = self.never_conflicts();
        match source {
            Source::Stage => (self.stage.clone(), String::new(), "0::int8".to_owned()),
            Source::StageRound => (
                "chute_src".to_owned(),
                format!(
                    "chute_src AS MATERIALIZED (SELECT {cols} FROM (SELECT {cols}, CASE WHEN {any_null} THEN 1 ELSE row_number() OVER (PARTITION BY {keys} ORDER BY ctid) END AS {round} FROM {}) g WHERE {round} = $1), ",
                    self.stage
                ),
                "(SELECT count(*) FROM chute_src)".to_owned(),
            ),
        }
    }

    /// One statement that leaves `leaf` (a table filled by one COPY session,
    /// so its rows' `ctid` order is their input order) with one row per key,
    /// as if its rows had been merged one at a time: the first row of each
    /// key stays, with `update` its overwritten columns taken from the key's
    /// last row; the other rows of the key are deleted. Keys with a NULL
    /// never conflict and are left alone (but under a `NULLS NOT DISTINCT`
    /// index). Returns the rows deleted and how
    /// many of them would have changed the row (their overwritten values
    /// differ from the key's row before them), int8 each. `None` with an
    /// `--update-if`: whether a row applies depends on the row before it,
    /// which only a merge round by round decides.
    pub fn dedupe(&self, leaf: &str) -> Option<String> {
        if !self.dedupes() {
            return None;
        }
        let keys = self.key.join(", ");
        let conflicting = format!("NOT ({})", self.never_conflicts());
        let on = |a: &str, b: &str| self.key_same(a, b);
        let update = if self.action == ConflictAction::Update { self.update.as_slice() } else { &[] };
        let dups = format!(
            "chute_d AS MATERIALIZED (SELECT {keys}, min(ctid) AS chute_keep, max(ctid) AS chute_last FROM {leaf} \
             WHERE {conflicting} GROUP BY {keys} HAVING count(*) > 1)"
        );
        let deleted =
            format!("chute_x AS (DELETE FROM {leaf} a USING chute_d d WHERE {} AND a.ctid <> d.chute_keep RETURNING 1)", on("a", "d"));
        if update.is_empty() {
            return Some(format!("WITH {dups}, {deleted} SELECT count(*)::int8, 0::int8 FROM chute_x"));
        }
        let set = update.iter().map(|(c, _)| format!("{c} = l.{c}")).collect::<Vec<_>>().join(", ");
        let differs = update.iter().map(|(c, eq)| distinct(c, &format!("lag({c}) OVER w"), *eq)).collect::<Vec<_>>().join(" OR ");
        let a_cols = self.key.iter().map(|k| format!("a.{k}")).collect::<Vec<_>>().join(", ");
        let a_update = update.iter().map(|(c, _)| format!("a.{c}")).collect::<Vec<_>>().join(", ");
        Some(format!(
            "WITH {dups}, \
             chute_c AS (SELECT count(*) FILTER (WHERE chute_n > 1 AND chute_differs) AS n FROM \
               (SELECT row_number() OVER w AS chute_n, ({differs}) AS chute_differs \
                FROM (SELECT {a_cols}, {a_update}, a.ctid AS chute_id FROM {leaf} a JOIN chute_d d ON {}) a \
                WINDOW w AS (PARTITION BY {keys} ORDER BY chute_id)) r), \
             chute_u AS (UPDATE {leaf} t SET {set} FROM chute_d d JOIN {leaf} l ON l.ctid = d.chute_last WHERE t.ctid = d.chute_keep RETURNING 1), \
             {deleted} \
             SELECT (SELECT count(*) FROM chute_x)::int8, (SELECT n FROM chute_c)::int8 FROM (SELECT count(*) FROM chute_u) u",
            on("a", "d")
        ))
    }

    /// Whether [`MergeSql::dedupe`] can resolve repeated keys (all but `update` with `--update-if`).
    pub fn dedupes(&self) -> bool {
        !(self.update_if.is_some() && self.action == ConflictAction::Update)
    }

    /// `DO NOTHING`, or `DO UPDATE SET … WHERE …`: an update only where the
    /// condition holds and some overwritten value differs (a row that would
    /// not change is left alone, and counted unchanged).
    fn action_sql(&self) -> String {
        if self.action != ConflictAction::Update || self.update.is_empty() {
            return "DO NOTHING".to_owned();
        }
        let set = self.update.iter().map(|(c, _)| format!("{c} = excluded.{c}")).collect::<Vec<_>>().join(", ");
        let differs =
            self.update.iter().map(|(c, eq)| distinct(&format!("t.{c}"), &format!("excluded.{c}"), *eq)).collect::<Vec<_>>().join(" OR ");
        match &self.update_if {
            // On lines of their own: a `--` comment in the condition ends with its line.
            Some(cond) => format!("DO UPDATE SET {set} WHERE (\n{cond}\n) AND ({differs})"),
            None => format!("DO UPDATE SET {set} WHERE {differs}"),
        }
    }
}

/// How an update tells a column's new value from the one in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compare {
    /// The type's own equality.
    Eq,
    /// As text: the type has no equality operator (json, point, …).
    Text,
    /// By the bits of the binary form (`float8send`, `float4send`): for
    /// floats, whose `=` holds -0 equal to +0 and every NaN equal to every
    /// other, so that an update from one to the other would be lost.
    Bits(&'static str),
}

/// `a IS DISTINCT FROM b`, compared as `cmp` says.
fn distinct(a: &str, b: &str, cmp: Compare) -> String {
    match cmp {
        Compare::Eq => format!("{a} IS DISTINCT FROM {b}"),
        Compare::Text => format!("({a})::text IS DISTINCT FROM ({b})::text"),
        Compare::Bits(send) => format!("{send}({a}) IS DISTINCT FROM {send}({b})"),
    }
}

/// The most rows among `rows` (binary COPY rows: a field count, then each
/// field's length and bytes) that share one value of the fields at
/// `key_fields`: 1 when every key occurs once. Keys are compared byte for
/// byte (NULL equal to NULL), which is the server's equality for the types
/// whose binary form is canonical (integers, timestamps, dates, uuid, text
/// under a deterministic collation, …). `None` when a row is malformed.
pub fn key_multiplicity(rows: &[&[u8]], key_fields: &[usize]) -> Option<u32> {
    order_by_key(rows, key_fields).map(|(_, most)| most)
}

/// The order in which to stage `rows` so that every session merging into
/// a leaf takes the row locks of its keys in one global order (the key's
/// bytes), which is what keeps concurrent upserts of overlapping keys from
/// deadlocking; rows of one key keep their input order (the sort is
/// stable). Also returns [`key_multiplicity`]'s answer, read off the runs
/// of equal keys. `None` when a row is malformed.
pub fn order_by_key(rows: &[&[u8]], key_fields: &[usize]) -> Option<(Vec<usize>, u32)> {
    let mut ranges = Vec::new();
    let mut keyed = Vec::with_capacity(rows.len());
    for (i, row) in rows.iter().enumerate() {
        keyed.push((key_of(row, key_fields, &mut ranges)?, i));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    let mut most = u32::from(!rows.is_empty());
    let mut run = 1u32;
    for w in keyed.windows(2) {
        if w[0].0 == w[1].0 {
            run += 1;
            most = most.max(run);
        } else {
            run = 1;
        }
    }
    Some((keyed.into_iter().map(|(_, i)| i).collect(), most))
}

/// The key fields of a row, as (length or -1, bytes) in key order.
fn key_of<'r>(row: &'r [u8], key_fields: &[usize], ranges: &mut Vec<Option<(usize, usize)>>) -> Option<Vec<Option<&'r [u8]>>> {
    crate::rowenc::field_ranges(row, ranges)?;
    key_fields.iter().map(|&f| ranges.get(f).copied().map(|r| r.map(|(s, l)| &row[s..s + l]))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fields: &[Option<&[u8]>]) -> Vec<u8> {
        let mut r = (fields.len() as i16).to_be_bytes().to_vec();
        for f in fields {
            match f {
                Some(v) => {
                    r.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    r.extend_from_slice(v);
                }
                None => r.extend_from_slice(&(-1i32).to_be_bytes()),
            }
        }
        r
    }

    #[test]
    fn multiplicity_counts_byte_equal_keys_nulls_included() {
        let rows = [
            row(&[Some(b"a"), Some(b"1"), Some(b"x")]),
            row(&[Some(b"a"), Some(b"2"), Some(b"x")]),
            row(&[Some(b"a"), Some(b"1"), Some(b"y")]),
            row(&[None, Some(b"1"), Some(b"y")]),
            row(&[None, Some(b"1"), Some(b"z")]),
            row(&[Some(b"a"), Some(b"1"), Some(b"z")]),
        ];
        let refs: Vec<&[u8]> = rows.iter().map(Vec::as_slice).collect();
        // Key (0, 1): ("a","1") three times.
        assert_eq!(key_multiplicity(&refs, &[0, 1]), Some(3));
        // Key (1, 2): every pair once but ("1","y") twice (NULL is not a key field here).
        assert_eq!(key_multiplicity(&refs, &[1, 2]), Some(2));
        // Key (2, 0): (x, a) twice; (y, NULL) and (z, NULL) differ from (y, a) and (z, a).
        assert_eq!(key_multiplicity(&refs, &[2, 0]), Some(2));
        assert_eq!(key_multiplicity(&refs[2..], &[2, 0]), Some(1));
        assert_eq!(key_multiplicity(&[], &[0]), Some(0));
        assert_eq!(key_multiplicity(&[&[0, 1, 0][..]], &[0]), None, "a malformed row");
        // A length that differs is a different key even where the bytes start alike.
        let (a, b) = (row(&[Some(b"ab")]), row(&[Some(b"a")]));
        assert_eq!(key_multiplicity(&[&a, &b], &[0]), Some(1));
        // Sorted by key, rows of one key in input order.
        let (order, most) = order_by_key(&refs, &[0, 1]).unwrap();
        assert_eq!(most, 3);
        assert_eq!(order, vec![3, 4, 0, 2, 5, 1], "NULL first, then (a,1) rows in input order, then (a,2)");
    }

    fn sql(action: ConflictAction, update_if: Option<&str>) -> MergeSql {
        MergeSql {
            action,
            stage: "pg_temp.\"chute_stage_0\"".into(),
            columns: vec!["\"time\"".into(), "\"dev\"".into(), "\"v\"".into(), "\"doc\"".into()],
            key: vec!["\"dev\"".into(), "\"time\"".into()],
            update: vec![("\"v\"".into(), Compare::Eq), ("\"doc\"".into(), Compare::Text)],
            update_if: update_if.map(str::to_owned),
            nulls_conflict: false,
            key_exact: true,
        }
    }

    #[test]
    fn statements_name_every_column_and_keep_the_condition_on_its_own_lines() {
        let s = sql(ConflictAction::Update, Some("excluded.v > t.v -- newest")).statement("\"m_1\"", true, Source::Stage);
        assert!(s.contains("INSERT INTO \"m_1\" AS t (\"time\", \"dev\", \"v\", \"doc\") SELECT \"time\", \"dev\", \"v\", \"doc\" FROM pg_temp.\"chute_stage_0\" s ON CONFLICT (\"dev\", \"time\") DO UPDATE SET \"v\" = excluded.\"v\", \"doc\" = excluded.\"doc\" WHERE (\nexcluded.v > t.v -- newest\n) AND (t.\"v\" IS DISTINCT FROM excluded.\"v\" OR (t.\"doc\")::text IS DISTINCT FROM (excluded.\"doc\")::text)"), "{s}");
        assert!(s.contains("RETURNING t.xmax = 0"), "{s}");
        let p = sql(ConflictAction::Update, None).statement("\"m\"", false, Source::StageRound);
        assert!(!p.contains("xmax"), "a parent returns no system column: {p}");
        assert!(p.contains("row_number() OVER (PARTITION BY \"dev\", \"time\" ORDER BY ctid) END AS \"chute_round\""), "{p}");
        assert!(p.contains("o.\"dev\" = s.\"dev\" AND o.\"time\" = s.\"time\""), "{p}");
        let n = sql(ConflictAction::Nothing, None).statement("\"m_1\"", true, Source::StageRound);
        assert!(n.contains("ON CONFLICT (\"dev\", \"time\") DO NOTHING RETURNING 1"), "{n}");
        assert!(n.contains("CASE WHEN \"dev\" IS NULL OR \"time\" IS NULL THEN 1 ELSE row_number()"), "{n}");
        let f = sql(ConflictAction::Nothing, None).insert_new("\"m_1\"", Source::Stage).unwrap();
        assert!(f.contains("FROM pg_temp.\"chute_stage_0\" s WHERE NOT EXISTS (SELECT 1 FROM \"m_1\" o WHERE o.\"dev\" = s.\"dev\" AND o.\"time\" = s.\"time\")"), "{f}");
        assert!(!f.contains("ON CONFLICT"), "{f}");
        assert!(sql(ConflictAction::Update, None).insert_new("\"m_1\"", Source::Stage).is_none());
        let inexact = MergeSql { key_exact: false, ..sql(ConflictAction::Nothing, None) };
        assert!(inexact.insert_new("\"m_1\"", Source::Stage).is_none(), "a key whose = may differ from the index's equality");
        let nnd = MergeSql { nulls_conflict: true, ..sql(ConflictAction::Nothing, None) };
        let r = nnd.statement("\"m_1\"", true, Source::StageRound);
        assert!(r.contains("CASE WHEN false THEN 1"), "NULLs conflict like other keys: {r}");
        let d = nnd.dedupe("\"m_1\"").unwrap();
        assert!(d.contains("WHERE NOT (false) GROUP BY") && d.contains("a.\"dev\" IS NOT DISTINCT FROM d.\"dev\""), "{d}");
    }

    #[test]
    fn the_round_column_is_not_a_loaded_column() {
        let mut m = sql(ConflictAction::Update, None);
        m.columns.push("\"chute_round\"".into());
        assert_eq!(m.round_column(), "\"chute_round_\"");
    }

    #[test]
    fn a_setting_reads_back_and_describes_itself() {
        let mut o = OnConflict::new(ConflictAction::Update);
        o.key = Some(vec!["dev".into(), "time".into()]);
        o.update_if = Some("excluded.v > t.v".into());
        let json = serde_json::to_string(&o).unwrap();
        assert_eq!(json, r#"{"action":"update","key":["dev","time"],"update_if":"excluded.v > t.v"}"#);
        assert_eq!(serde_json::from_str::<OnConflict>(&json).unwrap(), o);
        assert_eq!(o.describe(), "update on (dev, time) if excluded.v > t.v");
        assert_eq!(ConflictAction::parse(" Nothing "), Some(ConflictAction::Nothing));
        assert_eq!(ConflictAction::parse("ignore"), None);
    }
}
