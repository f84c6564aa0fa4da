//! TLS on rustls, checking what libpq checks.
//!
//! rustls by default checks the chain and the host name together and accepts
//! nothing less; libpq checks nothing (require without a root file), the
//! chain only (verify-ca, or any mode with a root file) or both
//! (verify-full). [`ServerCertCheck`] says which. It also accepts a server
//! certificate that is itself in the root file even when it is marked as a
//! CA, as OpenSSL does: that is the self-signed set-up the PostgreSQL
//! documentation describes (`sslrootcert=server.crt`), which webpki alone
//! would refuse. Host names are matched against the certificate's subject
//! alternative names (DNS names and IP addresses); unlike libpq, a
//! certificate without any is not matched on its common name.
//!
//! A client certificate goes to rustls with its key as one
//! [`rustls::sign::CertifiedKey`], which checks that the key is the
//! certificate's before anything is sent; rustls offers it only when the
//! server asks.
//!
//! [`Tracked`] wraps the connector to record how far an attempt got, so that
//! "the server said no to TLS" and "the handshake failed" are told apart
//! without reading tokio-postgres' message text.

use super::*;
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
    let certs = CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>()).map_err(|e| e.to_string())?;
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

/// The operating system's root certificates, found where OpenSSL (and so
/// libpq) looks for them (`rustls-native-certs`: `SSL_CERT_DIR`, then the
/// distribution's bundle, e.g. Debian's [`SYSTEM_ROOTS_FILE`]).
/// `SSL_CERT_FILE` is read by the caller from the connection's environment.
fn system_store() -> Result<TrustedRoots, ConnectError> {
    let found = rustls_native_certs::load_native_certs();
    let shown = || format!("the operating system's certificate store (e.g. {SYSTEM_ROOTS_FILE})");
    if found.certs.is_empty() {
        let reason = match found.errors.first() {
            Some(e) => format!("cannot be read ({e})"),
            None => "holds no certificate".to_owned(),
        };
        return Err(ConnectError::NoSystemRoots { path: shown(), reason });
    }
    let mut store = RootCertStore::empty();
    let (added, _unusable) = store.add_parsable_certificates(found.certs.iter().cloned());
    if added == 0 {
        return Err(ConnectError::NoSystemRoots { path: shown(), reason: "holds no certificate that can be parsed".into() });
    }
    Ok(TrustedRoots { store, certs: found.certs })
}

/// The certificates of a client certificate file: the client's own
/// first, then any intermediate CA certificates, as libpq reads it.
pub(super) fn load_cert_chain(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_file_iter(path).and_then(|certs| certs.collect::<Result<Vec<_>, _>>()).map_err(|e| e.to_string())?;
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

impl ConnectOptions {
    /// A TLS attempt: `Require` insists on TLS, `Prefer` goes on without it
    /// when the server says no.
    pub(super) async fn encrypted(&self, host: usize, mode: PgSslMode) -> Result<Client, Failure> {
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

    pub(super) async fn attempt<T>(&self, host: usize, mode: PgSslMode, tls: T) -> Result<Client, tokio_postgres::Error>
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
    pub(super) fn tls_connector(&self) -> Result<(tokio_postgres_rustls::MakeRustlsConnect, Option<PathBuf>), ConnectError> {
        let roots = self.trusted_roots()?;
        let (cert_file, identity) = match self.client_auth()? {
            Some(ClientFiles { cert_file, identity }) => (Some(cert_file), Some(identity)),
            None => (None, None),
        };
        Ok((tls::connector(roots, self.sslmode == SslMode::VerifyFull, identity), cert_file))
    }

    /// Whether `sslrootcert=system` asks for the operating system's roots.
    pub(super) fn system_roots(&self) -> bool {
        self.sslrootcert.as_deref() == Some(Path::new(SYSTEM_ROOTS))
    }

    /// The root certificates the server's certificate is checked against.
    /// libpq checks it whenever the root certificate file exists, whatever
    /// the mode (so require with a root file acts as verify-ca), and insists
    /// on the file only for verify-ca and verify-full. `sslrootcert=system`
    /// means the operating system's roots (`SSL_CERT_FILE`, else the store
    /// OpenSSL would use: `system_store`), which must hold some.
    pub(super) fn trusted_roots(&self) -> Result<Option<tls::TrustedRoots>, ConnectError> {
        let mode = self.sslmode;
        if self.system_roots() {
            // resolve() refuses this already; the fields are public.
            if mode != SslMode::VerifyFull {
                return Err(ConnectError::WeakModeWithSystemRoots { mode });
            }
            let Some(path) = self.ssl_cert_file.clone() else { return system_store().map(Some) };
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
    pub(super) fn client_cert_file(&self) -> Option<PathBuf> {
        self.sslcert.clone().or_else(|| self.home.as_ref().map(|h| h.join(DEFAULT_CLIENT_CERT)))
    }

    /// The client certificate and its key, when the certificate file
    /// exists. As in libpq, a certificate file that is not there means no
    /// certificate (the server may not ask for one), while a certificate
    /// without its key, a key others can read, or a file that cannot be
    /// used is an error.
    pub(super) fn client_auth(&self) -> Result<Option<ClientFiles>, ConnectError> {
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
    pub(super) fn client_cert_looked(&self) -> String {
        match self.client_cert_file() {
            Some(file) if self.sslcert.is_some() => format!("sslcert names {}, which does not exist", file.display()),
            Some(file) => format!("sslcert is not set and {} does not exist", file.display()),
            None => "sslcert is not set and no home directory is known to find ~/.postgresql/postgresql.crt in".into(),
        }
    }
}

/// A client certificate file and the certificate and key read from it and
/// its key file.
pub(super) struct ClientFiles {
    cert_file: PathBuf,
    identity: rustls::sign::CertifiedKey,
}

/// libpq's rule for a private key file: no group or world access, except
/// that a file owned by root may be readable by its group (0640), so that
/// a system-wide key can be shared through a group.
pub(super) fn key_file_too_open(owner: u32, mode: u32) -> bool {
    if owner == 0 { mode & 0o037 != 0 } else { mode & 0o077 != 0 }
}
