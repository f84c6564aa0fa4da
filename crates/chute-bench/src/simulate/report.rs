//! The files a simulation leaves (samples.csv, indexes.csv, summary.csv,
//! report.html with its charts inline and as .svg files) and its text
//! summary. Pure: a [`SimRun`] in, text out; the charts and the page are
//! drawn by the same code as `chute bench`'s ([`crate::svg`],
//! [`crate::report`]).

use std::fmt::Write;

use super::ops::Kind;
use super::sample::{PeriodSummary, Sample, for_charts, samples_header, summary_header};
use crate::report::{STYLE, ServerInfo, csv_field, server_table};
use crate::svg::{BarChart, LineChart, Series, Svg, escape, short_number};

/// Everything one `chute simulate` run produced.
#[derive(Debug, Clone, Default)]
pub struct SimRun {
    pub table: String,
    pub server: ServerInfo,
    /// What was asked for, in words, one line each.
    pub asked: Vec<String>,
    pub connections: usize,
    pub samples: Vec<Sample>,
    /// `all` first, then `before`, `during`, `after` with `--during-migrate`.
    pub periods: Vec<PeriodSummary>,
    /// (seconds, migration step) where each step began.
    pub markers: Vec<(f64, String)>,
    /// Where the simulator fell short, and why; other things to know.
    pub notes: Vec<String>,
    /// The migration's error, when it failed.
    pub migration_error: Option<String>,
    /// `--compare`: the earlier run's label, samples and whole-run summary.
    pub baseline: Option<Baseline>,
}

/// An earlier run to draw beside this one.
#[derive(Debug, Clone, Default)]
pub struct Baseline {
    /// Its directory, as given (for the text summary on stdout).
    pub dir: String,
    /// Its directory's last component: what the report calls it.
    pub name: String,
    pub samples: Vec<Sample>,
    pub all: PeriodSummary,
}

impl SimRun {
    pub fn all(&self) -> &PeriodSummary {
        &self.periods[0]
    }

    pub fn samples_csv(&self) -> String {
        let mut out = samples_header();
        out.push('\n');
        for s in &self.samples {
            out.push_str(&s.csv_line());
            out.push('\n');
        }
        out
    }

    /// Blocks read and hit per index and window (long form).
    pub fn indexes_csv(&self) -> String {
        let mut out = String::from("t_s,window_s,index,idx_blks_read,idx_blks_hit\n");
        for s in &self.samples {
            for (name, read, hit) in &s.server.indexes {
                let _ = writeln!(out, "{:.3},{:.3},{},{read},{hit}", s.t, s.window, csv_field(name));
            }
        }
        out
    }

    pub fn summary_csv(&self) -> String {
        let mut out = summary_header();
        out.push('\n');
        for p in &self.periods {
            out.push_str(&p.csv_line());
            out.push('\n');
        }
        out
    }

    fn label(&self) -> String {
        self.all().layout.clone()
    }

    fn baseline_label(&self) -> Option<String> {
        // Short: it leads every legend entry of the before/after charts.
        self.baseline.as_ref().map(|b| format!("before ({})", b.all.layout))
    }

    /// The charts, with the file name each is written to.
    pub fn charts(&self) -> Vec<(&'static str, Svg)> {
        let drawn = for_charts(&self.samples);
        let baseline = self.baseline.as_ref().map(|b| for_charts(&b.samples));
        let line = |title: &str, y: &str, series: Vec<Series>| LineChart {
            title: title.into(),
            x_label: "seconds".into(),
            y_label: y.into(),
            series,
            markers: self.markers.clone(),
        };
        let over = |samples: &[Sample], f: &dyn Fn(&Sample) -> f64| samples.iter().map(|s| (s.t, f(s))).collect::<Vec<_>>();
        let mut ops = vec![Series { name: "insert target".into(), points: over(&drawn, &|s| s.insert_target) }];
        ops.extend(Kind::ALL.iter().map(|k| Series { name: k.label().into(), points: over(&drawn, &|s| s.rate(*k)) }));
        let latency = |kinds: &[Kind]| {
            let mut v = Vec::new();
            for k in kinds {
                for (p, f) in [("p50", 0), ("p95", 1), ("p99", 2)] {
                    let pick = move |s: &Sample| {
                        let o = &s.ops[k.index()];
                        [o.p50_ms, o.p95_ms, o.p99_ms][f]
                    };
                    // A window without such operations has no latency to draw.
                    let points = drawn.iter().filter(|s| s.ops[k.index()].done > 0).map(|s| (s.t, pick(s))).collect();
                    v.push(Series { name: format!("{} {p}", k.name()), points });
                }
            }
            v
        };
        let blocks = |read: bool| {
            let mut v = Vec::new();
            let mut add = |prefix: &str, samples: &[Sample]| {
                let pick = |s: &Sample, r: i64, h: i64| s.per_s(if read { r } else { h });
                v.push(Series {
                    name: format!("{prefix}database"),
                    points: over(samples, &|s| pick(s, s.server.db_blks_read, s.server.db_blks_hit)),
                });
                v.push(Series {
                    name: format!("{prefix}table heap"),
                    points: over(samples, &|s| pick(s, s.server.heap_blks_read, s.server.heap_blks_hit)),
                });
                v.push(Series {
                    name: format!("{prefix}table indexes"),
                    points: over(samples, &|s| pick(s, s.server.idx_blks_read, s.server.idx_blks_hit)),
                });
            };
            if let (Some(b), Some(label)) = (&baseline, self.baseline_label()) {
                add(&format!("{label}: "), b);
                add(&format!("{}: ", self.label()), &drawn);
            } else {
                add("", &drawn);
            }
            v
        };
        let mut index_names: Vec<&str> = drawn.iter().flat_map(|s| s.server.indexes.iter().map(|i| i.0.as_str())).collect();
        index_names.sort();
        index_names.dedup();
        let by_index = index_names
            .iter()
            .map(|name| Series {
                name: (*name).to_owned(),
                points: over(&drawn, &|s| s.per_s(s.server.indexes.iter().find(|i| i.0 == *name).map_or(0, |i| i.1))),
            })
            .collect();
        let mut charts = vec![
            ("operations.svg", line("Operations per second", "operations/s", ops).to_svg()),
            ("latency-writes.svg", line("Write latency", "ms", latency(&[Kind::Insert, Kind::Update])).to_svg()),
            ("latency-reads.svg", line("Read latency", "ms", latency(&[Kind::ReadId, Kind::ReadCustomer, Kind::ReadCount])).to_svg()),
            ("blocks-read.svg", line("Blocks read per second (not found in shared buffers)", "blocks/s", blocks(true)).to_svg()),
            ("blocks-hit.svg", line("Blocks hit per second (found in shared buffers)", "blocks/s", blocks(false)).to_svg()),
            ("index-blocks-read.svg", line("Blocks read per second, by index", "blocks/s", by_index).to_svg()),
            (
                "wal.svg",
                line(
                    "WAL written per second",
                    "MB/s",
                    vec![Series { name: "WAL".into(), points: over(&drawn, &|s| s.per_s(s.server.wal_bytes) / 1e6) }],
                )
                .to_svg(),
            ),
        ];
        if let (Some(b), Some(label)) = (&self.baseline, self.baseline_label()) {
            let now = self.all();
            let bars = |title: &str, y: &str, rows: Vec<(String, f64, f64)>| BarChart {
                title: title.into(),
                y_label: y.into(),
                categories: rows.iter().map(|r| r.0.clone()).collect(),
                series: vec![(label.clone(), rows.iter().map(|r| r.1).collect()), (self.label(), rows.iter().map(|r| r.2).collect())],
            };
            let blocks = vec![
                ("database read".to_owned(), b.all.db_blks_read_per_s, now.db_blks_read_per_s),
                ("table read".to_owned(), b.all.table_blks_read_per_s, now.table_blks_read_per_s),
                ("heap read".to_owned(), b.all.heap_blks_read_per_s, now.heap_blks_read_per_s),
                ("indexes read".to_owned(), b.all.idx_blks_read_per_s, now.idx_blks_read_per_s),
            ];
            let latency =
                Kind::ALL.iter().map(|k| (format!("{} p95", k.name()), b.all.ops[k.index()].p95_ms, now.ops[k.index()].p95_ms)).collect();
            charts.push(("compare-blocks.svg", bars("Blocks read per second, before and after", "blocks/s", blocks).to_svg()));
            charts.push(("compare-latency.svg", bars("Latency p95, before and after", "ms", latency).to_svg()));
        }
        charts
    }

    /// The text summary for stdout.
    pub fn text(&self) -> String {
        let mut out = format!("table        {} ({})\n", self.table, self.label());
        for a in &self.asked {
            let _ = writeln!(out, "asked        {a}");
        }
        let _ = writeln!(out, "connections  {}", self.connections);
        for p in &self.periods {
            let _ = writeln!(out, "\n{} ({:.1} s, {})", p.period, p.seconds, p.layout);
            let _ = writeln!(
                out,
                "  {:<26} {:>11} {:>11} {:>7} {:>8} {:>8} {:>8} {:>8}",
                "operation", "asked/s", "done/s", "errors", "p50 ms", "p95 ms", "p99 ms", "max ms"
            );
            for k in Kind::ALL {
                let o = &p.ops[k.index()];
                let _ = writeln!(
                    out,
                    "  {:<26} {:>11.1} {:>11.1} {:>7} {:>8.2} {:>8.2} {:>8.2} {:>8.1}",
                    k.label(),
                    o.requested_per_s,
                    o.achieved_per_s,
                    o.errors,
                    o.p50_ms,
                    o.p95_ms,
                    o.p99_ms,
                    o.max_ms
                );
            }
            let _ = writeln!(
                out,
                "  blocks/s: database read {:.0} hit {:.0}; table read {:.0} (heap {:.0}, indexes {:.0}) hit {:.0}, {:.1}% hit",
                p.db_blks_read_per_s,
                p.db_blks_hit_per_s,
                p.table_blks_read_per_s,
                p.heap_blks_read_per_s,
                p.idx_blks_read_per_s,
                p.table_blks_hit_per_s,
                p.table_hit_ratio * 100.0
            );
            let _ = writeln!(out, "  WAL {:.2} MB/s; reading blocks took {:.1} ms/s", p.wal_bytes_per_s / 1e6, p.db_blk_read_ms_per_s);
        }
        if let Some(b) = &self.baseline {
            let now = self.all();
            let change = |before: f64, after: f64| {
                if before > 0.0 { format!("{:+.0}%", (after / before - 1.0) * 100.0) } else { "-".into() }
            };
            let _ = writeln!(out, "\ncompared with {} ({}):", b.dir, b.all.layout);
            for (what, x, y) in [
                ("table blocks read/s", b.all.table_blks_read_per_s, now.table_blks_read_per_s),
                ("database blocks read/s", b.all.db_blks_read_per_s, now.db_blks_read_per_s),
                ("table blocks hit/s", b.all.table_blks_hit_per_s, now.table_blks_hit_per_s),
                ("read by id p95 ms", b.all.ops[2].p95_ms, now.ops[2].p95_ms),
                ("customer's orders p95 ms", b.all.ops[3].p95_ms, now.ops[3].p95_ms),
                ("count p95 ms", b.all.ops[4].p95_ms, now.ops[4].p95_ms),
            ] {
                let _ = writeln!(out, "  {what:<26} {x:>11.1} -> {y:>11.1}  {}", change(x, y));
            }
        }
        for n in &self.notes {
            let _ = writeln!(out, "note: {n}");
        }
        if let Some(e) = &self.migration_error {
            let _ = writeln!(out, "migration failed: {e}");
        }
        out
    }

    /// The report: one self-contained page.
    pub fn html(&self) -> String {
        let mut h = format!(
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>chute simulate {t}</title><style>{STYLE}</style></head><body>\n\
             <h1>chute simulate {t}</h1>\n<p class=\"lead\">An orders application against {t} ({layout}): new orders on a sine wave, \
             updates along each order's lifecycle, reads by id, by customer and counts over a recent range. Blocks read are the \
             server's own counters: pages not found in shared buffers.</p>\n<ul>",
            t = escape(&self.table),
            layout = escape(&self.label())
        );
        for a in &self.asked {
            let _ = write!(h, "<li>{}</li>", escape(a));
        }
        let _ = writeln!(h, "<li>{} connections</li></ul>", self.connections);
        if !self.notes.is_empty() || self.migration_error.is_some() {
            h.push_str("<div class=\"warnings\"><h2>Notes</h2><ul>");
            for n in self.notes.iter().chain(self.migration_error.iter()) {
                let _ = write!(h, "<li>{}</li>", escape(n));
            }
            h.push_str("</ul></div>\n");
        }
        server_table(&mut h, &self.server);
        h.push_str("<h2>Summary</h2>\n<div class=\"wide\"><table class=\"results\"><tr><th>period</th><th>layout</th><th>seconds</th>");
        for k in Kind::ALL {
            let _ = write!(h, "<th>{} asked/s</th><th>done/s</th><th>p95 ms</th>", escape(k.label()));
        }
        h.push_str("<th>table blocks read/s</th><th>table blocks hit/s</th><th>hit %</th><th>WAL MB/s</th></tr>\n");
        let rows =
            self.baseline.iter().map(|b| (format!("before: {}", b.name), &b.all)).chain(self.periods.iter().map(|p| (p.period.clone(), p)));
        for (name, p) in rows {
            let _ = write!(h, "<tr><td>{}</td><td>{}</td><td>{:.1}</td>", escape(&name), escape(&p.layout), p.seconds);
            for o in &p.ops {
                let _ = write!(h, "<td>{:.1}</td><td>{:.1}</td><td>{:.2}</td>", o.requested_per_s, o.achieved_per_s, o.p95_ms);
            }
            let _ = writeln!(
                h,
                "<td>{}</td><td>{}</td><td>{:.1}</td><td>{:.2}</td></tr>",
                short_number(p.table_blks_read_per_s),
                short_number(p.table_blks_hit_per_s),
                p.table_hit_ratio * 100.0,
                p.wal_bytes_per_s / 1e6
            );
        }
        h.push_str("</table></div>\n<h2>Charts</h2>\n");
        for (file, svg) in self.charts() {
            let _ = writeln!(h, "<figure>{}<figcaption>{}</figcaption></figure>", svg.inline(), escape(file));
        }
        h.push_str(
            "<p class=\"note\">Samples are taken every second from pg_stat_database, pg_statio_user_tables and pg_statio_user_indexes \
             (summed over the table's partitions) and pg_current_wal_lsn(); the last sample is taken after the simulator's sessions \
             ended, when the server has flushed their statistics. Latency is the time of the statement alone. The data files are \
             samples.csv, indexes.csv and summary.csv beside this page.</p>\n</body></html>\n",
        );
        h
    }
}
