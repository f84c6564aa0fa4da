//! `chute local start|stop|status|url`: the embedded server by hand.

use crate::Outcome;
use crate::args::{ConnArgs, LocalCommand};
use crate::settings::local_server;
use chute_engine::local::StartOutcome;

pub fn run(conn: &ConnArgs, cmd: LocalCommand) -> anyhow::Result<Outcome> {
    if let LocalCommand::Start { nodes: Some(0) } = cmd {
        anyhow::bail!("--nodes must be at least 1");
    }
    let server = local_server(conn.data_dir.clone())?;
    let dir = server.cluster.data_dir.display().to_string();
    match cmd {
        LocalCommand::Start { nodes } => {
            let msg = start_message(server.ensure_running()?);
            eprintln!("chute: embedded PostgreSQL {msg} in {dir}");
            if let Some(n) = nodes {
                super::local_nodes::start(&server, n)?;
            }
            println!("{}", server.connect_options().display_url());
        }
        LocalCommand::Stop => {
            super::local_nodes::stop(&server)?;
            if server.stop()? {
                eprintln!("chute: embedded PostgreSQL in {dir} stopped (its data stays; `chute local start` starts it again)");
            } else {
                eprintln!("chute: embedded PostgreSQL in {dir} was not running");
            }
        }
        LocalCommand::Status { json } => {
            let pid = server.cluster.running_pid();
            let initialized = server.cluster.is_initialized();
            let url = server.connect_options().display_url();
            if json {
                let v = serde_json::json!({
                    "data_dir": dir, "initialized": initialized, "running": pid.is_some(), "pid": pid,
                    "url": url, "server_version": server.cluster.bins.major_version,
                    "binaries": server.cluster.bins.bin_dir.display().to_string(),
                });
                println!("{v}");
            } else {
                let state = match (initialized, pid) {
                    (_, Some(p)) => format!("running (pid {p})"),
                    (true, None) => "stopped (`chute local start` starts it)".into(),
                    (false, None) => "not created yet (`chute local start` or any command creates it)".into(),
                };
                println!("embedded PostgreSQL {}: {state}", server.cluster.bins.major_version);
                println!("data directory: {dir}");
                println!("url: {url}");
                println!("log: {}", server.cluster.log_file().display());
            }
        }
        LocalCommand::Url => {
            // The URL is for a client to use right away (`psql "$(chute local url)"`): the server must be up.
            let outcome = server.ensure_running()?;
            if outcome != StartOutcome::AlreadyRunning {
                eprintln!("chute: embedded PostgreSQL {} in {dir}", start_message(outcome));
            }
            println!("{}", server.connect_options().display_url());
        }
    }
    Ok(Outcome::Ok)
}

fn start_message(outcome: StartOutcome) -> &'static str {
    match outcome {
        StartOutcome::AlreadyRunning => "already running",
        StartOutcome::Started => "started",
        StartOutcome::Created => "created and started",
    }
}
