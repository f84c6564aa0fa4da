//! The one signal watcher. SIGINT (Ctrl-C) and SIGTERM ask the running
//! command to stop: the watcher sets a flag the engine reads, remembers
//! which signal came (the exit code: 130 or 143), and stays registered so
//! a later signal is not the default action (an abrupt kill). A command
//! that can be stopped mid-flight (a load) may ask for a second signal to
//! end the process at once, after a last word on stderr.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::Outcome;

/// What a second signal does.
#[derive(Debug, Clone, Copy)]
pub enum Second {
    /// Nothing: the command finishes its stop.
    Wait,
    /// Exit at once with the first signal's code, after printing this.
    Exit(&'static str),
}

#[derive(Debug, Clone)]
pub struct Signals {
    /// Set on the first signal.
    flag: Arc<AtomicBool>,
    which: tokio::sync::watch::Receiver<Option<Outcome>>,
}

impl Signals {
    /// Starts listening (on the tokio runtime).
    pub fn listen(second: Second) -> Signals {
        Signals::listen_with(Arc::new(AtomicBool::new(false)), second)
    }

    /// Starts listening, setting `flag` (one the engine already holds) on the first signal.
    pub fn listen_with(flag: Arc<AtomicBool>, second: Second) -> Signals {
        let (tx, which) = tokio::sync::watch::channel(None);
        let set = flag.clone();
        tokio::spawn(async move {
            let outcome = next().await;
            set.store(true, Ordering::SeqCst);
            let _ = tx.send(Some(outcome));
            next().await;
            match second {
                Second::Exit(message) => {
                    eprintln!("chute: second signal; {message}");
                    std::process::exit(outcome as i32);
                }
                // Stay registered, so a later signal is not the default (kill).
                Second::Wait => std::future::pending::<()>().await,
            }
        });
        Signals { flag, which }
    }

    /// The flag the first signal sets.
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.flag.clone()
    }

    /// The first signal's outcome, once one came.
    pub fn outcome(&self) -> Option<Outcome> {
        *self.which.borrow()
    }

    /// Waits for the first signal.
    pub async fn first(&mut self) -> Outcome {
        loop {
            if let Some(o) = *self.which.borrow_and_update() {
                return o;
            }
            if self.which.changed().await.is_err() {
                // The watcher is gone without a signal: none will come.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// The next SIGINT or SIGTERM.
async fn next() -> Outcome {
    tokio::select! {
        _ = tokio::signal::ctrl_c() => Outcome::Interrupted,
        _ = sigterm() => Outcome::Terminated,
    }
}

async fn sigterm() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut s) => {
            s.recv().await;
        }
        Err(_) => std::future::pending().await,
    }
}
