//! `scripts/ensure-deps` on any Debian or Ubuntu (issue 15): it picks a
//! PostgreSQL the distribution offers when the preferred package does not
//! exist, and a user who is not root gets the `sudo apt-get …` command and an
//! embedded server under their home. Nothing is installed: the script's dry
//! run (`CHUTE_DEPS_DRY_RUN=1`) plans for a machine without PostgreSQL and
//! prints the apt-get command instead of running it.

use std::path::Path;
use std::process::Command;

use crate::common::{open_tempdir, readable_copy, run_expect};

fn ensure_deps() -> Command {
    ensure_deps_at(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-deps"))
}

fn ensure_deps_at(script: &Path) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(script).env("CHUTE_DEPS_DRY_RUN", "1").env_remove("CHUTE_PG_PACKAGE");
    cmd
}

fn is_root() -> bool {
    let out = Command::new("id").arg("-u").output().expect("id -u");
    String::from_utf8_lossy(&out.stdout).trim() == "0"
}

/// `cmd` as the `postgres` system user when the tests run as root (as here),
/// otherwise as the current user, who is not root either.
fn as_non_root(cmd: &Command, env: &[(&str, &str)]) -> Command {
    let mut wrapped = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "env"]);
        c
    } else {
        Command::new("env")
    };
    wrapped.arg("PATH=/usr/local/bin:/usr/bin:/bin");
    for (k, v) in env {
        wrapped.arg(format!("{k}={v}"));
    }
    wrapped.arg(cmd.get_program()).args(cmd.get_args());
    wrapped
}

/// Whether apt has a version of `package` to install.
fn apt_offers(package: &str) -> bool {
    let out = Command::new("apt-cache").args(["policy", package]).output().expect("apt-cache");
    String::from_utf8_lossy(&out.stdout).lines().any(|l| l.trim().strip_prefix("Candidate:").is_some_and(|c| c.trim() != "(none)"))
}

/// The `would run: apt-get install -y …` packages of a dry run's stderr.
fn planned(err: &str) -> Vec<String> {
    let line =
        err.lines().find_map(|l| l.strip_prefix("chute: would run: apt-get install -y ")).unwrap_or_else(|| panic!("no plan in:\n{err}"));
    line.split_whitespace().map(str::to_owned).collect()
}

/// The packages a dry run should plan here: PostgreSQL 15 where apt has it
/// (as on Debian 12, where the tests run), else the fallback it announces.
fn expected_packages(err: &str) -> [String; 2] {
    let server = if apt_offers("postgresql-15") {
        assert!(!err.contains("instead"), "postgresql-15 is to be had, so no fallback:\n{err}");
        "postgresql-15".to_owned()
    } else {
        fallback(err, "postgresql-15")
    };
    let client = server.replace("postgresql-", "postgresql-client-");
    [server, client]
}

/// The package named in the fallback message for `preferred`.
fn fallback(err: &str, preferred: &str) -> String {
    err.lines()
        .find_map(|l| l.strip_prefix(&format!("chute: {preferred} is not available from apt here; installing ")))
        .and_then(|rest| rest.split_once(','))
        .map(|(pkg, _)| pkg.to_owned())
        .unwrap_or_else(|| panic!("no fallback message in:\n{err}"))
}

#[test]
fn ensure_deps_installs_postgresql_15_where_apt_offers_it() {
    if !is_root() {
        // Not root, it prints the sudo command instead.
        let (_, err) = run_expect(&mut ensure_deps(), 2);
        let [server, client] = expected_packages(&err);
        assert!(err.contains(&format!("sudo apt-get install -y {server} {client}")), "{err}");
        return;
    }
    let (_, err) = run_expect(&mut ensure_deps(), 0);
    assert_eq!(planned(&err), expected_packages(&err), "{err}");
}

#[test]
fn ensure_deps_falls_back_to_a_postgresql_the_distribution_has_when_the_preferred_one_does_not_exist() {
    assert!(!apt_offers("postgresql-99"), "postgresql-99 must not exist for this test");
    let mut cmd = ensure_deps();
    cmd.env("CHUTE_PG_PACKAGE", "postgresql-99");
    let (_, err) = run_expect(&mut cmd, if is_root() { 0 } else { 2 });
    let chosen = fallback(&err, "postgresql-99");
    let major: u32 = chosen.strip_prefix("postgresql-").and_then(|m| m.parse().ok()).unwrap_or_else(|| panic!("{chosen}"));
    assert!(major >= 14, "a supported major: {chosen}");
    assert!(apt_offers(&chosen), "the fallback {chosen} is one apt can install");
    assert!(err.contains("chute works with PostgreSQL 14 and newer"), "{err}");
    let client = format!("postgresql-client-{major}");
    if is_root() {
        assert_eq!(planned(&err), [chosen.clone(), client], "{err}");
    } else {
        assert!(err.contains(&format!("sudo apt-get install -y {chosen} {client}")), "{err}");
    }
}

#[test]
fn not_as_root_ensure_deps_prints_the_sudo_command_and_the_embedded_server_lives_in_the_home() {
    // The postgres user runs copies of the script and of the built binary in
    // a directory it can read (the checkout may be under /root, mode 700),
    // and has no cargo on its PATH.
    let copies = open_tempdir();
    let script = readable_copy(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-deps"), copies.path());
    let chute = Command::new(readable_copy(Path::new(env!("CARGO_BIN_EXE_chute")), copies.path()));
    let (_, err) = run_expect(&mut as_non_root(&ensure_deps_at(&script), &[("CHUTE_DEPS_DRY_RUN", "1")]), 2);
    let [server, client] = expected_packages(&err);
    assert!(
        err.contains(&format!("chute: install them with: sudo apt-get install -y {server} {client}   (then run this command again)")),
        "{err}"
    );

    let home = open_tempdir();
    let home_dir = home.path().to_str().unwrap();
    let mut status = as_non_root(&chute, &[("HOME", home_dir)]);
    status.args(["local", "status", "--json"]);
    let (out, _) = run_expect(&mut status, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["data_dir"], format!("{home_dir}/.local/share/chute/pg"), "{out}");
    assert_eq!(v["running"], false, "{out}");

    // And it runs there, as that user.
    if is_root() {
        run_expect(Command::new("chown").args(["postgres", home_dir]), 0);
    }
    let local = |args: &[&str]| {
        let mut c = as_non_root(&chute, &[("HOME", home_dir)]);
        c.arg("local").args(args);
        c
    };
    /// Stops the server this test started, however the test ends.
    struct Stop<F: Fn()>(F);
    impl<F: Fn()> Drop for Stop<F> {
        fn drop(&mut self) {
            (self.0)();
        }
    }
    let _stop = Stop(|| {
        let _ = local(&["stop"]).output();
    });
    let (url, err) = run_expect(&mut local(&["start"]), 0);
    assert!(err.contains(&format!("created and started in {home_dir}/.local/share/chute/pg")), "{err}");
    assert_eq!(url.trim(), format!("postgresql://postgres@/postgres?host={home_dir}/.local/share/chute/pg"));
    let (out, _) = run_expect(&mut local(&["status", "--json"]), 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
    assert_eq!(v["running"], true, "{out}");
    run_expect(&mut local(&["stop"]), 0);
}
