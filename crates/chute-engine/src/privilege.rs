//! What the loading role may do, asked before the load moves a row.
//!
//! A missing privilege found mid-load surfaces as a bare 42501 naming some
//! object (often a partition unrelated to the row at hand). Asking up front,
//! with `has_*_privilege`, lets chute choose a path PostgreSQL allows (through
//! the parent when only the parent may be inserted into, INSERT instead of
//! COPY when row-level security applies to the role) or refuse at once with
//! the GRANT that fixes it.

use chute_core::ident::{QualifiedName, quote_ident};
use tokio_postgres::Client;

/// The loading role's access to one table.
#[derive(Debug)]
pub(crate) struct TableAccess {
    pub role: String,
    /// INSERT on the table itself.
    pub insert: bool,
    /// Row-level security applies to this role (`row_security_active`):
    /// PostgreSQL refuses COPY FROM then.
    pub rls_active: bool,
    /// Leaf partitions the role may not insert into directly, and one of them.
    pub leaves_denied: i64,
    pub leaf_example: Option<String>,
    /// The role is (a member of) the table's owner: it may attach partitions.
    pub owns: bool,
}

impl TableAccess {
    /// The statement that lets the role insert into `table`.
    pub fn insert_grant(&self, table: &QualifiedName) -> String {
        format!("GRANT INSERT ON {} TO {}", table.quoted(), quote_ident(&self.role))
    }
}

pub(crate) async fn table_access(client: &Client, oid: u32, partitioned: bool) -> Result<TableAccess, tokio_postgres::Error> {
    let r = client
        .query_one(
            "SELECT current_user::text, has_table_privilege($1::oid, 'INSERT'), row_security_active($1::oid), pg_has_role(relowner, 'USAGE')
             FROM pg_class WHERE oid = $1",
            &[&oid],
        )
        .await?;
    let (leaves_denied, leaf_example) = if partitioned {
        let l = client
            .query_one(
                "SELECT count(*), min(relid::regclass::text) FROM pg_partition_tree($1::oid::regclass)
                 WHERE isleaf AND NOT has_table_privilege(relid, 'INSERT')",
                &[&oid],
            )
            .await?;
        (l.get(0), l.get(1))
    } else {
        (0, None)
    };
    Ok(TableAccess { role: r.get(0), insert: r.get(1), rls_active: r.get(2), leaves_denied, leaf_example, owns: r.get(3) })
}

/// A set of tables in schema `chute` and the privileges a command needs on each.
type Needs<'a> = &'a [(&'a str, &'a [&'a str])];

/// What a load's journal needs: the tables it reads and writes.
const JOURNAL: Needs<'static> = &[
    ("chute.meta", &["SELECT"]),
    ("chute.partition_config", &["SELECT"]),
    ("chute.loads", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
    ("chute.load_journal", &["SELECT", "INSERT", "UPDATE", "DELETE"]),
];

/// What storing a partition policy needs.
const POLICIES: Needs<'static> = &[("chute.meta", &["SELECT"]), ("chute.partition_config", &["SELECT", "INSERT", "UPDATE", "DELETE"])];

/// Why the role cannot keep a load journal, with the GRANTs that fix it;
/// `None` when it can (or will create the schema itself).
pub(crate) async fn journal_missing(client: &Client) -> Result<Option<String>, tokio_postgres::Error> {
    missing(
        client,
        JOURNAL,
        "use chute's load journal",
        "run the load again; or send the input on stdin without --load-id, which keeps no journal (an interrupted load then cannot be resumed)",
    )
    .await
}

/// Why the role cannot store partition policies, with the GRANTs that fix it.
pub(crate) async fn policies_missing(client: &Client) -> Result<Option<String>, tokio_postgres::Error> {
    missing(client, POLICIES, "store partition policies", "run the command again").await
}

async fn missing(client: &Client, needs: Needs<'_>, purpose: &str, then: &str) -> Result<Option<String>, tokio_postgres::Error> {
    let r = client
        .query_one(
            "SELECT current_user::text, current_database()::text, to_regnamespace('chute') IS NOT NULL,
                    has_database_privilege(current_database(), 'CREATE')",
            &[],
        )
        .await?;
    let (role, db, exists, may_create): (String, String, bool, bool) = (r.get(0), r.get(1), r.get(2), r.get(3));
    let role_q = quote_ident(&role);
    if !exists {
        if may_create {
            return Ok(None);
        }
        return Ok(Some(format!(
            "chute needs schema chute in database {db} to {purpose}; it does not exist yet and role {role} may not create it (no CREATE \
             on the database, SQLSTATE 42501): run the command once as the database owner, or GRANT CREATE ON DATABASE {} TO {role_q}; then {then}",
            quote_ident(&db)
        )));
    }
    let usage: bool = client.query_one("SELECT has_schema_privilege('chute', 'USAGE')", &[]).await?.get(0);
    let mut lacking_all = Vec::new();
    if !usage {
        lacking_all.push("USAGE on schema chute".to_owned());
    } else {
        for (table, privileges) in needs {
            let held: Option<Vec<bool>> = client
                .query_one(
                    "SELECT CASE WHEN to_regclass($1) IS NOT NULL THEN
                         array(SELECT has_table_privilege($1, p) FROM unnest($2::text[]) WITH ORDINALITY u(p, i) ORDER BY i) END",
                    &[table, privileges],
                )
                .await?
                .get(0);
            // A table an older chute did not make is made by this run's upgrade.
            let Some(held) = held else { continue };
            let lacking: Vec<&str> = privileges.iter().zip(held).filter(|(_, h)| !h).map(|(p, _)| *p).collect();
            if !lacking.is_empty() {
                lacking_all.push(format!("{} on {table}", lacking.join(", ")));
            }
        }
    }
    if lacking_all.is_empty() {
        return Ok(None);
    }
    let mut grants = format!("GRANT USAGE ON SCHEMA chute TO {role_q};");
    for (table, privileges) in needs {
        grants.push_str(&format!(" GRANT {} ON {table} TO {role_q};", privileges.join(", ")));
    }
    Ok(Some(format!(
        "role {role} may not {purpose} in schema chute (missing: {}; SQLSTATE 42501): as the owner of schema chute run psql -c '{grants}' and {then}",
        lacking_all.join("; ")
    )))
}
