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
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;

use std::net::IpAddr;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

use tokio_postgres::config::{ChannelBinding, SslMode as PgSslMode, TargetSessionAttrs};
use tokio_postgres::{Client, Socket};

pub mod conninfo;
mod env;
mod own_settings;
mod params;
mod pgpass;
mod target;
#[cfg(test)]
mod tests;
mod tls;
mod wording;

use env::home_dir;
pub use env::{Env, ProcessEnv, env_names_a_server, os_user_name};
pub use pgpass::pgpass_lookup;
use pgpass::pgpass_read;
pub use target::{LoadBalance, ServerState, SessionAttrs};
pub use wording::ConnectError;
use wording::{Failure, Stage};

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

impl ConnectOptions {
    /// Resolves `url` (a `postgres://` URL or a `key=value` string, or none)
    /// against the environment and the password file, as libpq does.
    pub fn resolve(url: Option<&str>, env: &dyn Env) -> Result<Self, ConnectError> {
        let p = params::Params::gather(url, env)?;
        let Endpoints { hosts, ports, hostaddrs } = Endpoints::from_params(&p)?;
        let user = p.value("user").unwrap_or_else(os_user_name);
        let dbname = p.value("dbname").unwrap_or_else(|| user.clone());
        let (sslmode, sslrootcert) = tls_mode(&p)?;
        let application_name =
            p.value("application_name").or_else(|| p.value("fallback_application_name")).unwrap_or_else(|| "chute".into());
        let connect_timeout = p.seconds("connect_timeout")?.filter(|s| *s > 0).map(|s| Duration::from_secs(s.max(2)));
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
            sslcert: p.value("sslcert").map(PathBuf::from),
            sslkey: p.value("sslkey").map(PathBuf::from),
            ssl_cert_file: env.var("SSL_CERT_FILE").map(PathBuf::from),
            home: env.var("HOME").map(PathBuf::from),
            application_name,
            connect_timeout,
            options: startup_options(&p, env),
            session: Session::from_params(&p)?,
            pgpass_note: None,
        };
        opts.password = match p.value("password") {
            Some(pw) => Some(pw),
            None => opts.password_from_file(&p),
        };
        Ok(opts)
    }

    /// The password `~/.pgpass` (or `passfile`) has for these options; why
    /// none was taken from it is kept for the message of a refusal.
    fn password_from_file(&mut self, p: &params::Params) -> Option<String> {
        let file = p.value("passfile").map(PathBuf::from).or_else(|| home_dir().map(|h| h.join(".pgpass")))?;
        match pgpass_read(&file, self) {
            Ok(pw) => pw,
            Err(note) => {
                self.pgpass_note = Some(note);
                None
            }
        }
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

    /// The same hosts, chosen by `attrs` (a standby is reached with
    /// [`SessionAttrs::Any`] or [`SessionAttrs::Standby`]).
    pub fn with_session_attrs(&self, attrs: SessionAttrs) -> Self {
        let mut o = self.clone();
        o.session.target_session_attrs = attrs;
        o
    }

    /// The same server, another database.
    pub fn with_dbname(&self, dbname: &str) -> Self {
        ConnectOptions { dbname: dbname.to_owned(), ..self.clone() }
    }

    /// The same server with this password (scale-out: a data node's
    /// password comes from its `postgres_fdw` user mapping).
    pub fn with_password(&self, password: Option<String>) -> Self {
        ConnectOptions { password: password.or_else(|| self.password.clone()), ..self.clone() }
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
    /// order (shuffled with `load_balance_hosts=random`) and the first that
    /// is what `target_session_attrs` asks for is taken (see `target`);
    /// when none answers, the last one's failure is reported, as libpq does.
    pub async fn connect(&self) -> Result<Client, ConnectError> {
        let attrs = self.session.target_session_attrs;
        let mut failure = ConnectError::Invalid("no host to connect to: name one with --url or PGHOST".into());
        let (mut seen, mut failures, mut fallback) = (Vec::new(), Vec::new(), None);
        for host in self.session.load_balance.order(self.hosts.len()) {
            match self.connect_host(host).await {
                Ok((client, state)) if !attrs.asks() || attrs.accepts(state) => return Ok(client),
                Ok((client, state)) => {
                    // prefer-standby: the first server that answered, when no standby does.
                    if attrs == SessionAttrs::PreferStandby && fallback.is_none() {
                        fallback = Some(client);
                    }
                    seen.push((self.label(host), state));
                }
                Err(e) => {
                    failures.push(e.to_string());
                    failure = e;
                }
            }
        }
        match fallback {
            Some(client) => Ok(client),
            None if seen.is_empty() => Err(failure),
            None => Err(target::no_host_matched(attrs, &seen, &failures)),
        }
    }

    /// One host, TLS as its kind and the sslmode say, with chute's own
    /// session settings (see `own_settings`).
    async fn connect_host(&self, host: usize) -> Result<(Client, ServerState), ConnectError> {
        let client = match &self.hosts[host] {
            // The server never offers TLS on a socket; libpq does not ask.
            Endpoint::Unix(_) => self.plain(host).await.map_err(|f| self.explain_failure(host, f))?,
            Endpoint::Tcp(_) => self.connect_tcp(host).await?,
        };
        // A session lost at once is reported like one that could not be opened.
        match own_settings::apply(&client).await {
            Ok(state) => Ok((client, state)),
            Err(e) => Err(ConnectError::Unavailable { endpoint: self.label(host), message: e.to_string() }),
        }
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
    target_session_attrs: SessionAttrs,
    load_balance: LoadBalance,
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
            target_session_attrs: SessionAttrs::default(),
            load_balance: LoadBalance::default(),
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
            target_session_attrs: SessionAttrs::parse(p.value("target_session_attrs").as_deref()),
            load_balance: LoadBalance::parse(p.value("load_balance_hosts").as_deref()),
            channel_binding: match p.value("channel_binding").map(|v| v.to_ascii_lowercase()).as_deref() {
                Some("disable") => ChannelBinding::Disable,
                Some("require") => ChannelBinding::Require,
                _ => ChannelBinding::Prefer,
            },
        })
    }

    fn apply(&self, c: &mut tokio_postgres::Config) {
        // Hosts are tried one at a time and checked by `connect` itself;
        // a configuration with all of them (`to_config`) says what
        // tokio-postgres can check.
        let attrs = match self.target_session_attrs {
            SessionAttrs::ReadWrite => TargetSessionAttrs::ReadWrite,
            SessionAttrs::ReadOnly => TargetSessionAttrs::ReadOnly,
            _ => TargetSessionAttrs::Any,
        };
        c.keepalives(self.keepalives).target_session_attrs(attrs).channel_binding(self.channel_binding);
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

/// The hosts of a connection string, each with its port and `hostaddr`
/// (libpq pairs the lists by position; one value serves every host).
struct Endpoints {
    hosts: Vec<Endpoint>,
    ports: Vec<u16>,
    hostaddrs: Vec<Option<IpAddr>>,
}

impl Endpoints {
    fn from_params(p: &params::Params) -> Result<Endpoints, ConnectError> {
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
        Ok(Endpoints { hosts, ports, hostaddrs })
    }
}

/// The sslmode and root certificate file. libpq: the system's roots are
/// trusted for verify-full only, which is then the default; a weaker mode,
/// even from PGSSLMODE, is an error.
fn tls_mode(p: &params::Params) -> Result<(SslMode, Option<PathBuf>), ConnectError> {
    let sslrootcert = p.value("sslrootcert").map(PathBuf::from);
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
    Ok((sslmode, sslrootcert))
}

/// The server settings sent at start-up: `options`, and PGDATESTYLE, PGTZ
/// and PGGEQO as libpq sends them.
fn startup_options(p: &params::Params, env: &dyn Env) -> Option<String> {
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
    options
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

/// What a URL leaves unescaped: letters, digits and `-_.~` (RFC 3986's unreserved).
const URL_UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'_').remove(b'.').remove(b'~');

fn percent_encode(s: &str) -> String {
    utf8_percent_encode(s, URL_UNRESERVED).to_string()
}

fn parse_host(h: &str) -> Endpoint {
    if h.starts_with('/') { Endpoint::Unix(PathBuf::from(h)) } else { Endpoint::Tcp(h.to_owned()) }
}
