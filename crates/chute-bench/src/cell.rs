//! One cell of a benchmark matrix: everything that decides how one load runs.
//!
//! A published experiment changes one thing at a time (the layout, the
//! number of indexes, the input order …) and keeps the rest fixed, so a cell
//! names every dimension explicitly; the report prints them all, and two
//! cells of a scenario differ in the dimension the scenario is about.

use std::fmt;

use chute_core::partman::interval::Span;

/// How the target table is partitioned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// One plain table.
    Single,
    /// Time ranges on the workload's time column, made by the partition manager.
    Range(Span),
    /// `N` equal ranges of the workload's key from its first to its last
    /// value, the first from MINVALUE and the last to MAXVALUE, made with
    /// plain SQL (as `pgbench -i --partitions=N --partition-method=range`).
    Ranges(u32),
    /// `N` hash partitions on the workload's hash column, made with plain SQL.
    Hash(u32),
    /// Time ranges, each split into `N` hash partitions (`chute partition create --hash`).
    RangeHash(Span, u32),
}

/// Partition counts beyond this are a typo, not an experiment.
const MAX_HASH: u32 = 10_000;

impl Layout {
    /// Parses `single`, `range:1h`, `ranges:200`, `hash:16`, `range:1h+hash:16`.
    pub fn parse(text: &str) -> Result<Layout, String> {
        let t = text.trim();
        if t == "single" {
            return Ok(Layout::Single);
        }
        let bad = || {
            format!("cannot read layout {text:?}: use single, range:INTERVAL (e.g. range:1h), ranges:N, hash:N or range:INTERVAL+hash:N")
        };
        if let Some(n) = t.strip_prefix("ranges:") {
            let n: u32 = n.parse().map_err(|_| bad())?;
            if !(1..=MAX_HASH).contains(&n) {
                return Err(format!("layout {text:?}: ranges must number 1 to {MAX_HASH}"));
            }
            return Ok(Layout::Ranges(n));
        }
        let (range, hash) = match t.split_once('+') {
            Some((r, h)) => (Some(r), Some(h)),
            None if t.starts_with("range:") => (Some(t), None),
            None if t.starts_with("hash:") => (None, Some(t)),
            None => return Err(bad()),
        };
        let span = match range {
            Some(r) => {
                let r = r.strip_prefix("range:").ok_or_else(bad)?;
                let s = Span::parse(r).map_err(|e| format!("layout {text:?}: {e}"))?;
                if !s.is_time() {
                    return Err(format!("layout {text:?}: ranges are over time, so the interval needs a unit (15min, 1h, 1d, 1w, 1mon)"));
                }
                Some(s)
            }
            None => None,
        };
        let modulus = match hash {
            Some(h) => {
                let n: u32 = h.strip_prefix("hash:").ok_or_else(bad)?.parse().map_err(|_| bad())?;
                if !(1..=MAX_HASH).contains(&n) {
                    return Err(format!("layout {text:?}: hash partitions must number 1 to {MAX_HASH}"));
                }
                Some(n)
            }
            None => None,
        };
        Ok(match (span, modulus) {
            (Some(s), Some(n)) => Layout::RangeHash(s, n),
            (Some(s), None) => Layout::Range(s),
            (None, Some(n)) => Layout::Hash(n),
            (None, None) => return Err(bad()),
        })
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Layout::Single => f.write_str("single"),
            Layout::Range(s) => write!(f, "range:{s}"),
            Layout::Ranges(n) => write!(f, "ranges:{n}"),
            Layout::Hash(n) => write!(f, "hash:{n}"),
            Layout::RangeHash(s, n) => write!(f, "range:{s}+hash:{n}"),
        }
    }
}

/// The order rows reach the loader in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// The generator's own order (time order for time-series workloads).
    Sorted,
    /// A seeded permutation of the same rows.
    Shuffled,
}

impl Order {
    pub fn parse(text: &str) -> Result<Order, String> {
        match text.trim() {
            "sorted" => Ok(Order::Sorted),
            "shuffled" => Ok(Order::Shuffled),
            other => Err(format!("cannot read order {other:?}: use sorted or shuffled")),
        }
    }
}

impl fmt::Display for Order {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Order::Sorted => "sorted",
            Order::Shuffled => "shuffled",
        })
    }
}

/// Who moves the rows into the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Loader {
    /// chute's loader: binary COPY straight into leaves, routed on the client.
    Chute,
    /// chute's loader with `--via-parent`: binary COPY into the parent, the server routes.
    ChuteViaParent,
    /// The server's own CSV COPY through `psql \copy` of a CSV file written first.
    PsqlCopy,
}

impl Loader {
    pub fn parse(text: &str) -> Result<Loader, String> {
        match text.trim() {
            "chute" => Ok(Loader::Chute),
            "chute-via-parent" | "chute --via-parent" => Ok(Loader::ChuteViaParent),
            "psql-copy" => Ok(Loader::PsqlCopy),
            other => Err(format!("cannot read loader {other:?}: use chute, chute-via-parent or psql-copy")),
        }
    }
}

impl fmt::Display for Loader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Loader::Chute => "chute",
            Loader::ChuteViaParent => "chute-via-parent",
            Loader::PsqlCopy => "psql-copy",
        })
    }
}

/// One load of the matrix, on a fresh table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    /// Short, unique within its scenario (`hourly-idx1`, `w4-unlogged` …).
    pub name: String,
    pub layout: Layout,
    /// Indexes on top of the workload's base indexes (one per data field).
    pub extra_indexes: u32,
    pub order: Order,
    pub loader: Loader,
    /// COPY connections (psql-copy always uses one).
    pub workers: usize,
    /// Rows per COPY batch; `None` leaves the loader's default batch size.
    pub batch_rows: Option<u64>,
    pub rows: u64,
    /// The table (or every partition) is UNLOGGED: no WAL for its rows.
    pub unlogged: bool,
}

impl Cell {
    /// Every dimension in one line, for logs and the report.
    pub fn describe(&self) -> String {
        format!(
            "{} · {} extra index{} · {} · {} · {} worker{} · {} · {} rows{}",
            self.layout,
            self.extra_indexes,
            if self.extra_indexes == 1 { "" } else { "es" },
            self.order,
            self.loader,
            self.workers,
            if self.workers == 1 { "" } else { "s" },
            self.batch_rows.map(|b| format!("batches of {b} rows")).unwrap_or_else(|| "default batches".into()),
            self.rows,
            if self.unlogged { " · unlogged" } else { "" },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_round_trip() {
        for t in ["single", "range:1h", "range:1d", "range:1w", "range:1mon", "hash:400", "range:1h+hash:16", "range:15min", "ranges:200"] {
            assert_eq!(Layout::parse(t).unwrap().to_string(), t);
        }
    }

    #[test]
    fn bad_layouts_say_what_to_write() {
        for t in
            ["", "range", "range:", "range:100", "hash:0", "hash:x", "list:3", "hash:4+range:1h", "range:1h+hash:", "ranges:0", "ranges:x"]
        {
            let e = Layout::parse(t).unwrap_err();
            assert!(e.contains(&format!("{t:?}")), "{t}: {e}");
        }
    }

    #[test]
    fn orders_and_loaders_parse() {
        assert_eq!(Order::parse("shuffled").unwrap(), Order::Shuffled);
        assert!(Order::parse("random").is_err());
        for l in [Loader::Chute, Loader::ChuteViaParent, Loader::PsqlCopy] {
            assert_eq!(Loader::parse(&l.to_string()).unwrap(), l);
        }
        assert_eq!(Loader::parse("chute --via-parent").unwrap(), Loader::ChuteViaParent);
    }
}
