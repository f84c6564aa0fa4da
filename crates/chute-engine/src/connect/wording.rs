//! Connection errors and their wording: one line that says what failed,
//! where, and what to do next, with secrets never shown. The server's
//! SQLSTATE is kept where there is one.

use std::path::{Path, PathBuf};

use super::*;

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
    /// The server is starting up, shutting down or out of connection slots,
    /// or a pooler says to try again (a SQLSTATE `retry::classify` does not
    /// call fatal): worth trying again a moment later.
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
    /// Every host answered, and none is what `target_session_attrs` asks
    /// for (a standby named alone, say); `found` says what each was.
    /// `in_flux`: some host did not answer (a failover under way: the old
    /// primary is gone, the standby not promoted yet), so trying again may
    /// find one.
    #[error("no host is {wanted}: {found}: {advice}")]
    NoMatchingHost { wanted: &'static str, found: String, advice: &'static str, in_flux: bool },
    #[error("the server at {endpoint} refused the client certificate {path}: {reason}; {advice}")]
    ClientCertRefused { endpoint: String, path: String, reason: String, advice: &'static str },
}

pub(super) fn no_password_advice(note: &Option<String>) -> String {
    match note {
        Some(note) => format!("{note}; or set PGPASSWORD"),
        None => "set PGPASSWORD or add a line to ~/.pgpass".into(),
    }
}

impl ConnectOptions {
    /// A refusal at authentication that is about the client certificate. The
    /// server gives these SQLSTATE 28000, as it does pg_hba.conf's own
    /// refusals, so its (English) message is what tells them apart; a
    /// server with translated messages gets the plain [`ConnectError::Refused`],
    /// whose message still says what the server wants.
    pub(super) fn client_cert_refusal(
        &self,
        endpoint: &str,
        db: &tokio_postgres::error::DbError,
        sent: Option<&Path>,
    ) -> Option<ConnectError> {
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
    pub(super) fn explain_failure(&self, host: usize, failure: Failure) -> ConnectError {
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

    pub(super) fn explain_at(&self, endpoint: String, e: tokio_postgres::Error) -> ConnectError {
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            return match code {
                "28P01" => ConnectError::BadPassword { user: self.user.clone(), endpoint },
                "3D000" => ConnectError::NoDatabase { dbname: self.dbname.clone(), endpoint },
                // Starting up, shutting down, out of slots, or a pooler's
                // "try again later" (class 08): a new attempt may work.
                _ if crate::retry::classify(&e) != crate::retry::Fault::Fatal => {
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

/// The most specific message in an error's chain.
pub(super) fn innermost(e: &(dyn std::error::Error + 'static)) -> String {
    let mut reason = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        reason = s.to_string();
        source = s.source();
    }
    reason
}

/// How far a connection attempt got; the TLS connector records it, so a
/// failure is told apart by where it happened rather than by message text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Stage {
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
    pub(super) fn load(cell: &AtomicU8) -> Stage {
        match cell.load(Ordering::Acquire) {
            0 => Stage::Connecting,
            1 => Stage::SocketOpen,
            2 => Stage::Handshaking,
            _ => Stage::Encrypted,
        }
    }
}

/// A connection attempt that did not give a client.
pub(super) enum Failure {
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
    pub(super) fn refused_by_server(&self) -> bool {
        match self {
            Failure::Plain(e) | Failure::Tls { error: e, .. } => e.as_db_error().is_some(),
            Failure::Setup(_) => false,
        }
    }

    pub(super) fn in_handshake(&self) -> bool {
        matches!(self, Failure::Tls { stage: Stage::Handshaking, .. })
    }
}
