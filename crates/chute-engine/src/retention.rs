//! Retention steps that survive a kill.
//!
//! Retention detaches a partition (concurrently, which commits on its own)
//! and then drops it or moves it to the retention schema. A maintainer
//! killed between the two left a detached table that no later run knew
//! about: it is no longer a partition, so the catalog snapshot no longer
//! shows it. So the detach step first records the partition in
//! `chute.retention_inflight`, the drop or move removes the record in the
//! same transaction, and each run first completes what a record says is
//! left: a recorded table that exists and is not a partition any more is
//! dropped or moved as the policy says.

use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::partman::{Plan, Policy, RetentionMode, StepKind};
use tokio_postgres::Client;

use crate::schema::LOCK_CLASS;

const TABLE: &str = "chute.retention_inflight";

/// Creates the record table when missing (serialized like the schema's
/// own bootstrap, since `IF NOT EXISTS` races).
pub async fn ensure_table(client: &Client) -> Result<(), tokio_postgres::Error> {
    let exists: bool = client.query_one("SELECT to_regclass('chute.retention_inflight') IS NOT NULL", &[]).await?.get(0);
    if exists {
        return Ok(());
    }
    let sql = format!(
        "BEGIN; SELECT pg_advisory_xact_lock({LOCK_CLASS}, 0);
         CREATE TABLE IF NOT EXISTS {TABLE} (
             parent_schema text NOT NULL,
             parent_table text NOT NULL,
             part_schema text NOT NULL,
             part_table text NOT NULL,
             recorded_at timestamptz NOT NULL DEFAULT now(),
             PRIMARY KEY (part_schema, part_table)
         ); COMMIT;"
    );
    if let Err(e) = client.batch_execute(&sql).await {
        let _ = client.batch_execute("ROLLBACK").await;
        return Err(e);
    }
    Ok(())
}

fn literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

fn schema_of(name: &QualifiedName) -> &str {
    name.schema.as_deref().unwrap_or("public")
}

fn record_sql(parent: &QualifiedName, part: &QualifiedName) -> String {
    format!(
        "INSERT INTO {TABLE} (parent_schema, parent_table, part_schema, part_table) VALUES ({}, {}, {}, {}) ON CONFLICT DO NOTHING",
        literal(schema_of(parent)),
        literal(&parent.name),
        literal(schema_of(part)),
        literal(&part.name)
    )
}

fn forget_sql(part: &QualifiedName) -> String {
    format!("DELETE FROM {TABLE} WHERE part_schema = {} AND part_table = {}", literal(schema_of(part)), literal(&part.name))
}

/// Records each partition the plan detaches and then drops or moves: the
/// detach step records it first, the drop or move forgets it in its own
/// transaction.
pub fn decorate(plan: &mut Plan, policy: &Policy) {
    let finishing: Vec<QualifiedName> = plan
        .steps
        .iter()
        .filter_map(|s| match &s.kind {
            StepKind::DropPartition { name } | StepKind::MoveToSchema { name, .. } => Some(name.clone()),
            _ => None,
        })
        .collect();
    for step in &mut plan.steps {
        match &step.kind {
            StepKind::DetachConcurrently { name } | StepKind::Detach { name } | StepKind::FinalizeDetach { name }
                if finishing.contains(name) =>
            {
                step.sql.insert(0, record_sql(&policy.parent, name));
            }
            StepKind::DropPartition { name } | StepKind::MoveToSchema { name, .. } => step.sql.push(forget_sql(name)),
            _ => {}
        }
    }
}

/// Steps that complete what an earlier, interrupted run left: recorded
/// tables of `policy`'s parent that exist and are no longer partitions are
/// dropped or moved; records of tables that are gone (or already moved)
/// are cleared.
pub async fn leftovers(client: &Client, policy: &Policy) -> Result<Plan, tokio_postgres::Error> {
    let mut plan = Plan::default();
    let exists: bool = client.query_one("SELECT to_regclass('chute.retention_inflight') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(plan);
    }
    let rows = client
        .query(
            "SELECT r.part_schema, r.part_table, c.relispartition
               FROM chute.retention_inflight r
               LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = r.part_schema
               LEFT JOIN pg_catalog.pg_class c ON c.relnamespace = n.oid AND c.relname = r.part_table
              WHERE r.parent_schema = $1 AND r.parent_table = $2
              ORDER BY r.recorded_at",
            &[&schema_of(&policy.parent), &policy.parent.name],
        )
        .await?;
    for r in rows {
        let name = QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1));
        let is_partition: Option<bool> = r.get(2);
        match (is_partition, policy.retention.as_ref().map(|r| (r.mode, r.schema.clone()))) {
            // Still a partition: this run's plan detaches it again.
            (Some(true), _) => {}
            (Some(false), Some((RetentionMode::Drop, _))) => plan.push(
                StepKind::DropPartition { name: name.clone() },
                format!("drop {name} (detached by an interrupted run)"),
                vec![format!("DROP TABLE {}", name.quoted()), forget_sql(&name)],
                true,
            ),
            (Some(false), Some((RetentionMode::Detach, Some(schema)))) => plan.push(
                StepKind::MoveToSchema { name: name.clone(), schema: schema.clone() },
                format!("move {name} to schema {schema} (detached by an interrupted run)"),
                vec![
                    format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(&schema)),
                    format!("ALTER TABLE {} SET SCHEMA {}", name.quoted(), quote_ident(&schema)),
                    forget_sql(&name),
                ],
                true,
            ),
            _ => {
                client.execute(&forget_sql(&name), &[]).await?;
            }
        }
    }
    Ok(plan)
}
