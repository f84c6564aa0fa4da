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
//!
//! TLS follows libpq too: `sslmode` (disable, allow, prefer, require,
//! verify-ca, verify-full) and `sslrootcert` come from the string or from
//! `PGSSLMODE`/`PGSSLROOTCERT`, `~/.postgresql/root.crt` is the default root
//! file, and a unix socket never carries TLS. Each host is tried on its own so
//! that a list mixing sockets and TCP hosts behaves per host, as in libpq.
//! `sslrootcert=system` trusts the operating system's CA bundle
//! (`SSL_CERT_FILE`, else Debian's `/etc/ssl/certs/ca-certificates.crt`) and,
//! as in libpq, makes verify-full the default and any weaker mode an error.
//!
//! A client certificate is sent when the server asks for one: `sslcert` and
//! `sslkey` (or `PGSSLCERT`/`PGSSLKEY`, else `~/.postgresql/postgresql.crt`
//! and `postgresql.key`), PEM files, the certificate file used only if it
//! exists. The key may be PKCS#8, PKCS#1 (RSA) or SEC1 (EC); encrypted keys
//! (libpq's `sslpassword`) are refused with what to do instead. As libpq does,
//! a key file that its group or others may read is refused (0600 or less, or
//! 0640 or less when owned by root), and only when the key is about to be
//! used: on a TLS attempt with a certificate.
//!
//! The TLS stack is rustls (with ring), set up in the `tls` module below to
//! check what libpq checks for each mode rather than what rustls checks by
//! default.

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use std::net::IpAddr;

use tokio_postgres::config::{ChannelBinding, SslMode as PgSslMode, TargetSessionAttrs};
use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
use tokio_postgres::{Client, Socket};

pub mod conninfo;
mod params;

pub use conninfo::redact;

/// Where libpq on Debian looks for a server when no host is given.
pub const DEFAULT_SOCKET_DIR: &str = "/var/run/postgresql";
pub const DEFAULT_PORT: u16 = 5432;

/// Where libpq looks for root certificates when `sslrootcert` is not given,
/// under the home directory.
pub const DEFAULT_ROOT_CERT: &str = ".postgresql/root.crt";

/// Where libpq looks for the client certificate and its private key when
/// `sslcert` / `sslkey` are not given, under the home directory.
pub const DEFAULT_CLIENT_CERT: &str = ".postgresql/postgresql.crt";
pub const DEFAULT_CLIENT_KEY: &str = ".postgresql/postgresql.key";

/// The operating system's CA bundle (Debian's `ca-certificates`), trusted
/// for `sslrootcert=system` unless `SSL_CERT_FILE` names another, as OpenSSL
/// (and so libpq) does.
pub const SYSTEM_ROOTS_FILE: &str = "/etc/ssl/certs/ca-certificates.crt";

/// The `sslrootcert` value that means the operating system's roots.
const SYSTEM_ROOTS: &str = "system";

/// The environment variables that mean "a server is configured".
pub const PG_ENV_VARS: &[&str] = &["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE"];

/// The socket directory libpq matches `.pgpass` lines as `localhost` for
/// (its compiled-in default; any other socket path is matched as written).
const PGPASS_DEFAULT_SOCKET: &str = DEFAULT_SOCKET_DIR;

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

impl SslMode {
    /// The name libpq spells it with.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Allow => "allow",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    /// Whether the server's certificate must chain to a root certificate.
    fn verifies(self) -> bool {
        matches!(self, SslMode::VerifyCa | SslMode::VerifyFull)
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
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
    fn pgpass_host(&self) -> String {
        match self {
            Endpoint::Tcp(h) => h.clone(),
            Endpoint::Unix(p) if p == Path::new(PGPASS_DEFAULT_SOCKET) || p == Path::new("/run/postgresql") => "localhost".into(),
            Endpoint::Unix(p) => p.display().to_string(),
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
    /// The first host's port; [`ConnectOptions::ports`] has each host's.
    pub port: u16,
    /// One port per host, in the order of `hosts`.
    pub ports: Vec<u16>,
    /// libpq's `hostaddr` per host: the address connected to, while the
    /// host name is kept for TLS and the password file.
    hostaddrs: Vec<Option<IpAddr>>,
    pub user: String,
    pub dbname: String,
    password: Option<String>,
    pub sslmode: SslMode,
    /// The root certificate file as given (`sslrootcert`); when it is not
    /// given, `~/.postgresql/root.crt` is used if it exists, as in libpq.
    pub sslrootcert: Option<PathBuf>,
    /// The client certificate file as given (`sslcert`, `PGSSLCERT`); when it
    /// is not given, `~/.postgresql/postgresql.crt` is sent if it exists.
    pub sslcert: Option<PathBuf>,
    /// The client certificate's private key file as given (`sslkey`,
    /// `PGSSLKEY`); the default is `~/.postgresql/postgresql.key`.
    pub sslkey: Option<PathBuf>,
    /// `SSL_CERT_FILE`: the CA bundle `sslrootcert=system` trusts instead of
    /// [`SYSTEM_ROOTS_FILE`].
    ssl_cert_file: Option<PathBuf>,
    /// The home directory the default root certificate file, client
    /// certificate and key are found under.
    home: Option<PathBuf>,
    pub application_name: String,
    pub connect_timeout: Option<Duration>,
    /// Extra server settings sent at start-up (`options=-c …` / `PGOPTIONS`,
    /// and `PGDATESTYLE`, `PGTZ`, `PGGEQO` as libpq sends them).
    pub options: Option<String>,
    /// Keepalives, timeouts, target_session_attrs, channel_binding.
    session: Session,
    /// Why no password came from the password file, when it was ignored.
    pgpass_note: Option<String>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConnectOptions")
            .field("hosts", &self.hosts)
            .field("ports", &self.ports)
            .field("hostaddrs", &self.hostaddrs)
            .field("user", &self.user)
            .field("dbname", &self.dbname)
            .field("password", &self.password.as_ref().map(|_| "<hidden>"))
            .field("sslmode", &self.sslmode)
            .field("sslrootcert", &self.sslrootcert)
            .field("sslcert", &self.sslcert)
            .field("sslkey", &self.sslkey)
            .field("options", &self.options)
            .field("session", &self.session)
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
    #[error("the server at {endpoint} requires a password for user {user:?} and none was given: {}", no_password_advice(.note))]
    NoPassword { user: String, endpoint: String, note: Option<String> },
    #[error("database {dbname:?} does not exist on {endpoint}: create it (createdb {dbname}) or name another with --url or PGDATABASE")]
    NoDatabase { dbname: String, endpoint: String },
    #[error("the server at {endpoint} refused user {user:?}: {message}")]
    Refused { user: String, endpoint: String, message: String },
    #[error(
        "the server at {endpoint} did not use channel binding, which channel_binding=require demands: it needs TLS (not a unix socket) and SCRAM password authentication; or leave channel_binding out ({reason})"
    )]
    NoChannelBinding { endpoint: String, reason: String },
    #[error("could not connect to {endpoint}: {reason}. Is the server running there? Check --url, PGHOST and PGPORT")]
    Unreachable { endpoint: String, reason: String },
    /// The server is starting up, shutting down or out of connection slots
    /// (57P01, 57P02, 57P03, 53300): worth trying again a moment later.
    #[error("the server at {endpoint} does not accept connections now: {message}; wait for it or raise --retry-for")]
    Unavailable { endpoint: String, message: String },
    #[error(
        "the server at {endpoint} does not accept TLS (sslmode={mode}): turn on ssl in its postgresql.conf, or use sslmode=prefer to fall back to an unencrypted connection"
    )]
    TlsNotAccepted { endpoint: String, mode: SslMode },
    #[error("certificate verification failed for {endpoint} (sslmode={mode}): {reason}; {advice}")]
    CertificateRejected { endpoint: String, mode: SslMode, reason: String, advice: &'static str },
    #[error(
        "TLS handshake with {endpoint} failed (sslmode={mode}): {reason}; check the server's ssl settings (ssl_min_protocol_version, ssl_ciphers) or its log"
    )]
    TlsHandshake { endpoint: String, mode: SslMode, reason: String },
    #[error(
        "sslmode={mode} checks the server's certificate against a root certificate, but the root certificate file {path} does not exist: put the CA certificate there or name it with sslrootcert=PATH (in --url or PGSSLROOTCERT), or use sslmode=require to encrypt without checking"
    )]
    NoRootCert { mode: SslMode, path: String },
    #[error(
        "sslmode={mode} checks the server's certificate against a root certificate, but no home directory is known to find ~/.postgresql/root.crt in: name the CA certificate with sslrootcert=PATH (in --url or PGSSLROOTCERT)"
    )]
    NoHomeForRootCert { mode: SslMode },
    #[error(
        "cannot use the root certificate file {path}: {reason}; sslrootcert must name a file of PEM certificates (-----BEGIN CERTIFICATE-----)"
    )]
    BadRootCert { path: String, reason: String },
    #[error(
        "sslmode={mode} may not be used with sslrootcert=system: anyone can get a certificate from a public CA for a host name of their own, so only sslmode=verify-full, which checks the name, goes with it, as in libpq (leave sslmode out, or set it to verify-full)"
    )]
    WeakModeWithSystemRoots { mode: SslMode },
    #[error(
        "sslrootcert=system trusts the operating system's root certificates, but {path} {reason}: install the ca-certificates package, or point SSL_CERT_FILE at a file of PEM CA certificates"
    )]
    NoSystemRoots { path: String, reason: String },
    #[error(
        "cannot use the client certificate file {path}: {reason}; sslcert must name a file of PEM certificates (-----BEGIN CERTIFICATE-----), the client's own first"
    )]
    BadClientCert { path: String, reason: String },
    #[error("the client certificate {cert} has no private key: {looked}; name the key file with sslkey=FILE (in --url or PGSSLKEY)")]
    NoClientKey { cert: String, looked: String },
    #[error(
        "the private key file {path} has group or world access (mode {mode:04o}): run chmod 0600 {path} (libpq refuses such a key too: it must be 0600 or less, or 0640 or less if owned by root)"
    )]
    KeyPermissions { path: String, mode: u32 },
    #[error(
        "cannot use the private key file {path}: {reason}; sslkey must name an unencrypted PEM private key (PKCS#8 -----BEGIN PRIVATE KEY-----, RSA or EC)"
    )]
    BadClientKey { path: String, reason: String },
    #[error(
        "the private key file {path} is encrypted, and chute cannot decrypt keys (sslpassword is not supported): write a decrypted copy with openssl pkey -in {path} -out FILE, chmod 0600 FILE, and name it with sslkey=FILE"
    )]
    EncryptedClientKey { path: String },
    #[error(
        "the private key {key} does not belong to the client certificate {cert}: name the certificate's own key with sslkey=FILE (in --url or PGSSLKEY)"
    )]
    ClientKeyMismatch { cert: String, key: String },
    #[error(
        "the server at {endpoint} requires a client certificate from user {user:?} and none was sent ({looked}): name the certificate and its key with sslcert=FILE and sslkey=FILE (in --url, or PGSSLCERT and PGSSLKEY), or put them at ~/.postgresql/postgresql.crt and ~/.postgresql/postgresql.key"
    )]
    NoClientCert { user: String, endpoint: String, looked: String },
    #[error("the server at {endpoint} refused the client certificate {path}: {reason}; {advice}")]
    ClientCertRefused { endpoint: String, path: String, reason: String, advice: &'static str },
}

fn no_password_advice(note: &Option<String>) -> String {
    match note {
        Some(note) => format!("{note}; or set PGPASSWORD"),
        None => "set PGPASSWORD or add a line to ~/.pgpass".into(),
    }
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
        let p = params::Params::gather(url, env)?;
        let invalid = |msg: String| ConnectError::Invalid(msg);
        let list = |key: &str| p.value(key).map(|v| v.split(',').map(|s| s.trim().to_owned()).collect::<Vec<_>>());
        let hostaddr_list = list("hostaddr").unwrap_or_default();
        let mut hosts: Vec<Endpoint> = match list("host") {
            Some(hs) => hs.iter().enumerate().map(|(i, h)| default_host(h, hostaddr_list.get(i))).collect(),
            None if !hostaddr_list.is_empty() => hostaddr_list.iter().map(|a| Endpoint::Tcp(a.clone())).collect(),
            None => vec![default_host("", None)],
        };
        if hosts.is_empty() {
            hosts.push(default_host("", None));
        }
        let n = hosts.len();
        let per_host = |key: &str, values: Vec<String>| -> Result<Vec<String>, ConnectError> {
            match values.len() {
                1 => Ok(vec![values[0].clone(); n]),
                m if m == n => Ok(values),
                m => Err(invalid(format!(
                    "{} has {m} entries for {n} hosts: give one, or one per host",
                    p.get(key).map_or(key.to_owned(), |(_, o)| o.name(key))
                ))),
            }
        };
        let ports = per_host("port", list("port").unwrap_or_else(|| vec![String::new()]))?
            .iter()
            .map(|s| match s.as_str() {
                "" => Ok(DEFAULT_PORT),
                s => s.parse::<u16>().map_err(|_| {
                    invalid(format!("{}={s:?} is not a port number", p.get("port").map_or("port".into(), |(_, o)| o.name("port"))))
                }),
            })
            .collect::<Result<Vec<u16>, _>>()?;
        let hostaddrs = if hostaddr_list.is_empty() {
            vec![None; n]
        } else {
            per_host("hostaddr", hostaddr_list)?
                .iter()
                .map(|a| match a.as_str() {
                    "" => Ok(None),
                    a => a
                        .parse::<IpAddr>()
                        .map(Some)
                        .map_err(|_| invalid(format!("hostaddr {a:?} is not an IP address (host names go in host=)"))),
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        let user = p.value("user").unwrap_or_else(os_user_name);
        let dbname = p.value("dbname").unwrap_or_else(|| user.clone());
        let sslrootcert = p.value("sslrootcert").map(PathBuf::from);
        // libpq: the system's roots are trusted for verify-full only, which
        // is then the default; a weaker mode, even from PGSSLMODE, is an error.
        let system_roots = sslrootcert.as_deref() == Some(Path::new(SYSTEM_ROOTS));
        let sslmode = match p.value("sslmode") {
            Some(m) => match m.parse()? {
                SslMode::VerifyFull => SslMode::VerifyFull,
                mode if system_roots => return Err(ConnectError::WeakModeWithSystemRoots { mode }),
                mode => mode,
            },
            None if system_roots => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        let sslcert = p.value("sslcert").map(PathBuf::from);
        let sslkey = p.value("sslkey").map(PathBuf::from);
        let ssl_cert_file = env.var("SSL_CERT_FILE").map(PathBuf::from);
        let application_name =
            p.value("application_name").or_else(|| p.value("fallback_application_name")).unwrap_or_else(|| "chute".into());
        let connect_timeout = p.seconds("connect_timeout")?.filter(|s| *s > 0).map(|s| Duration::from_secs(s.max(2)));
        // libpq sends PGDATESTYLE, PGTZ and PGGEQO as session settings at
        // start-up; the options parameter carries them here.
        let mut options = p.value("options");
        for (var, setting) in params::SESSION_ENV {
            if let Some(v) = env.var(var) {
                let set = format!("-c {setting}={}", params::options_escape(&v));
                options = Some(match options {
                    Some(o) => format!("{set} {o}"),
                    None => set,
                });
            }
        }
        let session = Session::from_params(&p)?;
        let home = env.var("HOME").map(PathBuf::from);
        let mut opts = ConnectOptions {
            hosts,
            port: ports[0],
            ports,
            hostaddrs,
            user,
            dbname,
            password: None,
            sslmode,
            sslrootcert,
            sslcert,
            sslkey,
            ssl_cert_file,
            home,
            application_name,
            connect_timeout,
            options,
            session,
            pgpass_note: None,
        };
        opts.password = match p.value("password") {
            Some(pw) => Some(pw),
            None => {
                let file = p.value("passfile").map(PathBuf::from).or_else(|| home_dir().map(|h| h.join(".pgpass")));
                match file {
                    Some(file) => match pgpass_read(&file, &opts) {
                        Ok(pw) => pw,
                        Err(note) => {
                            opts.pgpass_note = Some(note);
                            None
                        }
                    },
                    None => None,
                }
            }
        };
        Ok(opts)
    }

    /// Options for a server on a unix socket with trust authentication (the
    /// embedded server and the test clusters).
    pub fn unix_socket(socket_dir: &Path, port: u16, user: &str, dbname: &str) -> Self {
        ConnectOptions {
            hosts: vec![Endpoint::Unix(socket_dir.to_owned())],
            port,
            ports: vec![port],
            hostaddrs: vec![None],
            user: user.to_owned(),
            dbname: dbname.to_owned(),
            password: None,
            sslmode: SslMode::Disable,
            sslrootcert: None,
            sslcert: None,
            sslkey: None,
            ssl_cert_file: None,
            home: home_dir(),
            application_name: "chute".into(),
            connect_timeout: None,
            options: None,
            session: Session::default(),
            pgpass_note: None,
        }
    }

    /// The same server, another database.
    pub fn with_dbname(&self, dbname: &str) -> Self {
        ConnectOptions { dbname: dbname.to_owned(), ..self.clone() }
    }

    pub fn has_password(&self) -> bool {
        self.password.is_some()
    }

    /// The password, only to hand to a child process (psql) in its
    /// environment as `PGPASSWORD`, never on its command line.
    pub fn password_for_child_env(&self) -> Option<&str> {
        self.password.as_deref()
    }

    /// `conn` (the user's `--url`) as a key=value string for another
    /// libpq program, its password left out (pass it with
    /// [`ConnectOptions::password_for_child_env`]).
    pub fn conninfo_without_password(conn: &str) -> Result<String, ConnectError> {
        conninfo::parse(conn).map(|p| conninfo::to_key_values_without_secrets(&p)).map_err(|e| ConnectError::Invalid(e.0))
    }

    /// A URL that reaches the same server, with the password left out (a
    /// password from the environment or `~/.pgpass` is found again there).
    pub fn display_url(&self) -> String {
        let mut url = String::from("postgresql://");
        let mut query = Vec::new();
        let tcp: Vec<&str> = self.hosts.iter().filter_map(|h| if let Endpoint::Tcp(t) = h { Some(t.as_str()) } else { None }).collect();
        url.push_str(&percent_encode(&self.user));
        url.push('@');
        let ports: Vec<u16> = (0..self.hosts.len()).map(|i| self.port_of(i)).collect();
        if tcp.len() == self.hosts.len() {
            let hosts: Vec<String> = tcp
                .iter()
                .zip(&ports)
                .map(|(h, p)| {
                    let h = if h.contains(':') { format!("[{h}]") } else { percent_encode(h) };
                    if *p == DEFAULT_PORT { h } else { format!("{h}:{p}") }
                })
                .collect();
            url.push_str(&hosts.join(","));
        } else {
            let hosts: Vec<String> = self.hosts.iter().map(|h| percent_encode(&h.to_string()).replace("%2F", "/")).collect();
            query.push(format!("host={}", hosts.join(",")));
            if ports.iter().any(|p| *p != DEFAULT_PORT) {
                query.push(format!("port={}", ports.iter().map(u16::to_string).collect::<Vec<_>>().join(",")));
            }
        }
        url.push('/');
        url.push_str(&percent_encode(&self.dbname));
        if self.hosts.iter().any(|h| matches!(h, Endpoint::Tcp(_))) {
            if self.sslmode != SslMode::Prefer {
                query.push(format!("sslmode={}", self.sslmode));
            }
            for (key, file) in [("sslrootcert", &self.sslrootcert), ("sslcert", &self.sslcert), ("sslkey", &self.sslkey)] {
                if let Some(file) = file {
                    query.push(format!("{key}={}", percent_encode(&file.display().to_string()).replace("%2F", "/")));
                }
            }
        }
        if !query.is_empty() {
            url.push('?');
            url.push_str(&query.join("&"));
        }
        url
    }

    /// `host:port` or the socket path, for messages.
    pub fn endpoint_label(&self) -> String {
        let hosts: Vec<String> = (0..self.hosts.len()).map(|i| self.label(i)).collect();
        hosts.join(",")
    }

    fn label(&self, host: usize) -> String {
        let port = self.port_of(host);
        match &self.hosts[host] {
            Endpoint::Tcp(t) => format!("{t}:{port}"),
            Endpoint::Unix(p) => format!("{}/.s.PGSQL.{port}", p.display()),
        }
    }

    /// The tokio-postgres configuration for these options, every host in
    /// it. [`ConnectOptions::connect`] does more than this can say: it tries
    /// each host with its own TLS decision and brings the TLS connector.
    pub fn to_config(&self) -> tokio_postgres::Config {
        let mut c = self.config_without_hosts();
        for i in 0..self.hosts.len() {
            self.add_host(&mut c, i);
        }
        c.ssl_mode(match self.sslmode {
            SslMode::Disable | SslMode::Allow => PgSslMode::Disable,
            SslMode::Prefer => PgSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => PgSslMode::Require,
        });
        c
    }

    fn config_without_hosts(&self) -> tokio_postgres::Config {
        let mut c = tokio_postgres::Config::new();
        c.user(&self.user).dbname(&self.dbname).application_name(&self.application_name);
        if let Some(p) = &self.password {
            c.password(p);
        }
        if let Some(t) = self.connect_timeout {
            c.connect_timeout(t);
        }
        if let Some(o) = &self.options {
            c.options(o);
        }
        self.session.apply(&mut c);
        c
    }

    /// The port of host `i` (`port=1,2` gives each host its own).
    fn port_of(&self, i: usize) -> u16 {
        self.ports.get(i).copied().unwrap_or(self.port)
    }

    /// Host `i` with its port and `hostaddr` into `config`.
    fn add_host(&self, config: &mut tokio_postgres::Config, i: usize) {
        match &self.hosts[i] {
            Endpoint::Tcp(t) => config.host(t),
            Endpoint::Unix(p) => config.host_path(p),
        };
        config.port(self.port_of(i));
        if let (Some(Some(addr)), Endpoint::Tcp(_)) = (self.hostaddrs.get(i), &self.hosts[i]) {
            config.hostaddr(*addr);
        }
    }

    /// Opens a connection; its driver task runs on the current tokio runtime
    /// and ends when the returned client is dropped. Hosts are tried in
    /// order and the last one's failure is reported, as libpq does.
    pub async fn connect(&self) -> Result<Client, ConnectError> {
        let mut failure = ConnectError::Invalid("no host to connect to: name one with --url or PGHOST".into());
        for (host, endpoint) in self.hosts.iter().enumerate() {
            let attempt = match endpoint {
                // The server never offers TLS on a socket; libpq does not ask.
                Endpoint::Unix(_) => self.plain(host).await.map_err(|f| self.explain_failure(host, f)),
                Endpoint::Tcp(_) => self.connect_tcp(host).await,
            };
            match attempt {
                Ok(client) => return Ok(client),
                Err(e) => failure = e,
            }
        }
        Err(failure)
    }

    /// One TCP host, with libpq's order of attempts for the sslmode. When a
    /// second attempt fails too, the TLS attempt's failure is reported: that
    /// is the one that says what to fix.
    async fn connect_tcp(&self, host: usize) -> Result<Client, ConnectError> {
        match self.sslmode {
            SslMode::Disable => self.plain(host).await.map_err(|f| self.explain_failure(host, f)),
            // libpq's allow retries with TLS when the server refuses the
            // plain connection (its pg_hba.conf may have only hostssl lines).
            SslMode::Allow => match self.plain(host).await {
                Err(f) if f.refused_by_server() => self.encrypted(host, PgSslMode::Prefer).await.map_err(|f| self.explain_failure(host, f)),
                other => other.map_err(|f| self.explain_failure(host, f)),
            },
            // libpq's prefer goes on without TLS when the server does not
            // offer it, and also when the TLS handshake fails (a root file
            // that the server's certificate does not chain to, say).
            SslMode::Prefer => match self.encrypted(host, PgSslMode::Prefer).await {
                Err(f) if f.in_handshake() => self.plain(host).await.map_err(|_| self.explain_failure(host, f)),
                other => other.map_err(|f| self.explain_failure(host, f)),
            },
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => {
                self.encrypted(host, PgSslMode::Require).await.map_err(|f| self.explain_failure(host, f))
            }
        }
    }

    async fn plain(&self, host: usize) -> Result<Client, Failure> {
        self.attempt(host, PgSslMode::Disable, tokio_postgres::NoTls).await.map_err(Failure::Plain)
    }

    /// A TLS attempt: `Require` insists on TLS, `Prefer` goes on without it
    /// when the server says no.
    async fn encrypted(&self, host: usize, mode: PgSslMode) -> Result<Client, Failure> {
        let (connector, client_cert) = self.tls_connector().map_err(Failure::Setup)?;
        let stage = Arc::new(AtomicU8::new(Stage::Connecting as u8));
        let tracked = tls::Tracked { inner: connector, stage: stage.clone() };
        self.attempt(host, mode, tracked).await.map_err(|error| Failure::Tls {
            error,
            stage: Stage::load(&stage),
            required: mode == PgSslMode::Require,
            client_cert,
        })
    }

    async fn attempt<T>(&self, host: usize, mode: PgSslMode, tls: T) -> Result<Client, tokio_postgres::Error>
    where
        T: MakeTlsConnect<Socket> + Send,
        T::Stream: Send + 'static,
        T::TlsConnect: Send,
        <T::TlsConnect as TlsConnect<Socket>>::Future: Send,
    {
        let mut config = self.config_without_hosts();
        self.add_host(&mut config, host);
        config.ssl_mode(mode);
        let (client, connection) = config.connect(tls).await?;
        tokio::spawn(async move {
            // Errors surface on the client's next call; nothing to do here.
            let _ = connection.await;
        });
        Ok(client)
    }

    /// The TLS connector for this sslmode, and the client certificate file it
    /// offers the server (if any). The files are read for each TLS attempt
    /// and never for a connection without TLS. libpq reads them once the
    /// server has agreed to TLS, this before the socket opens: a file that
    /// cannot be used is an error here even where the server would have
    /// said no to TLS (sslmode=prefer), rather than a reason to go on
    /// without TLS.
    fn tls_connector(&self) -> Result<(tokio_postgres_rustls::MakeRustlsConnect, Option<PathBuf>), ConnectError> {
        let roots = self.trusted_roots()?;
        let (cert_file, identity) = match self.client_auth()? {
            Some(ClientFiles { cert_file, identity }) => (Some(cert_file), Some(identity)),
            None => (None, None),
        };
        Ok((tls::connector(roots, self.sslmode == SslMode::VerifyFull, identity), cert_file))
    }

    /// Whether `sslrootcert=system` asks for the operating system's roots.
    fn system_roots(&self) -> bool {
        self.sslrootcert.as_deref() == Some(Path::new(SYSTEM_ROOTS))
    }

    /// The root certificates the server's certificate is checked against.
    /// libpq checks it whenever the root certificate file exists, whatever
    /// the mode (so require with a root file acts as verify-ca), and insists
    /// on the file only for verify-ca and verify-full. `sslrootcert=system`
    /// means the operating system's bundle (`SSL_CERT_FILE`, else
    /// [`SYSTEM_ROOTS_FILE`]), which must exist.
    fn trusted_roots(&self) -> Result<Option<tls::TrustedRoots>, ConnectError> {
        let mode = self.sslmode;
        if self.system_roots() {
            // resolve() refuses this already; the fields are public.
            if mode != SslMode::VerifyFull {
                return Err(ConnectError::WeakModeWithSystemRoots { mode });
            }
            let path = self.ssl_cert_file.clone().unwrap_or_else(|| PathBuf::from(SYSTEM_ROOTS_FILE));
            let shown = path.display().to_string();
            return match std::fs::metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    Err(ConnectError::NoSystemRoots { path: shown, reason: "does not exist".into() })
                }
                Err(e) => Err(ConnectError::NoSystemRoots { path: shown, reason: format!("cannot be read ({e})") }),
                Ok(_) => tls::load_roots(&path)
                    .map(Some)
                    .map_err(|reason| ConnectError::NoSystemRoots { path: shown, reason: format!("cannot be used: {reason}") }),
            };
        }
        let file = self.sslrootcert.clone().or_else(|| self.home.as_ref().map(|h| h.join(DEFAULT_ROOT_CERT)));
        Ok(match file {
            Some(path) if std::fs::metadata(&path).is_ok() => {
                Some(tls::load_roots(&path).map_err(|reason| ConnectError::BadRootCert { path: path.display().to_string(), reason })?)
            }
            Some(path) if mode.verifies() => return Err(ConnectError::NoRootCert { mode, path: path.display().to_string() }),
            None if mode.verifies() => return Err(ConnectError::NoHomeForRootCert { mode }),
            _ => None,
        })
    }

    /// The client certificate file libpq would send: `sslcert`, else
    /// `~/.postgresql/postgresql.crt`. It is sent only if it exists.
    fn client_cert_file(&self) -> Option<PathBuf> {
        self.sslcert.clone().or_else(|| self.home.as_ref().map(|h| h.join(DEFAULT_CLIENT_CERT)))
    }

    /// The client certificate and its key, when the certificate file
    /// exists. As in libpq, a certificate file that is not there means no
    /// certificate (the server may not ask for one), while a certificate
    /// without its key, a key others can read, or a file that cannot be
    /// used is an error.
    fn client_auth(&self) -> Result<Option<ClientFiles>, ConnectError> {
        use std::os::unix::fs::MetadataExt;
        let Some(cert_file) = self.client_cert_file() else { return Ok(None) };
        let cert = cert_file.display().to_string();
        match std::fs::metadata(&cert_file) {
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::NotFound | std::io::ErrorKind::NotADirectory) => return Ok(None),
            Err(e) => return Err(ConnectError::BadClientCert { path: cert, reason: e.to_string() }),
        }
        let chain = tls::load_cert_chain(&cert_file).map_err(|reason| ConnectError::BadClientCert { path: cert.clone(), reason })?;
        let Some(key_file) = self.sslkey.clone().or_else(|| self.home.as_ref().map(|h| h.join(DEFAULT_CLIENT_KEY))) else {
            let looked = "sslkey is not set and no home directory is known to find ~/.postgresql/postgresql.key in".to_owned();
            return Err(ConnectError::NoClientKey { cert, looked });
        };
        let path = key_file.display().to_string();
        let meta = match std::fs::metadata(&key_file) {
            Ok(meta) => meta,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ConnectError::NoClientKey { cert, looked: format!("the key file {path} does not exist") });
            }
            Err(e) => return Err(ConnectError::BadClientKey { path, reason: e.to_string() }),
        };
        if !meta.is_file() {
            return Err(ConnectError::BadClientKey { path, reason: "it is not a regular file".into() });
        }
        if key_file_too_open(meta.uid(), meta.mode()) {
            return Err(ConnectError::KeyPermissions { path, mode: meta.mode() & 0o7777 });
        }
        let pem = std::fs::read(&key_file).map_err(|e| ConnectError::BadClientKey { path: path.clone(), reason: e.to_string() })?;
        let key = tls::parse_key(&pem).map_err(|problem| match problem {
            tls::KeyProblem::Encrypted => ConnectError::EncryptedClientKey { path: path.clone() },
            tls::KeyProblem::Unusable(reason) => ConnectError::BadClientKey { path: path.clone(), reason },
        })?;
        let identity = tls::certified_key(chain, key).map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => ConnectError::ClientKeyMismatch { cert, key: path.clone() },
            other => ConnectError::BadClientKey { path: path.clone(), reason: other.to_string() },
        })?;
        Ok(Some(ClientFiles { cert_file, identity }))
    }

    /// Where the client certificate was looked for, for a server that
    /// wanted one and got none.
    fn client_cert_looked(&self) -> String {
        match self.client_cert_file() {
            Some(file) if self.sslcert.is_some() => format!("sslcert names {}, which does not exist", file.display()),
            Some(file) => format!("sslcert is not set and {} does not exist", file.display()),
            None => "sslcert is not set and no home directory is known to find ~/.postgresql/postgresql.crt in".into(),
        }
    }

    /// A refusal at authentication that is about the client certificate. The
    /// server gives these SQLSTATE 28000, as it does pg_hba.conf's own
    /// refusals, so its (English) message is what tells them apart; a
    /// server with translated messages gets the plain [`ConnectError::Refused`],
    /// whose message still says what the server wants.
    fn client_cert_refusal(&self, endpoint: &str, db: &tokio_postgres::error::DbError, sent: Option<&Path>) -> Option<ConnectError> {
        if db.code().code() != "28000" || !db.message().contains("certificate") {
            return None;
        }
        let endpoint = endpoint.to_owned();
        Some(match sent {
            None => ConnectError::NoClientCert { user: self.user.clone(), endpoint, looked: self.client_cert_looked() },
            Some(path) => ConnectError::ClientCertRefused {
                endpoint,
                path: path.display().to_string(),
                reason: format!("{} (SQLSTATE 28000)", db.message()),
                advice: "its common name (CN) must be the user name, or be mapped to it in the server's pg_ident.conf",
            },
        })
    }

    /// Turns a failed attempt on `host` into one line that says what to do.
    fn explain_failure(&self, host: usize, failure: Failure) -> ConnectError {
        let (error, stage, tls_required, client_cert) = match failure {
            Failure::Setup(e) => return e,
            Failure::Plain(error) => return self.explain_at(self.label(host), error),
            Failure::Tls { error, stage, required, client_cert } => (error, stage, required, client_cert),
        };
        let (endpoint, mode) = (self.label(host), self.sslmode);
        if let Some(refusal) = error.as_db_error().and_then(|db| self.client_cert_refusal(&endpoint, db, client_cert.as_deref())) {
            return refusal;
        }
        if error.as_db_error().is_none() {
            if let Some(e) = tls::rustls_error(&error) {
                let reason = e.to_string();
                // The server checks the client's certificate once the
                // client's side of the handshake is done (in TLS 1.3, after
                // the client saw it finish) and says no with an alert.
                if let (rustls::Error::AlertReceived(alert), Some(path)) = (e, &client_cert)
                    && let Some(advice) = tls::client_cert_advice(*alert)
                {
                    return ConnectError::ClientCertRefused { endpoint, path: path.display().to_string(), reason, advice };
                }
                return match e {
                    rustls::Error::InvalidCertificate(c) => {
                        ConnectError::CertificateRejected { endpoint, mode, reason, advice: tls::advice(c, self.system_roots()) }
                    }
                    rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired) => {
                        ConnectError::NoClientCert { user: self.user.clone(), endpoint, looked: self.client_cert_looked() }
                    }
                    _ => ConnectError::TlsHandshake { endpoint, mode, reason },
                };
            }
            if stage == Stage::Handshaking {
                return ConnectError::TlsHandshake { endpoint, mode, reason: innermost(&error) };
            }
            // The server answered the TLS request with a no: the only way
            // to fail after the socket opened with nothing read or written
            // going wrong and no handshake begun.
            if tls_required && stage == Stage::SocketOpen && !tls::has_io_error(&error) {
                return ConnectError::TlsNotAccepted { endpoint, mode };
            }
        }
        self.explain_at(endpoint, error)
    }

    /// Turns a connection failure into one line that says what to do.
    pub fn explain(&self, e: tokio_postgres::Error) -> ConnectError {
        self.explain_at(self.endpoint_label(), e)
    }

    fn explain_at(&self, endpoint: String, e: tokio_postgres::Error) -> ConnectError {
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            return match code {
                "28P01" => ConnectError::BadPassword { user: self.user.clone(), endpoint },
                "3D000" => ConnectError::NoDatabase { dbname: self.dbname.clone(), endpoint },
                "57P01" | "57P02" | "57P03" | "53300" => {
                    ConnectError::Unavailable { endpoint, message: format!("{} (SQLSTATE {code})", db.message()) }
                }
                _ => ConnectError::Refused { user: self.user.clone(), endpoint, message: format!("{} (SQLSTATE {code})", db.message()) },
            };
        }
        // The one branch on message text: tokio-postgres reports a server that
        // asks for a password we do not have as a config error with no kind
        // or SQLSTATE to test, so its message is all there is.
        if innermost(&e).contains("password missing") {
            return ConnectError::NoPassword { user: self.user.clone(), endpoint, note: self.pgpass_note.clone() };
        }
        // The socket worked and the server answered, but not with channel
        // binding: a setting to change, not a server to wait for.
        if self.session.channel_binding == ChannelBinding::Require && !tls::has_io_error(&e) {
            return ConnectError::NoChannelBinding { endpoint, reason: innermost(&e) };
        }
        ConnectError::Unreachable { endpoint, reason: innermost(&e) }
    }
}

/// How far libpq's TCP-level settings were given: keepalives, the user
/// timeout, the session a host must offer and channel binding.
#[derive(Debug, Clone)]
struct Session {
    keepalives: bool,
    keepalives_idle: Option<Duration>,
    keepalives_interval: Option<Duration>,
    keepalives_count: Option<u32>,
    tcp_user_timeout: Option<Duration>,
    target_session_attrs: TargetSessionAttrs,
    channel_binding: ChannelBinding,
}

impl Default for Session {
    fn default() -> Self {
        Session {
            keepalives: true,
            keepalives_idle: None,
            keepalives_interval: None,
            keepalives_count: None,
            tcp_user_timeout: None,
            target_session_attrs: TargetSessionAttrs::Any,
            channel_binding: ChannelBinding::Prefer,
        }
    }
}

impl Session {
    fn from_params(p: &params::Params) -> Result<Session, ConnectError> {
        let secs =
            |key: &str| -> Result<Option<Duration>, ConnectError> { Ok(p.seconds(key)?.filter(|s| *s > 0).map(Duration::from_secs)) };
        Ok(Session {
            keepalives: p.number::<i64>("keepalives")?.is_none_or(|k| k != 0),
            keepalives_idle: secs("keepalives_idle")?,
            keepalives_interval: secs("keepalives_interval")?,
            keepalives_count: p.number::<u32>("keepalives_count")?.filter(|c| *c > 0),
            // libpq's tcp_user_timeout is in milliseconds.
            tcp_user_timeout: p.number::<u64>("tcp_user_timeout")?.filter(|t| *t > 0).map(Duration::from_millis),
            target_session_attrs: match p.value("target_session_attrs").map(|v| v.to_ascii_lowercase()).as_deref() {
                Some("read-write") => TargetSessionAttrs::ReadWrite,
                Some("read-only") => TargetSessionAttrs::ReadOnly,
                _ => TargetSessionAttrs::Any,
            },
            channel_binding: match p.value("channel_binding").map(|v| v.to_ascii_lowercase()).as_deref() {
                Some("disable") => ChannelBinding::Disable,
                Some("require") => ChannelBinding::Require,
                _ => ChannelBinding::Prefer,
            },
        })
    }

    fn apply(&self, c: &mut tokio_postgres::Config) {
        c.keepalives(self.keepalives).target_session_attrs(self.target_session_attrs).channel_binding(self.channel_binding);
        if let Some(d) = self.keepalives_idle {
            c.keepalives_idle(d);
        }
        if let Some(d) = self.keepalives_interval {
            c.keepalives_interval(d);
        }
        if let Some(n) = self.keepalives_count {
            c.keepalives_retries(n);
        }
        if let Some(d) = self.tcp_user_timeout {
            c.tcp_user_timeout(d);
        }
    }
}

/// libpq's host for an empty `host` entry: the `hostaddr` if there is one,
/// else the default socket directory, else localhost.
fn default_host(h: &str, hostaddr: Option<&String>) -> Endpoint {
    if !h.is_empty() {
        return parse_host(h);
    }
    match hostaddr.filter(|a| !a.is_empty()) {
        Some(a) => Endpoint::Tcp(a.clone()),
        None if Path::new(DEFAULT_SOCKET_DIR).is_dir() => Endpoint::Unix(DEFAULT_SOCKET_DIR.into()),
        None => Endpoint::Tcp("localhost".into()),
    }
}

/// The most specific message in an error's chain.
fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    reason
}

/// A client certificate file and the certificate and key read from it and
/// its key file.
struct ClientFiles {
    cert_file: PathBuf,
    identity: rustls::sign::CertifiedKey,
}

/// libpq's rule for a private key file: no group or world access, except
/// that a file owned by root may be readable by its group (0640), so that
/// a system-wide key can be shared through a group.
fn key_file_too_open(owner: u32, mode: u32) -> bool {
    if owner == 0 { mode & 0o037 != 0 } else { mode & 0o077 != 0 }
}

/// How far a connection attempt got; the TLS connector records it, so a
/// failure is told apart by where it happened rather than by message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
enum Stage {
    /// The socket is not open yet.
    Connecting,
    /// The socket is open; no TLS handshake has begun.
    SocketOpen,
    /// The server accepted TLS and the handshake is under way.
    Handshaking,
    /// The handshake finished; the session is encrypted.
    Encrypted,
}

impl Stage {
    fn load(cell: &AtomicU8) -> Stage {
        match cell.load(Ordering::Acquire) {
            0 => Stage::Connecting,
            1 => Stage::SocketOpen,
            2 => Stage::Handshaking,
            _ => Stage::Encrypted,
        }
    }
}

/// A connection attempt that did not give a client.
enum Failure {
    /// TLS could not be set up (no root certificate file, say): no attempt.
    Setup(ConnectError),
    /// An attempt without TLS failed.
    Plain(tokio_postgres::Error),
    /// An attempt with TLS failed after `stage`; `required` when it would
    /// not have gone on without TLS; `client_cert` is the certificate file
    /// offered to the server.
    Tls { error: tokio_postgres::Error, stage: Stage, required: bool, client_cert: Option<PathBuf> },
}

impl Failure {
    /// The server answered, with an error (authentication, pg_hba.conf).
    fn refused_by_server(&self) -> bool {
        match self {
            Failure::Plain(e) | Failure::Tls { error: e, .. } => e.as_db_error().is_some(),
            Failure::Setup(_) => false,
        }
    }

    fn in_handshake(&self) -> bool {
        matches!(self, Failure::Tls { stage: Stage::Handshaking, .. })
    }
}

fn parse_host(h: &str) -> Endpoint {
    if h.starts_with('/') { Endpoint::Unix(PathBuf::from(h)) } else { Endpoint::Tcp(h.to_owned()) }
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
    pgpass_read(file, opts).ok().flatten()
}

/// [`pgpass_lookup`], saying why a file that exists was not read.
fn pgpass_read(file: &Path, opts: &ConnectOptions) -> Result<Option<String>, String> {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(file) else { return Ok(None) };
    if !meta.is_file() {
        return Err(format!("the password file {} is not a plain file, so it was not read", file.display()));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(format!(
            "the password file {} was ignored because group or others may read it (run chmod 0600 {})",
            file.display(),
            file.display()
        ));
    }
    let Ok(text) = std::fs::read_to_string(file) else { return Ok(None) };
    for (i, host) in opts.hosts.iter().enumerate() {
        let (host, port) = (host.pgpass_host(), opts.port_of(i).to_string());
        let want = [host.as_str(), port.as_str(), opts.dbname.as_str(), opts.user.as_str()];
        for line in text.lines() {
            if line.trim_start().starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let fields = split_pgpass_line(line);
            if fields.len() < 5 {
                continue;
            }
            if want.iter().zip(&fields).all(|(w, f)| f == "*" || f == w) {
                return Ok(Some(fields[4].clone()));
            }
        }
    }
    Ok(None)
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

/// TLS on rustls, checking what libpq checks.
///
/// rustls by default checks the chain and the host name together and accepts
/// nothing less; libpq checks nothing (require without a root file), the
/// chain only (verify-ca, or any mode with a root file) or both
/// (verify-full). [`ServerCertCheck`] says which. It also accepts a server
/// certificate that is itself in the root file even when it is marked as a
/// CA, as OpenSSL does: that is the self-signed set-up the PostgreSQL
/// documentation describes (`sslrootcert=server.crt`), which webpki alone
/// would refuse. Host names are matched against the certificate's subject
/// alternative names (DNS names and IP addresses); unlike libpq, a
/// certificate without any is not matched on its common name.
///
/// A client certificate goes to rustls with its key as one
/// [`rustls::sign::CertifiedKey`], which checks that the key is the
/// certificate's before anything is sent; rustls offers it only when the
/// server asks.
///
/// [`Tracked`] wraps the connector to record how far an attempt got, so that
/// "the server said no to TLS" and "the handshake failed" are told apart
/// without reading tokio-postgres' message text.
mod tls {
    use std::future::Future;
    use std::path::Path;
    use std::pin::Pin;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU8, Ordering};

    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::client::{verify_server_cert_signed_by_trust_anchor, verify_server_name};
    use rustls::crypto::{CryptoProvider, verify_tls12_signature, verify_tls13_signature};
    use rustls::pki_types::pem::{self, PemObject};
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
    use rustls::server::ParsedCertificate;
    use rustls::sign::{CertifiedKey, SingleCertAndKey};
    use rustls::{AlertDescription, CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
    use tokio::io::{AsyncRead, AsyncWrite};
    use tokio_postgres::tls::{MakeTlsConnect, TlsConnect};
    use tokio_postgres_rustls::MakeRustlsConnect;

    use super::Stage;

    /// The certificates of a root certificate file.
    #[derive(Debug)]
    pub(super) struct TrustedRoots {
        store: RootCertStore,
        /// As read, to recognise a server certificate that is one of them.
        certs: Vec<CertificateDer<'static>>,
    }

    pub(super) fn load_roots(path: &Path) -> Result<TrustedRoots, String> {
        let certs =
            CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>()).map_err(|e| e.to_string())?;
        if certs.is_empty() {
            return Err("it holds no certificate".into());
        }
        let mut store = RootCertStore::empty();
        let (added, _unusable) = store.add_parsable_certificates(certs.iter().cloned());
        if added == 0 {
            return Err("none of its certificates can be parsed".into());
        }
        Ok(TrustedRoots { store, certs })
    }

    /// The certificates of a client certificate file: the client's own
    /// first, then any intermediate CA certificates, as libpq reads it.
    pub(super) fn load_cert_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
        let certs =
            CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>()).map_err(|e| e.to_string())?;
        if certs.is_empty() {
            return Err("it holds no certificate".into());
        }
        Ok(certs)
    }

    /// Why a private key file cannot be used.
    pub(super) enum KeyProblem {
        /// It needs a password (libpq's sslpassword), which chute does not take.
        Encrypted,
        Unusable(String),
    }

    /// The private key in a PEM file: PKCS#8 (`PRIVATE KEY`), PKCS#1
    /// (`RSA PRIVATE KEY`) or SEC1 (`EC PRIVATE KEY`).
    pub(super) fn parse_key(pem: &[u8]) -> Result<PrivateKeyDer<'static>, KeyProblem> {
        // An encrypted PKCS#8 key has a section kind of its own, which the
        // PEM reader skips; OpenSSL's older encryption is a header inside an
        // RSA or EC section, which it cannot decode. Both need the password.
        let has = |needle: &[u8]| pem.windows(needle.len()).any(|w| w == needle);
        if has(b"-----BEGIN ENCRYPTED PRIVATE KEY-----") || has(b"Proc-Type: 4,ENCRYPTED") {
            return Err(KeyProblem::Encrypted);
        }
        PrivateKeyDer::from_pem_slice(pem).map_err(|e| {
            KeyProblem::Unusable(match e {
                pem::Error::NoItemsFound => "it holds no private key".into(),
                other => other.to_string(),
            })
        })
    }

    /// The client's certificate chain with its key, which must be the key of
    /// the first certificate.
    pub(super) fn certified_key(chain: Vec<CertificateDer<'static>>, key: PrivateKeyDer<'static>) -> Result<CertifiedKey, rustls::Error> {
        CertifiedKey::from_der(chain, key, &rustls::crypto::ring::default_provider())
    }

    /// A client configuration that checks the server's certificate against
    /// `roots` (nothing when there are none), and its name when `check_name`,
    /// and offers `identity` when the server asks for a client certificate.
    pub(super) fn connector(roots: Option<TrustedRoots>, check_name: bool, identity: Option<CertifiedKey>) -> MakeRustlsConnect {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let check = ServerCertCheck { roots, check_name, provider: provider.clone() };
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("ring supports TLS 1.2 and 1.3")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(check));
        let config = match identity {
            Some(identity) => builder.with_client_cert_resolver(Arc::new(SingleCertAndKey::from(identity))),
            None => builder.with_no_client_auth(),
        };
        MakeRustlsConnect::new(config)
    }

    /// What libpq checks of the server's certificate for one sslmode. The
    /// handshake signatures are verified in every mode: without that even an
    /// unchecked certificate would prove nothing about the peer's key.
    #[derive(Debug)]
    struct ServerCertCheck {
        roots: Option<TrustedRoots>,
        check_name: bool,
        provider: Arc<CryptoProvider>,
    }

    impl ServerCertVerifier for ServerCertCheck {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &ServerName<'_>,
            _ocsp_response: &[u8],
            now: UnixTime,
        ) -> Result<ServerCertVerified, rustls::Error> {
            let Some(roots) = &self.roots else { return Ok(ServerCertVerified::assertion()) };
            let cert = ParsedCertificate::try_from(end_entity)?;
            let algorithms = self.provider.signature_verification_algorithms.all;
            match verify_server_cert_signed_by_trust_anchor(&cert, &roots.store, intermediates, now, algorithms) {
                Ok(()) => {}
                // webpki refuses a CA certificate as the server's own
                // (CertificateError::Other); OpenSSL trusts it when it is in
                // the root file. Dates were checked before that refusal.
                Err(rustls::Error::InvalidCertificate(CertificateError::Other(_)))
                    if roots.certs.iter().any(|c| c.as_ref() == end_entity.as_ref()) => {}
                Err(e) => return Err(e),
            }
            if self.check_name {
                verify_server_name(&cert, server_name)?;
            }
            Ok(ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, rustls::Error> {
            verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
        }

        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.provider.signature_verification_algorithms.supported_schemes()
        }
    }

    /// What to do about a refused server certificate; `system` when it was
    /// checked against the operating system's roots (`sslrootcert=system`).
    pub(super) fn advice(e: &CertificateError, system: bool) -> &'static str {
        match e {
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } if system => {
                "connect by a host name or address the certificate lists (sslrootcert=system allows only sslmode=verify-full)"
            }
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
                "connect by a host name or address the certificate lists, or use sslmode=verify-ca to check the chain only"
            }
            CertificateError::Expired
            | CertificateError::ExpiredContext { .. }
            | CertificateError::NotValidYet
            | CertificateError::NotValidYetContext { .. } => "the server needs a current certificate (or check this machine's clock)",
            _ if system => {
                "sslrootcert=system trusts only the CAs in SSL_CERT_FILE or /etc/ssl/certs/ca-certificates.crt: for a private CA, name its certificate with sslrootcert=FILE instead"
            }
            _ => "check sslrootcert: it must hold the CA certificate that signed the server's certificate",
        }
    }

    /// What to do when the server answered the client certificate with
    /// `alert`; `None` for alerts that are not about a certificate.
    pub(super) fn client_cert_advice(alert: AlertDescription) -> Option<&'static str> {
        match alert {
            AlertDescription::CertificateExpired => Some("it has expired (or this machine's clock is wrong): renew it"),
            AlertDescription::CertificateRevoked => Some("it has been revoked (the server's ssl_crl_file lists it): get a new one"),
            AlertDescription::UnknownCA
            | AlertDescription::BadCertificate
            | AlertDescription::UnsupportedCertificate
            | AlertDescription::CertificateUnknown
            | AlertDescription::AccessDenied => Some(
                "the server accepts only certificates signed by a CA in its ssl_ca_file: have it signed by that CA, with any intermediate CA certificates after it in the sslcert file",
            ),
            _ => None,
        }
    }

    /// The rustls error behind a failed connection, if TLS failed. tokio-rustls
    /// carries it inside an `io::Error`, whose `source` skips it.
    pub(super) fn rustls_error(e: &tokio_postgres::Error) -> Option<&rustls::Error> {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = next {
            if let Some(found) = err.downcast_ref::<rustls::Error>() {
                return Some(found);
            }
            if let Some(found) = err.downcast_ref::<std::io::Error>().and_then(|io| io.get_ref()?.downcast_ref::<rustls::Error>()) {
                return Some(found);
            }
            next = err.source();
        }
        None
    }

    /// Whether reading or writing the socket failed somewhere in the chain.
    pub(super) fn has_io_error(e: &tokio_postgres::Error) -> bool {
        let mut next: Option<&(dyn std::error::Error + 'static)> = Some(e);
        while let Some(err) = next {
            if err.is::<std::io::Error>() {
                return true;
            }
            next = err.source();
        }
        false
    }

    /// The rustls connector, recording in `stage` how far an attempt got:
    /// tokio-postgres asks for a TLS connector once the socket is open and
    /// uses it only when the server accepted TLS.
    #[derive(Clone)]
    pub(super) struct Tracked {
        pub(super) inner: MakeRustlsConnect,
        /// Shared with the caller, who reads it after a failure.
        pub(super) stage: Arc<AtomicU8>,
    }

    impl<S> MakeTlsConnect<S> for Tracked
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        type Stream = <MakeRustlsConnect as MakeTlsConnect<S>>::Stream;
        type TlsConnect = TrackedConnect<<MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect>;
        type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

        fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
            self.stage.store(Stage::SocketOpen as u8, Ordering::Release);
            let inner = MakeTlsConnect::<S>::make_tls_connect(&mut self.inner, domain)?;
            Ok(TrackedConnect { inner, stage: self.stage.clone() })
        }
    }

    pub(super) struct TrackedConnect<T> {
        inner: T,
        stage: Arc<AtomicU8>,
    }

    impl<S, T> TlsConnect<S> for TrackedConnect<T>
    where
        T: TlsConnect<S>,
        T::Future: Send + 'static,
    {
        type Stream = T::Stream;
        type Error = T::Error;
        type Future = Pin<Box<dyn Future<Output = Result<T::Stream, T::Error>> + Send>>;

        fn connect(self, stream: S) -> Self::Future {
            self.stage.store(Stage::Handshaking as u8, Ordering::Release);
            let handshake = self.inner.connect(stream);
            let stage = self.stage;
            Box::pin(async move {
                let stream = handshake.await?;
                stage.store(Stage::Encrypted as u8, Ordering::Release);
                Ok(stream)
            })
        }
    }
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
    fn sslrootcert_from_url_then_env_and_back_into_the_url() {
        let env = [("PGSSLROOTCERT", "/env/root.crt")];
        assert_eq!(ConnectOptions::resolve(Some("host=h"), &env).unwrap().sslrootcert, Some("/env/root.crt".into()));
        let o = ConnectOptions::resolve(Some("postgres://h/d?sslmode=verify-ca&sslrootcert=/my%20certs/ca.pem"), &env).unwrap();
        assert_eq!(o.sslrootcert, Some("/my certs/ca.pem".into()));
        let again = ConnectOptions::resolve(Some(&o.display_url()), &[]).unwrap();
        assert_eq!((again.sslmode, again.sslrootcert), (SslMode::VerifyCa, o.sslrootcert));
        let o = ConnectOptions::resolve(Some("host=h sslrootcert='/k/v.pem'"), &env).unwrap();
        assert_eq!(o.sslrootcert, Some("/k/v.pem".into()));
    }

    #[test]
    fn sslcert_and_sslkey_from_url_then_env_and_back_into_the_url() {
        let env = [("PGSSLCERT", "/env/client.crt"), ("PGSSLKEY", "/env/client.key")];
        let o = ConnectOptions::resolve(Some("host=h"), &env).unwrap();
        assert_eq!((o.sslcert, o.sslkey), (Some("/env/client.crt".into()), Some("/env/client.key".into())));
        let o = ConnectOptions::resolve(Some("postgres://h/d?sslcert=/my%20certs/c.crt&sslkey=k.key&sslmode=require"), &env).unwrap();
        assert_eq!((o.sslcert.clone(), o.sslkey.clone()), (Some("/my certs/c.crt".into()), Some("k.key".into())));
        assert!(format!("{o:?}").contains("/my certs/c.crt"));
        let again = ConnectOptions::resolve(Some(&o.display_url()), &[]).unwrap();
        assert_eq!((again.sslcert, again.sslkey), (o.sslcert, o.sslkey));
        let o = ConnectOptions::resolve(Some("host=h sslcert='/k/c.crt' sslkey=/k/c.key"), &env).unwrap();
        assert_eq!((o.sslcert, o.sslkey), (Some("/k/c.crt".into()), Some("/k/c.key".into())));
        // sslpassword is accepted, as libpq accepts it, and never kept.
        let o = ConnectOptions::resolve(Some("postgres://h/d?sslkey=k.key&sslpassword=s3cret"), &env).unwrap();
        assert!(!format!("{o:?}").contains("s3cret") && !o.display_url().contains("s3cret"));
    }

    #[test]
    fn sslrootcert_system_defaults_to_verify_full_and_keeps_it_in_the_url() {
        let o = ConnectOptions::resolve(Some("postgres://h/d?sslrootcert=system"), &[]).unwrap();
        assert_eq!(o.sslmode, SslMode::VerifyFull);
        let again = ConnectOptions::resolve(Some(&o.display_url()), &[]).unwrap();
        assert_eq!((again.sslmode, again.sslrootcert), (SslMode::VerifyFull, Some("system".into())));
        let o = ConnectOptions::resolve(Some("host=h"), &[("PGSSLROOTCERT", "system"), ("SSL_CERT_FILE", "/b.pem")]).unwrap();
        assert_eq!((o.sslmode, o.ssl_cert_file), (SslMode::VerifyFull, Some("/b.pem".into())));
        assert!(matches!(
            ConnectOptions::resolve(Some("host=h sslrootcert=system sslmode=require"), &[]),
            Err(ConnectError::WeakModeWithSystemRoots { mode: SslMode::Require })
        ));
    }

    #[test]
    fn key_file_permissions_as_libpq_checks_them() {
        // Owned by the user: nothing for group or others.
        for (mode, too_open) in [(0o600, false), (0o400, false), (0o700, false), (0o640, true), (0o604, true), (0o644, true)] {
            assert_eq!(key_file_too_open(1000, mode), too_open, "uid 1000, mode {mode:o}");
        }
        // Owned by root: the group may read it too.
        for (mode, too_open) in [(0o600, false), (0o640, false), (0o440, false), (0o644, true), (0o660, true), (0o650, true), (0o641, true)]
        {
            assert_eq!(key_file_too_open(0, mode), too_open, "uid 0, mode {mode:o}");
        }
        // The file type bits are not permissions.
        assert!(!key_file_too_open(1000, 0o100600));
    }

    #[test]
    fn redact_hides_passwords() {
        assert_eq!(redact("postgres://u:pw@h:5/d"), "postgres://u:<hidden>@h:5/d");
        assert_eq!(redact("host=h password=pw user=u"), "host=h password=<hidden> user=u");
        assert_eq!(redact("postgres://u@h/d"), "postgres://u@h/d");
        assert_eq!(redact("postgres://u@h/d?password=pw&sslmode=require"), "postgres://u@h/d?password=<hidden>&sslmode=require");
        assert_eq!(
            redact("postgres://u:pw@h/d?sslkey=k.key&sslpassword=kp"),
            "postgres://u:<hidden>@h/d?sslkey=k.key&sslpassword=<hidden>"
        );
        assert_eq!(redact("host=h sslpassword=kp sslkey=k.key"), "host=h sslpassword=<hidden> sslkey=k.key");
    }

    #[test]
    fn pgpass_matching() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pgpass");
        std::fs::write(&file, "# comment\nother:*:*:*:nope\nlocalhost:5432:*:alice:a\\:b\\\\c\n*:*:*:*:fallback\n").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        let env: [(&str, &str); 0] = [];
        let mut o = ConnectOptions::resolve(Some("host=/var/run/postgresql user=alice dbname=x"), &env).unwrap();
        assert_eq!(pgpass_lookup(&file, &o).as_deref(), Some("a:b\\c"));
        // A socket directory other than libpq's default is matched as written.
        let other = ConnectOptions::resolve(Some("host=/tmp user=alice dbname=x"), &env).unwrap();
        assert_eq!(pgpass_lookup(&file, &other).as_deref(), Some("fallback"));
        o.user = "carol".into();
        assert_eq!(pgpass_lookup(&file, &o).as_deref(), Some("fallback"));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(pgpass_lookup(&file, &o), None);
    }
}
