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
        // Registered here, before the task first runs: a signal that came
        // between the spawn and the task's first poll would otherwise get the
        // default action (the process killed, no exit code of ours).
        let mut streams = Streams::register();
        tokio::spawn(async move {
            let outcome = streams.next().await;
            set.store(true, Ordering::SeqCst);
            let _ = tx.send(Some(outcome));
            streams.next().await;
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

/// SIGINT and SIGTERM, each registered once.
struct Streams {
    interrupt: Option<tokio::signal::unix::Signal>,
    terminate: Option<tokio::signal::unix::Signal>,
}

impl Streams {
    fn register() -> Streams {
        use tokio::signal::unix::{SignalKind, signal};
        Streams { interrupt: signal(SignalKind::interrupt()).ok(), terminate: signal(SignalKind::terminate()).ok() }
    }

    /// The next SIGINT or SIGTERM.
    async fn next(&mut self) -> Outcome {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.interrupt) => Outcome::Interrupted,
            _ = recv(&mut self.terminate) => Outcome::Terminated,
        }
    }
}
