//! `chute simulate`: an orders application's workload against a table, with
//! the server's own counters, before and after partitioning (or during
//! `chute migrate`).

use std::time::Duration;

use anyhow::Context;
use chute_bench::simulate::history::{self, HistorySpec};
use chute_bench::simulate::migration::MigrateSpec;
use chute_bench::simulate::ops::Kind;
use chute_bench::simulate::sample::Sample;
use chute_bench::simulate::{self, SimError, SimProgress, SimSpec};
use chute_core::ident::QualifiedName;
use chute_core::partman::interval::Span;
use chute_core::partman::policy::parse_duration;

use super::partition::exec_settings;
use crate::Outcome;
use crate::args::{ConnArgs, SimulateArgs};
use crate::progress::LoadReporter;
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, a: SimulateArgs) -> anyhow::Result<Outcome> {
    // Every flag is checked before a server is chosen or connected to.
    let table = QualifiedName::parse(&a.table)?;
    let seconds = |flag: &str, v: &str| -> anyhow::Result<f64> { Ok(parse_duration(v).with_context(|| flag.to_owned())?.as_secs_f64()) };
    let duration_s = seconds("--duration", &a.duration)?;
    let wave_s = seconds("--wave", &a.wave)?;
    let update_after_s = seconds("--update-after", &a.update_after)?;
    let count_range_s = seconds("--count-range", &a.count_range)?;
    let history_s = seconds("--history", &a.history)?;
    anyhow::ensure!(a.writes_per_s >= 0.0 && a.reads_per_s >= 0.0, "--writes-per-s and --reads-per-s cannot be negative");
    anyhow::ensure!(
        a.writes_per_s + a.reads_per_s > 0.0 || duration_s == 0.0,
        "--writes-per-s and --reads-per-s are both 0: nothing to simulate"
    );
    anyhow::ensure!((0.0..=1.0).contains(&a.floor), "--floor is a fraction of the peak, from 0 to 1");
    anyhow::ensure!(duration_s > 0.0 || a.create, "--duration 0 only makes sense with --create (make the table and stop)");
    anyhow::ensure!(count_range_s > 0.0, "--count-range must be longer than zero");
    let read_mix = read_mix(&a.read_mix)?;
    let migrate = if a.during_migrate {
        settings::check_interval("--migrate-interval", &a.migrate_interval)?;
        anyhow::ensure!(a.batch_rows > 0, "--batch-rows must be above 0");
        Some(MigrateSpec {
            after_s: seconds("--migrate-after", &a.migrate_after)?,
            interval: Span::parse(&a.migrate_interval)?,
            premake: a.premake,
            batch_rows: a.batch_rows,
            rows_per_s: a.split_rows_per_s,
            exec: exec_settings(&a.lock)?,
        })
    } else {
        None
    };
    if let Some(dir) = &a.compare {
        anyhow::ensure!(
            dir.join("summary.csv").is_file(),
            "--compare {}: no summary.csv there; name the --out directory of an earlier chute simulate",
            dir.display()
        );
    }
    let options = settings::target(conn)?;
    let signals = Signals::listen(Second::Wait);
    let cancel = signals.flag();
    let stopped = || signals.outcome();

    if a.create {
        let spec = HistorySpec {
            rows: a.rows,
            history_s: history_s as i64,
            text_columns: a.columns,
            customers: a.customers.unwrap_or((a.rows / 20).max(1000)),
            seed: a.seed,
        };
        eprintln!("chute: making {table} with {} orders over {} ({} text columns)", spec.rows, a.history, spec.text_columns);
        let mut reporter = LoadReporter::new(a.json, Duration::from_secs(10), None)?;
        let created =
            history::create(&options, &table, &a.key, &spec, chute_engine::clock::now_micros(), cancel.clone(), &mut reporter).await;
        reporter.finish();
        match created {
            Ok(c) => eprintln!(
                "chute: {} has {} orders ({} loaded before, by an interrupted --create), {:.0} MiB of table and {:.0} MiB of indexes, in {:.1} s",
                c.table,
                c.rows,
                c.rows_resumed,
                c.table_bytes as f64 / 1048576.0,
                c.index_bytes as f64 / 1048576.0,
                c.seconds
            ),
            Err(SimError::Interrupted(m)) => {
                eprintln!("chute: {m}");
                return Ok(stopped().unwrap_or(Outcome::Interrupted));
            }
            Err(e) => return Err(e.into()),
        }
        if duration_s == 0.0 {
            return Ok(stopped().unwrap_or(Outcome::Ok));
        }
    }

    let spec = SimSpec {
        options,
        table,
        key: a.key.clone(),
        duration_s,
        writes_per_s: a.writes_per_s,
        reads_per_s: a.reads_per_s,
        wave_s,
        floor: a.floor,
        read_mix,
        update_after_s,
        customer_days: a.customer_days,
        count_range_s,
        connections: a.connections,
        migrate,
        compare: a.compare.clone(),
        out_dir: a.out.clone(),
        seed: a.seed,
        cancel: cancel.clone(),
    };
    let run = simulate::run(spec, &mut StderrProgress { quiet: a.json, every: 10, seen: 0 }).await;
    let run = run.context("chute simulate")?;
    if a.json {
        let json = serde_json::json!({
            "table": run.table,
            "connections": run.connections,
            "asked": run.asked,
            "periods": run.periods,
            "markers": run.markers.iter().map(|(t, p)| serde_json::json!({"seconds": t, "phase": p})).collect::<Vec<_>>(),
            "notes": run.notes,
            "migration_error": run.migration_error,
            "compared_with": run.baseline.as_ref().map(|b| serde_json::json!({"dir": b.dir, "all": b.all})),
            "out": a.out.display().to_string(),
        });
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        print!("{}", run.text());
        println!("wrote {}/{{samples.csv, indexes.csv, summary.csv, report.html, *.svg}}", a.out.display());
    }
    if let Some(o) = stopped() {
        eprintln!("chute: stopped early; what was measured until then is in {}", a.out.display());
        return Ok(o);
    }
    if let Some(e) = &run.migration_error {
        eprintln!("chute: the migration failed: {e}");
        return Ok(Outcome::Error);
    }
    Ok(Outcome::Ok)
}

/// `70,25,5` as fractions of the reads.
fn read_mix(text: &str) -> anyhow::Result<[f64; 3]> {
    let parts: Vec<f64> = text
        .split(',')
        .map(|p| p.trim().parse::<f64>().ok().filter(|v| *v >= 0.0))
        .collect::<Option<_>>()
        .with_context(|| format!("--read-mix {text:?}: three shares in percent, e.g. 70,25,5"))?;
    anyhow::ensure!(parts.len() == 3, "--read-mix {text:?}: three shares (by id, by customer, counts), e.g. 70,25,5");
    let sum: f64 = parts.iter().sum();
    anyhow::ensure!(sum > 0.0, "--read-mix {text:?}: the shares add up to 0");
    Ok([parts[0] / sum, parts[1] / sum, parts[2] / sum])
}

/// A line every ten seconds on stderr (none with --json).
struct StderrProgress {
    quiet: bool,
    every: usize,
    seen: usize,
}

impl SimProgress for StderrProgress {
    fn notice(&mut self, message: &str) {
        eprintln!("chute: {message}");
    }

    fn sample(&mut self, s: &Sample) {
        self.seen += 1;
        if self.quiet || !self.seen.is_multiple_of(self.every) {
            return;
        }
        let reads: f64 = [Kind::ReadId, Kind::ReadCustomer, Kind::ReadCount].iter().map(|k| s.rate(*k)).sum();
        eprintln!(
            "chute: at {:.0}s ({}): {:.0} inserts/s, {:.0} updates/s, {:.0} reads/s; table blocks read {:.0}/s, hit {:.0}/s",
            s.t,
            s.phase,
            s.rate(Kind::Insert),
            s.rate(Kind::Update),
            reads,
            s.per_s(s.server.table_blks_read()),
            s.per_s(s.server.table_blks_hit())
        );
    }
}
