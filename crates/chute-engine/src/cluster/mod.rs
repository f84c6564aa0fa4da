//! Scale-out: one logical table over several PostgreSQL servers.
//!
//! The coordinator is an ordinary PostgreSQL server whose catalog stays the
//! source of truth: a distributed table is a range-partitioned parent whose
//! time partitions are hash-partitioned into foreign tables (`postgres_fdw`),
//! each shard's rows living in an ordinary table on a data node. Queries on
//! the coordinator see every row, with partition pruning; `chute load`
//! reads the shard map from the coordinator and sends each node its rows
//! directly (see `load::sink::nodes`), so no coordinator is in the data path.
//!
//! The nodes are recorded in `chute.nodes` on the coordinator (name and URL,
//! never a password); each has a `postgres_fdw` server named
//! `chute_node_NAME` and a user mapping for the current user, which holds
//! the password if there is one. chute reads that password back from the
//! mapping to reach the node itself, so it is stored in one place only.

use chute_core::ident::{quote_ident, quote_literal};
use chute_core::partman::policy::server_name;
pub use tokio_postgres::Client;

use crate::connect::{Endpoint, Env};
use crate::{ConnectError, ConnectOptions};

mod drift;
mod shards;
mod status;

pub use drift::{Drift, detect as detect_drift, sync as sync_ddl};
pub use status::{ClusterStatus, NodeStatus, status};

const NODES_SQL: &str = "CREATE TABLE IF NOT EXISTS chute.nodes (
    name text PRIMARY KEY,
    url text NOT NULL,
    server text NOT NULL,
    added_at timestamptz NOT NULL DEFAULT now()
)";

#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Refused(String),
    #[error("{context}: {}", crate::error::describe(source))]
    Sql { context: String, source: tokio_postgres::Error },
    #[error("{0}")]
    Connect(#[from] ConnectError),
}

impl ClusterError {
    pub(crate) fn sql(context: impl Into<String>) -> impl FnOnce(tokio_postgres::Error) -> ClusterError {
        let context = context.into();
        move |source| ClusterError::Sql { context, source }
    }

    /// The server's SQLSTATE, when a statement failed.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            ClusterError::Sql { source, .. } => source.code().map(|c| c.code()),
            _ => None,
        }
    }
}

impl crate::retry::Classify for ClusterError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            ClusterError::Sql { source, .. } => crate::retry::classify(source),
            ClusterError::Connect(e) => crate::retry::Classify::fault(e),
            ClusterError::Refused(_) => crate::retry::Fault::Fatal,
        }
    }
}

/// A data node as `--node NAME=URL` gives it (the URL may hold a password).
#[derive(Debug, Clone)]
pub struct NodeSpec {
    pub name: String,
    pub url: String,
}

impl NodeSpec {
    /// `NAME=URL`.
    pub fn parse(arg: &str) -> Result<NodeSpec, String> {
        let (name, url) = arg.split_once('=').ok_or_else(|| "--node takes NAME=URL, e.g. --node n1=postgres://me@host1/db".to_owned())?;
        // A URL with no name in front splits at its first '=' (a query's
        // or a key=value string's), which may come after its password:
        // that "name" is never shown.
        if name.contains([':', '/', '@']) || name.contains(char::is_whitespace) {
            return Err(
                "--node takes NAME=URL and this one starts with its URL: put a name in front, e.g. --node n1=postgres://me@host1/db".into(),
            );
        }
        check_name(name)?;
        if url.trim().is_empty() {
            return Err(format!("--node {name}= has no URL: give NAME=URL"));
        }
        Ok(NodeSpec { name: name.to_owned(), url: url.to_owned() })
    }
}

/// Node names become parts of server names: lower-case letters, digits and
/// `_`, starting with a letter, at most 40 bytes.
pub fn check_name(name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if ok { Ok(()) } else { Err(format!("node name {name:?}: use lower-case letters, digits and _ (starting with a letter, at most 40)")) }
}

/// A node as the coordinator records it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Node {
    pub name: String,
    /// Without a password.
    pub url: String,
    pub server: String,
}

/// What `init` and `add-node` did for one node.
#[derive(Debug, Clone, serde::Serialize)]
pub struct NodeAdded {
    pub name: String,
    pub url: String,
    pub server: String,
    pub version: String,
    /// The node was recorded already (its URL and mapping were refreshed).
    pub existed: bool,
    /// `--dry-run`: the statements that would run.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub planned: Vec<String>,
}

/// Makes `chute.nodes` (and the rest of chute's schema) on the coordinator.
pub async fn ensure_schema(client: &Client) -> Result<(), ClusterError> {
    crate::schema::ensure(client).await.map_err(|e| ClusterError::Refused(e.to_string()))?;
    client.batch_execute(NODES_SQL).await.map_err(ClusterError::sql("creating chute.nodes"))
}

/// The nodes recorded on the coordinator, by name (none before `cluster init`).
pub async fn nodes(client: &Client) -> Result<Vec<Node>, ClusterError> {
    let exists: bool = client
        .query_one("SELECT to_regclass('chute.nodes') IS NOT NULL", &[])
        .await
        .map_err(ClusterError::sql("reading chute.nodes"))?
        .get(0);
    if !exists {
        return Ok(Vec::new());
    }
    let rows = client
        .query("SELECT name, url, server FROM chute.nodes ORDER BY name", &[])
        .await
        .map_err(ClusterError::sql("reading chute.nodes"))?;
    Ok(rows.iter().map(|r| Node { name: r.get(0), url: r.get(1), server: r.get(2) }).collect())
}

async fn major_version(client: &Client, what: &str) -> Result<(i32, String), ClusterError> {
    let row = client
        .query_one("SELECT current_setting('server_version_num')::int, current_setting('server_version')", &[])
        .await
        .map_err(ClusterError::sql(format!("reading the version of {what}")))?;
    Ok((row.get::<_, i32>(0) / 10000, row.get(1)))
}

/// Records `specs` as data nodes of the coordinator: checks each is
/// reachable and runs the coordinator's major version (all before changing
/// anything), then makes its `postgres_fdw` server and user mapping and
/// records it. Running it again with the same nodes changes nothing but
/// their URLs and passwords.
pub async fn add_nodes(coordinator: &Client, specs: &[NodeSpec], env: &(dyn Env + Sync)) -> Result<Vec<NodeAdded>, ClusterError> {
    add_nodes_or_plan(coordinator, specs, env, false).await
}

/// [`add_nodes`], or with `dry_run` only its checks: each node's `planned`
/// statements are what would run (the password shown as `********`).
pub async fn add_nodes_or_plan(
    coordinator: &Client,
    specs: &[NodeSpec],
    env: &(dyn Env + Sync),
    dry_run: bool,
) -> Result<Vec<NodeAdded>, ClusterError> {
    let mut seen = std::collections::HashSet::new();
    for s in specs {
        check_name(&s.name).map_err(ClusterError::Refused)?;
        if !seen.insert(s.name.as_str()) {
            return Err(ClusterError::Refused(format!("node {} is named twice", s.name)));
        }
    }
    let (major, coordinator_version) = major_version(coordinator, "the coordinator").await?;
    let mut checked = Vec::new();
    for s in specs {
        let opts = ConnectOptions::resolve(Some(&s.url), env)
            .map_err(|e| ClusterError::Refused(format!("node {}: {}", s.name, redacted(&e.to_string(), &s.url))))?;
        let client = opts.connect().await.map_err(|e| {
            ClusterError::Refused(format!(
                "node {} ({}) is not reachable: {}; check that it runs and accepts connections from here",
                s.name,
                opts.display_url(),
                redacted(&e.to_string(), &s.url)
            ))
        })?;
        let (node_major, version) = major_version(&client, &format!("node {}", s.name)).await?;
        if node_major != major {
            return Err(ClusterError::Refused(format!(
                "node {} runs PostgreSQL {version}, the coordinator {coordinator_version}: every node must run the same major version",
                s.name
            )));
        }
        checked.push((s, opts, version));
    }
    if dry_run {
        return plan_nodes(coordinator, checked).await;
    }
    // No load into a distributed table may run while the nodes change.
    let free: bool = coordinator
        .query_one("SELECT pg_try_advisory_lock($1)", &[&crate::node_conn::SHARD_MAP_LOCK])
        .await
        .map_err(ClusterError::sql("locking the shard map"))?
        .get(0);
    if !free {
        return Err(ClusterError::Refused(
            "a load into a distributed table is running, or another chute cluster command (either holds the shard map): change the nodes once it is done".into(),
        ));
    }
    coordinator.batch_execute("CREATE EXTENSION IF NOT EXISTS postgres_fdw").await.map_err(|e| {
        ClusterError::Refused(format!(
            "cannot create the extension postgres_fdw on the coordinator ({}): it ships with PostgreSQL's contrib (Debian: in the postgresql-NN package; others: postgresql-contrib) and needs a superuser or a trusted-extension grant",
            crate::error::describe(&e)
        ))
    })?;
    ensure_schema(coordinator).await?;
    let mut out = Vec::new();
    for (s, opts, version) in checked {
        let server = server_name(&s.name);
        let existed = set_server(coordinator, &server, &opts).await?;
        set_user_mapping(coordinator, &server, &opts).await?;
        coordinator
            .execute(
                "INSERT INTO chute.nodes (name, url, server) VALUES ($1, $2, $3)
                 ON CONFLICT (name) DO UPDATE SET url = EXCLUDED.url, server = EXCLUDED.server",
                &[&s.name, &opts.display_url(), &server],
            )
            .await
            .map_err(ClusterError::sql("recording the node in chute.nodes"))?;
        out.push(NodeAdded { name: s.name.clone(), url: opts.display_url(), server, version, existed, planned: Vec::new() });
    }
    let _ = coordinator.execute("SELECT pg_advisory_unlock($1)", &[&crate::node_conn::SHARD_MAP_LOCK]).await;
    Ok(out)
}

/// What adding the checked nodes would run on the coordinator, each node's
/// statements with its password shown as `********`.
async fn plan_nodes(coordinator: &Client, checked: Vec<(&NodeSpec, ConnectOptions, String)>) -> Result<Vec<NodeAdded>, ClusterError> {
    let mut out = Vec::new();
    for (s, opts, version) in checked {
        let server = server_name(&s.name);
        let existed: bool = coordinator
            .query_one("SELECT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = $1)", &[&server])
            .await
            .map_err(ClusterError::sql("reading pg_foreign_server"))?
            .get(0);
        let (host, port) = (endpoint_host(&opts), opts.port);
        let password = if opts.has_password() { ", password '********'" } else { "" };
        let planned = vec![
            "CREATE EXTENSION IF NOT EXISTS postgres_fdw".to_owned(),
            format!(
                "{} SERVER {} … (host {}, port '{port}', dbname {})",
                if existed { "ALTER" } else { "CREATE" },
                quote_ident(&server),
                quote_literal(&host),
                quote_literal(&opts.dbname)
            ),
            format!(
                "CREATE USER MAPPING FOR CURRENT_USER SERVER {} OPTIONS (user {}{password})",
                quote_ident(&server),
                quote_literal(&opts.user)
            ),
            format!("INSERT INTO chute.nodes … ({}, {})", quote_literal(&s.name), quote_literal(&opts.display_url())),
        ];
        out.push(NodeAdded { name: s.name.clone(), url: opts.display_url(), server, version, existed, planned });
    }
    Ok(out)
}

/// A message with the URL's password (if any) taken out.
fn redacted(message: &str, url: &str) -> String {
    let redacted_url = crate::connect::conninfo::redact(url);
    let mut m = message.replace(url, &redacted_url);
    if let Ok(params) = crate::connect::conninfo::parse(url) {
        for (k, v) in params {
            if k == "password" && !v.is_empty() {
                m = m.replace(&v, "********");
            }
        }
    }
    m
}

fn endpoint_host(opts: &ConnectOptions) -> String {
    match &opts.hosts[0] {
        Endpoint::Tcp(h) => h.clone(),
        Endpoint::Unix(p) => p.display().to_string(),
    }
}

/// Creates or updates the node's foreign server; true when it existed.
async fn set_server(client: &Client, server: &str, opts: &ConnectOptions) -> Result<bool, ClusterError> {
    let host = endpoint_host(opts);
    let options = [("host", host), ("port", opts.port.to_string()), ("dbname", opts.dbname.clone())];
    let exists: bool = client
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_foreign_server WHERE srvname = $1)", &[&server])
        .await
        .map_err(ClusterError::sql("reading pg_foreign_server"))?
        .get(0);
    let sql = if exists {
        let set: Vec<String> = options.iter().map(|(k, v)| format!("SET {k} {}", quote_literal(v))).collect();
        format!("ALTER SERVER {} OPTIONS ({})", quote_ident(server), set.join(", "))
    } else {
        let opts: Vec<String> = options.iter().map(|(k, v)| format!("{k} {}", quote_literal(v))).collect();
        format!(
            "CREATE SERVER {} FOREIGN DATA WRAPPER postgres_fdw OPTIONS ({}, async_capable 'true', fetch_size '10000')",
            quote_ident(server),
            opts.join(", ")
        )
    };
    client.batch_execute(&sql).await.map_err(ClusterError::sql(format!("making the foreign server {server}")))?;
    Ok(exists)
}

/// The user mapping of the current user for `server`, holding the node's
/// user and password. The password travels as a bound parameter and is
/// spliced in by the server, so no statement text (which the server may
/// log) and no error of ours ever holds it.
async fn set_user_mapping(client: &Client, server: &str, opts: &ConnectOptions) -> Result<(), ClusterError> {
    let password = opts.password_for_child_env().unwrap_or("").to_owned();
    let user = opts.user.clone();
    client.batch_execute("BEGIN").await.map_err(ClusterError::sql("starting a transaction"))?;
    let result = async {
        client
            .execute(
                "SELECT set_config('chute.node_user', $1, true), set_config('chute.node_password', $2, true), set_config('chute.node_server', $3, true)",
                &[&user, &password, &server],
            )
            .await?;
        client
            .batch_execute(
                "DO $chute$ BEGIN
                   EXECUTE format('DROP USER MAPPING IF EXISTS FOR CURRENT_USER SERVER %I', current_setting('chute.node_server'));
                   IF current_setting('chute.node_password') = '' THEN
                     EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER %I OPTIONS (user %L)',
                       current_setting('chute.node_server'), current_setting('chute.node_user'));
                   ELSE
                     EXECUTE format('CREATE USER MAPPING FOR CURRENT_USER SERVER %I OPTIONS (user %L, password %L)',
                       current_setting('chute.node_server'), current_setting('chute.node_user'), current_setting('chute.node_password'));
                   END IF;
                   PERFORM set_config('chute.node_password', '', true);
                 END $chute$",
            )
            .await
    }
    .await;
    match result {
        Ok(()) => client.batch_execute("COMMIT").await.map_err(ClusterError::sql("committing the user mapping")),
        Err(e) => {
            let _ = client.batch_execute("ROLLBACK").await;
            Err(ClusterError::Refused(format!(
                "cannot make the user mapping for {server} (SQLSTATE {})",
                e.code().map(|c| c.code()).unwrap_or("none")
            )))
        }
    }
}

/// How to reach node `name` from here (see `crate::node_conn`).
pub async fn node_options(coordinator: &Client, name: &str, env: &(dyn Env + Sync)) -> Result<ConnectOptions, ClusterError> {
    crate::node_conn::node_options(coordinator, name, env).await.map_err(ClusterError::Refused)
}

/// Every node's connection options, by name.
pub async fn all_node_options(coordinator: &Client, env: &(dyn Env + Sync)) -> Result<Vec<(Node, ConnectOptions)>, ClusterError> {
    let mut out = Vec::new();
    for n in nodes(coordinator).await? {
        let opts = node_options(coordinator, &n.name, env).await?;
        out.push((n, opts));
    }
    Ok(out)
}

/// Drops the tables behind `table`'s foreign partitions on their nodes
/// (before `table` itself is dropped on the coordinator), and forgets the
/// journal of load `forget_load` there.
pub async fn drop_remote(coordinator: &Client, table: &str, forget_load: Option<&str>) -> Result<(), ClusterError> {
    let root: Option<u32> =
        coordinator.query_one("SELECT to_regclass($1)::oid", &[&table]).await.map_err(ClusterError::sql("looking up the table"))?.get(0);
    let shards = match root {
        Some(root) => shards::shards(coordinator).await?.into_iter().filter(|s| s.root == root).collect(),
        None => Vec::new(),
    };
    for (node, opts) in all_node_options(coordinator, &crate::connect::ProcessEnv).await? {
        let client = opts.connect().await?;
        for s in shards.iter().filter(|s| s.server == node.server) {
            client
                .batch_execute(&format!("DROP TABLE IF EXISTS {}.{}", quote_ident(&s.schema), quote_ident(&s.table)))
                .await
                .map_err(ClusterError::sql(format!("dropping {}.{} on node {}", s.schema, s.table, node.name)))?;
        }
        if let Some(id) = forget_load {
            let exists: bool = client
                .query_one("SELECT to_regclass('chute.loads') IS NOT NULL", &[])
                .await
                .map_err(ClusterError::sql("reading chute.loads"))?
                .get(0);
            if exists {
                client
                    .execute("DELETE FROM chute.loads WHERE load_id = $1", &[&id])
                    .await
                    .map_err(ClusterError::sql("forgetting the load"))?;
            }
        }
    }
    Ok(())
}
