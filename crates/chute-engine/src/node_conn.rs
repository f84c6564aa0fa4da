//! How chute reaches a data node of a scale-out cluster (see `cluster`):
//! its URL from `chute.nodes` on the coordinator, and the password of the
//! current user's `postgres_fdw` user mapping. Apart from `cluster` so the
//! executor can run plan steps on nodes.

use tokio_postgres::Client;

/// The advisory lock key that keeps the shard map stable: a load into a
/// distributed table holds it shared on the coordinator for its whole run;
/// changing the set of nodes takes it exclusively.
pub(crate) const SHARD_MAP_LOCK: i64 = 0x6368_7574_655f_736d;

use crate::ConnectOptions;
use crate::connect::Env;

/// How to reach node `name` from here: its URL from `chute.nodes` and the
/// password of the current user's mapping (or PGPASSWORD / ~/.pgpass).
pub async fn node_options(coordinator: &Client, name: &str, env: &(dyn Env + Sync)) -> Result<ConnectOptions, String> {
    let row = coordinator
        .query_opt("SELECT url, server FROM chute.nodes WHERE name = $1", &[&name])
        .await
        .map_err(|e| format!("reading chute.nodes: {}", crate::error::describe(&e)))?
        .ok_or_else(|| format!("no data node named {name}: see chute cluster status"))?;
    let (url, server): (String, String) = (row.get(0), row.get(1));
    let password: Option<String> = coordinator
        .query_opt(
            "SELECT (SELECT substr(o, 10) FROM unnest(umoptions) o WHERE o LIKE 'password=%')
             FROM pg_user_mappings WHERE srvname = $1 AND (usename = current_user OR usename = 'public')
             ORDER BY usename = 'public' LIMIT 1",
            &[&server],
        )
        .await
        .map_err(|e| format!("reading the node's user mapping: {}", crate::error::describe(&e)))?
        .and_then(|r| r.get(0));
    let opts = ConnectOptions::resolve(Some(&url), env).map_err(|e| format!("node {name}: {e}"))?;
    Ok(opts.with_password(password.filter(|p| !p.is_empty())))
}
