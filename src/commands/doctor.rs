//! `chute doctor`: the findings, each with its evidence and its fix.

use std::time::Duration;

use anyhow::Context;
use chute_core::doctor::{Finding, Severity};
use chute_core::ident::QualifiedName;
use chute_engine::doctor::{self, DoctorOptions, Report, SampleOptions};

use crate::Outcome;
use crate::args::{ConnArgs, DoctorArgs, Thresholds};
use crate::settings;

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
