//! A partition far larger than the ones before it: the rate outgrew the
//! interval (or a burst landed in one), so its indexes stop fitting in
//! memory while it takes inserts. New partitions of a shorter interval fix
//! what is still to come; the finding is about the policy, so it goes away
//! once new partitions are narrower than the oversized one.

/// One partition: its bounds as key values and its size with indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct PartSize {
    pub name: String,
    pub from: i64,
    pub to: i64,
    pub bytes: i64,
}

/// How many earlier partitions a partition is compared with.
const WINDOW: usize = 7;

/// Earlier partitions whose median is smaller than this are no yardstick.
const MIN_MEDIAN: i64 = 1_048_576;

/// Partitions (with the median of the up to 7 partitions before them) at
/// least `min_bytes` large and more than 10 times that median (itself at
/// least 1 MiB), while new
/// partitions would still be as wide: `next_width(from)` is the width the
/// policy gives an interval starting at `from`. Needs 3 earlier partitions.
pub fn oversized(parts: &[PartSize], min_bytes: i64, next_width: impl Fn(i64) -> Option<i64>) -> Vec<(PartSize, i64)> {
    let mut out = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        if i < 3 || p.bytes < min_bytes || p.to == i64::MAX || p.from == i64::MIN {
            continue;
        }
        let mut before: Vec<i64> = parts[i.saturating_sub(WINDOW)..i].iter().map(|q| q.bytes).collect();
        before.sort_unstable();
        let median = before[before.len() / 2];
        // Siblings that hardly hold data (new tables, premade ones) say nothing.
        if median < MIN_MEDIAN || p.bytes <= median * 10 {
            continue;
        }
        if next_width(p.from).is_some_and(|w| w < p.to - p.from) {
            continue;
        }
        out.push((p.clone(), median));
    }
    out
}

/// The next shorter interval of the usual ladder, for the fix.
pub fn shorter_interval(width_micros: i64) -> &'static str {
    const HOUR: i64 = 3_600_000_000;
    if width_micros > 8 * 24 * HOUR {
        "1w"
    } else if width_micros > 24 * HOUR {
        "1d"
    } else if width_micros > HOUR {
        "1h"
    } else {
        "15min"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(i: i64, bytes: i64) -> PartSize {
        PartSize { name: format!("p{i}"), from: i * 10, to: i * 10 + 10, bytes }
    }

    #[test]
    fn a_partition_ten_times_its_predecessors_is_reported_until_new_ones_are_narrower() {
        const M: i64 = 1_048_576;
        let parts = [part(0, 2 * M), part(1, 3 * M), part(2, 2 * M), part(3, 50 * M), part(4, 0)];
        let found = oversized(&parts, 10 * M, |_| Some(10));
        assert_eq!(found, vec![(part(3, 50 * M), 2 * M)]);
        assert!(oversized(&parts, 10 * M, |_| Some(5)).is_empty(), "new partitions are narrower");
        assert!(oversized(&parts, 100 * M, |_| Some(10)).is_empty(), "below the size that matters");
        assert!(oversized(&parts[1..], 10 * M, |_| Some(10)).is_empty(), "too few earlier partitions to compare with");
        let small = [part(0, 8192), part(1, 8192), part(2, 8192), part(3, 50 * M)];
        assert!(oversized(&small, 10 * M, |_| Some(10)).is_empty(), "nearly empty siblings are no yardstick");
    }

    #[test]
    fn shorter_intervals() {
        assert_eq!(shorter_interval(24 * 3_600_000_000), "1h");
        assert_eq!(shorter_interval(7 * 24 * 3_600_000_000), "1d");
    }
}
