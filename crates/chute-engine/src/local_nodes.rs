//! `chute local start --nodes N`: a coordinator and N data nodes on this
//! machine. The coordinator is the embedded server; data node i is another
//! embedded server in the sibling directory `DATA_DIR-nodeI`, with its own
//! socket there, so `chute local stop` stops them all by looking for those
//! directories. The nodes are recorded on the coordinator as n1..nN (see
//! `cluster`).

use std::path::PathBuf;

use crate::cluster::{ClusterError, NodeAdded, NodeSpec};
use crate::local::{LocalError, LocalServer, StartOutcome};

/// The data directory of local data node `i` (1-based).
pub fn node_dir(main: &LocalServer, i: u32) -> PathBuf {
    let dir = &main.cluster.data_dir;
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "pg".into());
    dir.with_file_name(format!("{name}-node{i}"))
}

/// The local data nodes that exist (initialized or not), in order.
pub fn existing(main: &LocalServer) -> Result<Vec<LocalServer>, LocalError> {
    let mut out = Vec::new();
    for i in 1.. {
        let dir = node_dir(main, i);
        if !dir.exists() {
            break;
        }
        out.push(LocalServer::new(Some(dir))?);
    }
    Ok(out)
}

/// Starts (creating them the first time) local data nodes 1..=n.
pub fn start(main: &LocalServer, n: u32) -> Result<Vec<(LocalServer, StartOutcome)>, LocalError> {
    let mut out = Vec::new();
    for i in 1..=n {
        let node = LocalServer::new(Some(node_dir(main, i)))?;
        let outcome = node.ensure_running()?;
        out.push((node, outcome));
    }
    Ok(out)
}

/// Records the local data nodes on the coordinator (`cluster init`).
pub async fn record(main: &LocalServer, nodes: &[LocalServer]) -> Result<Vec<NodeAdded>, ClusterError> {
    let coordinator = main.connect_options().connect().await?;
    let specs: Vec<NodeSpec> =
        nodes.iter().enumerate().map(|(i, n)| NodeSpec { name: format!("n{}", i + 1), url: n.connect_options().display_url() }).collect();
    crate::cluster::add_nodes(&coordinator, &specs, &crate::connect::ProcessEnv).await
}
