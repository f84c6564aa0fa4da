//! The one executor: runs a [`Plan`] step by step.
//!
//! Every DDL step runs under a short `lock_timeout`, because a DDL statement
//! queued behind a long query blocks every insert queued behind *it*; when
//! the timeout hits, the step is rolled back and retried with backoff
//! (`retry::Policy::lock`), so writers see at most one timeout's wait at a
//! time. Deadlocks and serialization failures are retried the same way
//! (the faults `retry::classify` calls `LockWait` and `Again`). Any other error stops
//! the plan and names the step. Steps marked non-transactional (`DETACH …
//! CONCURRENTLY`, `FINALIZE`) run as single statements outside a transaction.

use std::time::Duration;

use crate::retry::{self, Policy};

use chute_core::partman::{Plan, Step};
use tokio_postgres::Client;

/// How the executor waits for locks.
#[derive(Debug, Clone, Copy)]
pub struct ExecSettings {
    /// The longest one DDL statement may wait for a lock (and so the longest
    /// it can hold up writers queued behind it).
    pub lock_timeout: Duration,
    /// Give up retrying a step after this long.
    pub retry_for: Duration,
}

impl Default for ExecSettings {
    fn default() -> Self {
        ExecSettings { lock_timeout: Duration::from_secs(1), retry_for: Duration::from_secs(300) }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// A step's statement failed. When its connection was lost
    /// (`SqlError::connection_lost`), a caller that can reconnect may plan
    /// again and rerun.
    #[error("step {index} ({description}) failed: {source}")]
    Step { index: usize, description: String, source: crate::error::SqlError },
    #[error(
        "step {index} ({description}) could not get its locks within {waited:?} of retries (lock_timeout {lock_timeout:?}; last error: {last}): a long transaction holds the table; retry later or raise --lock-timeout"
    )]
    LockRetriesExhausted { index: usize, description: String, waited: Duration, lock_timeout: Duration, last: Box<str>, code: Box<str> },
    /// A step on a data node could not reach it (scale-out).
    #[error("step {index} ({description}): {message}")]
    Node { index: usize, description: String, message: String },
}

impl ExecError {
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            ExecError::Step { source, .. } => source.code().map(|c| c.code()),
            ExecError::LockRetriesExhausted { code, .. } => Some(code.as_ref()),
            ExecError::Node { .. } => None,
        }
    }
}

/// What happened to a step, for progress reporting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepEvent {
    Started,
    /// A lock timeout or deadlock; retrying after the given pause.
    Retrying {
        attempt: u32,
        pause: Duration,
    },
    Done,
}

pub use crate::error::describe;

/// Runs every step of `plan` in order.
pub async fn run_plan(
    client: &mut Client,
    plan: &Plan,
    settings: ExecSettings,
    mut on_event: impl FnMut(usize, &Step, StepEvent),
) -> Result<(), ExecError> {
    // Data nodes' connections, opened when a step first needs one.
    let mut nodes: std::collections::HashMap<String, Client> = std::collections::HashMap::new();
    for (i, step) in plan.steps.iter().enumerate() {
        on_event(i, step, StepEvent::Started);
        match &step.node {
            None => run_step(client, i + 1, step, settings, |e| on_event(i, step, e)).await?,
            Some(node) => {
                if !nodes.contains_key(node) {
                    let node_error = |message: String| ExecError::Node { index: i + 1, description: step.description.clone(), message };
                    let opts = crate::node_conn::node_options(client, node, &crate::connect::ProcessEnv).await.map_err(node_error)?;
                    let c = crate::retry::connect(&opts, settings.retry_for.min(Duration::from_secs(60)), |_| {})
                        .await
                        .map_err(|e| node_error(format!("data node {node} ({}) is not reachable: {e}", opts.display_url())))?;
                    nodes.insert(node.clone(), c);
                }
                let c = nodes.get_mut(node).expect("connected above");
                run_step(c, i + 1, step, settings, |e| on_event(i, step, e)).await?;
            }
        }
        on_event(i, step, StepEvent::Done);
    }
    Ok(())
}

async fn run_step(
    client: &mut Client,
    index: usize,
    step: &Step,
    settings: ExecSettings,
    mut on_event: impl FnMut(StepEvent),
) -> Result<(), ExecError> {
    let timeout_ms = settings.lock_timeout.as_millis().max(1);
    let policy = Policy::lock(settings.lock_timeout, settings.retry_for);
    let began = std::time::Instant::now();
    let outcome = retry::run!(
        &policy,
        |_| async {
            if step.transactional { run_in_transaction(client, step, timeout_ms).await } else { run_alone(client, step, timeout_ms).await }
        },
        on_retry = |r| on_event(StepEvent::Retrying { attempt: r.failures, pause: r.pause })
    );
    outcome.map_err(|e| match e.code() {
        Some(code) if policy.gave_up_on(&e) => ExecError::LockRetriesExhausted {
            index,
            description: step.description.clone(),
            waited: began.elapsed(),
            lock_timeout: settings.lock_timeout,
            last: describe(&e).into(),
            code: code.code().into(),
        },
        _ => ExecError::Step { index, description: step.description.clone(), source: e.into() },
    })
}

async fn run_in_transaction(client: &mut Client, step: &Step, timeout_ms: u128) -> Result<(), tokio_postgres::Error> {
    let tx = client.transaction().await?;
    tx.batch_execute(&format!("SET LOCAL lock_timeout = '{timeout_ms}ms'")).await?;
    for sql in &step.sql {
        tx.batch_execute(sql).await?;
    }
    tx.commit().await
}

async fn run_alone(client: &mut Client, step: &Step, timeout_ms: u128) -> Result<(), tokio_postgres::Error> {
    client.batch_execute(&format!("SET lock_timeout = '{timeout_ms}ms'")).await?;
    let mut result = Ok(());
    for sql in &step.sql {
        result = client.batch_execute(sql).await;
        if result.is_err() {
            break;
        }
    }
    let _ = client.batch_execute("RESET lock_timeout").await;
    result
}

/// Where a run of plan steps says what happens besides its steps (a lost
/// connection, and that it reconnects), for the binary to print; silent
/// unless one is set.
#[derive(Clone, Default)]
pub struct Notices(Option<std::sync::Arc<Say>>);

/// What prints a notice.
type Say = dyn Fn(&str) + Send + Sync;

impl Notices {
    pub fn new(say: impl Fn(&str) + Send + Sync + 'static) -> Notices {
        Notices(Some(std::sync::Arc::new(say)))
    }

    pub fn say(&self, what: &str) {
        if let Some(say) = &self.0 {
            say(what);
        }
    }
}

impl std::fmt::Debug for Notices {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() { "Notices(set)" } else { "Notices(none)" })
    }
}

/// Says that the connection was lost (`cause`) and opens a new session on
/// the host list again, so it reaches whichever server is the primary now,
/// for as long as `outage` allows; the error is `cause` itself when its
/// budget was spent already. A `stop` flag set (a signal) ends the
/// reconnecting at once. The caller sets the session up as it does
/// any new one (`catalog::prepare_session`) and plans again from what the server
/// reached holds: never from what it did on the server it lost.
pub async fn reconnect<E>(
    opts: &crate::ConnectOptions,
    outage: &mut crate::retry::Outage,
    cause: E,
    notices: &Notices,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Client, E>
where
    E: std::fmt::Display + From<crate::pooler::PoolerError> + From<tokio_postgres::Error>,
{
    let Some(left) = outage.lost() else { return Err(cause) };
    notices.say(&format!(
        "the connection to the server was lost ({cause}); reconnecting for up to {}s, then going on from what the server holds now",
        left.as_secs().max(1)
    ));
    let client = crate::retry::connect_unless_stopped(opts, left, stop).await.map_err(crate::pooler::PoolerError::Connect)?;
    crate::pooler::check(opts, &client).await?;
    Ok(client)
}

/// Connects for a run of plan steps, retrying for up to `retry_for` while
/// no host answers or none takes writes yet (a failover under way), and
/// saying so once; a host list that answers and has no primary is refused
/// at once (see `connect::target`).
pub async fn connect_within(
    opts: &crate::ConnectOptions,
    retry_for: std::time::Duration,
    notices: &Notices,
) -> Result<Client, crate::ConnectError> {
    let mut said = false;
    crate::retry::connect(opts, retry_for, |e| {
        if !std::mem::replace(&mut said, true) {
            notices.say(&format!("{e}; retrying for up to {}s", retry_for.as_secs().max(1)));
        }
    })
    .await
}

/// A reporter that reports nothing.
pub fn quiet(_: usize, _: &Step, _: StepEvent) {}

/// A step's own failure is its statement's; lock waits and conflicts were
/// retried already, so running out of them is final.
impl crate::retry::Classify for crate::exec::ExecError {
    fn fault(&self) -> crate::retry::Fault {
        match self {
            crate::exec::ExecError::Step { source, .. } => source.fault(),
            _ => crate::retry::Fault::Fatal,
        }
    }
}
