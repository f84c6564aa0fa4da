//! Where `chute serve` may write, decided before a table's lane is made
//! (so before any row of a request moves):
//!
//! - never into a system schema (`pg_catalog`, `information_schema`,
//!   `pg_toast*`, `pg_temp*`: every `pg_` name is PostgreSQL's) nor chute's
//!   own (`chute`), whatever the flags;
//! - into a table that has a chute policy (`chute partition create`, and
//!   every table `--create-tables` makes);
//! - into any other table only when an `--allow-table PATTERN` admits it.
//!
//! The check is on the table PostgreSQL resolves the name to (an unqualified
//! `pg_authid` is `pg_catalog.pg_authid`, which the search_path always
//! holds), and it must be a table (not a view, foreign table or sequence).

use chute_core::ident::QualifiedName;
use tokio_postgres::Client;

use super::catalog::LaneError;

/// Whether chute's policies exist and the role may read them.
/// (Naming a table of a schema the role may not use is an error: the schema first.)
const POLICIES_READABLE: &str = "SELECT CASE WHEN to_regnamespace('chute') IS NULL THEN false
     WHEN NOT has_schema_privilege('chute', 'USAGE') THEN false
     WHEN to_regclass('chute.partition_config') IS NULL THEN false
     ELSE has_table_privilege('chute.partition_config', 'SELECT') END";

/// Whether serve never writes into schema `name` (PostgreSQL keeps names
/// starting `pg_` for its own schemas: `pg_catalog`, `pg_toast*`, `pg_temp*`).
pub(crate) fn system_schema(name: &str) -> bool {
    matches!(name, "information_schema" | "chute") || name.starts_with("pg_")
}

/// The refusal of a table in a system schema, or in chute's.
pub(crate) fn refuse_schema(table: &str, schema: &str) -> LaneError {
    LaneError::Refused(format!(
        "chute serve does not write to {table}: schema {schema} is {}; it writes only to tables with a chute policy \
         (chute partition create, or made by --create-tables) and to tables --allow-table admits, never to a system schema \
         or schema chute",
        if schema == "chute" { "chute's own" } else { "a system schema" }
    ))
}

/// Whether an `--allow-table` pattern admits `schema.name`: `*` stands for
/// any characters, `?` for one; a pattern without a dot is matched against
/// the table's name in any schema.
pub(crate) fn admits(pattern: &str, schema: &str, name: &str) -> bool {
    match pattern.split_once('.') {
        Some((s, n)) => glob(s, schema) && glob(n, name),
        None => glob(pattern, name),
    }
}

/// Shell-style matching of `*` and `?` (iterative, with one backtrack point).
fn glob(pattern: &str, text: &str) -> bool {
    let (p, t): (Vec<char>, Vec<char>) = (pattern.chars().collect(), text.chars().collect());
    let (mut i, mut j) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while j < t.len() {
        if i < p.len() && (p[i] == '?' || p[i] == t[j]) {
            i += 1;
            j += 1;
        } else if i < p.len() && p[i] == '*' {
            star = Some((i, j));
            i += 1;
        } else if let Some((si, sj)) = star {
            i = si + 1;
            j = sj + 1;
            star = Some((si, sj + 1));
        } else {
            return false;
        }
    }
    p[i..].iter().all(|&c| c == '*')
}

/// Resolves `table` and says whether serve may write to it: `Ok(true)`
/// when it may, `Ok(false)` when no such table exists (the caller refuses
/// or creates it), the refusal otherwise.
pub(crate) async fn check(client: &Client, table: &QualifiedName, allow: &[String]) -> Result<bool, LaneError> {
    let lost = super::catalog::sql_error;
    let row = client
        .query_opt(
            &format!(
                "SELECT n.nspname::text, c.relname::text, c.relkind::text, ({POLICIES_READABLE})
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)"
            ),
            &[&table.quoted()],
        )
        .await
        .map_err(lost(format!("finding table {table}")))?;
    let Some(row) = row else {
        // Not a table: a schema named for writing into must still be an allowed one.
        if let Some(schema) = &table.schema
            && system_schema(schema)
        {
            return Err(refuse_schema(&table.to_string(), schema));
        }
        return Ok(false);
    };
    let (schema, name, kind, policies): (String, String, String, bool) = (row.get(0), row.get(1), row.get(2), row.get(3));
    let shown = QualifiedName::new(schema.clone(), name.clone()).to_string();
    if system_schema(&schema) {
        return Err(refuse_schema(&shown, &schema));
    }
    if kind != "r" && kind != "p" {
        return Err(LaneError::Refused(format!("chute serve writes only to tables: {shown} is not one (relkind {kind})")));
    }
    if allow.iter().any(|p| admits(p, &schema, &name)) {
        return Ok(true);
    }
    let managed = policies
        && client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM chute.partition_config WHERE parent_schema = $1 AND parent_table = $2)",
                &[&schema, &name],
            )
            .await
            .map_err(lost(format!("reading the policy of {shown}")))?
            .get::<_, bool>(0);
    if managed {
        return Ok(true);
    }
    Err(LaneError::Refused(format!(
        "chute serve does not write to {shown}: it has no chute policy and serve did not create it; start chute serve with \
         --allow-table {shown} to write to it (or make it a managed table: chute partition create {shown} …)"
    )))
}

/// The schema a new table named `table` would be made in (its own, or the
/// search_path's first), refused when serve never writes there.
pub(crate) async fn creation_schema(client: &Client, table: &QualifiedName) -> Result<String, LaneError> {
    let schema = match &table.schema {
        Some(s) => s.clone(),
        None => client
            .query_one("SELECT current_schema()::text", &[])
            .await
            .map_err(super::catalog::sql_error(format!("reading the schema {table} would be made in")))?
            .get::<_, Option<String>>(0)
            .ok_or_else(|| LaneError::Refused(format!("cannot create {table}: the search_path names no schema that exists")))?,
    };
    if system_schema(&schema) {
        return Err(refuse_schema(&table.to_string(), &schema));
    }
    Ok(schema)
}

/// Every table serve may write, as (schema, name): those with a chute
/// policy and those `--allow-table` admits, in no system schema.
pub(crate) async fn writable_tables(c: &Client, allow: &[String]) -> Result<Vec<(String, String)>, tokio_postgres::Error> {
    let rows = c
        .query(
            "SELECT n.nspname::text, c.relname::text
             FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relkind IN ('r', 'p') AND NOT c.relispartition AND n.nspname NOT LIKE 'pg\\_%'
               AND n.nspname NOT IN ('information_schema', 'chute')
             ORDER BY 1, 2",
            &[],
        )
        .await?;
    // A role that may not read the policies (see `serve --check`) sees none.
    let managed: Vec<(String, String)> = match c.query_one(POLICIES_READABLE, &[]).await {
        Ok(r) if r.get::<_, bool>(0) => c
            .query("SELECT parent_schema, parent_table FROM chute.partition_config", &[])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect(),
        Ok(_) => Vec::new(),
        Err(e) => return Err(e),
    };
    Ok(rows
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .filter(|(schema, name)| {
            !system_schema(schema)
                && (managed.iter().any(|(ms, mn)| ms == schema && mn == name) || allow.iter().any(|p| admits(p, schema, name)))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_schema_and_table_names() {
        assert!(admits("public.small", "public", "small"));
        assert!(!admits("public.small", "other", "small"));
        assert!(admits("small", "other", "small"), "no dot: any schema");
        assert!(admits("public.*", "public", "anything"));
        assert!(admits("*.m?", "x", "m1"));
        assert!(!admits("*.m?", "x", "m12"));
        assert!(admits("ev*_20*", "s", "events_2024"));
        assert!(!admits("ev*_20*", "s", "events"));
        assert!(admits("*", "s", ""));
    }

    #[test]
    fn system_schemas_are_never_written() {
        for s in ["pg_catalog", "information_schema", "pg_toast", "pg_toast_temp_3", "pg_temp_7", "chute"] {
            assert!(system_schema(s), "{s}");
        }
        for s in ["public", "Chute", "pg", "information"] {
            assert!(!system_schema(s), "{s}");
        }
    }
}
