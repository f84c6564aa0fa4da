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

/// The subcommands a help text lists under "Commands:" (not `help`).
fn subcommands(help: &str) -> Vec<String> {
    help.lines()
        .skip_while(|l| l.trim() != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter(|l| !l.starts_with("   "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_owned)
        .collect()
}

/// `chute --help`, `-h`, and both of every command and subcommand, end with
/// the page of the book to read, which exists; each command has a page of
/// its own, and a subcommand (`partition create`) its command's.
#[test]
fn every_help_ends_with_its_page_of_the_book() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let page_of = |path: &[String], flag: &str| -> String {
        let (out, _) = run_expect(chute().args(path).arg(flag), 0);
        let last = out.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("").trim().to_owned();
        let page = last
            .strip_prefix("See ")
            .and_then(|p| p.strip_suffix('.'))
            .unwrap_or_else(|| panic!("chute {} {flag} does not end with \"See docs/….md.\", but with {last:?}", path.join(" ")));
        assert!(page.starts_with("docs/") && root.join(page).is_file(), "chute {} {flag}: no page {page}", path.join(" "));
        page.to_owned()
    };
    let (top, _) = run_expect(chute().arg("--help"), 0);
    assert_eq!(page_of(&[], "--help"), "docs/README.md");
    assert_eq!(page_of(&[], "-h"), "docs/README.md");
    let commands = subcommands(&top);
    assert!(commands.len() >= 12, "{commands:?}");
    let mut todo: Vec<(Vec<String>, String)> = Vec::new();
    for c in commands {
        let page = page_of(std::slice::from_ref(&c), "--help");
        assert_ne!(page, "docs/README.md", "chute {c} has no page of its own in the book (src/args/book.rs)");
        todo.push((vec![c], page));
    }
    let mut checked = 0;
    while let Some((path, page)) = todo.pop() {
        assert_eq!(page_of(&path, "-h"), page, "chute {} -h", path.join(" "));
        assert_eq!(page_of(&path, "--help"), page, "chute {} --help", path.join(" "));
        checked += 1;
        let (help, _) = run_expect(chute().args(&path).arg("--help"), 0);
        for sub in subcommands(&help) {
            todo.push(([path.clone(), vec![sub]].concat(), page.clone()));
        }
    }
    assert!(checked > 20, "only {checked} commands checked: were the subcommands read?");
}

/// Runs `args` with stdout a pipe nobody reads any more (`chute … | head`
/// once head has exited): the first write fails with EPIPE.
fn run_into_a_closed_pipe(args: &[&str]) -> std::process::Output {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    chute().args(args).stdout(writer).stderr(std::process::Stdio::piped()).output().expect("run chute")
}

#[tokio::test]
async fn a_reader_that_stops_early_ends_the_command_quietly() {
    // `chute doctor | head` panicked: "failed printing to stdout: Broken pipe".
    let db = chute_testkit::shared().fresh_db("closed_pipe").await;
    let doctor = run_into_a_closed_pipe(&["--url", &db.url(), "doctor"]);
    let create = run_into_a_closed_pipe(&["gen", "conditions", "--create=t"]);
    for (what, out) in [("doctor", doctor), ("gen --create", create)] {
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "{what}: {err}");
        assert_eq!(out.status.code(), Some(0), "{what}: {err}");
    }
}
