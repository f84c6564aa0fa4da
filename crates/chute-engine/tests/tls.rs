//! TLS against real servers, with certificates this test makes.
//!
//! Four clusters listen on 127.0.0.1: one with TLS and a certificate for
//! 127.0.0.1 only, signed by a test CA; one without TLS; one whose certificate
//! is self-signed and marked as a CA (the PostgreSQL documentation's
//! `openssl req -x509` set-up); one with the first one's certificate that
//! lets clients in only by a client certificate (`hostssl … cert`) signed by
//! a client CA. On the TLS server, database `template1` and user `pw_user`
//! are reachable only over TLS (`hostssl`), which is what makes `allow`
//! retry. Each case checks what the server saw in `pg_stat_ssl`.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use chute_engine::{ConnectError, ConnectOptions};
use chute_testkit::{ClusterSetup, TestCluster};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

/// An environment with no `PG*` variables and no `HOME`, so no default
/// root certificate file is in play unless a case puts one there.
const NO_ENV: [(&str, &str); 0] = [];

const PASSWORD: &str = "tls-s3cret";

/// An RSA key for a client certificate (ring, under rcgen, cannot make
/// RSA keys), made for these tests with `openssl genpkey -algorithm RSA`. It
/// is written out as PKCS#1 (`RSA PRIVATE KEY`), as older OpenSSL writes it.
const RSA_CLIENT_KEY: &str = "\
-----BEGIN PRIVATE KEY-----\n\
MIIEvgIBADANBgkqhkiG9w0BAQEFAASCBKgwggSkAgEAAoIBAQDc8UTHoZODUcfn\n\
3eWofeLykHGSKwU5N2ewXQt+lrsb3KjecgXPW8UjOysUfTazen2JgkH4m4tMjI37\n\
hyLKHnOjjBZGHPg3oIpd5khi0doUTg7wBjO4MIOb/iSaqN/Wg8k/k19uM3AuIssW\n\
OG1BpgaAfkDqVroV0oBKlEXw6Dxj3sY0jsLGCnOpvDyN34vPwSs0NWH9lhjTraoY\n\
ZCde2vDEaygdx+tvyyV5d8+uxWVjWwrExRxnge4CQ24OZumIKgkXPKNwBSpvDfBT\n\
N1UpLRdZoDfHLYnCXhX8eDccEvOkpedLE12vCvlihCtDQYdTIbiA2d5QNGUvWaP4\n\
9xcZtmgNAgMBAAECggEAGC6cDZGEuLnJvHoP+doVbeEbXRkyUCndQnNcn7VVs136\n\
aaZnNmPf9tQyCeMOiqRceyFzoQc9Ptqfa6lFyIN+uqbJhVEEZeo/WrmqsI4xZUmJ\n\
3wF+xakhroApd3gGT89KxpeVuVUN8S7DtaHla2sFiSjIaB2n7l2ExyTlZtG0UmXK\n\
kkY/lPvsHcFTk+UPPvgzVFyoRkMWdCQ4fUzeJrtnbDNiuJ+5TbvnXjlq/a293b+7\n\
qDqhTrbfJbvUYjRCHU9fjru2PZHfa63NSilftQ/JlHgqUDRoQGxSLXFSCRFgqIQ6\n\
r009AplD0Nggd+Yw989D+4oHLoP4t5Hy5boCIiPSAQKBgQDt5SQgcxoDGJ14gBYn\n\
6qH0rUzECEhbebQaPWlk96hmXKXFu4Vdpu+8dLph1X8b0biKbyYk7Ags1FAIIHqK\n\
iFT2y0fxJNWo119dMsnO9vu3a5fNOLpjRV9i1qRQAKP2gLnDWINQF4doiknw7ot9\n\
71F7skWGzG53IhWg1ritfk/zgQKBgQDtwdfZRwA/HOZUOyks7qu2IdY22rzi9bwn\n\
VphGt8zI4DrE/kcyMHS6a+PSvTt0PGMaOnydSG7yFooTF9XgGnBunxEbLL0M+b+Z\n\
hDESMKP8dE4yXj5QUoENPHkFQDbuOdb4LGHcIdYQm9fSMDaF8iJm5Ec6H3sCcmK5\n\
YBjNCEpKjQKBgQCpXZNkzs1cGvAxU+9yJ6d6DM80WTk6duD0NXiNe4wWpCsZJTID\n\
xM+0+d2fvWGrKpoZZJxhePExCU6ZGpZjfkAPHBZx5el/NSYdsgTfJhN7OExwvMxl\n\
1IPeWDXPB0W0P10BaEjEgpvSn3GY6BvDYtg+GmNJXs3eXxPK2FPOoLjHAQKBgQDg\n\
C0NYt0RvNM+DXkB92+apeZdAF73Y7ZHBTCOwuDDcthgLXEZA8FJ+/X4xLyrgbKtC\n\
owyctg3+SOkR9usPBDsgsvpOrkjz+kDn7B7FslpFYl/xrMdxr1122J5+KTXaJV0C\n\
feg1pRjwi7rDkbU/YZ2zcbgA+HtVIe8QGpMkWoSPXQKBgFJ06bKvLsLTVhdHtKo9\n\
ScFuhmbN5OcpdWouN+JnNBvEwWcFQ7hm7ARWO9fMDYRs1TWb4mg2JrSfJOeXadLa\n\
PeQ1KStwhWuwT3RB+aiEe4qVs2JHhk2dxkWnRWKgOS9cye4NwwvuNczY4LgD9JUE\n\
exxDYr1Dp2pdcpQZDji6k/sz\n\
-----END PRIVATE KEY-----\n";

/// The certificates, made once per test run.
struct Pki {
    ca: String,
    other_ca: String,
    server_cert: String,
    server_key: String,
    self_signed_cert: String,
    self_signed_key: String,
    /// The CA the client-certificate server trusts for client certificates.
    client_ca: String,
    /// CN=postgres, signed by the client CA, with an EC key (PKCS#8 and
    /// SEC1 encodings of the same key).
    client_cert: String,
    client_key: String,
    client_key_sec1: String,
    /// CN=postgres, signed by the client CA, with an RSA key in PKCS#1.
    rsa_client_cert: String,
    rsa_client_key_pkcs1: String,
    /// CN=postgres, signed by a CA the server does not trust.
    rogue_client_cert: String,
    rogue_client_key: String,
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        let (ca, issuer) = new_ca("chute test CA");
        let (other_ca, other_issuer) = new_ca("chute other CA");
        let (client_ca, client_issuer) = new_ca("chute client CA");
        let client_key = KeyPair::generate().unwrap();
        let client_cert = client_cert_params().signed_by(&client_key, &client_issuer).unwrap().pem();
        let rsa_key = KeyPair::from_pem(RSA_CLIENT_KEY).unwrap();
        let rsa_client_cert = client_cert_params().signed_by(&rsa_key, &client_issuer).unwrap().pem();
        let rogue_key = KeyPair::generate().unwrap();
        let rogue_client_cert = client_cert_params().signed_by(&rogue_key, &other_issuer).unwrap().pem();
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
            client_ca,
            client_cert,
            client_key_sec1: pem("EC PRIVATE KEY", &sec1_from_pkcs8(&client_key.serialize_der())),
            client_key: client_key.serialize_pem(),
            rsa_client_cert,
            rsa_client_key_pkcs1: pem("RSA PRIVATE KEY", pkcs8_inner(&rsa_key.serialize_der())),
            rogue_client_cert,
            rogue_client_key: rogue_key.serialize_pem(),
        }
    })
}

/// A client certificate for user `postgres` (the `cert` method matches the
/// common name against the user name).
fn client_cert_params() -> CertificateParams {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name = named("postgres");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params
}

/// One DER element: its tag, its contents and what follows it.
fn der_element(der: &[u8]) -> (u8, &[u8], &[u8]) {
    let (len, head) = match der[1] {
        short if short < 0x80 => (usize::from(short), 2),
        long => {
            let n = usize::from(long & 0x7f);
            (der[2..2 + n].iter().fold(0, |len, b| len << 8 | usize::from(*b)), 2 + n)
        }
    };
    (der[0], &der[head..head + len], &der[head + len..])
}

/// The key inside a PKCS#8 PrivateKeyInfo: for RSA a PKCS#1 RSAPrivateKey,
/// for EC a SEC1 ECPrivateKey without its curve.
fn pkcs8_inner(der: &[u8]) -> &[u8] {
    let (_, info, _) = der_element(der);
    let (_, _, after_version) = der_element(info);
    let (_, _, after_algorithm) = der_element(after_version);
    let (tag, key, _) = der_element(after_algorithm);
    assert_eq!(tag, 0x04, "PKCS#8 keeps the key in an OCTET STRING");
    key
}

/// A P-256 key as `openssl ec` writes it: SEC1 with the named curve (the
/// `[0]` parameters PKCS#8 leaves to its algorithm identifier).
fn sec1_from_pkcs8(der: &[u8]) -> Vec<u8> {
    const P256_CURVE: &[u8] = &[0xa0, 0x0a, 0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];
    let (_, ec_key, _) = der_element(pkcs8_inner(der));
    let (_, _, after_version) = der_element(ec_key);
    let (_, _, public_key) = der_element(after_version);
    let mut body = ec_key[..ec_key.len() - public_key.len()].to_vec();
    body.extend_from_slice(P256_CURVE);
    body.extend_from_slice(public_key);
    assert!(body.len() < 0x80, "a P-256 key fits a short length");
    let mut out = vec![0x30, body.len() as u8];
    out.extend_from_slice(&body);
    out
}

/// DER as a PEM section.
fn pem(label: &str, der: &[u8]) -> String {
    const DIGITS: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let bits = chunk.iter().enumerate().fold(0u32, |bits, (i, b)| bits | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            text.push(if i <= chunk.len() { char::from(DIGITS[(bits >> (18 - 6 * i) & 63) as usize]) } else { '=' });
        }
    }
    let lines: Vec<&str> = text.as_bytes().chunks(64).map(|line| std::str::from_utf8(line).unwrap()).collect();
    format!("-----BEGIN {label}-----\n{}\n-----END {label}-----\n", lines.join("\n"))
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

// Client certificates (sslcert, sslkey) and sslrootcert=system.

/// A server that lets clients in over TLS only, and only with a client
/// certificate signed by the client CA whose common name is the user name.
fn cert_server() -> &'static TestCluster {
    static SERVER: OnceLock<TestCluster> = OnceLock::new();
    SERVER.get_or_init(|| {
        let p = pki();
        let mut settings = TLS_SETTINGS.to_vec();
        settings.push(("ssl_ca_file", "'client-ca.crt'"));
        TestCluster::start_with(&ClusterSetup {
            tcp: true,
            settings: &settings,
            hba: &["hostssl all all 127.0.0.1/32 cert", "host    all all 127.0.0.1/32 reject"],
            files: &[
                ("server.crt", p.server_cert.as_bytes()),
                ("server.key", p.server_key.as_bytes()),
                ("client-ca.crt", p.client_ca.as_bytes()),
            ],
        })
    })
}

/// The client's certificates and keys, keys with mode 0600, beside the
/// client-certificate server's data directory.
struct CertFiles {
    cert: PathBuf,
    key: PathBuf,
    key_sec1: PathBuf,
    rsa_cert: PathBuf,
    rsa_key_pkcs1: PathBuf,
    rogue_cert: PathBuf,
    rogue_key: PathBuf,
}

fn cert_files() -> &'static CertFiles {
    static FILES: OnceLock<CertFiles> = OnceLock::new();
    FILES.get_or_init(|| {
        let dir = cert_server().cluster.data_dir.parent().expect("the data directory has a parent").join("client");
        std::fs::create_dir_all(&dir).unwrap();
        let p = pki();
        CertFiles {
            cert: write_file(&dir, "client.crt", &p.client_cert, 0o644),
            key: write_file(&dir, "client.key", &p.client_key, 0o600),
            key_sec1: write_file(&dir, "client-sec1.key", &p.client_key_sec1, 0o600),
            rsa_cert: write_file(&dir, "rsa.crt", &p.rsa_client_cert, 0o644),
            rsa_key_pkcs1: write_file(&dir, "rsa.key", &p.rsa_client_key_pkcs1, 0o600),
            rogue_cert: write_file(&dir, "rogue.crt", &p.rogue_client_cert, 0o644),
            rogue_key: write_file(&dir, "rogue.key", &p.rogue_client_key, 0o600),
        }
    })
}

fn write_file(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

/// `sslcert=CERT&sslkey=KEY`, after a verify-full check of the server.
fn client_params(cert: &Path, key: &Path) -> String {
    format!("sslmode=verify-full&{}&sslcert={}&sslkey={}", rootcert(&client_files().ca), cert.display(), key.display())
}

/// The subject of the certificate the server saw from this session, if any.
async fn client_dn(client: &tokio_postgres::Client) -> Option<String> {
    let row = client.query_one("SELECT ssl, client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[]).await.unwrap();
    assert!(row.get::<_, bool>(0), "the session is encrypted");
    row.get(1)
}

async fn connects_with_certificate(conn: &str, env: &dyn chute_engine::connect::Env) -> Option<String> {
    let client = connect(conn, env).await.unwrap_or_else(|e| panic!("{conn}: {e}"));
    client_dn(&client).await
}

#[tokio::test]
async fn a_client_certificate_named_in_the_url_is_sent() {
    let (server, files) = (cert_server(), cert_files());
    let conn = url("127.0.0.1", server, "postgres", &client_params(&files.cert, &files.key));
    assert_eq!(connects_with_certificate(&conn, &NO_ENV).await.as_deref(), Some("/CN=postgres"));
    // The same in a key=value string, with require (no root file).
    let conn = format!(
        "host=127.0.0.1 port={} user=postgres sslmode=require sslcert={} sslkey={}",
        server.port(),
        files.cert.display(),
        files.key.display()
    );
    assert_eq!(connects_with_certificate(&conn, &NO_ENV).await.as_deref(), Some("/CN=postgres"));
    // A server that does not ask for one is not bothered by it.
    let conn = url("127.0.0.1", tls_server(), "postgres", &client_params(&files.cert, &files.key));
    assert_eq!(connects_with_certificate(&conn, &NO_ENV).await, None);
}

#[tokio::test]
async fn pgsslcert_and_pgsslkey_come_from_the_environment() {
    let (server, files) = (cert_server(), cert_files());
    let env = [("PGSSLCERT", files.cert.to_str().unwrap()), ("PGSSLKEY", files.key.to_str().unwrap())];
    let conn = url("127.0.0.1", server, "postgres", "sslmode=require");
    assert_eq!(connects_with_certificate(&conn, &env).await.as_deref(), Some("/CN=postgres"));
    // What the string says wins over the environment.
    let env = [("PGSSLCERT", files.rogue_cert.to_str().unwrap()), ("PGSSLKEY", files.rogue_key.to_str().unwrap())];
    let conn = url("127.0.0.1", server, "postgres", &client_params(&files.cert, &files.key));
    assert_eq!(connects_with_certificate(&conn, &env).await.as_deref(), Some("/CN=postgres"));
}

#[tokio::test]
async fn the_default_client_certificate_is_home_postgresql_postgresql_crt() {
    let (server, p) = (cert_server(), pki());
    let home = home_with_root_cert(Some(&p.ca));
    let dir = home.path().join(".postgresql");
    write_file(&dir, "postgresql.crt", &p.client_cert, 0o644);
    write_file(&dir, "postgresql.key", &p.client_key, 0o600);
    let env = [("HOME", home.path().to_str().unwrap())];
    // Root file, certificate and key all from ~/.postgresql.
    let conn = url("127.0.0.1", server, "postgres", "sslmode=verify-full");
    assert_eq!(connects_with_certificate(&conn, &env).await.as_deref(), Some("/CN=postgres"));
    // sslcert given, the key still from its default place.
    let conn = url("127.0.0.1", server, "postgres", &format!("sslmode=verify-full&sslcert={}", dir.join("postgresql.crt").display()));
    assert_eq!(connects_with_certificate(&conn, &env).await.as_deref(), Some("/CN=postgres"));
}

#[tokio::test]
async fn pkcs1_rsa_and_sec1_ec_keys_are_accepted() {
    let (server, files) = (cert_server(), cert_files());
    let pem = std::fs::read_to_string(&files.rsa_key_pkcs1).unwrap();
    assert!(pem.starts_with("-----BEGIN RSA PRIVATE KEY-----"), "{pem}");
    let conn = url("127.0.0.1", server, "postgres", &client_params(&files.rsa_cert, &files.rsa_key_pkcs1));
    assert_eq!(connects_with_certificate(&conn, &NO_ENV).await.as_deref(), Some("/CN=postgres"));
    let pem = std::fs::read_to_string(&files.key_sec1).unwrap();
    assert!(pem.starts_with("-----BEGIN EC PRIVATE KEY-----"), "{pem}");
    let conn = url("127.0.0.1", server, "postgres", &client_params(&files.cert, &files.key_sec1));
    assert_eq!(connects_with_certificate(&conn, &NO_ENV).await.as_deref(), Some("/CN=postgres"));
}

#[tokio::test]
async fn without_a_client_certificate_the_refusal_says_how_to_send_one() {
    let server = cert_server();
    let head =
        format!("the server at 127.0.0.1:{} requires a client certificate from user \"postgres\" and none was sent (", server.port());
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslmode=require"), &NO_ENV).await;
    assert!(matches!(e, ConnectError::NoClientCert { .. }), "{e}");
    let text = e.to_string();
    assert!(text.starts_with(&head), "{text}");
    assert!(text.contains("sslcert=FILE and sslkey=FILE") && text.contains("~/.postgresql/postgresql.crt"), "{text}");
    assert!(!text.contains('\n'), "{text}");

    let home = home_with_root_cert(None);
    let env = [("HOME", home.path().to_str().unwrap())];
    let text = refusal(&url("127.0.0.1", server, "postgres", "sslmode=require"), &env).await.to_string();
    let looked = home.path().join(".postgresql/postgresql.crt");
    assert!(text.contains(&format!("sslcert is not set and {} does not exist", looked.display())), "{text}");

    // libpq goes on without a named certificate file that is not there; the
    // refusal then names it.
    let text = refusal(&url("127.0.0.1", server, "postgres", "sslmode=require&sslcert=/nonexistent/client.crt"), &env).await.to_string();
    assert!(text.contains("sslcert names /nonexistent/client.crt, which does not exist"), "{text}");
}

#[tokio::test]
async fn a_certificate_from_a_ca_the_server_does_not_trust_is_refused() {
    let (server, files) = (cert_server(), cert_files());
    let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.rogue_cert, &files.rogue_key)), &NO_ENV).await;
    assert!(matches!(e, ConnectError::ClientCertRefused { .. }), "{e}");
    let text = e.to_string();
    let head = format!("the server at 127.0.0.1:{} refused the client certificate {}: ", server.port(), files.rogue_cert.display());
    assert!(text.starts_with(&head), "{text}");
    assert!(text.contains("ssl_ca_file"), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[tokio::test]
async fn a_certificate_for_another_user_is_refused_naming_the_common_name() {
    let (server, files) = (cert_server(), cert_files());
    let admin = server.options("postgres").connect().await.unwrap();
    admin.batch_execute(r#"CREATE ROLE "cert_other" LOGIN"#).await.unwrap();
    let conn = format!("postgresql://cert_other@127.0.0.1:{}/postgres?{}", server.port(), client_params(&files.cert, &files.key));
    let e = refusal(&conn, &NO_ENV).await;
    assert!(matches!(e, ConnectError::ClientCertRefused { .. }), "{e}");
    let text = e.to_string();
    assert!(text.contains("certificate authentication failed for user \"cert_other\""), "{text}");
    assert!(text.contains("common name (CN) must be the user name"), "{text}");
}

#[tokio::test]
async fn a_key_readable_by_others_is_refused_naming_chmod_0600() {
    let (server, files, p) = (cert_server(), cert_files(), pki());
    let dir = tempfile::tempdir().unwrap();
    let key = write_file(dir.path(), "open.key", &p.client_key, 0o644);
    let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.cert, &key)), &NO_ENV).await;
    assert!(matches!(e, ConnectError::KeyPermissions { mode: 0o644, .. }), "{e}");
    let text = e.to_string();
    assert!(text.starts_with(&format!("the private key file {} has group or world access (mode 0644)", key.display())), "{text}");
    assert!(text.contains(&format!("run chmod 0600 {}", key.display())), "{text}");
    assert!(!text.contains('\n'), "{text}");

    // libpq lets a key owned by root be readable by its group.
    let key = write_file(dir.path(), "group.key", &p.client_key, 0o640);
    let conn = url("127.0.0.1", server, "postgres", &client_params(&files.cert, &key));
    if running_as_root() {
        assert_eq!(connects_with_certificate(&conn, &NO_ENV).await.as_deref(), Some("/CN=postgres"));
    } else {
        assert!(matches!(refusal(&conn, &NO_ENV).await, ConnectError::KeyPermissions { mode: 0o640, .. }));
    }

    // The key is looked at only when it is going to be used: not without
    // TLS, and not without a certificate.
    let open = dir.path().join("open.key");
    let plain = format!("sslmode=disable&sslcert={}&sslkey={}", files.cert.display(), open.display());
    assert!(!connects_encrypted(&url("127.0.0.1", tls_server(), "postgres", &plain), &NO_ENV).await);
    let no_cert = format!("sslmode=require&sslcert=/nonexistent/client.crt&sslkey={}", open.display());
    assert!(connects_encrypted(&url("127.0.0.1", tls_server(), "postgres", &no_cert), &NO_ENV).await);
}

fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    std::fs::metadata(dir.path()).unwrap().uid() == 0
}

#[tokio::test]
async fn a_key_that_does_not_match_the_certificate_is_refused_clearly() {
    let (server, files) = (cert_server(), cert_files());
    let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.cert, &files.rsa_key_pkcs1)), &NO_ENV).await;
    assert!(matches!(e, ConnectError::ClientKeyMismatch { .. }), "{e}");
    let text = e.to_string();
    let head =
        format!("the private key {} does not belong to the client certificate {}: ", files.rsa_key_pkcs1.display(), files.cert.display());
    assert!(text.starts_with(&head), "{text}");
    assert!(text.contains("sslkey=FILE"), "{text}");
}

#[tokio::test]
async fn a_certificate_without_a_usable_key_says_what_is_wrong() {
    let (server, files, p) = (cert_server(), cert_files(), pki());
    let missing =
        refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.cert, Path::new("/nonexistent/client.key"))), &NO_ENV).await;
    assert!(matches!(missing, ConnectError::NoClientKey { .. }), "{missing}");
    let head = format!(
        "the client certificate {} has no private key: the key file /nonexistent/client.key does not exist; ",
        files.cert.display()
    );
    assert!(missing.to_string().starts_with(&head), "{missing}");
    // No sslkey and no home directory to find the default one in.
    let conn = url("127.0.0.1", server, "postgres", &format!("sslmode=require&sslcert={}", files.cert.display()));
    let e = refusal(&conn, &NO_ENV).await;
    assert!(matches!(e, ConnectError::NoClientKey { .. }) && e.to_string().contains("no home directory"), "{e}");

    let dir = tempfile::tempdir().unwrap();
    let not_a_key = write_file(dir.path(), "cert-as-key.pem", &p.client_cert, 0o600);
    let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.cert, &not_a_key)), &NO_ENV).await;
    assert!(matches!(e, ConnectError::BadClientKey { .. }) && e.to_string().contains("it holds no private key"), "{e}");

    // Encrypted keys need sslpassword, which chute does not take: both the
    // PKCS#8 form and OpenSSL's older one are recognised.
    let pkcs8 =
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIFHDBOBgkqhkiG9w0BBQ0wQTApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n";
    let legacy = "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-256-CBC,0123456789ABCDEF0123456789ABCDEF\n\nMHcCAQEEIA==\n-----END EC PRIVATE KEY-----\n";
    for (name, text) in [("pkcs8-encrypted.key", pkcs8), ("legacy-encrypted.key", legacy)] {
        let key = write_file(dir.path(), name, text, 0o600);
        let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&files.cert, &key)), &NO_ENV).await;
        assert!(matches!(e, ConnectError::EncryptedClientKey { .. }), "{e}");
        let text = e.to_string();
        assert!(text.contains(&format!("{} is encrypted", key.display())) && text.contains("sslpassword is not supported"), "{text}");
        assert!(text.contains("openssl pkey -in"), "{text}");
    }

    let bad_cert = write_file(dir.path(), "not-a-cert.crt", "this is not a certificate\n", 0o644);
    let e = refusal(&url("127.0.0.1", server, "postgres", &client_params(&bad_cert, &files.key)), &NO_ENV).await;
    assert!(matches!(e, ConnectError::BadClientCert { .. }) && e.to_string().contains("it holds no certificate"), "{e}");
}

#[tokio::test]
async fn sslrootcert_system_allows_only_verify_full() {
    let system = "postgresql://postgres@db.example/postgres?sslrootcert=system";
    assert_eq!(ConnectOptions::resolve(Some(system), &NO_ENV).unwrap().sslmode, chute_engine::connect::SslMode::VerifyFull);
    let explicit = format!("{system}&sslmode=verify-full");
    assert_eq!(ConnectOptions::resolve(Some(&explicit), &NO_ENV).unwrap().sslmode, chute_engine::connect::SslMode::VerifyFull);
    for weak in ["disable", "allow", "prefer", "require", "verify-ca"] {
        let e = ConnectOptions::resolve(Some(&format!("{system}&sslmode={weak}")), &NO_ENV).unwrap_err();
        assert!(matches!(e, ConnectError::WeakModeWithSystemRoots { .. }), "{e}");
        assert!(e.to_string().starts_with(&format!("sslmode={weak} may not be used with sslrootcert=system")), "{e}");
        assert!(e.to_string().contains("verify-full"), "{e}");
    }
    // PGSSLMODE counts as given too, as in libpq.
    let e = ConnectOptions::resolve(Some(system), &[("PGSSLMODE", "require")]).unwrap_err();
    assert!(matches!(e, ConnectError::WeakModeWithSystemRoots { .. }), "{e}");
    let e = ConnectOptions::resolve(Some("host=h"), &[("PGSSLMODE", "verify-ca"), ("PGSSLROOTCERT", "system")]).unwrap_err();
    assert!(matches!(e, ConnectError::WeakModeWithSystemRoots { .. }), "{e}");
}

#[tokio::test]
async fn sslrootcert_system_trusts_the_bundle_in_ssl_cert_file() {
    let (server, p) = (tls_server(), pki());
    let dir = tempfile::tempdir().unwrap();
    let bundle = write_file(dir.path(), "ca-certificates.crt", &format!("{}{}", p.other_ca, p.ca), 0o644);
    let env = [("SSL_CERT_FILE", bundle.to_str().unwrap())];
    // No sslmode: verify-full, so the name is checked as well as the chain.
    assert!(connects_encrypted(&url("127.0.0.1", server, "postgres", "sslrootcert=system"), &env).await);
    let e = refusal(&url("localhost", server, "postgres", "sslrootcert=system"), &env).await;
    assert!(matches!(e, ConnectError::CertificateRejected { mode: chute_engine::connect::SslMode::VerifyFull, .. }), "{e}");
    assert!(e.to_string().contains("sslrootcert=system allows only sslmode=verify-full"), "{e}");

    let others = write_file(dir.path(), "others.crt", &p.other_ca, 0o644);
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslrootcert=system"), &[("SSL_CERT_FILE", others.to_str().unwrap())]).await;
    assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
    assert!(e.to_string().contains("name its certificate with sslrootcert=FILE"), "{e}");

    let e = refusal(&url("127.0.0.1", server, "postgres", "sslrootcert=system"), &[("SSL_CERT_FILE", "/nonexistent/bundle.crt")]).await;
    assert!(matches!(e, ConnectError::NoSystemRoots { .. }), "{e}");
    assert!(e.to_string().contains("but /nonexistent/bundle.crt does not exist: install the ca-certificates package"), "{e}");

    // Without SSL_CERT_FILE, the operating system's store (Debian's bundle),
    // which does not hold the test CA.
    let e = refusal(&url("127.0.0.1", server, "postgres", "sslrootcert=system"), &NO_ENV).await;
    if Path::new(chute_engine::connect::SYSTEM_ROOTS_FILE).exists() {
        assert!(matches!(e, ConnectError::CertificateRejected { .. }), "{e}");
    } else {
        assert!(e.to_string().contains("the operating system's certificate store"), "{e}");
    }
}
