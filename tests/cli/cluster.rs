//! Scale-out: a coordinator and three data nodes, all real servers on this
//! machine (each its own private cluster).

use std::io::Write;
use std::time::Duration;

use chute_engine::local::StopMode;
use chute_testkit::{ClusterSetup, TestCluster, TestDb};

use chute_testkit::process::{ChildGuard, Lines, exit_within, spawn};

use crate::common::{chute, open_tempdir, run_expect};

const PASSWORD: &str = "Sekr3t=n0de-pw";

/// A coordinator database and three data nodes; node n1 wants a password
/// (role chute_node, scram) so the password's path can be checked.
struct Setup {
    /// The coordinator's database, dropped when the test ends (before its
    /// cluster stops: fields drop in order).
    _db: TestDb,
    coordinator: TestCluster,
    url: String,
    nodes: Vec<TestCluster>,
}

impl Setup {
    async fn start() -> Setup {
        let coordinator = TestCluster::start();
        let db = coordinator.fresh_db("coord").await;
        let mut nodes = vec![TestCluster::start_with(&ClusterSetup { hba: &["local all chute_node scram-sha-256"], ..Default::default() })];
        nodes.push(TestCluster::start());
        nodes.push(TestCluster::start());
        let admin = nodes[0].options("postgres").connect().await.unwrap();
        admin.batch_execute(&format!("CREATE ROLE chute_node LOGIN SUPERUSER PASSWORD '{PASSWORD}'")).await.unwrap();
        Setup { url: db.url(), _db: db, coordinator, nodes }
    }

    fn node_url(&self, i: usize) -> String {
        let n = &self.nodes[i];
        if i == 0 {
            format!("postgresql://chute_node:{PASSWORD}@/postgres?host={}&port={}", n.socket_dir().display(), n.port())
        } else {
            n.options("postgres").display_url()
        }
    }

    fn init(&self) -> (String, String) {
        let mut cmd = chute();
        cmd.args(["cluster", "init", "--coordinator", &self.url]);
        for i in 0..3 {
            cmd.args(["--node", &format!("n{}={}", i + 1, self.node_url(i))]);
        }
        run_expect(&mut cmd, 0)
    }

    async fn node(&self, i: usize) -> tokio_postgres::Client {
        self.nodes[i].options("postgres").connect().await.unwrap()
    }

    async fn coordinator(&self) -> tokio_postgres::Client {
        let opts = chute_engine::ConnectOptions::resolve(Some(&self.url), &[("X", "")]).unwrap();
        opts.connect().await.unwrap()
    }

    fn distribute(&self, table: &str, shards: &str) {
        run_expect(
            chute().args([
                "--url",
                &self.url,
                "partition",
                "create",
                table,
                "--columns",
                "time timestamptz not null, dev_id int not null, v float8",
                "--key",
                "time",
                "--interval",
                "1d",
                "--distribute-by",
                "dev_id",
                "--shards",
                shards,
            ]),
            0,
        );
    }
}

fn day(back: i64) -> jiff::Timestamp {
    let now = jiff::Timestamp::now();
    let midnight = now.as_second() - now.as_second().rem_euclid(86400);
    jiff::Timestamp::from_second(midnight - back * 86400).unwrap()
}

/// `rows` rows over the three days before today, dev_id 0..997.
fn write_rows(path: &std::path::Path, rows: u64) {
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for i in 0..rows {
        let t = day(3).as_second() + (i as i64 * 259_200 / rows as i64);
        let ts = jiff::Timestamp::from_second(t).unwrap().strftime("%Y-%m-%d %H:%M:%S+00");
        writeln!(f, "{ts},{},{}.5", i % 997, i % 100).unwrap();
    }
    f.flush().unwrap();
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

/// Every node's shard tables and their row counts, read on the nodes.
async fn node_counts(s: &Setup) -> Vec<std::collections::BTreeMap<String, i64>> {
    let mut out = Vec::new();
    for i in 0..3 {
        let c = s.node(i).await;
        let tables = c
            .query(
                "SELECT c.relname::text FROM pg_class c WHERE c.relnamespace = 'public'::regnamespace AND c.relkind = 'r' ORDER BY 1",
                &[],
            )
            .await
            .unwrap();
        let mut m = std::collections::BTreeMap::new();
        for t in tables {
            let name: String = t.get(0);
            m.insert(name.clone(), count(&c, &format!("SELECT count(*) FROM public.\"{name}\"")).await);
        }
        out.push(m);
    }
    out
}

#[tokio::test]
async fn init_status_distribute_load_and_prune() {
    let s = Setup::start().await;
    // --dry-run checks every node, prints what it would make (no password), changes nothing.
    let mut dry = chute();
    dry.args(["cluster", "init", "--dry-run", "--coordinator", &s.url]);
    for i in 0..3 {
        dry.args(["--node", &format!("n{}={}", i + 1, s.node_url(i))]);
    }
    let (out, err) = run_expect(&mut dry, 0);
    assert!(out.contains("CREATE SERVER \"chute_node_n1\"") && out.contains("password '********'"), "{out}");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD));
    assert_eq!(count(&s.coordinator().await, "SELECT count(*) FROM pg_foreign_server").await, 0);
    let (out, err) = s.init();
    assert!(out.contains("node n1 added") && out.contains("node n3 added"), "{out}");
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD));
    // Again: the same nodes are updated, not doubled.
    let (out, _) = s.init();
    assert!(out.contains("node n1 updated"), "{out}");
    let c = s.coordinator().await;
    assert_eq!(count(&c, "SELECT count(*) FROM chute.nodes").await, 3);
    assert_eq!(count(&c, "SELECT count(*) FROM chute.nodes WHERE url LIKE '%Sekr3t%'").await, 0);
    assert_eq!(count(&c, "SELECT count(*) FROM pg_foreign_server WHERE srvname LIKE 'chute_node_%'").await, 3);
    let (json, err) = run_expect(chute().args(["cluster", "status", "--json", "--coordinator", &s.url]), 0);
    assert!(!json.contains(PASSWORD) && !err.contains(PASSWORD));
    let st: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(st["nodes"].as_array().unwrap().len(), 3);
    assert!(st["nodes"].as_array().unwrap().iter().all(|n| n["reachable"] == true), "{json}");

    s.distribute("m", "6");
    let dir = open_tempdir();
    let file = dir.path().join("m.csv");
    let rows = 30_000;
    write_rows(&file, rows);
    let (out, err) = run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&file).args(["--columns", "time,dev_id,v"]), 0);
    assert!(!out.contains(PASSWORD) && !err.contains(PASSWORD));
    // Every row is visible through the coordinator.
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64);
    // Each node holds its shards' rows: shard r of each day on node r % 3.
    let counts = node_counts(&s).await;
    let total: i64 = counts.iter().flat_map(|m| m.values()).sum();
    assert_eq!(total, rows as i64, "{counts:?}");
    for (i, m) in counts.iter().enumerate() {
        for name in m.keys() {
            let r: usize = name.rsplit_once("_h").unwrap().1.parse().unwrap();
            assert_eq!(r % 3, i, "{name} is on node {}", i + 1);
        }
    }
    // The rows came straight to the nodes: each node's journal holds its own rows, the coordinator's none.
    for (i, m) in counts.iter().enumerate() {
        let journaled = count(&s.node(i).await, "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal").await;
        assert_eq!(journaled, m.values().sum::<i64>(), "node {}", i + 1);
    }
    assert_eq!(count(&c, "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal").await, 0);
    // PostgreSQL's own hash partitioning puts each row where chute did.
    c.batch_execute(
        "CREATE TABLE own (time timestamptz not null, dev_id int not null, v float8) PARTITION BY HASH (dev_id);
         DO $$ BEGIN FOR r IN 0..5 LOOP EXECUTE format('CREATE TABLE own_h%s PARTITION OF own FOR VALUES WITH (MODULUS 6, REMAINDER %s)', r, r); END LOOP; END $$;
         INSERT INTO own SELECT * FROM m;",
    )
    .await
    .unwrap();
    for r in 0..6usize {
        let own = count(&c, &format!("SELECT count(*) FROM own_h{r}")).await;
        let chute_put: i64 = counts[r % 3].iter().filter(|(n, _)| n.ends_with(&format!("_h{r}"))).map(|(_, v)| *v).sum();
        assert_eq!(own, chute_put, "shard {r}");
    }
    // A time filter prunes to that day's foreign partitions only.
    let d2 = day(2).strftime("%Y-%m-%d").to_string();
    let d1 = day(1).strftime("%Y-%m-%d").to_string();
    let plan: Vec<String> = c
        .query(&format!("EXPLAIN SELECT count(*) FROM m WHERE time >= '{d2}' AND time < '{d1}'"), &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let plan = plan.join("\n");
    let wanted = format!("m_p{}", d2.replace('-', ""));
    assert_eq!(plan.matches("Foreign Scan").count(), 6, "{plan}");
    assert!(plan.lines().filter(|l| l.contains("Foreign Scan")).all(|l| l.contains(&wanted)), "{plan}");
    assert_eq!(
        count(&c, &format!("SELECT count(*) FROM m WHERE time >= '{d2}' AND time < '{d1}'")).await,
        count(&s.node(0).await, &format!("SELECT count(*) FROM {wanted}_h0")).await
            + count(&s.node(0).await, &format!("SELECT count(*) FROM {wanted}_h3")).await
            + count(&s.node(1).await, &format!("SELECT count(*) FROM {wanted}_h1")).await
            + count(&s.node(1).await, &format!("SELECT count(*) FROM {wanted}_h4")).await
            + count(&s.node(2).await, &format!("SELECT count(*) FROM {wanted}_h2")).await
            + count(&s.node(2).await, &format!("SELECT count(*) FROM {wanted}_h5")).await
    );
    // --status adds up what each node journaled.
    let (status, _) = run_expect(chute().args(["--url", &s.url, "load", "--status", "--json"]), 0);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(status[0]["rows_committed"].as_i64(), Some(rows as i64), "{status}");
    // Loading the same file again loads nothing: each node's journal has its rows.
    run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&file).args(["--columns", "time,dev_id,v"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64);
    // --forget forgets on every node: the same command then loads everything again.
    let id = status[0]["load_id"].as_str().unwrap().to_owned();
    run_expect(chute().args(["--url", &s.url, "load", "--forget", &id]), 0);
    for i in 0..3 {
        assert_eq!(count(&s.node(i).await, "SELECT count(*) FROM chute.load_journal").await, 0);
    }
    // Status counts each node's rows.
    let (json, _) = run_expect(chute().args(["cluster", "status", "--json", "--coordinator", &s.url]), 0);
    let st: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(st["rows"].as_i64(), Some(rows as i64), "{json}");
    for (i, m) in counts.iter().enumerate() {
        assert_eq!(st["nodes"][i]["rows"].as_i64(), Some(m.values().sum::<i64>()), "{json}");
    }
    // The password is in the user mapping only: not in any server's log.
    for log in std::iter::once(&s.coordinator).chain(&s.nodes).map(|t| t.cluster.log_file()) {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        assert!(!text.contains(PASSWORD), "{} holds the password", log.display());
    }
}

#[tokio::test]
async fn bad_nodes_are_refused_with_the_reason_and_no_password() {
    let s = Setup::start().await;
    // Unreachable: a port nothing listens on, with a password in the URL.
    let (_, err) = run_expect(
        chute()
            .args(["cluster", "init", "--coordinator", &s.url, "--node", &format!("n1={}", s.node_url(0))])
            .args(["--node", &format!("n2=postgresql://chute_node:{PASSWORD}@/postgres?host=/nonexistent&port=1")]),
        2,
    );
    assert!(err.contains("node n2") && err.contains("not reachable"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    // A wrong password: refused, the password not shown.
    let wrong = s.node_url(0).replace(PASSWORD, "wrong-pass-123");
    let (_, err) = run_expect(chute().args(["cluster", "init", "--coordinator", &s.url, "--node", &format!("n1={wrong}")]), 2);
    assert!(!err.contains("wrong-pass-123") && err.contains("node n1"), "{err}");
    // Nothing was recorded by the failed runs.
    let c = s.coordinator().await;
    assert_eq!(count(&c, "SELECT count(*) FROM pg_foreign_server").await, 0);
    // A bad name.
    let (_, err) = run_expect(chute().args(["cluster", "init", "--coordinator", &s.url, "--node", "N-1=postgres:///x"]), 2);
    assert!(err.contains("lower-case"), "{err}");
    // Distributing before init says what to do.
    let (_, err) = run_expect(
        chute().args([
            "--url",
            &s.url,
            "partition",
            "create",
            "x",
            "--columns",
            "time timestamptz not null, dev_id int",
            "--key",
            "time",
            "--interval",
            "1d",
            "--distribute-by",
            "dev_id",
            "--shards",
            "3",
        ]),
        2,
    );
    assert!(err.contains("chute cluster init"), "{err}");
}

/// Waits until data node `i` has rows of the load.
async fn until_node_has_rows(s: &Setup, i: usize) {
    let node = s.node(i).await;
    let started = std::time::Instant::now();
    while count(&node, "SELECT coalesce(sum(n_tup_ins), 0)::int8 FROM pg_stat_user_tables WHERE schemaname = 'public'").await == 0 {
        assert!(started.elapsed() < Duration::from_secs(60), "node {i} got no rows within 60 s");
        // Polling pace; the deadline is above.
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A distributed table `m` on three nodes, a file of `rows` rows for it, and
/// the command that loads it with `--retry-for retry_for` and one worker.
struct NodeOutage {
    s: Setup,
    _dir: tempfile::TempDir,
    file: std::path::PathBuf,
    rows: u64,
}

impl NodeOutage {
    async fn start(rows: u64) -> NodeOutage {
        let s = Setup::start().await;
        s.init();
        s.distribute("m", "3");
        let dir = open_tempdir();
        let file = dir.path().join("m.csv");
        write_rows(&file, rows);
        NodeOutage { s, _dir: dir, file, rows }
    }

    fn load(&self, retry_for: &str) -> std::process::Command {
        let mut cmd = chute();
        cmd.args(["--url", &self.s.url, "load", "m"]).arg(&self.file).args([
            "--columns",
            "time,dev_id,v",
            "--retry-for",
            retry_for,
            "--workers",
            "1",
        ]);
        cmd
    }

    fn spawn(&self, retry_for: &str) -> ChildGuard {
        spawn(self.load(retry_for).stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped()))
    }
}

#[tokio::test]
async fn a_node_down_longer_than_retry_for_ends_the_load_and_the_rerun_loads_the_rest_once() {
    let o = NodeOutage::start(2_000_000).await;
    let (s, rows) = (&o.s, o.rows);
    let child = o.spawn("5s");
    until_node_has_rows(s, 1).await;
    s.nodes[1].cluster.stop(StopMode::Fast).unwrap();
    // The load gives up once --retry-for is over (a stall would never end).
    let out = exit_within(child, Duration::from_secs(180), "the load with a node down");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    let error = &err[err.find("chute: error").unwrap_or_else(|| panic!("no error: {err}"))..];
    assert!(error.contains("run the same command again"), "the error does not say what to do: {err}");
    s.nodes[1].cluster.start().unwrap();
    let (out, _) = run_expect(&mut o.load("5s"), 0);
    assert!(out.contains("rows loaded"), "{out}");
    let c = s.coordinator().await;
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64);
    assert_eq!(count(&c, "SELECT count(DISTINCT (time, dev_id)) FROM m").await, rows as i64);
}

#[tokio::test]
async fn a_node_stopped_mid_load_is_retried_and_counts_are_exact() {
    let o = NodeOutage::start(2_000_000).await;
    let (s, rows) = (&o.s, o.rows);
    let mut child = o.spawn("120s");
    let mut said = Lines::new(child.stderr.take().unwrap());
    // Wait until node 2 has some rows, then stop it.
    let c = s.coordinator().await;
    until_node_has_rows(s, 1).await;
    // The load holds the shard map: the nodes cannot change under it.
    let mut again = chute();
    again.args(["cluster", "init", "--coordinator", &s.url]);
    for i in 0..3 {
        again.args(["--node", &format!("n{}={}", i + 1, s.node_url(i))]);
    }
    let (_, err) = run_expect(&mut again, 2);
    assert!(err.contains("a load into a distributed table is running"), "{err}");
    // Fast, not immediate: the test servers run with fsync and synchronous_commit
    // off, so a crash could lose commits they already acknowledged.
    s.nodes[1].cluster.stop(StopMode::Fast).unwrap();
    // Status says which node is down (exit 1).
    let (out, _) = run_expect(chute().args(["cluster", "status", "--coordinator", &s.url]), 1);
    assert!(out.lines().any(|l| l.starts_with("n2") && l.contains("DOWN")), "{out}");
    // The node stays down until the load says it is waiting for it: its
    // rows' COPY retrying, or the new partitions (a shard of each is on
    // every node) waiting to be made. A silent stall fails here.
    said.wait_until("the load to say it waits for the stopped node", Duration::from_secs(120), |seen| {
        seen.contains("retrying") || seen.contains("have waited")
    });
    s.nodes[1].cluster.start().unwrap();
    let out = exit_within(child, Duration::from_secs(300), "the load once the node is back");
    let err = said.rest();
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("retrying"), "the node was not stopped while the load ran: {err}");
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64, "{err}");
    let counts = node_counts(s).await;
    assert_eq!(counts.iter().flat_map(|m| m.values()).sum::<i64>(), rows as i64);
    // No row twice: distinct rows equal rows.
    assert_eq!(count(&c, "SELECT count(DISTINCT (time, dev_id, v)) FROM m").await, rows as i64);
}

#[tokio::test]
async fn ddl_drift_is_found_before_a_load_and_sync_ddl_fixes_it() {
    let s = Setup::start().await;
    s.init();
    s.distribute("m", "3");
    let dir = open_tempdir();
    let file = dir.path().join("m.csv");
    write_rows(&file, 3000);
    run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&file).args(["--columns", "time,dev_id,v"]), 0);
    let c = s.coordinator().await;
    // A column and an index added on the coordinator only.
    c.batch_execute("ALTER TABLE m ADD COLUMN note text; CREATE INDEX ON m (dev_id)").await.unwrap();
    let (out, _) = run_expect(chute().args(["cluster", "status", "--coordinator", &s.url]), 1);
    assert!(out.contains("column note is missing") && out.contains("ADD COLUMN IF NOT EXISTS \"note\" text"), "{out}");
    assert!(out.contains("USING btree (dev_id)"), "{out}");
    // A load refuses, with the SQL that fixes it.
    let csv = dir.path().join("n.csv");
    std::fs::write(&csv, format!("{},1,1.5,hello\n", day(1).strftime("%Y-%m-%d 10:00:00+00"))).unwrap();
    let (_, err) = run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&csv).args(["--columns", "time,dev_id,v,note"]), 2);
    assert!(err.contains("chute cluster sync-ddl") && err.contains("ADD COLUMN IF NOT EXISTS \"note\" text"), "{err}");
    // --dry-run changes nothing; then sync-ddl fixes every node.
    let (out, _) = run_expect(chute().args(["cluster", "sync-ddl", "--dry-run", "--coordinator", &s.url]), 0);
    assert!(out.contains("ADD COLUMN"), "{out}");
    run_expect(chute().args(["cluster", "status", "--coordinator", &s.url]), 1);
    run_expect(chute().args(["cluster", "sync-ddl", "--coordinator", &s.url]), 0);
    let (out, _) = run_expect(chute().args(["cluster", "status", "--coordinator", &s.url]), 0);
    assert!(out.contains("no drift"), "{out}");
    run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&csv).args(["--columns", "time,dev_id,v,note"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM m WHERE note = 'hello'").await, 1);
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 3001);
}

#[tokio::test]
async fn retention_drops_the_remote_tables_too() {
    let s = Setup::start().await;
    s.init();
    run_expect(
        chute().args([
            "--url",
            &s.url,
            "partition",
            "create",
            "r",
            "--columns",
            "time timestamptz not null, dev_id int not null, v float8",
            "--key",
            "time",
            "--interval",
            "1d",
            "--distribute-by",
            "dev_id",
            "--shards",
            "3",
            "--retention",
            "2d",
            "--start",
            &day(1).strftime("%Y-%m-%d").to_string(),
        ]),
        0,
    );
    let old = format!("r_p{}", day(1).strftime("%Y%m%d"));
    for i in 0..3 {
        assert_eq!(count(&s.node(i).await, &format!("SELECT count(*) FROM pg_class WHERE relname = '{old}_h{i}'")).await, 1);
    }
    // Three days later, the partition of yesterday is past retention.
    let later = (jiff::Timestamp::now() + jiff::SignedDuration::from_hours(72)).to_string();
    let (plan, _) = run_expect(chute().args(["--url", &s.url, "partition", "maintain", "--dry-run", "--now", &later]), 0);
    assert!(plan.contains("(on data node n2): drop public.") || plan.contains("on data node n2"), "{plan}");
    run_expect(chute().args(["--url", &s.url, "partition", "maintain", "--now", &later]), 0);
    let c = s.coordinator().await;
    assert_eq!(count(&c, &format!("SELECT count(*) FROM pg_class WHERE relname LIKE '{old}%'")).await, 0);
    for i in 0..3 {
        assert_eq!(
            count(&s.node(i).await, &format!("SELECT count(*) FROM pg_class WHERE relname LIKE '{old}%'")).await,
            0,
            "node {}",
            i + 1
        );
    }
}

#[tokio::test]
async fn local_start_with_nodes_then_the_demo_on_three_nodes() {
    let tmp = open_tempdir();
    let data = tmp.path().join("pg").to_str().unwrap().to_owned();
    let (url, err) = run_expect(chute().args(["--data-dir", &data, "local", "start", "--nodes", "3"]), 0);
    assert!(err.contains("data node n3 runs in"), "{err}");
    let (out, _) = run_expect(chute().args(["--data-dir", &data, "cluster", "status", "--json"]), 0);
    let st: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(st["nodes"].as_array().unwrap().len(), 3, "{out}");
    // The demo, twice: the second run starts over on every node.
    for _ in 0..2 {
        let (out, _) = run_expect(chute().args(["--data-dir", &data, "demo", "--nodes", "3", "--rows", "30000", "--days", "2"]), 0);
        assert!(out.contains("rows loaded      30000"), "{out}");
        assert!(out.contains("data nodes       3"), "{out}");
        let (st, _) = run_expect(chute().args(["--data-dir", &data, "cluster", "status", "--json"]), 0);
        let st: serde_json::Value = serde_json::from_str(&st).unwrap();
        assert_eq!(st["rows"].as_i64(), Some(30000), "{st}");
        assert!(st["nodes"].as_array().unwrap().iter().all(|n| n["rows"].as_i64().unwrap() > 0), "{st}");
    }
    let c = chute_engine::ConnectOptions::resolve(Some(url.trim()), &[("X", "")]).unwrap().connect().await.unwrap();
    assert_eq!(count(&c, "SELECT count(*) FROM chute_demo.conditions").await, 30000);
    // One command stops them all.
    let (_, err) = run_expect(chute().args(["--data-dir", &data, "local", "stop"]), 0);
    assert_eq!(err.matches("data node in").count(), 3, "{err}");
    for i in 1..=3 {
        assert!(!std::path::Path::new(&format!("{data}-node{i}/postmaster.pid")).exists(), "node {i} still runs");
    }
}

/// Starts `chute load --atomic` with a pause at `hook`, waits for the pause and kills it (-9).
fn kill_at(s: &Setup, table: &str, file: &std::path::Path, hook: &str) {
    use std::io::BufRead;
    let mut child = spawn(
        chute()
            .args(["--url", &s.url, "load", table])
            .arg(file)
            .args(["--columns", "time,dev_id,v", "--atomic"])
            .env(hook, "60")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped()),
    );
    let stderr = child.stderr.take().unwrap();
    let mut seen = String::new();
    for line in std::io::BufReader::new(stderr).lines() {
        let line = line.unwrap();
        seen.push_str(&line);
        seen.push('\n');
        if line.contains("pausing") {
            break;
        }
    }
    assert!(seen.contains("pausing"), "the load ended before {hook}: {seen}");
    child.kill();
}

async fn prepared(s: &Setup) -> i64 {
    let mut n = 0;
    for i in 0..3 {
        n += count(&s.node(i).await, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE 'chute:%'").await;
    }
    n
}

#[tokio::test]
async fn atomic_loads_survive_a_kill_between_prepare_and_commit() {
    let s = Setup::start().await;
    s.init();
    s.distribute("m", "3");
    let c = s.coordinator().await;
    let dir = open_tempdir();
    let file = dir.path().join("m.csv");
    let rows = 20_000;
    write_rows(&file, rows);

    // Killed after every node prepared, before the decision: nothing is visible,
    // and the next run rolls the prepared transactions back and loads it all.
    kill_at(&s, "m", &file, "CHUTE_TEST_PAUSE_AFTER_PREPARE");
    assert_eq!(prepared(&s).await, 3);
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 0);
    let (out, _) = run_expect(chute().args(["cluster", "status", "--coordinator", &s.url]), 0);
    assert!(out.contains("prepared transaction(s) left by chute"), "{out}");
    let (_, err) = run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&file).args(["--columns", "time,dev_id,v", "--atomic"]), 0);
    assert!(err.contains("rolled back the transaction"), "{err}");
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64);
    assert_eq!(prepared(&s).await, 0);

    // Killed after the decision to commit: `cluster recover` commits on every node.
    let file2 = dir.path().join("m2.csv");
    std::fs::write(&file2, std::fs::read_to_string(&file).unwrap().replace(".5\n", ".25\n")).unwrap();
    kill_at(&s, "m", &file2, "CHUTE_TEST_PAUSE_AFTER_DECISION");
    assert_eq!(prepared(&s).await, 3);
    let (out, _) = run_expect(chute().args(["cluster", "recover", "--coordinator", &s.url]), 0);
    assert_eq!(out.matches("committed chute:").count(), 3, "{out}");
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 2 * rows as i64);
    // The journals committed with the rows: running it again loads nothing.
    run_expect(chute().args(["--url", &s.url, "load", "m"]).arg(&file2).args(["--columns", "time,dev_id,v", "--atomic"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, 2 * rows as i64);
    assert_eq!(count(&c, "SELECT count(DISTINCT (time, dev_id, v)) FROM m").await, 2 * rows as i64);

    // A node that cannot prepare: refused up front, with the setting to change.
    let n4 = TestCluster::start_with(&ClusterSetup { settings: &[("max_prepared_transactions", "0")], ..Default::default() });
    run_expect(chute().args(["cluster", "add-node", "--coordinator", &s.url, &format!("n4={}", n4.options("postgres").display_url())]), 0);
    s.distribute("w", "4");
    let (_, err) = run_expect(chute().args(["--url", &s.url, "load", "w"]).arg(&file).args(["--columns", "time,dev_id,v", "--atomic"]), 2);
    assert!(err.contains("data node n4 has max_prepared_transactions = 0"), "{err}");
    assert_eq!(count(&c, "SELECT count(*) FROM w").await, 0);
    // Without --atomic it loads.
    run_expect(chute().args(["--url", &s.url, "load", "w"]).arg(&file).args(["--columns", "time,dev_id,v"]), 0);
    assert_eq!(count(&c, "SELECT count(*) FROM w").await, rows as i64);
}

#[tokio::test]
async fn time_partitions_placed_round_robin_load_directly_and_prune() {
    let s = Setup::start().await;
    s.init();
    let from = day(3).strftime("%Y-%m-%d").to_string();
    run_expect(
        chute().args([
            "--url",
            &s.url,
            "partition",
            "create",
            "p",
            "--columns",
            "time timestamptz not null, dev_id int not null, v float8",
            "--key",
            "time",
            "--interval",
            "1d",
            "--placement",
            "round-robin",
            "--start",
            &from,
        ]),
        0,
    );
    let dir = open_tempdir();
    let file = dir.path().join("p.csv");
    let rows = 9_000;
    write_rows(&file, rows);
    run_expect(chute().args(["--url", &s.url, "load", "p"]).arg(&file).args(["--columns", "time,dev_id,v"]), 0);
    let c = s.coordinator().await;
    assert_eq!(count(&c, "SELECT count(*) FROM p").await, rows as i64);
    // The three days of data are on three different nodes, each journaled there.
    let counts = node_counts(&s).await;
    let mut holders = Vec::new();
    for back in [3, 2, 1] {
        let name = format!("p_p{}", day(back).strftime("%Y%m%d"));
        let held: Vec<usize> = (0..3).filter(|i| counts[*i].get(&name).is_some_and(|n| *n > 0)).collect();
        assert_eq!(held.len(), 1, "{name}: {counts:?}");
        holders.push(held[0]);
        let d = day(back).strftime("%Y-%m-%d").to_string();
        let e = day(back - 1).strftime("%Y-%m-%d").to_string();
        let plan: Vec<String> = c
            .query(&format!("EXPLAIN SELECT count(*) FROM p WHERE time >= '{d}' AND time < '{e}'"), &[])
            .await
            .unwrap()
            .iter()
            .map(|r| r.get(0))
            .collect();
        let scans: Vec<&String> = plan.iter().filter(|l| l.contains("Foreign Scan")).collect();
        assert!(scans.len() == 1 && scans[0].contains(&name), "{plan:?}");
    }
    holders.sort_unstable();
    holders.dedup();
    assert_eq!(holders.len(), 3, "consecutive days on consecutive nodes");
    for (i, m) in counts.iter().enumerate() {
        let journaled = count(&s.node(i).await, "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal").await;
        assert_eq!(journaled, m.values().sum::<i64>());
    }
}

#[tokio::test]
async fn a_killed_distributed_load_resumes_per_node_and_two_at_once_load_each_row_once() {
    let s = Setup::start().await;
    s.init();
    s.distribute("m", "3");
    let c = s.coordinator().await;
    let dir = open_tempdir();
    let file = dir.path().join("m.csv");
    let rows = 1_500_000;
    write_rows(&file, rows);
    let load = || {
        let mut cmd = chute();
        cmd.args(["--url", &s.url, "load", "m"]).arg(&file).args(["--columns", "time,dev_id,v", "--workers", "1"]);
        cmd
    };
    // kill -9 once some rows are committed on the nodes.
    let mut child = spawn(load().stdout(std::process::Stdio::null()).stderr(std::process::Stdio::null()));
    let started = std::time::Instant::now();
    let mut journaled = 0;
    while journaled == 0 && started.elapsed() < Duration::from_secs(60) {
        // Polling pace; the deadline is the loop's, the assertion below says what came of it.
        tokio::time::sleep(Duration::from_millis(50)).await;
        journaled = 0;
        for i in 0..3 {
            let n = s.node(i).await;
            if count(&n, "SELECT count(*) FROM pg_class WHERE relname = 'load_journal'").await > 0 {
                journaled += count(&n, "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal").await;
            }
        }
    }
    child.kill();
    let partial = count(&c, "SELECT count(*) FROM m").await;
    assert!(partial > 0 && partial < rows as i64, "killed too late or too early: {partial}");
    // The rerun, started twice at once: one run loads the rest, the other is
    // refused (it names the holder) or finds nothing left.
    let a = spawn(load().stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()));
    let b = spawn(load().stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped()));
    let (a, b) =
        (exit_within(a, Duration::from_secs(300), "the first rerun"), exit_within(b, Duration::from_secs(300), "the second rerun"));
    let codes = [a.status.code(), b.status.code()];
    assert!(codes.contains(&Some(0)), "{codes:?} {} {}", String::from_utf8_lossy(&a.stderr), String::from_utf8_lossy(&b.stderr));
    for o in [&a, &b] {
        if o.status.code() != Some(0) {
            assert!(String::from_utf8_lossy(&o.stderr).contains("already running"), "{}", String::from_utf8_lossy(&o.stderr));
        }
    }
    assert_eq!(count(&c, "SELECT count(*) FROM m").await, rows as i64);
    assert_eq!(count(&c, "SELECT count(DISTINCT (time, dev_id, v)) FROM m").await, rows as i64);
    let counts = node_counts(&s).await;
    for (i, m) in counts.iter().enumerate() {
        let journaled = count(&s.node(i).await, "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal").await;
        assert_eq!(journaled, m.values().sum::<i64>(), "node {}", i + 1);
    }
}
