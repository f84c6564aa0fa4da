//! The test fixture: private PostgreSQL clusters for integration tests.
//!
//! Tests run against real servers, never mocks. Each test binary starts one
//! shared cluster on first use ([`shared`]) in a temp directory, listening on
//! a unix socket there, with durability off for speed; each test gets a fresh
//! database of its own ([`TestCluster::fresh_db`]). Tests that restart a
//! server, or need several, start owned clusters ([`TestCluster::start`]) that
//! stop when dropped.
//!
//! Rust never drops statics, so a watchdog process (in its own process group,
//! so a Ctrl-C of the test run does not kill it first) waits for the test
//! process to end and then stops the shared cluster and removes its directory.
//! Clusters left by a run that was killed outright (watchdog included) are
//! found by the next run (the owner's pid is in the directory name) and removed.
//!
//! When PostgreSQL's server binaries are missing the fixture panics with the
//! install instruction: a test never skips silently.
//!
//! The processes a test starts (chute's own commands) are held by
//! [`process::ChildGuard`]s, which kill them when the test ends, however it
//! ends.

pub mod prometheus;

pub mod kafka;

pub mod process;

pub mod pgbouncer;

pub mod replicated;

pub mod small_disk;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;

use chute_engine::ConnectOptions;
use chute_engine::local::{Cluster, StopMode, process_alive};

const PREFIX: &str = "chute-test-";

/// Settings for throwaway clusters: durability off, room for many workers.
const TEST_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "300"),
    ("shared_buffers", "'128MB'"),
    ("max_wal_size", "'4GB'"),
    ("log_min_messages", "warning"),
    ("max_prepared_transactions", "10"),
];

/// How an owned cluster differs from the default one: the TLS tests need a
/// server on TCP with certificate files and their own `pg_hba.conf` rules.
#[derive(Debug, Default, Clone, Copy)]
pub struct ClusterSetup<'a> {
    /// Also listen on 127.0.0.1, on a port that was free a moment before.
    pub tcp: bool,
    /// `postgresql.conf` lines after chute's and the test settings; a later
    /// line wins, so these override both.
    pub settings: &'a [(&'a str, &'a str)],
    /// `pg_hba.conf` lines put before initdb's own, so they are matched first.
    pub hba: &'a [&'a str],
    /// Files written into the data directory (name, contents) before the
    /// server starts, owned by the server's user with mode 0600, as the server
    /// demands of a private key. A relative `ssl_cert_file` names them.
    pub files: &'a [(&'a str, &'a [u8])],
}

/// A private cluster in its own temp directory.
#[derive(Debug)]
pub struct TestCluster {
    pub cluster: Cluster,
    root: PathBuf,
    /// Owned clusters stop on drop; the shared one is left to its watchdog.
    owned: bool,
}

static SHARED: OnceLock<TestCluster> = OnceLock::new();
static DB_COUNTER: AtomicU32 = AtomicU32::new(0);

/// The cluster shared by every test in this test binary, started on first use.
pub fn shared() -> &'static TestCluster {
    SHARED.get_or_init(|| TestCluster::start_inner(false))
}

impl TestCluster {
    /// Starts a cluster owned by the caller: stopped and removed on drop.
    pub fn start() -> TestCluster {
        TestCluster::start_inner(true)
    }

    /// Starts an owned cluster set up as `setup` says. With `setup.tcp` the
    /// server's one port serves both its socket and 127.0.0.1.
    pub fn start_with(setup: &ClusterSetup<'_>) -> TestCluster {
        let port = if setup.tcp { free_tcp_port() } else { 5432 };
        let mut settings = TEST_SETTINGS.to_vec();
        if setup.tcp {
            settings.push(("listen_addresses", "'127.0.0.1'"));
        }
        settings.extend_from_slice(setup.settings);
        let (cluster, root) = TestCluster::init_cluster(port, &settings);
        let data = &cluster.data_dir;
        for (name, contents) in setup.files {
            let path = data.join(name);
            std::fs::write(&path, contents).unwrap_or_else(|e| panic!("test fixture: cannot write {}: {e}", path.display()));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod a file we just wrote");
            if let Some(r) = cluster.run_as {
                r.chown(&path).expect("cannot hand a file to the postgres user");
            }
        }
        if !setup.hba.is_empty() {
            let hba = data.join("pg_hba.conf");
            let initdb_lines = std::fs::read_to_string(&hba).unwrap_or_else(|e| panic!("test fixture: cannot read {}: {e}", hba.display()));
            let text = format!("# written by the test fixture\n{}\n{initdb_lines}", setup.hba.join("\n"));
            std::fs::write(&hba, text).unwrap_or_else(|e| panic!("test fixture: cannot write {}: {e}", hba.display()));
        }
        TestCluster::launch(cluster, root, true)
    }

    fn start_inner(owned: bool) -> TestCluster {
        let (cluster, root) = TestCluster::init_cluster(5432, TEST_SETTINGS);
        TestCluster::launch(cluster, root, owned)
    }

    /// A new data directory in its own temp directory, not yet started.
    fn init_cluster(port: u16, settings: &[(&str, &str)]) -> (Cluster, PathBuf) {
        remove_leftovers();
        let base = std::env::temp_dir();
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let root = base.join(format!("{PREFIX}{}-{nanos:x}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
        let cluster = Cluster::new(root.join("db"), port).unwrap_or_else(|e| panic!("test fixture: {e}"));
        if let Some(r) = cluster.run_as {
            r.chown(&root).expect("cannot hand the test directory to the postgres user");
        }
        cluster.init(settings).unwrap_or_else(|e| panic!("test fixture: initdb failed: {e}"));
        (cluster, root)
    }

    fn launch(cluster: Cluster, root: PathBuf, owned: bool) -> TestCluster {
        cluster.start().unwrap_or_else(|e| panic!("test fixture: the server did not start: {e}"));
        spawn_watchdog(&root, &cluster.data_dir);
        TestCluster { cluster, root, owned }
    }

    /// Options for the superuser and the given database.
    pub fn options(&self, dbname: &str) -> ConnectOptions {
        self.cluster.connect_options(dbname)
    }

    /// Creates a new, empty database for one test.
    pub async fn fresh_db(&self, hint: &str) -> TestDb {
        let n = DB_COUNTER.fetch_add(1, Ordering::Relaxed);
        let clean: String = hint.chars().map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' }).take(40).collect();
        let name = format!("t{n}_{clean}");
        let admin = self.options("postgres").connect().await.unwrap_or_else(|e| panic!("test fixture: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE \"{name}\" TEMPLATE template0"))
            .await
            .unwrap_or_else(|e| panic!("test fixture: CREATE DATABASE {name}: {e}"));
        let dropper = Arc::new(DropDatabase { name: name.clone(), admin: self.options("postgres") });
        TestDb { options: self.options(&name), name, _dropper: dropper }
    }

    /// The port, on the socket and, for a [`ClusterSetup::tcp`] cluster, on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.cluster.port
    }

    /// The socket directory (what `PGHOST` would be).
    pub fn socket_dir(&self) -> &Path {
        &self.cluster.data_dir
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.cluster.stop(StopMode::Immediate);
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// One test's database, dropped when the test is done with it: when the
/// last clone of it goes (a test clones it into the tasks it spawns).
#[derive(Debug, Clone)]
pub struct TestDb {
    pub name: String,
    pub options: ConnectOptions,
    _dropper: Arc<DropDatabase>,
}

/// Drops a test's database when dropped itself.
///
/// `WITH (FORCE)` ends the sessions still in it first: a test's own
/// clients usually outlive the `TestDb` by nothing, but a chute process it
/// killed may leave a backend behind (one waiting for a lock, say). A server
/// that is gone (an owned cluster a test stopped) has nothing to drop. Any
/// other failure is printed, not raised: a drop runs as a test ends, maybe
/// while it panics.
#[derive(Debug)]
struct DropDatabase {
    name: String,
    admin: ConnectOptions,
}

impl Drop for DropDatabase {
    fn drop(&mut self) {
        let (name, admin) = (self.name.clone(), self.admin.clone());
        // The test's own runtime may be the one running this drop, and it
        // cannot be blocked on: the statement runs on a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
            runtime.block_on(async {
                let Ok(client) = admin.connect().await else { return Ok(()) };
                let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", name.replace('"', "\"\""));
                match tokio::time::timeout(std::time::Duration::from_secs(60), client.batch_execute(&sql)).await {
                    Ok(result) => result.map_err(|e| format!("{e:#}")),
                    Err(_) => Err("no answer after 60 s".to_owned()),
                }
            })
        })
        .join();
        match dropped {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("test fixture: DROP DATABASE {}: {e}", self.name),
            Err(_) => eprintln!("test fixture: dropping database {} panicked", self.name),
        }
    }
}

impl TestDb {
    pub async fn client(&self) -> tokio_postgres::Client {
        self.options.connect().await.unwrap_or_else(|e| panic!("test fixture: {e}"))
    }

    /// A URL for `chute --url`.
    pub fn url(&self) -> String {
        self.options.display_url()
    }
}

/// Removes the directories `PREFIX{pid}-…` in the temp directory whose
/// owning test process is gone (one killed outright left them), calling
/// `release` on each first (a mount to undo, say).
pub(crate) fn remove_dirs_of_dead_owners(prefix: &str, release: impl Fn(&Path)) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix) else { continue };
        let owner = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
        if owner.is_some_and(|pid| !process_alive(pid)) {
            release(&entry.path());
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A new directory `PREFIX{pid}-{nanos}` in the temp directory, after the
/// ones of dead test processes are removed.
pub(crate) fn fresh_owned_dir(prefix: &str, release: impl Fn(&Path)) -> PathBuf {
    remove_dirs_of_dead_owners(prefix, release);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("{prefix}{}-{nanos:x}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("test fixture: cannot create {}: {e}", dir.display()));
    dir
}

/// A TCP port on 127.0.0.1 that nothing listens on right now. Another
/// process could take it before the server binds it; the server then fails
/// to start and says so, which beats a fixed port that collides every time.
fn free_tcp_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("test fixture: cannot bind a TCP port on 127.0.0.1");
    listener.local_addr().expect("a bound listener has an address").port()
}

/// Waits for this process to end, then stops the server and removes `root`.
fn spawn_watchdog(root: &Path, data_dir: &Path) {
    let script = r#"
        owner=$1 root=$2 data=$3
        while kill -0 "$owner" 2>/dev/null; do sleep 1; done
        pid=$(head -n1 "$data/postmaster.pid" 2>/dev/null)
        if [ -n "$pid" ]; then
            kill -INT "$pid" 2>/dev/null
            i=0; while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i+1)); done
            kill -QUIT "$pid" 2>/dev/null
        fi
        rm -rf "$root"
    "#;
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("chute-test-watchdog")
        .arg(std::process::id().to_string())
        .arg(root)
        .arg(data_dir)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        panic!("test fixture: cannot start the cluster watchdog: {e}");
    }
}

/// Removes test clusters whose test process is gone (a killed run).
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with(PREFIX) {
            continue;
        }
        let root = entry.path();
        // The directory is named chute-test-<owner pid>-<nonce>.
        let owner = name.to_string_lossy()[PREFIX.len()..].split('-').next().and_then(|p| p.parse::<i32>().ok());
        if owner.is_none_or(process_alive) {
            continue;
        }
        let postmaster =
            std::fs::read_to_string(root.join("db/postmaster.pid")).ok().and_then(|s| s.lines().next()?.trim().parse::<i32>().ok());
        if let Some(pid) = postmaster.filter(|p| is_postgres(*p)) {
            // SAFETY: signalling a process we verified is a postgres server.
            unsafe { libc::kill(pid, libc::SIGQUIT) };
            for _ in 0..40 {
                if !process_alive(pid) {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}

fn is_postgres(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "postgres")
}
