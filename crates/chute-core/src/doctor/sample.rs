//! How sorted a sample of input is by the partition key, and what that
//! costs: rows that jump between partitions keep many partitions' buffers
//! and btree pages hot at once and send smaller batches.

use super::{Evidence, Finding, Severity, shell_word};

/// Order figures of a sample, in input order.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleOrder {
    pub rows: usize,
    /// Consecutive pairs whose key does not go backwards, as a fraction.
    pub in_order: f64,
    /// Consecutive rows in different partitions.
    pub switches: usize,
    /// Distinct partitions the sample touches.
    pub partitions: usize,
}

/// `keys` in input order and the start of the partition each falls in.
pub fn order(keys: &[i64], partitions: &[i64]) -> SampleOrder {
    let pairs = keys.len().saturating_sub(1);
    let ordered = keys.windows(2).filter(|w| w[1] >= w[0]).count();
    let switches = partitions.windows(2).filter(|w| w[1] != w[0]).count();
    let mut distinct = partitions.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    SampleOrder {
        rows: keys.len(),
        in_order: if pairs == 0 { 1.0 } else { ordered as f64 / pairs as f64 },
        switches,
        partitions: distinct.len(),
    }
}

/// What the trial loads measured: seconds for the rows as given and sorted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialTimes {
    pub given_s: f64,
    pub sorted_s: f64,
}

/// Where the sample is and how to sort it.
#[derive(Debug, Clone)]
pub struct SampleSource {
    pub table: String,
    pub file: String,
    pub key: String,
    /// 1-based field of the key in a CSV record.
    pub key_field: usize,
    pub header: bool,
    pub numeric_key: bool,
}

/// A finding when the sample switches partitions more often than sorted
/// input would (once per partition boundary): warning when the trial load
/// measured a cost of 10% or more, info otherwise.
pub fn finding(src: &SampleSource, o: &SampleOrder, t: Option<TrialTimes>) -> Option<Finding> {
    if o.switches < o.partitions.max(1) && o.in_order >= 0.99 {
        return None;
    }
    let ratio = t.map(|t| t.given_s / t.sorted_s.max(1e-6));
    let severity = if ratio.is_some_and(|r| r >= 1.1) { Severity::Warning } else { Severity::Info };
    let mut evidence = vec![Evidence::new(
        "the sample",
        format!(
            "{} rows: {:.1}% of consecutive rows in key order, {} switches between {} partitions (sorted input: {})",
            o.rows,
            o.in_order * 100.0,
            o.switches,
            o.partitions,
            o.partitions.saturating_sub(1)
        ),
    )];
    if let (Some(t), Some(r)) = (t, ratio) {
        evidence.push(Evidence::new(
            "trial load into a scratch copy of the table (removed)",
            format!("{:.3} s as given, {:.3} s sorted by {}: {r:.2}x", t.given_s, t.sorted_s, src.key),
        ));
    }
    let n = if src.numeric_key { "n" } else { "" };
    let k = src.key_field;
    let sort = format!("LC_ALL=C sort -s -t, -k{k},{k}{n}");
    let (f, out) = (shell_word(&src.file), shell_word(&format!("{}.sorted", src.file)));
    let fix = if src.header { format!("{{ head -n 1 {f}; tail -n +2 {f} | {sort}; }} > {out}") } else { format!("{sort} {f} > {out}") };
    Some(Finding {
        kind: "unsorted_input",
        severity,
        object: src.file.clone(),
        summary: format!(
            "the rows are not sorted by {}: load them sorted (chute load {} {}.sorted){}",
            src.key,
            src.table,
            src.file,
            ratio.map(|r| format!("; the trial load took {r:.2}x as long as sorted")).unwrap_or_default()
        ),
        evidence,
        fix: vec![fix],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn src() -> SampleSource {
        SampleSource { table: "t".into(), file: "f.csv".into(), key: "time".into(), key_field: 1, header: true, numeric_key: false }
    }

    #[test]
    fn sorted_input_has_no_finding() {
        let o = order(&[1, 2, 3, 10, 11], &[0, 0, 0, 10, 10]);
        assert_eq!((o.switches, o.partitions, o.in_order), (1, 2, 1.0));
        assert!(finding(&src(), &o, None).is_none());
    }

    #[test]
    fn shuffled_input_gets_a_sort_command() {
        let o = order(&[10, 1, 11, 2], &[10, 0, 10, 0]);
        assert_eq!(o.switches, 3);
        let f = finding(&src(), &o, Some(TrialTimes { given_s: 2.0, sorted_s: 1.0 })).unwrap();
        assert_eq!(f.severity, Severity::Warning);
        assert_eq!(f.fix[0], "{ head -n 1 f.csv; tail -n +2 f.csv | LC_ALL=C sort -s -t, -k1,1; } > f.csv.sorted");
        let cheap = finding(&src(), &o, Some(TrialTimes { given_s: 1.0, sorted_s: 1.0 })).unwrap();
        assert_eq!(cheap.severity, Severity::Info);
    }
}
