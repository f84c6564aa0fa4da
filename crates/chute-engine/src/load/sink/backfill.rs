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
//! its commit, their rows' bytes in a temporary file once sent (so a
//! partition of any size takes no more of the memory budget than a batch in
//! flight), their positions and acknowledgements in memory.

use std::os::unix::fs::FileExt;
use std::sync::Arc;

use bytes::Bytes;

use chute_core::ident::QualifiedName;
use chute_core::partman::backfill::BackfillLeaf;
use chute_core::partman::swap::{SwapPlan, plan_swap};
use chute_core::upsert::ConflictAction;
use tokio_postgres::{Client, Transaction};

use super::swap::{self, Locked, SwapTarget};
use super::{BatchPart, CopyOutcome, WorkerCtx};
use crate::load::UpsertCounts;
use crate::retry::{self, Classify, Fault, Policy};

/// What the coordinator sends a session.
pub(crate) enum LeafMsg {
    /// Rows for the partition, with their share of the budget and a batch id.
    Rows(Box<BatchPart>, usize, String),
    /// No more rows: attach and commit.
    Close,
}

/// What a session fills.
pub(crate) enum Fill {
    /// A partition the load creates.
    New(BackfillLeaf),
    /// A partition that exists, empty: its successor is filled and swapped in (see `swap`).
    Swap(SwapTarget),
}

impl Fill {
    /// The partition's name.
    pub(crate) fn name(&self) -> &QualifiedName {
        match self {
            Fill::New(p) => &p.name,
            Fill::Swap(t) => &t.leaf,
        }
    }
}

/// One session's partition.
pub(crate) struct SessionSpec {
    pub table: u16,
    pub leaf: u32,
    pub fill: Fill,
    /// The parent's oid: its partition manager lock is held shared while
    /// the partition is being filled (see `attempt`).
    pub parent_oid: u32,
    /// `maintenance_work_mem` for the index builds, in bytes (set by the [`Filler`]).
    pub index_memory: u64,
    /// An upsert's: leaves one row per key when the ATTACH finds a key twice
    /// (see `MergeSql::dedupe`), and whether repeated rows count as updates.
    pub dedupe: Option<(String, ConflictAction)>,
}

/// Opens backfill sessions on the sink's server; their answers go to the
/// sink's outcome queue, which stays open while the filler lives.
pub(crate) struct Filler {
    ctx: Arc<WorkerCtx>,
    outcomes: flume::Sender<CopyOutcome>,
    /// `maintenance_work_mem` for the index builds, in bytes.
    index_memory: u64,
}

impl Filler {
    pub(crate) fn new(ctx: Arc<WorkerCtx>, outcomes: flume::Sender<CopyOutcome>, index_memory: u64) -> Self {
        Filler { ctx, outcomes, index_memory }
    }

    /// Starts a session; it ends after `Close` (committed or failed) or when
    /// the sender is dropped (rolled back: a stopped load).
    pub(crate) fn open(&self, mut spec: SessionSpec) -> flume::Sender<LeafMsg> {
        spec.index_memory = self.index_memory;
        let (tx, rx) = flume::unbounded();
        tokio::spawn(session(self.ctx.clone(), spec, rx, self.outcomes.clone()));
        tx
    }
}

/// How one attempt at the session ended.
enum Ended {
    Committed {
        rows: u64,
        /// An upsert's counts (all inserted but the repeated keys' rows).
        upsert: UpsertCounts,
    },
    /// The sender went away without `Close`: rolled back.
    Dropped,
}

/// A batch the session sent, kept until the commit to be sent again on a
/// new connection.
struct Kept {
    part: BatchPart,
    batch_id: String,
    /// Budget bytes still held (given back once the rows are on disk).
    budget: usize,
    /// Where its rows' bytes are in the spill file (`part.body` is empty then).
    spilled: Option<(u64, usize)>,
    bytes: u64,
}

/// The rows' bytes of the batches sent, in an unnamed temporary file.
#[derive(Default)]
struct Spill {
    file: Option<std::fs::File>,
    len: u64,
}

impl Spill {
    fn put(&mut self, b: &[u8]) -> std::io::Result<(u64, usize)> {
        if self.file.is_none() {
            self.file = Some(tempfile::tempfile()?);
        }
        let at = self.len;
        self.file.as_ref().expect("opened above").write_all_at(b, at)?;
        self.len += b.len() as u64;
        Ok((at, b.len()))
    }

    fn get(&self, (at, len): (u64, usize)) -> std::io::Result<Bytes> {
        let mut buf = vec![0; len];
        self.file.as_ref().ok_or_else(|| std::io::Error::other("no spill file"))?.read_exact_at(&mut buf, at)?;
        Ok(Bytes::from(buf))
    }
}

impl Kept {
    /// Puts the rows' bytes back in `part.body` (for a replay or the normal path).
    fn restore(&mut self, spill: &Spill) -> std::io::Result<()> {
        if let Some(at) = self.spilled.take() {
            self.part.body = spill.get(at)?;
        }
        Ok(())
    }
}

enum Failure {
    /// A statement failed: tried again on a new connection when the
    /// session's policy retries its fault, else the rows take the normal path.
    Server(tokio_postgres::Error),
    /// The server refused the backfill (its data, a name taken): the rows
    /// take the normal path.
    Refused(String),
}

impl From<tokio_postgres::Error> for Failure {
    fn from(e: tokio_postgres::Error) -> Self {
        if name_taken(&e) { Failure::Refused("another session made a table of that name first".into()) } else { Failure::Server(e) }
    }
}

impl Classify for Failure {
    fn fault(&self) -> Fault {
        match self {
            Failure::Server(e) => retry::classify(e),
            Failure::Refused(_) => Fault::Fatal,
        }
    }
}

/// A session is redone whole on a new connection after a lost connection
/// or a conflict; a lock not granted in time is not waited for: the rows
/// take the normal path, which needs no lock of the parent's.
fn session_policy(retry_for: std::time::Duration) -> Policy {
    Policy::transaction(retry_for).retrying(&[Fault::Reconnect, Fault::Again])
}

/// The partition's name was taken by another session: a table that exists
/// (42P07), or one being made at the same moment, which the server reports
/// as a unique violation in its own catalogs once the other one commits.
fn name_taken(e: &tokio_postgres::Error) -> bool {
    use tokio_postgres::error::SqlState;
    match e.as_db_error() {
        Some(db) if *db.code() == SqlState::DUPLICATE_TABLE => true,
        Some(db) if *db.code() == SqlState::UNIQUE_VIOLATION => {
            matches!(db.constraint(), Some("pg_type_typname_nsp_index" | "pg_class_relname_nsp_index"))
        }
        _ => false,
    }
}

async fn session(ctx: Arc<WorkerCtx>, spec: SessionSpec, rx: flume::Receiver<LeafMsg>, outcomes: flume::Sender<CopyOutcome>) {
    let mut parts: Vec<Kept> = Vec::new();
    let mut spill = Spill::default();
    let mut closed = false;
    let policy = session_policy(ctx.retry_for);
    let tried = retry::run!(
        &policy,
        |a| async {
            let mut client =
                retry::connect(&ctx.target, ctx.retry_for, |_| {}).await.map_err(|e| Failure::Refused(format!("cannot connect: {e}")))?;
            // The connection dropped: did the commit land before it did?
            if a.is_retry() && landed(&client, &ctx, &spec, &parts).await? {
                let rows = parts.iter().map(|k| k.part.seg.row_ends.len() as u64).sum();
                // What the commit's rows did is lost with the connection: unchanged, as a merge's are.
                let upsert = UpsertCounts { unchanged: rows, ..Default::default() };
                return Ok(Ended::Committed { rows, upsert });
            }
            attempt(&mut client, &ctx, &spec, &rx, (&mut parts, &mut spill), &mut closed).await
        },
        on_retry = |r| if let Failure::Server(e) = r.error {
            let message = format!("backfill of {}: {}; retrying", spec.fill.name(), crate::exec::describe(e));
            let _ = outcomes.send(CopyOutcome::Retrying { message });
        }
    );
    let result = tried.map_err(|f| match (policy.gave_up_on(&f), f) {
        (true, Failure::Server(e)) => format!(
            "the connection was lost and not regained within {} (last error: {})",
            crate::setting::Setting::RetryFor,
            crate::exec::describe(&e)
        ),
        (_, Failure::Server(e)) => crate::exec::describe(&e).to_string(),
        (_, Failure::Refused(why)) => why,
    });
    let batches = parts.len();
    for k in &parts {
        ctx.budget.release(k.budget);
    }
    match result {
        Ok(Ended::Committed { rows, upsert }) => {
            let bytes = parts.iter().map(|k| k.bytes).sum();
            for k in parts {
                k.part.seg.acks.commit(k.part.seg.row_ends.len(), &[]);
            }
            let _ = outcomes.send(CopyOutcome::Backfilled { table: spec.table, leaf: spec.leaf, batches, rows, bytes, upsert });
        }
        // Stopped: nothing is committed; a resume loads these rows again.
        Ok(Ended::Dropped) => drop(parts),
        Err(reason) => {
            let mut all = Vec::with_capacity(parts.len());
            for mut k in parts {
                if let Err(e) = k.restore(&spill) {
                    // Its rows are nowhere else: the load stops, and the same command loads them.
                    let _ = outcomes.send(CopyOutcome::Failed(super::super::LoadError::Setup(format!(
                        "the backfill of {} failed ({reason}) and its rows could not be read back from its temporary file ({e}): \
                         run the same command again to load them",
                        spec.fill.name()
                    ))));
                    return;
                }
                all.push(k.part);
            }
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
async fn landed(client: &Client, ctx: &WorkerCtx, spec: &SessionSpec, parts: &[Kept]) -> Result<bool, tokio_postgres::Error> {
    if let (Some(load_id), Some(Kept { batch_id, .. })) = (&ctx.load_id, parts.first()) {
        return super::super::journal::landed(client, load_id, batch_id).await.map(|rows| rows.is_some());
    }
    // Not journaled: the partition exists attached (a swapped one as
    // another table) only if this session's commit landed.
    let plan = match &spec.fill {
        Fill::New(plan) => plan,
        Fill::Swap(t) => return swap::landed(client, t).await,
    };
    client
        .query_one("SELECT EXISTS (SELECT 1 FROM pg_class WHERE oid = to_regclass($1) AND relispartition)", &[&plan.name.quoted()])
        .await
        .map(|r| r.get(0))
}

async fn attempt(
    client: &mut Client,
    ctx: &WorkerCtx,
    spec: &SessionSpec,
    rx: &flume::Receiver<LeafMsg>,
    (parts, spill): (&mut Vec<Kept>, &mut Spill),
    closed: &mut bool,
) -> Result<Ended, Failure> {
    let txn = client.transaction().await?;
    if let Some(load_id) = &ctx.load_id
        && let Err(e) = super::super::claim::fence(&txn, load_id, &ctx.owner, ctx.owned, ctx.before.as_ref()).await?
    {
        return Err(Failure::Refused(e.to_string()));
    }
    // A partition made by hand (or another load) meanwhile: not ours to fill.
    txn.batch_execute("SET LOCAL lock_timeout = '10s'").await?;
    // Shared with other backfills, exclusive to the partition manager: a
    // just-in-time creation (of another load, or of this one for rows the
    // server parses) plans after this commit, sees the partition and makes
    // nothing, instead of failing on a table it cannot see yet.
    txn.execute("SELECT pg_advisory_xact_lock_shared($1, $2)", &[&crate::schema::LOCK_CLASS, &(spec.parent_oid as i32)]).await?;
    let swapping = match &spec.fill {
        Fill::New(plan) => {
            for sql in &plan.create {
                txn.batch_execute(sql).await?;
            }
            None
        }
        Fill::Swap(t) => {
            let plan = plan_swap(&swap::facts(&txn, t).await?.map_err(Failure::Refused)?, &t.table);
            for sql in &plan.create {
                txn.batch_execute(sql).await?;
            }
            Some((plan, t))
        }
    };
    let into = swapping.as_ref().map(|(plan, _)| plan.table.quoted());
    let into = into.as_deref();
    for k in parts.iter_mut() {
        let spilled = k.spilled;
        k.restore(spill).map_err(|e| Failure::Refused(format!("reading back its rows from a temporary file: {e}")))?;
        copy_part(&txn, ctx, &k.part, &k.batch_id, into).await?;
        if spilled.is_some() {
            k.spilled = spilled;
            k.part.body = Bytes::new();
        }
    }
    if !*closed {
        loop {
            match rx.recv_async().await {
                Ok(LeafMsg::Rows(part, budget, batch_id)) => {
                    // Kept first: a failed COPY's rows must not be lost.
                    let bytes = part.body.len() as u64;
                    parts.push(Kept { part: *part, batch_id, budget, spilled: None, bytes });
                    let k = parts.last_mut().expect("just pushed");
                    copy_part(&txn, ctx, &k.part, &k.batch_id, into).await?;
                    // Sent: its bytes wait on disk, and their budget is free
                    // (kept in memory if the disk refuses them).
                    if let Ok(at) = spill.put(&k.part.body) {
                        k.spilled = Some(at);
                        k.part.body = Bytes::new();
                        ctx.budget.release(std::mem::take(&mut k.budget));
                    }
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
        "SET LOCAL maintenance_work_mem = '{}kB'; SET LOCAL lock_timeout = '60s'",
        (spec.index_memory / 1024).max(1024)
    ))
    .await?;
    let rows = parts.iter().map(|k| k.part.seg.row_ends.len() as u64).sum();
    let plan = match (&spec.fill, swapping) {
        (_, Some((plan, t))) => {
            swap_in(&txn, &plan, t).await?;
            txn.commit().await?;
            return Ok(Ended::Committed { rows, upsert: UpsertCounts { inserted: rows, ..Default::default() } });
        }
        (Fill::New(plan), None) => plan,
        (Fill::Swap(_), None) => unreachable!("a swap has its plan"),
    };
    // The parent's plain indexes, built here in one sorted pass each while
    // no lock is held on the parent; the ATTACH then only attaches them.
    for sql in plan.index_sql(&plain_indexes(&txn, spec.parent_oid).await?) {
        txn.batch_execute(&sql).await?;
    }
    let upsert = attach(&txn, plan, spec.dedupe.as_ref(), rows).await?;
    txn.commit().await?;
    Ok(Ended::Committed { rows, upsert })
}

/// The end of a swap: the indexes built on the filled table, then the
/// short locked step (see `swap`). Rows writers put in the old partition
/// meanwhile move across, so nothing is lost and nothing refused.
async fn swap_in(txn: &Transaction<'_>, plan: &SwapPlan, t: &SwapTarget) -> Result<(), Failure> {
    for sql in &plan.build {
        txn.batch_execute(sql).await?;
    }
    if let Locked::Refused(why) = swap::lock(txn, plan, t).await? {
        return Err(Failure::Refused(why));
    }
    txn.execute(plan.move_rows.as_str(), &[]).await?;
    for sql in &plan.swap {
        txn.batch_execute(sql).await?;
    }
    Ok(())
}

/// Attaches the filled partition. An upsert's rows may repeat a key: the
/// ATTACH's unique index build then fails, and is tried again once the
/// repeats are resolved as a merge would have (no cost when no key repeats).
async fn attach(
    txn: &Transaction<'_>,
    plan: &BackfillLeaf,
    dedupe: Option<&(String, ConflictAction)>,
    rows: u64,
) -> Result<UpsertCounts, tokio_postgres::Error> {
    let mut counts = UpsertCounts { inserted: rows, ..Default::default() };
    if dedupe.is_some() {
        txn.batch_execute("SAVEPOINT chute_attach").await?;
    }
    for sql in &plan.attach {
        match txn.batch_execute(sql).await {
            Ok(()) => {}
            Err(e) if dedupe.is_some() && e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION) => {
                let (dedupe, action) = dedupe.expect("checked");
                txn.batch_execute("ROLLBACK TO SAVEPOINT chute_attach").await?;
                let row = txn.query_one(dedupe.as_str(), &[]).await?;
                let (removed, changed) = (row.get::<_, i64>(0) as u64, row.get::<_, i64>(1) as u64);
                counts.inserted = rows - removed;
                if *action == ConflictAction::Update {
                    counts.updated = changed;
                }
                counts.unchanged = removed - counts.updated;
                for sql in &plan.attach {
                    txn.batch_execute(sql).await?;
                }
                return Ok(counts);
            }
            Err(e) => return Err(e),
        }
    }
    Ok(counts)
}

/// What follows `USING` in the definition of each of the parent's
/// partitioned indexes that backs no constraint (a primary key's or a
/// unique constraint's index is made by the ATTACH, which ties it to the
/// constraint). A definition not in the expected form is left to the ATTACH too.
async fn plain_indexes(txn: &Transaction<'_>, parent: u32) -> Result<Vec<String>, tokio_postgres::Error> {
    let rows = txn
        .query(
            "SELECT pg_get_indexdef(i.indexrelid),
                    'CREATE ' || CASE WHEN i.indisunique THEN 'UNIQUE ' ELSE '' END || 'INDEX ' || quote_ident(ic.relname)
                      || ' ON ONLY ' || quote_ident(n.nspname) || '.' || quote_ident(t.relname) || ' USING '
             FROM pg_index i JOIN pg_class ic ON ic.oid = i.indexrelid JOIN pg_class t ON t.oid = i.indrelid
                  JOIN pg_namespace n ON n.oid = t.relnamespace
             WHERE i.indrelid = $1 AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conindid = i.indexrelid)
             ORDER BY i.indexrelid",
            &[&parent],
        )
        .await?;
    Ok(rows
        .iter()
        .filter_map(|r| {
            let (def, prefix): (String, String) = (r.get(0), r.get(1));
            let unique = prefix.starts_with("CREATE UNIQUE");
            def.strip_prefix(&prefix).filter(|_| !unique).map(str::to_owned)
        })
        .collect())
}

/// COPYs a part and journals it. `into`: the table its rows are in when
/// that is not the partition yet (a swap's successor, whose oid is the
/// partition's once it is swapped in: the journal names the physical table).
async fn copy_part(
    txn: &Transaction<'_>,
    ctx: &WorkerCtx,
    part: &BatchPart,
    batch_id: &str,
    into: Option<&str>,
) -> Result<(), tokio_postgres::Error> {
    let rows = super::super::write::copy_rows(txn, part, 0, part.seg.row_ends.len()).await?;
    if let Some(load_id) = &ctx.load_id {
        let mut claim = part.claim(rows);
        if let Some(into) = into {
            claim.relation = into;
        }
        super::super::journal::record(txn, load_id, batch_id, claim).await?;
    }
    Ok(())
}
