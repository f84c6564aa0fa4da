//! `chute load --atomic` into a distributed table: the load commits on
//! every server or on none, by two-phase commit.
//!
//! Each server that gets rows has one connection holding one transaction
//! for the whole load; every batch runs in a savepoint of it (so refused
//! rows are isolated as usual) with its journal entries. When the input is
//! done and nothing failed, each such transaction is prepared (`PREPARE
//! TRANSACTION 'chute:KEY:RUN:POOL'`); once all are prepared, the decision
//! is recorded on the coordinator (`chute.atomic_decisions`, committed), and
//! only then is each prepared transaction committed. A failure or a stop
//! before the decision rolls every one back.
//!
//! A crash (kill -9, a lost machine) can leave prepared transactions behind.
//! [`recover`] resolves them by the recorded decision: with one, commit;
//! without, roll back. It runs at the start of every distributed load (so
//! the next run cleans up its predecessor before it reads the journals) and
//! as `chute cluster recover`. KEY is the load's lock key: a load that is
//! still running holds that lock on the coordinator, and its transactions
//! are left alone.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio_postgres::Client;

use super::{Attempt, AttemptError, Committed, CopyOutcome, Written, commit_batch};
use super::{Job, WorkerCtx};
use crate::ConnectOptions;
use crate::load::LoadError;

const DECISIONS_SQL: &str = "CREATE TABLE IF NOT EXISTS chute.atomic_decisions (
    run text PRIMARY KEY,
    load_id text NOT NULL,
    decided_at timestamptz NOT NULL DEFAULT now()
)";

/// The prefix of this run's transaction ids: `chute:KEY:RUN`.
pub(crate) fn gid_prefix(load_id: &str, run: &str) -> String {
    format!("chute:{}:{run}", crate::load::claim::lock_key(load_id))
}

/// One server's worker in an atomic load: every batch in a savepoint of one
/// transaction, prepared at the end. Returns whether it prepared (a server
/// that got no rows has nothing to prepare).
pub(crate) async fn worker(
    mut client: Client,
    rx: flume::Receiver<Job>,
    tx: flume::Sender<CopyOutcome>,
    ctx: Arc<WorkerCtx>,
    gid: String,
    failed: Arc<AtomicBool>,
) -> Result<bool, LoadError> {
    let mut txn = client.transaction().await.map_err(|e| LoadError::sql("starting the load's transaction", e))?;
    let mut worked = false;
    while let Ok(job) = rx.recv_async().await {
        if failed.load(Ordering::Relaxed) {
            let _ =
                job.done.send((job.batch, Err(LoadError::Setup("another part of the atomic load failed; nothing is committed".into()))));
            continue;
        }
        worked = true;
        let mut written = Written::default();
        let result = match commit_batch(&mut txn, &job.batch, &tx, &ctx, false, &mut written).await {
            Ok(Attempt { rows, bytes, vanished, upsert }) => Ok(Committed { rows, bytes, vanished, rejected: written.rows, upsert }),
            Err(AttemptError::Pg(e)) => {
                Err(LoadError::sql(format!("COPY into {} (an atomic load: the whole load rolls back; run it again)", job.batch.label()), e))
            }
            Err(AttemptError::Rejects(e) | AttemptError::Stop(e)) => Err(e),
        };
        if result.is_err() {
            failed.store(true, Ordering::Relaxed);
        }
        let _ = job.done.send((job.batch, result));
    }
    if !worked || failed.load(Ordering::Relaxed) {
        return Ok(false); // Dropping the transaction rolls it back.
    }
    txn.batch_execute(&format!("PREPARE TRANSACTION '{gid}'")).await.map_err(|e| LoadError::sql("preparing the load's transaction", e))?;
    Ok(true)
}

/// A server of the load: where to reach it and its transaction id.
pub(crate) struct Prepared {
    pub label: String,
    pub options: ConnectOptions,
    pub gid: String,
}

/// After every worker prepared: records the decision on the coordinator,
/// then commits every prepared transaction. With a failure (or a stop),
/// rolls back those that prepared instead.
pub(crate) async fn finish(
    coordinator: &ConnectOptions,
    load_id: &str,
    run: &str,
    prepared: Vec<Prepared>,
    commit: bool,
) -> Result<(), LoadError> {
    if !commit {
        for p in &prepared {
            if let Ok(c) = p.options.connect().await {
                let _ = c.batch_execute(&format!("ROLLBACK PREPARED '{}'", p.gid)).await;
            }
        }
        return Ok(());
    }
    pause("CHUTE_TEST_PAUSE_AFTER_PREPARE").await;
    let control = crate::retry::connect(coordinator, Duration::from_secs(60), |_| {}).await?;
    control.batch_execute(DECISIONS_SQL).await.map_err(|e| LoadError::sql("creating chute.atomic_decisions", e))?;
    control
        .execute("INSERT INTO chute.atomic_decisions (run, load_id) VALUES ($1, $2)", &[&gid_prefix(load_id, run), &load_id])
        .await
        .map_err(|e| LoadError::sql("recording the commit decision", e))?;
    pause("CHUTE_TEST_PAUSE_AFTER_DECISION").await;
    // Decided: from here every prepared transaction is committed, now or by recovery.
    for p in &prepared {
        let c = crate::retry::connect(&p.options, Duration::from_secs(300), |_| {}).await.map_err(|e| {
            LoadError::Setup(format!("{} went away after the decision to commit ({e}): run chute cluster recover once it is back", p.label))
        })?;
        c.batch_execute(&format!("COMMIT PREPARED '{}'", p.gid))
            .await
            .map_err(|e| LoadError::sql(format!("committing on {}", p.label), e))?;
    }
    control
        .execute("DELETE FROM chute.atomic_decisions WHERE run = $1", &[&gid_prefix(load_id, run)])
        .await
        .map_err(|e| LoadError::sql("clearing the commit decision", e))?;
    Ok(())
}

/// Test hook: waits the given seconds (a test kills chute meanwhile).
async fn pause(var: &str) {
    if let Some(s) = std::env::var(var).ok().and_then(|v| v.parse::<f64>().ok()) {
        eprintln!("chute: {var}: pausing {s}s");
        tokio::time::sleep(Duration::from_secs_f64(s)).await;
    }
}

/// What [`recover`] did on one server.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Resolved {
    pub server: String,
    pub gid: String,
    pub committed: bool,
}

/// Resolves transactions chute prepared and left on `servers` (by label),
/// by the decisions recorded on the coordinator; those of a load still
/// running (its lock is held by another session) are left alone.
pub async fn recover(coordinator: &Client, servers: &[(String, ConnectOptions)]) -> Result<Vec<Resolved>, LoadError> {
    coordinator.batch_execute(DECISIONS_SQL).await.map_err(|e| LoadError::sql("creating chute.atomic_decisions", e))?;
    let mut out = Vec::new();
    for (label, opts) in servers {
        let c = opts.connect().await.map_err(|e| LoadError::Setup(format!("{label} is not reachable: {e}")))?;
        let rows = c
            .query("SELECT gid FROM pg_prepared_xacts WHERE gid LIKE 'chute:%' AND database = current_database() ORDER BY gid", &[])
            .await
            .map_err(|e| LoadError::sql(format!("reading the prepared transactions on {label}"), e))?;
        for r in rows {
            let gid: String = r.get(0);
            let mut parts = gid.splitn(4, ':');
            let (_, key, run) = (parts.next(), parts.next().and_then(|k| k.parse::<i64>().ok()), parts.next());
            let (Some(key), Some(run)) = (key, run) else { continue };
            let free: bool = coordinator
                .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                .await
                .map_err(|e| LoadError::sql("checking whether the load still runs", e))?
                .get(0);
            if !free {
                continue;
            }
            let prefix = format!("chute:{key}:{run}");
            let decided: bool = coordinator
                .query_one("SELECT EXISTS (SELECT 1 FROM chute.atomic_decisions WHERE run = $1)", &[&prefix])
                .await
                .map_err(|e| LoadError::sql("reading chute.atomic_decisions", e))?
                .get(0);
            let verb = if decided { "COMMIT" } else { "ROLLBACK" };
            let done = c.batch_execute(&format!("{verb} PREPARED '{gid}'")).await;
            let _ = coordinator.query_one("SELECT pg_advisory_unlock($1)", &[&key]).await;
            done.map_err(|e| LoadError::sql(format!("{verb} PREPARED on {label}"), e))?;
            out.push(Resolved { server: label.clone(), gid, committed: decided });
        }
    }
    // Decisions stay (a row each): a server that was down may still hold a
    // transaction of that run, and only the decision says to commit it.
    Ok(out)
}

/// Refuses an atomic load when a server cannot prepare transactions.
pub(crate) async fn check_prepared_allowed(label: &str, c: &Client) -> Result<(), LoadError> {
    let n: i32 = c
        .query_one("SELECT current_setting('max_prepared_transactions')::int", &[])
        .await
        .map_err(|e| LoadError::sql(format!("reading max_prepared_transactions on {label}"), e))?
        .get(0);
    if n == 0 {
        return Err(LoadError::Setup(format!(
            "{atomic} needs two-phase commit, and {label} has max_prepared_transactions = 0: set it (e.g. max_prepared_transactions = 10) in its postgresql.conf and restart it, or load without {atomic}",
            atomic = crate::setting::Setting::Atomic
        )));
    }
    Ok(())
}
