//! Matching a line's tags and fields to its table's columns (`chute serve`'s
//! InfluxDB writes, `chute consume --format line-protocol`).

use std::borrow::Cow;

use chute_core::ident::QualifiedName;
use chute_core::parse::lineproto::{FieldType, FieldValue};
use rustc_hash::FxHashMap;

use crate::load::ValueRows;

use super::{ColKind, LaneColumn};

/// The longest name PostgreSQL keeps (NAMEDATALEN - 1 bytes); a longer one is cut.
pub const MAX_NAME: usize = 63;

/// Why a name a client sent cannot be a PostgreSQL name, if it cannot:
/// longer than PostgreSQL keeps (it would cut the name, and two names
/// would meet in one), or holding a NUL byte (no PostgreSQL text can).
pub fn name_problem(what: &str, name: &str) -> Option<String> {
    if name.contains('\0') {
        return Some(format!("{what} {name:?} holds a NUL byte, which no PostgreSQL name can: remove it"));
    }
    (name.len() > MAX_NAME).then(|| {
        format!(
            "{what} {name:?} is {} bytes long: PostgreSQL names are at most {MAX_NAME} bytes (it would cut the name), so shorten it",
            name.len()
        )
    })
}

/// Why a line cannot be written.
#[derive(Debug, Clone, PartialEq)]
pub enum Miss {
    /// A key with no column (with `--create-tables`, the column to add).
    NoColumn {
        key: String,
        tag: bool,
        reason: String,
    },
    Other(String),
}

impl Miss {
    pub fn reason(self) -> String {
        match self {
            Miss::NoColumn { reason, .. } | Miss::Other(reason) => reason,
        }
    }
}

/// Matches lines' tags and fields to a lane's columns. Lines of one request
/// nearly always name the same keys in the same order: a line whose keys
/// are the previous line's reuses its column slots instead of looking each
/// key up again.
pub struct Matcher {
    columns: Vec<LaneColumn>,
    index: FxHashMap<String, usize>,
    /// With `--create-tables` a missing column is added, not a hint.
    create_tables: bool,
    /// Per column: the field type the request first gave it, and in which line.
    types: Vec<Option<(FieldType, u64)>>,
    /// A field keeps one type in all the lines matched (one request's, as
    /// InfluxDB wants); off where lines come in chunks of no meaning (Kafka).
    one_type: bool,
    /// The previous line's keys (tags, then fields) and their columns.
    keys: Vec<String>,
    slots: Vec<usize>,
    /// The line's values per column (the first is the time).
    pub cells: Vec<Option<Cell>>,
}

impl std::fmt::Debug for Matcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Matcher").field("columns", &self.columns.len()).finish_non_exhaustive()
    }
}

impl Matcher {
    pub fn new(columns: &[LaneColumn], create_tables: bool) -> Self {
        Matcher {
            columns: columns.to_vec(),
            index: columns.iter().enumerate().map(|(i, c)| (c.name.clone(), i)).collect(),
            create_tables,
            types: vec![None; columns.len()],
            one_type: true,
            keys: Vec::new(),
            slots: Vec::new(),
            cells: vec![None; columns.len()],
        }
    }

    /// A matcher for lines that need not give a field one type throughout.
    pub fn any_types(self) -> Self {
        Matcher { one_type: false, ..self }
    }

    /// Fills `cells` for line `n`, or says why the line cannot be written.
    pub fn line(
        &mut self,
        n: u64,
        tags: &[(Cow<'_, str>, Cow<'_, str>)],
        fields: &[(Cow<'_, str>, FieldValue<'_>)],
        table: &QualifiedName,
    ) -> Result<(), Miss> {
        let same = self.keys.len() == tags.len() + fields.len()
            && tags.iter().map(|(k, _)| k).chain(fields.iter().map(|(k, _)| k)).zip(&self.keys).all(|(a, b)| a.as_ref() == b.as_str());
        if !same {
            self.keys.clear();
            self.slots.clear();
            for (k, what) in tags.iter().map(|(k, _)| (k, "tag")).chain(fields.iter().map(|(k, _)| (k, "field"))) {
                let slot = self.index.get(k.as_ref()).copied().filter(|&i| self.columns[i].kind != ColKind::Time);
                // A key with no column: the line is rejected; the next line looks its keys up again.
                let Some(slot) = slot else {
                    self.keys.clear();
                    self.slots.clear();
                    if let Some(reason) = name_problem(&format!("{what} key"), k) {
                        return Err(Miss::Other(reason));
                    }
                    let reason = missing(table, k, what, self.create_tables);
                    return Err(Miss::NoColumn { key: k.to_string(), tag: what == "tag", reason });
                };
                self.keys.push(k.to_string());
                self.slots.push(slot);
            }
        }
        // A field keeps one type within a request.
        for (j, (k, v)) in fields.iter().enumerate().filter(|_| self.one_type) {
            let (slot, t) = (self.slots[tags.len() + j], v.field_type());
            match self.types[slot] {
                Some((was, first)) if was != t => {
                    return Err(Miss::Other(format!("field {k:?} is {} here but {} in line {first}", article(t), article(was))));
                }
                Some(_) => {}
                None => self.types[slot] = Some((t, n)),
            }
        }
        self.cells.iter_mut().for_each(|c| *c = None);
        for (j, _) in tags.iter().enumerate() {
            self.cells[self.slots[j]] = Some(Cell::Tag(j));
        }
        for (j, (k, v)) in fields.iter().enumerate() {
            let c = &self.columns[self.slots[tags.len() + j]];
            if !fits(c.kind, v.field_type()) {
                return Err(Miss::Other(format!(
                    "field {k:?} is {} but column {:?} of {table} is {}",
                    article(v.field_type()),
                    c.name,
                    c.type_name
                )));
            }
            self.cells[self.slots[tags.len() + j]] = Some(Cell::Field(j));
        }
        Ok(())
    }
}

impl Matcher {
    /// Appends the row of the line `line` matched last: its time, then its
    /// values in column order (NULL for a column it does not name).
    pub fn write_row(
        &self,
        rows: &mut ValueRows,
        time_ns: i64,
        tags: &[(Cow<'_, str>, Cow<'_, str>)],
        fields: &[(Cow<'_, str>, FieldValue<'_>)],
    ) {
        rows.int(time_ns);
        for c in &self.cells[1..] {
            match *c {
                None => rows.null(),
                Some(Cell::Tag(i)) => rows.text(&tags[i].1),
                Some(Cell::Field(i)) => match &fields[i].1 {
                    FieldValue::Str(t) => rows.text(t),
                    FieldValue::Float(f) => rows.float(*f),
                    FieldValue::Int(i) => rows.int(*i),
                    FieldValue::UInt(u) => rows.uint(*u),
                    FieldValue::Bool(b) => rows.bool(*b),
                },
            }
        }
    }
}

/// Where a column's value is: the line's tag or field of that index.
#[derive(Debug, Clone, Copy)]
pub enum Cell {
    Tag(usize),
    Field(usize),
}

fn missing(table: &QualifiedName, key: &str, what: &str, create_tables: bool) -> String {
    if create_tables {
        return format!("table {table} has no column {key:?} for {what} {key:?}, and it could not be added");
    }
    format!(
        "table {table} has no column {key:?} for {what} {key:?}: add it (ALTER TABLE {} ADD COLUMN …) or run chute serve with --create-tables",
        table.quoted()
    )
}

/// Whether a field of type `t` may go into a column of kind `k`.
fn fits(k: ColKind, t: FieldType) -> bool {
    match k {
        ColKind::Bool => t == FieldType::Bool,
        ColKind::Integer => matches!(t, FieldType::Int | FieldType::UInt),
        ColKind::Number => matches!(t, FieldType::Float | FieldType::Int | FieldType::UInt),
        ColKind::Text => t == FieldType::Str,
        ColKind::Time => false,
        ColKind::Other => true,
    }
}

fn article(t: FieldType) -> String {
    match t {
        FieldType::Int => "an integer".into(),
        FieldType::UInt => "an unsigned integer".into(),
        other => format!("a {}", other.name()),
    }
}

#[cfg(test)]
mod tests {
    use chute_core::parse::lineproto::{LineSet, Precision, parse_lines_into};

    use super::*;

    fn col(name: &str, kind: ColKind) -> LaneColumn {
        LaneColumn { name: name.into(), kind, type_name: format!("{kind:?}") }
    }

    /// Runs the lines through one matcher: per line, the columns its values went to, or why not.
    fn matched(columns: &[LaneColumn], body: &str) -> Vec<Result<Vec<Option<String>>, String>> {
        let mut set = LineSet::default();
        let mut lines = Vec::new();
        parse_lines_into(body, Precision::Nanoseconds, 0, &mut set, |n, r| lines.push((n, r.expect("a good line"))));
        let table = QualifiedName { schema: None, name: "m".into() };
        let mut m = Matcher::new(columns, false);
        lines
            .iter()
            .map(|(n, l)| {
                let (tags, fields) = (&set.tags[l.tags.clone()], &set.fields[l.fields.clone()]);
                m.line(*n, tags, fields, &table).map_err(Miss::reason).map(|()| {
                    m.cells
                        .iter()
                        .map(|c| match *c {
                            None => None,
                            Some(Cell::Tag(i)) => Some(format!("tag {}", tags[i].0)),
                            Some(Cell::Field(i)) => Some(format!("field {}", fields[i].0)),
                        })
                        .collect()
                })
            })
            .collect()
    }

    #[test]
    fn lines_with_other_keys_are_matched_again_and_types_stay_per_column() {
        let columns = [col("time", ColKind::Time), col("host", ColKind::Text), col("a", ColKind::Number), col("b", ColKind::Number)];
        let got = matched(&columns, "m,host=x a=1 1\nm,host=x b=2 2\nm,host=x a=1i 3\nm,zz=x a=1 4\nm,host=x a=3,b=4 5\nm,host=y a=5 6\n");
        let some = |v: &[Option<&str>]| Ok(v.iter().map(|s| s.map(str::to_owned)).collect::<Vec<_>>());
        assert_eq!(got[0], some(&[None, Some("tag host"), Some("field a"), None]));
        // The same number of keys, another key: not the previous line's slots.
        assert_eq!(got[1], some(&[None, Some("tag host"), None, Some("field b")]));
        assert!(got[2].as_ref().unwrap_err().contains("is an integer here but a float in line 1"), "{:?}", got[2]);
        assert!(got[3].as_ref().unwrap_err().contains("no column \"zz\""), "{:?}", got[3]);
        assert_eq!(got[4], some(&[None, Some("tag host"), Some("field a"), Some("field b")]));
        assert_eq!(got[5], some(&[None, Some("tag host"), Some("field a"), None]));
    }

    #[test]
    fn a_key_naming_the_time_column_or_a_field_the_column_cannot_hold_is_refused() {
        let columns = [col("time", ColKind::Time), col("t", ColKind::Time), col("n", ColKind::Integer)];
        let got = matched(&columns, "m t=1 1\nm n=1.5 2\nm n=2i 3\n");
        assert!(got[0].as_ref().unwrap_err().contains("no column \"t\""), "{:?}", got[0]);
        assert!(got[1].as_ref().unwrap_err().contains("is a float but column \"n\""), "{:?}", got[1]);
        assert!(got[2].is_err(), "n was a float in line 2: {:?}", got[2]);
    }
}
