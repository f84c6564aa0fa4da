//! `chute status`: one screen on the server, the settings that matter for
//! ingestion, the managed tables and the loads in progress.

use chute_core::doctor::Severity;
use chute_engine::doctor::{self, Report};

use super::doctor::outcome;
use crate::Outcome;
use crate::args::{ConnArgs, StatusArgs};
use crate::settings;

pub async fn run(conn: &ConnArgs, a: StatusArgs) -> anyhow::Result<Outcome> {
    let opts = settings::target(conn)?;
    let report = doctor::run(&opts, &a.thresholds.options(&[])?).await?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_status(&report);
    }
    Ok(outcome(&report))
}

fn print_status(r: &Report) {
    println!("server       PostgreSQL {}, round trip {:.2} ms, WAL {:.1} MB/s", r.server_version, r.round_trip_ms, r.wal_bytes_per_s / 1e6);
    let settings: Vec<String> = doctor::SETTINGS.iter().filter_map(|n| r.settings.get(*n).map(|v| format!("{n}={v}"))).collect();
    for (i, chunk) in settings.chunks(4).enumerate() {
        println!("{} {}", if i == 0 { "settings    " } else { "            " }, chunk.join("  "));
    }
    println!("indexes      {}", r.index_history.summary());
    println!();
    if r.tables.is_empty() {
        println!("tables       none managed yet (chute partition create TABLE --key COLUMN --interval 1d)");
    } else {
        println!("{:<32} {:<27} {:>9} {:>10} {:>9}  last maintenance", "table", "covered until", "ahead", "retention", "default");
        for t in &r.tables {
            println!(
                "{:<32} {:<27} {:>9} {:>10} {:>9}  {}",
                t.table,
                t.covered_until.as_deref().unwrap_or("NOTHING HOLDS NOW"),
                format!("{}/{}", t.intervals_ahead, t.premake),
                if t.due_for_retention == 0 { "-".to_string() } else { format!("{} due", t.due_for_retention) },
                t.rows_in_default.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
                t.last_maintenance.as_deref().unwrap_or("never")
            );
        }
    }
    println!();
    if r.loads_in_progress.is_empty() {
        println!("loads        none in progress");
    } else {
        println!("{:<24} {:<24} {:>12}  started", "load in progress", "table", "rows");
        for l in &r.loads_in_progress {
            println!("{:<24} {:<24} {:>12}  {}", l.load_id, l.table, l.rows_committed, l.started_at);
        }
    }
    println!();
    let problems = r.findings.iter().filter(|f| f.severity >= Severity::Warning).count();
    if problems == 0 {
        println!("health       no problems found");
    } else {
        println!("health       {problems} finding(s) at warning level or above: run chute doctor for evidence and fixes");
        for f in r.findings.iter().filter(|f| f.severity >= Severity::Warning) {
            println!("             {} {}: {}", f.severity, f.object, f.kind);
        }
    }
}
