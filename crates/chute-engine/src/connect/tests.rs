use super::tls::key_file_too_open;
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
    for (mode, too_open) in [(0o600, false), (0o640, false), (0o440, false), (0o644, true), (0o660, true), (0o650, true), (0o641, true)] {
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
    assert_eq!(redact("postgres://u:pw@h/d?sslkey=k.key&sslpassword=kp"), "postgres://u:<hidden>@h/d?sslkey=k.key&sslpassword=<hidden>");
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
