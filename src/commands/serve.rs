//! `chute serve`: the HTTP ingest service (InfluxDB line protocol, CSV,
//! JSON Lines) on the load engine.

use std::net::SocketAddr;

use anyhow::Context;
use chute_core::partman::policy::parse_duration;
use chute_serve::{ServeConfig, serve};

use crate::Outcome;
use crate::args::{ConnArgs, ServeArgs};
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, a: ServeArgs) -> anyhow::Result<Outcome> {
    settings::check_interval("--interval", &a.interval)?;
    let listen: SocketAddr = a.listen.parse().with_context(|| format!("--listen {:?}: expected ADDRESS:PORT", a.listen))?;
    anyhow::ensure!(
        listen.ip().is_loopback() || a.insecure_listen || a.tls_cert.is_some(),
        "--listen {listen}: plain HTTP is allowed only on a loopback address; give --tls-cert and --tls-key, or add --insecure-listen to serve plain HTTP on {} anyway",
        listen.ip()
    );
    anyhow::ensure!(a.workers >= 1 && a.parse_threads >= 1, "--workers and --parse-threads must be at least 1");
    anyhow::ensure!(
        a.batch_mb >= 1 && a.memory_mb >= 8 && a.max_body_mb >= 1,
        "--batch-mb and --max-body-mb must be at least 1, --memory-mb at least 8"
    );
    let tokens = match &a.token_file {
        None => Vec::new(),
        Some(path) => {
            let text = std::fs::read_to_string(path).with_context(|| format!("cannot read --token-file {}", path.display()))?;
            let tokens: Vec<String> =
                text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_owned).collect();
            anyhow::ensure!(!tokens.is_empty(), "--token-file {} holds no token (one a line)", path.display());
            tokens
        }
    };
    let mut config = ServeConfig::new(settings::target(conn)?, listen);
    config.schema = a.schema.clone();
    config.tokens = tokens;
    config.workers = a.workers;
    config.parse_threads = a.parse_threads;
    config.batch_bytes = a.batch_mb << 20;
    anyhow::ensure!(a.batch_rows != Some(0), "--batch-rows must be at least 1");
    config.batch_rows = a.batch_rows;
    config.max_delay = parse_duration(&a.max_delay).context("--max-delay")?;
    config.memory_budget = a.memory_mb << 20;
    config.set_max_body(a.max_body_mb << 20);
    anyhow::ensure!(a.max_connections >= 1, "--max-connections must be at least 1");
    config.max_connections = a.max_connections;
    config.header_timeout = positive("--header-timeout", &a.header_timeout)?;
    config.idle_timeout = positive("--idle-timeout", &a.idle_timeout)?;
    config.shutdown_timeout = parse_duration(&a.shutdown_timeout).context("--shutdown-timeout")?;
    anyhow::ensure!(a.min_body_rate >= 1, "--min-body-rate must be at least 1 (KiB a second)");
    config.set_body_pace(positive("--body-timeout", &a.body_timeout)?, a.min_body_rate << 10);
    for p in &a.allow_table {
        anyhow::ensure!(
            !p.trim().is_empty() && p.matches('.').count() <= 1,
            "--allow-table {p:?}: expected TABLE or SCHEMA.TABLE (* and ? match any characters)"
        );
    }
    config.allow_tables = a.allow_table.clone();
    config.request_timeout = parse_duration(&a.request_timeout).context("--request-timeout")?;
    config.retry_for = parse_duration(&a.retry_for).context("--retry-for")?;
    config.idempotency_window = parse_duration(&a.idempotency_window).context("--idempotency-window")?;
    config.no_create_partitions = a.no_create_partitions;
    config.tls = a.tls_cert.clone().zip(a.tls_key.clone());
    config.create_tables = a.create_tables;
    config.interval = a.interval.clone();
    config.lock_timeout = parse_duration(&a.lock_timeout).context("--lock-timeout")?;
    if a.prometheus {
        let schema = a.prometheus_schema.trim();
        anyhow::ensure!(
            !schema.is_empty() && schema != "chute" && schema != "information_schema" && !schema.starts_with("pg_"),
            "--prometheus-schema {schema:?}: name a schema of your own (not chute's nor a system schema)"
        );
        let mut p = chute_serve::prom::PromConfig::new(schema);
        if let Some(r) = &a.prometheus_retention {
            p.retention = Some(chute_core::partman::Span::parse(r).map_err(|e| anyhow::anyhow!("--prometheus-retention {r:?}: {e}"))?);
        }
        config.prometheus = Some(p);
    }

    if a.check {
        return check(&config).await;
    }
    // SIGTERM or Ctrl-C: stop accepting, answer what is in flight once committed.
    let signals = Signals::listen(Second::Wait);
    let shutdown_text = a.shutdown_timeout.clone();
    let shutdown = {
        let mut signals = signals.clone();
        async move {
            signals.first().await;
            eprintln!(
                "chute serve: stopping: no new requests; answering those in flight once their rows are committed (at most {})",
                shutdown_text
            );
        }
    };
    serve(config, shutdown, |addr, tls| eprintln!("chute serve: listening on {}://{addr}", if tls { "https" } else { "http" })).await?;
    Ok(signals.outcome().unwrap_or(Outcome::Ok))
}

/// A duration flag that must not be zero.
fn positive(flag: &str, text: &str) -> anyhow::Result<std::time::Duration> {
    let d = parse_duration(text).with_context(|| flag.to_owned())?;
    anyhow::ensure!(!d.is_zero(), "{flag} must be longer than 0");
    Ok(d)
}

/// `chute serve --check`: one line per finding, the worst decides the exit code.
async fn check(config: &chute_serve::ServeConfig) -> anyhow::Result<Outcome> {
    use chute_serve::CheckLevel;
    let lines = chute_serve::check(config).await.map_err(|e| anyhow::anyhow!("chute serve --check: {e}"))?;
    for l in &lines {
        let level = match l.level {
            CheckLevel::Ok => "ok",
            CheckLevel::Info => "info",
            CheckLevel::Warn => "warn",
            CheckLevel::Fail => "fail",
        };
        println!("{level:<5} {}: {}", l.subject, l.message);
    }
    let worst = lines.iter().map(|l| l.level).max().unwrap_or(CheckLevel::Ok);
    let (verdict, outcome) = match worst {
        CheckLevel::Ok | CheckLevel::Info => ("the role has what chute serve needs, and nothing more", Outcome::Ok),
        CheckLevel::Warn => (
            "the role has more than chute serve needs (warn lines): it works, but a service on the network should hold less",
            Outcome::Rejects,
        ),
        CheckLevel::Fail => ("chute serve cannot write everything it should (fail lines)", Outcome::Error),
    };
    println!("chute serve --check: {verdict}");
    Ok(outcome)
}
