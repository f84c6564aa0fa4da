//! `chute serve`: the HTTP ingest service (InfluxDB line protocol, CSV,
//! JSON Lines) on the load engine.

use std::net::SocketAddr;

use anyhow::Context;
use chute_serve::{ServeConfig, serve};

use crate::Outcome;
use crate::args::{ConnArgs, ServeArgs};
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, a: ServeArgs) -> anyhow::Result<Outcome> {
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
    config.max_delay = a.max_delay;
    config.memory_budget = a.memory_mb << 20;
    config.set_max_body(a.max_body_mb << 20);
    anyhow::ensure!(a.max_connections >= 1, "--max-connections must be at least 1");
    config.max_connections = a.max_connections;
    config.header_timeout = a.header_timeout;
    config.idle_timeout = a.idle_timeout;
    config.shutdown_timeout = a.shutdown_timeout;
    anyhow::ensure!(a.min_body_rate >= 1, "--min-body-rate must be at least 1 (KiB a second)");
    config.set_body_pace(a.body_timeout, a.min_body_rate << 10);
    for p in &a.allow_table {
        anyhow::ensure!(
            !p.trim().is_empty() && p.matches('.').count() <= 1,
            "--allow-table {p:?}: expected TABLE or SCHEMA.TABLE (* and ? match any characters)"
        );
    }
    config.allow_tables = a.allow_table.clone();
    config.request_timeout = a.request_timeout;
    config.retry_for = a.retry_for;
    config.idempotency_window = a.idempotency_window;
    if let Some(id) = &a.instance_id {
        anyhow::ensure!(!id.trim().is_empty(), "--instance-id: give a name of at least one character");
        config.instance_id = id.trim().to_owned();
    }
    config.no_create_partitions = a.no_create_partitions;
    config.new_partitions = chute_engine::load::NewPartitions {
        per_chunk: a.max_new_partitions,
        per_minute: a.max_new_partitions_per_minute,
        max_age: a.max_age.duration(),
        max_future: a.max_future.duration(),
    };
    config.tls = a.tls_cert.clone().zip(a.tls_key.clone());
    config.create_tables = a.create_tables;
    config.interval = a.interval;
    config.lock_timeout = a.lock_timeout;
    if a.prometheus {
        let schema = a.prometheus_schema.trim();
        anyhow::ensure!(
            !schema.is_empty() && schema != "chute" && schema != "information_schema" && !schema.starts_with("pg_"),
            "--prometheus-schema {schema:?}: name a schema of your own (not chute's nor a system schema)"
        );
        let mut p = chute_serve::prom::PromConfig::new(schema);
        p.retention = a.prometheus_retention;
        config.prometheus = Some(p);
    }

    if a.check {
        return check(&config).await;
    }
    // SIGTERM or Ctrl-C: stop accepting, answer what is in flight once committed.
    let signals = Signals::listen(Second::Wait);
    let shutdown_text = humantime_short(a.shutdown_timeout);
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

/// A duration as a person reads it: `20s`, `1.5s`, `250ms`.
fn humantime_short(d: std::time::Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else if d < std::time::Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
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
