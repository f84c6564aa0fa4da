//! The processes a test starts (`chute load`, `chute serve`, `chute
//! consume` …): started, signalled, waited for with a deadline, and never
//! left running.
//!
//! A test that fails panics wherever it is. A [`ChildGuard`] kills its
//! process (SIGKILL) and reaps it when it is dropped, so a failing test
//! leaves no `chute serve` or `chute consume` behind to hold ports,
//! connections and locks for the tests after it. Signals are sent with
//! kill(2) itself, never with the `kill` program: a minimal Debian root has
//! no procps.

use std::io::Read;
use std::ops::{Deref, DerefMut};
use std::process::{Child, Command, ExitStatus, Output};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// How often a wait looks at a child again.
const POLL: Duration = Duration::from_millis(20);

/// Starts `cmd`; panics naming it when it cannot be started.
pub fn spawn(cmd: &mut Command) -> ChildGuard {
    match cmd.spawn() {
        Ok(child) => ChildGuard::new(child),
        Err(e) => panic!("cannot start {cmd:?}: {e}"),
    }
}

/// A child process that is killed (SIGKILL) and reaped when this guard
/// drops, unless it has exited by then. It is a [`Child`] otherwise: its
/// pipes, `id` and `try_wait` are there as they are.
#[derive(Debug)]
pub struct ChildGuard {
    child: Child,
}

impl ChildGuard {
    pub fn new(child: Child) -> ChildGuard {
        ChildGuard { child }
    }

    /// Whether it still runs (it is reaped once it has exited).
    pub fn running(&mut self) -> bool {
        self.try_wait().unwrap_or_else(|e| panic!("cannot wait for child {}: {e}", self.id())).is_none()
    }

    /// Sends `signal` unless the child has exited (and been reaped: its pid
    /// may be another process's by now).
    pub fn signal(&mut self, signal: libc::c_int) {
        if self.running() {
            // SAFETY: kill(2) on our own child, which has not been reaped.
            unsafe { libc::kill(self.id() as libc::pid_t, signal) };
        }
    }

    /// SIGTERM: a clean stop (chute exits 143).
    pub fn terminate(&mut self) {
        self.signal(libc::SIGTERM);
    }

    /// SIGINT: what Ctrl-C sends (chute exits 130).
    pub fn interrupt(&mut self) {
        self.signal(libc::SIGINT);
    }

    /// SIGKILL (`kill -9`), then reaps it.
    pub fn kill(&mut self) {
        self.signal(libc::SIGKILL);
        let _ = self.wait();
    }

    /// Waits for it to exit; past `limit` it is killed and the test fails
    /// naming `what`. For a child whose output nobody has to read meanwhile
    /// (see [`exit_within`] for one with pipes).
    pub fn wait_within(&mut self, limit: Duration, what: &str) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.try_wait().unwrap_or_else(|e| panic!("cannot wait for {what}: {e}")) {
                return status;
            }
            if Instant::now() >= deadline {
                self.kill();
                panic!("{what} still ran {limit:?} after it was started or signalled, and was killed");
            }
            std::thread::sleep(POLL);
        }
    }
}

impl Deref for ChildGuard {
    type Target = Child;

    fn deref(&self) -> &Child {
        &self.child
    }
}

impl DerefMut for ChildGuard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

impl From<Child> for ChildGuard {
    fn from(child: Child) -> ChildGuard {
        ChildGuard::new(child)
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: kill(2) on our own child, which has not been reaped.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
            let _ = self.child.wait();
        }
    }
}

/// Reads all of `stream` on a thread of its own; the receiver gets it once
/// the stream closes.
fn read_to_end_aside(mut stream: impl Read + Send + 'static) -> Receiver<Vec<u8>> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = stream.read_to_end(&mut all);
        let _ = tx.send(all);
    });
    rx
}

/// Waits for `child` to exit, reading its piped stdout and stderr meanwhile
/// (a child that fills a pipe nobody reads would never exit); past `limit`
/// it is killed and the test fails, showing what it wrote.
pub fn exit_within(child: impl Into<ChildGuard>, limit: Duration, what: &str) -> Output {
    let mut child = child.into();
    let stdout = child.stdout.take().map(read_to_end_aside);
    let stderr = child.stderr.take().map(read_to_end_aside);
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap_or_else(|e| panic!("cannot wait for {what}: {e}")) {
            break Some(status);
        }
        if Instant::now() >= deadline {
            child.kill();
            break None;
        }
        std::thread::sleep(POLL);
    };
    // A grandchild may hold a pipe open: after a kill, take what came in a moment.
    let wait = if status.is_some() { Duration::MAX } else { Duration::from_secs(2) };
    let collect = |rx: Option<Receiver<Vec<u8>>>| rx.and_then(|rx| rx.recv_timeout(wait).ok()).unwrap_or_default();
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    let Some(status) = status else {
        panic!(
            "{what} still ran {limit:?} after it was started or signalled, and was killed\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    Output { status, stdout, stderr }
}

/// A child's output read line by line on a thread of its own, so that a
/// test can wait for what it says while it runs.
#[derive(Debug)]
pub struct Lines {
    rx: Receiver<String>,
    /// Every line so far, each ending in `\n`.
    seen: String,
}

impl Lines {
    pub fn new(stream: impl Read + Send + 'static) -> Lines {
        let (tx, rx) = channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx, seen: String::new() }
    }

    /// Waits until `done` holds for everything read so far; panics naming
    /// `what`, with what was read, after `limit` or if the stream closes first.
    pub fn wait_until(&mut self, what: &str, limit: Duration, done: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + limit;
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(e) => panic!("{what}: {e:?} after {limit:?}; read so far:\n{}", self.seen),
            }
        }
    }

    /// Everything, once the stream has closed (the child exited).
    pub fn rest(mut self) -> String {
        self.seen.extend(self.rx.iter().flat_map(|l| [l, "\n".to_owned()]));
        self.seen
    }
}
