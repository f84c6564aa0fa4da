//! What the simulator measured: a sample per second, summaries per period,
//! and their CSV forms (written, and read back for `--compare`).
//!
//! Counts in samples.csv are per window (the `window_s` seconds ending at
//! `t_s`), never rates, so that sums over windows are exact; the charts
//! divide. Latency percentiles are of the operations done in the window.

use std::collections::HashMap;
use std::fmt::Write;

use super::ops::Kind;
use super::stats::ServerDelta;

/// One kind of operation in one window.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OpSample {
    /// Operations asked for (the pace's integral; updates: orders that came due).
    pub requested: f64,
    /// Asked for but never sent because the pacer ran late.
    pub lost: f64,
    pub done: u64,
    pub errors: u64,
    /// Asked for while every connection was busy.
    pub skipped: u64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// The slowest operation of the window: how long a stall kept one waiting.
    pub max_ms: f64,
}

/// One window (about a second).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Seconds from the start to the end of the window.
    pub t: f64,
    pub window: f64,
    /// `run`, or with `--during-migrate`: `before`, the migration step
    /// running at the window's end, `after`.
    pub phase: String,
    pub ops: [OpSample; 5],
    /// Inserts per second the wave asked for at the window's end.
    pub insert_target: f64,
    pub server: ServerDelta,
    /// CPU time of the simulator itself, in % of one core.
    pub client_cpu_pct: f64,
    /// Connections running an operation at the window's end.
    pub busy: usize,
    /// Leaf tables of the table at the window's end.
    pub leaves: i64,
}

const OP_FIELDS: [&str; 9] = ["requested", "lost", "done", "errors", "skipped", "p50_ms", "p95_ms", "p99_ms", "max_ms"];
const SERVER_FIELDS: [&str; 13] = [
    "db_blks_read",
    "db_blks_hit",
    "db_xact_commit",
    "db_blk_read_ms",
    "heap_blks_read",
    "heap_blks_hit",
    "idx_blks_read",
    "idx_blks_hit",
    "toast_blks_read",
    "toast_blks_hit",
    "tup_ins",
    "tup_upd",
    "wal_bytes",
];

/// The header of samples.csv.
pub fn samples_header() -> String {
    let mut cols = vec!["t_s".to_owned(), "window_s".into(), "phase".into()];
    for k in Kind::ALL {
        cols.extend(OP_FIELDS.iter().map(|f| format!("{}_{f}", k.name())));
    }
    cols.push("insert_target_per_s".into());
    cols.extend(SERVER_FIELDS.iter().map(|f| (*f).to_owned()));
    cols.extend(["client_cpu_pct".into(), "connections_busy".into(), "leaves".into()]);
    cols.join(",")
}

impl Sample {
    pub fn csv_line(&self) -> String {
        let mut out = format!("{:.3},{:.3},{}", self.t, self.window, self.phase);
        for o in &self.ops {
            let _ = write!(
                out,
                ",{:.1},{:.1},{},{},{},{:.3},{:.3},{:.3},{:.3}",
                o.requested, o.lost, o.done, o.errors, o.skipped, o.p50_ms, o.p95_ms, o.p99_ms, o.max_ms
            );
        }
        let s = &self.server;
        let _ = write!(
            out,
            ",{:.1},{},{},{},{:.3},{},{},{},{},{},{},{},{},{},{:.1},{},{}",
            self.insert_target,
            s.db_blks_read,
            s.db_blks_hit,
            s.db_xact_commit,
            s.db_blk_read_ms,
            s.heap_blks_read,
            s.heap_blks_hit,
            s.idx_blks_read,
            s.idx_blks_hit,
            s.toast_blks_read,
            s.toast_blks_hit,
            s.tup_ins,
            s.tup_upd,
            s.wal_bytes,
            self.client_cpu_pct,
            self.busy,
            self.leaves
        );
        out
    }

    /// Operations done per second in the window.
    pub fn rate(&self, kind: Kind) -> f64 {
        self.ops[kind.index()].done as f64 / self.window.max(1e-9)
    }

    /// A server count per second in the window.
    pub fn per_s(&self, count: i64) -> f64 {
        count as f64 / self.window.max(1e-9)
    }
}

/// The samples to draw: a last window shorter than half a second (the one
/// read after the sessions ended, holding the statistics they flushed on
/// the way out) joins the window before it, so that it does not show as a
/// spike of its counts over a few milliseconds.
pub fn for_charts(samples: &[Sample]) -> Vec<Sample> {
    let mut out = samples.to_vec();
    if out.len() >= 2 && out[out.len() - 1].window < 0.5 {
        let last = out.pop().expect("two samples");
        let prev = out.last_mut().expect("one sample");
        prev.t = last.t;
        prev.window += last.window;
        for (p, l) in prev.ops.iter_mut().zip(&last.ops) {
            p.requested += l.requested;
            p.lost += l.lost;
            p.done += l.done;
            p.errors += l.errors;
            p.skipped += l.skipped;
        }
        let (p, l) = (&mut prev.server, &last.server);
        p.db_blks_read += l.db_blks_read;
        p.db_blks_hit += l.db_blks_hit;
        p.db_xact_commit += l.db_xact_commit;
        p.db_blk_read_ms += l.db_blk_read_ms;
        p.heap_blks_read += l.heap_blks_read;
        p.heap_blks_hit += l.heap_blks_hit;
        p.idx_blks_read += l.idx_blks_read;
        p.idx_blks_hit += l.idx_blks_hit;
        p.toast_blks_read += l.toast_blks_read;
        p.toast_blks_hit += l.toast_blks_hit;
        p.tup_ins += l.tup_ins;
        p.tup_upd += l.tup_upd;
        p.wal_bytes += l.wal_bytes;
        for (name, read, hit) in &l.indexes {
            match p.indexes.iter_mut().find(|i| &i.0 == name) {
                Some(i) => {
                    i.1 += read;
                    i.2 += hit;
                }
                None => p.indexes.push((name.clone(), *read, *hit)),
            }
        }
        prev.leaves = last.leaves;
        prev.phase = last.phase;
    }
    out
}

/// Reads samples.csv back (index columns are in indexes.csv, not here).
pub fn parse_samples(text: &str) -> Result<Vec<Sample>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("samples.csv is empty")?.split(',').collect();
    let at: HashMap<&str, usize> = header.iter().enumerate().map(|(i, h)| (*h, i)).collect();
    let mut out = Vec::new();
    for (n, line) in lines.enumerate() {
        let f: Vec<&str> = line.split(',').collect();
        let get = |name: &str| -> Result<f64, String> {
            let i = *at.get(name).ok_or_else(|| format!("samples.csv has no column {name}"))?;
            f.get(i).and_then(|v| v.parse().ok()).ok_or_else(|| format!("samples.csv line {}: {name} is not a number", n + 2))
        };
        let int = |name: &str| get(name).map(|v| v as i64);
        let mut s = Sample {
            t: get("t_s")?,
            window: get("window_s")?,
            phase: f.get(at.get("phase").copied().unwrap_or(2)).unwrap_or(&"").to_string(),
            insert_target: get("insert_target_per_s")?,
            client_cpu_pct: get("client_cpu_pct")?,
            busy: get("connections_busy")? as usize,
            leaves: int("leaves")?,
            ..Sample::default()
        };
        for k in Kind::ALL {
            let g = |field: &str| get(&format!("{}_{field}", k.name()));
            s.ops[k.index()] = OpSample {
                requested: g("requested")?,
                lost: g("lost")?,
                done: g("done")? as u64,
                errors: g("errors")? as u64,
                skipped: g("skipped")? as u64,
                p50_ms: g("p50_ms")?,
                p95_ms: g("p95_ms")?,
                p99_ms: g("p99_ms")?,
                // Runs of a chute without the column read as 0.
                max_ms: g("max_ms").unwrap_or(0.0),
            };
        }
        s.server = ServerDelta {
            db_blks_read: int("db_blks_read")?,
            db_blks_hit: int("db_blks_hit")?,
            db_xact_commit: int("db_xact_commit")?,
            db_blk_read_ms: get("db_blk_read_ms")?,
            heap_blks_read: int("heap_blks_read")?,
            heap_blks_hit: int("heap_blks_hit")?,
            idx_blks_read: int("idx_blks_read")?,
            idx_blks_hit: int("idx_blks_hit")?,
            toast_blks_read: int("toast_blks_read")?,
            toast_blks_hit: int("toast_blks_hit")?,
            tup_ins: int("tup_ins")?,
            tup_upd: int("tup_upd")?,
            wal_bytes: int("wal_bytes")?,
            indexes: vec![],
        };
        out.push(s);
    }
    Ok(out)
}

/// One kind of operation over a period.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct OpSummary {
    pub requested_per_s: f64,
    pub achieved_per_s: f64,
    pub done: u64,
    pub errors: u64,
    pub skipped: u64,
    pub lost: f64,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    /// The slowest operation of the period.
    pub max_ms: f64,
}

impl OpSummary {
    /// Achieved over requested (1 when nothing was asked for).
    pub fn share(&self) -> f64 {
        if self.requested_per_s <= 0.0 { 1.0 } else { self.achieved_per_s / self.requested_per_s }
    }
}

/// A period of the run: `all`, or `before`, `during` and `after` a migration.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct PeriodSummary {
    pub period: String,
    /// What the table was at the period's end (`plain table`, `partitioned, 31 leaves`).
    pub layout: String,
    pub seconds: f64,
    /// By [`Kind::ALL`] order, keyed by kind name in JSON.
    #[serde(serialize_with = "ops_by_name")]
    pub ops: [OpSummary; 5],
    pub db_blks_read_per_s: f64,
    pub db_blks_hit_per_s: f64,
    pub table_blks_read_per_s: f64,
    pub table_blks_hit_per_s: f64,
    pub heap_blks_read_per_s: f64,
    pub idx_blks_read_per_s: f64,
    /// Of the table's block requests, the share found in shared buffers.
    pub table_hit_ratio: f64,
    pub db_blk_read_ms_per_s: f64,
    pub wal_bytes_per_s: f64,
}

fn ops_by_name<S: serde::Serializer>(ops: &[OpSummary; 5], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut m = s.serialize_map(Some(ops.len()))?;
    for k in Kind::ALL {
        m.serialize_entry(k.name(), &ops[k.index()])?;
    }
    m.end()
}

const PERIOD_TAIL: [&str; 10] = [
    "db_blks_read_per_s",
    "db_blks_hit_per_s",
    "table_blks_read_per_s",
    "table_blks_hit_per_s",
    "heap_blks_read_per_s",
    "idx_blks_read_per_s",
    "table_hit_ratio",
    "db_blk_read_ms_per_s",
    "wal_bytes_per_s",
    "layout",
];
const OP_SUMMARY_FIELDS: [&str; 7] = ["requested_per_s", "achieved_per_s", "errors", "p50_ms", "p95_ms", "p99_ms", "max_ms"];

/// The header of summary.csv.
pub fn summary_header() -> String {
    let mut cols = vec!["period".to_owned(), "seconds".into()];
    for k in Kind::ALL {
        cols.extend(OP_SUMMARY_FIELDS.iter().map(|f| format!("{}_{f}", k.name())));
    }
    cols.extend(PERIOD_TAIL.iter().map(|f| (*f).to_owned()));
    cols.join(",")
}

impl PeriodSummary {
    pub fn csv_line(&self) -> String {
        let mut out = format!("{},{:.3}", self.period, self.seconds);
        for o in &self.ops {
            let _ = write!(
                out,
                ",{:.2},{:.2},{},{:.3},{:.3},{:.3},{:.3}",
                o.requested_per_s, o.achieved_per_s, o.errors, o.p50_ms, o.p95_ms, o.p99_ms, o.max_ms
            );
        }
        let _ = write!(
            out,
            ",{:.1},{:.1},{:.1},{:.1},{:.1},{:.1},{:.4},{:.3},{:.0},{}",
            self.db_blks_read_per_s,
            self.db_blks_hit_per_s,
            self.table_blks_read_per_s,
            self.table_blks_hit_per_s,
            self.heap_blks_read_per_s,
            self.idx_blks_read_per_s,
            self.table_hit_ratio,
            self.db_blk_read_ms_per_s,
            self.wal_bytes_per_s,
            self.layout.replace(',', ";")
        );
        out
    }
}

/// Reads summary.csv back.
pub fn parse_summary(text: &str) -> Result<Vec<PeriodSummary>, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().ok_or("summary.csv is empty")?.split(',').collect();
    let at: HashMap<&str, usize> = header.iter().enumerate().map(|(i, h)| (*h, i)).collect();
    lines
        .map(|line| {
            let f: Vec<&str> = line.split(',').collect();
            let text = |name: &str| -> Result<String, String> {
                at.get(name).and_then(|i| f.get(*i)).map(|s| (*s).to_owned()).ok_or_else(|| format!("summary.csv has no column {name}"))
            };
            let get =
                |name: &str| -> Result<f64, String> { text(name)?.parse().map_err(|_| format!("summary.csv: {name} is not a number")) };
            let mut p =
                PeriodSummary { period: text("period")?, layout: text("layout")?, seconds: get("seconds")?, ..PeriodSummary::default() };
            for k in Kind::ALL {
                let g = |field: &str| get(&format!("{}_{field}", k.name()));
                p.ops[k.index()] = OpSummary {
                    requested_per_s: g("requested_per_s")?,
                    achieved_per_s: g("achieved_per_s")?,
                    errors: g("errors")? as u64,
                    p50_ms: g("p50_ms")?,
                    p95_ms: g("p95_ms")?,
                    p99_ms: g("p99_ms")?,
                    max_ms: g("max_ms").unwrap_or(0.0),
                    ..OpSummary::default()
                };
            }
            p.db_blks_read_per_s = get("db_blks_read_per_s")?;
            p.db_blks_hit_per_s = get("db_blks_hit_per_s")?;
            p.table_blks_read_per_s = get("table_blks_read_per_s")?;
            p.table_blks_hit_per_s = get("table_blks_hit_per_s")?;
            p.heap_blks_read_per_s = get("heap_blks_read_per_s")?;
            p.idx_blks_read_per_s = get("idx_blks_read_per_s")?;
            p.table_hit_ratio = get("table_hit_ratio")?;
            p.db_blk_read_ms_per_s = get("db_blk_read_ms_per_s")?;
            p.wal_bytes_per_s = get("wal_bytes_per_s")?;
            Ok(p)
        })
        .collect()
}

/// Sums the windows of one period; `latency` gives each kind's percentiles
/// (p50, p95, p99) and slowest over the whole period from its merged histogram.
pub fn summarize(period: &str, layout: &str, samples: &[&Sample], latency: [(f64, f64, f64, f64); 5]) -> PeriodSummary {
    let seconds: f64 = samples.iter().map(|s| s.window).sum();
    let per_s = |v: f64| v / seconds.max(1e-9);
    let sum = |f: &dyn Fn(&Sample) -> f64| samples.iter().map(|s| f(s)).sum::<f64>();
    let ops = std::array::from_fn(|i| {
        let (p50, p95, p99, max) = latency[i];
        OpSummary {
            requested_per_s: per_s(sum(&|s| s.ops[i].requested)),
            achieved_per_s: per_s(sum(&|s| s.ops[i].done as f64)),
            done: sum(&|s| s.ops[i].done as f64) as u64,
            errors: sum(&|s| s.ops[i].errors as f64) as u64,
            skipped: sum(&|s| s.ops[i].skipped as f64) as u64,
            lost: sum(&|s| s.ops[i].lost),
            p50_ms: p50,
            p95_ms: p95,
            p99_ms: p99,
            max_ms: max,
        }
    });
    let read = sum(&|s| s.server.table_blks_read() as f64);
    let hit = sum(&|s| s.server.table_blks_hit() as f64);
    PeriodSummary {
        period: period.to_owned(),
        layout: layout.to_owned(),
        seconds,
        ops,
        db_blks_read_per_s: per_s(sum(&|s| s.server.db_blks_read as f64)),
        db_blks_hit_per_s: per_s(sum(&|s| s.server.db_blks_hit as f64)),
        table_blks_read_per_s: per_s(read),
        table_blks_hit_per_s: per_s(hit),
        heap_blks_read_per_s: per_s(sum(&|s| s.server.heap_blks_read as f64)),
        idx_blks_read_per_s: per_s(sum(&|s| s.server.idx_blks_read as f64)),
        table_hit_ratio: if read + hit > 0.0 { hit / (read + hit) } else { 1.0 },
        db_blk_read_ms_per_s: per_s(sum(&|s| s.server.db_blk_read_ms)),
        wal_bytes_per_s: per_s(sum(&|s| s.server.wal_bytes as f64)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64) -> Sample {
        let mut s = Sample {
            t,
            window: 1.0,
            phase: "before".into(),
            insert_target: 250.0,
            client_cpu_pct: 12.5,
            busy: 3,
            leaves: 1,
            ..Sample::default()
        };
        s.ops[0] =
            OpSample { requested: 250.0, lost: 0.0, done: 240, errors: 1, skipped: 9, p50_ms: 0.4, p95_ms: 1.2, p99_ms: 3.5, max_ms: 9.0 };
        s.ops[3] = OpSample { requested: 100.0, done: 100, p50_ms: 2.0, p95_ms: 4.0, p99_ms: 8.0, ..OpSample::default() };
        s.server = ServerDelta {
            db_blks_read: 30,
            db_blks_hit: 970,
            heap_blks_read: 10,
            heap_blks_hit: 500,
            idx_blks_read: 20,
            idx_blks_hit: 400,
            tup_ins: 240,
            wal_bytes: 1 << 20,
            ..ServerDelta::default()
        };
        s
    }

    #[test]
    fn samples_read_back_as_written() {
        let samples = vec![sample(1.0), sample(2.0)];
        let text = format!("{}\n{}\n{}\n", samples_header(), samples[0].csv_line(), samples[1].csv_line());
        let cols = samples_header().split(',').count();
        assert!(text.lines().all(|l| l.split(',').count() == cols));
        assert_eq!(parse_samples(&text).unwrap(), samples);
        assert!(parse_samples("t_s\n1").unwrap_err().contains("no column window_s"));
    }

    #[test]
    fn a_short_last_window_joins_the_one_before_on_charts() {
        let mut last = sample(2.03);
        last.window = 0.03;
        last.server.indexes = vec![("orders_pkey".into(), 1, 2)];
        let mut first = sample(2.0);
        first.server.indexes = vec![("orders_pkey".into(), 10, 20)];
        let drawn = for_charts(&[sample(1.0), first, last]);
        assert_eq!(drawn.len(), 2);
        assert_eq!((drawn[1].t, drawn[1].window), (2.03, 1.03));
        assert_eq!(drawn[1].ops[0].done, 480);
        assert_eq!(drawn[1].server.heap_blks_read, 20);
        assert_eq!(drawn[1].server.indexes, [("orders_pkey".to_owned(), 11, 22)]);
        assert_eq!(for_charts(&[sample(1.0), sample(2.0)]).len(), 2, "whole windows stay");
    }

    #[test]
    fn periods_sum_their_windows_and_read_back() {
        let (a, b) = (sample(1.0), Sample { window: 0.5, ..sample(1.5) });
        let p = summarize(
            "before",
            "plain table",
            &[&a, &b],
            [(0.4, 1.2, 3.5, 9.0), (0.0, 0.0, 0.0, 0.0), (0.0, 0.0, 0.0, 0.0), (2.0, 4.0, 8.0, 30.5), (0.0, 0.0, 0.0, 0.0)],
        );
        assert_eq!(p.seconds, 1.5);
        assert!((p.ops[0].achieved_per_s - 480.0 / 1.5).abs() < 1e-9);
        assert!((p.ops[0].requested_per_s - 500.0 / 1.5).abs() < 1e-9);
        assert_eq!((p.ops[0].done, p.ops[0].errors, p.ops[0].skipped), (480, 2, 18));
        assert!((p.table_blks_read_per_s - 60.0 / 1.5).abs() < 1e-9);
        assert!((p.table_hit_ratio - 1800.0 / 1860.0).abs() < 1e-9);
        assert!((p.ops[0].share() - 0.96).abs() < 1e-9);
        let text = format!("{}\n{}\n", summary_header(), p.csv_line());
        let back = parse_summary(&text).unwrap();
        assert_eq!(back[0].period, "before");
        assert_eq!(back[0].layout, "plain table");
        assert!((back[0].ops[3].p99_ms - 8.0).abs() < 1e-9);
        assert!((back[0].ops[3].max_ms - 30.5).abs() < 1e-9, "the slowest operation reads back");
        // A summary.csv of a chute without the max_ms columns still reads.
        let keep: Vec<bool> = summary_header().split(',').map(|c| !c.ends_with("_max_ms")).collect();
        let old: String = text
            .lines()
            .map(|l| l.split(',').zip(&keep).filter(|(_, k)| **k).map(|(f, _)| f).collect::<Vec<_>>().join(",") + "\n")
            .collect();
        let back = parse_summary(&old).unwrap();
        assert_eq!((back[0].ops[3].p99_ms, back[0].ops[3].max_ms), (8.0, 0.0));
        assert!((back[0].idx_blks_read_per_s - p.idx_blks_read_per_s).abs() < 0.1);
        let json = serde_json::to_value(&p).unwrap();
        assert_eq!(json["ops"]["read_customer"]["p95_ms"], 4.0);
    }
}
