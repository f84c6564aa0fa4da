//! Upserts as a mode of the sink: a part's rows are COPYed (binary, as
//! always) into a staging table of the worker's session, then merged into
//! their leaf with one `INSERT … SELECT … ON CONFLICT`, in the batch's
//! transaction, so the journal entries commit with the merge and a resumed
//! load neither applies a batch twice nor skips one.
//!
//! Order. Rows apply as if one at a time in input order:
//! - within a part, rows of one key merge in rounds (round *k* is every
//!   key's *k*-th row, see `chute_core::upsert`), so the last row wins for
//!   `update` (each round applies on top of the one before, `--update-if`
//!   included) and the first for `nothing` (round 1 only);
//! - across batches, [`Turns`]: the coordinator numbers the batches of
//!   each leaf as it sends them, and a worker merges a part only once every
//!   earlier batch of its leaf is done, so batches of one leaf never merge
//!   concurrently and commit in input order; batches of different leaves
//!   merge in parallel, and a part is staged while an earlier batch of its
//!   leaf still merges.
//!
//! Deadlocks. Concurrent upserts of overlapping keys (several loads at once)
//! lock rows; two sessions that lock the same keys in different orders
//! deadlock. Every session here stages a part's rows sorted by key bytes
//! (one global order, stable so input order holds within a key) and merges
//! a batch's parts in the order of their leaf names, so locks are taken in
//! one order by everyone. A deadlock that happens anyway (a writer outside
//! chute) is retried like any other (see `commit_with_retries`).

use std::collections::HashMap;
use std::sync::Mutex;

use bytes::Bytes;
use chute_core::encode::{HEADER, TRAILER};
use chute_core::upsert::{ConflictAction, MergeSql, Source};
use futures_util::SinkExt;
use tokio_postgres::Transaction;

use super::{Batch, BatchPart, row_start};
use crate::load::UpsertCounts;
use crate::setting::Setting;

/// How one table's parts are merged (chosen once, when the load's routing is built).
pub(crate) struct MergePlan {
    pub action: ConflictAction,
    /// Makes the session's staging table when it has none, and empties it.
    pub prepare: String,
    /// The most rows of one key in the staging table (when the client cannot tell).
    pub multiplicity: String,
    pub sql: MergeSql,
    /// The parts' targets are leaves (or plain tables), which return `xmax`;
    /// false when rows go through a partitioned parent.
    pub leaves: bool,
    /// Where the key columns are among the loaded columns.
    pub key_fields: Vec<usize>,
    /// Byte equality of the key's binary values is the server's equality.
    pub exact: bool,
}

impl MergePlan {
    /// `parent` quoted; `copy_list` as in COPY (`("a", "b")`); `table` the
    /// load's index of the table, which names the staging table.
    pub(crate) fn new(
        table: usize,
        parent: &str,
        copy_list: &str,
        resolved: &crate::conflict::Resolved,
        loaded: &[String],
        leaves: bool,
    ) -> MergePlan {
        let name = format!("chute_stage_{table}");
        let stage = format!("pg_temp.{}", chute_core::ident::quote_ident(&name));
        let sql = resolved.merge_sql(&stage, loaded);
        let cols = copy_list.trim_start_matches('(').trim_end_matches(')');
        MergePlan {
            action: resolved.setting.action,
            prepare: format!(
                "CREATE TEMP TABLE IF NOT EXISTS {} ON COMMIT DELETE ROWS AS SELECT {cols} FROM ONLY {parent} WITH NO DATA; TRUNCATE {stage}",
                chute_core::ident::quote_ident(&name)
            ),
            multiplicity: format!(
                "SELECT coalesce(max(n), 0)::int8 FROM (SELECT count(*) AS n FROM {stage} GROUP BY {}) g",
                sql.key.join(", ")
            ),
            sql,
            leaves,
            key_fields: resolved.key_fields.clone(),
            exact: resolved.exact,
        }
    }

    /// `COPY` of a part's rows into the staging table, as the part's own COPY would go into its target.
    pub(crate) fn copy_sql(&self, copy_list: &str, text: bool) -> String {
        super::copy_sql(&self.sql.stage, copy_list, text)
    }
}

/// Upserts: each part staged by COPY, then merged (see the module's doc).
pub(crate) struct MergeWriter(pub MergePlan);

impl super::Writer for MergeWriter {
    fn sql(&self, _target: &chute_core::ident::QualifiedName, copy_list: &str, text: bool) -> String {
        self.0.copy_sql(copy_list, text)
    }

    fn write<'a>(
        &'a self,
        txn: &'a Transaction<'_>,
        part: &'a BatchPart,
        rows: std::ops::Range<usize>,
        fast: bool,
        turns: &'a Turns,
    ) -> futures_util::future::BoxFuture<'a, Result<(u64, UpsertCounts), tokio_postgres::Error>> {
        Box::pin(merge_rows(txn, part, &self.0, rows.start, rows.end, fast, turns))
    }

    fn ordered(&self) -> bool {
        true
    }

    /// The fast merge's insert of new keys met a key another writer inserted meanwhile.
    fn raced(&self, e: &tokio_postgres::Error) -> bool {
        e.code() == Some(&tokio_postgres::error::SqlState::UNIQUE_VIOLATION)
    }

    fn fill_refusal(&self) -> Option<String> {
        (!self.0.sql.dedupes()).then(|| {
            format!(
                "the load upserts with {}: whether a repeated key's row applies is decided row by row, by a merge into a partition that has its unique index",
                Setting::UpdateIf
            )
        })
    }

    fn fill_dedupe(&self, leaf: &str) -> Option<(String, ConflictAction)> {
        self.0.sql.dedupe(leaf).map(|sql| (sql, self.0.action))
    }

    fn swap_refusal(&self) -> Option<String> {
        Some(format!("the load upserts ({}): rows go into partitions that exist the normal way", Setting::OnConflict))
    }
}

/// Stages rows `a..b` of `part` and merges them into its target; returns
/// the rows staged and what they did. `fast`, for `nothing` on a key whose
/// bytes are its equality: new keys are inserted without ON CONFLICT
/// (`MergeSql::insert_new`: 1.4x on the statement alone, a few percent on
/// a whole load, whose staging and parsing it does not change), which fails with 23505 if
/// another writer inserts one of them meanwhile; the caller then rolls back
/// to its savepoint and calls again without `fast`.
pub(crate) async fn merge_rows(
    txn: &Transaction<'_>,
    part: &BatchPart,
    plan: &MergePlan,
    a: usize,
    b: usize,
    fast: bool,
    turns: &Turns,
) -> Result<(u64, UpsertCounts), tokio_postgres::Error> {
    txn.batch_execute(&plan.prepare).await?;
    let body = part.body.slice(row_start(&part.seg, a)..row_start(&part.seg, b));
    let (body, most) = if part.text { (body, None) } else { ordered(part, plan, a, b, body) };
    let sink = txn.copy_in::<_, Bytes>(part.sql.as_str()).await?;
    futures_util::pin_mut!(sink);
    if part.text {
        sink.send(body).await?;
    } else {
        sink.send(Bytes::from_static(&HEADER)).await?;
        sink.send(body).await?;
        sink.send(Bytes::from_static(&TRAILER)).await?;
    }
    let staged = sink.finish().await?;
    turns.wait(part).await;
    // 0: no key repeats, one statement over the whole stage.
    let rounds: i64 = match most {
        Some(m) if m <= 1 => 0,
        // `nothing`: the first row of each key decides; the later ones meet it.
        _ if plan.action == ConflictAction::Nothing => 1,
        Some(m) => i64::from(m),
        None => match txn.query_one(&plan.multiplicity, &[]).await?.get::<_, i64>(0) {
            n if n <= 1 => 0,
            n => n,
        },
    };
    let mut counts = UpsertCounts::default();
    let mut tally = |row: tokio_postgres::Row| {
        counts.inserted += row.get::<_, i64>(1) as u64;
        counts.updated += row.get::<_, i64>(2) as u64;
    };
    let statement = |source| match plan.sql.insert_new(&part.quoted_name, source) {
        Some(sql) if fast => sql,
        _ => plan.sql.statement(&part.quoted_name, plan.leaves, source),
    };
    if rounds == 0 {
        tally(txn.query_one(&statement(Source::Stage), &[]).await?);
    } else {
        let statement = txn.prepare(&statement(Source::StageRound)).await?;
        for round in 1..=rounds {
            tally(txn.query_one(&statement, &[&round]).await?);
        }
    }
    counts.unchanged = staged.saturating_sub(counts.inserted + counts.updated);
    Ok((staged, counts))
}

/// Rows `a..b` (their bytes `body`) in key order, and the most rows of one
/// key when byte equality is the key's equality. Unchanged (and the count
/// left to the server) when a row cannot be read, which COPY then reports.
fn ordered(part: &BatchPart, plan: &MergePlan, a: usize, b: usize, body: Bytes) -> (Bytes, Option<u32>) {
    let base = row_start(&part.seg, a);
    let rows: Vec<&[u8]> = (a..b).map(|i| &part.body[row_start(&part.seg, i)..row_start(&part.seg, i + 1)]).collect();
    let Some((order, most)) = chute_core::upsert::order_by_key(&rows, &plan.key_fields) else { return (body, None) };
    let most = plan.exact.then_some(most);
    if order.iter().enumerate().all(|(i, o)| i == *o) {
        return (body, most);
    }
    let mut out = Vec::with_capacity(body.len());
    for i in order {
        out.extend_from_slice(rows[i]);
    }
    debug_assert_eq!(out.len(), row_start(&part.seg, b) - base);
    (Bytes::from(out), most)
}

/// Whose turn it is to merge into each leaf (see the module's doc): the
/// coordinator gives each batch, per leaf it holds, the next number of that
/// leaf (`BatchPart::turn`); a worker waits until as many batches of each of
/// its leaves are done, and counts its own done when it has finished.
#[derive(Default)]
pub(crate) struct Turns {
    done: Mutex<HashMap<String, u64>>,
    changed: tokio::sync::Notify,
}

impl Turns {
    /// Waits until every earlier batch that merges into this part's leaf is
    /// done. Called in the batch's transaction after the part is staged, so
    /// a worker stages its rows while another merges into the same leaf.
    /// Waits only point from a batch to earlier ones, and the earlier
    /// batch's transaction already holds every table lock it takes (see
    /// `lock_targets`), so no wait closes a circle.
    pub(crate) async fn wait(&self, part: &BatchPart) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let ready = self.done.lock().expect("turns lock").get(&part.target_name).copied().unwrap_or(0) >= part.turn;
            if ready {
                return;
            }
            changed.await;
        }
    }

    /// The batch is done (committed, or failed for good).
    pub(crate) fn finish(&self, batch: &Batch) {
        let mut done = self.done.lock().expect("turns lock");
        let mut seen = std::collections::HashSet::new();
        for p in batch.parts.iter().filter(|p| p.writer.ordered()) {
            if seen.insert(p.target_name.as_str()) {
                *done.entry(p.target_name.clone()).or_default() += 1;
            }
        }
        drop(done);
        self.changed.notify_waiters();
    }
}

/// The coordinator's side of [`Turns`]: numbers each batch's merged leaves as it is sent.
#[derive(Default)]
pub(crate) struct TurnCounter {
    next: HashMap<String, u64>,
}

impl TurnCounter {
    pub(crate) fn number(&mut self, parts: &mut [BatchPart]) {
        let mut given: HashMap<String, u64> = HashMap::new();
        for p in parts.iter_mut().filter(|p| p.writer.ordered()) {
            let turn = match given.get(&p.target_name) {
                Some(t) => *t,
                None => {
                    let next = self.next.entry(p.target_name.clone()).or_default();
                    let t = *next;
                    *next += 1;
                    t
                }
            };
            p.turn = turn;
            given.insert(p.target_name.clone(), turn);
        }
    }
}
