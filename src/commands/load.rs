//! `chute load`: files or stdin into a table, straight into its leaves.

use anyhow::Context;
use chute_core::ident::QualifiedName;
use chute_core::partman::policy::parse_duration;
use chute_core::value::EpochUnit;
use chute_engine::load::{self, InputFormat, InputSpec, LoadReport, LoadSpec};

use crate::Outcome;
use crate::args::{ConnArgs, EpochArg, FormatArg, GenArg, LoadArgs};
use crate::progress::LoadReporter;
use crate::settings;

pub async fn run(conn: &ConnArgs, a: LoadArgs) -> anyhow::Result<Outcome> {
    let opts = settings::target(conn)?;
    let tsbs = a.format == FormatArg::Tsbs;
    anyhow::ensure!(
        tsbs || a.interval.is_none(),
        "--interval goes with --format tsbs; for other formats make the table with chute partition create"
    );
    // With tsbs the tables come from the file, so every argument is a file.
    let (table, files) = if tsbs {
        (QualifiedName::parse("tsbs")?, std::iter::once(a.table.clone()).chain(a.files.iter().cloned()).collect::<Vec<_>>())
    } else {
        (QualifiedName::parse(&a.table)?, a.files.clone())
    };
    let inputs: Vec<InputSpec> =
        if files.is_empty() { vec![InputSpec::Stdin] } else { files.iter().map(|f| InputSpec::parse(f)).collect() };
    anyhow::ensure!(inputs.iter().filter(|i| **i == InputSpec::Stdin).count() <= 1, "stdin (-) can be read only once");
    let mut spec = LoadSpec::new(opts, table, inputs);
    spec.format = match a.format {
        FormatArg::Csv => InputFormat::Csv,
        FormatArg::Text => InputFormat::Text,
        FormatArg::Jsonl => InputFormat::Jsonl,
        FormatArg::Tsbs => InputFormat::Tsbs,
    };
    spec.tsbs_interval = a.interval.clone();
    if let Some(g) = a.generate {
        let from = chute_core::partman::policy::parse_instant(&a.from, &jiff::tz::TimeZone::UTC).context("--from")?;
        let name = super::r#gen::workload_name(g);
        let params = chute_core::generate::GenParams {
            seed: a.seed,
            scale: if g == GenArg::Conditions { a.devices.max(1) } else { a.scale.unwrap_or(0) },
            from_micros: from,
            to_micros: None,
            step_micros: 10_000_000,
            fields: a.fields,
        };
        match chute_core::generate::workload(name, a.rows, &params).map_err(anyhow::Error::msg)? {
            chute_core::generate::AnyWorkload::Rows(w) => spec.generator = Some((w, a.rows)),
            chute_core::generate::AnyWorkload::Stream(_) => anyhow::bail!(
                "{name} makes a tsbs file, not rows of one table: chute gen {name} --out {name}.tsbs && chute load --format tsbs {name}.tsbs"
            ),
        }
    }
    spec.header = a.header;
    spec.delimiter = match a.delimiter {
        Some(c) if c.is_ascii() => Some(c as u8),
        Some(c) => anyhow::bail!("--delimiter must be a single ASCII character, not {c:?}"),
        None => None,
    };
    spec.null = a.null.clone();
    spec.columns = a.columns.clone();
    spec.epoch = a.epoch.map(|e| match e {
        EpochArg::S => EpochUnit::Seconds,
        EpochArg::Ms => EpochUnit::Millis,
        EpochArg::Us => EpochUnit::Micros,
        EpochArg::Ns => EpochUnit::Nanos,
    });
    if let Some(w) = a.workers {
        anyhow::ensure!(w >= 1, "--workers must be at least 1");
        spec.workers = w;
    }
    if let Some(p) = a.parse_threads {
        anyhow::ensure!(p >= 1, "--parse-threads must be at least 1");
        spec.parse_threads = p;
    }
    anyhow::ensure!(a.batch_mb >= 1 && a.memory_mb >= 8, "--batch-mb must be at least 1 and --memory-mb at least 8");
    spec.batch_bytes = a.batch_mb << 20;
    spec.memory_budget = a.memory_mb << 20;
    spec.batch_bytes = spec.batch_bytes.min(spec.memory_budget / 4);
    spec.via_parent = a.via_parent;
    spec.no_create_partitions = a.no_create_partitions;
    spec.reject_file = a.reject_file.clone();
    spec.max_rejects = a.max_rejects;
    spec.report_every = parse_duration(&a.report_every).context("--report-every")?;
    let mut reporter = LoadReporter::new(a.json, spec.report_every, a.rates_csv.as_deref())?;
    let report = load::run(spec, &mut reporter).await;
    reporter.finish();
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    Ok(if report.reject_limit_exceeded {
        eprintln!(
            "chute: error: more than {} rows were rejected; the load stopped (see {})",
            a.max_rejects.unwrap_or(0),
            report.reject_file.as_deref().unwrap_or("the reject file")
        );
        Outcome::Error
    } else if report.stats.rows_rejected > 0 {
        Outcome::Rejects
    } else {
        Outcome::Ok
    })
}

fn print_summary(r: &LoadReport) {
    let s = &r.stats;
    println!("table               {}", r.table);
    println!("rows loaded         {}", s.rows_loaded);
    println!("rows rejected       {}{}", s.rows_rejected, r.reject_file.as_ref().map(|f| format!(" (see {f})")).unwrap_or_default());
    println!("input               {:.1} MiB", s.bytes_read as f64 / 1048576.0);
    println!("seconds             {:.2}", s.seconds);
    println!("rows/s              {:.0}", r.rows_per_second);
    println!("MB/s                {:.1}", r.mb_per_second);
    println!("partitions touched  {}", s.partitions_touched);
    println!("partitions created  {}", s.partitions_created);
    if let Some(why) = &r.via_parent_reason {
        println!("routed by           the server (through the parent): {why}");
    }
}
