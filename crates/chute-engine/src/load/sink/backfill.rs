//! The backfill path: one session per partition the load creates for
//! itself. In one transaction it creates the partition standalone (no
//! indexes, a CHECK of its bounds), COPYs every batch routed to it with
//! `FREEZE` (rows written frozen: no hint-bit rewrite and no freezing vacuum
//! later), journals each batch's input ranges, then attaches the partition
//! (PostgreSQL builds the parent's indexes on it then, one sorted pass
//! each, instead of a row-by-row insertion) and commits. Nobody sees the
//! partition before it holds all its rows; its acknowledgements fire at
//! that commit.
//!
//! `COPY FREEZE` needs the table created in the same (sub)transaction, so
//! the batches cannot be isolated under savepoints: a batch the server
//! refuses for its data ends the backfill, nothing of it is committed, and
//! its rows go back to the coordinator to take the normal path (where bad
//! rows are isolated and rejected one by one). A lost connection replays
//! every batch of the partition on a new one: the session keeps them until
//! its commit, which is why the coordinator closes a backfill early when
//! its rows take too much of the budget.

use std::sync::Arc;

use chute_core::partman::backfill::BackfillLeaf;
use tokio_postgres::{Client, Transaction};

use super::{BatchPart, CopyOutcome, WorkerCtx};
use crate::retry::{self, Backoff, Lost};

/// What the coordinator sends a session.
pub(crate) enum LeafMsg {
    /// Rows for the partition, with their share of the budget and a batch id.
    Rows(Box<BatchPart>, usize, String),
    /// No more rows: attach and commit.
    Close,
}

/// One session's partition.
pub(crate) struct SessionSpec {
    pub table: u16,
    pub leaf: u32,
    pub plan: BackfillLeaf,
    /// `maintenance_work_mem` for the index builds of the ATTACH.
    pub index_memory: String,
}

/// Starts a session; it ends after `Close` (committed or failed) or when
/// the sender is dropped (rolled back: a stopped load).
pub(crate) fn start(ctx: Arc<WorkerCtx>, spec: SessionSpec, outcomes: flume::Sender<CopyOutcome>) -> flume::Sender<LeafMsg> {
    let (tx, rx) = flume::unbounded();
    tokio::spawn(session(ctx, spec, rx, outcomes));
    tx
}

/// How one attempt at the session ended.
enum Ended {
    Committed {
        rows: u64,
    },
    /// The sender went away without `Close`: rolled back.
    Dropped,
}

enum Failure {
    /// Worth another attempt on a new connection.
    Transient(tokio_postgres::Error),
    /// The server refused the backfill (its data, a name taken, a lock):
    /// the rows take the normal path.
    Refused(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        if retry::transient(&e) { Failure::Transient(e) } else { Failure::Refused(crate::exec::describe(&e).to_string()) }
    }
}

async fn session(ctx: Arc<WorkerCtx>, spec: SessionSpec, rx: flume::Receiver<LeafMsg>, outcomes: flume::Sender<CopyOutcome>) {
    let mut parts: Vec<(BatchPart, usize, String)> = Vec::new();
    let mut closed = false;
    let mut backoff = Backoff::reconnect(ctx.retry_for);
    let result = loop {
        let mut client = match retry::connect(&ctx.target, ctx.retry_for, |_| {}).await {
            Ok(c) => c,
            Err(e) => break Err(format!("cannot connect: {e}")),
        };
        if backoff.attempts() > 0 {
            // The connection dropped: did the commit land before it did?
            match landed(&client, &ctx, &spec, &parts).await {
                Ok(true) => {
                    let rows = parts.iter().map(|(p, ..)| p.seg.row_ends.len() as u64).sum();
                    break Ok(Ended::Committed { rows });
                }
                Ok(false) => {}
                Err(e) if e.connection_lost() && backoff.wait().await => continue,
                Err(e) => break Err(crate::exec::describe(&e).to_string()),
            }
        }
        match attempt(&mut client, &ctx, &spec, &rx, &mut parts, &mut closed).await {
            Ok(ended) => break Ok(ended),
            Err(Failure::Transient(e)) => {
                let message = crate::exec::describe(&e).to_string();
                let _ = outcomes.send(CopyOutcome::Retrying { message: format!("backfill of {}: {message}; retrying", spec.plan.name) });
                if !backoff.wait().await {
                    break Err(format!("the connection was lost and not regained within --retry-for (last error: {message})"));
                }
            }
            Err(Failure::Refused(why)) => break Err(why),
        }
    };
    let batches = parts.len();
    for (_, budget, _) in &parts {
        ctx.budget.release(*budget);
    }
    match result {
        Ok(Ended::Committed { rows }) => {
            let bytes = parts.iter().map(|(p, ..)| p.body.len() as u64).sum();
            for (part, ..) in parts {
                part.seg.acks.commit(part.seg.row_ends.len(), &[]);
            }
            let _ = outcomes.send(CopyOutcome::Backfilled { table: spec.table, leaf: spec.leaf, batches, rows, bytes });
        }
        // Stopped: nothing is committed; a resume loads these rows again.
        Ok(Ended::Dropped) => drop(parts),
        Err(reason) => {
            let all: Vec<BatchPart> = parts.into_iter().map(|(p, ..)| p).collect();
            let _ = outcomes.send(CopyOutcome::BackfillFailed { table: spec.table, leaf: spec.leaf, parts: all, reason: reason.clone() });
            // Rows sent before the coordinator learnt of the failure (it
            // drops its sender then): they take the normal path too.
            let mut rest = Vec::new();
            while let Ok(msg) = rx.recv_async().await {
                if let LeafMsg::Rows(p, budget, _) = msg {
                    ctx.budget.release(budget);
                    rest.push(*p);
                }
            }
            if !rest.is_empty() {
                let _ = outcomes.send(CopyOutcome::BackfillFailed { table: spec.table, leaf: spec.leaf, parts: rest, reason });
            }
        }
    }
}

/// After a lost connection: whether the session's transaction committed.
async fn landed(
    client: &Client,
    ctx: &WorkerCtx,
    spec: &SessionSpec,
    parts: &[(BatchPart, usize, String)],
) -> Result<bool, tokio_postgres::Error> {
    if let (Some(load_id), Some((_, _, batch_id))) = (&ctx.load_id, parts.first()) {
        return client
            .query_one("SELECT EXISTS (SELECT 1 FROM chute.load_journal WHERE load_id = $1 AND batch_id = $2)", &[load_id, batch_id])
            .await
            .map(|r| r.get(0));
    }
    // Not journaled: the partition exists attached only if this session's commit landed.
    client
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relispartition)", &[&spec.plan.name.quoted()])
        .await
        .map(|r| r.get(0))
}

async fn attempt(
    client: &mut Client,
    ctx: &WorkerCtx,
    spec: &SessionSpec,
    rx: &flume::Receiver<LeafMsg>,
    parts: &mut Vec<(BatchPart, usize, String)>,
    closed: &mut bool,
) -> Result<Ended, Failure> {
    let txn = client.transaction().await?;
    if let Some(load_id) = &ctx.load_id
        && let Err(e) = super::super::claim::fence(&txn, load_id, &ctx.owner).await?
    {
        return Err(Failure::Refused(e.to_string()));
    }
    // A partition made by hand (or another load) meanwhile: not ours to fill.
    txn.batch_execute("SET LOCAL lock_timeout = '10s'").await?;
    for sql in &spec.plan.create {
        txn.batch_execute(sql).await?;
    }
    for (part, _, batch_id) in parts.iter() {
        copy_part(&txn, ctx, part, batch_id).await?;
    }
    if !*closed {
        loop {
            match rx.recv_async().await {
                Ok(LeafMsg::Rows(part, budget, batch_id)) => {
                    // Kept first: a failed COPY's rows must not be lost.
                    parts.push((*part, budget, batch_id));
                    let (part, _, batch_id) = parts.last().expect("just pushed");
                    copy_part(&txn, ctx, part, batch_id).await?;
                }
                Ok(LeafMsg::Close) => {
                    *closed = true;
                    break;
                }
                Err(_) => return Ok(Ended::Dropped),
            }
        }
    }
    // The ATTACH waits for other ATTACHes of the parent (each builds indexes); longer than for the create.
    txn.batch_execute(&format!(
        "SET LOCAL maintenance_work_mem = {}; SET LOCAL lock_timeout = '60s'",
        chute_core::ident::quote_literal(&spec.index_memory)
    ))
    .await?;
    for sql in &spec.plan.attach {
        txn.batch_execute(sql).await?;
    }
    txn.commit().await?;
    Ok(Ended::Committed { rows: parts.iter().map(|(p, ..)| p.seg.row_ends.len() as u64).sum() })
}

async fn copy_part(txn: &Transaction<'_>, ctx: &WorkerCtx, part: &BatchPart, batch_id: &str) -> Result<(), tokio_postgres::Error> {
    let rows = super::copy_once(txn, part, 0, part.seg.row_ends.len()).await?;
    if let Some(load_id) = &ctx.load_id {
        super::journal_part(txn, load_id, batch_id, part, rows).await?;
    }
    Ok(())
}
