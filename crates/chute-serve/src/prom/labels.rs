//! A time series' label set, checked and put in canonical form.
//!
//! Prometheus's rules (before its UTF-8 names): a label name matches
//! `[a-zA-Z_][a-zA-Z0-9_]*`, the metric name (`__name__`, which every series
//! must have) `[a-zA-Z_:][a-zA-Z0-9_:]*`; a label whose value is empty is the
//! same as no label, so it is left out; a name appears once. chute adds
//! limits of its own, so that one series cannot take the service's memory
//! or the series table's pages: [`MAX_LABELS`] labels, names of at most
//! [`MAX_NAME`] bytes, values of at most [`MAX_VALUE`], [`MAX_SET`] bytes in
//! all. A request with a series that breaks a rule is refused whole (400),
//! before anything is written.
//!
//! The canonical form is the labels sorted by name, each written as its
//! name, byte 0xFF, its value, byte 0xFE: neither byte occurs in UTF-8, so
//! two label sets have the same bytes exactly when they are the same set.

/// The most labels a series may have, `__name__` included.
pub const MAX_LABELS: usize = 128;
/// The longest label name, in bytes.
pub const MAX_NAME: usize = 256;
/// The longest label value, in bytes.
pub const MAX_VALUE: usize = 16 << 10;
/// The most bytes a label set may hold (names and values).
pub const MAX_SET: usize = 64 << 10;

fn name_ok(name: &str, metric: bool) -> bool {
    let mut bytes = name.bytes();
    let first_ok = |b: u8| b.is_ascii_alphabetic() || b == b'_' || (metric && b == b':');
    bytes.next().is_some_and(first_ok) && bytes.all(|b| first_ok(b) || b.is_ascii_digit())
}

/// Checks `labels` and writes the set's canonical bytes into `out`
/// (cleared first), using `sorted` as scratch; returns the metric name, or
/// why the set is refused.
pub(crate) fn canonical<'a>(
    labels: &[(&'a str, &'a str)],
    sorted: &mut Vec<(&'a str, &'a str)>,
    out: &mut Vec<u8>,
) -> Result<&'a str, String> {
    sorted.clear();
    sorted.extend(labels.iter().filter(|(_, v)| !v.is_empty()).copied());
    if !sorted.is_sorted_by(|a, b| a.0 <= b.0) {
        sorted.sort_unstable_by(|a, b| a.0.cmp(b.0));
    }
    if sorted.len() > MAX_LABELS {
        return Err(format!("a series has {} labels, more than the {MAX_LABELS} chute takes", sorted.len()));
    }
    out.clear();
    let mut metric = None;
    for (i, (name, value)) in sorted.iter().enumerate() {
        if i > 0 && sorted[i - 1].0 == *name {
            return Err(format!("label {name:?} appears twice in a series"));
        }
        if name.len() > MAX_NAME {
            return Err(format!("a label name of {} bytes is longer than the {MAX_NAME} chute takes", name.len()));
        }
        if name.contains('\0') || value.contains('\0') {
            return Err(format!("label {name:?} holds a NUL byte, which PostgreSQL text cannot: remove it"));
        }
        if value.len() > MAX_VALUE {
            return Err(format!("the value of label {name:?} has {} bytes, more than the {MAX_VALUE} chute takes", value.len()));
        }
        if *name == "__name__" {
            if !name_ok(value, true) {
                return Err(format!("metric name {value:?} is not a valid Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)"));
            }
            metric = Some(*value);
        } else if !name_ok(name, false) {
            return Err(format!("label name {name:?} is not a valid Prometheus label name ([a-zA-Z_][a-zA-Z0-9_]*)"));
        }
        out.extend_from_slice(name.as_bytes());
        out.push(0xff);
        out.extend_from_slice(value.as_bytes());
        out.push(0xfe);
    }
    if out.len() > MAX_SET {
        return Err(format!("a series' labels take {} bytes, more than the {MAX_SET} chute takes", out.len()));
    }
    metric.ok_or_else(|| {
        let shown: Vec<String> = sorted.iter().take(8).map(|(n, v)| format!("{n}={v:?}")).collect();
        format!("a series has no metric name (label __name__): {{{}}}", shown.join(", "))
    })
}

/// The labels of canonical bytes, as (name, value) pairs in name order.
pub(crate) fn pairs(key: &[u8]) -> impl Iterator<Item = (&str, &str)> {
    key.split(|b| *b == 0xfe).filter(|p| !p.is_empty()).map(|p| {
        let at = p.iter().position(|b| *b == 0xff).unwrap_or(p.len());
        // Made by `canonical` from UTF-8 text: each piece is UTF-8 again.
        (std::str::from_utf8(&p[..at]).unwrap_or_default(), std::str::from_utf8(p.get(at + 1..).unwrap_or_default()).unwrap_or_default())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(labels: &[(&str, &str)]) -> Result<(String, Vec<u8>), String> {
        let (mut sorted, mut out) = (Vec::new(), Vec::new());
        canonical(labels, &mut sorted, &mut out).map(|m| (m.to_owned(), out))
    }

    #[test]
    fn one_set_one_form_whatever_the_order_and_empty_values() {
        let a = check(&[("__name__", "up"), ("job", "x"), ("instance", "a:1")]).unwrap();
        let b = check(&[("instance", "a:1"), ("zone", ""), ("job", "x"), ("__name__", "up")]).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.0, "up");
        let back: Vec<(&str, &str)> = pairs(&a.1).collect();
        assert_eq!(back, [("__name__", "up"), ("instance", "a:1"), ("job", "x")]);
        // A value cannot pose as a name and value of another set.
        assert_ne!(
            check(&[("__name__", "m"), ("a", "b"), ("c", "d")]).unwrap().1,
            check(&[("__name__", "m"), ("a", "b\u{fe}c")]).unwrap_or_default().1
        );
    }

    #[test]
    fn sets_that_break_a_rule_say_which() {
        let no_name = check(&[("job", "x")]).unwrap_err();
        assert!(no_name.contains("no metric name"), "{no_name}");
        assert!(check(&[("__name__", "")]).unwrap_err().contains("no metric name"));
        assert!(check(&[("__name__", "1up")]).unwrap_err().contains("not a valid Prometheus metric name"));
        assert!(check(&[("__name__", "up"), ("a-b", "x")]).unwrap_err().contains("label name \"a-b\""));
        assert!(check(&[("__name__", "up"), ("a", "x"), ("a", "y")]).unwrap_err().contains("appears twice"));
        let many: Vec<(String, String)> = (0..MAX_LABELS).map(|i| (format!("l{i:03}"), "v".to_owned())).collect();
        let mut refs: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        refs.push(("__name__", "up"));
        assert!(check(&refs).unwrap_err().contains("129 labels"));
        refs.pop();
        refs.pop();
        refs.push(("__name__", "up"));
        assert!(check(&refs).is_ok(), "exactly the limit is taken");
        let long = "v".repeat(MAX_VALUE + 1);
        assert!(check(&[("__name__", "up"), ("a", &long)]).unwrap_err().contains("more than the 16384"));
        let name = "n".repeat(MAX_NAME + 1);
        assert!(check(&[("__name__", "up"), (&name, "x")]).unwrap_err().contains("label name of 257 bytes"));
        assert_eq!(check(&[("__name__", "ns:up_total")]).unwrap().0, "ns:up_total");
        assert!(check(&[("__name__", "up"), ("a:b", "x")]).is_err(), "a colon only in metric names");
    }
}
