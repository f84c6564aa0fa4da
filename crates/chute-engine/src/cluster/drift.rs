//! DDL drift: a column added on the coordinator's parent but not on a
//! node's shard table, or an index of the parent missing there. Found by
//! comparing each shard with its parent, reported with the SQL that fixes
//! it, and applied by `chute cluster sync-ddl`.

use std::collections::HashMap;

use chute_core::ident::quote_ident;
use tokio_postgres::Client;

use super::{ClusterError, all_node_options};
use crate::catalog::remote_ddl;
use crate::connect::Env;

/// One difference and its fix, to run on `node`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Drift {
    pub node: String,
    pub table: String,
    pub problem: String,
    pub fix: String,
}

/// The parent's columns as (name, type) and its index tails.
async fn parent_shape(coordinator: &Client, root: u32) -> Result<(Vec<(String, String)>, Vec<String>), ClusterError> {
    let columns = crate::catalog::columns(coordinator, root).await.map_err(ClusterError::sql("reading the parent's columns"))?;
    let cols = columns.into_iter().map(|c| (c.name, c.type_name)).collect();
    let ddl = remote_ddl(coordinator, root).await.map_err(ClusterError::sql("reading the parent's indexes"))?;
    Ok((cols, ddl.indexes))
}

/// Every drift between distributed parents and their shards. A node that
/// cannot be reached is left out here (status reports it).
pub async fn detect(coordinator: &Client, env: &(dyn Env + Sync)) -> Result<Vec<Drift>, ClusterError> {
    let shards = super::shards::shards(coordinator).await?;
    if shards.is_empty() {
        return Ok(Vec::new());
    }
    let mut shapes = HashMap::new();
    for s in &shards {
        if let std::collections::hash_map::Entry::Vacant(e) = shapes.entry(s.root) {
            e.insert(parent_shape(coordinator, s.root).await?);
        }
    }
    let mut out = Vec::new();
    for (node, opts) in all_node_options(coordinator, env).await? {
        let Ok(client) = opts.connect().await else { continue };
        let mine: Vec<&super::shards::Shard> = shards.iter().filter(|s| s.server == node.server).collect();
        let names: Vec<String> = mine.iter().map(|s| format!("{}.{}", quote_ident(&s.schema), quote_ident(&s.table))).collect();
        // Every shard's columns and index definitions on this node, in one round trip.
        let rows = client
            .query(
                "SELECT t.i::int8,
                        coalesce((SELECT array_agg(attname::text) FROM pg_attribute
                                  WHERE attrelid = to_regclass(t.name) AND attnum > 0 AND NOT attisdropped), '{}'),
                        coalesce((SELECT array_agg(pg_get_indexdef(indexrelid)) FROM pg_index WHERE indrelid = to_regclass(t.name)), '{}')
                 FROM unnest($1::text[]) WITH ORDINALITY t(name, i) ORDER BY t.i",
                &[&names],
            )
            .await
            .map_err(ClusterError::sql(format!("reading the shard tables on node {}", node.name)))?;
        for r in rows {
            let at = r.get::<_, i64>(0) as usize - 1;
            let (s, name) = (mine[at], &names[at]);
            let shown = format!("{}.{}", s.schema, s.table);
            let (cols, indexes) = &shapes[&s.root];
            let have: Vec<String> = r.get(1);
            let defs: Vec<String> = r.get(2);
            if have.is_empty() {
                out.push(Drift {
                    node: node.name.clone(),
                    table: shown.clone(),
                    problem: "the shard table is missing".into(),
                    fix: "-- run chute partition maintain, or drop the partition on the coordinator".into(),
                });
                continue;
            }
            for (c, ty) in cols.iter().filter(|(c, _)| !have.contains(c)) {
                out.push(Drift {
                    node: node.name.clone(),
                    table: shown.clone(),
                    problem: format!("column {c} is missing"),
                    fix: format!("ALTER TABLE {name} ADD COLUMN IF NOT EXISTS {} {ty}", quote_ident(c)),
                });
            }
            let tails: Vec<String> = defs.iter().filter_map(|d| d.find(" USING ").map(|i| d[i + 1..].to_owned())).collect();
            for (i, tail) in indexes.iter().enumerate().filter(|(_, t)| !tails.contains(t)) {
                let index = format!("{}_i{i}", s.table);
                out.push(Drift {
                    node: node.name.clone(),
                    table: shown.clone(),
                    problem: format!("index {tail} is missing"),
                    fix: format!("CREATE INDEX IF NOT EXISTS {} ON {name} {tail}", quote_ident(&index)),
                });
            }
        }
    }
    Ok(out)
}

/// Applies every fix `detect` finds; returns what it applied.
pub async fn sync(coordinator: &Client, env: &(dyn Env + Sync), dry_run: bool) -> Result<Vec<Drift>, ClusterError> {
    let drift = detect(coordinator, env).await?;
    if dry_run {
        return Ok(drift);
    }
    for (node, opts) in all_node_options(coordinator, env).await? {
        let mine: Vec<&Drift> = drift.iter().filter(|d| d.node == node.name && !d.fix.starts_with("--")).collect();
        if mine.is_empty() {
            continue;
        }
        let client = opts.connect().await?;
        for d in mine {
            client.batch_execute(&d.fix).await.map_err(ClusterError::sql(format!("on node {}: {}", node.name, d.fix)))?;
        }
    }
    Ok(drift)
}
