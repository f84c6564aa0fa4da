//! A load is done when the server it ends on holds its rows, not when an
//! earlier server said so.
//!
//! A failover promotes a standby that may lack the last commits the old
//! primary acknowledged (asynchronous replication: the commit was answered
//! before its WAL reached the standby). The load's workers reconnect and go
//! on, on the new primary, and counted those batches as committed: their
//! rows are gone and the load would report them loaded. The journal is on
//! the same server as the rows and in the same transactions, so it says
//! what survived: after a pass, the rows each pass's batches (their ids
//! begin with the pass's token) hold in the journal of the server reached
//! now are compared with what the passes counted. When some are missing,
//! another pass runs: the load resumes, skipping what the journal holds,
//! so the lost rows load again, once. The summary counts what the journal
//! holds.
//!
//! An input that cannot be read again (stdin) cannot make up for lost rows:
//! the load fails, saying how many and what to do.

use std::collections::HashMap;

pub(crate) use super::pipeline::PassCheck;
use super::{LoadError, LoadProgress, LoadReport, LoadSpec};
use crate::retry::{self, Policy};

/// Passes after which a load that still loses rows gives up (each pass
/// needs a failover during it to lose any).
const MAX_PASSES: usize = 5;

/// Runs a load in passes until the server holds every row a pass counted
/// as committed (see the module's doc).
pub async fn run(spec: LoadSpec, progress: &mut dyn LoadProgress) -> Result<LoadReport, LoadError> {
    let began = std::time::Instant::now();
    let mut report = super::pipeline::run_pass(spec.clone(), progress).await?;
    let Some(mut check) = report.check.take() else { return Ok(report) };
    let (load_id, skipped) = (report.load_id.clone().unwrap_or_default(), report.stats.rows_skipped);
    // Per pass token: the rows the server's journal must still hold.
    let mut expected: Vec<(String, u64)> = Vec::new();
    for pass in 1.. {
        expected.push((check.token.clone(), report.stats.rows_loaded));
        let held = held_by_token(&spec, &load_id).await?;
        let lost: u64 = expected.iter().map(|(t, want)| want.saturating_sub(held.get(t).copied().unwrap_or(0))).sum();
        // What the server holds is what is committed, from now on.
        for (t, want) in expected.iter_mut() {
            *want = held.get(t).copied().unwrap_or(0);
        }
        let holds: u64 = expected.iter().map(|(_, n)| *n).sum();
        if lost == 0 || report.interrupted || report.reject_limit_exceeded {
            report.stats.seconds = began.elapsed().as_secs_f64();
            return Ok(counted_as_held(report, holds, skipped));
        }
        if !check.rereadable {
            return Err(LoadError::Setup(format!(
                "{lost} rows whose commit the server acknowledged are not on the server now (lost with a primary in a failover), and \
                 this input cannot be read again: load the rows again from a file, or rerun with the same {} and the same stream \
                 from its start (what is committed is skipped)",
                crate::setting::Setting::LoadId
            )));
        }
        if pass >= MAX_PASSES {
            return Err(LoadError::Setup(format!(
                "{lost} committed rows were lost again after {pass} passes (failovers during each): run the same command again to load the rest"
            )));
        }
        progress.notice(&format!(
            "{lost} rows whose commit the old server acknowledged are not on the server now (lost in a failover): loading them again"
        ));
        report = super::pipeline::run_pass(spec.clone(), progress).await?;
        check = report.check.take().unwrap_or(check);
    }
    unreachable!("the loop returns")
}

/// The report with the rows the journal holds as its rows loaded.
fn counted_as_held(mut report: LoadReport, holds: u64, skipped: u64) -> LoadReport {
    report.stats.rows_loaded = holds;
    report.stats.rows_skipped = skipped;
    report.rows_per_second = holds as f64 / report.stats.seconds.max(1e-9);
    report
}

/// The rows the journal of the server reached now holds for each pass of
/// the load (by the token its batch ids begin with), on a new connection
/// (the load's may be to a server that is gone).
async fn held_by_token(spec: &LoadSpec, load_id: &str) -> Result<HashMap<String, u64>, LoadError> {
    let rows = retry::run!(&Policy::reconnect(spec.retry_for), |_| async {
        let client = spec.target.connect().await?;
        client
            .query(
                "SELECT split_part(batch_id, '-', 1), sum(rows)::int8 FROM chute.load_journal WHERE load_id = $1 GROUP BY 1",
                &[&load_id],
            )
            .await
            .map_err(|e| LoadError::sql("reading what chute.load_journal holds of this load", e))
    })?;
    Ok(rows.iter().map(|r| (r.get::<_, String>(0), r.get::<_, i64>(1) as u64)).collect())
}
