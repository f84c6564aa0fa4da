//! Connecting the way libpq does.
//!
//! tokio-postgres parses URLs and `key=value` strings but reads no environment
//! variables and no password file, so a user who can run `psql` with their
//! `PGHOST`/`PGUSER`/`~/.pgpass` set-up could not run chute with it. This
//! module fills that gap: parameters given in `--url` win, then the `PG*`
//! environment variables, then libpq's defaults (the Debian socket directory,
//! the OS user name, a database named like the user), and a missing password
//! is looked up in `~/.pgpass` (or `PGPASSFILE`) exactly as libpq matches it.
//! Connection failures become one line that says what to do next.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use tokio_postgres::config::{Host, SslMode as PgSslMode};

/// Where libpq on Debian looks for a server when no host is given.
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";
pub const DEFAULT_PORT: u16 = 5432;

/// The environment variables that mean "a server is configured".
pub const PG_ENV_VARS: &[&str] = &["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE"];

/// libpq's `sslmode` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum SslMode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl FromStr for SslMode {
    type Err = ConnectError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "disable" => SslMode::Disable,
            "allow" => SslMode::Allow,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            other => {
                return Err(ConnectError::Invalid(format!(
                    "sslmode {other:?} is not one of disable, allow, prefer, require, verify-ca, verify-full"
                )));
            }
        })
    }
}

/// One server address: a TCP host name or a unix socket directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Tcp(String),
    Unix(PathBuf),
}

impl Endpoint {
    /// The host name libpq matches `~/.pgpass` lines against: a socket
    /// connection matches `localhost`.
    fn pgpass_host(&self) -> &str {
        match self {
            Endpoint::Tcp(h) => h,
            Endpoint::Unix(_) => "localhost",
        }
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Endpoint::Tcp(h) => write!(f, "{h}"),
            Endpoint::Unix(p) => write!(f, "{}", p.display()),
        }
    }
}

/// Fully resolved connection parameters. The password is never shown: not
/// in `Debug`, not in [`ConnectOptions::display_url`].
#[derive(Clone)]
pub struct ConnectOptions {
    pub hosts: Vec<Endpoint>,
    pub port: u16,
    pub user: String,
    pub dbname: String,
    password: Option<String>,
    pub sslmode: SslMode,
    /// CA certificates for `verify-ca`/`verify-full` (`sslrootcert`).
    pub sslrootcert: Option<PathBuf>,
    pub application_name: String,
    pub connect_timeout: Option<Duration>,
    /// Extra server settings sent at start-up (`options=-c …` / `PGOPTIONS`).
    pub options: Option<String>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("hosts", &self.hosts)
            .field("port", &self.port)
            .field("user", &self.user)
            .field("dbname", &self.dbname)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("sslmode", &self.sslmode)
            .finish()
    }
}

/// What went wrong while resolving or opening a connection. Every message is
/// one line and ends with what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("invalid connection settings: {0}")]
    Invalid(String),
    #[error(
        "password authentication failed for user {user:?} at {endpoint}: set PGPASSWORD, add a line to ~/.pgpass, or put the password in the --url"
    )]
    BadPassword { user: String, endpoint: String },
    #[error("the server at {endpoint} requires a password for user {user:?} and none was given: set PGPASSWORD or add a line to ~/.pgpass")]
    NoPassword { user: String, endpoint: String },
    #[error("database {dbname:?} does not exist on {endpoint}: create it (createdb {dbname}) or name another with --url or PGDATABASE")]
    NoDatabase { dbname: String, endpoint: String },
    #[error("the server at {endpoint} refused user {user:?}: {message}")]
    Refused { user: String, endpoint: String, message: String },
    #[error("could not connect to {endpoint}: {reason}. Is the server running there? Check --url, PGHOST and PGPORT")]
    Unreachable { endpoint: String, reason: String },
    #[error("sslmode={0:?} needs TLS, which this build of chute does not speak yet; use sslmode=disable or prefer on a trusted network")]
    TlsUnsupported(SslMode),
}

/// A source of environment variables, so resolution is testable without
/// touching the process environment.
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<const N: usize> Env for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }
}

/// True when the user configured a server through `PG*` variables.
pub fn env_names_a_server(env: &dyn Env) -> bool {
    PG_ENV_VARS.iter().any(|v| env.var(v).is_some())
}

impl ConnectOptions {
    /// Resolves `url` (a `postgres://` URL or a `key=value` string, or none)
    /// against the environment and the password file, as libpq does.
    pub fn resolve(url: Option<&str>, env: &dyn Env) -> Result<Self, ConnectError> {
        // tokio-postgres knows only some TLS settings; chute reads them itself.
        let (rest, tls) = match url {
            Some(u) => split_tls_params(u),
            None => (String::new(), Vec::new()),
        };
        let tls_param = |k: &str| tls.iter().find(|(key, _)| key == k).map(|(_, v)| v.clone());
        let given = match url {
            Some(u) => tokio_postgres::Config::from_str(&rest).map_err(|e| ConnectError::Invalid(format!("{e} in {:?}", redact(u))))?,
            None => tokio_postgres::Config::new(),
        };
        let mut hosts: Vec<Endpoint> = given
            .get_hosts()
            .iter()
            .map(|h| match h {
                Host::Tcp(s) => Endpoint::Tcp(s.clone()),
                Host::Unix(p) => Endpoint::Unix(p.clone()),
            })
            .collect();
        if hosts.is_empty() {
            hosts = match env.var("PGHOST") {
                Some(list) => list.split(',').map(parse_host).collect(),
                None if Path::new(DEFAULT_SOCKET_DIR).is_dir() => vec![Endpoint::Unix(DEFAULT_SOCKET_DIR.into())],
                None => vec![Endpoint::Tcp("localhost".into())],
            };
        }
        let port = match given.get_ports().first() {
            Some(p) => *p,
            None => match env.var("PGPORT") {
                Some(p) => p.parse().map_err(|_| ConnectError::Invalid(format!("PGPORT={p:?} is not a port number")))?,
                None => DEFAULT_PORT,
            },
        };
        let user = given.get_user().map(str::to_owned).or_else(|| env.var("PGUSER")).unwrap_or_else(os_user_name);
        let dbname = given.get_dbname().map(str::to_owned).or_else(|| env.var("PGDATABASE")).unwrap_or_else(|| user.clone());
        let sslmode = match tls_param("sslmode").or_else(|| env.var("PGSSLMODE")) {
            Some(m) => m.parse()?,
            None => SslMode::Prefer,
        };
        let sslrootcert = tls_param("sslrootcert").or_else(|| env.var("PGSSLROOTCERT")).map(PathBuf::from);
        let application_name =
            given.get_application_name().map(str::to_owned).or_else(|| env.var("PGAPPNAME")).unwrap_or_else(|| "chute".into());
        let connect_timeout = given
            .get_connect_timeout()
            .copied()
            .or_else(|| env.var("PGCONNECT_TIMEOUT").and_then(|s| s.parse::<u64>().ok()).filter(|s| *s > 0).map(Duration::from_secs));
        let options = given.get_options().map(str::to_owned).or_else(|| env.var("PGOPTIONS"));
        let mut opts =
            ConnectOptions { hosts, port, user, dbname, password: None, sslmode, sslrootcert, application_name, connect_timeout, options };
        opts.password = match given.get_password() {
            Some(p) => Some(String::from_utf8_lossy(p).into_owned()),
            None => env.var("PGPASSWORD").or_else(|| {
                let file = env.var("PGPASSFILE").map(PathBuf::from).or_else(|| home_dir().map(|h| h.join(".pgpass")))?;
                pgpass_lookup(&file, &opts)
            }),
        };
        Ok(opts)
    }

    /// Options for a server on a unix socket with trust authentication (the
    /// embedded server and the test clusters).
    pub fn unix_socket(socket_dir: &Path, port: u16, user: &str, dbname: &str) -> Self {
        ConnectOptions {
            hosts: vec![Endpoint::Unix(socket_dir.to_owned())],
            port,
            user: user.to_owned(),
            dbname: dbname.to_owned(),
            password: None,
            sslmode: SslMode::Disable,
            sslrootcert: None,
            application_name: "chute".into(),
            connect_timeout: None,
            options: None,
        }
    }

    /// The same server, another database.
    pub fn with_dbname(&self, dbname: &str) -> Self {
        ConnectOptions { dbname: dbname.to_owned(), ..self.clone() }
    }

    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// A URL that reaches the same server, with the password left out (a
    /// password from the environment or `~/.pgpass` is found again there).
    pub fn display_url(&self) -> String {
        let mut url = String::from("postgresql://");
        let mut query = Vec::new();
        let tcp: Vec<&str> = self.hosts.iter().filter_map(|h| if let Endpoint::Tcp(t) = h { Some(t.as_str()) } else { None }).collect();
        url.push_str(&percent_encode(&self.user));
        url.push('@');
        if tcp.len() == self.hosts.len() {
            url.push_str(&tcp.join(","));
            if self.port != DEFAULT_PORT {
                url.push_str(&format!(":{}", self.port));
            }
        } else {
            for h in &self.hosts {
                query.push(format!("host={}", percent_encode(&h.to_string()).replace("%2F", "/")));
            }
            if self.port != DEFAULT_PORT {
                query.push(format!("port={}", self.port));
            }
        }
        url.push('/');
        url.push_str(&percent_encode(&self.dbname));
        if self.sslmode != SslMode::Prefer && self.hosts.iter().any(|h| matches!(h, Endpoint::Tcp(_))) {
            query.push(format!(
                "sslmode={}",
                serde_json::to_value(self.sslmode).ok().and_then(|v| v.as_str().map(str::to_owned)).unwrap_or_default()
            ));
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }

    /// `host:port` or the socket path, for messages.
    pub fn endpoint_label(&self) -> String {
        let hosts: Vec<String> = self
            .hosts
            .iter()
            .map(|h| match h {
                Endpoint::Tcp(t) => format!("{t}:{}", self.port),
                Endpoint::Unix(p) => format!("{}/.s.PGSQL.{}", p.display(), self.port),
            })
            .collect();
        hosts.join(",")
    }

    /// The tokio-postgres configuration for these options.
    pub fn to_config(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        for h in &self.hosts {
            match h {
                Endpoint::Tcp(t) => c.host(t),
                Endpoint::Unix(p) => c.host_path(p),
            };
        }
        c.port(self.port).user(&self.user).dbname(&self.dbname).application_name(&self.application_name);
        if let Some(p) = &self.password {
            c.password(p);
        }
        if let Some(t) = self.connect_timeout {
            c.connect_timeout(t);
        }
        if let Some(o) = &self.options {
            c.options(o);
        }
        c.ssl_mode(match self.sslmode {
            SslMode::Disable | SslMode::Allow | SslMode::Prefer => PgSslMode::Disable,
            _ => PgSslMode::Require,
        });
        c
    }

    /// Opens a connection; its driver task runs on the current tokio runtime
    /// and ends when the returned client is dropped.
    pub async fn connect(&self) -> Result<tokio_postgres::Client, ConnectError> {
        if matches!(self.sslmode, SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull) {
            return Err(ConnectError::TlsUnsupported(self.sslmode));
        }
        let (client, connection) = self.to_config().connect(tokio_postgres::NoTls).await.map_err(|e| self.explain(e))?;
        tokio::spawn(async move {
            // Errors surface on the client's next call; nothing to do here.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// Turns a connection failure into one line that says what to do.
    pub fn explain(&self, e: tokio_postgres::Error) -> ConnectError {
        let endpoint = self.endpoint_label();
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            return match code {
                "28P01" => ConnectError::BadPassword { user: self.user.clone(), endpoint },
                "3D000" => ConnectError::NoDatabase { dbname: self.dbname.clone(), endpoint },
                _ => ConnectError::Refused { user: self.user.clone(), endpoint, message: format!("{} (SQLSTATE {code})", db.message()) },
            };
        }
        let text = e.to_string();
        if text.contains("password missing") {
            return ConnectError::NoPassword { user: self.user.clone(), endpoint };
        }
        let mut reason = text;
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            reason = s.to_string();
            source = s.source();
        }
        ConnectError::Unreachable { endpoint, reason }
    }
}

fn parse_host(h: &str) -> Endpoint {
    if h.starts_with('/') { Endpoint::Unix(PathBuf::from(h)) } else { Endpoint::Tcp(h.to_owned()) }
}

/// The TLS parameters chute handles itself (tokio-postgres rejects the
/// verify modes), taken out of a URL's query or a key=value string.
const TLS_KEYS: &[&str] = &["sslmode", "sslrootcert", "sslcert", "sslkey"];

fn split_tls_params(conn: &str) -> (String, Vec<(String, String)>) {
    let mut found = Vec::new();
    let mut take = |kv: &str| -> bool {
        match kv.split_once('=') {
            Some((k, v)) if TLS_KEYS.contains(&k.trim()) => {
                found.push((k.trim().to_owned(), v.trim().trim_matches('\'').to_owned()));
                true
            }
            _ => false,
        }
    };
    if conn.contains("://") {
        let Some((base, query)) = conn.split_once('?') else { return (conn.to_owned(), found) };
        let kept: Vec<&str> = query.split('&').filter(|kv| !take(kv)).collect();
        let rest = if kept.is_empty() { base.to_owned() } else { format!("{base}?{}", kept.join("&")) };
        (rest, found)
    } else {
        let kept: Vec<&str> = conn.split_whitespace().filter(|kv| !take(kv)).collect();
        (kept.join(" "), found)
    }
}

/// Hides a password in a URL or key=value string before it is shown.
pub fn redact(conn: &str) -> String {
    if let Some(scheme_end) = conn.find("://") {
        let rest = &conn[scheme_end + 3..];
        let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@')
            && let Some(colon) = rest[..at].find(':')
        {
            return format!("{}{}:<hidden>{}", &conn[..scheme_end + 3], &rest[..colon], &rest[at..]);
        }
        return conn.to_owned();
    }
    conn.split_whitespace()
        .map(|kv| if kv.starts_with("password=") { "password=<hidden>".to_owned() } else { kv.to_owned() })
        .collect::<Vec<_>>()
        .join(" ")
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// The OS user name, libpq's default user.
pub fn os_user_name() -> String {
    if let Some(u) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    // SAFETY: getpwuid returns a pointer into static storage or null; we copy
    // the name out before any other call could overwrite it.
    unsafe {
        let pw = libc::getpwuid(libc::geteuid());
        if !pw.is_null() && !(*pw).pw_name.is_null() {
            return std::ffi::CStr::from_ptr((*pw).pw_name).to_string_lossy().into_owned();
        }
    }
    "postgres".into()
}

/// Looks a password up in a pgpass file: the first line whose host, port,
/// database and user match (`*` matches anything; `\:` and `\\` escape).
/// Like libpq, a file readable by group or others is ignored.
pub fn pgpass_lookup(file: &Path, opts: &ConnectOptions) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(file).ok()?;
    if meta.permissions().mode() & 0o077 != 0 {
        eprintln!("chute: warning: password file {} has group or world access; ignoring it (chmod 0600 it)", file.display());
        return None;
    }
    let text = std::fs::read_to_string(file).ok()?;
    let port = opts.port.to_string();
    for host in &opts.hosts {
        let want = [host.pgpass_host(), port.as_str(), opts.dbname.as_str(), opts.user.as_str()];
        for line in text.lines() {
            if line.trim_start().starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let fields = split_pgpass_line(line);
            if fields.len() < 5 {
                continue;
            }
            if want.iter().zip(&fields).all(|(w, f)| f == "*" || f == w) {
                return Some(fields[4].clone());
            }
        }
    }
    None
}

fn split_pgpass_line(line: &str) -> Vec<String> {
    let mut fields = vec![String::new()];
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                if let Some(n) = chars.next() {
                    fields.last_mut().expect("never empty").push(n);
                }
            }
            ':' if fields.len() < 5 => fields.push(String::new()),
            c => fields.last_mut().expect("never empty").push(c),
        }
    }
    fields
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_wins_over_environment() {
        let env = [("PGHOST", "envhost"), ("PGPORT", "6000"), ("PGUSER", "envuser"), ("PGDATABASE", "envdb")];
        let o = ConnectOptions::resolve(Some("postgres://alice@db.example:5433/metrics"), &env).unwrap();
        assert_eq!(o.hosts, vec![Endpoint::Tcp("db.example".into())]);
        assert_eq!((o.port, o.user.as_str(), o.dbname.as_str()), (5433, "alice", "metrics"));
    }

    #[test]
    fn environment_fills_what_the_string_leaves_out() {
        let env = [("PGHOST", "/tmp/sock"), ("PGPORT", "6000"), ("PGUSER", "envuser"), ("PGPASSWORD", "s3cret")];
        let o = ConnectOptions::resolve(Some("dbname=metrics"), &env).unwrap();
        assert_eq!(o.hosts, vec![Endpoint::Unix("/tmp/sock".into())]);
        assert_eq!((o.port, o.user.as_str(), o.dbname.as_str()), (6000, "envuser", "metrics"));
        assert!(o.has_password());
        assert!(!format!("{o:?}").contains("s3cret"));
        assert!(!o.display_url().contains("s3cret"));
    }

    #[test]
    fn database_defaults_to_user() {
        let env = [("PGUSER", "bob")];
        let o = ConnectOptions::resolve(None, &env).unwrap();
        assert_eq!(o.dbname, "bob");
    }

    #[test]
    fn socket_url_forms() {
        let env: [(&str, &str); 0] = [];
        let o = ConnectOptions::resolve(Some("postgresql:///db?host=/var/lib/chute/pg&port=5499&user=postgres"), &env).unwrap();
        assert_eq!(o.hosts, vec![Endpoint::Unix("/var/lib/chute/pg".into())]);
        assert_eq!(o.port, 5499);
        let again = ConnectOptions::resolve(Some(&o.display_url()), &env).unwrap();
        assert_eq!((again.hosts, again.port, again.user, again.dbname), (o.hosts, o.port, o.user, o.dbname));
        let o = ConnectOptions::resolve(Some("postgresql://%2Ftmp%2Fs/db"), &env).unwrap();
        assert_eq!(o.hosts, vec![Endpoint::Unix("/tmp/s".into())]);
    }

    #[test]
    fn sslmode_from_url_then_env() {
        let env = [("PGSSLMODE", "require")];
        assert_eq!(ConnectOptions::resolve(Some("host=h"), &env).unwrap().sslmode, SslMode::Require);
        assert_eq!(ConnectOptions::resolve(Some("postgres://h/d?sslmode=verify-full"), &env).unwrap().sslmode, SslMode::VerifyFull);
        assert!(ConnectOptions::resolve(None, &[("PGSSLMODE", "bogus")]).is_err());
    }

    #[test]
    fn redact_hides_passwords() {
        assert_eq!(redact("postgres://u:pw@h:5/d"), "postgres://u:<hidden>@h:5/d");
        assert_eq!(redact("host=h password=pw user=u"), "host=h password=<hidden> user=u");
        assert_eq!(redact("postgres://u@h/d"), "postgres://u@h/d");
    }

    #[test]
    fn pgpass_matching() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "# comment\nother:*:*:*:nope\nlocalhost:5432:*:alice:a\\:b\\\\c\n*:*:*:*:fallback\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let env: [(&str, &str); 0] = [];
        let mut o = ConnectOptions::resolve(Some("host=/tmp user=alice dbname=x"), &env).unwrap();
        assert_eq!(pgpass_lookup(&file, &o).as_deref(), Some("a:b\\c"));
        o.user = "carol".into();
        assert_eq!(pgpass_lookup(&file, &o).as_deref(), Some("fallback"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(pgpass_lookup(&file, &o), None);
    }
}
