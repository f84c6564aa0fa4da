//! TLS against real servers, with certificates this test makes.
//!
//! Three clusters listen on 127.0.0.1: one with TLS and a certificate for
//! 127.0.0.1 only, signed by a test CA; one without TLS; one whose certificate
//! is self-signed and marked as a CA (the PostgreSQL documentation's
//! `openssl req -x509` set-up). On the TLS server, database `template1` and
//! user `pw_user` are reachable only over TLS (`hostssl`), which is what makes
//! `allow` retry. Each case checks what the server saw in `pg_stat_ssl`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chute_engine::{ConnectError, ConnectOptions};
use chute_testkit::{ClusterSetup, TestCluster};
use rcgen::{BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};

/// An environment with no `PG*` variables and no `HOME`, so no default
/// root certificate file is in play unless a case puts one there.
const NO_ENV: [(&str, &str); 0] = [];

const PASSWORD: &str = "tls-s3cret";

/// The certificates, made once per test run.
struct Pki {
    ca: String,
    other_ca: String,
    server_cert: String,
    server_key: String,
    self_signed_cert: String,
    self_signed_key: String,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let (ca, issuer) = new_ca("chute test CA");
        let (other_ca, _) = new_ca("chute other CA");
        let server_key = KeyPair::generate().unwrap();
        let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        server.distinguished_name = named("chute test server");
        let server_cert = server.signed_by(&server_key, &issuer).unwrap().pem();
        let self_signed_key = KeyPair::generate().unwrap();
        let mut self_signed = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
        self_signed.distinguished_name = named("chute self-signed server");
        self_signed.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let self_signed_cert = self_signed.self_signed(&self_signed_key).unwrap().pem();
        Pki {
            ca,
            other_ca,
            server_cert,
            server_key: server_key.serialize_pem(),
            self_signed_cert,
            self_signed_key: self_signed_key.serialize_pem(),
        }
    })
}

fn new_ca(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = named(name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().unwrap();
    let pem = params.self_signed(&key).unwrap().pem();
    (pem, Issuer::new(params, key))
}

fn named(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

const TLS_SETTINGS: &[(&str, &str)] = &[("ssl", "on"), ("ssl_cert_file", "'server.crt'"), ("ssl_key_file", "'server.key'")];

fn tls_server() -> &'static TestCluster {
    static SERVER: OnceLock<TestCluster> = OnceLock::new();
    SERVER.get_or_init(|| {
        let p = pki();
        TestCluster::start_with(&ClusterSetup {
            tcp: true,
            settings: TLS_SETTINGS,
            hba: &[
                "hostssl template1 all 127.0.0.1/32 trust",
                "host    template1 all 127.0.0.1/32 reject",
                "hostssl all pw_user 127.0.0.1/32 scram-sha-256",
                "host    all pw_user 127.0.0.1/32 reject",
            ],
            files: &[("server.crt", p.server_cert.as_bytes()), ("server.key", p.server_key.as_bytes())],
        })
    })
}

fn plain_server() -> &'static TestCluster {
    static SERVER: OnceLock<TestCluster> = OnceLock::new();
    SERVER.get_or_init(|| TestCluster::start_with(&ClusterSetup { tcp: true, ..ClusterSetup::default() }))
}

fn self_signed_server() -> &'static TestCluster {
    static SERVER: OnceLock<TestCluster> = OnceLock::new();
    SERVER.get_or_init(|| {
        let p = pki();
        TestCluster::start_with(&ClusterSetup {
            tcp: true,
            settings: TLS_SETTINGS,
            files: &[("server.crt", p.self_signed_cert.as_bytes()), ("server.key", p.self_signed_key.as_bytes())],
            ..ClusterSetup::default()
        })
    })
}

/// The client's copies of the certificates, kept beside the TLS server's
/// data directory so that the fixture removes them with it.
struct ClientFiles {
    ca: PathBuf,
    other_ca: PathBuf,
    self_signed: PathBuf,
    not_pem: PathBuf,
}

fn client_files() -> &'static ClientFiles {
    static FILES: OnceLock<ClientFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = tls_server().cluster.data_dir.parent().expect("the data directory has a parent").join("client");
        std::fs::create_dir_all(&dir).unwrap();
        let write = |name: &str, text: &str| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        };
        let p = pki();
        ClientFiles {
            ca: write("ca.pem", &p.ca),
            other_ca: write("other-ca.pem", &p.other_ca),
            self_signed: write("self-signed.pem", &p.self_signed_cert),
            not_pem: write("not-pem.txt", "this is not a certificate\n"),
        }
    })
}

/// A home directory whose `.postgresql/root.crt` holds `root` (none when
/// `root` is `None`).
fn home_with_root_cert(root: Option<&str>) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    if let Some(pem) = root {
        std::fs::create_dir_all(home.path().join(".postgresql")).unwrap();
        std::fs::write(home.path().join(".postgresql/root.crt"), pem).unwrap();
    }
    home
}

fn url(host: &str, server: &TestCluster, dbname: &str, params: &str) -> String {
    format!("postgresql://postgres@{host}:{}/{dbname}?{params}", server.port())
}

fn rootcert(path: &Path) -> String {
    format!("sslrootcert={}", path.display())
}

async fn connect(conn: &str, env: &dyn chute_engine::connect::Env) -> Result<tokio_postgres::Client, ConnectError> {
    ConnectOptions::resolve(Some(conn), env).unwrap_or_else(|e| panic!("{conn}: {e}")).connect().await
}

/// Whether the server sees this session as encrypted.
async fn encrypted(client: &tokio_postgres::Client) -> bool {
    client.query_one("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap().get(0)
}

async fn connects_encrypted(conn: &str, env: &dyn chute_engine::connect::Env) -> bool {
    let client = connect(conn, env).await.unwrap_or_else(|e| panic!("{conn}: {e}"));
    encrypted(&client).await
}

async fn refusal(conn: &str, env: &dyn chute_engine::connect::Env) -> ConnectError {
    match connect(conn, env).await {
        Ok(client) => panic!("{conn} connected (ssl = {}) but should have failed", encrypted(&client).await),
        Err(e) => e,
    }
}

#[tokio::test]
async fn require_encrypts_without_checking_the_certificate() {
    let server = tls_server();
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", "sslmode=require"), &NO_ENV).await);
    // No root file: neither the chain nor the name is checked.
    assert!(connects_encrypted(&url("localhost", server, "postgres", "sslmode=require"), &NO_ENV).await);
}

#[tokio::test]
async fn require_with_a_root_file_checks_the_chain_as_libpq_does() {
    let (server, files) = (tls_server(), client_files());
    let right = format!("sslmode=require&{}", rootcert(&files.ca));
    assert!(connects_encrypted(&url("localhost", server, "postgres", &right), &NO_ENV).await, "the name is not checked");
    let wrong = format!("sslmode=require&{}", rootcert(&files.other_ca));
    let e = refusal(&url("127.0.0.1", server, "postgres", &wrong), &NO_ENV).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
    // A root file named but missing is passed over outside the verify modes.
    let missing = "sslmode=require&sslrootcert=/nonexistent/root.crt";
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", missing), &NO_ENV).await);
}

#[tokio::test]
async fn prefer_uses_tls_where_offered_and_goes_plain_where_not() {
    assert!(connects_encrypted(&url("127.0.0.1", tls_server(), "postgres", "sslmode=prefer"), &NO_ENV).await);
    assert!(!connects_encrypted(&url("127.0.0.1", plain_server(), "postgres", "sslmode=prefer"), &NO_ENV).await);
    // prefer is the default.
    assert!(connects_encrypted(&url("127.0.0.1", tls_server(), "postgres", ""), &NO_ENV).await);
}

#[tokio::test]
async fn prefer_goes_plain_when_the_certificate_fails_the_root_file() {
    let params = format!("sslmode=prefer&{}", rootcert(&client_files().other_ca));
    assert!(!connects_encrypted(&url("127.0.0.1", tls_server(), "postgres", &params), &NO_ENV).await);
}

#[tokio::test]
async fn disable_never_encrypts() {
    let server = tls_server();
    assert!(!connects_encrypted(&url("127.0.0.1", server, "postgres", "sslmode=disable"), &NO_ENV).await);
    let e = refusal(&url("127.0.0.1", server, "template1", "sslmode=disable"), &NO_ENV).await;
    assert!(matches!(e, ConnectError::Refused { .. }), "{e}");
    assert!(e.to_string().contains("no encryption"), "{e}");
}

#[tokio::test]
async fn allow_starts_plain_and_retries_with_tls_when_the_server_refuses() {
    let server = tls_server();
    assert!(!connects_encrypted(&url("127.0.0.1", server, "postgres", "sslmode=allow"), &NO_ENV).await);
    assert!(connects_encrypted(&url("127.0.0.1", server, "template1", "sslmode=allow"), &NO_ENV).await);
}

#[tokio::test]
async fn verify_ca_and_verify_full_accept_a_certificate_from_the_right_ca() {
    let (server, ca) = (tls_server(), rootcert(&client_files().ca));
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", &format!("sslmode=verify-full&{ca}")), &NO_ENV).await);
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", &format!("sslmode=verify-ca&{ca}")), &NO_ENV).await);
    // verify-ca does not look at the name; the certificate lists only 127.0.0.1.
    assert!(connects_encrypted(&url("localhost", server, "postgres", &format!("sslmode=verify-ca&{ca}")), &NO_ENV).await);
}

#[tokio::test]
async fn verify_full_refuses_a_host_name_the_certificate_does_not_list() {
    let server = tls_server();
    let params = format!("sslmode=verify-full&{}", rootcert(&client_files().ca));
    let e = refusal(&url("localhost", server, "postgres", &params), &NO_ENV).await;
    let text = e.to_string();
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{text}");
    let head = format!("certificate verification failed for localhost:{} (sslmode=verify-full): ", server.port());
    assert!(text.starts_with(&head), "{text}");
    assert!(text.contains("sslmode=verify-ca"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_refused_with_a_clear_message() {
    let server = tls_server();
    let params = format!("sslmode=verify-ca&{}", rootcert(&client_files().other_ca));
    let text = refusal(&url("127.0.0.1", server, "postgres", &params), &NO_ENV).await.to_string();
    let head = format!("certificate verification failed for 127.0.0.1:{} (sslmode=verify-ca): ", server.port());
    assert!(text.starts_with(&head), "{text}");
    assert!(text.contains("check sslrootcert"), "{text}");
}

#[tokio::test]
async fn require_against_a_server_without_tls_says_so() {
    let server = plain_server();
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=require"), &NO_ENV).await;
    assert!(matches!(e, ConnectError::TlsNotAccepted { .. }), "{e}");
    let head = format!("the server at 127.0.0.1:{} does not accept TLS (sslmode=require): ", server.port());
    assert!(e.to_string().starts_with(&head), "{e}");
    let params = format!("sslmode=verify-full&{}", rootcert(&client_files().ca));
    let e = refusal(&url("127.0.0.1", server, "postgres", &params), &NO_ENV).await;
    assert!(matches!(e, ConnectError::TlsNotAccepted { mode: chute_engine::connect::SslMode::VerifyFull, .. }), "{e}");
}

#[tokio::test]
async fn pgsslmode_and_pgsslrootcert_come_from_the_environment() {
    let (server, files) = (tls_server(), client_files());
    let conn = format!("host=127.0.0.1 port={} user=postgres dbname=postgres", server.port());
    let ca = files.ca.to_str().unwrap();
    assert!(connects_encrypted(&conn, &[("PGSSLMODE", "verify-full"), ("PGSSLROOTCERT", ca)]).await);
    let e = refusal(&conn, &[("PGSSLMODE", "verify-ca"), ("PGSSLROOTCERT", files.other_ca.to_str().unwrap())]).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
    // What the string says wins over the environment.
    assert!(!connects_encrypted(&format!("{conn} sslmode=disable"), &[("PGSSLMODE", "require")]).await);
    let e =
        refusal(&format!("{conn} sslrootcert={}", files.other_ca.display()), &[("PGSSLMODE", "verify-ca"), ("PGSSLROOTCERT", ca)]).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
}

#[tokio::test]
async fn the_default_root_file_is_home_postgresql_root_crt() {
    let (server, p) = (tls_server(), pki());
    let home = home_with_root_cert(Some(&p.ca));
    let env = [("HOME", home.path().to_str().unwrap())];
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", "sslmode=verify-full"), &env).await);

    let home = home_with_root_cert(Some(&p.other_ca));
    let env = [("HOME", home.path().to_str().unwrap())];
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=require"), &env).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "require checks the chain when root.crt exists: {e}");
    assert!(!connects_encrypted(&url("127.0.0.1", server, "postgres", "sslmode=prefer"), &env).await);
}

#[tokio::test]
async fn verify_modes_without_a_root_file_say_where_libpq_looks() {
    let server = tls_server();
    let home = home_with_root_cert(None);
    let env = [("HOME", home.path().to_str().unwrap())];
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=verify-ca"), &env).await;
    let expected = home.path().join(".postgresql/root.crt");
    assert!(matches!(e, ConnectError::NoRootCert { .. }), "{e}");
    assert!(e.to_string().contains(&format!("{} does not exist", expected.display())), "{e}");
    assert!(e.to_string().contains("sslrootcert=PATH"), "{e}");

    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=verify-full&sslrootcert=/nonexistent/ca.pem"), &env).await;
    assert!(e.to_string().contains("/nonexistent/ca.pem does not exist"), "{e}");

    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=verify-full"), &NO_ENV).await;
    assert!(matches!(e, ConnectError::NoHomeForRootCert { .. }), "{e}");

    let params = format!("sslmode=verify-ca&{}", rootcert(&client_files().not_pem));
    let e = refusal(&url("127.0.0.1", server, "postgres", &params), &NO_ENV).await;
    assert!(matches!(e, ConnectError::BadRootCert { .. }), "{e}");
}

#[tokio::test]
async fn a_unix_socket_never_uses_tls() {
    let server = tls_server();
    let socket = server.socket_dir().display().to_string();
    let conn = format!("host={socket} port={} user=postgres dbname=postgres sslmode=verify-full", server.port());
    assert!(!connects_encrypted(&conn, &NO_ENV).await, "no root file is needed either");
    // Hosts are tried in turn, each with its own decision: the TCP host
    // fails for want of a root file, the socket after it connects.
    let conn = format!("host=127.0.0.1,{socket} port={} user=postgres dbname=postgres sslmode=verify-full", server.port());
    assert!(!connects_encrypted(&conn, &NO_ENV).await);
}

#[tokio::test]
async fn a_password_goes_over_tls_and_is_never_shown() {
    let server = tls_server();
    let admin = server.options("postgres").connect().await.unwrap();
    admin.batch_execute(&format!("CREATE ROLE pw_user LOGIN PASSWORD '{PASSWORD}'")).await.unwrap();
    let params = format!("sslmode=verify-full&{}", rootcert(&client_files().ca));
    let conn = format!("postgresql://pw_user:{PASSWORD}@127.0.0.1:{}/postgres?{params}", server.port());
    assert!(connects_encrypted(&conn, &NO_ENV).await);
    let wrong = conn.replace(PASSWORD, "not-the-password");
    let e = refusal(&wrong, &NO_ENV).await;
    assert!(matches!(e, ConnectError::BadPassword { .. }), "{e}");
    assert!(!e.to_string().contains("not-the-password"), "{e}");
    let options = ConnectOptions::resolve(Some(&conn), &NO_ENV).unwrap();
    assert!(!options.display_url().contains(PASSWORD) && !format!("{options:?}").contains(PASSWORD));
}

#[tokio::test]
async fn a_self_signed_server_certificate_can_be_its_own_root() {
    let (server, files) = (self_signed_server(), client_files());
    let params = format!("sslmode=verify-full&{}", rootcert(&files.self_signed));
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", &params), &NO_ENV).await);
    let params = format!("sslmode=verify-full&{}", rootcert(&files.ca));
    let e = refusal(&url("127.0.0.1", server, "postgres", &params), &NO_ENV).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
}
