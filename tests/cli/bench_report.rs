//! `scripts/bench-report`, which the bench scripts' `--report FILE` goes
//! through: it replaces one workload's table in docs/benchmarks.md and
//! leaves everything else as it was; and every table of docs/benchmarks.md
//! is written by a script, so refreshing it is one command.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs scripts/bench-report with `args` and `stdin`; its exit code and stderr.
fn bench_report(args: &[&str], stdin: &str) -> (Option<i32>, String) {
    let mut child = Command::new(root().join("scripts/bench-report"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run scripts/bench-report");
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn a_report_replaces_its_workloads_table_and_nothing_else() {
    let dir = crate::common::open_tempdir();
    let file = dir.path().join("benchmarks.md");
    let page = "# B\n\n<!-- bench-table: serve -->\n| old | serve |\n<!-- /bench-table: serve -->\n\ntext\n\n\
                <!-- bench-table: loader -->\n| old | loader |\n|---|---|\n<!-- /bench-table: loader -->\nend\n";
    std::fs::write(&file, page).unwrap();
    let path = file.to_str().unwrap();

    let (code, err) = bench_report(&[path, "loader"], "| new | loader |\n|---|---|\n| a | 1 |\n");
    assert_eq!(code, Some(0), "{err}");
    let after = std::fs::read_to_string(&file).unwrap();
    assert_eq!(
        after,
        page.replace("| old | loader |\n|---|---|\n", "| new | loader |\n|---|---|\n| a | 1 |\n"),
        "only the loader's table changed"
    );

    // A workload without markers, or no rows, is refused and the file kept.
    let (code, err) = bench_report(&[path, "migrate"], "| x |\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("has no table for migrate") && err.contains("<!-- bench-table: migrate -->"), "{err}");
    let (code, err) = bench_report(&[path, "serve"], "\n");
    assert_eq!(code, Some(2));
    assert!(err.contains("no rows for serve"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), after, "a refused report changes nothing");
}

#[test]
fn a_rows_command_leaves_the_report_option_out() {
    let out = Command::new(root().join("scripts/bench-report"))
        .args(["--command", "scripts/bench-serve", "--seconds", "20", "--report", "docs/benchmarks.md", "--clients", "50"])
        .env_remove("BENCH_COMMAND")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "scripts/bench-serve --seconds 20 --clients 50");
}

/// Every `bench-table` of docs/benchmarks.md has a script that writes it
/// (`… | scripts/bench-report "$report" WORKLOAD` or `report_table WORKLOAD`).
#[test]
fn every_table_of_the_benchmarks_page_is_written_by_a_script() {
    let page = std::fs::read_to_string(root().join("docs/benchmarks.md")).unwrap();
    let workloads: Vec<&str> =
        page.lines().filter_map(|l| l.strip_prefix("<!-- bench-table: ").and_then(|r| r.strip_suffix(" -->"))).collect();
    assert!(workloads.len() >= 7, "{workloads:?}");
    let scripts: String = std::fs::read_dir(root().join("scripts"))
        .unwrap()
        .map(|e| std::fs::read_to_string(e.unwrap().path()).unwrap_or_default())
        .collect::<Vec<_>>()
        .join("\n");
    for w in workloads {
        assert!(
            scripts.contains(&format!("scripts/bench-report \"$report\" {w}")) || scripts.contains(&format!("report_table {w}")),
            "no script writes the {w} table of docs/benchmarks.md"
        );
        assert!(page.contains(&format!("<!-- /bench-table: {w} -->")), "the {w} table has no end marker");
    }
}
