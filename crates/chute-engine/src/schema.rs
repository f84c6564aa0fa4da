//! The `chute` schema: everything chute keeps in a database.
//!
//! Policies (and later load journals) live in the database itself so any
//! host can maintain any table. The schema is versioned by `chute.meta`; an
//! older chute refuses a newer schema instead of misreading it.

use tokio_postgres::Client;

/// The schema version this chute writes and understands.
pub const SCHEMA_VERSION: i32 = 11;

#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    #[error("creating the chute schema: {}", crate::exec::describe(.0))]
    /// Not `#[source]`: `describe` already shows the server's message, which a
    /// printed error chain would repeat.
    Sql(tokio_postgres::Error),
    #[error("the chute schema in this database is version {found}, newer than this chute understands ({SCHEMA_VERSION}): upgrade chute")]
    TooNew { found: i32 },
}

impl From<tokio_postgres::Error> for SchemaError {
    fn from(e: tokio_postgres::Error) -> Self {
        SchemaError::Sql(e)
    }
}

const BOOTSTRAP: &str = "
CREATE SCHEMA IF NOT EXISTS chute;
CREATE TABLE IF NOT EXISTS chute.meta (key text PRIMARY KEY, value text NOT NULL);
CREATE TABLE IF NOT EXISTS chute.partition_config (
    parent_schema text NOT NULL,
    parent_table text NOT NULL,
    policy jsonb NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (parent_schema, parent_table)
);
CREATE TABLE IF NOT EXISTS chute.loads (
    load_id text PRIMARY KEY,
    table_name text NOT NULL,
    inputs text NOT NULL,
    started_at timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    status text NOT NULL DEFAULT 'running',
    owner text
);
CREATE TABLE IF NOT EXISTS chute.load_journal (
    load_id text NOT NULL REFERENCES chute.loads ON DELETE CASCADE,
    batch_id text NOT NULL,
    target text NOT NULL,
    input int NOT NULL,
    starts int8[] NOT NULL,
    ends int8[] NOT NULL,
    rows int8 NOT NULL,
    committed_at timestamptz NOT NULL DEFAULT now(),
    rel oid,
    relfilenode oid,
    PRIMARY KEY (load_id, batch_id, target, input)
);
-- Version 3: which physical table an entry describes (see load::journal),
-- and which run of a load may commit (see load::claim).
ALTER TABLE chute.loads ADD COLUMN IF NOT EXISTS owner text;
ALTER TABLE chute.load_journal ADD COLUMN IF NOT EXISTS rel oid, ADD COLUMN IF NOT EXISTS relfilenode oid;
-- Version 2 entries describe the table of their name as it is now (what
-- version 2 assumed); entries of a table that is gone stay without one and
-- are pruned by the next run of their load.
UPDATE chute.load_journal j SET rel = c.oid, relfilenode = c.relfilenode
FROM pg_class c
WHERE j.rel IS NULL AND c.oid = to_regclass(regexp_replace(j.target, ' [(]text[)]$', ''));
-- Version 4: how far each input of a load is committed when it ended (its
-- acknowledgements), for `chute load --status`.
ALTER TABLE chute.loads ADD COLUMN IF NOT EXISTS committed_through jsonb;
-- Version 5: chute serve's idempotency keys (see serve::keys): the offsets
-- a keyed request's rows were given in its table's lane, and its answer.
CREATE TABLE IF NOT EXISTS chute.serve_requests (
    lane text NOT NULL,
    key text NOT NULL,
    start_offset int8 NOT NULL,
    end_offset int8 NOT NULL,
    owner text NOT NULL,
    generation int8 NOT NULL,
    status int4,
    answer text,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (lane, key)
);
CREATE SEQUENCE IF NOT EXISTS chute.serve_offsets;
-- Version 6: the table a key was recorded for (its oid): a key of a table
-- that was dropped since is forgotten, as the journal forgets its entries.
-- A key of version 5 is kept, with the table of its lane's name (a lane is
-- 'serve ' and the table's name, then a hash for CSV and JSON lanes), only
-- when the journal shows rows of its offsets in a leaf that is still there
-- as it was (same relfilenode): its rows are in that table. Any other key
-- of version 5 wrote nothing that is still there, and is forgotten: a
-- retry writes its rows (into the table of that name now).
ALTER TABLE chute.serve_requests ADD COLUMN IF NOT EXISTS rel oid;
UPDATE chute.serve_requests r SET rel = to_regclass(t.name)::oid
FROM (SELECT DISTINCT lane, substring(lane FROM
        '^serve ((?:[a-z_][a-z0-9_]*|\"(?:[^\"]|\"\")+\")(?:[.](?:[a-z_][a-z0-9_]*|\"(?:[^\"]|\"\")+\"))?)(?: [0-9a-f]+)?$') AS name
      FROM chute.serve_requests WHERE rel IS NULL) t
WHERE r.lane = t.lane AND r.rel IS NULL
  AND EXISTS (SELECT 1 FROM chute.load_journal j JOIN pg_class c ON c.oid = j.rel AND c.relfilenode = j.relfilenode
              CROSS JOIN LATERAL unnest(j.starts, j.ends) AS u(s, e)
              -- (a lane's load is the lane's name, and since issue 48 that and ' @' and the instance id)
              WHERE (j.load_id = r.lane OR starts_with(j.load_id, r.lane || ' @')) AND u.s < r.end_offset AND u.e > r.start_offset);
DELETE FROM chute.serve_requests WHERE rel IS NULL;
-- Version 7: chute doctor's record of each index (see doctor::indexes):
-- its scan count has been `scans` since `since`, so that an index is called
-- unused only after a whole --index-window without a scan.
CREATE TABLE IF NOT EXISTS chute.index_watch (
    indexrelid oid PRIMARY KEY,
    indrelid oid NOT NULL,
    since timestamptz NOT NULL,
    scans int8 NOT NULL
);
-- Version 8: a key is bound to its request: the digest of its target and
-- body (see serve::keys), so that the same key with another request is
-- refused instead of answered with the first one's answer. A key of an
-- older version has none and is bound to whatever is sent with it next. Keys are looked
-- up by themselves too (a key is one request, whatever table it wrote to).
ALTER TABLE chute.serve_requests ADD COLUMN IF NOT EXISTS digest text;
CREATE INDEX IF NOT EXISTS serve_requests_key ON chute.serve_requests (key);
-- Version 9: a table's upsert setting (see conflict): what chute serve (and
-- chute load, unless told otherwise) does with a row whose key is there
-- already. An older chute would ignore it and refuse those rows instead.
ALTER TABLE chute.partition_config ADD COLUMN IF NOT EXISTS on_conflict jsonb;
-- Version 10: inputs that several runs of one load share, each owned by one
-- run at a time (the partitions of a Kafka topic, see load::journal): every
-- row of an input before `position` is committed or rejected, the run named
-- by `owner` is the one that may commit its rows, and `rows_before` counts
-- the rows of journal entries folded away once wholly before `position`.
CREATE TABLE IF NOT EXISTS chute.load_positions (
    load_id text NOT NULL REFERENCES chute.loads ON DELETE CASCADE,
    input int NOT NULL,
    name text NOT NULL,
    position int8 NOT NULL DEFAULT 0,
    owner text,
    rows_before int8 NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (load_id, input),
    UNIQUE (load_id, name)
);
-- Version 11: what a shared input's position was kept for (see
-- load::journal::shared_inputs): its source's id (a Kafka topic's id: a
-- topic deleted and made again under its name has another) and the oid of
-- the table the load writes into (a table dropped and made again has
-- another). An input whose source or table is not that one any more starts
-- over from its beginning. A position of version 10 is kept for whatever
-- topic has its name now (version 10 had no id), and for the table of its
-- load's name as it is now (what version 10 assumed); when that table is
-- gone, for none (0: any table starts over). A load into the tables its
-- rows name (`-`) keeps none.
ALTER TABLE chute.load_positions ADD COLUMN IF NOT EXISTS source_id text, ADD COLUMN IF NOT EXISTS rel oid;
UPDATE chute.load_positions p SET rel = coalesce(to_regclass(l.table_name)::oid, 0)
FROM chute.loads l
WHERE p.rel IS NULL AND l.load_id = p.load_id
  AND l.table_name ~ '^(?:[a-z_][a-z0-9_]*|\"(?:[^\"]|\"\")+\")(?:[.](?:[a-z_][a-z0-9_]*|\"(?:[^\"]|\"\")+\"))?$';
INSERT INTO chute.meta VALUES ('schema_version', '11') ON CONFLICT (key) DO UPDATE SET value = '11';
";

/// Creates the schema when missing or older (every statement is idempotent,
/// so versions 1 and 2 are upgraded by running it again; serialized by an advisory
/// lock, since `IF NOT EXISTS` races between concurrent sessions) and checks
/// its version.
pub async fn ensure(client: &Client) -> Result<(), SchemaError> {
    if let Some(v) = version(client).await?
        && v >= SCHEMA_VERSION
    {
        return check(v);
    }
    let bootstrap = format!("BEGIN; SELECT pg_advisory_xact_lock({LOCK_CLASS}, 0); {BOOTSTRAP} COMMIT;");
    for attempt in 1.. {
        let Err(e) = client.batch_execute(&bootstrap).await else { break };
        // The connection is left in an aborted transaction otherwise.
        let _ = client.batch_execute("ROLLBACK").await;
        // An advisory lock does not refresh the catalog snapshot, so `IF NOT
        // EXISTS` can miss what a session that held the lock just committed:
        // the next try sees it.
        use tokio_postgres::error::SqlState;
        let raced = [SqlState::UNIQUE_VIOLATION, SqlState::DUPLICATE_SCHEMA, SqlState::DUPLICATE_TABLE, SqlState::DUPLICATE_OBJECT];
        if attempt >= 3 || !e.code().is_some_and(|c| raced.contains(c)) {
            return Err(e.into());
        }
    }
    match version(client).await? {
        Some(v) => check(v),
        None => Ok(()),
    }
}

fn check(v: i32) -> Result<(), SchemaError> {
    if v > SCHEMA_VERSION { Err(SchemaError::TooNew { found: v }) } else { Ok(()) }
}

/// The schema version, or `None` when chute never wrote to this database.
pub async fn version(client: &Client) -> Result<Option<i32>, tokio_postgres::Error> {
    let exists: bool = client.query_one("SELECT to_regclass('chute.meta') IS NOT NULL", &[]).await?.get(0);
    if !exists {
        return Ok(None);
    }
    let row = client.query_opt("SELECT value FROM chute.meta WHERE key = 'schema_version'", &[]).await?;
    Ok(row.and_then(|r| r.get::<_, String>(0).parse().ok()))
}

/// The first key of every advisory lock chute takes ("chut").
pub const LOCK_CLASS: i32 = 0x6368_7574;

impl crate::retry::Classify for crate::schema::SchemaError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            crate::schema::SchemaError::Sql(e) => crate::retry::classify(e),
            crate::schema::SchemaError::TooNew { .. } => crate::retry::Fault::Fatal,
        }
    }
}
