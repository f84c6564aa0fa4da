//! Failover during `chute load` (issue 47): a primary and its standby
//! (`pg_basebackup -R`), the primary stopped with `-m immediate` at a random
//! point of the load (the seed is printed; set CHUTE_TEST_SEED to replay
//! it), the standby promoted. The load must end with exit 0 and the new
//! primary must hold exactly the rows of a load without a failover: commits
//! the old primary acknowledged and never streamed are loaded again, once.
//! And which host a connection takes, for each `target_session_attrs`.

use std::process::Stdio;
use std::time::Duration;

use chute_core::generate::SplitMix64;
use chute_engine::ConnectOptions;
use chute_engine::connect::SessionAttrs;
use chute_testkit::process::{exit_within, spawn};
use chute_testkit::replicated::{PairSetup, ReplicatedPair};

use crate::common::{chute, create_time_partitioned, run_expect, summary_value, wait_for};

const COLS: &str = "time timestamptz not null, dev_id int not null, data1 float8, data2 float8, data3 float8, data4 float8, data5 float8";
const ROWS: u64 = 500_000;

/// The seed of this run's failover points: CHUTE_TEST_SEED, else the clock.
pub(crate) fn seed(test: &str) -> u64 {
    let seed = std::env::var("CHUTE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(1, |d| d.as_nanos() as u64 % 1_000_000_007)
    });
    eprintln!("{test}: failover seed {seed} (replay with CHUTE_TEST_SEED={seed})");
    seed
}

/// Count, distinct rows and a hash sum of a table's rows.
pub(crate) async fn fingerprint(c: &tokio_postgres::Client, table: &str) -> (i64, i64, i64) {
    let r = c
        .query_one(&format!("SELECT count(*), count(DISTINCT t), coalesce(sum(hashtext(t::text)::int8), 0)::int8 FROM {table} t"), &[])
        .await
        .unwrap();
    (r.get(0), r.get(1), r.get(2))
}

/// Rows the journal of the server `c` is on holds (0 before it exists).
pub(crate) async fn journaled(c: &tokio_postgres::Client) -> i64 {
    c.query_one("SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal", &[]).await.map_or(0, |r| r.get(0))
}

/// Loads ROWS generated rows into an hourly partitioned table through both
/// hosts, fails over when the primary's journal holds a random share of
/// them, and checks the new primary holds exactly the rows of a load
/// without a failover. Returns the load's stderr.
async fn load_through_a_failover(test: &str, setup: PairSetup, backfill: &str, extra: &[&str]) -> String {
    load_through(test, setup, (backfill, false), extra).await
}

/// [`load_through_a_failover`]; with `cut`, the standby stops receiving
/// WAL before the load starts, so the new primary lacks everything the run
/// did, its claim of the load included.
async fn load_through(test: &str, setup: PairSetup, (backfill, cut): (&str, bool), extra: &[&str]) -> String {
    let mut rng = SplitMix64::new(seed(test));
    let point = 20_000 + (rng.next_u64() % (ROWS * 3 / 4)) as i64;
    eprintln!("{test}: the primary stops once its journal holds {point} rows");
    let pair = ReplicatedPair::start(setup);
    let db = pair.fresh_db(test).await;
    let primary = db.client().await;
    create_time_partitioned(&db.url(), "fo", COLS, "1h", &["--premake", "1"]);
    primary.batch_execute("ALTER TABLE fo ADD PRIMARY KEY (dev_id, time)").await.unwrap();
    let standby = pair.standby.options(&db.name);
    let in_recovery = standby.with_session_attrs(SessionAttrs::Any);
    if cut {
        // chute's schema exists (an earlier load) and is on the standby.
        primary.batch_execute(&format!("CREATE TABLE fo_warm ({COLS})")).await.unwrap();
        run_expect(chute().args(["--url", &db.url(), "load", "fo_warm", "--gen", "conditions", "--rows", "10"]), 0);
    }
    let wanted =
        if cut { "to_regclass('fo') IS NOT NULL AND to_regclass('chute.loads') IS NOT NULL" } else { "to_regclass('fo') IS NOT NULL" };
    wait_for("the standby to have the table", Duration::from_secs(30), || async {
        let c = in_recovery.connect().await.unwrap();
        c.query_one(&format!("SELECT {wanted}"), &[]).await.unwrap().get::<_, bool>(0)
    })
    .await;
    if cut {
        pair.cut_streaming().await;
    }
    let both = pair.conninfo(&db.name, "target_session_attrs=read-write");
    let mut child = spawn(
        chute()
            .args(["--url", &both, "load", "fo", "--gen", "conditions", "--devices", "100", "--rows", &ROWS.to_string()])
            .args(["--batch-mb", "1", "--backfill", backfill, "--retry-for", "60s"])
            .args(extra)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while journaled(&primary).await < point {
        assert!(child.running(), "the load ended before the failover point {point}");
        assert!(std::time::Instant::now() < deadline, "timed out waiting for the primary's journal to reach {point} rows");
        // The polling pace.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pair.stop_primary_immediately();
    pair.promote_standby().await;
    let out = exit_within(child, Duration::from_secs(120), "the load through the failover");
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout).into_owned(), String::from_utf8_lossy(&out.stderr).into_owned());
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert_eq!(summary_value(&stdout, "rows loaded"), ROWS.to_string(), "{stdout}\n{stderr}");
    // What a load without a failover gives: the same rows into a plain table.
    let new_primary = standby.connect().await.unwrap();
    new_primary.batch_execute(&format!("CREATE TABLE fo_ref ({COLS})")).await.unwrap();
    let url = pair.standby_conninfo(&db.name);
    run_expect(chute().args(["--url", &url, "load", "fo_ref", "--gen", "conditions", "--devices", "100", "--rows", &ROWS.to_string()]), 0);
    let (want, got) = (fingerprint(&new_primary, "fo_ref").await, fingerprint(&new_primary, "fo").await);
    assert_eq!(want.0, ROWS as i64);
    assert_eq!(got, want, "count, distinct rows, hash sum on the new primary after the failover\n{stdout}\n{stderr}");
    eprintln!("{test}: {stderr}");
    stderr
}

#[tokio::test]
async fn a_failover_mid_load_with_backfill_loses_nothing_and_doubles_nothing() {
    load_through_a_failover("failover_backfill", PairSetup::default(), "auto", &[]).await;
}

#[tokio::test]
async fn a_failover_mid_upsert_loses_nothing_and_doubles_nothing() {
    load_through_a_failover("failover_upsert", PairSetup::default(), "off", &["--on-conflict", "update"]).await;
}

#[tokio::test]
async fn a_failover_mid_load_without_backfill_loses_nothing_and_doubles_nothing() {
    load_through_a_failover("failover_plain", PairSetup::default(), "off", &[]).await;
}

#[tokio::test]
async fn a_failover_that_lost_the_runs_claim_of_the_load_claims_it_again_and_loads_everything_once() {
    let stderr = load_through("failover_claim_lost", PairSetup::default(), ("off", true), &[]).await;
    assert!(stderr.contains("had lost this run's claim of load"), "{stderr}");
    assert!(stderr.contains("loading them again"), "{stderr}");
}

#[tokio::test]
async fn with_synchronous_replication_no_second_pass_is_needed() {
    let stderr = load_through_a_failover("failover_sync", PairSetup { synchronous: true }, "auto", &[]).await;
    assert!(!stderr.contains("loading them again"), "{stderr}");
}

#[tokio::test]
async fn hosts_are_chosen_by_target_session_attrs_and_a_standby_alone_is_refused() {
    let pair = ReplicatedPair::start(PairSetup::default());
    let db = pair.fresh_db("fo_attrs").await;
    let (p, s) = (pair.primary.port() as i32, pair.standby.port() as i32);
    const NO_ENV: [(&str, &str); 1] = [("CHUTE_TEST_NOTHING", "")];
    let port_of = |conninfo: String, env: [(&'static str, &'static str); 1]| async move {
        let o = ConnectOptions::resolve(Some(&conninfo), &env).unwrap();
        let c = o.connect().await.unwrap_or_else(|e| panic!("{conninfo}: {e}"));
        c.query_one("SELECT current_setting('port')::int", &[]).await.unwrap().get::<_, i32>(0)
    };
    for (attrs, want) in [
        ("", p),
        ("target_session_attrs=any", p),
        ("target_session_attrs=read-write", p),
        ("target_session_attrs=primary", p),
        ("target_session_attrs=read-only", s),
        ("target_session_attrs=standby", s),
        ("target_session_attrs=prefer-standby", s),
    ] {
        assert_eq!(port_of(pair.conninfo(&db.name, attrs), NO_ENV).await, want, "{attrs}");
    }
    // The standby listed first: `any` takes it, a writer does not.
    let reversed = |attrs: &str| {
        format!(
            "host={},{} port={s},{p} user=postgres dbname={} {attrs}",
            pair.standby.socket_dir().display(),
            pair.primary.socket_dir().display(),
            db.name
        )
    };
    assert_eq!(port_of(reversed("target_session_attrs=any"), NO_ENV).await, s);
    assert_eq!(port_of(reversed(""), NO_ENV).await, p);
    assert_eq!(port_of(reversed("target_session_attrs=read-write"), NO_ENV).await, p);
    // The variables, as libpq reads them.
    assert_eq!(port_of(pair.conninfo(&db.name, ""), [("PGTARGETSESSIONATTRS", "standby")]).await, s);
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..30 {
        seen.insert(port_of(pair.conninfo(&db.name, "target_session_attrs=any"), [("PGLOADBALANCEHOSTS", "random")]).await);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), [p, s], "load_balance_hosts=random takes either host");
    // A standby named alone: a clear error at once, not retries for --retry-for.
    let child = spawn(
        chute()
            .args(["--url", &pair.standby_conninfo(&db.name), "load", "t", "--gen", "conditions", "--rows", "10", "--retry-for", "5min"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped()),
    );
    let out = exit_within(child, Duration::from_secs(60), "the load refused by a standby (not retried for --retry-for)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("is a standby (in recovery)") && stderr.contains("target_session_attrs=read-write"), "{stderr}");
}
