//! Commit acknowledgements seen from the command line: a load that stops
//! says, input by input, up to which line every row is committed, and
//! `chute load --status` remembers it. The line comes from the chunks'
//! acknowledgements, which fire only once every row of a chunk is committed
//! or rejected, so every row before it must be in the table or the reject
//! file, whatever was in flight when the load stopped.

use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, open_tempdir, run_expect, wait_for};

/// Line `n` of the input: ids are line numbers; every 997th row is bad.
fn row(n: u64) -> String {
    if n.is_multiple_of(997) {
        format!("{n},2024-01-01 00:00:00+00,not-a-number\n")
    } else {
        format!("{n},2024-01-01 00:00:00+00,{}.5\n", n % 100)
    }
}

fn through_line(stderr: &str, input: &str) -> u64 {
    let prefix = format!("chute: {input}: every row before line ");
    let line = stderr.lines().find_map(|l| l.strip_prefix(prefix.as_str())).unwrap_or_else(|| panic!("no committed line in:\n{stderr}"));
    line.split_whitespace().next().unwrap().parse().unwrap()
}

#[tokio::test]
async fn a_stopped_load_says_up_to_which_line_everything_is_committed() {
    let db = shared().fresh_db("acks_stop").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE a (id bigint, time timestamptz, v float8)").await.unwrap();
    let dir = open_tempdir();
    let url = db.url();
    // Stdin that stays open: the load cannot finish, so the stop always
    // lands in the middle, after some batches committed and with rows in flight.
    let mut child = spawn(
        chute()
            .current_dir(dir.path())
            .args(["--url", &url, "load", "a", "-", "--load-id", "acks-1", "--flush-every", "100ms", "--reject-file", "a.rejects"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stdin = child.stdin.take().unwrap();
    let sent = 300_000u64;
    let body: String = (1..=sent).map(row).collect();
    // Half of it: the rest (with bad rows of its own) comes only in the
    // second run, however fast the first commits what it was given.
    let first = sent / 2;
    let first_body: String = (1..=first).map(row).collect();
    stdin.write_all(first_body.as_bytes()).unwrap();
    stdin.flush().unwrap();
    wait_for("the load to commit 100,000 rows", Duration::from_secs(60), || async {
        c.query_one("SELECT count(*) FROM a", &[]).await.unwrap().get::<_, i64>(0) > 100_000
    })
    .await;
    child.interrupt();
    let out = exit_within(child, Duration::from_secs(60), "the load after SIGINT");
    drop(stdin);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    let line = through_line(&stderr, "stdin");
    assert!(line > 100_000 && line <= first + 1, "line {line}\n{stderr}");

    // Every row before that line is in the table, or (the bad ones) in the reject file.
    let bad_before: Vec<u64> = (1..line).filter(|n| n.is_multiple_of(997)).collect();
    let n: i64 = c.query_one("SELECT count(*) FROM a WHERE id < $1", &[&(line as i64)]).await.unwrap().get(0);
    assert_eq!(n as u64, line - 1 - bad_before.len() as u64);
    let rejects = std::fs::read_to_string(dir.path().join("a.rejects")).unwrap();
    for b in &bad_before {
        assert!(rejects.contains(&format!("# stdin:{b}: ")), "line {b} is not in the reject file:\n{rejects}");
    }

    // The journal keeps it: --status says it, and --json gives it to scripts.
    let (status, _) = run_expect(chute().args(["--url", &url, "load", "--status", "acks-1"]), 0);
    assert!(status.contains(&format!("stdin: every row before line {line} is committed")), "{status}");
    let (json, _) = run_expect(chute().args(["--url", &url, "load", "--status", "acks-1", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v[0]["committed_through"][0]["line"], serde_json::json!(line), "{json}");

    // The same stream again, whole: the rest loads, nothing twice.
    let mut child = spawn(
        chute()
            .current_dir(dir.path())
            .args(["--url", &url, "load", "a", "-", "--load-id", "acks-1", "--reject-file", "a.rejects", "--json"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    child.stdin.take().unwrap().write_all(body.as_bytes()).unwrap();
    let out = exit_within(child, Duration::from_secs(120), "the load of the whole stream");
    assert_eq!(out.status.code(), Some(1), "rows were rejected: {}", String::from_utf8_lossy(&out.stderr));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // A load that finished: everything is committed, through the end.
    assert_eq!(report["committed_through"][0]["line"], serde_json::json!(sent + 1), "{report}");
    assert_eq!(report["bytes_committed"], serde_json::json!(body.len()), "{report}");
    let bad = (1..=sent).filter(|n| n.is_multiple_of(997)).count() as i64;
    let r = c.query_one("SELECT count(*), count(DISTINCT id) FROM a", &[]).await.unwrap();
    assert_eq!((r.get::<_, i64>(0), r.get::<_, i64>(1)), (sent as i64 - bad, sent as i64 - bad));
}
