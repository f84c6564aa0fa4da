//! `chute serve --check`: whether the role chute serve connects as has what
//! it needs and nothing more. What it needs: INSERT on every table it
//! writes (see `guard`) and on their partitions, and its journal and keys
//! in schema `chute`. Anything more (a superuser, the owner of a table,
//! UPDATE or DELETE on it, a role that bypasses row-level security) is
//! reported, since a service on the network should hold the least it can.
//! Nothing is changed.

use chute_core::ident::{QualifiedName, quote_ident};
use tokio_postgres::Client;

use super::ServeConfig;

/// How a finding of `--check` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CheckLevel {
    Ok,
    /// Worth knowing; nothing to fix.
    Info,
    /// More privilege than serve needs.
    Warn,
    /// Serve cannot write something it should.
    Fail,
}

/// One finding: what it is about and what to do.
#[derive(Debug, Clone)]
pub struct CheckLine {
    pub level: CheckLevel,
    pub subject: String,
    pub message: String,
}

fn line(level: CheckLevel, subject: impl Into<String>, message: impl Into<String>) -> CheckLine {
    CheckLine { level, subject: subject.into(), message: message.into() }
}

/// What serve needs in schema `chute`: its journal (as every journaled
/// load) and its idempotency keys.
const CHUTE_NEEDS: &[(&str, &[&str])] = &[
    ("chute.meta", &["SELECT"]),
    ("chute.partition_config", &["SELECT"]),
    ("chute.loads", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
    ("chute.load_journal", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
    ("chute.serve_requests", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
];

/// Privileges on a target table beyond INSERT.
const MORE: &[&str] = &["SELECT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER"];

/// Checks the role of `config.target` against the tables serve would write.
pub async fn check(config: &ServeConfig) -> Result<Vec<CheckLine>, String> {
    let c = config.target.connect().await.map_err(|e| e.to_string())?;
    let sql = |e: tokio_postgres::Error| chute_engine::error::SqlError::new("checking the role's privileges", e).to_string();
    let mut out = role_lines(&c).await.map_err(sql)?;
    out.extend(chute_lines(&c).await.map_err(sql)?);
    let mut tables = super::guard::writable_tables(&c, &config.allow_tables).await.map_err(sql)?;
    if let Some(schema) = &config.schema {
        tables.retain(|(s, _)| s == schema);
    }
    if tables.is_empty() {
        out.push(line(
            CheckLevel::Warn,
            "tables",
            "no table chute serve may write exists yet: make one with chute partition create, or admit one with --allow-table",
        ));
    }
    for (schema, name) in tables {
        out.extend(table_lines(&c, &QualifiedName::new(schema, name)).await.map_err(sql)?);
    }
    if config.create_tables {
        out.push(line(
            CheckLevel::Info,
            "--create-tables",
            "making tables and columns needs CREATE on their schemas and owning the tables, more than INSERT: for the least \
             privilege, make the tables ahead (chute partition create, as their owner) and serve without --create-tables",
        ));
    }
    Ok(out)
}

async fn role_lines(c: &Client) -> Result<Vec<CheckLine>, tokio_postgres::Error> {
    let r = c
        .query_one(
            "SELECT current_user::text, rolsuper, rolbypassrls, rolcreaterole, rolcreatedb,
                    CASE WHEN to_regrole('pg_write_all_data') IS NULL THEN false ELSE pg_has_role('pg_write_all_data', 'MEMBER') END
             FROM pg_roles WHERE rolname = current_user",
            &[],
        )
        .await?;
    let (role, superuser, bypass, createrole, createdb, write_all): (String, bool, bool, bool, bool, bool) =
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5));
    let subject = format!("role {role}");
    let mut more = Vec::new();
    if superuser {
        more.push("is a superuser: it may write anywhere, system catalogs included (ALTER ROLE … NOSUPERUSER)");
    }
    if write_all {
        more.push("is a member of pg_write_all_data: it may write every table (REVOKE pg_write_all_data FROM …)");
    }
    if bypass {
        more.push("bypasses row-level security (ALTER ROLE … NOBYPASSRLS)");
    }
    if createrole {
        more.push("may create roles (ALTER ROLE … NOCREATEROLE)");
    }
    if createdb {
        more.push("may create databases (ALTER ROLE … NOCREATEDB)");
    }
    if more.is_empty() {
        return Ok(vec![line(CheckLevel::Ok, subject, "not a superuser; may not bypass row-level security, create roles or databases")]);
    }
    let role_q = quote_ident(&role);
    Ok(more
        .into_iter()
        .map(|m| line(CheckLevel::Warn, subject.clone(), format!("{}: more than chute serve needs", m.replace('…', &role_q))))
        .collect())
}

async fn chute_lines(c: &Client) -> Result<Vec<CheckLine>, tokio_postgres::Error> {
    let role: String = c.query_one("SELECT current_user::text", &[]).await?.get(0);
    let role_q = quote_ident(&role);
    let r = c
        .query_one(
            "SELECT to_regnamespace('chute') IS NOT NULL, CASE WHEN to_regnamespace('chute') IS NULL THEN false
                    ELSE has_schema_privilege('chute', 'USAGE') END,
                    CASE WHEN to_regnamespace('chute') IS NULL OR NOT has_schema_privilege('chute', 'USAGE') THEN false
                         WHEN to_regclass('chute.meta') IS NULL THEN false ELSE has_table_privilege('chute.meta', 'SELECT') END",
            &[],
        )
        .await?;
    let (exists, usage, meta): (bool, bool, bool) = (r.get(0), r.get(1), r.get(2));
    if exists && (!usage || !meta) {
        return Ok(vec![line(
            CheckLevel::Fail,
            "schema chute",
            format!(
                "the role may not keep its journal and idempotency keys: as the owner of schema chute run psql -c '{}'",
                grants(&role_q)
            ),
        )]);
    }
    let version = if exists { chute_engine::schema::version(c).await? } else { None };
    let Some(version) = version else {
        let may: bool = c.query_one("SELECT has_database_privilege(current_database(), 'CREATE')", &[]).await?.get(0);
        return Ok(vec![if may {
            line(CheckLevel::Info, "schema chute", "does not exist yet: chute serve makes it when it starts (the role may create schemas)")
        } else {
            line(
                CheckLevel::Fail,
                "schema chute",
                "does not exist, and the role may not create it: run chute serve (or chute partition create) once as the database owner",
            )
        }]);
    };
    if version < chute_engine::schema::SCHEMA_VERSION {
        return Ok(vec![line(
            CheckLevel::Fail,
            "schema chute",
            format!(
                "is version {version}; this chute needs {}: start chute serve once as the owner of schema chute, which upgrades it",
                chute_engine::schema::SCHEMA_VERSION
            ),
        )]);
    }
    let mut lacking = Vec::new();
    {
        for (table, privileges) in CHUTE_NEEDS {
            let held: Vec<bool> = c
                .query_one(
                    "SELECT array(SELECT has_table_privilege($1, p) FROM unnest($2::text[]) WITH ORDINALITY u(p, i) ORDER BY i)",
                    &[table, privileges],
                )
                .await?
                .get(0);
            let missing: Vec<&str> = privileges.iter().zip(held).filter(|(_, h)| !h).map(|(p, _)| *p).collect();
            if !missing.is_empty() {
                lacking.push(format!("GRANT {} ON {table} TO {role_q};", missing.join(", ")));
            }
        }
        let seq: bool = c.query_one("SELECT has_sequence_privilege('chute.serve_offsets', 'USAGE')", &[]).await?.get(0);
        if !seq {
            lacking.push(format!("GRANT USAGE ON SEQUENCE chute.serve_offsets TO {role_q};"));
        }
    }
    if lacking.is_empty() {
        return Ok(vec![line(
            CheckLevel::Ok,
            "schema chute",
            format!("version {version}; the role may keep load journals and idempotency keys"),
        )]);
    }
    Ok(vec![line(
        CheckLevel::Fail,
        "schema chute",
        format!("the role may not keep its journal and idempotency keys: as the owner of schema chute run psql -c '{}'", lacking.join(" ")),
    )])
}

/// Every GRANT serve's role needs in schema chute.
fn grants(role_q: &str) -> String {
    let mut out = format!("GRANT USAGE ON SCHEMA chute TO {role_q};");
    for (table, privileges) in CHUTE_NEEDS {
        out.push_str(&format!(" GRANT {} ON {table} TO {role_q};", privileges.join(", ")));
    }
    out.push_str(&format!(" GRANT USAGE ON SEQUENCE chute.serve_offsets TO {role_q};"));
    out
}

async fn table_lines(c: &Client, table: &QualifiedName) -> Result<Vec<CheckLine>, tokio_postgres::Error> {
    let r = c
        .query_one(
            "SELECT current_user::text, has_table_privilege(c.oid, 'INSERT'), pg_has_role(c.relowner, 'USAGE'),
                    array(SELECT p FROM unnest($2::text[]) p WHERE has_table_privilege(c.oid, p)),
                    (SELECT count(*) FROM pg_partition_tree(c.oid) t WHERE t.isleaf AND t.relid <> c.oid),
                    (SELECT count(*) FROM pg_partition_tree(c.oid) t WHERE t.isleaf AND t.relid <> c.oid
                        AND NOT has_table_privilege(t.relid, 'INSERT')),
                    (SELECT min(t.relid::regclass::text) FROM pg_partition_tree(c.oid) t WHERE t.isleaf AND t.relid <> c.oid
                        AND NOT has_table_privilege(t.relid, 'INSERT'))
             FROM pg_class c WHERE c.oid = to_regclass($1)",
            &[&table.quoted(), &MORE],
        )
        .await?;
    let (role, insert, owns, more, leaves, denied, example): (String, bool, bool, Vec<String>, i64, i64, Option<String>) =
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4), r.get(5), r.get(6));
    let role_q = quote_ident(&role);
    let subject = table.to_string();
    let mut out = Vec::new();
    if !insert {
        out.push(line(CheckLevel::Fail, &subject, format!("no INSERT: GRANT INSERT ON {} TO {role_q}", table.quoted())));
    } else if denied > 0 {
        out.push(line(
            CheckLevel::Fail,
            &subject,
            format!(
                "no INSERT on {denied} of its {leaves} partitions (e.g. {}): GRANT INSERT ON each TO {role_q} (chute copies the \
                 parent's grants to the partitions it makes)",
                example.unwrap_or_default()
            ),
        ));
    } else {
        out.push(line(CheckLevel::Ok, &subject, format!("INSERT on it and its {leaves} partitions")));
    }
    if !more.is_empty() {
        out.push(line(
            CheckLevel::Warn,
            &subject,
            format!(
                "also {}: more than chute serve needs; REVOKE {} ON {} FROM {role_q}",
                more.join(", "),
                more.join(", "),
                table.quoted()
            ),
        ));
    }
    if owns {
        out.push(line(
            CheckLevel::Warn,
            &subject,
            "the role owns it (it may alter or drop it): more than chute serve needs; a role that does not own it makes no \
             partitions just in time, so keep them made ahead (chute partition maintain, as the owner, on a schedule)",
        ));
    } else {
        out.push(line(
            CheckLevel::Info,
            &subject,
            "the role does not own it, so it makes no partitions just in time: rows past the partitions made ahead are rejected; \
             keep them ahead with chute partition maintain (as the owner, on a schedule)",
        ));
    }
    Ok(out)
}
