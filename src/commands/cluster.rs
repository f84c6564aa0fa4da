//! `chute cluster …`: the data nodes of a scale-out table (see
//! `chute_engine::cluster`).

use anyhow::Context;
use chute_engine::cluster::{self, NodeSpec};
use chute_engine::connect::ProcessEnv;
use clap::{Args, Subcommand};

use crate::Outcome;
use crate::args::ConnArgs;
use crate::settings;

pub const CLUSTER_HELP: &str = "EXAMPLES:
    chute cluster init --coordinator postgres://me@coord/metrics --node n1=postgres://me@host1/metrics --node n2=postgres://me@host2/metrics
    chute cluster add-node n3=postgres://me@host3/metrics
    chute cluster status --json
    chute cluster sync-ddl --dry-run
    chute partition create readings --columns \"time timestamptz not null, dev_id int, v float8\" --key time --interval 1d --distribute-by dev_id --shards 12
    chute load readings readings.csv             # each node gets its rows straight from chute";

/// Several PostgreSQL servers, one logical table: a coordinator whose
/// partitions are postgres_fdw foreign tables on data nodes, loaded with
/// no coordinator in the data path.
#[derive(Debug, Subcommand)]
pub enum ClusterCommand {
    /// Record the data nodes on the coordinator: a postgres_fdw server and
    /// user mapping for each (a password goes into the user mapping only),
    /// after checking each is reachable and runs the coordinator's major
    /// version. Running it again with the same nodes updates them.
    Init(InitArgs),
    /// Add one data node (new partitions are placed on it; existing shards stay where they are).
    AddNode(AddNodeArgs),
    /// Each node: reachable, version, shard tables, rows and bytes; the skew
    /// between nodes; DDL drift between the coordinator and the nodes.
    Status(StatusArgs),
    /// Resolve transactions an interrupted `chute load --atomic` left
    /// prepared on the servers: committed where the load had decided to
    /// commit, rolled back otherwise (a load still running is left alone).
    Recover(StatusArgs),
    /// Apply the SQL that fixes DDL drift (a column or an index of the
    /// coordinator's parent missing on a node).
    SyncDdl(SyncArgs),
}

#[derive(Debug, Args)]
pub struct InitArgs {
    /// The coordinator (default: --url, PG* variables, or the embedded server).
    #[arg(long, value_name = "URL")]
    pub coordinator: Option<String>,
    /// A data node: NAME=URL (repeat for each node).
    #[arg(long = "node", value_name = "NAME=URL", required = true)]
    pub nodes: Vec<String>,
    /// Check the nodes and print what would be made; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct AddNodeArgs {
    /// NAME=URL.
    #[arg(value_name = "NAME=URL")]
    pub node: String,
    #[arg(long, value_name = "URL")]
    pub coordinator: Option<String>,
    /// Check the node and print what would be made; change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    #[arg(long, value_name = "URL")]
    pub coordinator: Option<String>,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SyncArgs {
    #[arg(long, value_name = "URL")]
    pub coordinator: Option<String>,
    /// Print the SQL and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    #[arg(long)]
    pub json: bool,
}

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
