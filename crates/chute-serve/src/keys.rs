//! Exactly-once retries: a request with an `Idempotency-Key` header.
//!
//! Every lane is a journaled load (`chute.load_journal`): each COPY batch
//! records, in the transaction of its rows, the input ranges it holds per
//! leaf, and a new run of the lane skips a row whose offset lies in a
//! committed range of its leaf. A keyed request's rows get, per lane, a
//! range of offsets that is remembered with its key (`chute.serve_requests`)
//! before they are sent; a retry sends its rows again at the same offsets,
//! so whatever an earlier attempt committed is skipped and the rest is
//! loaded. That holds once the lane's load has read the journal after the
//! earlier attempt ended: one of this process in the lane's current run makes
//! the lane start a new run first; one of another process (another instance,
//! or this service before a restart) makes the lane wait for that process's
//! batches in flight (`settle`) and then start a run after them. A lane's run
//! skips what the lanes of its table in every process committed (each
//! process's lane is a load of its own: see `lanes`), and a key is held by
//! one attempt at a time across processes (`hold`). A request whose every row is committed is
//! marked done with its answer, which a retry gets again at once.
//!
//! A key is bound to its request: its record keeps a digest of the
//! request's target and body (`digest`), and the same key sent with another
//! request gets 422 and writes nothing (as the IETF draft on the
//! `Idempotency-Key` header asks), instead of being answered for rows it
//! never wrote. A retry's rows are matched by position, so a retry must be
//! the same request: by byte for a request's own records (CSV, JSON lines,
//! samples), by row for line protocol's parsed values (`Part::rows`), whose
//! bytes change when the table gains a column between attempts. Keys and journal entries older than
//! `--idempotency-window` are forgotten when a lane starts and every ten
//! minutes after.
//!
//! A TRUNCATE (or VACUUM FULL, CLUSTER) of a leaf changes its storage under
//! the journal: before each run of a lane the journal's entries are moved
//! to the leaf's storage as it is now (`repair_journal`). A key recorded
//! before a TRUNCATE keeps its answer, and its rows are not written again:
//! the TRUNCATE removed them, as it removes any row.

use std::collections::HashSet;
use std::sync::Mutex;

use tokio_postgres::Client;

use chute_core::ident::QualifiedName;

use super::ServeConfig;
use super::catalog::LaneError;

/// What is known of a key in one lane.
#[derive(Debug, Clone)]
pub(crate) enum KeyState {
    /// First seen now: its range is recorded.
    New,
    /// Seen before: send again at `start` (after the lane's run is newer
    /// than `generation` when `owner` is this process).
    Retry { start: u64, owner: String, generation: u64 },
    /// Every row of it is committed: the answer given then.
    Done { status: u16, answer: String },
    /// The key was used for another request (another target or body).
    Other,
}

/// The digest a key is bound to: SHA-256 of what makes a request the same
/// request (`parts`: its endpoint, target and parameters, its body as
/// decompressed), each part's length before it.
pub(crate) fn digest(parts: &[&[u8]]) -> String {
    let mut d = ring::digest::Context::new(&ring::digest::SHA256);
    for p in parts {
        d.update(&(p.len() as u64).to_le_bytes());
        d.update(p);
    }
    d.finish().as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// The service's connection for keys, made (again) when needed.
pub(crate) struct Keys {
    /// A few connections (statements of concurrent requests are pipelined
    /// on each, and spread over them: one server process for every keyed
    /// request was the slowest part of a request under load).
    clients: Vec<tokio::sync::Mutex<Option<std::sync::Arc<Client>>>>,
    /// Which connection the next statement takes.
    next: std::sync::atomic::AtomicUsize,
    /// Keys being handled by a request now (a second one waits).
    busy: Mutex<HashSet<(String, String)>>,
    /// This process, as recorded with its keys.
    pub owner: String,
}

/// Connections for keys.
const KEY_CONNECTIONS: usize = 4;

/// A key held by one request at a time, in every process: released when dropped.
pub(crate) struct Held {
    keys: std::sync::Arc<Keys>,
    id: (String, String),
    /// The connection whose session holds the key's advisory lock (see `hold`).
    lock: Option<(std::sync::Arc<Client>, i64)>,
}

impl Drop for Held {
    fn drop(&mut self) {
        let runtime = tokio::runtime::Handle::try_current();
        if let Some((client, lock)) = self.lock.take()
            && let Ok(runtime) = runtime
        {
            // Let go in this process once let go for the others.
            let (keys, id) = (self.keys.clone(), self.id.clone());
            runtime.spawn(async move {
                let _ = client.execute("SELECT pg_advisory_unlock($1)", &[&lock]).await;
                keys.busy.lock().expect("busy keys").remove(&id);
            });
            return;
        }
        self.keys.busy.lock().expect("busy keys").remove(&self.id);
    }
}

/// Why a key could not be held.
pub(crate) enum Busy {
    /// Another request (of this process or another) still held it at the deadline.
    Held,
    /// The key's lock could not be taken (the server is away).
    Lane(LaneError),
}

impl Keys {
    pub(crate) fn new() -> Keys {
        let owner = format!("{}-{:?}", std::process::id(), std::time::SystemTime::now());
        Keys {
            clients: (0..KEY_CONNECTIONS).map(|_| tokio::sync::Mutex::new(None)).collect(),
            next: Default::default(),
            busy: Mutex::new(HashSet::new()),
            owner,
        }
    }

    /// Waits until no other request handles `key`, in this process or in
    /// another `chute serve` writing into the same database, then holds it
    /// (until `deadline`). Across processes a key is a session advisory lock
    /// on a connection for keys: the process that holds it lets go once its
    /// attempt is over (see `submit`), and a process that dies lets go with
    /// its session, so a retry sent to another instance waits for the first
    /// one's attempt, or its death, and never runs beside it.
    pub(crate) async fn hold(
        self: &std::sync::Arc<Self>,
        config: &ServeConfig,
        key: &str,
        deadline: tokio::time::Instant,
    ) -> Result<Held, Busy> {
        let id = (String::new(), key.to_owned());
        loop {
            if self.busy.lock().expect("busy keys").insert(id.clone()) {
                break;
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Busy::Held);
            }
            // Waiting for the other request to finish, not a retry.
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        let mut held = Held { keys: self.clone(), id, lock: None };
        let lock = chute_engine::load::journal::stable_hash(&["chute serve key", key]) as i64;
        loop {
            // A server away is waited for until the deadline, as for the key's record.
            let (client, got) = super::patiently(deadline, || self.try_lock(config, lock)).await.map_err(Busy::Lane)?;
            if got {
                held.lock = Some((client, lock));
                return Ok(held);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(Busy::Held);
            }
            // Waiting for another instance's attempt to end, not a retry.
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// Tries to take advisory lock `lock` on one of the connections for keys: the connection, and whether it did.
    async fn try_lock(&self, config: &ServeConfig, lock: i64) -> Result<(std::sync::Arc<Client>, bool), LaneError> {
        let client = self.client(config).await?;
        let got = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&lock])
            .await
            .map_err(super::catalog::sql_error("taking an idempotency key's lock".into()))?
            .get(0);
        Ok((client, got))
    }

    /// Waits for the batches in flight of every lane of a table (their load
    /// ids start with `journals`), in any process: after another instance's
    /// attempt at a key ended (it died: its key's lock went with its
    /// session), a batch of it may still be committing. Each batch holds its
    /// load's row of `chute.loads` until it commits (see the engine's
    /// `claim::fence`); a lane run that starts after this reads a journal
    /// that holds all of them.
    pub(crate) async fn settle(&self, config: &ServeConfig, journals: &str) -> Result<(), LaneError> {
        self.with_client(config, async |c| {
            c.query_one(
                "SELECT count(*) FROM (SELECT 1 FROM chute.loads WHERE starts_with(load_id, $1) FOR NO KEY UPDATE) l",
                &[&journals],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Runs `f` on the service's connection for keys, made (again) when
    /// there is none or it closed. Requests share it without waiting for
    /// each other: their statements are pipelined on it.
    async fn with_client<T>(
        &self,
        config: &ServeConfig,
        f: impl AsyncFnOnce(&Client) -> Result<T, tokio_postgres::Error>,
    ) -> Result<T, LaneError> {
        let client = self.client(config).await?;
        f(&client).await.map_err(super::catalog::sql_error("recording an idempotency key".into()))
    }

    /// One of the service's connections for keys, made (again) when there is none or it closed.
    async fn client(&self, config: &ServeConfig) -> Result<std::sync::Arc<Client>, LaneError> {
        Ok({
            let at = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) % self.clients.len();
            let mut c = self.clients[at].lock().await;
            if c.as_ref().is_none_or(|c| c.is_closed()) {
                let client = config.target.connect().await?;
                // The schema's bootstrap makes chute.serve_requests (versions 5 to 8).
                chute_engine::schema::ensure(&client).await?;
                // A key's record is written before its rows are sent, so the commit of
                // any of its rows (synchronous, in the lanes) makes the WAL durable past
                // it; a record lost with the rest of an unflushed tail only makes a
                // retry send the request again, which the journal keeps exactly once.
                // Not waiting for a flush per record takes the disk off every request.
                client
                    .batch_execute("SET synchronous_commit = off")
                    .await
                    .map_err(super::catalog::sql_error("setting up the keys' connection".into()))?;
                *c = Some(std::sync::Arc::new(client));
            }
            c.as_ref().expect("connected").clone()
        })
    }

    /// A fresh block of offsets for a lane's run: 2^40 of them, never used before.
    pub(crate) async fn offset_block(&self, config: &ServeConfig) -> Result<u64, LaneError> {
        self.with_client(config, async |c| {
            let v: i64 = c.query_one("SELECT nextval('chute.serve_offsets')", &[]).await?.get(0);
            Ok((v as u64) << 40)
        })
        .await
    }

    /// The state of `key` in the lane `id` of `table`; a new key gets `start` (and the range
    /// of `len` offsets from it) recorded, with the oid `table` has now and
    /// the request's `digest`. A key recorded (in any lane, for a table that
    /// is still there) with another digest is `Other`, and nothing is
    /// recorded. A key recorded for a table of that name that was dropped
    /// since is forgotten first: its rows went with that table, so the
    /// request is new to this one (as the journal forgets a dropped table's
    /// entries). A new key takes one statement.
    pub(crate) async fn lookup(
        &self,
        config: &ServeConfig,
        (id, table, generation): (&str, &QualifiedName, u64),
        (key, digest): (&str, &str),
        start: u64,
        len: u64,
    ) -> Result<KeyState, LaneError> {
        let owner = self.owner.clone();
        let (table, generation) = (table.quoted(), generation as i64);
        self.with_client(config, async |c| {
            // Another request's record, a dropped table's record gone, and the new one made: one statement.
            let r = c
                .query_one(
                    "WITH other AS (SELECT 1 FROM chute.serve_requests r JOIN pg_class t ON t.oid = r.rel
                                    WHERE r.key = $2 AND r.digest <> $8 LIMIT 1),
                          gone AS (DELETE FROM chute.serve_requests WHERE lane = $1 AND key = $2
                                   AND rel IS DISTINCT FROM to_regclass($7)::oid AND NOT EXISTS (SELECT 1 FROM other) RETURNING 1),
                          made AS (INSERT INTO chute.serve_requests (lane, key, start_offset, end_offset, owner, generation, rel, digest)
                                   SELECT $1, $2, $3, $4, $5, $6, to_regclass($7)::oid, $8
                                   WHERE NOT EXISTS (SELECT 1 FROM other) AND NOT EXISTS (SELECT 1 FROM chute.serve_requests
                                       WHERE lane = $1 AND key = $2 AND rel IS NOT DISTINCT FROM to_regclass($7)::oid)
                                   ON CONFLICT (lane, key) DO NOTHING RETURNING 1)
                     SELECT EXISTS (SELECT 1 FROM other), EXISTS (SELECT 1 FROM made)",
                    &[&id, &key, &(start as i64), &((start + len) as i64), &owner, &generation, &table, &digest],
                )
                .await?;
            if r.get::<_, bool>(0) {
                return Ok(KeyState::Other);
            }
            if r.get::<_, bool>(1) {
                return Ok(KeyState::New);
            }
            // A key of schema version 6 has no digest: it is bound to this request now.
            let found = c
                .query_opt(
                    "UPDATE chute.serve_requests SET digest = coalesce(digest, $3) WHERE lane = $1 AND key = $2
                     RETURNING start_offset, owner, generation, status, answer, digest = $3",
                    &[&id, &key, &digest],
                )
                .await?;
            let Some(r) = found else {
                // The statement above removed a record of a dropped table, and the new one met it: made now.
                c.execute(
                    "INSERT INTO chute.serve_requests (lane, key, start_offset, end_offset, owner, generation, rel, digest)
                     VALUES ($1, $2, $3, $4, $5, $6, to_regclass($7)::oid, $8)",
                    &[&id, &key, &(start as i64), &((start + len) as i64), &owner, &generation, &table, &digest],
                )
                .await?;
                return Ok(KeyState::New);
            };
            if !r.get::<_, bool>(5) {
                return Ok(KeyState::Other);
            }
            Ok(match (r.get::<_, Option<i32>>(3), r.get::<_, Option<String>>(4)) {
                (Some(status), Some(answer)) => KeyState::Done { status: status as u16, answer },
                _ => KeyState::Retry { start: r.get::<_, i64>(0) as u64, owner: r.get(1), generation: r.get::<_, i64>(2) as u64 },
            })
        })
        .await
    }

    /// Forgets the records of `key` made by a request that was then refused.
    pub(crate) async fn forget(&self, config: &ServeConfig, lanes: &[String], key: &str) -> Result<(), LaneError> {
        self.with_client(config, async |c| {
            c.execute("DELETE FROM chute.serve_requests WHERE lane = ANY($1) AND key = $2 AND status IS NULL", &[&lanes, &key]).await?;
            Ok(())
        })
        .await
    }

    /// Brings the journals of a table's lanes (their load ids start with
    /// `journals`, whichever process runs them) up to date with its leaves' storage: a
    /// leaf truncated or rewritten since its entries were written keeps
    /// them (TRUNCATE removed their rows on purpose; VACUUM FULL and
    /// CLUSTER kept them), as the entries of its storage now; entries of a
    /// partitioned parent (rows sent through it) that holds no row any more
    /// are forgotten. Without this a lane would refuse to start, as
    /// `chute load` does for a file.
    pub(crate) async fn repair_journal(&self, config: &ServeConfig, journals: &str) -> Result<(), LaneError> {
        self.with_client(config, async |c| {
            c.execute(
                "UPDATE chute.load_journal j SET relfilenode = c.relfilenode FROM pg_class c
                 WHERE starts_with(j.load_id, $1) AND c.oid = j.rel AND c.relkind <> 'p' AND j.relfilenode IS DISTINCT FROM c.relfilenode",
                &[&journals],
            )
            .await?;
            let parents = c
                .query(
                    "SELECT DISTINCT j.rel::regclass::text FROM chute.load_journal j JOIN pg_class c ON c.oid = j.rel
                     WHERE starts_with(j.load_id, $1) AND c.relkind = 'p'",
                    &[&journals],
                )
                .await?;
            for p in parents {
                let name: String = p.get(0);
                // (`name` is the server's own quoting of the oid.) A role that may not read it keeps the entries.
                let Ok(row) = c.query_one(&format!("SELECT EXISTS (SELECT 1 FROM {name})"), &[]).await else { continue };
                if !row.get::<_, bool>(0) {
                    c.execute("DELETE FROM chute.load_journal WHERE starts_with(load_id, $1) AND rel = $2::regclass", &[&journals, &name])
                        .await?;
                }
            }
            Ok(())
        })
        .await
    }

    /// Forgets what the lane's keys and the journals of the table's lanes
    /// (their load ids start with `journals`) hold from before `window`:
    /// a key is exactly once within it (offsets are never reused, so a
    /// forgotten range can never make a new row look committed).
    pub(crate) async fn prune(
        &self,
        config: &ServeConfig,
        (lane, journals): (&str, &str),
        window: std::time::Duration,
    ) -> Result<u64, LaneError> {
        let secs = window.as_secs_f64();
        self.with_client(config, async |c| {
            // Every process's journal of the table: one that stopped for good leaves its own behind.
            let journal = c
                .execute(
                    "DELETE FROM chute.load_journal WHERE starts_with(load_id, $1) AND committed_at < now() - make_interval(secs => $2)",
                    &[&journals, &secs],
                )
                .await?;
            let keys = c
                .execute(
                    "DELETE FROM chute.serve_requests WHERE lane = $1 AND created_at < now() - make_interval(secs => $2)",
                    &[&lane, &secs],
                )
                .await?;
            Ok(journal + keys)
        })
        .await
    }

    /// A new attempt of a key in this process, in the lane's run `generation`.
    pub(crate) async fn attempt(&self, config: &ServeConfig, lane: &str, key: &str, generation: u64) -> Result<(), LaneError> {
        let owner = self.owner.clone();
        self.with_client(config, async |c| {
            c.execute(
                "UPDATE chute.serve_requests SET owner = $3, generation = $4 WHERE lane = $1 AND key = $2",
                &[&lane, &key, &owner, &(generation as i64)],
            )
            .await?;
            Ok(())
        })
        .await
    }

    /// Every row of the key's request is committed (or rejected for good): its answer.
    pub(crate) async fn done(&self, config: &ServeConfig, lane: &str, key: &str, status: u16, answer: &str) -> Result<(), LaneError> {
        self.with_client(config, async |c| {
            c.execute(
                "UPDATE chute.serve_requests SET status = $3, answer = $4 WHERE lane = $1 AND key = $2",
                &[&lane, &key, &i32::from(status), &answer],
            )
            .await?;
            Ok(())
        })
        .await
    }
}
