//! Progress for long work: a bar on a terminal, plain lines otherwise (every
//! `--report-every`, with the period's and the overall rate, as tsbs prints),
//! optional periodic figures in a CSV file for plotting. Libraries report
//! through `LoadProgress`; only this module draws.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

use chute_engine::load::{LoadProgress, LoadStats};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub struct LoadReporter {
    bar: Option<ProgressBar>,
    lines_every: Option<Duration>,
    last_line: Instant,
    last_rows: u64,
    last_secs: f64,
    rates: Option<std::io::BufWriter<std::fs::File>>,
    rates_every: Duration,
    last_rate_row: Instant,
    rates_last_rows: u64,
    rates_last_secs: f64,
    quiet: bool,
}

impl LoadReporter {
    pub fn new(json: bool, report_every: Duration, rates_csv: Option<&std::path::Path>) -> anyhow::Result<Self> {
        let terminal = std::io::stderr().is_terminal() && !json;
        let bar = terminal.then(|| {
            let b = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(4));
            b.set_style(
                ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {wide_bar} {msg}")
                    .expect("static template")
                    .progress_chars("=> "),
            );
            b
        });
        let rates = match rates_csv {
            Some(p) => {
                let mut f = std::io::BufWriter::new(std::fs::File::create(p)?);
                writeln!(f, "seconds,rows,rows_per_second_period,rows_per_second_overall")?;
                Some(f)
            }
            None => None,
        };
        Ok(LoadReporter {
            bar,
            lines_every: (!terminal && !json).then_some(report_every),
            last_line: Instant::now(),
            last_rows: 0,
            last_secs: 0.0,
            rates,
            rates_every: report_every.min(Duration::from_secs(1)),
            last_rate_row: Instant::now(),
            rates_last_rows: 0,
            rates_last_secs: 0.0,
            quiet: json,
        })
    }

    pub fn finish(&mut self) {
        if let Some(b) = &self.bar {
            b.finish_and_clear();
        }
        if let Some(f) = &mut self.rates {
            let _ = f.flush();
        }
    }
}

impl LoadProgress for LoadReporter {
    fn update(&mut self, s: &LoadStats) {
        let overall = s.rows_loaded as f64 / s.seconds.max(1e-9);
        if let Some(b) = &self.bar {
            if let Some(t) = s.bytes_total {
                b.set_length(t);
            }
            b.set_position(s.bytes_read);
            b.set_message(format!("{} rows  {:.0} rows/s  {} rejected", s.rows_loaded, overall, s.rows_rejected));
        }
        if let Some(every) = self.lines_every
            && self.last_line.elapsed() >= every
        {
            let period = s.rows_loaded.saturating_sub(self.last_rows) as f64 / (s.seconds - self.last_secs).max(1e-9);
            eprintln!(
                "chute: at {:.0}s: {} rows loaded, {:.0} rows/s (period), {:.0} rows/s (overall), {} rejected",
                s.seconds, s.rows_loaded, period, overall, s.rows_rejected
            );
            self.last_line = Instant::now();
            self.last_rows = s.rows_loaded;
            self.last_secs = s.seconds;
        }
        if let Some(f) = &mut self.rates
            && self.last_rate_row.elapsed() >= self.rates_every
        {
            let period = s.rows_loaded.saturating_sub(self.rates_last_rows) as f64 / (s.seconds - self.rates_last_secs).max(1e-9);
            let _ = writeln!(f, "{:.3},{},{:.0},{:.0}", s.seconds, s.rows_loaded, period, overall);
            self.last_rate_row = Instant::now();
            self.rates_last_rows = s.rows_loaded;
            self.rates_last_secs = s.seconds;
        }
    }

    fn notice(&mut self, message: &str) {
        if self.quiet {
            return;
        }
        match &self.bar {
            Some(b) => b.println(format!("chute: {message}")),
            None => eprintln!("chute: {message}"),
        }
    }
}
