//! The flags of `chute cluster`.

use clap::{Args, Subcommand};

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
    Status(ClusterStatusArgs),
    /// Resolve transactions an interrupted `chute load --atomic` left
    /// prepared on the servers: committed where the load had decided to
    /// commit, rolled back otherwise (a load still running is left alone).
    Recover(ClusterStatusArgs),
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
pub struct ClusterStatusArgs {
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
