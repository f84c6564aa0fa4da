//! Connection settings mean what they mean to libpq, or chute refuses them
//! by name: quoted and escaped key=value strings, URLs with odd passwords
//! (and no secret in any output), a port per host, `hostaddr`,
//! `PGSERVICE`, `PGTZ`/`PGDATESTYLE` as `psql \copy` applies them,
//! `.pgpass` socket matching and its mode, and `chute bench` keeping the
//! password off psql's command line.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use chute_testkit::process::{exit_within, spawn};
use chute_testkit::{ClusterSetup, TestCluster, shared};

use crate::common::{chute, open_tempdir, run, run_expect, summary_value};

const PASSWORD: &str = "S3cr3tPW_xyz";

/// A server on its socket and 127.0.0.1 that asks `pw_user` (a superuser)
/// for a password, and trusts everyone else on the socket.
fn password_server() -> TestCluster {
    let cluster = TestCluster::start_with(&ClusterSetup {
        tcp: true,
        hba: &["local all pw_user scram-sha-256", "host all pw_user 127.0.0.1/32 scram-sha-256", "host all all 127.0.0.1/32 trust"],
        ..Default::default()
    });
    let admin = format!("host={} port={} user=postgres dbname=postgres", cluster.socket_dir().display(), cluster.port());
    run_expect(
        Command::new(psql()).args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &admin, "-c"]).arg(format!(
            "SET password_encryption = 'scram-sha-256'; CREATE ROLE pw_user LOGIN SUPERUSER PASSWORD '{PASSWORD}'; CREATE TABLE public.t (time timestamptz, v text)"
        )),
        0,
    );
    cluster
}

fn psql() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join("psql")).find(|f| f.is_file()));
    on_path
        .or_else(|| {
            let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                .ok()?
                .flatten()
                .map(|e| e.path().join("bin/psql"))
                .filter(|p| p.is_file())
                .collect();
            found.sort();
            found.pop()
        })
        .expect("psql is installed")
}

/// A one-row CSV for table `t (time timestamptz, v text)`.
fn one_row(dir: &Path) -> String {
    let f = dir.join("one.csv");
    std::fs::write(&f, "2021-06-08 00:00:00+00,x\n").unwrap();
    f.to_str().unwrap().to_owned()
}

#[test]
fn no_secret_in_any_output_for_malformed_connection_strings() {
    let dir = open_tempdir();
    let file = one_row(dir.path());
    for (conn, pieces) in [
        ("password='S3 cr3t PW_x' port=abc", &["cr3t", "PW_x"][..]),
        ("password = S3cr3tPW_x port=abc", &["S3cr3tPW_x"]),
        ("password= S3cr3tPW_x port=abc", &["S3cr3tPW_x"]),
        (r"password='S3cr3t\' PW_x' port=abc", &["PW_x", "S3cr3t"]),
        ("postgres://u2:p@ss:w/rd%PW!@h.invalid/db", &["ss:w", "rd%PW", "PW!"]),
        ("postgres://u:S3cr@3tPW_xyz@h.invalid/db", &["3tPW_xyz", "S3cr"]),
        ("host=h.invalid password='open quote", &["open quote"]),
    ] {
        let out = run(chute().args(["--url", conn, "load", "t", &file]));
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(out.status.code(), Some(2), "{conn}: {text}");
        for p in pieces {
            assert!(!text.contains(p), "{conn}: the output shows {p:?}:\n{text}");
        }
        assert!(!text.trim().is_empty(), "{conn}: an error says what is wrong");
    }
}

/// Issue 27 item 6: a connection string that cannot be read, whatever its
/// shape (a mistyped scheme, no scheme, an unquoted password with a space
/// or an '=', an unterminated quote, a password with a '?' in a URL), is
/// never echoed by any command: plain, `--json`, `chute serve`'s log,
/// `chute cluster`'s node and coordinator URLs. Each says what is wrong.
#[tokio::test]
async fn a_connection_string_that_cannot_be_read_is_never_echoed_by_any_command() {
    // The coordinator a node URL is checked from.
    let db = shared().fresh_db("conn_never_echoed").await;
    let coordinator = db.url();
    let dir = open_tempdir();
    let file = one_row(dir.path());
    // (connection string, what the error says about it)
    let shapes = [
        (format!("postgres//u:{PASSWORD}@127.0.0.1/t4"), "(it starts \"postgres//\")"),
        (format!("postgres:/u:{PASSWORD}@127.0.0.1/t4"), "(it starts \"postgres:/\")"),
        (format!("postgress://u:{PASSWORD}@127.0.0.1/t4"), "scheme \"postgress://\" is not one libpq reads"),
        (format!("POSTGRESQL://u:{PASSWORD}@127.0.0.1/t4"), "must be in lower case"),
        (format!("u:{PASSWORD}@host:5460/db"), "looks like a URL without its scheme"),
        (format!("jdbc:postgresql://127.0.0.1/t4?user=u&password={PASSWORD}"), "leave out \"jdbc:\""),
        (format!("host=127.0.0.1 password=S3cr3t {PASSWORD} user=u"), "a word after password=… has no \"=\""),
        (format!("host=127.0.0.1 password=S3cr3t {PASSWORD}=x user=u"), "an option after password=… is not a libpq parameter"),
        (format!("host=127.0.0.1 password='S3cr3t {PASSWORD} user=u"), "the quoted value of \"password\" has no closing quote"),
        (format!("postgres://u:12?x={PASSWORD}@127.0.0.1/t4"), "an option in the URL's query is not a libpq parameter"),
        (format!("postgres://u:S3cr3t/{PASSWORD}@127.0.0.1/t4"), "an '@' after a '/'"),
    ];
    for (conn, says) in &shapes {
        let in_node = format!("n1={conn}");
        let commands: [(&str, Vec<&str>); 7] = [
            ("load", vec!["--url", conn, "load", "t", &file]),
            ("load --json", vec!["--url", conn, "load", "--json", "t", &file]),
            ("doctor --json", vec!["--url", conn, "doctor", "--json"]),
            ("status", vec!["--url", conn, "status"]),
            ("serve", vec!["--url", conn, "serve", "--listen", "127.0.0.1:0"]),
            ("cluster status --coordinator", vec!["cluster", "status", "--coordinator", conn]),
            ("cluster add-node", vec!["--url", &coordinator, "cluster", "add-node", "--dry-run", &in_node]),
        ];
        for (what, args) in commands {
            // Within 30 s: a serve that started instead of refusing its URL would never end.
            let child = spawn(chute().args(&args).stdout(Stdio::piped()).stderr(Stdio::piped()));
            let out = exit_within(child, std::time::Duration::from_secs(30), &format!("{what} with {conn:?}"));
            let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
            assert_eq!(out.status.code(), Some(2), "{what} {conn}: {text}");
            for piece in [PASSWORD, "S3cr3t", "PW_xyz"] {
                assert!(!text.contains(piece), "{what} with {conn:?}: the output shows {piece:?}:\n{text}");
            }
            assert!(text.contains(says), "{what} with {conn:?}: the error should say {says:?}:\n{text}");
        }
    }
    // A node URL given without its name splits at its query's '=', after
    // the password: that "name" is not shown either.
    let (_, err) = run_expect(
        chute().args([
            "--url",
            "host=/nonexistent",
            "cluster",
            "add-node",
            &format!("postgres://u:{PASSWORD}@127.0.0.1/t4?sslmode=require"),
        ]),
        2,
    );
    assert!(!err.contains("S3cr3t") && err.contains("starts with its URL: put a name in front"), "{err}");
}

#[tokio::test]
async fn each_host_gets_its_own_port() {
    let db = shared().fresh_db("conn_ports").await;
    db.client().await.batch_execute("CREATE TABLE t (time timestamptz, v text)").await.unwrap();
    let dir = open_tempdir();
    let sock = shared().socket_dir().display().to_string();
    // The first host has nothing on port 1; the second is the server.
    let conn = format!("host={sock},{sock} port=1,{} user=postgres dbname={}", shared().port(), db.name);
    let (out, _) = run_expect(chute().args(["--url", &conn, "load", "t", &one_row(dir.path())]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
}

#[tokio::test]
async fn pgservice_names_the_server_from_the_service_file() {
    let db = shared().fresh_db("conn_service").await;
    db.client().await.batch_execute("CREATE TABLE t (time timestamptz, v text)").await.unwrap();
    let dir = open_tempdir();
    let services = dir.path().join("services.conf");
    std::fs::write(
        &services,
        format!(
            "[other]\nhost=h.invalid\n\n[metrics]\nhost={}\nport={}\nuser=postgres\ndbname={}\n",
            shared().socket_dir().display(),
            shared().port(),
            db.name
        ),
    )
    .unwrap();
    let (out, _) = run_expect(
        chute().env("PGSERVICE", "metrics").env("PGSERVICEFILE", &services).env("PGSYSCONFDIR", dir.path()).args([
            "load",
            "t",
            &one_row(dir.path()),
        ]),
        0,
    );
    assert_eq!(summary_value(&out, "rows loaded"), "1");
    let (_, err) = run_expect(
        chute().env("PGSERVICE", "nosuch").env("PGSERVICEFILE", &services).env("PGSYSCONFDIR", dir.path()).args([
            "load",
            "t",
            &one_row(dir.path()),
        ]),
        2,
    );
    assert!(err.contains("service \"nosuch\" not found"), "{err}");
}

#[tokio::test]
async fn parameters_chute_cannot_honour_are_refused_by_name() {
    let db = shared().fresh_db("conn_refused").await;
    db.client().await.batch_execute("CREATE TABLE t (time timestamptz, v text)").await.unwrap();
    let dir = open_tempdir();
    let file = one_row(dir.path());
    let (_, err) = run_expect(chute().env("PGTARGETSESSIONATTRS", "standbys").args(["--url", &db.url(), "load", "t", &file]), 2);
    assert!(err.contains("PGTARGETSESSIONATTRS") && err.contains("prefer-standby"), "{err}");
    // A value libpq knows is honoured: this server is no standby.
    let (_, err) = run_expect(chute().env("PGTARGETSESSIONATTRS", "standby").args(["--url", &db.url(), "load", "t", &file]), 2);
    assert!(err.contains("target_session_attrs=standby") && err.contains("is a primary"), "{err}");
    let (_, err) = run_expect(chute().env("PGSSLCRL", "/etc/crl.pem").args(["--url", &db.url(), "load", "t", &file]), 2);
    assert!(err.contains("PGSSLCRL"), "{err}");
    // channel_binding=require is kept: a socket has no TLS to bind to.
    let conn = format!(
        "host={} port={} user=postgres dbname={} channel_binding=require",
        shared().socket_dir().display(),
        shared().port(),
        db.name
    );
    let (_, err) = run_expect(chute().args(["--url", &conn, "load", "t", &file]), 2);
    assert!(err.contains("channel_binding=require"), "{err}");
    let n: i64 = db.client().await.query_one("SELECT count(*) FROM t", &[]).await.unwrap().get(0);
    assert_eq!(n, 0, "nothing was loaded through a refused setting");
}

#[tokio::test]
async fn pgtz_and_pgdatestyle_apply_as_in_psql_copy() {
    let db = shared().fresh_db("conn_session_env").await;
    let c = db.client().await;
    c.batch_execute("CREATE TABLE t (time timestamptz, v text); CREATE TABLE ref (LIKE t)").await.unwrap();
    let dir = open_tempdir();
    let file = dir.path().join("times.csv");
    std::fs::write(
        &file,
        "01/02/2021,dmy date\n2021-06-08 00:00:00,zoneless\n2021-01-15 12:30,winter zoneless\n02/03/2021 10:00,dmy time\n2021-06-08 00:00:00+00,zoned\n",
    )
    .unwrap();
    let env = [("PGTZ", "America/Sao_Paulo"), ("PGDATESTYLE", "ISO, DMY")];
    let (out, _) = run_expect(chute().envs(env).args(["--url", &db.url(), "load", "t", file.to_str().unwrap()]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "5");
    let conninfo = format!("host={} port={} user=postgres dbname={}", shared().socket_dir().display(), shared().port(), db.name);
    run_expect(
        Command::new(psql())
            .envs(env)
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", &conninfo, "-c"])
            .arg(format!("\\copy ref FROM '{}' WITH (FORMAT csv)", file.display())),
        0,
    );
    let diff: i64 = c
        .query_one(
            "SELECT (SELECT count(*) FROM (TABLE t EXCEPT ALL TABLE ref) a) + (SELECT count(*) FROM (TABLE ref EXCEPT ALL TABLE t) b)",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(diff, 0, "chute and psql \\copy disagree under PGTZ and PGDATESTYLE");
    let first: String = c
        .query_one("SELECT to_char(time AT TIME ZONE 'America/Sao_Paulo', 'YYYY-MM-DD HH24:MI') FROM t WHERE v = 'dmy date'", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(first, "2021-02-01 00:00", "01/02/2021 is the 1st of February under DMY, midnight in Sao Paulo");
}

#[test]
fn pgpass_matches_a_socket_path_literally_and_says_when_its_mode_ignores_it() {
    let server = password_server();
    let dir = open_tempdir();
    let file = one_row(dir.path());
    let sock = server.socket_dir().display().to_string();
    let pgpass = dir.path().join("pgpass");
    std::fs::write(&pgpass, format!("localhost:*:*:pw_user:wrong\n{sock}:{}:*:pw_user:{PASSWORD}\n", server.port())).unwrap();
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o600)).unwrap();
    let conn = format!("host={sock} port={} user=pw_user dbname=postgres", server.port());
    let (out, _) = run_expect(chute().env("PGPASSFILE", &pgpass).args(["--url", &conn, "load", "t", &file]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
    std::fs::set_permissions(&pgpass, std::fs::Permissions::from_mode(0o644)).unwrap();
    let (_, err) = run_expect(chute().env("PGPASSFILE", &pgpass).args(["--url", &conn, "load", "t", &file]), 2);
    assert!(err.contains("was ignored because group or others may read it"), "{err}");
    assert!(err.contains(&format!("chmod 0600 {}", pgpass.display())), "{err}");
}

#[test]
fn hostaddr_is_connected_to_while_host_names_the_server() {
    let server = password_server();
    let dir = open_tempdir();
    let conn = format!("host=db.invalid hostaddr=127.0.0.1 port={} user=postgres dbname=postgres sslmode=disable", server.port());
    let (out, _) = run_expect(chute().args(["--url", &conn, "load", "t", &one_row(dir.path())]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
    // PGHOSTADDR is read as libpq reads it.
    let conn = format!("host=db.invalid port={} user=postgres dbname=postgres sslmode=disable", server.port());
    let (out, _) = run_expect(chute().env("PGHOSTADDR", "127.0.0.1").args(["--url", &conn, "load", "t", &one_row(dir.path())]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
}

#[test]
fn bench_gives_psql_the_password_in_its_environment_not_its_command_line() {
    let server = password_server();
    let dir = open_tempdir();
    // A psql first on PATH that records what it was given, then runs the real one.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let log = dir.path().join("psql.log");
    let wrapper = bin.join("psql");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nprintf 'argv: %s\\n' \"$*\" >> '{log}'\n[ -n \"$PGPASSWORD\" ] && echo 'env: PGPASSWORD set' >> '{log}'\nexec '{real}' \"$@\"\n",
            log = log.display(),
            real = psql().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let url = format!("postgresql://pw_user:{PASSWORD}@127.0.0.1:{}/postgres?sslmode=disable", server.port());
    let out = dir.path().join("out");
    let (stdout, stderr) = run_expect(
        chute().env("PATH", &path).args([
            "--url",
            &url,
            "bench",
            "custom",
            "--rows",
            "2000",
            "--loader",
            "psql-copy",
            "--out",
            out.to_str().unwrap(),
        ]),
        0,
    );
    assert!(!stdout.contains(PASSWORD) && !stderr.contains(PASSWORD));
    let seen = std::fs::read_to_string(&log).expect("the bench ran psql");
    assert!(seen.contains("argv: "), "{seen}");
    assert!(!seen.contains(PASSWORD), "the password was on psql's command line:\n{seen}");
    assert!(seen.contains("env: PGPASSWORD set"), "{seen}");
}
