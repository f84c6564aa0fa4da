//! Table findings: managed tables whose partitions fall behind (coverage,
//! DEFAULT rows, overdue maintenance, interrupted detaches, leftover
//! partition-named tables), and large time-keyed tables never partitioned.

use chute_core::doctor::partitions::{self as rules_partitions, PartSize};
use chute_core::doctor::{Evidence, Finding, Severity, human_bytes, shell_word};
use chute_core::ident::QualifiedName;
use chute_core::partman::policy::parse_key_value;
use chute_core::partman::{Policy, RetentionMode};
use tokio_postgres::Client;

use super::{DoctorError, TableSummary, USER_SCHEMAS};
use crate::partman::{TableStatus, last_maintained};

fn maintain_fix(table: &QualifiedName) -> Vec<String> {
    vec![format!("chute partition maintain {}", shell_word(&table.to_string()))]
}

/// Findings for one managed table from `partition status`'s figures.
pub async fn managed(
    client: &Client,
    policy: &Policy,
    status: &TableStatus,
    now: i64,
    min_bytes: i64,
) -> Result<(Vec<Finding>, TableSummary), DoctorError> {
    let t = &policy.parent;
    let mut out = Vec::new();
    let view = "chute partition status (pg_inherits, pg_class)";
    match &status.covered_until {
        None => out.push(Finding {
            kind: "coverage_short",
            severity: Severity::Critical,
            object: t.to_string(),
            summary: format!("no partition of {t} holds now: rows arriving now have nowhere to go"),
            evidence: vec![Evidence::new(view, format!("now {}; premake {}", status.now, status.premake))],
            fix: maintain_fix(t),
        }),
        Some(until) if status.intervals_ahead < status.premake => out.push(Finding {
            kind: "coverage_short",
            severity: Severity::Warning,
            object: t.to_string(),
            summary: format!(
                "{t} has {} intervals ready ahead of now, fewer than its premake of {}",
                status.intervals_ahead, status.premake
            ),
            evidence: vec![Evidence::new(view, format!("covered until {until}, now {}", status.now))],
            fix: maintain_fix(t),
        }),
        Some(_) => {}
    }
    if let Some(n) = status.rows_in_default.filter(|n| *n > 0) {
        out.push(Finding {
            kind: "default_rows",
            severity: Severity::Warning,
            object: t.to_string(),
            summary: format!(
                "{n} rows of {t} sit in its DEFAULT partition: every new partition must scan them, and they block concurrent detach"
            ),
            evidence: vec![Evidence::new("count(*) on the DEFAULT partition", format!("{n} rows"))],
            fix: maintain_fix(t),
        });
    }
    if !status.pending_detach.is_empty() {
        out.push(Finding {
            kind: "detach_pending",
            severity: Severity::Warning,
            object: t.to_string(),
            summary: format!("an interrupted DETACH … CONCURRENTLY left {} half-detached", status.pending_detach.join(", ")),
            evidence: vec![Evidence::new("pg_inherits", "inhdetachpending = true")],
            fix: maintain_fix(t),
        });
    }
    let last = last_maintained(client, t).await.map_err(|e| DoctorError::sql("reading the last maintenance", e))?;
    let (last_micros, last_text) = match &last {
        Some((m, text)) => (*m, text.clone()),
        None => policy_updated(client, t).await?,
    };
    let zone = policy.zone().map_err(|e| DoctorError::Other(e.to_string()))?;
    let due = if policy.interval.is_time() {
        policy.interval.add_to(last_micros, &zone).map_err(|e| DoctorError::Other(e.to_string()))?
    } else {
        last_micros + 86_400_000_000
    };
    if due < now {
        out.push(Finding {
            kind: "maintenance_overdue",
            severity: Severity::Warning,
            object: t.to_string(),
            summary: format!(
                "{t} was last maintained {}, longer ago than its interval ({}): partitions ahead and retention depend on it (keep `chute partition maintain --every 10min` running)",
                if last.is_some() { format!("at {last_text}") } else { format!("never (policy set at {last_text})") },
                policy.interval
            ),
            evidence: vec![Evidence::new("chute.meta, chute.partition_config", format!("last maintenance {last_text}"))],
            fix: maintain_fix(t),
        });
    }
    out.extend(oversized(policy, status, min_bytes)?);
    out.extend(strays(client, policy).await?);
    let summary = TableSummary {
        table: status.table.clone(),
        covered_until: status.covered_until.clone(),
        intervals_ahead: status.intervals_ahead,
        premake: status.premake,
        due_for_retention: status.due_for_retention.len(),
        rows_in_default: status.rows_in_default,
        partitions: status.partitions.len(),
        last_maintenance: last.map(|(_, t)| t),
    };
    Ok((out, summary))
}

/// Partitions far larger than the ones before them while new partitions
/// would be as wide (time keys only).
fn oversized(policy: &Policy, status: &TableStatus, min_bytes: i64) -> Result<Vec<Finding>, DoctorError> {
    if !policy.key_type.is_time() {
        return Ok(vec![]);
    }
    let zone = policy.zone().map_err(|e| DoctorError::Other(e.to_string()))?;
    let value = |text: &str| match text {
        "MINVALUE" => Some(i64::MIN),
        "MAXVALUE" => Some(i64::MAX),
        t => parse_key_value(t, policy.key_type, &zone).ok(),
    };
    let parts: Vec<PartSize> = status
        .partitions
        .iter()
        .filter_map(|p| Some(PartSize { name: p.name.clone(), from: value(&p.from)?, to: value(&p.to)?, bytes: p.bytes }))
        .collect();
    let next_width = |from: i64| policy.interval.next(from, &zone).ok().map(|to| to - from);
    let t = &policy.parent;
    Ok(rules_partitions::oversized(&parts, min_bytes, next_width)
        .into_iter()
        .map(|(p, median)| Finding {
            kind: "oversized_partition",
            severity: Severity::Warning,
            object: p.name.clone(),
            summary: format!(
                "{} holds {}, over 10 times the {} of the partitions before it, and new partitions of {t} are as wide ({}): their indexes outgrow memory while they take inserts",
                p.name,
                human_bytes(p.bytes),
                human_bytes(median),
                policy.interval
            ),
            evidence: vec![Evidence::new(
                "pg_total_relation_size (chute partition status)",
                format!("{}: {}; median of the up to 7 partitions before it: {}", p.name, human_bytes(p.bytes), human_bytes(median)),
            )],
            fix: vec![format!(
                "chute partition create {} --key {} --interval {}",
                shell_word(&t.to_string()),
                shell_word(&policy.key),
                rules_partitions::shorter_interval(p.to - p.from)
            )],
        })
        .collect())
}

async fn policy_updated(client: &Client, t: &QualifiedName) -> Result<(i64, String), DoctorError> {
    let r = client
        .query_one(
            "SELECT (extract(epoch FROM updated_at) * 1000000)::int8, updated_at::text FROM chute.partition_config
             WHERE parent_schema = $1 AND parent_table = $2",
            &[&t.schema.clone().unwrap_or_default(), &t.name],
        )
        .await
        .map_err(|e| DoctorError::sql("reading chute.partition_config", e))?;
    Ok((r.get(0), r.get(1)))
}

/// Plain tables named like a partition of a managed parent but attached to
/// nothing: an interrupted create leaves one, and it blocks the partition of
/// that name. Tables detached on purpose by retention (mode detach, kept in
/// the parent's schema) are expected and skipped.
async fn strays(client: &Client, policy: &Policy) -> Result<Vec<Finding>, DoctorError> {
    if policy.retention.as_ref().is_some_and(|r| r.mode == RetentionMode::Detach && r.schema.is_none()) {
        return Ok(vec![]);
    }
    let t = &policy.parent;
    let schema = t.schema.clone().unwrap_or_default();
    let rows = client
        .query(
            "SELECT c.relname::text, NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = c.oid), pg_total_relation_size(c.oid)
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE n.nspname = $1 AND c.relkind = 'r' AND NOT c.relispartition
               AND left(c.relname, length($2) + 2) = $2 || '_p'
               AND substr(c.relname, length($2) + 3) ~ '^[0-9][0-9_]*$'
             ORDER BY c.relname",
            &[&schema, &t.name],
        )
        .await
        .map_err(|e| DoctorError::sql("looking for partition-named tables", e))?;
    let mut out = Vec::new();
    for r in rows {
        let name = t.with_name(r.get::<_, String>(0));
        let unattached: bool = r.get(1);
        if !unattached {
            continue;
        }
        let empty: bool = client
            .query_one(&format!("SELECT NOT EXISTS (SELECT 1 FROM {})", name.quoted()), &[])
            .await
            .map_err(|e| DoctorError::sql("reading a partition-named table", e))?
            .get(0);
        let fix = if empty {
            vec![format!("DROP TABLE {};", name.quoted())]
        } else {
            vec![format!("BEGIN; INSERT INTO {} SELECT * FROM {}; DROP TABLE {}; COMMIT;", t.quoted(), name.quoted(), name.quoted())]
        };
        out.push(Finding {
            kind: "stray_partition",
            severity: Severity::Warning,
            object: name.to_string(),
            summary: format!(
                "{name} is named like a partition of {t} but attached to nothing ({}): the partition of that name cannot be made",
                if empty { "empty" } else { "it has rows; the fix moves them into the table" }
            ),
            evidence: vec![Evidence::new("pg_class, pg_inherits", format!("{name}: {}, no parent", human_bytes(r.get(2))))],
            fix,
        });
    }
    Ok(out)
}

/// Interrupted detaches on partitioned tables chute does not manage.
pub async fn unmanaged_pending_detach(client: &Client, managed: &[QualifiedName]) -> Result<Vec<Finding>, DoctorError> {
    let rows = client
        .query(
            "SELECT pn.nspname::text, p.relname::text, cn.nspname::text, c.relname::text
             FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent JOIN pg_namespace pn ON pn.oid = p.relnamespace
             JOIN pg_class c ON c.oid = h.inhrelid JOIN pg_namespace cn ON cn.oid = c.relnamespace
             WHERE h.inhdetachpending ORDER BY 1, 2, 3, 4",
            &[],
        )
        .await
        .map_err(|e| DoctorError::sql("reading pg_inherits", e))?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let parent = QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1));
            if managed.contains(&parent) {
                return None;
            }
            let child = QualifiedName::new(r.get::<_, String>(2), r.get::<_, String>(3));
            Some(Finding {
                kind: "detach_pending",
                severity: Severity::Warning,
                object: parent.to_string(),
                summary: format!("an interrupted DETACH … CONCURRENTLY left {child} half-detached from {parent}"),
                evidence: vec![Evidence::new("pg_inherits", format!("{child}: inhdetachpending = true"))],
                fix: vec![format!("ALTER TABLE {} DETACH PARTITION {} FINALIZE;", parent.quoted(), child.quoted())],
            })
        })
        .collect())
}

/// Plain tables at least `min_bytes` large with a time column: candidates
/// for `chute migrate`. The key is the time column an index leads with, or
/// else the first NOT NULL one, or the first; the interval aims at
/// partitions of a few hundred MB to a few GB from the key's span.
pub async fn unpartitioned(client: &Client, min_bytes: i64, tables: Option<&[u32]>) -> Result<Vec<Finding>, DoctorError> {
    let sql = format!(
        "SELECT n.nspname::text, c.relname::text, pg_total_relation_size(c.oid), c.reltuples::int8, a.attname::text, format_type(a.atttypid, NULL),
                EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum)
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         CROSS JOIN LATERAL (
             SELECT a.attname, a.atttypid, a.attnum FROM pg_attribute a
             WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
               AND a.atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype)
             ORDER BY EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = c.oid AND i.indkey[0] = a.attnum) DESC, a.attnotnull DESC, a.attnum
             LIMIT 1) a
         WHERE {USER_SCHEMAS} AND c.relkind = 'r' AND NOT c.relispartition
           AND pg_total_relation_size(c.oid) >= $1 AND ($2::oid[] IS NULL OR c.oid = ANY($2))
         ORDER BY 3 DESC"
    );
    let tables: Option<Vec<u32>> = tables.map(|t| t.to_vec());
    let rows = client.query(&sql, &[&min_bytes, &tables]).await.map_err(|e| DoctorError::sql("looking for large plain tables", e))?;
    let mut out = Vec::new();
    for r in rows {
        let t = QualifiedName::new(r.get::<_, String>(0), r.get::<_, String>(1));
        let (bytes, tuples, col, ty, indexed): (i64, i64, String, String, bool) = (r.get(2), r.get(3), r.get(4), r.get(5), r.get(6));
        let interval = if indexed { interval_for(client, &t, &col, bytes).await? } else { "1d" };
        let (extend, problems) = crate::migrate::preflight(client, &t, &col)
            .await
            .map_err(|e| DoctorError::Other(format!("checking whether {t} can be migrated: {e}")))?;
        let command = format!(
            "chute migrate {} --key {} --interval {interval}{}",
            shell_word(&t.to_string()),
            shell_word(&col),
            if extend { " --extend-primary-key" } else { "" }
        );
        // What migrate would refuse comes first, as the steps to take before the command.
        let mut fix: Vec<String> = problems.iter().map(|p| format!("first, {}: {}", p.what, p.fix)).collect();
        fix.push(command);
        out.push(Finding {
            kind: "unpartitioned_table",
            severity: Severity::Warning,
            object: t.to_string(),
            summary: format!(
                "{t} holds {} keyed by {col} ({ty}) in one table: every insert grows one set of indexes, and old rows can only go by DELETE",
                human_bytes(bytes)
            ),
            evidence: vec![Evidence::new(
                "pg_class, pg_attribute",
                format!("{} with indexes, about {} rows; {col} {ty}{}", human_bytes(bytes), tuples.max(0), if indexed { ", indexed" } else { "" }),
            )],
            fix,
        });
    }
    Ok(out)
}

async fn interval_for(client: &Client, t: &QualifiedName, col: &str, bytes: i64) -> Result<&'static str, DoctorError> {
    let q = chute_core::ident::quote_ident(col);
    let days: Option<f64> = client
        .query_one(
            &format!("SELECT extract(epoch FROM (max({q})::timestamptz - min({q})::timestamptz))::float8 / 86400 FROM {}", t.quoted()),
            &[],
        )
        .await
        .map_err(|e| DoctorError::sql("reading the key's span", e))?
        .get(0);
    let per_day = bytes as f64 / days.unwrap_or(1.0).max(1.0);
    Ok(if per_day >= 10.0 * 1073741824.0 {
        "1h"
    } else if per_day >= 300.0 * 1048576.0 {
        "1d"
    } else if per_day >= 40.0 * 1048576.0 {
        "1w"
    } else {
        "1mon"
    })
}

/// A policy chute keeps for a table that is gone (dropped with SQL, not
/// with `chute partition undo`): `chute partition maintain` skips it with a
/// warning on every run, and a new table of that name would inherit it.
pub(super) fn orphaned_policy(t: &QualifiedName) -> Finding {
    Finding {
        kind: "policy_orphaned",
        severity: Severity::Warning,
        object: t.to_string(),
        summary: format!(
            "chute keeps a partition policy for {t}, a table that no longer exists: `chute partition maintain` skips it with a warning on every run, and a new table of that name would inherit it"
        ),
        evidence: vec![Evidence::new("chute.partition_config, pg_class", format!("a policy for {t}, no such table"))],
        fix: vec![format!("chute partition forget {}", shell_word(&t.to_string()))],
    }
}
