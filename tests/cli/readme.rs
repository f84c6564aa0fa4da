//! Every command example in README.md and in the book (`docs/**/*.md`)
//! runs as written (issues 15 and 29).
//!
//! Each fenced `sh` block of a page is run with `bash -eo pipefail`, in the
//! order of the page, in one temporary directory per page, with the built
//! `chute` first on PATH and `psql` from the system. chute's embedded server
//! there is a private cluster this test starts for the page (chute-testkit):
//! `CHUTE_DATA_DIR` points at it, so `chute` without `--url` and `psql
//! "$(chute local url)"` reach it, never `/var/lib/chute/pg`. Blocks added
//! later are picked up by themselves; a page of the book with `sh` blocks
//! needs its test in [`PAGES`] (`every_page_with_examples_has_its_test`
//! says so).
//!
//! An HTML comment right before a fence (one per line, several allowed) says
//! how the block is run here:
//!
//! - `<!-- readme-test: skip (REASON) -->`: not run (a reason is required).
//! - `<!-- readme-test: rewrite-url -->`: every `postgres://…` URL, `host=/…`
//!   and `PGHOST=/…` in the block is pointed at the test's server (the
//!   database the URL names is created first, and `PGUSER` names the
//!   server's one role, `postgres`); the other flags stay.
//! - `<!-- readme-test: tls -->`: the block runs against a TLS server the
//!   test starts on 127.0.0.1 (see `readme_tls.rs`): each URL's user, host
//!   and port are replaced and its TLS parameters kept; `ca.crt`,
//!   `client.crt` and `client.key` for that server are in the directory and
//!   `SSL_CERT_FILE` names the CA (what `sslrootcert=system` trusts).
//! - `<!-- readme-test: kafka -->`: the block runs against the test binary's
//!   Apache Kafka broker (chute-testkit): `localhost:9092` becomes its
//!   address, and `kafka-topics.sh`, `kafka-console-producer.sh` and
//!   `kafka-consumer-groups.sh` on PATH run Kafka's own tools from the same
//!   artifacts.
//! - `<!-- readme-test: drop-lines "TEXT" (REASON) -->`: lines containing
//!   TEXT are left out (a daemon, a stream that never ends).
//! - `<!-- readme-test: setup NAME -->`: the inputs the example assumes its
//!   reader has (files, tables) are made first by [`SETUPS`]'s script NAME
//!   (and [`setup_files`]); scripts reach the test's server with `sql …`.
//! - `<!-- readme-test: replace "OLD" "NEW" -->`: OLD becomes the shell text
//!   NEW (e.g. a load id only known once the load has run).
//! - `<!-- readme-test: output-of "COMMAND" -->` before a plain fence: the
//!   block is COMMAND's sample output; COMMAND runs twice and each run must
//!   print the same lines, compared with numbers and paths left out.
//!
//! To keep the run short, every block gets these substitutions: `--rows N`
//! above 20,000 becomes `--rows 20000`, `--scale N` above 5 becomes
//! `--scale 5`, and `chute demo` without `--rows` gets `--rows 20000`.
//! A failing block is reported with its file and line, the script as run,
//! and both output streams; every block of the page runs even after one
//! fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use chute_testkit::TestCluster;

use crate::common::open_tempdir;

/// Rows and tsbs scale the examples are shrunk to.
const MAX_ROWS: u64 = 20_000;
const MAX_SCALE: u64 = 5;
/// Longest a block may run before it counts as hung (seconds).
const BLOCK_TIMEOUT: u32 = 300;

/// The inputs that examples take for granted, made before the block runs.
const SETUPS: &[(&str, &str)] = &[
    // The Parquet and Arrow files of docs/parquet.md, written by pyarrow (see `setup_files`).
    ("parquet-inputs", ":"),
    (
        // `chute partition create` of existing, empty tables; a policy whose table was dropped with SQL.
        "partition-tables",
        r#"sql -c "CREATE TABLE events (ts timestamptz NOT NULL, dev_id int NOT NULL, payload jsonb)" \
    -c "CREATE TABLE ledger (id bigint NOT NULL, amount numeric)"
chute partition create old_metrics --columns "time timestamptz not null" --key time --interval 1h 2>/dev/null
sql -c "DROP TABLE old_metrics""#,
    ),
    (
        // The files and tables of the `chute load` examples, each a few rows.
        "load-inputs",
        r#"now=$(date -u +%Y-%m-%dT%H:%M:%SZ)
chute gen conditions --rows 300 --header | gzip > part1.csv.gz
printf '%s,1,0.5\n%s,2,1.5\n' "$now" "$now" | gzip > big.csv.gz
printf '%s\t3\t4.5\n' "$now" > data.tsv
sql -c "CREATE TABLE IF NOT EXISTS metrics (time timestamptz NOT NULL, dev_id int, value float8)" \
    -c "CREATE TABLE IF NOT EXISTS events (ts timestamptz NOT NULL, dev_id int NOT NULL, payload jsonb)"
printf '{"ts": "%s", "dev_id": 5, "payload": {"ok": true}}\n' "$now" > events.jsonl
printf '1623110400000,ACME,10.5\n1623110401500,INIT,11\n' > ticks.csv
sql -c "CREATE TABLE ticks (time timestamptz NOT NULL, symbol text, price numeric)"
chute gen iot --scale 2 --from 2021-06-08T00:00:00Z --to 2021-06-08T00:10:00Z | gzip > tsbs_iot.tsbs.gz"#,
    ),
    (
        // The tables and files of the TLS examples (`sql` reaches the TLS server there).
        "tls-inputs",
        r#"sql -c "CREATE TABLE IF NOT EXISTS metrics (time timestamptz NOT NULL, dev_id int, value float8)" \
    -c "CREATE TABLE IF NOT EXISTS t (id int, note text)"
printf '2021-06-08 00:00:00+00,1,0.5\n' > m.csv
printf '1,first\n2,second\n' > f.csv"#,
    ),
    (
        // A file of `chute gen conditions` rows to load and resume.
        "resume-inputs",
        "chute gen conditions --rows 1000 --seed 3 > big.csv",
    ),
    (
        // A live plain table for the `chute migrate` examples.
        "migrate-tables",
        r#"sql -c "CREATE TABLE orders (id bigserial PRIMARY KEY, created_at timestamptz NOT NULL, status int)" \
    -c "INSERT INTO orders (created_at, status) SELECT now() - i * interval '1 hour', 0 FROM generate_series(1, 2000) i""#,
    ),
];

/// Inputs a setup needs that a fresh machine has no tool to make (no `zstd`
/// command): written from Rust before the setup's script runs.
fn setup_files(name: &str, dir: &Path) {
    if name == "parquet-inputs" && !dir.join("metrics.parquet").exists() {
        crate::columnar::run_python(dir, PARQUET_INPUTS, &[]);
    }
    if name == "load-inputs" {
        let csv = Command::new(env!("CARGO_BIN_EXE_chute"))
            .args(["gen", "conditions", "--rows", "300", "--header", "--seed", "2"])
            .output()
            .unwrap();
        assert!(csv.status.success(), "chute gen: {}", String::from_utf8_lossy(&csv.stderr));
        std::fs::write(dir.join("part2.csv.zst"), zstd::encode_all(&csv.stdout[..], 3).unwrap()).unwrap();
    }
}

/// The files of the Parquet page's examples (docs/parquet.md), written by pyarrow.
const PARQUET_INPUTS: &str = r#"
import time
import pyarrow as pa, pyarrow.feather as feather, pyarrow.parquet as pq
now = int(time.time()) * 10**6
def rows(first, n):
    return pa.table({
        "time": pa.array([now - (first + i) * 10_000_000 for i in range(n)], pa.timestamp("us", tz="UTC")),
        "dev_id": pa.array([i % 10 for i in range(n)], pa.int32()),
        "value": pa.array([i * 0.5 for i in range(n)]),
    })
pq.write_table(rows(0, 1000), "metrics.parquet", row_group_size=250)
feather.write_feather(rows(1000, 100), "more.arrow")
with pa.OSFile("more.arrows", "wb") as sink:
    with pa.ipc.new_stream(sink, rows(0, 1).schema) as w:
        w.write_table(rows(1100, 100))
pq.write_table(rows(1200, 100).select(["time", "dev_id"]).append_column("other", pa.array(["x"] * 100)), "picked.parquet")
pq.write_table(pa.table({"time": rows(0, 2)["time"], "n": pa.array([1.5, 2.0])}), "floats.parquet")
"#;

/// How a block is run, from the comments before its fence.
#[derive(Debug, Default)]
struct Marks {
    skip: Option<String>,
    rewrite_url: bool,
    tls: bool,
    kafka: bool,
    drop_lines: Vec<String>,
    setup: Vec<String>,
    replace: Vec<(String, String)>,
    output_of: Option<String>,
}

#[derive(Debug)]
struct Block {
    /// The page, as a path from the repository's root.
    file: String,
    /// The fence's line in the page (1-based).
    line: usize,
    lang: String,
    text: String,
    marks: Marks,
}

/// The quoted strings of a marker's arguments, in order.
fn quoted_args(s: &str) -> Vec<String> {
    s.split('"').skip(1).step_by(2).map(str::to_owned).collect()
}

fn parse_mark(at: &str, body: &str, marks: &mut Marks) {
    let (word, rest) = body.split_once(' ').unwrap_or((body, ""));
    let rest = rest.trim();
    match word {
        "skip" => {
            assert!(rest.starts_with('(') && rest.len() > 2, "{at}: `skip` needs a reason in parentheses");
            marks.skip = Some(rest.to_owned());
        }
        "rewrite-url" => marks.rewrite_url = true,
        "tls" => marks.tls = true,
        "kafka" => marks.kafka = true,
        "drop-lines" => marks.drop_lines.extend(quoted_args(rest).into_iter().take(1)),
        "setup" => {
            assert!(SETUPS.iter().any(|(n, _)| *n == rest), "{at}: no setup {rest:?} in tests/cli/readme.rs");
            marks.setup.push(rest.to_owned());
        }
        "replace" => match quoted_args(rest).as_slice() {
            [old, new] => marks.replace.push((old.clone(), new.clone())),
            _ => panic!("{at}: `replace` takes \"OLD\" \"NEW\""),
        },
        "output-of" => marks.output_of = quoted_args(rest).into_iter().next(),
        _ => panic!("{at}: unknown readme-test marker {word:?} (see tests/cli/readme.rs)"),
    }
}

/// Fenced blocks with their markers; `file` names the page in messages.
fn blocks(file: &str, page: &str) -> Vec<Block> {
    let lines: Vec<&str> = page.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some(lang) = lines[i].strip_prefix("```") else {
            i += 1;
            continue;
        };
        let start = i;
        let mut marks = Marks::default();
        let mut j = start;
        while j > 0 {
            let prev = lines[j - 1].trim();
            let Some(body) = prev.strip_prefix("<!-- readme-test:").and_then(|b| b.strip_suffix("-->")) else { break };
            parse_mark(&format!("{file} line {j}"), body.trim(), &mut marks);
            j -= 1;
        }
        let end = (start + 1..lines.len())
            .find(|&k| lines[k].starts_with("```"))
            .unwrap_or_else(|| panic!("{file} line {}: unclosed fence", start + 1));
        let text = lines[start + 1..end].join("\n");
        out.push(Block { file: file.to_owned(), line: start + 1, lang: lang.trim().to_owned(), text, marks });
        i = end + 1;
    }
    out
}

/// `FLAG N` with N above `max` becomes `FLAG max`.
fn cap_after(line: &str, flag: &str, max: u64) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find(flag) {
        out.push_str(&rest[..at + flag.len()]);
        rest = &rest[at + flag.len()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if let Ok(n) = digits.parse::<u64>() {
            out.push_str(&n.min(max).to_string());
            rest = &rest[digits.len()..];
        }
    }
    out.push_str(rest);
    out
}

/// The documented substitutions that keep the run short.
fn shrink(line: &str) -> String {
    let mut l = cap_after(&cap_after(line, "--rows ", MAX_ROWS), "--scale ", MAX_SCALE);
    if l.contains("chute demo") && !l.contains("--rows") {
        l = l.replacen("chute demo", &format!("chute demo --rows {MAX_ROWS}"), 1);
    }
    l
}

/// Points connection targets at the test server; returns the databases they name.
fn rewrite_urls(text: &str, socket: &Path) -> (String, Vec<String>) {
    let sock = socket.display().to_string();
    let stop = |c: char| c.is_whitespace() || c == '"' || c == '\'';
    let mut dbs = Vec::new();
    let mut out = String::new();
    let mut rest = text;
    loop {
        let next = ["postgres://", "postgresql://", "host=/", "PGHOST=/"].iter().filter_map(|p| rest.find(p).map(|at| (at, *p))).min();
        let Some((at, prefix)) = next else { break };
        out.push_str(&rest[..at]);
        let token_end = rest[at..].find(stop).map_or(rest.len(), |e| at + e);
        let token = &rest[at..token_end];
        if prefix.ends_with("://") {
            let path = token[prefix.len()..].split_once('/').map(|(_, p)| p).unwrap_or("");
            let db = path.split('?').next().filter(|d| !d.is_empty()).unwrap_or("postgres");
            dbs.push(db.to_owned());
            out.push_str(&format!("postgresql://postgres@/{db}?host={sock}"));
        } else {
            let key = &prefix[..prefix.len() - 1];
            let tail = token.find('&').map_or("", |a| &token[a..]);
            out.push_str(&format!("{key}{sock}{tail}"));
        }
        rest = &rest[token_end..];
    }
    out.push_str(rest);
    for key in ["dbname=", "PGDATABASE="] {
        for (at, _) in out.match_indices(key) {
            let db: String = out[at + key.len()..].chars().take_while(|c| !stop(*c) && *c != '&').collect();
            dbs.push(db);
        }
    }
    (out, dbs)
}

/// The script a block runs as, and the databases it needs.
fn script_for(b: &Block, socket: &Path, tls_port: Option<u16>) -> (String, Vec<String>) {
    let mut text: String =
        b.text.lines().filter(|l| !b.marks.drop_lines.iter().any(|d| l.contains(d.as_str()))).map(shrink).collect::<Vec<_>>().join("\n");
    for (old, new) in &b.marks.replace {
        text = text.replace(old, new);
    }
    let mut dbs = Vec::new();
    let mut prelude = "sql() { psql -X -q -v ON_ERROR_STOP=1 \"$(chute local url)\" \"$@\"; }".to_owned();
    if let Some(port) = tls_port {
        (text, dbs) = crate::readme_tls::rewrite_urls(&text, port);
        let db = dbs.first().map_or("postgres", String::as_str);
        prelude = format!(
            "sql() {{ psql -X -q -v ON_ERROR_STOP=1 \"postgresql://postgres@127.0.0.1:{port}/{db}?sslmode=require\" \"$@\"; }}\nexport SSL_CERT_FILE=\"$PWD/ca.crt\""
        );
    }
    if b.marks.rewrite_url {
        (text, dbs) = rewrite_urls(&text, socket);
        // The test server's one role; a reader's server has theirs.
        text = format!("export PGUSER=postgres\n{text}");
    }
    let setups: Vec<&str> = b.marks.setup.iter().map(|n| SETUPS.iter().find(|(s, _)| s == n).expect("checked when parsed").1).collect();
    (format!("{prelude}\n{}\n# --- {} line {}\n{text}\n", setups.join("\n"), b.file, b.line), dbs)
}

struct Runner {
    dir: PathBuf,
    path: std::ffi::OsString,
    data_dir: PathBuf,
}

impl Runner {
    fn bash(&self, name: &str, script: &str) -> std::process::Output {
        let file = self.dir.join(name);
        std::fs::write(&file, script).expect("write the block's script");
        let mut cmd = Command::new("timeout");
        cmd.arg(BLOCK_TIMEOUT.to_string()).args(["bash", "-eo", "pipefail"]).arg(&file);
        cmd.current_dir(&self.dir).env("PATH", &self.path).env("CHUTE_DATA_DIR", &self.data_dir);
        for v in ["PGHOST", "PGHOSTADDR", "PGPORT", "PGUSER", "PGPASSWORD", "PGDATABASE", "PGSERVICE", "PGSSLMODE", "PGOPTIONS"] {
            cmd.env_remove(v);
        }
        cmd.output().expect("run bash")
    }
}

/// A line of sample output with what varies between runs and machines left
/// out: numbers, paths, and whether the embedded server was just started.
fn shape(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars.peek().is_some_and(|d| d.is_ascii_digit() || *d == '.') {
                chars.next();
            }
            out.push('N');
        } else if c == '/' && (out.ends_with(' ') || out.is_empty()) {
            while chars.peek().is_some_and(|d| !d.is_whitespace() && *d != ')') {
                chars.next();
            }
            out.push_str("PATH");
        } else {
            out.push(c);
        }
    }
    for state in ["(created and started it; ", "(started it; ", "(running; "] {
        out = out.replace(state, "(STATE; ");
    }
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn report(failures: &mut Vec<String>, b: &Block, what: &str, script: &str, out: &std::process::Output) {
    failures.push(format!(
        "{} line {}: {what} (exit code {:?}{})\n--- as run\n{script}\n--- stdout\n{}\n--- stderr\n{}",
        b.file,
        b.line,
        out.status.code(),
        if out.status.code() == Some(124) { ", timed out: mark a command that never returns with drop-lines" } else { "" },
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    ));
}

/// Runs every example of the page at `file` (a path from the repository's
/// root) against a server of its own, and fails naming each failed block.
async fn run_page(file: &str) {
    let page = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let found = blocks(file, &page);
    let fences = page.lines().filter(|l| l.trim_end() == "```sh").count();
    let sh = found.iter().filter(|b| b.lang == "sh").count();
    assert_eq!(sh, fences, "{file}: {fences} ```sh fences but {sh} sh blocks read: were the fences misread?");
    let runs = |b: &Block| b.marks.skip.is_none() && (b.lang == "sh" || b.marks.output_of.is_some());
    if !found.iter().any(runs) {
        let skipped: Vec<String> = found.iter().filter_map(|b| b.marks.skip.as_ref().map(|why| format!("line {} {why}", b.line))).collect();
        assert!(!skipped.is_empty(), "{file} has no example: take it out of PAGES");
        eprintln!("{file}: every example skipped:\n  {}", skipped.join("\n  "));
        return;
    }
    let began = std::time::Instant::now();
    let server = TestCluster::start();
    let dir = open_tempdir();
    let bin = Path::new(env!("CARGO_BIN_EXE_chute")).parent().expect("the binary has a directory").to_owned();
    let path =
        std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()))).unwrap();
    let runner = Runner { dir: dir.path().to_owned(), path, data_dir: server.socket_dir().to_owned() };
    let mut tls = None;

    let (mut ran, mut skipped, mut failures) = (0, Vec::new(), Vec::new());
    for b in found {
        if let Some(why) = &b.marks.skip {
            skipped.push(format!("line {} {why}", b.line));
            continue;
        }
        if let Some(command) = &b.marks.output_of {
            let expected: Vec<String> = b.text.lines().map(shape).collect();
            let script = format!("{} 2>&1\n", shrink(command));
            for run in 1..=2 {
                let out = runner.bash(&format!("output-{}-{run}.sh", b.line), &script);
                let actual: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(shape).collect();
                if !out.status.success() || actual != expected {
                    let what = format!(
                        "run {run} of {command:?} does not print the sample below the marker\n--- expected shapes\n{}\n--- actual shapes\n{}",
                        expected.join("\n"),
                        actual.join("\n")
                    );
                    report(&mut failures, &b, &what, &script, &out);
                }
            }
            ran += 1;
            continue;
        }
        if b.lang != "sh" {
            continue;
        }
        if b.marks.tls && tls.is_none() {
            let t = crate::readme_tls::TlsServer::start();
            t.write_client_files(dir.path());
            tls = Some(t);
        }
        let tls_port = tls.as_ref().filter(|_| b.marks.tls).map(|t| t.cluster.port());
        let (mut script, dbs) = script_for(&b, server.socket_dir(), tls_port);
        if b.marks.kafka {
            script = kafka_script(&script, dir.path());
        }
        for db in dbs {
            let admin = match tls.as_ref().filter(|_| b.marks.tls) {
                Some(t) => t.cluster.options("postgres").connect().await.expect("connect to the TLS test server"),
                None => server.options("postgres").connect().await.expect("connect to the test server"),
            };
            let exists = admin.query_opt("SELECT 1 FROM pg_database WHERE datname = $1", &[&db]).await.unwrap().is_some();
            if !exists {
                admin.batch_execute(&format!("CREATE DATABASE {}", chute_core::ident::quote_ident(&db))).await.unwrap();
            }
        }
        for name in &b.marks.setup {
            setup_files(name, dir.path());
        }
        let out = runner.bash(&format!("block-{}.sh", b.line), &script);
        if !out.status.success() {
            report(&mut failures, &b, "this ```sh block failed", &script, &out);
        }
        ran += 1;
    }
    eprintln!("{file}: {ran} blocks run in {:.1} s, {} skipped:\n  {}", began.elapsed().as_secs_f64(), skipped.len(), skipped.join("\n  "));
    assert!(ran + skipped.len() > 0, "{file} has no example: take it out of PAGES");
    assert!(failures.is_empty(), "{} example(s) of {file} failed:\n\n{}", failures.len(), failures.join("\n\n"));
}

/// A block's script pointed at the test binary's Kafka broker, with Kafka's
/// own tools on PATH (shims that run them from the fixture's artifacts).
fn kafka_script(script: &str, dir: &Path) -> String {
    let broker = chute_testkit::kafka::shared();
    let bin = dir.join("kafka-bin");
    std::fs::create_dir_all(&bin).unwrap();
    for (tool, class) in [
        ("kafka-topics.sh", "org.apache.kafka.tools.TopicCommand"),
        ("kafka-console-producer.sh", "org.apache.kafka.tools.ConsoleProducer"),
        ("kafka-consumer-groups.sh", "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand"),
    ] {
        let shim = bin.join(tool);
        let text = format!(
            "#!/bin/sh\nexec java -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Dlog4j2.level=warn -cp '{}' {class} \"$@\"\n",
            chute_testkit::kafka::classpath()
        );
        std::fs::write(&shim, text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    format!("export PATH=\"{}:$PATH\"\n{}", bin.display(), script.replace("localhost:9092", &broker.bootstrap()))
}

/// The pages whose examples run, each as a test of its own (so they run in
/// parallel, each on its own server).
macro_rules! pages {
    ($($test:ident => $file:literal,)*) => {
        /// Every page with examples, as listed below.
        const PAGES: &[&str] = &[$($file),*];
        $(
            #[tokio::test]
            async fn $test() {
                run_page($file).await;
            }
        )*
    };
}

pages! {
    every_readme_example_runs_as_written => "README.md",
    book_connecting => "docs/connecting.md",
    book_local => "docs/local.md",
    book_demo => "docs/demo.md",
    book_load => "docs/load.md",
    book_parquet => "docs/parquet.md",
    book_python => "docs/python.md",
    book_upsert => "docs/upsert.md",
    book_partition => "docs/partition.md",
    book_migrate => "docs/migrate.md",
    book_serve => "docs/serve.md",
    book_prometheus => "docs/prometheus.md",
    book_opentelemetry => "docs/opentelemetry.md",
    book_consume => "docs/consume.md",
    book_gen => "docs/gen.md",
    book_bench => "docs/bench.md",
    book_simulate => "docs/simulate.md",
    book_doctor => "docs/doctor.md",
    book_cluster => "docs/cluster.md",
    book_exactly_once => "docs/exactly-once.md",
    book_operating => "docs/operating.md",
    book_production => "docs/production.md",
    book_benchmark_logs => "docs/benchmarks/history.md",
}

/// Every Markdown file under `dir`, as paths from the repository's root.
pub fn markdown_files(root: &Path, dir: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut todo = vec![root.join(dir)];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let path = e.unwrap().path();
            // mdbook's output (docs/book/) holds copies of the pages.
            if path.is_dir() && path != root.join("docs/book") {
                todo.push(path);
            } else if path.extension().is_some_and(|x| x == "md") {
                out.push(path.strip_prefix(root).unwrap().to_string_lossy().into_owned());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_page_with_examples_has_its_test() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut missing = Vec::new();
    for file in std::iter::once("README.md".to_owned()).chain(markdown_files(root, "docs")) {
        let page = std::fs::read_to_string(root.join(&file)).unwrap();
        if page.lines().any(|l| l.trim_end() == "```sh") && !PAGES.contains(&file.as_str()) {
            missing.push(file);
        }
    }
    assert!(missing.is_empty(), "pages with ```sh examples that no test runs: {missing:?}; add each to pages! in tests/cli/readme.rs");
}
