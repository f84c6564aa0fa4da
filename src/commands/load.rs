//! `chute load`: files or stdin into a table, straight into its leaves.

use anyhow::Context;
use chute_core::ident::QualifiedName;
use chute_core::partman::policy::parse_duration;
use chute_core::value::EpochUnit;
use chute_engine::load::{self, InputFormat, InputSpec, LoadReport, LoadSpec};

use crate::Outcome;
use crate::args::{BackfillArg, ConnArgs, EpochArg, FormatArg, GenArg, LoadArgs};
use crate::progress::LoadReporter;
use crate::settings;

pub async fn run(conn: &ConnArgs, a: LoadArgs) -> anyhow::Result<Outcome> {
    // Flags are checked before a server is chosen, started or connected to.
    if let Some(i) = &a.interval {
        settings::check_interval("--interval", i)?;
    }
    if a.status.is_some() || a.forget.is_some() || a.forget_done_before.is_some() {
        return journal(&settings::target(conn)?, &a).await;
    }
    let tsbs = a.format == FormatArg::Tsbs;
    let stream_gen = matches!(a.generate, Some(GenArg::Iot | GenArg::Devops));
    anyhow::ensure!(
        tsbs || stream_gen || a.interval.is_none(),
        "--interval goes with --format tsbs and --gen iot|devops; for other formats make the table with chute partition create"
    );
    anyhow::ensure!(
        tsbs || stream_gen || a.schema.is_none(),
        "--schema goes with --format tsbs and --gen iot|devops, whose files name their own tables"
    );
    // Everything about the input is checked before a server is chosen (and
    // perhaps started).
    let what = match a.generate {
        None => {
            let given = a.gen_options.given();
            anyhow::ensure!(given.is_empty(), "{} go{} with --gen", given.join(", "), if given.len() == 1 { "es" } else { "" });
            let table_arg = a.table.clone().expect("clap requires TABLE without --gen, --status or --forget");
            // With tsbs the tables come from the file, so every argument is a file.
            let (table, files) = if tsbs {
                (QualifiedName::parse("tsbs")?, std::iter::once(table_arg.clone()).chain(a.files.iter().cloned()).collect::<Vec<_>>())
            } else {
                (QualifiedName::parse(&table_arg)?, a.files.clone())
            };
            let inputs: Vec<InputSpec> =
                if files.is_empty() { vec![InputSpec::Stdin] } else { files.iter().map(|f| InputSpec::parse(f)).collect() };
            anyhow::ensure!(inputs.iter().filter(|i| **i == InputSpec::Stdin).count() <= 1, "stdin (-) can be read only once");
            let format = match a.format {
                FormatArg::Csv => InputFormat::Csv,
                FormatArg::Text => InputFormat::Text,
                FormatArg::Jsonl => InputFormat::Jsonl,
                FormatArg::Tsbs => InputFormat::Tsbs,
            };
            Input { table, inputs, format, generator: None }
        }
        Some(g) => generated(&a, g)?,
    };
    let mut spec = LoadSpec::new(settings::target(conn)?, what.table, what.inputs);
    spec.format = what.format;
    spec.generator = what.generator;
    spec.tsbs_interval = a.interval.clone();
    spec.tsbs_schema = a.schema.clone();
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
    spec.backfill = match a.backfill {
        BackfillArg::Auto => chute_engine::load::Backfill::Auto,
        BackfillArg::On => chute_engine::load::Backfill::On,
        BackfillArg::Off => chute_engine::load::Backfill::Off,
    };
    anyhow::ensure!(
        a.backfill_index_memory.chars().all(|c| c.is_ascii_alphanumeric())
            && a.backfill_index_memory.starts_with(|c: char| c.is_ascii_digit()),
        "--backfill-index-memory takes a size such as 256MB or 1GB"
    );
    spec.backfill_index_memory = a.backfill_index_memory.clone();
    spec.reject_file = a.reject_file.clone();
    spec.max_rejects = a.max_rejects;
    spec.report_every = parse_duration(&a.report_every).context("--report-every")?;
    spec.load_id = a.load_id.clone();
    spec.wait = a.wait;
    spec.retry_for = parse_duration(&a.retry_for).context("--retry-for")?;
    spec.atomic = a.atomic;
    spec.flush_every = match a.flush_every.as_deref() {
        Some("off") => None,
        Some(d) => {
            let every = parse_duration(d).context("--flush-every")?;
            anyhow::ensure!(!every.is_zero(), "--flush-every must be longer than zero (or off)");
            Some(every)
        }
        None if spec.inputs.contains(&InputSpec::Stdin) => Some(std::time::Duration::from_secs(1)),
        None => None,
    };
    let mut reporter = LoadReporter::new(a.json, spec.report_every, a.rates_csv.as_deref())?;
    // Ctrl-C or SIGTERM: in-flight batches finish, the rest is left for a resume.
    let signal = std::sync::Arc::new(std::sync::atomic::AtomicU8::new(0));
    let watcher = {
        let (cancel, signal) = (spec.cancel.clone(), signal.clone());
        tokio::spawn(async move {
            let code = tokio::select! {
                _ = tokio::signal::ctrl_c() => Outcome::Interrupted,
                _ = super::partition::sigterm() => Outcome::Terminated,
            };
            signal.store(code as u8, std::sync::atomic::Ordering::SeqCst);
            cancel.store(true, std::sync::atomic::Ordering::SeqCst);
            // Still listening: a second signal stops at once. What is not
            // committed rolls back with the connections, and the journal
            // lets a rerun load it.
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = super::partition::sigterm() => {}
            }
            eprintln!(
                "chute: second signal; stopping now without waiting for batches in flight (run the same command again to load the rest)"
            );
            std::process::exit(code as i32);
        })
    };
    let report = load::run(spec, &mut reporter).await;
    watcher.abort();
    reporter.finish();
    let report = report?;
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
        return Ok(if signal.load(std::sync::atomic::Ordering::SeqCst) == Outcome::Terminated as u8 {
            Outcome::Terminated
        } else {
            Outcome::Interrupted
        });
    }
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

/// What a load reads and where it goes.
struct Input {
    table: QualifiedName,
    inputs: Vec<InputSpec>,
    format: InputFormat,
    generator: Option<(std::sync::Arc<dyn chute_core::generate::Workload>, u64)>,
}

/// A load of generated data: rows of TABLE, or a tsbs stream that names its own tables.
fn generated(a: &LoadArgs, g: GenArg) -> anyhow::Result<Input> {
    let name = super::r#gen::workload_name(g);
    super::r#gen::check_options(&a.gen_options, g, None)?;
    let stream = matches!(g, GenArg::Iot | GenArg::Devops);
    let rows = super::r#gen::rows(&a.gen_options, stream);
    let params = super::r#gen::params(&a.gen_options, None)?;
    match chute_core::generate::workload(name, rows, &params).map_err(anyhow::Error::msg)? {
        chute_core::generate::AnyWorkload::Rows(w) => {
            let table = a.table.as_deref().ok_or_else(|| {
                anyhow::anyhow!(
                    "{name} makes rows of one table: name it, e.g. chute gen {name} --create | psql && chute load {table} --gen {name}",
                    table = super::r#gen::default_table(g)
                )
            })?;
            Ok(Input { table: QualifiedName::parse(table)?, inputs: vec![], format: InputFormat::Csv, generator: Some((w, rows)) })
        }
        chute_core::generate::AnyWorkload::Stream(_) => {
            let tables = if g == GenArg::Iot { "tags, readings and diagnostics" } else { "tags and cpu" };
            anyhow::ensure!(
                a.table.is_none(),
                "{name} makes its own tables ({tables}): leave out {}; --schema NAME puts them in a schema of their own",
                a.table.as_deref().unwrap_or_default()
            );
            let input = chute_engine::load::source::GeneratedInput::stream(name, rows, &params).map_err(anyhow::Error::msg)?;
            let input = InputSpec::Generated(input);
            Ok(Input { table: QualifiedName::parse("tsbs")?, inputs: vec![input], format: InputFormat::Tsbs, generator: None })
        }
    }
}

/// `--status`, `--forget` and `--forget-done-before`.
async fn journal(opts: &chute_engine::ConnectOptions, a: &LoadArgs) -> anyhow::Result<Outcome> {
    let age = a.forget_done_before.as_deref().map(|d| parse_duration(d).context("--forget-done-before")).transpose()?;
    let client = opts.connect().await?;
    if let Some(age) = age {
        let gone = chute_engine::load::journal::forget_done_before(&client, age).await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&serde_json::json!({ "forgotten": gone }))?);
        } else {
            for id in &gone {
                println!("forgot {id}");
            }
            eprintln!(
                "chute: forgot {} finished load{} older than {}",
                gone.len(),
                if gone.len() == 1 { "" } else { "s" },
                a.forget_done_before.as_deref().unwrap_or_default()
            );
        }
        return Ok(Outcome::Ok);
    }
    if let Some(id) = &a.forget {
        // Scale-out: each data node journals its own rows; forgotten there too.
        let mut on_nodes = false;
        for (node, c) in node_clients(&client).await {
            on_nodes |= chute_engine::load::journal::forget(&c, id).await.with_context(|| format!("on data node {}", node))?;
        }
        if chute_engine::load::journal::forget(&client, id).await? || on_nodes {
            eprintln!("chute: forgot load {id}; the same command now loads everything again");
            return Ok(Outcome::Ok);
        }
        anyhow::bail!("no load {id:?} in this database (see chute load --status)");
    }
    let id = a.status.as_deref().filter(|s| !s.is_empty());
    let mut loads = chute_engine::load::journal::list(&client, id).await?;
    // Scale-out: a distributed load's rows are journaled on the data nodes.
    for (_, c) in node_clients(&client).await {
        for n in chute_engine::load::journal::list(&c, id).await.unwrap_or_default() {
            if let Some(l) = loads.iter_mut().find(|l| l.load_id == n.load_id) {
                l.rows_committed += n.rows_committed;
                l.batches += n.batches;
                l.targets += n.targets;
            }
        }
    }
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

fn print_summary(r: &LoadReport) {
    let s = &r.stats;
    println!("table               {}", r.table);
    println!("rows loaded         {}", s.rows_loaded);
    if s.rows_skipped > 0 {
        println!("already loaded      {} (committed by an earlier run of this load)", s.rows_skipped);
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
        for why in &s.backfill_skipped {
            println!("  normal path       {why}");
        }
    }
    if let Some(why) = &r.via_parent_reason {
        println!("routed by           the server (through the parent): {why}");
    }
}

/// The data nodes recorded on this server (scale-out), connected; a node
/// that cannot be reached is named on stderr and left out.
async fn node_clients(client: &chute_engine::cluster::Client) -> Vec<(String, chute_engine::cluster::Client)> {
    let nodes = chute_engine::cluster::all_node_options(client, &chute_engine::connect::ProcessEnv).await.unwrap_or_default();
    let mut out = Vec::new();
    for (n, o) in nodes {
        match o.connect().await {
            Ok(c) => out.push((n.name, c)),
            Err(e) => eprintln!("chute: warning: data node {} is not reachable ({e}); its journal is left out", n.name),
        }
    }
    out
}
