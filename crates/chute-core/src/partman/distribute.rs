//! Planning distributed tables (scale-out): the tables behind foreign
//! partitions are steps on their data nodes (`Step::node`), made before
//! the coordinator attaches the foreign tables that face them.

use super::naming::hash_child_name;
use super::plan::{Plan, PlanError, StepKind};
use super::policy::Policy;
use super::snapshot::{RemoteDdl, Snapshot};
use crate::ident::{QualifiedName, check_length, quote_ident, quote_literal};

/// `--placement`: the time partition `leaf` is itself a foreign table, its
/// table on the node the placement picks.
pub(super) fn create_placed(
    policy: &Policy,
    snap: &Snapshot,
    plan: &mut Plan,
    leaf: &QualifiedName,
    (from, to): (i64, i64),
    (lo, hi): (&str, &str),
) -> Result<(), PlanError> {
    let Some(d) = &policy.distribution else { return Ok(()) };
    let node = d.node_of_partition(policy, &leaf.name, from);
    let ddl = snap.remote.clone().unwrap_or_default();
    remote_table(policy, &ddl, plan, node, leaf, (lo, hi))?;
    let schema = leaf.schema.clone().unwrap_or_else(|| "public".into());
    plan.push(
        StepKind::CreatePartition { name: leaf.clone(), from, to, moves_default_rows: false },
        format!("create partition {leaf} for [{lo}, {hi}) on data node {node}"),
        vec![
            format!(
                "CREATE FOREIGN TABLE {} ({}) SERVER {} OPTIONS (schema_name {}, table_name {})",
                leaf.quoted(),
                ddl.columns,
                quote_ident(&super::policy::server_name(node)),
                quote_literal(&schema),
                quote_literal(&leaf.name)
            ),
            format!("ALTER TABLE {} ATTACH PARTITION {} FOR VALUES FROM ({lo}) TO ({hi})", policy.parent.quoted(), leaf.quoted()),
        ],
        true,
    );
    Ok(())
}

/// Steps on the data nodes: the table behind each shard of `leaf`, with
/// the parent's columns and indexes and a CHECK of its time bounds (made
/// with `IF NOT EXISTS`, so a plan interrupted after them runs again).
pub(super) fn remote_shards(
    policy: &Policy,
    snap: &Snapshot,
    plan: &mut Plan,
    leaf: &QualifiedName,
    (lo, hi): (&str, &str),
) -> Result<(), PlanError> {
    let (Some(h), Some(d)) = (&policy.hash, &policy.distribution) else { return Ok(()) };
    let ddl = snap.remote.clone().unwrap_or_default();
    for r in 0..h.modulus {
        let child = leaf.with_name(hash_child_name(&leaf.name, r)?);
        remote_table(policy, &ddl, plan, d.node_of(r), &child, (lo, hi))?;
    }
    Ok(())
}

/// The step that makes `table` on `node`: the parent's columns, a CHECK of
/// the time bounds, the parent's indexes.
fn remote_table(
    policy: &Policy,
    ddl: &RemoteDdl,
    plan: &mut Plan,
    node: &str,
    table: &QualifiedName,
    (lo, hi): (&str, &str),
) -> Result<(), PlanError> {
    let key = policy.key_sql();
    let mut sql = Vec::new();
    if let Some(schema) = &table.schema {
        sql.push(format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(schema)));
    }
    let unlogged = if policy.unlogged { "UNLOGGED " } else { "" };
    sql.push(format!(
        "CREATE {unlogged}TABLE IF NOT EXISTS {} ({}, CONSTRAINT chute_bounds CHECK ({key} IS NOT NULL AND {key} >= {lo} AND {key} < {hi}))",
        table.quoted(),
        ddl.columns
    ));
    for (i, tail) in ddl.indexes.iter().enumerate() {
        let index = format!("{}_i{i}", table.name);
        check_length(&index)?;
        sql.push(format!("CREATE INDEX IF NOT EXISTS {} ON {} {tail}", quote_ident(&index), table.quoted()));
    }
    plan.push_on(
        node,
        StepKind::CreateRemote { node: node.to_owned(), name: table.clone() },
        format!("create {table} for [{lo}, {hi}) on data node {node}"),
        sql,
    );
    Ok(())
}
