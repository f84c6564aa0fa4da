//! Label matchers of a remote read query, with Prometheus's semantics:
//! `=`, `!=`, `=~`, `!~`; a label a series lacks has the empty value (so
//! `{job=""}` selects series without `job`, and `{job=~".*"}` every series);
//! a regex must match the whole value (Prometheus anchors it as
//! `^(?:re)$`).
//!
//! Prometheus compiles regexes with Go's RE2, chute with the `regex` crate,
//! whose syntax and semantics are RE2's (leftmost-first, no backreferences,
//! `.` one character and not a newline) with one difference fixed here:
//! Go's `\d`, `\w` and `\s` are ASCII classes, the crate's Unicode ones, so
//! they are rewritten to their ASCII sets before compiling. A pattern RE2
//! takes that the crate does not (`\Q…\E`, `\C`) is refused with the
//! crate's reason.
//!
//! The matchers are evaluated here, over the series the query's equality
//! matchers select from the series table (its `metric` and `labels`
//! indexes), never by PostgreSQL's regex engine, whose flavour (Tcl's
//! ARE, leftmost-longest, `.` matching newlines) is not RE2's.

use regex::Regex;

use super::wire::LabelMatcher;

#[derive(Debug)]
enum Op {
    Eq,
    Ne,
    Re(Regex),
    Nre(Regex),
}

#[derive(Debug)]
pub(crate) struct Matcher {
    pub name: String,
    pub value: String,
    op: Op,
}

impl Matcher {
    pub(crate) fn new(m: &LabelMatcher) -> Result<Matcher, String> {
        let re = || {
            Regex::new(&format!("^(?:{})$", ascii_classes(&m.value))).map_err(|e| {
                let why = match e {
                    regex::Error::CompiledTooBig(limit) => format!("it compiles to more than {limit} bytes: use a shorter one"),
                    e => clip(&e.to_string(), 300),
                };
                format!(
                    "matcher {}=~{}: not a regular expression chute can run: {why}",
                    clip(&m.name, 100),
                    clip(&format!("{:?}", m.value), 200)
                )
            })
        };
        let op = match m.r#type {
            0 => Op::Eq,
            1 => Op::Ne,
            2 => Op::Re(re()?),
            3 => Op::Nre(re()?),
            t => return Err(format!("matcher type {t} is none of =, !=, =~, !~")),
        };
        Ok(Matcher { name: m.name.clone(), value: m.value.clone(), op })
    }

    /// Whether a series whose value of this label is `value` ("" when it lacks it) is selected.
    pub(crate) fn matches(&self, value: &str) -> bool {
        match &self.op {
            Op::Eq => value == self.value,
            Op::Ne => value != self.value,
            Op::Re(r) => r.is_match(value),
            Op::Nre(r) => !r.is_match(value),
        }
    }

    /// An equality that only a series with this label can meet: usable as a
    /// filter on the series table's indexes.
    pub(crate) fn required(&self) -> Option<(&str, &str)> {
        (matches!(self.op, Op::Eq) && !self.value.is_empty()).then_some((self.name.as_str(), self.value.as_str()))
    }
}

/// `pattern` with Go's ASCII meaning of `\d`, `\w`, `\s` (and their
/// negations) spelled out as classes, which also nest inside `[…]`.
fn ascii_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 16);
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str("[\\t\\n\\f\\r ]"),
            Some('S') => out.push_str("[^\\t\\n\\f\\r ]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// `text` cut to at most `max` bytes (at a character boundary), saying how
/// long it was: an answer never echoes a client's megabytes back.
fn clip(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes)", &text[..end], text.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(t: i32, name: &str, value: &str) -> Matcher {
        Matcher::new(&LabelMatcher { r#type: t, name: name.into(), value: value.into() }).unwrap()
    }

    #[test]
    fn matchers_follow_prometheus() {
        assert!(m(0, "job", "a").matches("a") && !m(0, "job", "a").matches("ab"));
        assert!(m(1, "job", "a").matches("") && !m(1, "job", "a").matches("a"));
        assert!(m(2, "job", "a|b").matches("b") && !m(2, "job", "a|b").matches("ab"), "anchored at both ends");
        assert!(!m(2, "job", "b").matches("abc"), "a regex matches the whole value, not a part");
        assert!(m(3, "job", "a.*").matches("ba") && !m(3, "job", "a.*").matches("abc"));
        assert!(m(2, "job", ".*").matches(""), "a missing label is the empty value");
        assert!(!m(2, "job", ".+").matches(""));
        assert!(!m(2, "x", "a.b").matches("a\nb"), "dot is no newline, as in RE2");
        assert!(m(2, "x", "(?s)a.b").matches("a\nb"));
        assert!(m(2, "x", "(?i)UP").matches("up"));
    }

    #[test]
    fn perl_classes_are_ascii_as_in_go() {
        assert!(m(2, "x", r"\d+").matches("123"));
        assert!(!m(2, "x", r"\d+").matches("١٢٣"), "Arabic-Indic digits are no \\d in RE2");
        assert!(m(2, "x", r"[\d.]+").matches("1.5"), "inside a class too");
        assert!(m(2, "x", r"\D").matches("é"));
        assert!(!m(2, "x", r"\w+").matches("héllo"));
        assert!(m(2, "x", r"\\d").matches(r"\d"), "an escaped backslash stays one");
        assert!(m(2, "x", r"\s").matches(" ") && !m(2, "x", r"\s").matches("\u{a0}"));
    }

    #[test]
    fn a_bad_regex_or_type_says_what() {
        let e = Matcher::new(&LabelMatcher { r#type: 2, name: "job".into(), value: "(".into() }).unwrap_err();
        assert!(e.contains("job=~\"(\""), "{e}");
        assert!(Matcher::new(&LabelMatcher { r#type: 9, name: "job".into(), value: "".into() }).unwrap_err().contains("type 9"));
    }
}
