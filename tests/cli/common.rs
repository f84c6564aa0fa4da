//! Running the real binary with a clean environment and showing expected and
//! actual output separately when a check fails; waiting for a condition
//! with a deadline. The processes a test starts and signals are held by
//! `chute_testkit::process`.

use std::process::{Command, Output};

/// The chute binary with every PG* variable removed, so a test decides what
/// the binary sees.
pub fn chute() -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_chute"));
    for v in ["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PGSSLMODE", "CHUTE_DATA_DIR"] {
        cmd.env_remove(v);
    }
    cmd
}

/// Runs and returns the output, whatever the exit code.
pub fn run(cmd: &mut Command) -> Output {
    cmd.output().expect("cannot run the chute binary")
}

/// Runs and panics, showing both streams, unless the exit code is `code`.
pub fn run_expect(cmd: &mut Command, code: i32) -> (String, String) {
    let out = run(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "\n--- command\n{cmd:?}\n--- expected exit code\n{code}\n--- actual\n{:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status.code()
    );
    (stdout, stderr)
}

/// A temp directory the postgres system user can enter (tests run as root in CI).
pub fn open_tempdir() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::Builder::new().prefix("chute-cli-").tempdir().expect("tempdir");
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    dir
}

/// `file` copied into `dir` (made with [`open_tempdir`]) with mode 0755:
/// what a test runs as the `postgres` system user is run from such a copy,
/// never from the checkout or `target/`, which may sit in a home only its
/// owner can enter (`/root` is mode 700).
pub fn readable_copy(file: &std::path::Path, dir: &std::path::Path) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let to = dir.join(file.file_name().expect("a file name"));
    std::fs::copy(file, &to).unwrap_or_else(|e| panic!("cannot copy {} to {}: {e}", file.display(), to.display()));
    std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755)).expect("chmod a copy we just made");
    to
}

pub fn summary_value<'a>(stdout: &'a str, label: &str) -> &'a str {
    stdout.lines().find_map(|l| l.strip_prefix(label)).map(str::trim).unwrap_or_else(|| panic!("no {label:?} line in:\n{stdout}"))
}

/// `chute partition create TABLE --columns COLS --key time --interval INTERVAL EXTRA…`, which must succeed.
pub fn create_time_partitioned(url: &str, table: &str, cols: &str, interval: &str, extra: &[&str]) {
    run_expect(
        chute().args(["--url", url, "partition", "create", table, "--columns", cols, "--key", "time", "--interval", interval]).args(extra),
        0,
    );
}

/// One CSV file as rows of column → value (no field in chute's own CSV files holds a comma).
pub fn read_csv(path: &std::path::Path) -> Vec<std::collections::HashMap<String, String>> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut lines = text.lines();
    let header: Vec<String> = lines.next().expect("a header").split(',').map(str::to_owned).collect();
    lines
        .map(|l| {
            let fields: Vec<&str> = l.split(',').collect();
            assert_eq!(fields.len(), header.len(), "{}: {l}", path.display());
            header.iter().cloned().zip(fields.into_iter().map(str::to_owned)).collect()
        })
        .collect()
}

/// Starts `chute migrate orders --split` on a thread, paced to 1,500 rows a
/// second in batches of 500 (a few seconds for a few thousand rows), and
/// returns once its sync trigger exists: from then on the application's
/// writes go through it while the copy runs.
pub async fn start_paced_split(url: &str, c: &tokio_postgres::Client) -> std::thread::JoinHandle<(String, String)> {
    start_paced_split_of(url, c, "orders").await
}

/// [`start_paced_split`] of `table` (as `chute migrate` takes it).
pub async fn start_paced_split_of(url: &str, c: &tokio_postgres::Client, table: &str) -> std::thread::JoinHandle<(String, String)> {
    let split = {
        let (url, table) = (url.to_owned(), table.to_owned());
        std::thread::spawn(move || {
            run_expect(chute().args(["--url", &url, "migrate", &table, "--split", "--batch-rows", "500", "--rows-per-s", "1500"]), 0)
        })
    };
    wait_for("the split to set up its trigger", std::time::Duration::from_secs(30), || async {
        c.query_one("SELECT count(*) FROM pg_trigger WHERE tgname = 'chute_sync'", &[]).await.unwrap().get::<_, i64>(0) > 0
    })
    .await;
    split
}

/// The first column of every row `sql` returns.
pub async fn column<T: tokio_postgres::types::FromSqlOwned>(c: &tokio_postgres::Client, sql: &str) -> Vec<T> {
    c.query(sql, &[]).await.unwrap().iter().map(|r| r.get(0)).collect()
}

/// Polls `check` every 20 ms until it holds; panics naming `what` after `limit`.
pub async fn wait_for<F, Fut>(what: &str, limit: std::time::Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = std::time::Instant::now() + limit;
    while !check().await {
        assert!(std::time::Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        // The polling pace.
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// [`wait_for`] on a thread that may block: polls `check` every 20 ms until
/// it holds; panics naming `what` after `limit`.
pub fn wait_for_blocking(what: &str, limit: std::time::Duration, mut check: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + limit;
    while !check() {
        assert!(std::time::Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        // The polling pace.
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Whether another session waits for a lock while running a statement
/// matching the regular expression `pattern`.
pub async fn waits_for_lock(c: &tokio_postgres::Client, pattern: &str) -> bool {
    let n: i64 = c
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query ~ $1 AND pid <> pg_backend_pid()",
            &[&pattern],
        )
        .await
        .unwrap()
        .get(0);
    n > 0
}
