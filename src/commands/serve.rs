//! `chute serve`: the HTTP ingest service (InfluxDB line protocol, CSV,
//! JSON Lines) on the load engine.

use std::net::SocketAddr;

use anyhow::Context;
use chute_core::partman::policy::parse_duration;
use chute_engine::serve::{ServeConfig, serve};

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
    config.max_body = a.max_body_mb << 20;
    config.request_timeout = parse_duration(&a.request_timeout).context("--request-timeout")?;
    config.retry_for = parse_duration(&a.retry_for).context("--retry-for")?;
    config.idempotency_window = parse_duration(&a.idempotency_window).context("--idempotency-window")?;
    config.no_create_partitions = a.no_create_partitions;
    config.tls = a.tls_cert.clone().zip(a.tls_key.clone());
    config.create_tables = a.create_tables;
    config.interval = a.interval.clone();
    config.lock_timeout = parse_duration(&a.lock_timeout).context("--lock-timeout")?;

    // SIGTERM or Ctrl-C: stop accepting, answer what is in flight once committed.
    let signals = Signals::listen(Second::Wait);
    let shutdown = {
        let mut signals = signals.clone();
        async move {
            signals.first().await;
            eprintln!("chute serve: stopping: no new requests; answering those in flight once their rows are committed");
        }
    };
    serve(config, shutdown, |addr, tls| eprintln!("chute serve: listening on {}://{addr}", if tls { "https" } else { "http" })).await?;
    Ok(signals.outcome().unwrap_or(Outcome::Ok))
}
