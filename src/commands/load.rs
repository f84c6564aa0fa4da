//! `chute load`: files or stdin into a table, straight into its leaves.

use chute_engine::load::{self, LoadReport, journal};

use crate::Outcome;
use crate::args::{ConnArgs, LoadArgs};
use crate::progress::LoadReporter;
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, a: LoadArgs) -> anyhow::Result<Outcome> {
    if a.status.is_some() || a.forget.is_some() || a.forget_done_before.is_some() {
        return journal(&settings::target(conn)?, &a).await;
    }
    // Everything about the input is checked before a server is chosen (and perhaps started).
    let plan = settings::load::plan(&a)?;
    let spec = plan.spec(settings::target(conn)?, &a)?;
    if let (true, Some(columnar)) = (a.create, plan.columnar()) {
        create(&spec, columnar.inputs(), &a).await?;
    }
    let mut reporter = LoadReporter::new(a.json, spec.report_every(), a.rates_csv.as_deref())?;
    // A signal: in-flight batches finish, the rest is left for a resume. A
    // second one stops at once: what is not committed rolls back with the
    // connections, and the journal lets a rerun load it.
    let signals = Signals::listen_with(
        spec.cancel(),
        Second::Exit("stopping now without waiting for batches in flight (run the same command again to load the rest)"),
    );
    let report = load::run(spec, &mut reporter).await;
    reporter.finish();
    let report = match (report, signals.outcome()) {
        (Ok(r), _) => r,
        // Stopped by a signal while it failed (or waited for the server, before any row moved).
        (Err(e), Some(outcome)) => {
            eprintln!("chute: stopped: {e:#}");
            return Ok(outcome);
        }
        (Err(e), None) => return Err(e.into()),
    };
    if report.interrupted {
        let how = match report.load_id.as_deref() {
            Some(id) => format!("run the same command again to load the rest (load id {id})"),
            None => "stdin without --load-id cannot be resumed".to_owned(),
        };
        eprintln!("chute: stopped: {} rows committed in this run; {how}", report.stats.rows_loaded);
        for t in &report.committed_through {
            eprintln!("chute: {}: every row before line {} is committed (or rejected)", t.input, t.line);
        }
        if a.json {
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
        return Ok(signals.outcome().unwrap_or(Outcome::Interrupted));
    }
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    Ok(super::ended("load", report.reject_limit_exceeded, report.stats.rows_rejected, a.max_rejects, report.reject_file.as_deref()))
}

/// `--create`: the table from the data's schema, unless it exists.
async fn create(spec: &load::LoadSpec, inputs: &[chute_arrow::ColumnarInput], a: &LoadArgs) -> anyhow::Result<()> {
    use chute_arrow::create::{Created, Partitioning, create_table};
    let partitioning = a.key.clone().zip(a.interval).map(|(key, interval)| Partitioning { key, interval });
    let mut steps = super::partition::step_printer(a.json);
    match create_table(spec.target(), spec.table(), inputs, partitioning.as_ref(), &mut steps).await? {
        Created::Existed => eprintln!("chute: {} exists already: loading into it as it is", spec.table()),
        Created::Made { definition, partitions } => {
            eprintln!("chute: created {} ({definition})", spec.table());
            if let Some(p) = &partitioning {
                eprintln!(
                    "chute: {} is partitioned by {} on {} ({partitions} partitions created); keep it ahead with: chute partition maintain --every 10min",
                    spec.table(),
                    p.interval,
                    p.key
                );
            }
        }
    }
    Ok(())
}

/// `--status`, `--forget` and `--forget-done-before`.
async fn journal(opts: &chute_engine::ConnectOptions, a: &LoadArgs) -> anyhow::Result<Outcome> {
    let client = opts.connect().await?;
    if let Some(age) = a.forget_done_before {
        let gone = journal::forget_done_before(&client, age).await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "forgotten": gone }))?);
        } else {
            for id in &gone {
                println!("forgot {id}");
            }
            eprintln!("chute: forgot {} finished load{} older than {}", gone.len(), if gone.len() == 1 { "" } else { "s" }, humanize(age));
        }
        return Ok(Outcome::Ok);
    }
    if let Some(id) = &a.forget {
        // Scale-out: each data node journals its own rows; forgotten there too.
        let (found, unreachable) = journal::forget_everywhere(&client, id).await?;
        warn(&unreachable);
        if found {
            eprintln!("chute: forgot load {id}; the same command now loads everything again");
            return Ok(Outcome::Ok);
        }
        anyhow::bail!("no load {id:?} in this database (see chute load --status)");
    }
    let id = a.status.as_deref().filter(|s| !s.is_empty());
    let (loads, unreachable) = journal::list_everywhere(&client, id).await?;
    warn(&unreachable);
    if a.json {
        println!("{}", serde_json::to_string_pretty(&loads)?);
    } else if loads.is_empty() {
        println!("no loads recorded in this database");
    } else {
        println!("{:<24} {:<24} {:<12} {:>12} {:>8}  {:<26} inputs", "load id", "table", "status", "rows", "batches", "started");
        for l in loads {
            println!(
                "{:<24} {:<24} {:<12} {:>12} {:>8}  {:<26} {}",
                l.load_id, l.table, l.status, l.rows_committed, l.batches, l.started_at, l.inputs
            );
            // Where a load that did not finish got to, input by input.
            if l.status != "done" && l.status != "running" {
                for t in l.committed_through.iter().flatten() {
                    println!("    {}: every row before line {} is committed", t.input, t.line);
                }
            }
        }
    }
    Ok(Outcome::Ok)
}

fn warn(lines: &[String]) {
    for l in lines {
        eprintln!("chute: warning: {l}");
    }
}

/// A duration as people wrote it (`30d`, `12h`, `90s`).
fn humanize(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0 => format!("{:.1}s", d.as_secs_f64()),
        s if s.is_multiple_of(86_400) => format!("{}d", s / 86_400),
        s if s.is_multiple_of(3600) => format!("{}h", s / 3600),
        s if s.is_multiple_of(60) => format!("{}min", s / 60),
        s => format!("{s}s"),
    }
}

fn print_summary(r: &LoadReport) {
    let s = &r.stats;
    println!("table               {}", r.table);
    println!("rows loaded         {}", s.rows_loaded);
    if s.rows_skipped > 0 {
        println!("already loaded      {} (committed by an earlier run of this load)", s.rows_skipped);
    }
    if let Some(u) = &s.upsert {
        println!("  inserted          {}", u.inserted);
        println!("  updated           {}", u.updated);
        println!("  unchanged         {} (their key was there: kept, or the update would change nothing)", u.unchanged);
    }
    println!("rows rejected       {}{}", s.rows_rejected, r.reject_file.as_ref().map(|f| format!(" (see {f})")).unwrap_or_default());
    println!("input               {:.1} MiB", s.bytes_read as f64 / 1048576.0);
    println!("seconds             {:.2}", s.seconds);
    println!("rows/s              {:.0}", r.rows_per_second);
    println!("MB/s                {:.1}", r.mb_per_second);
    println!("partitions touched  {}", s.partitions_touched);
    println!("partitions created  {}", s.partitions_created);
    if s.partitions_backfilled > 0 || !s.backfill_skipped.is_empty() {
        println!(
            "backfilled          {} (filled before they were attached: rows frozen, indexes built after the rows)",
            s.partitions_backfilled
        );
        if s.partitions_swapped > 0 {
            println!("  swapped in        {} (empty partitions that existed, replaced by their filled successors)", s.partitions_swapped);
        }
        for why in &s.backfill_skipped {
            println!("  normal path       {why}");
        }
    }
    if let Some(why) = &r.via_parent_reason {
        println!("routed by           the server (through the parent): {why}");
    }
}
