//! The shard map as the coordinator's catalog has it: every foreign
//! partition on a chute data node and the table behind it.

use tokio_postgres::Client;

use super::ClusterError;

/// The shard tables behind foreign partitions on the coordinator, by node
/// server: (server, schema, table); see [`shards`] for their parents too.
pub(crate) async fn shard_tables(coordinator: &Client) -> Result<Vec<(String, String, String)>, ClusterError> {
    Ok(shards(coordinator).await?.into_iter().map(|s| (s.server, s.schema, s.table)).collect())
}

/// One shard: the table behind a foreign partition.
#[derive(Debug, Clone)]
pub(crate) struct Shard {
    pub server: String,
    pub schema: String,
    pub table: String,
    /// The distributed table's root parent on the coordinator.
    pub root: u32,
}

pub(crate) async fn shards(coordinator: &Client) -> Result<Vec<Shard>, ClusterError> {
    let rows = coordinator
        .query(
            "SELECT s.srvname::text,
                    coalesce((SELECT substr(o, 13) FROM unnest(ft.ftoptions) o WHERE o LIKE 'schema_name=%'), n.nspname)::text,
                    coalesce((SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE o LIKE 'table_name=%'), c.relname)::text,
                    pg_partition_root(c.oid)::oid
             FROM pg_foreign_table ft JOIN pg_class c ON c.oid = ft.ftrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_foreign_server s ON s.oid = ft.ftserver
             WHERE s.srvname LIKE 'chute\\_node\\_%' AND c.relispartition
             ORDER BY 1, 2, 3",
            &[],
        )
        .await
        .map_err(ClusterError::sql("reading the foreign partitions"))?;
    Ok(rows.iter().map(|r| Shard { server: r.get(0), schema: r.get(1), table: r.get(2), root: r.get(3) }).collect())
}
