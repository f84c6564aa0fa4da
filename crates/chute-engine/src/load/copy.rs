//! COPY workers: one connection each, taking batches from a shared queue.
//!
//! A batch the server refuses for its data (a bad value, a constraint) is
//! split in halves until the refused rows are isolated: every other row is
//! loaded and each refused row becomes a reject with the server's reason and
//! SQLSTATE. Any other error ends the worker and, through the coordinator,
//! the load.

use std::sync::Arc;

use bytes::Bytes;
use chute_core::encode::{HEADER, TRAILER};
use futures_util::SinkExt;
use tokio_postgres::Client;

use super::LoadError;
use super::pipeline::{Budget, Segment};

/// Rows for one COPY statement.
pub(crate) struct Batch {
    pub target_name: String,
    pub sql: String,
    pub text: bool,
    pub seg: Segment,
    /// Budget bytes given back once the batch is done.
    pub budget: usize,
}

pub(crate) struct RejectedRow {
    pub raw: Vec<u8>,
    pub line: u64,
    pub reason: String,
}

pub(crate) enum CopyOutcome {
    Loaded { rows: u64, bytes: u64 },
    Rejected(RejectedRow),
    Failed(LoadError),
}

pub(crate) async fn worker(
    client: Client,
    rx: flume::Receiver<Batch>,
    tx: flume::Sender<CopyOutcome>,
    budget: Arc<Budget>,
) -> Result<(), LoadError> {
    while let Ok(batch) = rx.recv_async().await {
        let n = batch.seg.row_ends.len();
        let result = copy_rows(&client, &batch, 0, n, &tx).await;
        budget.release(batch.budget);
        if let Err(e) = result {
            let _ = tx.send(CopyOutcome::Failed(e));
            return Ok(());
        }
    }
    Ok(())
}

fn row_start(seg: &Segment, i: usize) -> usize {
    if i == 0 { 0 } else { seg.row_ends[i - 1] as usize }
}

/// Loads rows `[from, to)` of the batch, splitting on data errors.
async fn copy_rows(client: &Client, batch: &Batch, from: usize, to: usize, tx: &flume::Sender<CopyOutcome>) -> Result<(), LoadError> {
    let mut stack = vec![(from, to)];
    while let Some((a, b)) = stack.pop() {
        if a >= b {
            continue;
        }
        match copy_once(client, batch, a, b).await {
            Ok(rows) => {
                let bytes = (row_start(&batch.seg, b) - row_start(&batch.seg, a)) as u64;
                let _ = tx.send(CopyOutcome::Loaded { rows, bytes });
            }
            Err(e) if is_data_error(&e) => {
                if b - a == 1 {
                    let raw_from = if a == 0 { 0 } else { batch.seg.raw_ends[a - 1] as usize };
                    let raw = batch.seg.raw[raw_from..batch.seg.raw_ends[a] as usize].to_vec();
                    let reason = crate::exec::describe(&e);
                    let _ = tx.send(CopyOutcome::Rejected(RejectedRow { raw, line: batch.seg.lines[a], reason }));
                } else {
                    let mid = a + (b - a) / 2;
                    stack.push((mid, b));
                    stack.push((a, mid));
                }
            }
            Err(e) => return Err(LoadError::sql(format!("COPY into {}", batch.target_name), &e)),
        }
    }
    Ok(())
}

async fn copy_once(client: &Client, batch: &Batch, a: usize, b: usize) -> Result<u64, tokio_postgres::Error> {
    let sink = client.copy_in::<_, Bytes>(batch.sql.as_str()).await?;
    futures_util::pin_mut!(sink);
    let body = Bytes::copy_from_slice(&batch.seg.data[row_start(&batch.seg, a)..row_start(&batch.seg, b)]);
    if batch.text {
        sink.send(body).await?;
    } else {
        sink.send(Bytes::from_static(&HEADER)).await?;
        sink.send(body).await?;
        sink.send(Bytes::from_static(&TRAILER)).await?;
    }
    sink.finish().await
}

/// Errors caused by the rows themselves: splitting the batch isolates them.
fn is_data_error(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        let c = c.code();
        c.starts_with("22") || c.starts_with("23") || c == "P0001"
    })
}
