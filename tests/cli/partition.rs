use std::process::Stdio;
use std::time::Duration;

use chute_testkit::process::{Lines, exit_within, spawn};
use chute_testkit::shared;

use crate::common::{chute, create_time_partitioned, run_expect};

const COLS: &str = "time timestamptz not null, dev_id int, value float8";

#[tokio::test]
async fn create_list_status_maintain_undo() {
    let db = shared().fresh_db("cli_partition").await;
    let url = db.url();
    let c = db.client().await;

    let (plan, _) = run_expect(
        chute().args(["--url", &url, "partition", "create", "m", "--columns", COLS, "--key", "time", "--interval", "1h", "--dry-run"]),
        0,
    );
    assert!(plan.starts_with("-- plan for public.m (dry run: nothing was changed)"), "{plan}");
    assert!(plan.contains("ATTACH PARTITION") && plan.contains("CREATE TABLE \"public\".\"m\""), "{plan}");
    let exists: bool = c.query_one("SELECT to_regclass('m') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(!exists);

    let (_, err) = run_expect(
        chute().args(["--url", &url, "partition", "create", "m", "--columns", COLS, "--key", "time", "--interval", "1h", "--premake", "2"]),
        0,
    );
    assert!(err.contains("3 partitions created"), "{err}");

    let (list, _) = run_expect(chute().args(["--url", &url, "partition", "list"]), 0);
    assert!(list.lines().any(|l| l.starts_with("public.m ") && l.contains(" 1h ")), "{list}");

    let (status, _) = run_expect(chute().args(["--url", &url, "partition", "status", "m", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(v[0]["partitions"].as_array().unwrap().len(), 3);
    assert_eq!(v[0]["intervals_ahead"], 2);
    assert_eq!(v[0]["maintain_would_run"], 0);
    let (text, _) = run_expect(chute().args(["--url", &url, "partition", "status"]), 0);
    assert!(text.contains("coverage     until"), "{text}");

    let (out, _) = run_expect(chute().args(["--url", &url, "partition", "maintain", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(v["steps"].as_array().unwrap().len(), 0, "maintain right after create has nothing to do: {out}");
    let (out, _) = run_expect(chute().args(["--url", &url, "partition", "maintain", "--dry-run", "--now", "2099-01-01T00:00:00Z"]), 0);
    assert!(out.contains("m_p20990101_0000"), "{out}");

    c.batch_execute("INSERT INTO m VALUES (now(), 1, 1)").await.unwrap();
    let (out, _) = run_expect(chute().args(["--url", &url, "partition", "undo", "m", "--dry-run"]), 0);
    assert!(out.contains("INSERT INTO \"public\".\"m_chute_undo\" SELECT * FROM \"public\".\"m\""), "{out}");
    run_expect(chute().args(["--url", &url, "partition", "undo", "m"]), 0);
    let row =
        c.query_one("SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'm'::regclass), (SELECT count(*) FROM m)", &[]).await.unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(1)), ("r".into(), 1));
}

#[tokio::test]
async fn bad_requests_get_one_clear_error() {
    let db = shared().fresh_db("cli_partition_err").await;
    let url = db.url();
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "create", "nope", "--key", "time", "--interval", "1h"]), 2);
    assert!(err.contains("does not exist: define it with --columns"), "{err}");
    let (_, err) =
        run_expect(chute().args(["--url", &url, "partition", "create", "x", "--columns", COLS, "--key", "time", "--interval", "1m"]), 2);
    assert!(err.contains("15min, 1h, 1d"), "{err}");
    let (_, err) =
        run_expect(chute().args(["--url", &url, "partition", "create", "x", "--columns", COLS, "--key", "dev_id", "--interval", "1h"]), 2);
    assert!(err.contains("needs a plain number interval"), "{err}");
    let (_, err) = run_expect(chute().args(["--url", &url, "partition", "maintain", "x"]), 2);
    assert!(err.contains("does not exist"), "{err}");
}

#[tokio::test]
async fn maintain_every_runs_until_sigterm_and_exits_143() {
    let db = shared().fresh_db("cli_every").await;
    let url = db.url();
    create_time_partitioned(&url, "e", COLS, "1d", &[]);
    let mut child =
        spawn(chute().args(["--url", &url, "partition", "maintain", "--every", "1s"]).stderr(Stdio::piped()).stdout(Stdio::null()));
    let mut err = Lines::new(child.stderr.take().unwrap());
    err.wait_until("a second pass", Duration::from_secs(60), |seen| seen.matches("maintained public.e").count() >= 2);
    child.terminate();
    let out = exit_within(child, Duration::from_secs(30), "maintain --every");
    let err = err.rest();
    assert_eq!(out.status.code(), Some(143), "{err}");
}
