//! PostgreSQL clusters that chute starts itself: the embedded server behind
//! `chute local` and `chute demo`, and the private clusters of the tests.
//!
//! A new user should not need a configured server to see chute work, so when
//! no server is named chute runs `initdb` and `pg_ctl` from the installed
//! PostgreSQL binaries on a data directory of its own, listening only on a
//! unix socket inside that directory, and leaves the server running for the
//! next command. PostgreSQL refuses to run as root; as root, every server
//! program runs as the `postgres` system user on a directory that user owns
//! (never under `/root`, which that user cannot enter).

use std::ffi::OsStr;
use std::fs::File;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::connect::ConnectOptions;

/// The superuser every chute-made cluster has.
pub const SUPERUSER: &str = "postgres";
/// The port number that names the socket file; no TCP port is opened.
pub const LOCAL_PORT: u16 = 5432;
/// Unix socket paths are limited to 107 bytes by the kernel.
const MAX_SOCKET_PATH: usize = 100;

#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error(
        "no PostgreSQL server binaries (initdb, pg_ctl) found on PATH or under /usr/lib/postgresql/*/bin: install them (Debian/Ubuntu: apt-get install postgresql-15) or put their directory on PATH"
    )]
    NoBinaries,
    #[error(
        "running as root, but there is no `postgres` system user to run the server as: install Debian's postgresql package, which creates it, or run chute as an ordinary user"
    )]
    NoPostgresUser,
    #[error("PostgreSQL {found} is too old: chute needs PostgreSQL 14 or newer (found {path})")]
    TooOld { found: u32, path: String },
    #[error("the socket path {0} is longer than unix sockets allow: choose a shorter --data-dir")]
    SocketPathTooLong(String),
    #[error("{program} failed (exit {code}): {detail}")]
    Program { program: String, code: String, detail: String },
    #[error("{what} {path}: {source}")]
    Io { what: &'static str, path: String, source: std::io::Error },
    #[error(
        "the postgres system user cannot reach {0} (a parent directory is closed to it): as root, choose a --data-dir outside /root, e.g. under /var/lib"
    )]
    Unreachable(String),
    #[error("{0} is not a PostgreSQL data directory (no PG_VERSION) but is not empty either: choose another --data-dir")]
    NotADataDir(String),
}

fn io_err<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> LocalError + 'a {
    move |source| LocalError::Io { what, path: path.display().to_string(), source }
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`.
#[derive(Debug, Clone)]
pub struct ServerBinaries {
    pub bin_dir: PathBuf,
    pub major_version: u32,
}

impl ServerBinaries {
    /// Finds the server binaries: `initdb` on PATH first, then the newest
    /// `/usr/lib/postgresql/*/bin`.
    pub fn locate() -> Result<Self, LocalError> {
        let mut candidates = Vec::new();
        if let Some(path) = std::env::var_os("PATH") {
            for dir in std::env::split_paths(&path) {
                let initdb = dir.join("initdb");
                if initdb.is_file() {
                    let real = std::fs::canonicalize(&initdb).unwrap_or(initdb);
                    candidates.push(real.parent().map(Path::to_path_buf).unwrap_or(dir));
                }
            }
        }
        if let Ok(entries) = std::fs::read_dir("/usr/lib/postgresql") {
            let mut versioned: Vec<(u32, PathBuf)> = entries
                .filter_map(Result::ok)
                .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
                .collect();
            versioned.sort();
            candidates.extend(versioned.into_iter().rev().map(|(_, p)| p));
        }
        let bin_dir =
            candidates.into_iter().find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file()).ok_or(LocalError::NoBinaries)?;
        let out = Command::new(bin_dir.join("pg_ctl")).arg("--version").output().map_err(io_err("cannot run", &bin_dir))?;
        let text = String::from_utf8_lossy(&out.stdout);
        let major_version = text.split_whitespace().last().and_then(|v| v.split('.').next()).and_then(|v| v.parse().ok()).unwrap_or(0);
        if major_version < 14 {
            return Err(LocalError::TooOld { found: major_version, path: bin_dir.display().to_string() });
        }
        Ok(ServerBinaries { bin_dir, major_version })
    }

    pub fn program(&self, name: &str) -> PathBuf {
        self.bin_dir.join(name)
    }
}

/// The system user a server runs as when chute itself runs as root.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunAs {
    pub uid: u32,
    pub gid: u32,
}

impl RunAs {
    /// `None` when not root (the server runs as the current user).
    pub fn for_current_user() -> Result<Option<RunAs>, LocalError> {
        if !is_root() {
            return Ok(None);
        }
        let name = std::ffi::CString::new("postgres").expect("static string");
        // SAFETY: getpwnam returns static storage or null; we copy the ids out at once.
        let pw = unsafe { libc::getpwnam(name.as_ptr()) };
        if pw.is_null() {
            return Err(LocalError::NoPostgresUser);
        }
        // SAFETY: pw was checked to be non-null above.
        let (uid, gid) = unsafe { ((*pw).pw_uid, (*pw).pw_gid) };
        Ok(Some(RunAs { uid, gid }))
    }

    /// Checks that every parent of `dir` lets this user through.
    pub fn check_reachable(&self, dir: &Path) -> Result<(), LocalError> {
        use std::os::unix::fs::MetadataExt;
        for parent in dir.ancestors().skip(1) {
            let Ok(meta) = std::fs::metadata(parent) else { continue };
            let mode = meta.mode();
            let through = if meta.uid() == self.uid {
                mode & 0o100 != 0
            } else if meta.gid() == self.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            };
            if !through {
                return Err(LocalError::Unreachable(dir.display().to_string()));
            }
        }
        Ok(())
    }

    /// Hands a path to the server's user.
    pub fn chown(&self, path: &Path) -> Result<(), LocalError> {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid)).map_err(io_err("cannot chown", path))
    }
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Is a process with this pid alive? Signal 0 reaches zombies too, which in a
/// container whose init does not reap can linger, so those count as gone.
pub fn process_alive(pid: i32) -> bool {
    // SAFETY: kill with signal 0 only checks for existence and permission.
    let exists = pid > 0 && (unsafe { libc::kill(pid, 0) } == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM));
    exists && !is_zombie(pid)
}

fn is_zombie(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    // The state follows the parenthesised command name, which may contain spaces.
    stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()).is_some_and(|state| state == "Z")
}

/// How `pg_ctl stop` shuts down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopMode {
    Smart,
    Fast,
    Immediate,
}

impl StopMode {
    fn as_str(self) -> &'static str {
        match self {
            StopMode::Smart => "smart",
            StopMode::Fast => "fast",
            StopMode::Immediate => "immediate",
        }
    }
}

/// One PostgreSQL cluster on a data directory, reached through a unix socket
/// in that same directory.
#[derive(Debug, Clone)]
pub struct Cluster {
    pub data_dir: PathBuf,
    pub port: u16,
    pub bins: ServerBinaries,
    pub run_as: Option<RunAs>,
}

impl Cluster {
    pub fn new(data_dir: PathBuf, port: u16) -> Result<Self, LocalError> {
        let socket = data_dir.join(format!(".s.PGSQL.{port}"));
        if socket.as_os_str().len() > MAX_SOCKET_PATH {
            return Err(LocalError::SocketPathTooLong(socket.display().to_string()));
        }
        Ok(Cluster { data_dir, port, bins: ServerBinaries::locate()?, run_as: RunAs::for_current_user()? })
    }

    pub fn is_initialized(&self) -> bool {
        self.data_dir.join("PG_VERSION").is_file()
    }

    pub fn log_file(&self) -> PathBuf {
        self.data_dir.join("server.log")
    }

    /// Creates the data directory with `initdb` and writes chute's settings:
    /// no TCP listener, the socket inside the data directory, and `extra`
    /// (`name = value` lines) after them.
    pub fn init(&self, extra: &[(&str, &str)]) -> Result<(), LocalError> {
        if self.data_dir.exists() {
            let empty = std::fs::read_dir(&self.data_dir).map_err(io_err("cannot read", &self.data_dir))?.next().is_none();
            if !empty {
                return Err(LocalError::NotADataDir(self.data_dir.display().to_string()));
            }
        } else {
            std::fs::create_dir_all(&self.data_dir).map_err(io_err("cannot create", &self.data_dir))?;
        }
        std::fs::set_permissions(&self.data_dir, std::fs::Permissions::from_mode(0o700)).map_err(io_err("cannot chmod", &self.data_dir))?;
        if let Some(r) = self.run_as {
            r.chown(&self.data_dir)?;
            r.check_reachable(&self.data_dir)?;
        }
        self.run(
            "initdb",
            [
                OsStr::new("-D"),
                self.data_dir.as_os_str(),
                OsStr::new("-U"),
                OsStr::new(SUPERUSER),
                OsStr::new("--auth=trust"),
                OsStr::new("--encoding=UTF8"),
                OsStr::new("--no-locale"),
                OsStr::new("--no-instructions"),
            ],
        )?;
        let mut conf = format!(
            "\n# written by chute\nlisten_addresses = ''\nunix_socket_directories = '{}'\nport = {}\n",
            self.data_dir.display().to_string().replace('\'', "''"),
            self.port
        );
        for (k, v) in extra {
            conf.push_str(&format!("{k} = {v}\n"));
        }
        let conf_path = self.data_dir.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf_path).map_err(io_err("cannot read", &conf_path))?;
        text.push_str(&conf);
        std::fs::write(&conf_path, text).map_err(io_err("cannot write", &conf_path))
    }

    /// Starts the server and waits until it accepts connections.
    pub fn start(&self) -> Result<(), LocalError> {
        let log = self.log_file();
        self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data_dir.as_os_str(),
                OsStr::new("-l"),
                log.as_os_str(),
                OsStr::new("-w"),
                OsStr::new("-t"),
                OsStr::new("120"),
                OsStr::new("start"),
            ],
        )
        .map(|_| ())
    }

    pub fn stop(&self, mode: StopMode) -> Result<(), LocalError> {
        self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data_dir.as_os_str(),
                OsStr::new("-m"),
                OsStr::new(mode.as_str()),
                OsStr::new("-w"),
                OsStr::new("stop"),
            ],
        )
        .map(|_| ())
    }

    /// Restarts the server (tests use this to interrupt loads).
    pub fn restart(&self, mode: StopMode) -> Result<(), LocalError> {
        let log = self.log_file();
        self.run(
            "pg_ctl",
            [
                OsStr::new("-D"),
                self.data_dir.as_os_str(),
                OsStr::new("-l"),
                log.as_os_str(),
                OsStr::new("-m"),
                OsStr::new(mode.as_str()),
                OsStr::new("-w"),
                OsStr::new("restart"),
            ],
        )
        .map(|_| ())
    }

    /// The postmaster's pid when it is running.
    pub fn running_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.data_dir.join("postmaster.pid")).ok()?;
        let pid: i32 = text.lines().next()?.trim().parse().ok()?;
        process_alive(pid).then_some(pid)
    }

    /// Connection options for the superuser and `dbname`.
    pub fn connect_options(&self, dbname: &str) -> ConnectOptions {
        ConnectOptions::unix_socket(&self.data_dir, self.port, SUPERUSER, dbname)
    }

    fn run<I, S>(&self, program: &str, args: I) -> Result<Output, LocalError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let path = self.bins.program(program);
        let mut cmd = Command::new(&path);
        cmd.args(args).current_dir("/").env("LC_ALL", "C").env_remove("PGDATA");
        if let Some(r) = self.run_as {
            cmd.uid(r.uid).gid(r.gid).env("HOME", "/var/lib/postgresql");
        }
        let out = cmd.output().map_err(io_err("cannot run", &path))?;
        if !out.status.success() {
            let mut detail = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            if detail.is_empty() {
                detail = String::from_utf8_lossy(&out.stdout).trim().to_owned();
            }
            if program == "pg_ctl"
                && let Ok(log) = std::fs::read_to_string(self.log_file())
            {
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                detail.push_str(&format!(
                    " (server log {}: {})",
                    self.log_file().display(),
                    tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
                ));
            }
            return Err(LocalError::Program {
                program: program.to_owned(),
                code: out.status.code().map_or("by signal".into(), |c| c.to_string()),
                detail,
            });
        }
        Ok(out)
    }
}

/// What [`LocalServer::ensure_running`] had to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartOutcome {
    AlreadyRunning,
    Started,
    Created,
}

/// The embedded server: one cluster per data directory, started on demand
/// and kept running for later commands until `chute local stop`.
#[derive(Debug)]
pub struct LocalServer {
    pub cluster: Cluster,
}

/// Settings for the embedded server: sized for bulk loading on a small
/// machine, as `shared/bench/ceiling.sh` sets its server.
const LOCAL_SETTINGS: &[(&str, &str)] =
    &[("shared_buffers", "'1GB'"), ("max_wal_size", "'16GB'"), ("checkpoint_timeout", "'30min'"), ("max_connections", "200")];

impl LocalServer {
    /// `$XDG_DATA_HOME/chute/pg` (`~/.local/share/chute/pg`); as root
    /// `/var/lib/chute/pg`, which the `postgres` user can reach.
    pub fn default_data_dir() -> PathBuf {
        if is_root() {
            return PathBuf::from("/var/lib/chute/pg");
        }
        let base = std::env::var_os("XDG_DATA_HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/share")))
            .unwrap_or_else(|| PathBuf::from("/tmp"));
        base.join("chute").join("pg")
    }

    pub fn new(data_dir: Option<PathBuf>) -> Result<Self, LocalError> {
        let dir = data_dir.unwrap_or_else(Self::default_data_dir);
        let dir = if dir.is_absolute() { dir } else { std::env::current_dir().map_err(io_err("cannot resolve", &dir))?.join(dir) };
        Ok(LocalServer { cluster: Cluster::new(dir, LOCAL_PORT)? })
    }

    /// Initializes and starts the server unless it runs already. A lock file
    /// beside the data directory makes concurrent callers wait for the first.
    pub fn ensure_running(&self) -> Result<StartOutcome, LocalError> {
        if self.cluster.running_pid().is_some() {
            return Ok(StartOutcome::AlreadyRunning);
        }
        let _lock = self.lock()?;
        if self.cluster.running_pid().is_some() {
            return Ok(StartOutcome::AlreadyRunning);
        }
        let created = if self.cluster.is_initialized() {
            false
        } else {
            self.cluster.init(LOCAL_SETTINGS)?;
            true
        };
        self.cluster.start()?;
        Ok(if created { StartOutcome::Created } else { StartOutcome::Started })
    }

    /// Stops the server; `false` when it was not running.
    pub fn stop(&self) -> Result<bool, LocalError> {
        let _lock = self.lock()?;
        if self.cluster.running_pid().is_none() {
            return Ok(false);
        }
        self.cluster.stop(StopMode::Fast)?;
        Ok(true)
    }

    pub fn connect_options(&self) -> ConnectOptions {
        self.cluster.connect_options("postgres")
    }

    fn lock(&self) -> Result<File, LocalError> {
        let parent = self.cluster.data_dir.parent().unwrap_or(Path::new("/"));
        std::fs::create_dir_all(parent).map_err(io_err("cannot create", parent))?;
        let name = format!("{}.lock", self.cluster.data_dir.file_name().and_then(|n| n.to_str()).unwrap_or("pg"));
        let path = parent.join(name);
        let file = File::options().create(true).truncate(false).write(true).open(&path).map_err(io_err("cannot open lock file", &path))?;
        file.lock().map_err(io_err("cannot lock", &path))?;
        Ok(file)
    }
}
