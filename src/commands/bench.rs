//! `chute bench`: a published loading experiment, rerun on this server.

use std::path::PathBuf;

use anyhow::Context;
use chute_bench::run::{self, BenchProgress, BenchTarget};
use chute_bench::workload::WorkloadKind;
use chute_bench::{Cell, CellResult, Layout, Loader, MatrixOptions, Order, scenario};
use chute_engine::connect::ConnectOptions;

use crate::Outcome;
use crate::args::{BenchArgs, ConnArgs};
use crate::settings;

pub async fn run(conn: &ConnArgs, a: BenchArgs) -> anyhow::Result<Outcome> {
    let name = a.scenario.name();
    let options = matrix_options(&a)?;
    let scenario = scenario::build(name, &options).map_err(anyhow::Error::msg)?;
    let workloads = run::workloads(&scenario, a.seed).with_context(|| format!("chute bench {name}"))?;
    if a.dry_run {
        println!("-- chute bench {name}: {} cells (dry run: nothing was run)", scenario.cells.len());
        if let Some(w) = workloads.first() {
            println!("-- data: {}", w.description);
        }
        for c in &scenario.cells {
            println!("{:<24} {}", c.name, c.describe());
        }
        return Ok(Outcome::Ok);
    }
    let opts = settings::target(conn)?;
    // psql gets the user's own --url when there is one, without its
    // password: that goes in psql's environment, where other users cannot
    // read it (a command line is public in /proc).
    let psql_conninfo = match &conn.url {
        Some(url) => ConnectOptions::conninfo_without_password(url)?,
        None => opts.display_url(),
    };
    let target = BenchTarget { options: opts, psql_conninfo };
    let out = a.out.clone().unwrap_or_else(|| PathBuf::from("bench-out").join(name));
    eprintln!("chute: bench {name}: {} cells of {} rows on {}", scenario.cells.len(), a.rows, target.options.endpoint_label());
    let result = run::run(scenario, a.seed, &target, &out, &mut StderrProgress).await.with_context(|| format!("chute bench {name}"))?;
    print!("{}", result.text_table());
    for w in result.warnings() {
        println!("warning: {w}");
    }
    println!("wrote {}/{{results.csv, rates.csv, report.html, *.svg}}", out.display());
    Ok(Outcome::Ok)
}

fn matrix_options(a: &BenchArgs) -> anyhow::Result<MatrixOptions> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut o = MatrixOptions::new(a.rows, cores);
    o.workers = a.workers.clone();
    o.batch_rows = a.batch_rows.clone();
    o.unlogged = a.unlogged;
    o.repeat = a.repeat;
    o.partitions = a.partitions.clone();
    o.indexes = a.indexes.clone();
    o.layouts = a.layout.iter().map(|l| Layout::parse(l)).collect::<Result<_, _>>().map_err(anyhow::Error::msg).context("--layout")?;
    o.orders = a.order.iter().map(|l| Order::parse(l)).collect::<Result<_, _>>().map_err(anyhow::Error::msg).context("--order")?;
    o.workload = a.workload.as_deref().map(WorkloadKind::parse).transpose().map_err(anyhow::Error::msg).context("--workload")?;
    o.loaders = a.loader.iter().map(|l| Loader::parse(l)).collect::<Result<_, _>>().map_err(anyhow::Error::msg).context("--loader")?;
    Ok(o)
}

/// One line per cell on stderr, as `chute load` prints without a terminal.
struct StderrProgress;

impl BenchProgress for StderrProgress {
    fn cell_started(&mut self, index: usize, total: usize, cell: &Cell) {
        eprintln!("chute: cell {}/{total} {}: {}", index + 1, cell.name, cell.describe());
    }

    fn cell_finished(&mut self, r: &CellResult) {
        let spread = if r.runs_seconds.len() > 1 {
            format!(" (median of {} runs, ±{:.0}%)", r.runs_seconds.len(), r.spread_percent())
        } else {
            String::new()
        };
        eprintln!("chute:   {} rows in {:.2} s: {:.0} rows/s{spread}", r.rows, r.seconds, r.rows_per_s());
    }

    fn notice(&mut self, message: &str) {
        eprintln!("chute: {message}");
    }
}
