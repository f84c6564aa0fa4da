//! Running the real binary with a clean environment and showing expected and
//! actual output separately when a check fails.

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
    use std::time::{Duration, Instant};
    let split = {
        let (url, table) = (url.to_owned(), table.to_owned());
        std::thread::spawn(move || {
            run_expect(chute().args(["--url", &url, "migrate", &table, "--split", "--batch-rows", "500", "--rows-per-s", "1500"]), 0)
        })
    };
    let began = Instant::now();
    loop {
        let n: i64 = c.query_one("SELECT count(*) FROM pg_trigger WHERE tgname = 'chute_sync'", &[]).await.unwrap().get(0);
        if n > 0 {
            return split;
        }
        assert!(began.elapsed() < Duration::from_secs(30), "the split never set up its trigger");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
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

/// Reads all of `stream` on a thread of its own; the receiver gets it once
/// the stream closes.
fn read_to_end_aside(mut stream: impl std::io::Read + Send + 'static) -> std::sync::mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut all = Vec::new();
        let _ = stream.read_to_end(&mut all);
        let _ = tx.send(all);
    });
    rx
}

/// Waits for `child` to exit, reading its piped stdout and stderr meanwhile
/// (a child that fills a pipe nobody reads would never exit); past `limit`
/// it is killed and the test fails, showing what it wrote.
pub fn exit_within(mut child: std::process::Child, limit: std::time::Duration, what: &str) -> std::process::Output {
    let stdout = child.stdout.take().map(read_to_end_aside);
    let stderr = child.stderr.take().map(read_to_end_aside);
    let began = std::time::Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for a child") {
            break Some(status);
        }
        if began.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    // A grandchild may hold a pipe open: after a kill, take what came in a moment.
    let wait = if status.is_some() { std::time::Duration::MAX } else { std::time::Duration::from_secs(2) };
    let collect = |rx: Option<std::sync::mpsc::Receiver<Vec<u8>>>| rx.and_then(|rx| rx.recv_timeout(wait).ok()).unwrap_or_default();
    let (stdout, stderr) = (collect(stdout), collect(stderr));
    let Some(status) = status else {
        panic!(
            "{what} still ran {limit:?} after it was started or signalled, and was killed\n--- stdout\n{}\n--- stderr\n{}",
            String::from_utf8_lossy(&stdout),
            String::from_utf8_lossy(&stderr)
        );
    };
    std::process::Output { status, stdout, stderr }
}

/// A child's output read line by line on a thread of its own, so that a
/// test can wait for what it says while it runs.
pub struct Lines {
    rx: std::sync::mpsc::Receiver<String>,
    /// Every line so far, each ending in `\n`.
    seen: String,
}

impl Lines {
    pub fn new(stream: impl std::io::Read + Send + 'static) -> Lines {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stream).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Lines { rx, seen: String::new() }
    }

    /// Waits until `done` holds for everything read so far; panics naming
    /// `what`, with what was read, after `limit` or if the stream closes first.
    pub fn wait_until(&mut self, what: &str, limit: std::time::Duration, done: impl Fn(&str) -> bool) {
        let deadline = std::time::Instant::now() + limit;
        while !done(&self.seen) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(e) => panic!("{what}: {e:?} after {limit:?}; read so far:\n{}", self.seen),
            }
        }
    }

    /// Everything, once the stream has closed (the child exited).
    pub fn rest(mut self) -> String {
        self.seen.extend(self.rx.iter().flat_map(|l| [l, "\n".to_owned()]));
        self.seen
    }
}
