//! Finding the rows a server refuses within one target's COPY batch.
//!
//! This lives apart from the COPY workers because it is where a good row can
//! be lost: the server's error names the failing row only in its context
//! (`COPY t, line N, column c`), and a value's own input function may add a
//! line number of its own before it (`JSON data, line 1: …`). So the row
//! number is read from the COPY context only, and a row is rejected only
//! after it alone has failed. A batch whose every row fails with one encoding
//! error (chute's idea of a column type is wrong: the table changed, or an
//! encoder bug) is not split row by row, which would bury the server in
//! savepoints and log lines: the load stops at once, naming the column.

use tokio_postgres::Transaction;
use tokio_postgres::error::SqlState;

use super::super::LoadError;
use super::super::write::merge::Turns;
use super::{BatchPart, RejectedRow};

/// Why a target's rows could not be loaded, isolated or rejected.
pub(crate) enum PartError {
    Pg(tokio_postgres::Error),
    /// Every row fails the same way: no row is to blame, the load must stop.
    Mismatch(LoadError),
}

impl From<tokio_postgres::Error> for PartError {
    fn from(e: tokio_postgres::Error) -> Self {
        PartError::Pg(e)
    }
}

/// The savepoints the rows and the probes are tried under.
const SAVEPOINT: &str = "chute_rows";
const PROBE: &str = "chute_probe";

/// Releases a savepoint just rolled back to. `ROLLBACK TO` alone keeps the
/// savepoint, so the next one would be made inside it: a batch with many
/// refused rows nested a subtransaction per refused row, and ran the
/// server out of lock memory ("out of shared memory", 53200) on default
/// settings after some ten thousand of them.
async fn release(txn: &Transaction<'_>, name: &str) -> Result<(), tokio_postgres::Error> {
    txn.batch_execute(&format!("RELEASE SAVEPOINT {name}")).await
}

/// Rows per COPY after an error, until the batch is through.
const AFTER_ERROR_WINDOW: usize = 1024;

/// Loads one target's rows under savepoints; refused rows go to `rejected`.
pub(crate) async fn load_part(
    txn: &mut Transaction<'_>,
    part: &BatchPart,
    rejected: &mut Vec<RejectedRow>,
    turns: &Turns,
) -> Result<(u64, crate::load::UpsertCounts), PartError> {
    let n = part.seg.row_ends.len();
    let mut loaded = 0u64;
    let mut upsert = crate::load::UpsertCounts::default();
    // The whole part first. On a data error the server names the failing
    // row: load the rows before it, then try that row alone, and reject it
    // only if it fails alone. Without a row number, halve the window.
    let mut pos = 0usize;
    let mut window = n;
    // The row the server blamed last, to be tried alone once the rows before it are in.
    let mut suspect: Option<usize> = None;
    // An upsert's merge inserts new keys without ON CONFLICT while no other
    // writer races it (see `merge::merge_rows`); after a race, with it.
    let mut fast = true;
    while pos < n {
        let end = if suspect == Some(pos) {
            pos + 1
        } else {
            let cap = suspect.filter(|s| *s > pos).unwrap_or(n);
            (pos + window.max(1)).min(n).min(cap)
        };
        let sp = txn.savepoint(SAVEPOINT).await?;
        match part.writer.write(&sp, part, pos..end, fast, turns).await {
            Ok((rows, counts)) => {
                sp.commit().await?;
                loaded += rows;
                upsert.add(counts);
                pos = end;
                if suspect.is_some_and(|s| s < pos) {
                    // The blamed row loaded alone: the error was not its own.
                    suspect = None;
                    window = AFTER_ERROR_WINDOW;
                }
            }
            Err(e) if fast && part.writer.raced(&e) => {
                // A key inserted by another writer since the merge looked: the same rows again, with ON CONFLICT.
                sp.rollback().await?;
                release(txn, SAVEPOINT).await?;
                fast = false;
            }
            Err(e) if is_data_error(&e) || refused_by_policy(part, &e) => {
                sp.rollback().await?;
                release(txn, SAVEPOINT).await?;
                if end - pos == 1 {
                    rejected.push(reject_row(part, pos, crate::exec::describe(&e), e.code().map(|c| c.code().to_owned())));
                    pos += 1;
                    suspect = None;
                    window = AFTER_ERROR_WINDOW;
                    continue;
                }
                let blamed = failing_row(&e).filter(|k| *k >= 1 && pos + k - 1 < end);
                if pos == 0
                    && end == n
                    && blamed.is_none_or(|k| k == 1)
                    && !part.text
                    && is_encoding_mismatch(&e)
                    && let Some(stop) = batch_wide(txn, part, &e, turns).await?
                {
                    return Err(PartError::Mismatch(LoadError::sql(stop, e)));
                }
                match blamed {
                    Some(k) => {
                        suspect = Some(pos + k - 1);
                        window = k - 1;
                    }
                    None => window = (end - pos) / 2,
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok((loaded, upsert))
}

fn reject_row(batch: &BatchPart, i: usize, reason: String, sqlstate: Option<String>) -> RejectedRow {
    let (raw, at) = batch.seg.record(i);
    let ack = batch.seg.acks.of(i).map(|a| a.share());
    RejectedRow { part: 0, index: i, ack, raw, at, line: batch.seg.lines[i], input: usize::from(batch.seg.inputs[i]), reason, sqlstate }
}

/// The COPY line of an error's context: the one line that starts with
/// `COPY `. A value's own input function may put lines of its own before it
/// (`JSON data, line 1: …`), which say nothing about the row.
fn copy_context(e: &tokio_postgres::Error) -> Option<&str> {
    e.as_db_error()?.where_()?.lines().find(|l| l.starts_with("COPY "))
}

/// The 1-based row of a COPY that failed, from the COPY part of the error's
/// context (`COPY t, line 35, column x: …`; binary COPY counts rows as lines).
fn failing_row(e: &tokio_postgres::Error) -> Option<usize> {
    parse_copy_line(copy_context(e)?).map(|(line, _)| line)
}

/// `(line, column)` from `COPY <name>, line N[, column C][: value]`.
fn parse_copy_line(ctx: &str) -> Option<(usize, Option<&str>)> {
    // The first ", line N" followed by the end, ", column " or ": ": a
    // table name holding ", line " is the only way to fool this, and the
    // row is tried alone before it is rejected anyway.
    let mut from = 0;
    while let Some(k) = ctx[from..].find(", line ") {
        let at = from + k + ", line ".len();
        let digits = ctx[at..].bytes().take_while(u8::is_ascii_digit).count();
        let rest = &ctx[at + digits..];
        if digits > 0 && (rest.is_empty() || rest.starts_with(", column ") || rest.starts_with(": ")) {
            let line = ctx[at..at + digits].parse().ok()?;
            let column = rest.strip_prefix(", column ").map(|c| c.split_once(": ").map_or(c, |(name, _)| name));
            return Some((line, column));
        }
        from = at;
    }
    None
}

/// Errors caused by the rows themselves under the part's writer's rules (a
/// row-level security policy's refusal, say): splitting the batch isolates them.
fn refused_by_policy(part: &BatchPart, e: &tokio_postgres::Error) -> bool {
    part.writer.refused_row(e)
}

fn is_data_error(e: &tokio_postgres::Error) -> bool {
    e.code().is_some_and(|c| {
        let c = c.code();
        c.starts_with("22") || c.starts_with("23") || c == "P0001"
    }) || is_encoding_mismatch(e)
}

/// Errors that say the bytes chute encoded do not fit the column's type (a
/// binary value of the wrong shape, or a row with the wrong field count),
/// rather than that a value is bad. A protocol violation counts only with a
/// COPY context: that is the server reading a value too short for its type,
/// with the connection still up.
fn is_encoding_mismatch(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(c) if *c == SqlState::INVALID_BINARY_REPRESENTATION || *c == SqlState::BAD_COPY_FILE_FORMAT => true,
        Some(c) if *c == SqlState::PROTOCOL_VIOLATION => !e.is_closed() && copy_context(e).is_some(),
        _ => false,
    }
}

/// Whether the whole part failing with `e` is a batch-wide mismatch: the
/// first and the last row, each alone, fail with the same SQLSTATE on the
/// same column. Both tries are rolled back; the caller goes on isolating
/// rows when the answer is `None`, and stops the load with the error and
/// the context given otherwise.
async fn batch_wide(
    txn: &mut Transaction<'_>,
    part: &BatchPart,
    e: &tokio_postgres::Error,
    turns: &Turns,
) -> Result<Option<String>, PartError> {
    let column = |e: &tokio_postgres::Error| copy_context(e).and_then(parse_copy_line).and_then(|(_, c)| c).map(str::to_owned);
    let (code, col) = (e.code().cloned(), column(e));
    let n = part.seg.row_ends.len();
    for row in [0, n - 1] {
        let sp = txn.savepoint(PROBE).await?;
        let alone = part.writer.write(&sp, part, row..row + 1, false, turns).await;
        sp.rollback().await?;
        release(txn, PROBE).await?;
        match alone {
            Err(a) if a.code().cloned() == code && column(&a) == col => {}
            Err(a) if !is_data_error(&a) => return Err(a.into()),
            _ => return Ok(None),
        }
    }
    let column = col.map_or_else(|| "a column".to_owned(), |c| format!("column {c}"));
    let context = format!(
        "COPY into {}: every row fails on {column}, so no row is to blame and the load stops: the table's column types \
         differ from what chute encoded (was the table altered while chute loaded, or is a column's type one chute reads wrong?); \
         check the table's definition (\\d {}) and run the load again",
        part.target_name, part.target_name
    );
    Ok(Some(context))
}

#[cfg(test)]
mod tests {
    use super::parse_copy_line;

    #[test]
    fn reads_the_copy_line_not_a_value_line() {
        assert_eq!(parse_copy_line("COPY r2, line 5, column j"), Some((5, Some("j"))));
        assert_eq!(parse_copy_line("COPY r2, line 5, column j: \"[1, 2\""), Some((5, Some("j"))));
        assert_eq!(parse_copy_line("COPY r2, line 77"), Some((77, None)));
        assert_eq!(parse_copy_line("COPY r2, line 7: \"a, line 9\""), Some((7, None)));
        assert_eq!(parse_copy_line("COPY \"a, line x\", line 3, column c"), Some((3, Some("c"))));
        assert_eq!(parse_copy_line("COPY t"), None);
    }
}
