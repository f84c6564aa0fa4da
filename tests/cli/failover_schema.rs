//! Failover during the commands that change a table's layout (issue 47):
//! `chute migrate` (the swap, then the split's copy) and `chute partition
//! maintain` (premake and retention, a `DETACH … CONCURRENTLY` among it).
//! A primary and its standby (`pg_basebackup -R`), the primary stopped with
//! `-m immediate` while the command runs, the standby promoted. The command,
//! given both hosts with `target_session_attrs=read-write` and
//! `--retry-for`, reconnects to the new primary, reads from it how far it
//! got (the old primary's last commits may be lost) and finishes there:
//! exit 0, every row of the source, the partitions the plan wants. A
//! standby named alone is refused at once.

use std::process::Stdio;
use std::time::Duration;

use chute_core::generate::SplitMix64;
use chute_engine::connect::SessionAttrs;
use chute_testkit::TestDb;
use chute_testkit::process::{Lines, exit_within, spawn};
use chute_testkit::replicated::{PairSetup, ReplicatedPair};

use crate::common::{chute, column, run_expect, wait_for};
use crate::failover::{fingerprint, seed};

const ROWS: i64 = 200_000;

/// A pair, a database on it and `orders` (ROWS rows over the last ten
/// days, primary key (id, time)) on both servers. Returns the table's
/// fingerprint as the standby has it.
async fn orders_on_a_pair(test: &str) -> (ReplicatedPair, TestDb, (i64, i64, i64)) {
    let pair = ReplicatedPair::start(PairSetup::default());
    let db = pair.fresh_db(test).await;
    let primary = db.client().await;
    primary
        .batch_execute(&format!(
            "CREATE TABLE orders (id bigint NOT NULL, time timestamptz NOT NULL, status int NOT NULL DEFAULT 0, note text, PRIMARY KEY (id, time));
             INSERT INTO orders (id, time, status, note)
               SELECT i, now() - i * interval '1 microsecond' * (864000000000 / {ROWS}), i % 7, 'n' || i FROM generate_series(1, {ROWS}) i;
             ANALYZE orders"
        ))
        .await
        .unwrap();
    let want = fingerprint(&primary, "orders").await;
    assert_eq!(want.0, ROWS);
    let standby = pair.standby.options(&db.name).with_session_attrs(SessionAttrs::Any);
    wait_for("the standby to have every row of orders", Duration::from_secs(60), || async {
        let c = standby.connect().await.unwrap();
        c.query_one("SELECT to_regclass('orders') IS NOT NULL", &[]).await.unwrap().get::<_, bool>(0)
            && fingerprint(&c, "orders").await == want
    })
    .await;
    (pair, db, want)
}

/// What the new primary holds of the migration of `orders`: its phase,
/// and whether the old table is still there.
async fn migration(c: &tokio_postgres::Client) -> (String, bool) {
    let r = c
        .query_one(
            "SELECT (SELECT phase FROM chute.migrations WHERE table_name = 'orders'), to_regclass('orders_chute_old') IS NOT NULL",
            &[],
        )
        .await
        .unwrap();
    (r.get(0), r.get(1))
}

/// The swap waits for a reader's lock on `orders` (retrying under
/// `--lock-timeout`) when the primary dies: the same run reconnects to the
/// promoted standby, plans again from what that server holds and finishes
/// the swap there, with every row.
#[tokio::test]
async fn a_failover_mid_swap_is_finished_on_the_new_primary_with_every_row() {
    let (pair, db, want) = orders_on_a_pair("fo_swap").await;
    let mut reader = db.client().await;
    let tx = reader.transaction().await.unwrap();
    tx.batch_execute("LOCK TABLE orders IN ACCESS SHARE MODE").await.unwrap();
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    let mut child = spawn(
        chute()
            .args(["--url", &both, "migrate", "orders", "--key", "time", "--interval", "1d"])
            .args(["--lock-timeout", "200ms", "--retry-for", "60s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let mut stderr = Lines::new(child.stderr.take().expect("piped"));
    stderr.wait_until("the swap to wait for the reader's lock", Duration::from_secs(60), |s| s.contains("lock not granted"));
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    drop(tx);
    let out = exit_within(child, Duration::from_secs(120), "the migrate through the failover");
    let stderr = stderr.rest();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("connection to the server was lost") && stderr.contains("from what the server holds now"), "{stderr}");
    let c = pair.standby.options(&db.name).connect().await.unwrap();
    let kind: String = c.query_one("SELECT relkind::text FROM pg_class WHERE oid = 'orders'::regclass", &[]).await.unwrap().get(0);
    assert_eq!(kind, "p", "orders is partitioned on the new primary\n{stderr}");
    assert_eq!(migration(&c).await, ("swapped".to_owned(), true));
    assert_eq!(fingerprint(&c, "orders").await, want, "count, distinct rows, hash sum of orders on the new primary\n{stderr}");
}

/// The split's copy is cut by a failover at a random point (the seed is
/// printed): the same run reconnects, reads how far the copy got from the
/// new primary (commits the old one acknowledged may be gone with it) and
/// copies the rest: every row once, the old table dropped at the end.
#[tokio::test]
async fn a_failover_mid_split_copies_every_row_once() {
    let mut rng = SplitMix64::new(seed("failover_split"));
    let point = 10_000 + (rng.next_u64() % (ROWS as u64 * 3 / 4)) as i64;
    eprintln!("failover_split: the primary stops once the split moved {point} rows");
    let (pair, db, want) = orders_on_a_pair("fo_split").await;
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    run_expect(chute().args(["--url", &both, "migrate", "orders", "--key", "time", "--interval", "1d"]), 0);
    let primary = db.client().await;
    let mut child = spawn(
        chute()
            .args(["--url", &both, "migrate", "orders", "--split", "--batch-rows", "5000", "--rows-per-s", "25000", "--retry-for", "60s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while moved(&primary).await < point {
        assert!(child.running(), "the split ended before the failover point {point}");
        assert!(std::time::Instant::now() < deadline, "timed out waiting for the split to move {point} rows");
        // The polling pace.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    let out = exit_within(child, Duration::from_secs(120), "the split through the failover");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let c = pair.standby.options(&db.name).connect().await.unwrap();
    assert_eq!(migration(&c).await, ("done".to_owned(), false), "{stderr}");
    assert_eq!(fingerprint(&c, "orders").await, want, "count, distinct rows, hash sum of orders on the new primary\n{stderr}");
    let leaves: Vec<String> = column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'orders'::regclass").await;
    assert!(leaves.len() >= 10, "the rows are in daily partitions: {leaves:?}");
    eprintln!("failover_split: {stderr}");
}

/// Rows the split has moved, as the server `c` is on says (0 before it began).
async fn moved(c: &tokio_postgres::Client) -> i64 {
    c.query_one("SELECT coalesce((SELECT rows_moved FROM chute.migrations WHERE table_name = 'orders'), 0)", &[])
        .await
        .map_or(0, |r| r.get(0))
}

const NOW: &str = "2026-11-10T12:00:00Z";

/// `partition maintain` is finishing a `DETACH … CONCURRENTLY` (a reader
/// holds it pending) when the primary dies: the same run reconnects to the
/// promoted standby, finishes the detach there (FINALIZE), drops what
/// retention wants dropped and makes the partitions ahead. And a standby
/// named alone is refused at once, by maintain and by migrate.
#[tokio::test]
async fn a_failover_mid_maintain_finishes_a_pending_detach_on_the_new_primary() {
    let pair = ReplicatedPair::start(PairSetup::default());
    let db = pair.fresh_db("fo_maintain").await;
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    for args in [&["partition", "maintain", "m"][..], &["migrate", "m", "--key", "time", "--interval", "1d"], &["migrate", "m", "--split"]]
    {
        let child = spawn(
            chute()
                .args(["--url", &pair.standby_conninfo(&db.name)])
                .args(args)
                .args(["--retry-for", "5min"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped()),
        );
        let out = exit_within(child, Duration::from_secs(60), "a command refused by a standby (not retried for --retry-for)");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("is a standby (in recovery)") && stderr.contains("target_session_attrs=read-write"), "{args:?}: {stderr}");
    }
    run_expect(
        chute()
            .args(["--url", &both, "partition", "create", "m", "--columns", "time timestamptz not null, v int", "--key", "time"])
            .args(["--interval", "1d", "--start", "2026-11-01T00:00:00Z", "--retention", "2d", "--now", "2026-11-03T12:00:00Z"]),
        0,
    );
    let c = db.client().await;
    let before: Vec<String> =
        column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'm'::regclass ORDER BY 1").await;
    let standby = pair.standby.options(&db.name).with_session_attrs(SessionAttrs::Any);
    let pending_on_standby = || async {
        let s = standby.connect().await.unwrap();
        s.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get::<_, i64>(0)
    };
    // A reader whose transaction saw the parent: the detach's second phase
    // and its FINALIZE wait for it, retried under --lock-timeout.
    let mut reader = db.client().await;
    let tx = reader.transaction().await.unwrap();
    tx.batch_execute("SELECT count(*) FROM m").await.unwrap();
    let child = spawn(
        chute()
            .args(["--url", &both, "partition", "maintain", "m", "--now", NOW, "--lock-timeout", "200ms", "--retry-for", "60s"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    wait_for("the detach to be pending on the standby too", Duration::from_secs(60), || async { pending_on_standby().await == 1 }).await;
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    drop(tx);
    let out = exit_within(child, Duration::from_secs(120), "maintain through the failover");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let c = pair.standby.options(&db.name).connect().await.unwrap();
    let pending: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get(0);
    assert_eq!(pending, 0, "{stderr}");
    let after: Vec<String> =
        column(&c, "SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = 'm'::regclass ORDER BY 1").await;
    assert!(!after.contains(&before[0]), "the oldest partition went with retention: {after:?}\n{stderr}");
    let gone: bool = c.query_one(&format!("SELECT to_regclass('{}') IS NULL", before[0]), &[]).await.unwrap().get(0);
    assert!(gone, "and was dropped\n{stderr}");
    let url = pair.standby_conninfo(&db.name);
    let (status, _) = run_expect(chute().args(["--url", &url, "partition", "status", "m", "--now", NOW]), 0);
    assert!(status.contains("would run 0 steps"), "the new primary has every partition the plan wants:\n{status}\n{stderr}");
}

/// Commands started while the primary is down and the standby not promoted
/// yet: `partition maintain` and `migrate` say that no server takes writes
/// yet, wait (for up to `--retry-for`) and run on the promoted standby.
#[tokio::test]
async fn commands_started_mid_failover_wait_for_the_new_primary() {
    let pair = ReplicatedPair::start(PairSetup::default());
    let db = pair.fresh_db("fo_started").await;
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    run_expect(
        chute()
            .args(["--url", &both, "partition", "create", "m", "--columns", "time timestamptz not null, v int", "--key", "time"])
            .args(["--interval", "1d", "--premake", "2"]),
        0,
    );
    let primary = db.client().await;
    primary
        .batch_execute(
            "CREATE TABLE small (id bigint NOT NULL, time timestamptz NOT NULL, PRIMARY KEY (id, time));
             INSERT INTO small SELECT i, now() - i * interval '1 minute' FROM generate_series(1, 1000) i",
        )
        .await
        .unwrap();
    let standby = pair.standby.options(&db.name).with_session_attrs(SessionAttrs::Any);
    wait_for("the standby to have both tables", Duration::from_secs(60), || async {
        let c = standby.connect().await.unwrap();
        c.query_one("SELECT to_regclass('m') IS NOT NULL AND (SELECT count(*) FROM small) = 1000", &[]).await.is_ok_and(|r| r.get(0))
    })
    .await;
    pair.stop_primary_immediately();
    let start = |args: &[&str]| {
        let mut child =
            spawn(chute().args(["--url", &both]).args(args).args(["--retry-for", "60s"]).stdout(Stdio::piped()).stderr(Stdio::piped()));
        let stderr = Lines::new(child.stderr.take().expect("piped"));
        (child, stderr)
    };
    let (maintain, mut maintain_err) = start(&["partition", "maintain", "m"]);
    let (migrate, mut migrate_err) = start(&["migrate", "small", "--key", "time", "--interval", "1d"]);
    for (what, lines) in [("maintain", &mut maintain_err), ("migrate", &mut migrate_err)] {
        lines.wait_until(&format!("{what} to wait for a server that takes writes"), Duration::from_secs(60), |s| {
            s.contains("retrying for up to 60s")
        });
    }
    pair.promote_standby().await;
    for (what, child, lines) in [("maintain", maintain, maintain_err), ("migrate", migrate, migrate_err)] {
        let out = exit_within(child, Duration::from_secs(120), what);
        let stderr = lines.rest();
        assert_eq!(out.status.code(), Some(0), "{what}: {stderr}");
    }
    let c = pair.standby.options(&db.name).connect().await.unwrap();
    let r = c
        .query_one("SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'small'::regclass), (SELECT count(*) FROM small)", &[])
        .await
        .unwrap();
    assert_eq!((r.get::<_, String>(0), r.get::<_, i64>(1)), ("p".to_owned(), 1000));
}
