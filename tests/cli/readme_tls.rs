//! The TLS server the README test runs its `tls` blocks against: the
//! README's TLS examples (`sslmode=verify-full`, `sslrootcert`, client
//! certificates, `sslrootcert=system`) keep their flags and reach this server
//! on 127.0.0.1 instead of a remote one. It accepts TLS connections only, and
//! checks any client certificate against the test CA.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use chute_testkit::{ClusterSetup, TestCluster};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose,
};

pub struct TlsServer {
    pub cluster: TestCluster,
    ca: String,
    client_cert: String,
    client_key: String,
}

fn named(common_name: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    dn
}

impl TlsServer {
    pub fn start() -> TlsServer {
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.distinguished_name = named("chute README test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_key = KeyPair::generate().unwrap();
        let ca = ca_params.self_signed(&ca_key).unwrap().pem();
        let issuer = Issuer::new(ca_params, ca_key);

        let server_key = KeyPair::generate().unwrap();
        let mut server = CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        server.distinguished_name = named("chute README test server");
        let server_cert = server.signed_by(&server_key, &issuer).unwrap().pem();

        // The `cert` method would match the common name against the user name: postgres.
        let client_key = KeyPair::generate().unwrap();
        let mut client = CertificateParams::new(Vec::<String>::new()).unwrap();
        client.distinguished_name = named("postgres");
        client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        let client_cert = client.signed_by(&client_key, &issuer).unwrap().pem();

        let server_key = server_key.serialize_pem();
        let cluster = TestCluster::start_with(&ClusterSetup {
            tcp: true,
            settings: &[("ssl", "on"), ("ssl_cert_file", "'server.crt'"), ("ssl_key_file", "'server.key'"), ("ssl_ca_file", "'ca.crt'")],
            hba: &["hostssl all all 127.0.0.1/32 trust", "hostnossl all all 127.0.0.1/32 reject"],
            files: &[("server.crt", server_cert.as_bytes()), ("server.key", server_key.as_bytes()), ("ca.crt", ca.as_bytes())],
        });
        TlsServer { cluster, ca, client_cert, client_key: client_key.serialize_pem() }
    }

    /// `ca.crt`, `client.crt` and `client.key` (mode 0600, as libpq demands) in `dir`.
    pub fn write_client_files(&self, dir: &Path) {
        for (name, text, mode) in
            [("ca.crt", &self.ca, 0o644), ("client.crt", &self.client_cert, 0o644), ("client.key", &self.client_key, 0o600)]
        {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    }
}

/// Points every `postgres://USER@HOST[:PORT]/DB?QUERY` at the TLS server on
/// 127.0.0.1 as `postgres`, keeping DB and QUERY; returns the databases named.
pub fn rewrite_urls(text: &str, port: u16) -> (String, Vec<String>) {
    let stop = |c: char| c.is_whitespace() || c == '"' || c == '\'';
    let mut dbs = Vec::new();
    let mut out = String::new();
    let mut rest = text;
    while let Some(at) = ["postgres://", "postgresql://"].iter().filter_map(|p| rest.find(p)).min() {
        out.push_str(&rest[..at]);
        let end = rest[at..].find(stop).map_or(rest.len(), |e| at + e);
        let token = &rest[at..end];
        let after_scheme = &token[token.find("://").unwrap() + 3..];
        let path = after_scheme.split_once('/').map(|(_, p)| p).unwrap_or("");
        let (db, query) = path.split_once('?').map_or((path, None), |(d, q)| (d, Some(q)));
        let db = if db.is_empty() { "postgres" } else { db };
        dbs.push(db.to_owned());
        out.push_str(&format!("postgresql://postgres@127.0.0.1:{port}/{db}"));
        if let Some(q) = query {
            out.push('?');
            out.push_str(q);
        }
        rest = &rest[end..];
    }
    out.push_str(rest);
    (out, dbs)
}
