//! Flags are validated settings: a bad duration, interval, zone or size
//! fails, naming the flag, before a server is chosen, started or connected
//! to (here the server named is a socket that notices any connection and
//! answers none, and the embedded server's directory must stay unmade).

use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant};

use chute_testkit::process::{Lines, spawn};

use crate::common::{chute, open_tempdir};

/// A server socket that accepts nothing: a client that connects is seen
/// at once (and would wait for an answer that never comes).
struct Watched {
    dir: tempfile::TempDir,
    listener: UnixListener,
}

impl Watched {
    fn new() -> Watched {
        let dir = open_tempdir();
        let listener = UnixListener::bind(dir.path().join(".s.PGSQL.5432")).unwrap();
        listener.set_nonblocking(true).unwrap();
        Watched { dir, listener }
    }

    fn url(&self) -> String {
        format!("host={} port=5432", self.dir.path().display())
    }

    fn connected(&self) -> bool {
        self.listener.accept().is_ok()
    }
}

/// Runs `chute ARGS` and returns its exit code and stderr; fails as soon as
/// it connects to `server` (a bad flag must be refused before that).
fn refused(server: Option<&Watched>, args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let mut child = spawn(chute().args(args).envs(envs.iter().copied()).stderr(std::process::Stdio::piped()));
    let err = Lines::new(child.stderr.take().unwrap());
    let began = Instant::now();
    let status = loop {
        if server.is_some_and(Watched::connected) {
            child.kill();
            panic!("{args:?} connected to the server:\n{}", err.rest());
        }
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if began.elapsed() > Duration::from_secs(60) {
            child.kill();
            panic!("{args:?} still ran after 60 s:\n{}", err.rest());
        }
        // Polling pace, short: a connection must be seen before the command ends.
        std::thread::sleep(Duration::from_millis(10));
    };
    // A connection made just before the end waits in the backlog.
    assert!(!server.is_some_and(Watched::connected), "{args:?} connected to the server");
    (status.code(), err.rest())
}

#[test]
fn bad_flags_fail_at_once_naming_the_flag_without_connecting() {
    let dir = open_tempdir();
    let tsbs = dir.path().join("t.tsbs");
    std::fs::write(&tsbs, "tags,hostname string\n").unwrap();
    let tsbs = tsbs.to_str().unwrap();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["load", "--format", "tsbs", tsbs, "--interval", "7x"], "--interval"),
        (vec!["load", "--gen", "iot", "--rows", "10", "--interval", "7x"], "--interval"),
        (vec!["load", "t", tsbs, "--retry-for", "5q"], "--retry-for"),
        (vec!["load", "--gen", "iot", "--rows", "10", "--from", "yesterdayish"], "--from"),
        (vec!["partition", "create", "t", "--columns", "a int", "--key", "a", "--interval", "7x"], "--interval"),
        (
            vec!["partition", "create", "t", "--columns", "time timestamptz", "--key", "time", "--interval", "1d", "--tz", "Mars/Olympus"],
            "--tz",
        ),
        (vec!["partition", "maintain", "--every", "7x"], "--every"),
        (vec!["migrate", "t", "--key", "time", "--interval", "7x"], "--interval"),
        (vec!["migrate", "t", "--key", "time", "--interval", "1d", "--tz", "Mars/Olympus"], "--tz"),
        (vec!["migrate", "t", "--key", "time", "--interval", "1d", "--lock-timeout", "2q"], "--lock-timeout"),
    ];
    let server = Watched::new();
    let url = server.url();
    for (args, flag) in cases {
        let mut full = vec!["--url", url.as_str()];
        full.extend(&args);
        let (code, err) = refused(Some(&server), &full, &[]);
        assert_eq!(code, Some(2), "{args:?}:\n{err}");
        assert!(err.contains(flag), "{args:?} names {flag}:\n{err}");
        assert!(!err.contains("could not connect"), "{args:?} tried to connect:\n{err}");
    }
}

#[test]
fn a_bad_flag_starts_no_embedded_server() {
    let dir = open_tempdir();
    let data = dir.path().join("embedded");
    let (code, err) = refused(
        None,
        &["partition", "create", "t", "--columns", "time timestamptz", "--key", "time", "--interval", "7x"],
        &[("CHUTE_DATA_DIR", data.to_str().unwrap())],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--interval"), "{err}");
    assert!(!data.exists(), "no embedded server was set up:\n{err}");
    assert!(!err.contains("embedded"), "{err}");
}
