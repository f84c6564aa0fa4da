use std::thread;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

#[test]
fn embedded_server_lifecycle() {
    let tmp = open_tempdir();
    let data = tmp.path().join("pg");
    let data_s = data.to_str().unwrap().to_owned();
    let (out, _) = run_expect(chute().args(["--data-dir", &data_s, "local", "status"]), 0);
    assert!(out.contains("not created yet"), "{out}");

    // Two processes starting the server at once: both succeed, one server.
    let starters: Vec<_> = (0..2)
        .map(|_| {
            let d = data_s.clone();
            thread::spawn(move || run_expect(chute().args(["--data-dir", &d, "local", "start"]), 0))
        })
        .collect();
    for s in starters {
        s.join().unwrap();
    }
    let (out, _) = run_expect(chute().args(["--data-dir", &data_s, "local", "status"]), 0);
    assert!(out.contains("running (pid"), "{out}");

    // With no server named, the demo uses the embedded one and says so.
    let (out, err) = run_expect(chute().args(["--data-dir", &data_s, "demo", "--rows", "2000", "--days", "1"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "2000");
    assert!(err.contains("using the embedded PostgreSQL in"), "{err}");
    assert!(err.contains("running"), "the server started above should be reused: {err}");

    let (url, _) = run_expect(chute().args(["--data-dir", &data_s, "local", "url"]), 0);
    let (out, _) = run_expect(chute().args(["--url", url.trim(), "demo", "--rows", "10", "--days", "1"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "10");

    run_expect(chute().args(["--data-dir", &data_s, "local", "stop"]), 0);
    let (out, _) = run_expect(chute().args(["--data-dir", &data_s, "local", "status", "--json"]), 0);
    assert!(out.contains("\"running\":false"), "{out}");
    assert!(out.contains("\"initialized\":true"), "{out}");
}
