//! `chute doctor`: the findings, each with its evidence and its fix.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use chute_core::doctor::{Finding, Severity};
use chute_core::ident::QualifiedName;
use chute_engine::doctor::{self, DoctorOptions, Report, SampleOptions};
use clap::Args;

use crate::Outcome;
use crate::args::ConnArgs;
use crate::settings;

pub const DOCTOR_HELP: &str = "EXAMPLES:
    chute doctor                      # every table and the server's settings
    chute doctor metrics events       # these tables (and the server-wide checks)
    chute doctor --json               # machine-readable (schema in the README)
    chute doctor --index-window 30d   # an unused index: no scan for 30 days (default 7d)
    chute doctor metrics --sample today.csv --header   # how sorted is this input, at what cost

Exit status 0 when nothing at warning level or above is found, 1 otherwise,
2 on error: usable from cron or a CI step.";

pub const STATUS_HELP: &str = "EXAMPLES:
    chute status
    chute status --json               # the same document as chute doctor --json

Exit status 0 when chute doctor would find nothing at warning level or above,
1 otherwise, 2 on error.";

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Tables to check (default: every table); server-wide checks always run.
    pub tables: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub thresholds: Thresholds,
    /// A CSV file of rows for TABLE (in its column order): how sorted they are
    /// by the partition key, and what that costs in a trial load into a
    /// scratch copy of the table (removed afterwards).
    #[arg(long, value_name = "FILE")]
    pub sample: Option<PathBuf>,
    /// The sample's first line is a header.
    #[arg(long, requires = "sample")]
    pub header: bool,
    /// Rows of the sample to read.
    #[arg(long, default_value_t = 100_000, requires = "sample", value_name = "N")]
    pub sample_rows: usize,
}

/// What counts as large or costly; shared by `doctor` and `status`.
#[derive(Debug, Args, Clone)]
pub struct Thresholds {
    /// Plain tables with a time column at least this large (MiB, indexes
    /// included) are reported as candidates for partitioning, and partitions
    /// this large that are far larger than the ones before them.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub large_table_mb: i64,
    /// The loader's batch size, to cost the round trip per batch (chute load --batch-mb).
    #[arg(long, default_value_t = 4, value_name = "MIB")]
    pub batch_mb: usize,
    /// How long to watch the WAL grow, in seconds (the rate behind max_wal_size).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub wal_sample: f64,
    /// An index is called unused only after this long without a scan, as
    /// chute has watched it (each run records the indexes' scan counts in
    /// the chute schema); until then: "not enough history yet".
    #[arg(long, default_value = "7d", value_name = "DURATION")]
    pub index_window: String,
}

impl Thresholds {
    pub fn options(&self, tables: &[String]) -> anyhow::Result<DoctorOptions> {
        anyhow::ensure!(self.wal_sample >= 0.0 && self.wal_sample <= 600.0, "--wal-sample takes 0 to 600 seconds");
        Ok(DoctorOptions {
            tables: tables
                .iter()
                .map(|t| QualifiedName::parse(t).with_context(|| format!("table name {t:?}")))
                .collect::<Result<_, _>>()?,
            batch_mb: self.batch_mb.max(1),
            large_table_bytes: self.large_table_mb.max(0) * 1048576,
            wal_sample: Duration::from_secs_f64(self.wal_sample),
            sample: None,
            index_window: (
                chute_core::partman::policy::parse_duration(&self.index_window)
                    .with_context(|| format!("--index-window {:?}: give a duration such as 7d, 36h or 30min", self.index_window))?,
                self.index_window.clone(),
            ),
        })
    }
}

pub async fn run(conn: &ConnArgs, a: DoctorArgs) -> anyhow::Result<Outcome> {
    let opts = settings::target(conn)?;
    let mut o = a.thresholds.options(&a.tables)?;
    o.sample = a.sample.map(|file| SampleOptions { file, header: a.header, max_rows: a.sample_rows.max(1) });
    let report = doctor::run(&opts, &o).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_findings(&report);
    }
    Ok(outcome(&report))
}

/// 1 when a finding at warning level or above exists.
pub fn outcome(report: &Report) -> Outcome {
    if report.healthy { Outcome::Ok } else { Outcome::Rejects }
}

fn print_findings(r: &Report) {
    let problems: Vec<&Finding> = r.findings.iter().filter(|f| f.severity >= Severity::Warning).collect();
    let advice: Vec<&Finding> = r.findings.iter().filter(|f| f.severity < Severity::Warning).collect();
    println!(
        "PostgreSQL {}; round trip {:.2} ms; WAL {:.1} MB/s; index figures since {}",
        r.server_version,
        r.round_trip_ms,
        r.wal_bytes_per_s / 1e6,
        r.stats_since
    );
    println!("index advice: {}", r.index_history.summary());
    println!();
    if problems.is_empty() {
        println!("no problems found");
    }
    for f in problems {
        print_finding(f);
    }
    if !advice.is_empty() {
        println!("advice (info, does not change the exit status):");
        println!();
        for f in advice {
            print_finding(f);
        }
    }
}

fn print_finding(f: &Finding) {
    println!("{:<8} {} [{}]: {}", f.severity.to_string().to_uppercase(), f.object, f.kind, f.summary);
    for e in &f.evidence {
        println!("         evidence ({}): {}", e.view, e.detail);
    }
    for (i, fix) in f.fix.iter().enumerate() {
        println!("         {} {fix}", if i == 0 { "fix:" } else { "    " });
    }
    println!();
}
