//! A primary and a streaming standby, for failover tests.
//!
//! A failover is the one event a single server cannot show: a standby made
//! by `pg_basebackup -R` follows the primary, the primary is stopped with
//! `-m immediate` (what a crash looks like to clients: no goodbye, commits
//! acknowledged but not yet streamed are gone), and the standby is
//! promoted. Both listen on unix sockets in their own data directories, on
//! ports of their own, so a multi-host connection string names them apart.
//!
//! With the test settings (`synchronous_commit = off`) the primary
//! acknowledges commits before their WAL is flushed, and a standby only
//! receives flushed WAL, so an immediate stop loses acknowledged commits:
//! the case a loader must survive. [`PairSetup::synchronous`] makes every
//! commit wait for the standby instead.

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use chute_engine::connect::SessionAttrs;
use chute_engine::local::{Cluster, StopMode};

use crate::{TestCluster, TestDb};

/// The standby's port (the primary has the fixture's usual 5432): sockets
/// in different directories could share a port, but labels and URLs then
/// could not tell the servers apart.
const STANDBY_PORT: u16 = 5433;

/// How the pair is set up.
#[derive(Debug, Default, Clone, Copy)]
pub struct PairSetup {
    /// `synchronous_standby_names = '*'` and `synchronous_commit = on` on
    /// the primary: a commit is acknowledged once the standby has it.
    pub synchronous: bool,
}

/// A primary and its standby, both stopped and removed when dropped.
#[derive(Debug)]
pub struct ReplicatedPair {
    pub primary: TestCluster,
    pub standby: TestCluster,
}

impl ReplicatedPair {
    /// Starts a primary, makes a standby of it with `pg_basebackup -R` and
    /// starts that; returns once the standby streams.
    pub fn start(setup: PairSetup) -> ReplicatedPair {
        let mut settings: Vec<(&str, &str)> = vec![("wal_level", "replica"), ("max_wal_senders", "5"), ("wal_sender_timeout", "'10s'")];
        if setup.synchronous {
            settings.extend([("synchronous_standby_names", "'*'"), ("synchronous_commit", "on")]);
        }
        let primary = TestCluster::start_with(&crate::ClusterSetup { settings: &settings, ..Default::default() });
        // A sibling of the primary's directory, named like it, so a killed
        // run's leftovers are found and removed the same way.
        let root = primary.root.with_file_name(format!("{}-standby", primary.root.file_name().and_then(|n| n.to_str()).unwrap_or("pair")));
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("test fixture: cannot create {}: {e}", root.display()));
        let standby = Cluster::new(root.join("db"), STANDBY_PORT).unwrap_or_else(|e| panic!("test fixture: {e}"));
        if let Some(r) = standby.run_as {
            r.chown(&root).expect("cannot hand the standby's directory to the postgres user");
        }
        let port = primary.port().to_string();
        run_program(
            &standby,
            "pg_basebackup",
            [
                OsStr::new("-D"),
                standby.data_dir.as_os_str(),
                OsStr::new("-R"),
                OsStr::new("-X"),
                OsStr::new("stream"),
                OsStr::new("-c"),
                OsStr::new("fast"),
                OsStr::new("-h"),
                primary.socket_dir().as_os_str(),
                OsStr::new("-p"),
                OsStr::new(&port),
                OsStr::new("-U"),
                OsStr::new(chute_engine::local::SUPERUSER),
            ],
        );
        // The copied postgresql.conf is the primary's: the standby gets its
        // own socket and port, and (promoted, with no standby of its own)
        // must not wait for one.
        let conf = standby.data_dir.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).unwrap_or_else(|e| panic!("test fixture: cannot read {}: {e}", conf.display()));
        text.push_str(&format!(
            "\n# the standby's own\nunix_socket_directories = '{}'\nport = {STANDBY_PORT}\nsynchronous_standby_names = ''\nhot_standby = on\n",
            standby.data_dir.display()
        ));
        std::fs::write(&conf, text).unwrap_or_else(|e| panic!("test fixture: cannot write {}: {e}", conf.display()));
        let standby = TestCluster::launch(standby, root, true);
        ReplicatedPair { primary, standby }
    }

    /// A new database on the primary, once the standby has it too.
    pub async fn fresh_db(&self, hint: &str) -> TestDb {
        let db = self.primary.fresh_db(hint).await;
        let name = db.name.clone();
        let standby = self.standby.options("postgres").with_session_attrs(SessionAttrs::Any);
        wait("the standby to replay CREATE DATABASE", Duration::from_secs(60), || async {
            match standby.connect().await {
                Ok(c) => c
                    .query_one("SELECT count(*) FROM pg_database WHERE datname = $1", &[&name])
                    .await
                    .is_ok_and(|r| r.get::<_, i64>(0) == 1),
                Err(_) => false,
            }
        })
        .await;
        db
    }

    /// A libpq `key=value` string naming both servers, primary first, for
    /// `dbname`, with `extra` (more `key=value` pairs) after them.
    pub fn conninfo(&self, dbname: &str, extra: &str) -> String {
        format!(
            "host={},{} port={},{} user={} dbname={dbname} {extra}",
            self.primary.socket_dir().display(),
            self.standby.socket_dir().display(),
            self.primary.port(),
            self.standby.port(),
            chute_engine::local::SUPERUSER
        )
    }

    /// The standby alone, for `dbname`.
    pub fn standby_conninfo(&self, dbname: &str) -> String {
        format!(
            "host={} port={} user={} dbname={dbname}",
            self.standby.socket_dir().display(),
            self.standby.port(),
            chute_engine::local::SUPERUSER
        )
    }

    /// Stops the standby's WAL receiver (an empty `primary_conninfo`): from
    /// now on nothing the primary commits reaches it, as if it lagged behind
    /// by everything. Returns once no receiver runs.
    pub async fn cut_streaming(&self) {
        let standby = self.standby.options("postgres").with_session_attrs(SessionAttrs::Any);
        let c = standby.connect().await.unwrap_or_else(|e| panic!("test fixture: connecting to the standby: {e}"));
        // Two statements: ALTER SYSTEM refuses a transaction block.
        for sql in ["ALTER SYSTEM SET primary_conninfo = ''", "SELECT pg_reload_conf()"] {
            c.batch_execute(sql).await.unwrap_or_else(|e| panic!("test fixture: cutting the standby's streaming ({sql}): {e:?}"));
        }
        wait("the standby's WAL receiver to stop", Duration::from_secs(30), || async {
            c.query_one("SELECT count(*) FROM pg_stat_wal_receiver", &[]).await.is_ok_and(|r| r.get::<_, i64>(0) == 0)
        })
        .await;
    }

    /// Stops the primary with `-m immediate`: every session is cut and
    /// commits not yet streamed to the standby are lost with it.
    pub fn stop_primary_immediately(&self) {
        self.primary.cluster.stop(StopMode::Immediate).unwrap_or_else(|e| panic!("test fixture: stopping the primary: {e}"));
    }

    /// Promotes the standby and returns once it accepts writes
    /// (`pg_is_in_recovery()` is false).
    pub async fn promote_standby(&self) {
        run_program(
            &self.standby.cluster,
            "pg_ctl",
            [OsStr::new("-D"), self.standby.cluster.data_dir.as_os_str(), OsStr::new("-w"), OsStr::new("promote")],
        );
        let options = self.standby.options("postgres");
        wait("the promoted standby to leave recovery", Duration::from_secs(60), || async {
            match options.connect().await {
                Ok(c) => c.query_one("SELECT pg_is_in_recovery()", &[]).await.is_ok_and(|r| !r.get::<_, bool>(0)),
                Err(_) => false,
            }
        })
        .await;
    }
}

/// Polls `check` until it holds, panicking after `limit`.
async fn wait<F, Fut>(what: &str, limit: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let began = Instant::now();
    while !check().await {
        assert!(began.elapsed() < limit, "test fixture: waited {limit:?} for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs one of the server's programs as the server's user, panicking with
/// its output when it fails.
fn run_program<I, S>(cluster: &Cluster, program: &str, args: I)
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let path: PathBuf = cluster.bins.program(program);
    let mut cmd = Command::new(&path);
    cmd.args(args).current_dir("/").env("LC_ALL", "C").env_remove("PGDATA");
    if let Some(r) = cluster.run_as {
        cmd.uid(r.uid).gid(r.gid).env("HOME", "/var/lib/postgresql");
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("test fixture: cannot run {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "test fixture: {program} failed: {}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
}
