//! Flags are validated settings: a bad duration, interval, zone or size
//! fails at once, naming the flag, before a server is chosen, started or
//! connected to (here the server named does not exist and retrying it would
//! take minutes).

use std::time::{Duration, Instant};

use crate::common::{chute, open_tempdir};

const NOWHERE: &str = "host=/nonexistent/socket port=1";

/// Runs `chute ARGS` and returns its exit code and stderr, failing if it took 2 s or more.
fn quick(args: &[&str], envs: &[(&str, &str)]) -> (Option<i32>, String) {
    let began = Instant::now();
    let out = chute().args(args).envs(envs.iter().copied()).output().unwrap();
    let took = began.elapsed();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(took < Duration::from_secs(2), "{args:?} took {took:?}: it must not try to connect\n{err}");
    (out.status.code(), err)
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
    for (args, flag) in cases {
        let mut full = vec!["--url", NOWHERE];
        full.extend(&args);
        let (code, err) = quick(&full, &[]);
        assert_eq!(code, Some(2), "{args:?}:\n{err}");
        assert!(err.contains(flag), "{args:?} names {flag}:\n{err}");
        assert!(!err.contains("could not connect"), "{args:?} tried to connect:\n{err}");
    }
}

#[test]
fn a_bad_flag_starts_no_embedded_server() {
    let dir = open_tempdir();
    let data = dir.path().join("embedded");
    let (code, err) = quick(
        &["partition", "create", "t", "--columns", "time timestamptz", "--key", "time", "--interval", "7x"],
        &[("CHUTE_DATA_DIR", data.to_str().unwrap())],
    );
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--interval"), "{err}");
    assert!(!data.exists(), "no embedded server was set up:\n{err}");
    assert!(!err.contains("embedded"), "{err}");
}
