//! The partition manager against a real server: every acceptance item of the
//! partition-manager issue, with the clock passed in.

use std::time::{Duration, Instant};

use chute_core::ident::QualifiedName;
use chute_core::partman::interval::Span;
use chute_core::partman::planner::{self, RowRefusal};
use chute_core::partman::{HashSub, KeyType, Policy, Retention, RetentionMode, StepKind};
use chute_engine::exec::{ExecSettings, quiet};
use chute_engine::partman::{CreateRequest, PartitionManager};
use chute_testkit::{TestDb, shared};
use tokio_postgres::Client;

const COLUMNS: &str = "time timestamptz not null, dev_id int not null, value float8";

fn us(s: &str) -> i64 {
    s.parse::<jiff::Timestamp>().unwrap().as_microsecond()
}

fn now() -> i64 {
    jiff::Timestamp::now().as_microsecond()
}

fn policy(table: &str, interval: &str) -> Policy {
    Policy {
        max_future: Some(Span::parse("1d").unwrap()),
        ..Policy::new(QualifiedName::new("public", table), "time", KeyType::Timestamptz, Span::parse(interval).unwrap())
    }
}

fn fast() -> ExecSettings {
    ExecSettings { lock_timeout: Duration::from_millis(300), retry_for: Duration::from_secs(60) }
}

async fn mgr(db: &TestDb) -> PartitionManager {
    PartitionManager::connect(&db.options, fast()).await.unwrap()
}

async fn create(db: &TestDb, p: Policy, at: i64) -> chute_core::partman::Plan {
    let req = CreateRequest { policy: p, like: None, columns: Some(COLUMNS.into()), start: None };
    mgr(db).await.create(req, at, false, &mut quiet).await.unwrap().1
}

/// (name, from, to) of the direct partitions, in bound order, bounds as UTC text.
async fn partitions(c: &Client, parent: &str) -> Vec<(String, String, String)> {
    c.batch_execute("SET TimeZone = 'UTC'").await.unwrap();
    let rows = c
        .query(
            "SELECT c.relname::text, m[1], m[2] FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
                    LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''(.*)''\\) TO \\(''(.*)''\\)') m
             WHERE i.inhparent = $1::text::regclass ORDER BY m[1]",
            &[&parent],
        )
        .await
        .unwrap();
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

fn assert_contiguous(parts: &[(String, String, String)]) {
    for w in parts.windows(2) {
        assert_eq!(w[0].2, w[1].1, "gap or overlap between {} and {}", w[0].0, w[1].0);
    }
}

#[tokio::test]
async fn hourly_daily_and_monthly_policies_premake_ahead_of_now() {
    let db = shared().fresh_db("premake").await;
    let c = db.client().await;
    let at = us("2026-11-22T10:30:00Z");
    for (table, interval) in [("hourly", "1h"), ("daily", "1d"), ("monthly", "1mon")] {
        create(&db, policy(table, interval), at).await;
        let parts = partitions(&c, table).await;
        assert_eq!(parts.len(), 5, "{table}: {parts:?}");
        assert_contiguous(&parts);
    }
    assert_eq!(
        partitions(&c, "hourly").await[0],
        ("hourly_p20261122_1000".into(), "2026-11-22 10:00:00+00".into(), "2026-11-22 11:00:00+00".into())
    );
    assert_eq!(partitions(&c, "daily").await[4].2, "2026-11-27 00:00:00+00");
    assert_eq!(
        partitions(&c, "monthly").await.last().unwrap(),
        &("monthly_p202703".into(), "2027-03-01 00:00:00+00".into(), "2027-04-01 00:00:00+00".into())
    );
    // Rows at now and at the edge of premake land in those partitions.
    c.batch_execute("INSERT INTO hourly VALUES ('2026-11-22 10:30:00+00', 1, 1), ('2026-11-22 14:59:59+00', 1, 1)").await.unwrap();
    // The policy is stored and a later maintain at a later clock keeps premake.
    let mut m = mgr(&db).await;
    let plan = m.maintain(&QualifiedName::new("public", "hourly"), us("2026-11-22T13:10:00Z"), false, &mut quiet).await.unwrap();
    // The row at 14:59:59 is ahead of the clock, so premake counts from its interval.
    assert_eq!(plan.created().count(), 4);
    assert_eq!(partitions(&c, "hourly").await.last().unwrap().2, "2026-11-22 19:00:00+00");
}

#[tokio::test]
async fn berlin_days_have_no_gap_or_overlap_across_both_dst_changes() {
    let db = shared().fresh_db("dst").await;
    let c = db.client().await;
    for (table, start, at) in [("spring", "2026-03-26", "2026-03-31T12:00:00Z"), ("autumn", "2026-10-22", "2026-10-27T12:00:00Z")] {
        let mut p = policy(table, "1d");
        p.tz = "Europe/Berlin".into();
        p.premake = 1;
        let req = CreateRequest { policy: p, like: None, columns: Some(COLUMNS.into()), start: Some(start.into()) };
        mgr(&db).await.create(req, us(at), false, &mut quiet).await.unwrap();
        let parts = partitions(&c, table).await;
        assert_eq!(parts.len(), 7, "{parts:?}");
        assert_contiguous(&parts);
        // Every boundary is a local midnight in Berlin.
        let bad: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
                       LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''(.*)''\\) TO \\(''(.*)''\\)') m
                     WHERE i.inhparent = '{table}'::regclass
                       AND ((m[1]::timestamptz AT TIME ZONE 'Europe/Berlin')::time <> '00:00' OR (m[2]::timestamptz AT TIME ZONE 'Europe/Berlin')::time <> '00:00')"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(bad, 0, "{parts:?}");
        // One row every 10 minutes across the change: each lands in the partition of its local day.
        c.batch_execute(&format!(
            "INSERT INTO {table} SELECT t, 1, 0 FROM generate_series('{start}'::timestamptz AT TIME ZONE 'UTC' + interval '1 day', '{start}'::timestamptz + interval '5 days', interval '10 min') t"
        ))
        .await
        .unwrap();
        let misplaced: i64 = c
            .query_one(
                &format!(
                    "SELECT count(*) FROM {table} WHERE tableoid::regclass::text <> (SELECT c.relname FROM pg_class c JOIN pg_inherits i ON i.inhrelid = c.oid
                       WHERE i.inhparent = '{table}'::regclass AND c.relname = '{table}_p' || to_char((date_trunc('day', time AT TIME ZONE 'Europe/Berlin') AT TIME ZONE 'Europe/Berlin') AT TIME ZONE 'UTC', 'YYYYMMDD_HH24MI'))"
                ),
                &[],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(misplaced, 0);
    }
    let hours: Vec<i64> = c
        .query(
            "SELECT extract(epoch FROM m[2]::timestamptz - m[1]::timestamptz)::int8 / 3600 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid,
               LATERAL regexp_match(pg_get_expr(c.relpartbound, c.oid), 'FROM \\(''(.*)''\\) TO \\(''(.*)''\\)') m
             WHERE i.inhparent IN ('spring'::regclass, 'autumn'::regclass) ORDER BY m[1]",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert!(hours.contains(&23) && hours.contains(&25), "{hours:?}");
}

#[tokio::test]
async fn range_plus_hash_layout_routes_rows_to_hash_leaves() {
    let db = shared().fresh_db("rangehash").await;
    let c = db.client().await;
    let mut p = policy("rh", "1d");
    p.hash = Some(HashSub { column: "dev_id".into(), modulus: 4 });
    p.premake = 1;
    create(&db, p, now()).await;
    let leaves: i64 = c.query_one("SELECT count(*) FROM pg_partition_tree('rh') WHERE isleaf", &[]).await.unwrap().get(0);
    assert_eq!(leaves, 8);
    c.batch_execute("INSERT INTO rh SELECT now(), i, 0 FROM generate_series(1, 400) i").await.unwrap();
    let used: i64 = c.query_one("SELECT count(DISTINCT tableoid) FROM rh", &[]).await.unwrap().get(0);
    assert_eq!(used, 4, "rows spread over the 4 hash leaves of today's partition");
}

#[tokio::test]
async fn integer_keys_premake_after_the_newest_row() {
    let db = shared().fresh_db("intkeys").await;
    let c = db.client().await;
    let mut p = policy("ledger", "1d");
    p.key = "id".into();
    p.interval = Span::Integer(100_000);
    p.max_future = None;
    p.premake = 2;
    let req = CreateRequest { policy: p, like: None, columns: Some("id bigint not null, amount numeric".into()), start: None };
    mgr(&db).await.create(req, now(), false, &mut quiet).await.unwrap();
    let parts = partitions(&c, "ledger").await;
    let bounds: Vec<(&str, &str)> = parts.iter().map(|(_, f, t)| (f.as_str(), t.as_str())).collect();
    assert_eq!(bounds, [("0", "100000"), ("100000", "200000"), ("200000", "300000")]);
    c.batch_execute("INSERT INTO ledger VALUES (250000, 1)").await.unwrap();
    let plan = mgr(&db).await.maintain(&QualifiedName::new("public", "ledger"), now(), false, &mut quiet).await.unwrap();
    let created: Vec<String> = plan.created().map(|n| n.name.clone()).collect();
    assert_eq!(created, ["ledger_p300000", "ledger_p400000"]);
}

#[tokio::test]
async fn retention_drops_or_detaches_old_partitions() {
    let db = shared().fresh_db("retention").await;
    let c = db.client().await;
    let t0 = us("2026-11-22T00:30:00Z");
    let later = t0 + 10 * 3_600_000_000;
    let mut drop = policy("rdrop", "1h");
    drop.retention = Some(Retention { keep: Span::parse("3h").unwrap(), mode: RetentionMode::Drop, schema: None });
    create(&db, drop, t0).await;
    let mut detach = policy("rdetach", "1h");
    detach.retention = Some(Retention { keep: Span::parse("3h").unwrap(), mode: RetentionMode::Detach, schema: Some("archive".into()) });
    create(&db, detach, t0).await;
    c.batch_execute("INSERT INTO rdetach VALUES ('2026-11-22 00:45:00+00', 1, 42)").await.unwrap();
    let mut m = mgr(&db).await;
    for t in ["rdrop", "rdetach"] {
        let plan = m.maintain(&QualifiedName::new("public", t), later, false, &mut quiet).await.unwrap();
        assert!(plan.steps.iter().any(|s| matches!(s.kind, StepKind::DetachConcurrently { .. })), "{plan}");
        // Everything ending at or before 07:30 (10:30 minus 3h) is gone; 10:00 on was premade.
        let parts = partitions(&c, t).await;
        assert_eq!(parts[0].1, "2026-11-22 10:00:00+00", "{t}: {parts:?}");
    }
    let dropped: i64 = c.query_one("SELECT count(*) FROM pg_class WHERE relname LIKE 'rdrop_p%'", &[]).await.unwrap().get(0);
    assert_eq!(dropped as usize, partitions(&c, "rdrop").await.len(), "detached partitions were dropped");
    let kept: i64 = c.query_one("SELECT value::int8 FROM archive.rdetach_p20261122_0000", &[]).await.unwrap().get(0);
    assert_eq!(kept, 42, "the detached partition keeps its rows in the archive schema");
    // Rows older than retention are refused, newer ones accepted.
    let (_, pol) = m.policy(&QualifiedName::new("public", "rdrop")).await.unwrap();
    let limits = planner::key_limits(&pol, None, later).unwrap();
    assert!(matches!(planner::check_key(&pol, &limits, t0), Err(RowRefusal::PastRetention { .. })));
    assert!(planner::check_key(&pol, &limits, later).is_ok());
}

#[tokio::test]
async fn a_detach_interrupted_between_its_phases_is_finished_by_the_next_run() {
    let db = shared().fresh_db("pending").await;
    let c = db.client().await;
    let t0 = us("2026-11-22T00:30:00Z");
    let mut p = policy("pend", "1h");
    p.retention = Some(Retention { keep: Span::parse("3h").unwrap(), mode: RetentionMode::Drop, schema: None });
    create(&db, p, t0).await;
    // A reader keeps a snapshot open, so the detach waits in its second phase.
    let reader = db.client().await;
    reader.batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM pend").await.unwrap();
    let detacher = db.client().await;
    let pid: i32 = detacher.query_one("SELECT pg_backend_pid()", &[]).await.unwrap().get(0);
    let detach =
        tokio::spawn(async move { detacher.batch_execute("ALTER TABLE pend DETACH PARTITION pend_p20261122_0000 CONCURRENTLY").await });
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let pending: bool = c
            .query_one(
                "SELECT coalesce(bool_or(inhdetachpending), false) FROM pg_inherits WHERE inhrelid = 'pend_p20261122_0000'::regclass",
                &[],
            )
            .await
            .unwrap()
            .get(0);
        if pending {
            break;
        }
        assert!(Instant::now() < deadline, "the detach never reached its second phase");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    c.execute("SELECT pg_cancel_backend($1)", &[&pid]).await.unwrap();
    assert!(detach.await.unwrap().is_err(), "the detach was cancelled");
    reader.batch_execute("COMMIT").await.unwrap();
    let pending: bool =
        c.query_one("SELECT inhdetachpending FROM pg_inherits WHERE inhrelid = 'pend_p20261122_0000'::regclass", &[]).await.unwrap().get(0);
    assert!(pending, "left half-detached");

    let plan = mgr(&db).await.maintain(&QualifiedName::new("public", "pend"), t0 + 10 * 3_600_000_000, false, &mut quiet).await.unwrap();
    assert_eq!(plan.steps[0].kind, StepKind::FinalizeDetach { name: QualifiedName::new("public", "pend_p20261122_0000") }, "{plan}");
    let left: i64 = c.query_one("SELECT count(*) FROM pg_inherits WHERE inhdetachpending", &[]).await.unwrap().get(0);
    assert_eq!(left, 0);
    let exists: bool = c.query_one("SELECT to_regclass('pend_p20261122_0000') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(!exists, "finished and dropped (past retention)");
}

#[tokio::test]
async fn maintain_is_idempotent_and_concurrent_runs_do_not_conflict() {
    let db = shared().fresh_db("concurrent").await;
    let t0 = us("2026-11-22T00:30:00Z");
    let mut p = policy("conc", "15min");
    p.premake = 8;
    create(&db, p, t0).await;
    let later = t0 + 6 * 3_600_000_000;
    let table = QualifiedName::new("public", "conc");
    let (mut a, mut b) = (mgr(&db).await, mgr(&db).await);
    let (mut qa, mut qb) = (quiet, quiet);
    let (ra, rb) = tokio::join!(a.maintain(&table, later, false, &mut qa), b.maintain(&table, later, false, &mut qb));
    let (pa, pb) = (ra.unwrap(), rb.unwrap());
    // Partitions need not be contiguous: from the interval holding 06:30 on, 1 + premake.
    assert_eq!(pa.created().count() + pb.created().count(), 9, "each interval created once: {pa}\n{pb}");
    assert!(pa.is_empty() || pb.is_empty(), "the second maintainer found nothing left to do");
    let again = a.maintain(&table, later, false, &mut quiet).await.unwrap();
    assert!(again.is_empty(), "{again}");
    let parts = partitions(&db.client().await, "conc").await;
    assert_eq!(parts.len(), 18);
    assert_contiguous(&parts[9..]);
}

#[tokio::test]
async fn just_in_time_creation_from_four_workers_creates_each_partition_once() {
    let db = shared().fresh_db("jit").await;
    let at = now();
    create(&db, policy("jit", "1h"), at).await;
    let c = db.client().await;
    let table = QualifiedName::new("public", "jit");
    let (info, pol) = mgr(&db).await.policy(&table).await.unwrap();
    let base = us("2021-06-08T00:00:00Z");
    let starts: Vec<i64> = (0..12).map(|h| base + h * 3_600_000_000).collect();
    let mut tasks = Vec::new();
    for w in 0..4 {
        let (db, info, pol) = (db.clone(), info.clone(), pol.clone());
        let mut mine = starts.clone();
        mine.rotate_left(w * 3);
        tasks.push(tokio::spawn(async move { mgr(&db).await.ensure(&info, &pol, &mine, at).await.unwrap() }));
    }
    let mut created = Vec::new();
    for t in tasks {
        created.extend(t.await.unwrap());
    }
    assert_eq!(created.len(), 12, "{created:?}");
    created.sort();
    created.dedup();
    assert_eq!(created.len(), 12);
    let n: i64 = c.query_one("SELECT count(*) FROM pg_class WHERE relname LIKE 'jit_p2021%'", &[]).await.unwrap().get(0);
    assert_eq!(n, 12);
}

#[tokio::test]
async fn a_2021_row_gets_one_partition_and_a_row_a_year_ahead_is_refused() {
    let db = shared().fresh_db("backfill").await;
    let at = now();
    create(&db, policy("bf", "1d"), at).await;
    let mut m = mgr(&db).await;
    let (info, pol) = m.policy(&QualifiedName::new("public", "bf")).await.unwrap();
    let old = us("2021-03-04T05:06:07Z");
    let limits = planner::key_limits(&pol, None, at).unwrap();
    assert!(planner::check_key(&pol, &limits, old).is_ok());
    let created = m.ensure(&info, &pol, &[old], at).await.unwrap();
    assert_eq!(created, [QualifiedName::new("public", "bf_p20210304")]);
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM pg_class WHERE relname LIKE 'bf_p2021%'", &[]).await.unwrap().get(0);
    assert_eq!(n, 1, "only the 2021 interval its row falls in");
    c.batch_execute("INSERT INTO bf VALUES ('2021-03-04 05:06:07+00', 1, 1)").await.unwrap();
    let year_ahead = at + 365 * 86_400_000_000;
    assert!(matches!(planner::check_key(&pol, &limits, year_ahead), Err(RowRefusal::TooFarAhead { .. })));
}

#[tokio::test]
async fn ddl_needing_access_exclusive_never_blocks_writers_longer_than_the_lock_timeout() {
    let db = shared().fresh_db("locks").await;
    let c = db.client().await;
    let t0 = now();
    let hour = 3_600_000_000;
    let mut p = policy("busy", "1h");
    p.default_partition = true;
    p.retention = Some(Retention { keep: Span::parse("2h").unwrap(), mode: RetentionMode::Drop, schema: None });
    p.premake = 8;
    create(&db, p, t0).await;
    // A long reader holds ACCESS SHARE on the parent and every partition.
    let reader = db.client().await;
    reader.batch_execute("BEGIN; SELECT count(*) FROM busy").await.unwrap();
    // Maintenance three hours on: the oldest partitions are past retention,
    // and with a DEFAULT partition they need a plain DETACH (ACCESS EXCLUSIVE).
    let maint_db = db.clone();
    let maintenance = tokio::spawn(async move {
        let began = Instant::now();
        let plan = mgr(&maint_db).await.maintain(&QualifiedName::new("public", "busy"), t0 + 4 * hour, false, &mut quiet).await;
        (plan, began.elapsed())
    });
    // Meanwhile another session keeps inserting, timing every insert.
    let writer = db.client().await;
    let mut worst = Duration::ZERO;
    let began = Instant::now();
    let mut inserts = 0;
    while began.elapsed() < Duration::from_secs(3) {
        let t = Instant::now();
        writer.execute("INSERT INTO busy VALUES (now() + interval '3 hours', 1, 1)", &[]).await.unwrap();
        worst = worst.max(t.elapsed());
        inserts += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!maintenance.is_finished(), "maintenance cannot finish while the reader holds its lock");
    reader.batch_execute("COMMIT").await.unwrap();
    let (plan, took) = maintenance.await.unwrap();
    let plan = plan.unwrap();
    assert!(plan.steps.iter().any(|s| matches!(s.kind, StepKind::Detach { .. })), "{plan}");
    assert!(took >= Duration::from_secs(3));
    let lock_timeout = fast().lock_timeout;
    assert!(
        worst < lock_timeout + Duration::from_millis(700),
        "an insert waited {worst:?} (lock_timeout {lock_timeout:?}) over {inserts} inserts"
    );
    let rows: i64 = c.query_one("SELECT count(*) FROM busy", &[]).await.unwrap().get(0);
    assert_eq!(rows, inserts);
}

#[tokio::test]
async fn dry_run_changes_nothing() {
    let db = shared().fresh_db("dryrun").await;
    let c = db.client().await;
    let req = CreateRequest { policy: policy("dry", "1h"), like: None, columns: Some(COLUMNS.into()), start: None };
    let (_, plan) = mgr(&db).await.create(req, now(), true, &mut quiet).await.unwrap();
    assert!(plan.steps.len() > 3);
    let exists: bool =
        c.query_one("SELECT to_regclass('dry') IS NOT NULL OR to_regnamespace('chute') IS NOT NULL", &[]).await.unwrap().get(0);
    assert!(!exists, "a dry run created something");
    // And on an existing table with a policy: maintain --dry-run plans but does not run.
    create(&db, policy("wet", "1h"), now()).await;
    let before = partitions(&c, "wet").await;
    let plan = mgr(&db).await.maintain(&QualifiedName::new("public", "wet"), now() + 5 * 3_600_000_000, true, &mut quiet).await.unwrap();
    assert!(!plan.is_empty());
    assert_eq!(partitions(&c, "wet").await, before);
}

#[tokio::test]
async fn a_name_over_63_bytes_is_refused_before_any_ddl() {
    let db = shared().fresh_db("longname").await;
    let c = db.client().await;
    let long = "m".repeat(56);
    let req = CreateRequest { policy: policy(&long, "1h"), like: None, columns: Some(COLUMNS.into()), start: None };
    let err = mgr(&db).await.create(req, now(), false, &mut quiet).await.unwrap_err();
    assert!(err.to_string().contains("63 bytes"), "{err}");
    let exists: bool = c.query_one("SELECT to_regclass($1) IS NOT NULL", &[&long]).await.unwrap().get(0);
    assert!(!exists, "no DDL may run before names are checked");
}

#[tokio::test]
async fn rows_in_a_default_partition_are_moved_into_new_partitions() {
    let db = shared().fresh_db("default").await;
    let c = db.client().await;
    let mut p = policy("dflt", "1d");
    p.default_partition = true;
    create(&db, p, now()).await;
    c.batch_execute(
        "INSERT INTO dflt VALUES ('2025-01-05 10:00:00+00', 1, 1), ('2025-01-05 11:00:00+00', 2, 2), ('2025-02-01 00:00:00+00', 3, 3)",
    )
    .await
    .unwrap();
    let in_default: i64 = c.query_one("SELECT count(*) FROM dflt_default", &[]).await.unwrap().get(0);
    assert_eq!(in_default, 3);
    let plan = mgr(&db).await.maintain(&QualifiedName::new("public", "dflt"), now(), false, &mut quiet).await.unwrap();
    assert_eq!(
        plan.steps.iter().filter(|s| matches!(s.kind, StepKind::CreatePartition { moves_default_rows: true, .. })).count(),
        2,
        "{plan}"
    );
    let in_default: i64 = c.query_one("SELECT count(*) FROM dflt_default", &[]).await.unwrap().get(0);
    assert_eq!(in_default, 0);
    let total: i64 = c.query_one("SELECT count(*) FROM dflt", &[]).await.unwrap().get(0);
    assert_eq!(total, 3);
}

#[tokio::test]
async fn grants_are_copied_and_empty_tables_convert_and_undo_keeps_rows() {
    let db = shared().fresh_db("grants").await;
    let c = db.client().await;
    let role = format!("{}_loader", db.name);
    c.batch_execute(&format!(
        "CREATE ROLE \"{role}\"; CREATE TABLE conv (id serial, time timestamptz not null, v int); GRANT INSERT, SELECT ON conv TO \"{role}\""
    ))
    .await
    .unwrap();
    let mut p = policy("conv", "1d");
    p.premake = 1;
    let req = CreateRequest { policy: p, like: None, columns: None, start: None };
    mgr(&db).await.create(req, now(), false, &mut quiet).await.unwrap();
    let kind: String = c.query_one("SELECT relkind::text FROM pg_class WHERE oid = 'conv'::regclass", &[]).await.unwrap().get(0);
    assert_eq!(kind, "p");
    let leaf_grants: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_inherits i WHERE i.inhparent = 'conv'::regclass AND has_table_privilege($1, i.inhrelid, 'INSERT')",
            &[&role],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(leaf_grants, 2, "every partition gets the parent's INSERT grant");
    c.batch_execute("INSERT INTO conv (time, v) VALUES (now(), 1), (now(), 2)").await.unwrap();
    mgr(&db).await.undo(&QualifiedName::new("public", "conv"), false, &mut quiet).await.unwrap();
    let row = c
        .query_one("SELECT (SELECT relkind::text FROM pg_class WHERE oid = 'conv'::regclass), count(*), max(id) FROM conv", &[])
        .await
        .unwrap();
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(1), row.get::<_, i32>(2)), ("r".into(), 2, 2));
    c.batch_execute("INSERT INTO conv (time, v) VALUES (now(), 3)").await.unwrap();
    let has_policy: i64 = c.query_one("SELECT count(*) FROM chute.partition_config WHERE parent_table = 'conv'", &[]).await.unwrap().get(0);
    assert_eq!(has_policy, 0);
}
