//! `chute cluster status`: each node's reachability, version, rows and
//! bytes of the distributed tables' shards it holds, and the skew between
//! nodes.

use tokio_postgres::Client;

use super::{ClusterError, Node, all_node_options};
use crate::connect::Env;

#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeStatus {
    pub name: String,
    pub url: String,
    pub reachable: bool,
    /// Why the node could not be reached (no password in it).
    pub error: Option<String>,
    pub version: Option<String>,
    /// Shard tables of distributed tables on this node.
    pub shards: u64,
    /// Rows in them (exact counts).
    pub rows: i64,
    pub bytes: i64,
    /// `max_prepared_transactions` (0: `--atomic` loads cannot use this node).
    pub max_prepared_transactions: Option<i32>,
    /// Transactions prepared by chute and not yet resolved.
    pub prepared: i64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ClusterStatus {
    pub nodes: Vec<NodeStatus>,
    pub rows: i64,
    pub bytes: i64,
    /// The fullest node's rows over the mean (1.0: perfectly even).
    pub skew: Option<f64>,
    /// DDL that differs between the coordinator and a node, with the fix.
    pub drift: Vec<super::Drift>,
}

pub async fn status(coordinator: &Client, env: &(dyn Env + Sync)) -> Result<ClusterStatus, ClusterError> {
    let shards = super::shards::shard_tables(coordinator).await?;
    let mut out = Vec::new();
    for (node, opts) in all_node_options(coordinator, env).await? {
        let mine: Vec<&(String, String, String)> = shards.iter().filter(|s| s.0 == node.server).collect();
        out.push(node_status(&node, &opts, &mine).await);
    }
    let drift = super::drift::detect(coordinator, env).await?;
    let rows: i64 = out.iter().map(|n| n.rows).sum();
    let bytes = out.iter().map(|n| n.bytes).sum();
    let reachable: Vec<&NodeStatus> = out.iter().filter(|n| n.reachable).collect();
    let skew = (rows > 0 && !reachable.is_empty()).then(|| {
        let mean = rows as f64 / reachable.len() as f64;
        reachable.iter().map(|n| n.rows).max().unwrap_or(0) as f64 / mean
    });
    Ok(ClusterStatus { nodes: out, rows, bytes, skew, drift })
}

async fn node_status(node: &Node, opts: &crate::ConnectOptions, shards: &[&(String, String, String)]) -> NodeStatus {
    let mut st = NodeStatus {
        name: node.name.clone(),
        url: node.url.clone(),
        reachable: false,
        error: None,
        version: None,
        shards: 0,
        rows: 0,
        bytes: 0,
        max_prepared_transactions: None,
        prepared: 0,
    };
    let client = match opts.connect().await {
        Ok(c) => c,
        Err(e) => {
            st.error = Some(e.to_string());
            return st;
        }
    };
    st.reachable = true;
    let facts = client
        .query_one(
            "SELECT current_setting('server_version'), current_setting('max_prepared_transactions')::int,
                    (SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'chute:%')",
            &[],
        )
        .await;
    match facts {
        Ok(r) => {
            st.version = Some(r.get(0));
            st.max_prepared_transactions = Some(r.get(1));
            st.prepared = r.get(2);
        }
        Err(e) => st.error = Some(crate::error::describe(&e)),
    }
    // Exact counts and sizes of every shard, in one round trip (query_to_xml runs each count).
    let names: Vec<String> = shards
        .iter()
        .map(|(_, schema, table)| format!("{}.{}", chute_core::ident::quote_ident(schema), chute_core::ident::quote_ident(table)))
        .collect();
    let totals = client
        .query_one(
            "SELECT count(*)::int8,
                    coalesce(sum((xpath('/row/c/text()', query_to_xml(format('SELECT count(*) AS c FROM %s', t.name), false, true, '')))[1]::text::int8), 0)::int8,
                    coalesce(sum(pg_total_relation_size(to_regclass(t.name))), 0)::int8
             FROM unnest($1::text[]) t(name) WHERE to_regclass(t.name) IS NOT NULL",
            &[&names],
        )
        .await;
    match totals {
        Ok(r) => {
            st.shards = r.get::<_, i64>(0) as u64;
            st.rows = r.get(1);
            st.bytes = r.get(2);
            if (st.shards as usize) < names.len() {
                st.error = Some(format!("{} shard table(s) missing (see the DDL drift below)", names.len() - st.shards as usize));
            }
        }
        Err(e) => st.error = Some(crate::error::describe(&e)),
    }
    st
}
