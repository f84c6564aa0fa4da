//! A real Prometheus server for tests: the binary of the distribution's
//! `prometheus` package (`scripts/ensure-deps` installs it), started with a
//! configuration and a data directory of its own in a temp directory, on a
//! loopback port; never the system service. It is killed and its directory
//! removed when the handle is dropped, killed with the test process if that
//! dies first (`PR_SET_PDEATHSIG`), and directories left by a test process
//! that was killed outright are removed by the next start.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

const PREFIX: &str = "chute-prom-";

/// A running Prometheus.
#[derive(Debug)]
pub struct Prometheus {
    child: Child,
    root: PathBuf,
    /// `127.0.0.1:PORT` of its web API.
    pub addr: String,
}

/// The `prometheus` binary, or the panic that says how to install it.
fn binary() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain(["/usr/bin", "/usr/local/bin"]) {
        let p = Path::new(dir).join("prometheus");
        if p.is_file() {
            return p;
        }
    }
    panic!("test fixture: no prometheus binary: run scripts/ensure-deps (it runs apt-get install prometheus), then the tests again");
}

/// A TCP port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("test fixture: cannot bind a TCP port on 127.0.0.1");
    l.local_addr().expect("a bound listener has an address").port()
}

impl Prometheus {
    /// Starts Prometheus on `port` with `config` (its YAML; `{self}` in it
    /// is replaced by its own `127.0.0.1:PORT`), and waits until it is ready.
    pub fn start(port: u16, config: &str) -> Prometheus {
        let root = crate::fresh_owned_dir(PREFIX, |_| {});
        std::fs::create_dir_all(root.join("data")).unwrap_or_else(|e| panic!("test fixture: cannot create {}: {e}", root.display()));
        let addr = format!("127.0.0.1:{port}");
        let config_path = root.join("prometheus.yml");
        std::fs::write(&config_path, config.replace("{self}", &addr)).expect("test fixture: cannot write prometheus.yml");
        let log = std::fs::File::create(root.join("prometheus.log")).expect("test fixture: cannot create prometheus.log");
        let mut cmd = Command::new(binary());
        cmd.arg(format!("--config.file={}", config_path.display()))
            .arg(format!("--storage.tsdb.path={}", root.join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--log.level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle of the log"))
            .stderr(log);
        // SAFETY: prctl in the child before exec only sets its parent-death signal.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        let child = cmd.spawn().unwrap_or_else(|e| panic!("test fixture: cannot start prometheus: {e}"));
        let mut p = Prometheus { child, root, addr };
        let began = Instant::now();
        while p.get("/-/ready").is_none_or(|(status, _)| status != 200) {
            if let Ok(Some(status)) = p.child.try_wait() {
                panic!("test fixture: prometheus exited ({status}):\n{}", p.log());
            }
            assert!(began.elapsed() < Duration::from_secs(60), "test fixture: prometheus not ready after 60 s:\n{}", p.log());
            std::thread::sleep(Duration::from_millis(50));
        }
        p
    }

    /// Takes `config` (as [`Prometheus::start`] does) with SIGHUP, and
    /// waits until it runs it: its configuration, as it shows it, changed.
    pub fn reload(&self, config: &str) {
        let before = self.get("/api/v1/status/config").map(|(_, b)| b);
        std::fs::write(self.root.join("prometheus.yml"), config.replace("{self}", &self.addr))
            .expect("test fixture: cannot write prometheus.yml");
        // SAFETY: signalling our own child.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGHUP) };
        let began = Instant::now();
        while self.get("/api/v1/status/config").map(|(_, b)| b) == before {
            assert!(
                began.elapsed() < Duration::from_secs(30),
                "test fixture: prometheus did not take its new configuration:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What it logged.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.root.join("prometheus.log")).unwrap_or_default()
    }

    /// `GET path` of its web API: the status and the body, `None` when it does not answer.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        let mut s = std::net::TcpStream::connect(&self.addr).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(30))).ok()?;
        write!(s, "GET {path} HTTP/1.0\r\nHost: {}\r\n\r\n", self.addr).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        let status = out.split(' ').nth(1)?.parse().ok()?;
        let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
        Some((status, body))
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.root);
    }
}
