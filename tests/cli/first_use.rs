//! What a new user meets first (issue 15): `chute gen accounts` makes the
//! table the book loads (`pgbench_accounts`, docs/gen.md), a load into a missing table
//! says how to create it, and `chute load --status` tells the same tables in
//! two schemas apart.

use std::path::Path;
use std::process::Command;

use chute_testkit::shared;

use crate::common::{chute, open_tempdir, run_expect, summary_value};

/// `sh -c SCRIPT` in `dir` with the built `chute` first on PATH and no PG* variable.
fn sh(dir: &Path, script: &str) -> Command {
    let bin = Path::new(env!("CARGO_BIN_EXE_chute")).parent().expect("the binary has a directory").to_owned();
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())))
        .expect("PATH");
    let mut cmd = Command::new("sh");
    cmd.current_dir(dir).env("PATH", path).args(["-ec", script]);
    for v in ["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PGSSLMODE", "CHUTE_DATA_DIR"] {
        cmd.env_remove(v);
    }
    cmd
}

async fn count(c: &tokio_postgres::Client, sql: &str) -> i64 {
    c.query_one(sql, &[]).await.unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[tokio::test]
async fn gen_accounts_create_names_the_table_pgbench_accounts_that_the_readme_pipe_loads() {
    let db = shared().fresh_db("first_accounts").await;
    let dir = open_tempdir();
    let (sql, _) = run_expect(chute().args(["gen", "accounts", "--create"]), 0);
    assert!(sql.starts_with("CREATE TABLE \"pgbench_accounts\" ("), "chute gen accounts --create names pgbench's table:\n{sql}");
    // The book's pipe (docs/gen.md), with the table --create made.
    let url = db.url();
    run_expect(
        &mut sh(
            dir.path(),
            &format!(
                "chute gen accounts --create | psql -X -q -v ON_ERROR_STOP=1 '{url}'\nchute gen accounts --rows 2500 | chute --url '{url}' load pgbench_accounts -"
            ),
        ),
        0,
    );
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT count(DISTINCT aid) FROM pgbench_accounts").await, 2500);
    // A load of generated accounts without a table name suggests that table.
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "--gen", "accounts", "--rows", "10"]), 2);
    assert!(err.contains("chute load pgbench_accounts --gen accounts"), "{err}");
}

#[tokio::test]
async fn a_missing_table_error_says_how_to_create_it_for_the_input_at_hand() {
    let db = shared().fresh_db("first_missing").await;
    let url = db.url();
    let dir = open_tempdir();
    let file = dir.path().join("rows.csv");
    std::fs::write(&file, "1,2,0,\n").unwrap();

    // A file: SQL, chute gen --create and (for time-series) chute partition create, each with the connection to use.
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "pgbench_accounts", file.to_str().unwrap()]), 2);
    for hint in [
        format!("psql \"{url}\" -c 'CREATE TABLE pgbench_accounts (…)'"),
        format!("chute gen WORKLOAD --create=pgbench_accounts | psql \"{url}\""),
        "chute partition create pgbench_accounts --columns".to_owned(),
    ] {
        assert!(err.contains(&hint), "the error should say {hint:?}:\n{err}");
    }

    // Generated rows: the exact statement for them, which run as given makes the load work.
    let (_, err) = run_expect(chute().args(["--url", &url, "load", "pgbench_accounts", "--gen", "accounts", "--rows", "300"]), 2);
    let command = err.split_once("e.g. ").map(|(_, c)| c.trim()).unwrap_or_else(|| panic!("no command in:\n{err}"));
    assert!(command.starts_with(&format!("psql \"{url}\" -c 'CREATE TABLE \"pgbench_accounts\" (\"aid\" int")), "{command}");
    run_expect(&mut sh(dir.path(), command), 0);
    let (out, _) = run_expect(chute().args(["--url", &url, "load", "pgbench_accounts", "--gen", "accounts", "--rows", "300"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "300");
}

#[tokio::test]
async fn load_status_names_the_schema_of_tsbs_tables_and_each_schema_is_its_own_load() {
    let db = shared().fresh_db("first_status").await;
    let url = db.url();
    let iot = ["load", "--gen", "iot", "--scale", "3", "--rows", "400", "--interval", "1h"];
    let (out, _) = run_expect(chute().args(["--url", &url]).args(iot), 0);
    assert_eq!(summary_value(&out, "table"), "public.diagnostics, public.readings");
    // The same stream into another schema is a load of its own: every row goes in.
    let (out, err) = run_expect(chute().args(["--url", &url]).args(iot).args(["--schema", "iot"]), 0);
    assert_eq!(summary_value(&out, "table"), "iot.diagnostics, iot.readings");
    assert_eq!(summary_value(&out, "rows loaded"), "400", "{err}");
    assert!(!err.contains("resuming"), "a load into another schema resumed the first one:\n{err}");

    let (status, _) = run_expect(chute().args(["--url", &url, "load", "--status"]), 0);
    let loads: Vec<&str> = status.lines().skip(1).collect();
    assert_eq!(loads.len(), 2, "{status}");
    assert!(loads[0].contains("public.diagnostics, public.readings"), "{status}");
    assert!(loads[1].contains("iot.diagnostics, iot.readings"), "{status}");
    let c = db.client().await;
    assert_eq!(count(&c, "SELECT (SELECT count(*) FROM public.readings) + (SELECT count(*) FROM public.diagnostics)").await, 400);
    assert_eq!(count(&c, "SELECT (SELECT count(*) FROM iot.readings) + (SELECT count(*) FROM iot.diagnostics)").await, 400);
}

#[tokio::test]
async fn psql_with_chute_local_url_works_when_the_embedded_server_is_stopped() {
    // A private cluster as chute's embedded server (CHUTE_DATA_DIR), stopped the way a user stops it.
    let server = chute_testkit::TestCluster::start();
    let data = server.socket_dir().to_owned();
    run_expect(chute().env("CHUTE_DATA_DIR", &data).args(["local", "stop"]), 0);
    let dir = open_tempdir();
    // The book's pattern: the URL's server must be up for psql.
    let mut cmd = sh(dir.path(), "chute gen lineitem --create | psql -X -q -v ON_ERROR_STOP=1 \"$(chute local url)\"");
    let (_, err) = run_expect(cmd.env("CHUTE_DATA_DIR", &data), 0);
    assert!(err.contains("chute: embedded PostgreSQL started in"), "{err}");
    let c = server.options("postgres").connect().await.expect("the server runs again");
    assert_eq!(count(&c, "SELECT count(*) FROM pg_class WHERE relname = 'lineitem' AND relkind = 'r'").await, 1);
    // Running already: the URL alone, nothing on stderr.
    let (url, err) = run_expect(chute().env("CHUTE_DATA_DIR", &data).args(["local", "url"]), 0);
    assert_eq!(url.trim(), server.options("postgres").display_url());
    assert_eq!(err, "");
}
