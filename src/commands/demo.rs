//! `chute demo`: the main job end to end, with a summary a person can read.

use std::io::IsTerminal;

use chute_engine::demo::{DemoReport, DemoSpec};
use chute_engine::load::{LoadProgress, LoadStats};
use indicatif::{ProgressBar, ProgressStyle};

use crate::Outcome;
use crate::args::{ConnArgs, DemoArgs};
use crate::settings;

pub async fn run(conn: &ConnArgs, a: DemoArgs) -> anyhow::Result<Outcome> {
    anyhow::ensure!(a.rows > 0, "--rows must be at least 1");
    anyhow::ensure!(a.days > 0, "--days must be at least 1");
    let opts = settings::target(conn)?;
    if let Some(n) = a.nodes {
        anyhow::ensure!(n > 0, "--nodes must be at least 1");
        // On the embedded server: its data nodes, started and recorded here.
        if conn.url.is_none() && !chute_engine::connect::env_names_a_server(&chute_engine::connect::ProcessEnv) {
            super::local_nodes::start(&settings::local_server(conn.data_dir.clone())?, n)?;
        }
    }
    let today = jiff::Timestamp::now().as_second().div_euclid(86_400) * 86_400;
    let spec = DemoSpec {
        rows: a.rows,
        devices: a.devices,
        days: a.days,
        seed: a.seed,
        end_micros: today * 1_000_000,
        shards: a.nodes.map(|n| n * 2),
    };
    let mut bar = RowsBar::new(a.rows, a.json);
    if !a.json {
        eprintln!("chute: loading {} generated rows into chute_demo.conditions on {}", a.rows, opts.endpoint_label());
    }
    let report = chute_engine::demo::run(&opts, &spec, &mut bar).await;
    bar.0.finish_and_clear();
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    Ok(Outcome::Ok)
}

/// A bar over generated rows.
struct RowsBar(ProgressBar);

impl RowsBar {
    fn new(rows: u64, json: bool) -> Self {
        if std::io::stderr().is_terminal() && !json {
            let b = ProgressBar::new(rows);
            b.set_style(ProgressStyle::with_template("{bar:40} {pos}/{len} rows  {per_sec}  eta {eta}").expect("static template"));
            RowsBar(b)
        } else {
            RowsBar(ProgressBar::hidden())
        }
    }
}

impl LoadProgress for RowsBar {
    fn update(&mut self, s: &LoadStats) {
        self.0.set_position(s.rows_loaded);
    }

    fn notice(&mut self, message: &str) {
        if !self.0.is_hidden() {
            self.0.println(format!("chute: {message}"));
        }
    }
}

fn print_summary(r: &DemoReport) {
    println!("table            {}", r.table);
    println!("rows loaded      {}", r.rows);
    println!("seconds          {:.2}", r.seconds);
    println!("rows/s           {:.0}", r.rows_per_second);
    println!("partitions used  {} of {}", r.partitions_used, r.partitions);
    if r.nodes > 0 {
        println!("data nodes       {} ({} shards per day, each node loaded directly)", r.nodes, r.nodes * 2);
    } else {
        println!("table size       {:.1} MiB (with indexes)", r.table_bytes as f64 / 1048576.0);
    }
    // The version number only: a distribution's suffix (`(Debian 15.18-0+deb12u1)`) is in --json.
    println!("server           PostgreSQL {}", r.server_version.split_whitespace().next().unwrap_or_default());
}
