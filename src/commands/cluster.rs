//! `chute cluster …`: the data nodes of a scale-out table (see
//! `chute_engine::cluster`).

use anyhow::Context;
use chute_engine::cluster::{self, NodeSpec};
use chute_engine::connect::ProcessEnv;

use crate::Outcome;
use crate::args::{ClusterCommand, ConnArgs};
use crate::settings;

async fn coordinator(conn: &ConnArgs, url: &Option<String>) -> anyhow::Result<cluster::Client> {
    let conn = ConnArgs { url: url.clone().or_else(|| conn.url.clone()), data_dir: conn.data_dir.clone() };
    let opts = settings::target(&conn)?;
    opts.connect().await.with_context(|| format!("connecting to the coordinator {}", opts.display_url()))
}

pub async fn run(conn: &ConnArgs, cmd: ClusterCommand) -> anyhow::Result<Outcome> {
    match cmd {
        ClusterCommand::Init(a) => {
            let specs = a.nodes.iter().map(|n| NodeSpec::parse(n).map_err(anyhow::Error::msg)).collect::<anyhow::Result<Vec<_>>>()?;
            let client = coordinator(conn, &a.coordinator).await?;
            add(&client, &specs, a.dry_run, a.json).await
        }
        ClusterCommand::AddNode(a) => {
            let spec = NodeSpec::parse(&a.node).map_err(anyhow::Error::msg)?;
            let client = coordinator(conn, &a.coordinator).await?;
            add(&client, &[spec], a.dry_run, a.json).await
        }
        ClusterCommand::Status(a) => {
            let client = coordinator(conn, &a.coordinator).await?;
            status(&client, a.json).await
        }
        ClusterCommand::Recover(a) => {
            let conn = ConnArgs { url: a.coordinator.clone().or_else(|| conn.url.clone()), data_dir: conn.data_dir.clone() };
            let opts = settings::target(&conn)?;
            let client = coordinator(&conn, &None).await?;
            let mut servers = vec![("the coordinator".to_owned(), opts)];
            for (n, o) in cluster::all_node_options(&client, &ProcessEnv).await? {
                servers.push((format!("data node {}", n.name), o));
            }
            let resolved = chute_engine::load::recover_prepared(&client, &servers).await?;
            if a.json {
                println!("{}", serde_json::json!({ "resolved": resolved }));
            } else if resolved.is_empty() {
                println!("no prepared transaction left by chute");
            } else {
                for r in &resolved {
                    println!("{} {} on {}", if r.committed { "committed" } else { "rolled back" }, r.gid, r.server);
                }
            }
            Ok(Outcome::Ok)
        }
        ClusterCommand::SyncDdl(a) => {
            let client = coordinator(conn, &a.coordinator).await?;
            let drift = cluster::sync_ddl(&client, &ProcessEnv, a.dry_run).await?;
            if a.json {
                println!("{}", serde_json::json!({ "dry_run": a.dry_run, "drift": drift }));
            } else if drift.is_empty() {
                println!("no DDL drift: every shard has its parent's columns and indexes");
            } else {
                for d in &drift {
                    println!("-- node {}: {} on {}{}", d.node, d.problem, d.table, if a.dry_run { "" } else { " (fixed)" });
                    println!("{};", d.fix);
                }
            }
            Ok(Outcome::Ok)
        }
    }
}

async fn add(client: &cluster::Client, specs: &[NodeSpec], dry_run: bool, json: bool) -> anyhow::Result<Outcome> {
    let added = cluster::add_nodes_or_plan(client, specs, &ProcessEnv, dry_run).await?;
    if json {
        println!("{}", serde_json::json!({ "dry_run": dry_run, "nodes": added }));
    } else if dry_run {
        println!("-- dry run: every node is reachable and runs the coordinator's major version; nothing was changed");
        for n in &added {
            println!("-- node {}: {} (PostgreSQL {})", n.name, n.url, n.version);
            for sql in &n.planned {
                println!("{sql};");
            }
        }
    } else {
        for n in &added {
            let what = if n.existed { "updated" } else { "added" };
            println!("node {} {what}: {} (PostgreSQL {}, foreign server {})", n.name, n.url, n.version, n.server);
        }
        eprintln!("chute: distribute a table over these nodes with chute partition create … --distribute-by COLUMN --shards N");
    }
    Ok(Outcome::Ok)
}

async fn status(client: &cluster::Client, json: bool) -> anyhow::Result<Outcome> {
    let st = cluster::status(client, &ProcessEnv).await?;
    let bad = st.nodes.iter().any(|n| !n.reachable) || !st.drift.is_empty();
    if json {
        println!("{}", serde_json::to_string_pretty(&st)?);
    } else if st.nodes.is_empty() {
        println!("no data nodes: add them with chute cluster init --node NAME=URL …");
    } else {
        println!("{:<12} {:<10} {:>7} {:>12} {:>12}  url", "node", "state", "shards", "rows", "bytes");
        for n in &st.nodes {
            let state = if n.reachable { "up" } else { "DOWN" };
            println!("{:<12} {:<10} {:>7} {:>12} {:>12}  {}", n.name, state, n.shards, n.rows, n.bytes, n.url);
            if let Some(e) = &n.error {
                println!("             {e}");
            }
            if n.max_prepared_transactions == Some(0) {
                println!("             max_prepared_transactions = 0: --atomic loads cannot use this node");
            }
            if n.prepared > 0 {
                println!("             {} prepared transaction(s) left by chute: run chute cluster recover", n.prepared);
            }
        }
        println!(
            "total        {} rows, {} bytes{}",
            st.rows,
            st.bytes,
            st.skew.map(|s| format!(", skew {s:.2} (fullest node / mean)")).unwrap_or_default()
        );
        if st.drift.is_empty() {
            println!("ddl          no drift");
        } else {
            println!("ddl          {} difference(s); chute cluster sync-ddl applies:", st.drift.len());
            for d in &st.drift {
                println!("             node {}: {} on {}: {};", d.node, d.problem, d.table, d.fix);
            }
        }
    }
    Ok(if bad { Outcome::Rejects } else { Outcome::Ok })
}
