use crate::common::{chute, run_expect};

#[test]
fn version_names_the_program() {
    let (out, _) = run_expect(chute().arg("--version"), 0);
    assert!(out.starts_with("chute "), "{out}");
}

#[test]
fn long_help_reads_like_a_manual() {
    let (out, _) = run_expect(chute().arg("--help"), 0);
    for section in ["CONNECTING:", "EXIT STATUS:", "EXAMPLES:", "PGPASSWORD", "chute local stop"] {
        assert!(out.contains(section), "--help lacks {section:?}:\n{out}");
    }
}

#[test]
fn an_unreachable_server_is_one_clear_line() {
    let (_, err) = run_expect(chute().args(["--url", "postgres://nobody@127.0.0.1:1/x", "demo"]), 2);
    let error_lines: Vec<&str> = err.lines().filter(|l| l.starts_with("chute: error")).collect();
    assert_eq!(error_lines.len(), 1, "{err}");
    assert!(error_lines[0].contains("could not connect to 127.0.0.1:1"), "{err}");
    assert!(!err.contains("panicked") && !err.contains("backtrace"), "{err}");
}

#[test]
fn a_password_in_the_url_is_never_printed() {
    let (_, err) = run_expect(chute().args(["--url", "postgres://u:hunter2@127.0.0.1:1/x", "demo"]), 2);
    assert!(!err.contains("hunter2"), "{err}");
}
