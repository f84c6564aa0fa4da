//! What a bench run measured, and the files that show it: `results.csv`,
//! `rates.csv`, `report.html` with its charts inline, each chart as its own
//! `.svg`, and a short text table.
//!
//! Everything here is pure (measurements in, text out), so the file formats
//! are tested without a server; the runner writes the files.

use std::fmt::Write;

use crate::cell::{Cell, Loader};
use crate::scenario::Scenario;
use crate::svg::{BarChart, LineChart, Series, Svg, escape, short_number};

const MIB: f64 = 1_048_576.0;

/// Progress of one load: rows loaded after `seconds`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub seconds: f64,
    pub rows: u64,
}

/// One cell's measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct CellResult {
    pub cell: Cell,
    /// Leaf tables of the layout (1 for a plain table).
    pub partitions: i64,
    /// Rows in the table afterwards (`count(*)`).
    pub rows: u64,
    /// Wall time of the load alone (the table, its partitions and the psql
    /// input file were made before the clock started).
    pub seconds: f64,
    /// Bytes sent to the server: binary COPY data for chute, the CSV file for psql.
    pub bytes_sent: u64,
    /// Rows per COPY batch as the loader was configured (chute loaders only).
    pub batch_rows: Option<u64>,
    pub table_bytes: i64,
    pub index_bytes: i64,
    /// WAL written during the load (`pg_current_wal_lsn()` difference).
    pub wal_bytes: i64,
    pub checkpoints_timed: i64,
    pub checkpoints_requested: i64,
    /// Progress over time (chute loaders); psql-copy has its total only.
    pub samples: Vec<Sample>,
    /// Set when chute routed through the parent, with its reason.
    pub via_parent_reason: Option<String>,
    /// The load time of every run of the cell (`--repeat`), fastest first;
    /// the other fields are those of the median run.
    pub runs_seconds: Vec<f64>,
}

impl CellResult {
    pub fn rows_per_s(&self) -> f64 {
        self.rows as f64 / self.seconds.max(1e-9)
    }

    pub fn mb_per_s(&self) -> f64 {
        self.bytes_sent as f64 / MIB / self.seconds.max(1e-9)
    }

    /// Half the range of the runs' times against the median run's, in
    /// percent: how far to trust a difference between cells (0 for one run).
    pub fn spread_percent(&self) -> f64 {
        match (self.runs_seconds.first(), self.runs_seconds.last()) {
            (Some(lo), Some(hi)) if self.runs_seconds.len() > 1 => (hi - lo) / 2.0 / self.seconds.max(1e-9) * 100.0,
            _ => 0.0,
        }
    }

    /// (rows loaded at the end of a window, rows/s during it), in order.
    ///
    /// Rows count as loaded when their batch commits, in steps of whole
    /// batches, so the loader's 250 ms samples are merged into windows of at
    /// least a second (and at least a fiftieth of the load): short enough to
    /// show a rate that falls as the table grows, long enough that one
    /// batch's commit does not look like a burst. The tail after the last
    /// full window (the final drain, where the last batches commit close
    /// together) joins the window before it instead of standing alone as a spike.
    pub fn window_rates(&self) -> Vec<(f64, f64)> {
        let total = self.samples.last().map_or(0.0, |s| s.seconds);
        let min_window = (total / 50.0).max(1.0).min(total);
        let mut out = Vec::new();
        let origin = Sample { seconds: 0.0, rows: 0 };
        // Where the current window starts, and where the one before it started.
        let (mut last, mut before_last) = (origin, origin);
        for (i, s) in self.samples.iter().enumerate() {
            let dt = s.seconds - last.seconds;
            let final_sample = i + 1 == self.samples.len();
            if s.rows <= last.rows || dt <= 0.0 {
                continue;
            }
            if dt >= min_window {
                out.push((s.rows as f64, (s.rows - last.rows) as f64 / dt));
                (before_last, last) = (last, *s);
            } else if final_sample {
                let from = if out.pop().is_some() { before_last } else { last };
                out.push((s.rows as f64, (s.rows - from.rows) as f64 / (s.seconds - from.seconds)));
            }
        }
        out
    }
}

/// The server as the run found it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServerInfo {
    pub version: String,
    /// (name, value as `SHOW` prints it), in a fixed order.
    pub settings: Vec<(String, String)>,
}

/// Everything one `chute bench` run produced.
#[derive(Debug, Clone)]
pub struct BenchRun {
    pub scenario: Scenario,
    /// What the rows are (the workload, its size and shape, its indexes).
    pub data: String,
    pub server: ServerInfo,
    pub results: Vec<CellResult>,
    /// Set when CHECKPOINT before each cell was not allowed.
    pub notes: Vec<String>,
}

/// The settings that decide how fast a server takes rows, in report order.
pub const SETTINGS: &[&str] =
    &["shared_buffers", "max_wal_size", "checkpoint_timeout", "synchronous_commit", "wal_level", "fsync", "full_page_writes"];

impl BenchRun {
    /// Warnings a reader must see before trusting the numbers.
    pub fn warnings(&self) -> Vec<String> {
        let mut w = Vec::new();
        let setting = |name: &str| self.server.settings.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str());
        for r in self.results.iter().filter(|r| r.checkpoints_requested > 0) {
            w.push(format!(
                "cell {}: {} checkpoint(s) requested during the load (WAL reached max_wal_size = {}): checkpoints are occurring too \
                 frequently, so this cell's rate includes checkpoint I/O. Raise max_wal_size to compare layouts without it.",
                r.cell.name,
                r.checkpoints_requested,
                setting("max_wal_size").unwrap_or("?")
            ));
        }
        if setting("fsync") == Some("off") {
            w.push("fsync is off on this server: rates are higher than a durable server reaches.".into());
        }
        w
    }

    pub fn results_csv(&self) -> String {
        let mut out = String::from(
            "scenario,cell,layout,partitions,extra_indexes,order,loader,workers,batch_rows,unlogged,rows,seconds,rows_per_s,mb_per_s,\
             table_bytes,index_bytes,wal_bytes,checkpoints_timed,checkpoints_requested,runs,seconds_min,seconds_max\n",
        );
        for r in &self.results {
            let c = &r.cell;
            let _ = writeln!(
                out,
                "{},{},{},{},{},{},{},{},{},{},{},{:.3},{:.0},{:.2},{},{},{},{},{},{},{:.3},{:.3}",
                csv_field(&self.scenario.name),
                csv_field(&c.name),
                csv_field(&c.layout.to_string()),
                r.partitions,
                c.extra_indexes,
                c.order,
                c.loader,
                c.workers,
                r.batch_rows.map(|b| b.to_string()).unwrap_or_default(),
                c.unlogged,
                r.rows,
                r.seconds,
                r.rows_per_s(),
                r.mb_per_s(),
                r.table_bytes,
                r.index_bytes,
                r.wal_bytes,
                r.checkpoints_timed,
                r.checkpoints_requested,
                r.runs_seconds.len().max(1),
                r.runs_seconds.first().copied().unwrap_or(r.seconds),
                r.runs_seconds.last().copied().unwrap_or(r.seconds)
            );
        }
        out
    }

    /// Rate over time per cell: one line per progress sample (psql-copy: the total).
    pub fn rates_csv(&self) -> String {
        let mut out = String::from("scenario,cell,seconds,rows_loaded,rows_per_s_period,rows_per_s_overall\n");
        for r in &self.results {
            let mut last = Sample { seconds: 0.0, rows: 0 };
            for s in &r.samples {
                let period = if s.seconds > last.seconds { (s.rows - last.rows) as f64 / (s.seconds - last.seconds) } else { 0.0 };
                let _ = writeln!(
                    out,
                    "{},{},{:.3},{},{:.0},{:.0}",
                    csv_field(&self.scenario.name),
                    csv_field(&r.cell.name),
                    s.seconds,
                    s.rows,
                    period,
                    s.rows as f64 / s.seconds.max(1e-9)
                );
                last = *s;
            }
        }
        out
    }

    /// The charts, with the file name each is written to.
    pub fn charts(&self) -> Vec<(&'static str, Svg)> {
        let rate_vs_rows = LineChart {
            title: "Insert rate vs rows already loaded".into(),
            x_label: "rows loaded".into(),
            y_label: "rows/s (windows of 1 s or more)".into(),
            series: self
                .results
                .iter()
                .map(|r| Series {
                    name: r.cell.name.clone(),
                    points: if r.cell.loader == Loader::PsqlCopy { vec![(r.rows as f64, r.rows_per_s())] } else { r.window_rates() },
                })
                .collect(),
            markers: vec![],
        };
        let sorted = LineChart {
            title: "Window rates, sorted (windows of 1 s or more)".into(),
            x_label: "% of the load's windows".into(),
            y_label: "rows/s".into(),
            series: self
                .results
                .iter()
                .filter(|r| r.cell.loader != Loader::PsqlCopy)
                .map(|r| {
                    let mut rates: Vec<f64> = r.window_rates().into_iter().map(|p| p.1).collect();
                    rates.sort_by(|a, b| b.total_cmp(a));
                    let n = rates.len();
                    let points = rates.into_iter().enumerate().map(|(i, v)| (100.0 * (i as f64 + 0.5) / n as f64, v)).collect();
                    Series { name: r.cell.name.clone(), points }
                })
                .collect(),
            markers: vec![],
        };
        let categories: Vec<String> = self.results.iter().map(|r| r.cell.name.clone()).collect();
        let rates = BarChart {
            title: "Rows per second, per cell".into(),
            y_label: "rows/s".into(),
            categories: categories.clone(),
            series: vec![("rows/s".into(), self.results.iter().map(CellResult::rows_per_s).collect())],
        };
        let bytes = BarChart {
            title: "Table, index and WAL bytes, per cell".into(),
            y_label: "bytes".into(),
            categories,
            series: vec![
                ("table".into(), self.results.iter().map(|r| r.table_bytes as f64).collect()),
                ("indexes".into(), self.results.iter().map(|r| r.index_bytes as f64).collect()),
                ("WAL".into(), self.results.iter().map(|r| r.wal_bytes as f64).collect()),
            ],
        };
        vec![
            ("rate-vs-rows.svg", rate_vs_rows.to_svg()),
            ("sorted-rates.svg", sorted.to_svg()),
            ("rows-per-s.svg", rates.to_svg()),
            ("bytes.svg", bytes.to_svg()),
        ]
    }

    /// Load time against the first cell with the same loader, as the
    /// published comparisons state it ("+60% time vs unpartitioned").
    pub fn time_vs_baseline(&self, r: &CellResult) -> String {
        let base = self.results.iter().find(|b| b.cell.loader == r.cell.loader).unwrap_or(r);
        if std::ptr::eq(base, r) {
            return "baseline".into();
        }
        // Rounded first, so a hair faster than the baseline is "+0%", not "-0%".
        let percent = ((r.seconds / base.seconds.max(1e-9) - 1.0) * 100.0).round();
        format!("{:+}%", percent + 0.0)
    }

    /// The text table for stdout.
    pub fn text_table(&self) -> String {
        let width = self.results.iter().map(|r| r.cell.name.len()).max().unwrap_or(4).max(4);
        let repeated = self.results.iter().any(|r| r.runs_seconds.len() > 1);
        let mut out = format!(
            "{:<width$}  {:>10}  {:>8}{}  {:>9}  {:>10}  {:>7}  {:>9}  {:>9}  {:>9}  ckpt t/r\n",
            "cell",
            "rows",
            "seconds",
            if repeated { format!("  {:>6}", "spread") } else { String::new() },
            "time",
            "rows/s",
            "MB/s",
            "table MB",
            "index MB",
            "WAL MB"
        );
        for r in &self.results {
            let spread = if repeated { format!("  {:>6}", format!("±{:.0}%", r.spread_percent())) } else { String::new() };
            let _ = writeln!(
                out,
                "{:<width$}  {:>10}  {:>8.2}{spread}  {:>9}  {:>10.0}  {:>7.1}  {:>9.1}  {:>9.1}  {:>9.1}  {}/{}",
                r.cell.name,
                r.rows,
                r.seconds,
                self.time_vs_baseline(r),
                r.rows_per_s(),
                r.mb_per_s(),
                r.table_bytes as f64 / MIB,
                r.index_bytes as f64 / MIB,
                r.wal_bytes as f64 / MIB,
                r.checkpoints_timed,
                r.checkpoints_requested
            );
        }
        out
    }

    /// The report: one self-contained page (inline CSS and SVG, nothing fetched).
    pub fn html(&self) -> String {
        let s = &self.scenario;
        let mut h = String::new();
        let _ = write!(
            h,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>chute bench {name}</title><style>{STYLE}</style></head><body>\n\
             <h1>chute bench {name}</h1>\n<p class=\"lead\">{what}</p>\n<p class=\"data\">Data: {data}</p>\n",
            name = escape(&s.name),
            what = escape(&s.reproduces),
            data = escape(&self.data)
        );
        let warnings = self.warnings();
        if !warnings.is_empty() {
            h.push_str("<div class=\"warnings\"><h2>Warnings</h2><ul>");
            for w in &warnings {
                let _ = write!(h, "<li>{}</li>", escape(w));
            }
            h.push_str("</ul></div>\n");
        }
        for n in &self.notes {
            let _ = writeln!(h, "<p class=\"note\">{}</p>", escape(n));
        }
        server_table(&mut h, &self.server);
        h.push_str("<h2>Charts</h2>\n");
        for (file, svg) in self.charts() {
            let _ = writeln!(h, "<figure>{}<figcaption>{}</figcaption></figure>", svg.inline(), escape(file));
        }
        h.push_str("<h2>Cells</h2>\n<div class=\"wide\"><table class=\"results\"><tr>");
        for col in [
            "cell",
            "layout",
            "leaves",
            "extra idx",
            "order",
            "loader",
            "workers",
            "batch rows",
            "unlogged",
            "rows",
            "seconds",
            "time vs baseline",
            "rows/s",
            "MB/s",
            "table",
            "indexes",
            "WAL",
            "checkpoints timed",
            "checkpoints requested",
        ] {
            let _ = write!(h, "<th>{col}</th>");
        }
        h.push_str("</tr>\n");
        for r in &self.results {
            let c = &r.cell;
            let ckpt_class = if r.checkpoints_requested > 0 { " class=\"bad\"" } else { "" };
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td>{:.2}{}</td><td>{}</td><td>{:.0}</td><td>{:.1}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td{ckpt_class}>{}</td></tr>",
                escape(&c.name),
                escape(&c.layout.to_string()),
                r.partitions,
                c.extra_indexes,
                c.order,
                c.loader,
                c.workers,
                r.batch_rows.map(|b| b.to_string()).unwrap_or_else(|| "-".into()),
                if c.unlogged { "yes" } else { "no" },
                r.rows,
                r.seconds,
                if r.runs_seconds.len() > 1 {
                    format!(" ±{:.0}% ({} runs)", r.spread_percent(), r.runs_seconds.len())
                } else {
                    String::new()
                },
                self.time_vs_baseline(r),
                r.rows_per_s(),
                r.mb_per_s(),
                mib(r.table_bytes),
                mib(r.index_bytes),
                mib(r.wal_bytes),
                r.checkpoints_timed,
                r.checkpoints_requested
            );
        }
        h.push_str("</table></div>\n");
        for r in self.results.iter().filter(|r| r.via_parent_reason.is_some()) {
            let _ = writeln!(
                h,
                "<p class=\"note\">{}: rows went through the parent ({})</p>",
                escape(&r.cell.name),
                escape(r.via_parent_reason.as_deref().unwrap_or(""))
            );
        }
        h.push_str(
            "<p class=\"note\">Each cell loads the same generated rows into a fresh table after a CHECKPOINT. Rates are wall-clock \
             rows/s of the load alone; \"time vs baseline\" compares the load time with the first cell that uses the same loader. MB/s \
             counts bytes sent (binary COPY for chute, the CSV file for psql-copy). Rows count as loaded when their COPY batch \
             commits, so rates over time move in steps of batches; psql reports no progress, so its cells show their total only. \
             The data files are results.csv and rates.csv beside this page.</p>\n</body></html>\n",
        );
        h
    }
}

/// The "Server" section of a report: version and settings.
pub(crate) fn server_table(h: &mut String, server: &ServerInfo) {
    let _ = write!(h, "<h2>Server</h2>\n<table><tr><th>version</th><td>{}</td></tr>", escape(&server.version));
    for (k, v) in &server.settings {
        let _ = write!(h, "<tr><th>{}</th><td>{}</td></tr>", escape(k), escape(v));
    }
    h.push_str("</table>\n");
}

fn mib(bytes: i64) -> String {
    format!("{} MiB", short_number(bytes as f64 / MIB))
}

/// Quotes a CSV field when it holds a comma, quote or newline.
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) { format!("\"{}\"", s.replace('"', "\"\"")) } else { s.to_owned() }
}

/// The reports' stylesheet (inline, so a page opens from disk).
pub(crate) const STYLE: &str = "body{font-family:sans-serif;margin:2em;max-width:1100px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}\
table{border-collapse:collapse;font-size:.85em}.wide{overflow-x:auto}th,td{border:1px solid #ccc;padding:3px 7px;text-align:left}\
table.results td{text-align:right}table.results td:first-child{text-align:left}\
td.bad{background:#fdd}.warnings{background:#fff4e0;border:1px solid #e0a040;padding:.2em 1em}\
.lead{font-size:1.05em}.note{color:#555;font-size:.9em}figure{margin:1em 0}figcaption{color:#777;font-size:.8em}";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{MatrixOptions, build};

    fn run() -> BenchRun {
        let scenario = build("conditions", &MatrixOptions::new(1000, 2)).unwrap();
        let results = scenario
            .cells
            .iter()
            .enumerate()
            .map(|(i, c)| CellResult {
                cell: c.clone(),
                partitions: 1 + i as i64,
                rows: 1000,
                seconds: 0.5,
                bytes_sent: 82_000,
                batch_rows: Some(10_000),
                table_bytes: 1 << 20,
                index_bytes: 1 << 19,
                wal_bytes: 3 << 20,
                checkpoints_timed: 0,
                checkpoints_requested: i64::from(i == 2),
                samples: vec![Sample { seconds: 0.25, rows: 400 }, Sample { seconds: 0.5, rows: 1000 }],
                via_parent_reason: None,
                runs_seconds: vec![0.5],
            })
            .collect();
        BenchRun {
            scenario,
            data: "conditions: 10 devices".into(),
            server: ServerInfo {
                version: "PostgreSQL 15".into(),
                settings: vec![("max_wal_size".into(), "1GB".into()), ("fsync".into(), "on".into())],
            },
            results,
            notes: vec![],
        }
    }

    #[test]
    fn results_csv_has_a_row_per_cell() {
        let csv = run().results_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("scenario,cell,layout,"));
        assert_eq!(
            lines[2],
            "conditions,weekly,range:1w,2,0,sorted,chute,2,10000,false,1000,0.500,2000,0.16,1048576,524288,3145728,0,0,1,0.500,0.500"
        );
        let cols = lines[0].split(',').count();
        assert!(lines.iter().all(|l| l.split(',').count() == cols));
    }

    #[test]
    fn rates_csv_gives_period_and_overall_rates() {
        let csv = run().rates_csv();
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 1 + 3 * 2);
        assert_eq!(lines[1], "conditions,plain,0.250,400,1600,1600");
        assert_eq!(lines[2], "conditions,plain,0.500,1000,2400,2000");
    }

    #[test]
    fn report_has_every_chart_inline_and_no_urls() {
        let r = run();
        let html = r.html();
        assert_eq!(html.matches("<svg").count(), r.charts().len());
        assert!(!html.contains("http://") && !html.contains("https://"));
        assert!(html.contains("checkpoints are occurring too frequently"));
        assert!(html.contains("<td>monthly</td>"));
        assert!(html.contains("<th>max_wal_size</th><td>1GB</td>"));
        // Every row of the results table has as many cells as its header.
        let table = &html[html.find("<table class=\"results\">").unwrap()..];
        let table = &table[..table.find("</table>").unwrap()];
        let header = table.lines().next().unwrap().matches("<th>").count();
        for row in table.lines().skip(1).filter(|l| l.starts_with("<tr>")) {
            assert_eq!(row.matches("<td").count(), header, "{row}");
        }
    }

    #[test]
    fn warnings_name_the_cell_and_the_setting() {
        let w = run().warnings();
        assert_eq!(w.len(), 1);
        assert!(w[0].starts_with("cell monthly: 1 checkpoint(s) requested"), "{}", w[0]);
        assert!(w[0].contains("max_wal_size = 1GB"));
    }

    #[test]
    fn window_rates_merge_samples_into_windows_of_a_second() {
        let mut r = run().results.remove(0);
        r.samples = (1..=12u32).map(|i| Sample { seconds: f64::from(i) * 0.25, rows: u64::from(i) * 1000 }).collect();
        // 3 s of loading: windows of 1 s, each 4 samples.
        assert_eq!(r.window_rates(), [(4000.0, 4000.0), (8000.0, 4000.0), (12000.0, 4000.0)]);
        // The final drain: 2000 rows committed in the last 0.25 s join the window before.
        r.samples.push(Sample { seconds: 3.25, rows: 14_000 });
        assert_eq!(r.window_rates(), [(4000.0, 4000.0), (8000.0, 4000.0), (14000.0, 6000.0 / 1.25)]);
        r.samples = vec![Sample { seconds: 0.25, rows: 400 }, Sample { seconds: 0.5, rows: 1000 }];
        assert_eq!(r.window_rates(), [(1000.0, 2000.0)], "a short load is one window");
        r.samples.clear();
        assert!(r.window_rates().is_empty());
    }

    #[test]
    fn text_table_lines_up() {
        let t = run().text_table();
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[1].starts_with("plain  "), "{t}");
        assert!(lines[3].ends_with("0/1"), "{t}");
        assert!(lines[1].contains(" baseline "), "{t}");
        assert!(lines[2].contains(" +0% "), "the same time as the baseline: {t}");
        assert!(!t.contains("spread"), "one run has no spread: {t}");
    }

    #[test]
    fn repeated_runs_show_their_spread() {
        let mut r = run();
        r.results[1].runs_seconds = vec![0.45, 0.5, 0.55];
        assert!((r.results[1].spread_percent() - 10.0).abs() < 1e-9);
        assert_eq!(r.results[0].spread_percent(), 0.0);
        let t = r.text_table();
        let lines: Vec<&str> = t.lines().collect();
        // Right-aligned under its header (in characters: ± is two bytes).
        let end_of = |line: &str, text: &str| line[..line.find(text).unwrap() + text.len()].chars().count();
        assert_eq!(end_of(lines[0], "spread"), end_of(lines[2], "±10%"), "{t}");
        assert!(r.results_csv().lines().nth(2).unwrap().ends_with(",3,0.450,0.550"));
        assert!(r.html().contains("<td>0.50 ±10% (3 runs)</td>"));
    }
}
