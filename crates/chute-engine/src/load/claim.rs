//! One run at a time per load: two runs of the same load (two cron jobs, a
//! retry while the first still runs) must never both load the same rows.
//!
//! A run holds a session advisory lock on its load id on its control
//! connection for as long as it runs; a second run is refused (or waits,
//! with `--wait`) before it reads the journal. The lock goes with the
//! connection, so it alone cannot stop a run whose control connection dropped
//! while another run started: each run therefore also writes its token to
//! `chute.loads.owner` once it holds the lock, and every batch reads that
//! row `FOR SHARE` in its own transaction and commits only while the token
//! is its run's. A new run's update of the token waits for the batches in
//! flight, so the journal it reads next holds all of them, and later batches
//! of the old run see the new token and stop.
//!
//! A failover can take a run's claim with it: the run wrote its token on a
//! primary that died before the write reached the standby now promoted, so
//! the new primary names the run before it (or no run, for a new load). No
//! other run took the load then (a run that takes it writes a token of its
//! own), so a batch that finds the load as it was before this run claims it
//! again, in its own transaction, and goes on: a run that starts meanwhile
//! writes its token after that transaction (its update waits for it) and
//! reads a journal that holds the batch.

use tokio_postgres::{Client, Transaction};

use super::journal::Before;
use super::{LoadError, LoadProgress};

/// The advisory lock key (one bigint) of a load id.
pub(crate) fn lock_key(load_id: &str) -> i64 {
    super::journal::stable_hash(&["chute load", load_id]) as i64
}

/// Takes the load's lock for this session, or says who holds it.
pub(crate) async fn acquire(client: &Client, load_id: &str, wait: bool, progress: &mut dyn LoadProgress) -> Result<(), LoadError> {
    let key = lock_key(load_id);
    let got: bool =
        client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(|e| LoadError::sql("locking the load", e))?.get(0);
    if got {
        return Ok(());
    }
    let holder = holder_pid(client, key).await?;
    let who = holder.map_or_else(|| "another session".to_owned(), |pid| format!("PostgreSQL backend pid {pid}"));
    if !wait {
        return Err(LoadError::Setup(format!(
            "load {load_id} is already running: {who} holds its lock (another chute load of the same input into the same table); \
             nothing was loaded. Wait for that run to finish and run this command again (it then loads only what is left), \
             or add {} to wait for it",
            crate::setting::Setting::Wait
        )));
    }
    progress.notice(&format!("load {load_id} is already running ({who} holds its lock): waiting for it to finish"));
    client.execute("SELECT pg_advisory_lock($1)", &[&key]).await.map_err(|e| LoadError::sql("waiting for the load's lock", e))?;
    Ok(())
}

/// Takes the load's lock again on a new control connection (the old one
/// took it with it); refuses when another run holds it now.
pub(crate) async fn retake(client: &Client, load_id: &str) -> Result<(), LoadError> {
    let key = lock_key(load_id);
    let got: bool =
        client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]).await.map_err(|e| LoadError::sql("locking the load again", e))?.get(0);
    if got {
        return Ok(());
    }
    let who = holder_pid(client, key).await?.map_or_else(|| "another session".to_owned(), |pid| format!("PostgreSQL backend pid {pid}"));
    Err(LoadError::Setup(format!(
        "another run of load {load_id} took it over while this run's connection was lost ({who} holds its lock now): \
         this run stopped; what it committed stays, and that run loads the rest"
    )))
}

/// The backend that holds the lock `key` in this database, if any.
async fn holder_pid(client: &Client, key: i64) -> Result<Option<i32>, LoadError> {
    let (high, low) = ((key as u64 >> 32) as i64, (key as u64 & 0xffff_ffff) as i64);
    let row = client
        .query_opt(
            "SELECT pid FROM pg_locks
             WHERE locktype = 'advisory' AND granted AND objsubid = 1
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
               AND classid::int8 = $1 AND objid::int8 = $2
             LIMIT 1",
            &[&high, &low],
        )
        .await
        .map_err(|e| LoadError::sql("reading pg_locks", e))?;
    Ok(row.map(|r| r.get(0)))
}

/// A batch may commit: this run owned the load, or claimed it again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fenced {
    Owned,
    /// The server had lost this run's claim (a failover); the batch's
    /// transaction claims it again.
    Retaken,
}

/// In a batch's transaction: whether this run (`owner`) still owns the load.
/// Holds the load's row `FOR SHARE` until the batch commits; when the row
/// is as it was before this run (`before`), claims it again.
///
/// A load whose inputs several runs share (the partitions of a Kafka topic,
/// read by the consumers of one group: `owned` is how many this run took)
/// is fenced per input instead: each run owns the inputs it was given (see
/// `journal::open`) and a batch commits only while this run still owns all
/// of them, holding their rows of `chute.load_positions` `FOR SHARE`. A
/// consumer that takes a partition over updates its row, which waits for
/// the batches in flight, so the journal it reads next holds them all.
pub(crate) async fn fence(
    txn: &Transaction<'_>,
    load_id: &str,
    owner: &str,
    owned: Option<usize>,
    before: Option<&Before>,
) -> Result<Result<Fenced, LoadError>, tokio_postgres::Error> {
    if let Some(owned) = owned {
        let held = super::journal::hold_inputs(txn, load_id, owner).await?;
        if held == owned {
            return Ok(Ok(Fenced::Owned));
        }
        return Ok(Err(LoadError::Setup(format!(
            "another consumer of load {load_id} took over some of this run's partitions (a rebalance of the group): \
             this run stopped; what it committed stays, and the partitions are read on from the journal"
        ))));
    }
    let row = txn.query_opt("SELECT owner FROM chute.loads WHERE load_id = $1 FOR SHARE", &[&load_id]).await?;
    let found = row.is_some();
    let now: Option<String> = row.and_then(|r| r.get(0));
    if now.as_deref() == Some(owner) {
        return Ok(Ok(Fenced::Owned));
    }
    if let Some(b) = before
        && (if found { now.is_some() && now == b.previous } else { b.previous.is_none() })
    {
        // The update waits for a run that took the row meanwhile, and then
        // finds its token: no row comes back. Another batch of this run
        // claiming it at the same time leaves this run's token: go on.
        let retaken = txn
            .query_opt(
                "INSERT INTO chute.loads (load_id, table_name, inputs, owner) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (load_id) DO UPDATE SET owner = $4
                   WHERE chute.loads.owner IS NOT DISTINCT FROM $5 OR chute.loads.owner = $4
                 RETURNING owner",
                &[&load_id, &b.table, &b.inputs, &owner, &now],
            )
            .await?;
        if retaken.is_some() {
            return Ok(Ok(Fenced::Retaken));
        }
    }
    Ok(Err(LoadError::Setup(format!(
        "another run of load {load_id} took it over (or it was forgotten) while this run had lost its connection: \
         this run stopped; what it committed stays, and the same command run again loads only what is left"
    ))))
}
