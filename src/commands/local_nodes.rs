//! `chute local start --nodes N` and `chute local stop` of the data nodes
//! (see `chute_engine::local_nodes`).

use chute_engine::local::LocalServer;
use chute_engine::local_nodes;

/// Starts data nodes 1..=n and records them on the coordinator; says what it did.
pub fn start(main: &LocalServer, n: u32) -> anyhow::Result<()> {
    let started = local_nodes::start(main, n)?;
    let nodes: Vec<LocalServer> = started.into_iter().map(|(s, _)| s).collect();
    let runtime = tokio::runtime::Handle::current();
    let added = tokio::task::block_in_place(|| runtime.block_on(local_nodes::record(main, &nodes)))?;
    for (a, s) in added.iter().zip(&nodes) {
        eprintln!("chute: data node {} runs in {} ({})", a.name, s.cluster.data_dir.display(), a.url);
    }
    eprintln!("chute: {n} data node(s) recorded on the coordinator; `chute local stop` stops them all");
    Ok(())
}

/// Stops every local data node that runs.
pub fn stop(main: &LocalServer) -> anyhow::Result<()> {
    for node in local_nodes::existing(main)? {
        if node.stop()? {
            eprintln!("chute: data node in {} stopped", node.cluster.data_dir.display());
        }
    }
    Ok(())
}
