//! How a table's rows are written, behind one trait: a [`Writer`] is chosen
//! once per table when the load's routing is built (`routing::build`) and
//! travels with every batch part of that table; the sink calls it for the
//! part's rows, in the batch's transaction, and knows nothing of the write
//! modes. The writers: [`CopyWriter`] (binary or text COPY into the leaf,
//! the default), [`insert::InsertWriter`] (batched INSERTs through the
//! parent, when row-level security applies to the loading role and
//! PostgreSQL refuses COPY) and [`merge::MergeWriter`] (upserts: staged by
//! COPY, merged with `INSERT … ON CONFLICT`). What a mode needs of the rest
//! of the load (one leaf's batches in input order, whether a partition can
//! be filled before it is attached or swapped) is a question the writer
//! answers, never a branch on which writer it is.
//!
//! Also here: what a batch is (`Batch`, `BatchPart`), since a writer writes
//! a part of one.

use std::sync::Arc;

use bytes::Bytes;
use chute_core::encode::{HEADER, TRAILER};
use chute_core::ident::QualifiedName;
use futures_util::SinkExt;
use futures_util::future::BoxFuture;
use tokio_postgres::Transaction;

use super::UpsertCounts;
use super::segment::Segment;

pub(crate) mod insert;
pub(crate) mod merge;

/// Writes one table's rows into a target within a batch's transaction.
///
/// Contract. A writer is made once per table before any row moves and is
/// shared by every worker: `write` may run concurrently for parts of
/// different batches (each in its own transaction). `write` writes rows
/// `a..b` of a part and returns how many it took (and, for an upsert,
/// what they did); an error leaves the transaction for the caller to roll
/// back to its savepoint (the sink isolates refused rows that way).
/// Writers whose batches of one leaf must apply in input order say so
/// (`ordered`): the coordinator then numbers those batches and the writer
/// waits for its turn (`merge::Turns`).
pub(crate) trait Writer: Send + Sync {
    /// The statement a part's rows are sent with, into `target` (quoted).
    fn sql(&self, target: &QualifiedName, copy_list: &str, text: bool) -> String;

    /// Writes rows `a..b` of `part`. `fast`: the writer may take a shortcut
    /// that another writer racing it can break (see `raced`).
    fn write<'a>(
        &'a self,
        txn: &'a Transaction<'_>,
        part: &'a BatchPart,
        rows: std::ops::Range<usize>,
        fast: bool,
        turns: &'a merge::Turns,
    ) -> BoxFuture<'a, Result<(u64, UpsertCounts), tokio_postgres::Error>>;

    /// One leaf's batches apply one after another in input order, their
    /// parts in one order of leaf names (so sessions lock rows in one
    /// order), and what the rows did is counted (upserts).
    fn ordered(&self) -> bool {
        false
    }

    /// `e` is a row of the part refused by the table's rules (beyond the
    /// data errors every writer has: class 22, 23, P0001): the row is
    /// rejected, the others load.
    fn refused_row(&self, _e: &tokio_postgres::Error) -> bool {
        false
    }

    /// `e` is another writer's race with this one's `fast` shortcut: the
    /// same rows go again without it.
    fn raced(&self, _e: &tokio_postgres::Error) -> bool {
        false
    }

    /// Why a partition the load creates cannot be filled before it is
    /// attached (`None`: it can).
    fn fill_refusal(&self) -> Option<String> {
        None
    }

    /// The statement (and its action) that de-duplicates a filled partition
    /// (`leaf`, quoted), when the writer needs one.
    fn fill_dedupe(&self, _leaf: &str) -> Option<(String, chute_core::upsert::ConflictAction)> {
        None
    }

    /// Why a partition that exists cannot be swapped for one filled apart
    /// (`None`: it can).
    fn swap_refusal(&self) -> Option<String> {
        None
    }
}

/// COPY into the target: the default writer.
#[derive(Debug, Default)]
pub(crate) struct CopyWriter;

impl Writer for CopyWriter {
    fn sql(&self, target: &QualifiedName, copy_list: &str, text: bool) -> String {
        copy_sql(&target.quoted(), copy_list, text)
    }

    fn write<'a>(
        &'a self,
        txn: &'a Transaction<'_>,
        part: &'a BatchPart,
        rows: std::ops::Range<usize>,
        _fast: bool,
        _turns: &'a merge::Turns,
    ) -> BoxFuture<'a, Result<(u64, UpsertCounts), tokio_postgres::Error>> {
        Box::pin(async move { Ok((copy_rows(txn, part, rows.start, rows.end).await?, UpsertCounts::default())) })
    }
}

/// `COPY target (cols) FROM STDIN`, binary unless the rows are text.
pub(crate) fn copy_sql(quoted_target: &str, copy_list: &str, text: bool) -> String {
    if text {
        format!("COPY {quoted_target} {copy_list} FROM STDIN")
    } else {
        format!("COPY {quoted_target} {copy_list} FROM STDIN (FORMAT binary)")
    }
}

/// COPYs rows `a..b` of `part` with the part's own statement; the rows taken.
pub(crate) async fn copy_rows(txn: &Transaction<'_>, part: &BatchPart, a: usize, b: usize) -> Result<u64, tokio_postgres::Error> {
    let sink = txn.copy_in::<_, Bytes>(part.sql.as_str()).await?;
    futures_util::pin_mut!(sink);
    let body = part.body.slice(row_start(&part.seg, a)..row_start(&part.seg, b));
    if part.text {
        sink.send(body).await?;
    } else {
        sink.send(Bytes::from_static(&HEADER)).await?;
        sink.send(body).await?;
        sink.send(Bytes::from_static(&TRAILER)).await?;
    }
    sink.finish().await
}

/// One transaction: rows for one or more targets (many small per-leaf
/// buffers flushed together pay for one commit, not one each).
pub(crate) struct Batch {
    pub parts: Vec<BatchPart>,
    /// Budget bytes given back once the batch is done.
    pub budget: usize,
    /// Unique across runs, so a retry can tell whether its commit landed.
    pub batch_id: String,
}

impl Batch {
    /// None of the batch's rows will be committed, for `why`: each piece of
    /// input with rows in it fails, saying so.
    pub(crate) fn fail(self, why: &str) {
        self.parts.into_iter().for_each(|p| p.seg.acks.fail(why));
    }
}

/// The rows of one target within a batch.
pub(crate) struct BatchPart {
    /// The load's table these rows belong to.
    pub table: u16,
    pub target_name: String,
    /// `target_name` quoted for SQL.
    pub quoted_name: String,
    /// The name this target is journaled under.
    pub journal_target: String,
    /// The statement the rows are sent with (the writer's `sql`).
    pub sql: String,
    pub text: bool,
    /// How the table's rows are written.
    pub writer: Arc<dyn Writer>,
    /// With an `ordered` writer: this batch's place among the batches of its target (see `merge::Turns`).
    pub turn: u64,
    /// The encoded rows, shared with every COPY attempt without copying.
    pub body: Bytes,
    /// Row boundaries, original records and positions (`seg.data` is moved into `body`).
    pub seg: Segment,
}

impl BatchPart {
    /// What committing `rows` of this part claims in the journal.
    pub(crate) fn claim(&self, rows: u64) -> super::journal::Claim<'_> {
        super::journal::Claim { ranges: &self.seg.ranges, target: &self.journal_target, relation: &self.target_name, rows }
    }
}

impl Batch {
    pub(crate) fn label(&self) -> String {
        match self.parts.as_slice() {
            [one] => one.target_name.clone(),
            many => format!("{} partitions ({} …)", many.len(), many.first().map(|p| p.target_name.as_str()).unwrap_or("")),
        }
    }

    /// Whether this batch's parts apply in order (upserts).
    pub(crate) fn ordered(&self) -> bool {
        self.parts.iter().any(|p| p.writer.ordered())
    }

    /// The order its parts are loaded in: as sent, or for an ordered writer
    /// by target name, so every session locks leaves in one order.
    pub(crate) fn order(&self) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.parts.len()).collect();
        if self.ordered() {
            order.sort_by(|a, b| self.parts[*a].target_name.cmp(&self.parts[*b].target_name));
        }
        order
    }

    pub(crate) fn bytes(&self) -> u64 {
        self.parts.iter().map(|p| p.body.len() as u64).sum()
    }
}

/// Where row `i` of a segment starts in its body.
pub(crate) fn row_start(seg: &Segment, i: usize) -> usize {
    if i == 0 { 0 } else { seg.row_ends[i - 1] as usize }
}
