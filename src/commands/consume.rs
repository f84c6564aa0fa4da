//! `chute consume`: Kafka topics into a table, exactly once (see
//! `chute_kafka::consume`).

use anyhow::Context;
use chute_core::ident::QualifiedName;
use chute_core::parse::lineproto::Precision;
use chute_core::partman::policy::parse_duration;
use chute_engine::load::{LoadSpec, TextFormat};
use chute_kafka::MessageFormat as Messages;
use chute_kafka::consume::{self, ConsumeReport, ConsumeSpec};

use crate::Outcome;
use crate::args::{ConnArgs, ConsumeArgs, MessageFormat};
use crate::progress::LoadReporter;
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, a: ConsumeArgs) -> anyhow::Result<Outcome> {
    let spec = spec(conn, &a)?;
    let mut reporter = LoadReporter::new(a.json, a.report_every, None)?;
    // A signal: the batches in flight finish and the consumer leaves its group.
    let signals = Signals::listen_with(
        spec.load.stop_flag(),
        Second::Exit("stopping now without waiting for batches in flight (what is not committed is read again on the next start)"),
    );
    let report = consume::run(spec, &mut reporter).await;
    reporter.finish();
    let report = report?;
    if a.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print_summary(&report);
    }
    if report.interrupted {
        return Ok(signals.outcome().unwrap_or(Outcome::Interrupted));
    }
    Ok(super::ended("consumer", report.reject_limit_exceeded, report.rows_rejected, a.max_rejects, report.reject_file.as_deref()))
}

fn spec(conn: &ConnArgs, a: &ConsumeArgs) -> anyhow::Result<ConsumeSpec> {
    anyhow::ensure!(!a.brokers.trim().is_empty(), "--brokers: give HOST:PORT of at least one broker");
    anyhow::ensure!(a.topic.iter().all(|t| !t.trim().is_empty()), "--topic: a topic name is empty");
    let flush = parse_duration(&a.flush_every).context("--flush-every")?;
    let table = QualifiedName::parse(&a.table)?;
    let format = match a.format {
        MessageFormat::Json => Messages::Text(TextFormat::Jsonl),
        MessageFormat::Csv => Messages::Text(TextFormat::Csv),
        MessageFormat::Text => Messages::Text(TextFormat::Text),
        MessageFormat::LineProtocol => {
            Messages::LineProtocol(Precision::parse(&a.precision).map_err(|e| anyhow::anyhow!("--precision: {e}"))?)
        }
    };
    anyhow::ensure!(
        table.name != "-" || a.format == MessageFormat::LineProtocol,
        "TABLE - (each line into the table its measurement names) is for --format line-protocol"
    );
    anyhow::ensure!(
        a.precision == "ns" || a.format == MessageFormat::LineProtocol,
        "--precision is the unit of line protocol timestamps: use it with --format line-protocol"
    );
    let mut options = Vec::new();
    if let Some(path) = &a.kafka_option_file {
        let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --kafka-option-file {}", path.display()))?;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')) {
            options.push(option(line).with_context(|| format!("--kafka-option-file {}", path.display()))?);
        }
    }
    for o in &a.kafka_options {
        options.push(option(o).context("--kafka-option")?);
    }
    // Each run of the consumer builds its load with that run's partitions as its input.
    let load = LoadSpec::builder(settings::target(conn)?, table)
        .workers(a.workers)
        .batch_bytes(a.batch_mb << 20)
        .batch_rows(a.batch_rows)
        .memory_budget(a.memory_mb << 20)
        .columns(a.columns.clone())
        .reject_file(a.reject_file.clone())
        .max_rejects(a.max_rejects)
        .load_id(a.load_id.clone())
        .retry_for(a.retry_for)
        .ignore_unknown(a.ignore_unknown)
        .flush_every(Some(flush))
        .flush_when_idle(true);
    load.check()?;
    anyhow::ensure!(
        !a.ignore_unknown || format == Messages::Text(TextFormat::Jsonl),
        "--ignore-unknown drops keys of JSON messages (--format json)"
    );
    let mut fields = chute_kafka::MessageFields { key: a.key_column.clone(), timestamp: a.timestamp_column.clone(), headers: Vec::new() };
    for h in &a.header_column {
        match h.split_once('=') {
            Some((name, col)) if !name.is_empty() && !col.is_empty() => fields.headers.push((name.to_owned(), col.to_owned())),
            _ => anyhow::bail!("--header-column {h:?}: expected NAME=COLUMN"),
        }
    }
    anyhow::ensure!(
        fields.is_empty() || format == Messages::Text(TextFormat::Jsonl),
        "--key-column, --header-column and --timestamp-column fill columns of JSON messages (--format json)"
    );
    Ok(ConsumeSpec {
        metrics_listen: a.metrics_listen,
        dead_letter_topic: a.dead_letter_topic.clone(),
        fields,
        load,
        brokers: a.brokers.clone(),
        topics: a.topic.clone(),
        group: a.group.clone(),
        format,
        until_end: a.until_end,
        kafka_options: options,
        flush_after: flush,
    })
}

/// KEY=VALUE; the value is never echoed back (it may be a password).
fn option(text: &str) -> anyhow::Result<(String, String)> {
    match text.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.trim().to_owned())),
        _ => anyhow::bail!("expected KEY=VALUE (a librdkafka setting)"),
    }
}

fn print_summary(r: &ConsumeReport) {
    println!("load id             {}", r.load_id);
    println!("rows loaded         {}", r.rows_loaded);
    if r.rows_skipped > 0 {
        println!("already loaded      {} (committed before; read again and skipped)", r.rows_skipped);
    }
    println!("rows rejected       {}{}", r.rows_rejected, r.reject_file.as_ref().map(|f| format!(" (see {f})")).unwrap_or_default());
    println!("input               {:.1} MiB", r.bytes_read as f64 / 1048576.0);
    println!("seconds             {:.2}", r.seconds);
    println!("rows/s              {:.0}", r.rows_loaded as f64 / r.seconds.max(1e-9));
    for p in &r.positions {
        println!("committed through   {} offset {}", p.partition, p.offset);
    }
}
