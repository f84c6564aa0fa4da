//! A real PgBouncer in front of a test cluster: the binary of the
//! distribution's `pgbouncer` package (`scripts/ensure-deps` installs it),
//! started with a configuration of its own in a temp directory, listening on
//! a unix socket there; never the system service. As root it runs as the
//! `postgres` user (PgBouncer refuses root), like the clusters. It is
//! killed and its directory removed when the handle is dropped, killed with
//! the test process if that dies first (`PR_SET_PDEATHSIG`), and directories
//! left by a test process that was killed outright are removed by the next
//! start.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use chute_engine::ConnectOptions;
use chute_engine::local::{RunAs, SUPERUSER};

use crate::TestCluster;

const PREFIX: &str = "chute-pgbouncer-";

/// A running PgBouncer.
#[derive(Debug)]
pub struct PgBouncer {
    child: Child,
    root: PathBuf,
    port: u16,
}

/// PgBouncer's `pool_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolMode {
    Session,
    Transaction,
    Statement,
}

impl PoolMode {
    fn name(self) -> &'static str {
        match self {
            PoolMode::Session => "session",
            PoolMode::Transaction => "transaction",
            PoolMode::Statement => "statement",
        }
    }
}

/// The `pgbouncer` binary, or the panic that says how to install it.
fn binary() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/sbin", "/usr/bin", "/usr/local/bin"]) {
        let p = Path::new(dir).join("pgbouncer");
        if p.is_file() {
            return p;
        }
    }
    panic!("test fixture: no pgbouncer binary: run scripts/ensure-deps (it runs apt-get install pgbouncer), then the tests again");
}

impl PgBouncer {
    /// Starts PgBouncer in `mode` in front of every database of `cluster`,
    /// and waits until it accepts connections.
    pub fn start(cluster: &TestCluster, mode: PoolMode) -> PgBouncer {
        let root = crate::fresh_owned_dir(PREFIX, |_| {});
        let port = crate::prometheus::free_port();
        let config = format!(
            "[databases]\n* = host={socket} port={pg_port} user={SUPERUSER}\n\n[pgbouncer]\n\
             unix_socket_dir = {root}\nlisten_port = {port}\nauth_type = trust\nauth_file = {root}/users.txt\n\
             pool_mode = {mode}\nmax_client_conn = 400\ndefault_pool_size = 40\n\
             ignore_startup_parameters = extra_float_digits\nlogfile = {root}/pgbouncer.log\n",
            socket = cluster.socket_dir().display(),
            pg_port = cluster.port(),
            root = root.display(),
            mode = mode.name(),
        );
        std::fs::write(root.join("pgbouncer.ini"), config).expect("test fixture: cannot write pgbouncer.ini");
        std::fs::write(root.join("users.txt"), format!("\"{SUPERUSER}\" \"\"\n")).expect("test fixture: cannot write users.txt");
        let run_as = RunAs::for_current_user().unwrap_or_else(|e| panic!("test fixture: {e}"));
        if let Some(r) = run_as {
            for p in [root.clone(), root.join("pgbouncer.ini"), root.join("users.txt")] {
                r.chown(&p).expect("cannot hand the PgBouncer directory to the postgres user");
            }
        }
        let mut cmd = Command::new(binary());
        cmd.arg(root.join("pgbouncer.ini")).current_dir(&root).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null());
        if let Some(r) = run_as {
            cmd.uid(r.uid).gid(r.gid);
        }
        // SAFETY: prctl in the child before exec only sets its parent-death signal.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("test fixture: cannot start pgbouncer: {e}"));
        let mut b = PgBouncer { child, root, port };
        let began = Instant::now();
        while !b.accepts() {
            if let Ok(Some(status)) = b.child.try_wait() {
                panic!("test fixture: pgbouncer exited ({status}):\n{}", b.log());
            }
            assert!(began.elapsed() < Duration::from_secs(30), "test fixture: pgbouncer not ready after 30 s:\n{}", b.log());
            std::thread::sleep(Duration::from_millis(20));
        }
        b
    }

    fn accepts(&self) -> bool {
        std::os::unix::net::UnixStream::connect(self.root.join(format!(".s.PGSQL.{}", self.port))).is_ok()
    }

    /// Options that reach `dbname` through PgBouncer.
    pub fn options(&self, dbname: &str) -> ConnectOptions {
        ConnectOptions::unix_socket(&self.root, self.port, SUPERUSER, dbname)
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("pgbouncer.log")).unwrap_or_default()
    }
}

impl Drop for PgBouncer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
