//! `scripts/check-layout`, which CI runs, on small workspaces made here: it
//! must find a circle that only a grouped import closes, one that only a
//! `super::` path in a `mod.rs` closes, and a long function, and it must not
//! count test code, comments or strings. If the check stopped reading any of
//! them, CI would pass whatever the tree holds.

use std::path::Path;
use std::process::Command;

use crate::common::open_tempdir;

fn write(root: &Path, files: &[(&str, &str)]) {
    for (path, text) in files {
        let path = root.join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    }
}

/// Runs the check on `root`; returns its exit code and its stdout's lines, sorted.
fn check(root: &Path, extra: &[&str]) -> (Option<i32>, Vec<String>, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/check-layout");
    let out = Command::new(&script).args(extra).arg(root).output().unwrap_or_else(|e| panic!("{}: {e}", script.display()));
    let mut lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    lines.sort();
    (out.status.code(), lines, String::from_utf8_lossy(&out.stderr).into_owned())
}

/// A body of `n` lines for a function.
fn long_body(n: usize) -> String {
    (0..n - 2).map(|i| format!("    let _x{i} = {i};\n")).collect()
}

/// A workspace with a root package and one member, holding every kind of
/// finding once, and decoys that must not count.
fn fixture(root: &Path) {
    let long = format!("pub fn long_one() {{\n{}}}\n\npub fn short_one() {{}}\n", long_body(151));
    let fine = format!("pub fn at_the_limit() {{\n{}}}\n", long_body(150));
    write(
        root,
        &[
            ("Cargo.toml", "[workspace]\nmembers = [\n    \"crates/*\",\n]\n\n[package]\nname = \"fixture\"\n"),
            ("src/main.rs", "mod alpha;\nmod beta;\n\nfn main() {}\n"),
            // alpha reaches beta only through a nested group.
            ("src/alpha.rs", "use super::{\n    beta::{Bee, helper as h},\n    main,\n};\n\npub struct Ay;\n"),
            ("src/beta.rs", "use crate::alpha::Ay;\n\npub struct Bee;\npub fn helper() {}\n"),
            ("crates/member/Cargo.toml", "[package]\nname = \"member\"\n"),
            ("crates/member/src/lib.rs", "mod store;\nmod sink;\nmod quiet;\nmod lengths;\n#[path = \"odd_name.rs\"]\nmod odd;\n"),
            // `super::` in a mod.rs names the crate root's children.
            ("crates/member/src/store/mod.rs", "pub fn put() {\n    super::sink::flush();\n}\n"),
            ("crates/member/src/sink.rs", "use crate::store::put;\n\npub fn flush() {}\n"),
            // Decoys: a comment, a string and test code naming `odd`, which names quiet back.
            (
                "crates/member/src/quiet.rs",
                "// use crate::odd::X;\npub const S: &str = \"crate::odd::X\";\npub const C: char = '{';\n\n#[cfg(test)]\nmod tests {\n    use crate::odd::X;\n}\n",
            ),
            ("crates/member/src/odd_name.rs", "pub struct X;\npub fn q() -> &'static str {\n    crate::quiet::S\n}\n"),
            ("crates/member/src/lengths.rs", &format!("{long}\n{fine}")),
        ],
    );
}

const FOUND: [&str; 3] = [
    "function of 151 lines (over 150): crates/member/src/lengths.rs:1 long_one",
    "import circle in fixture: src/alpha.rs <-> src/beta.rs",
    "import circle in member: crates/member/src/sink.rs <-> crates/member/src/store/mod.rs",
];

#[test]
fn circles_through_grouped_imports_and_long_functions_are_found() {
    let dir = open_tempdir();
    fixture(dir.path());
    let (code, lines, err) = check(dir.path(), &[]);
    assert_eq!(lines, FOUND, "\n--- stderr\n{err}");
    assert_eq!(code, Some(1), "{err}");
}

#[test]
fn a_baseline_tolerates_what_it_lists_and_fails_on_what_was_fixed() {
    let dir = open_tempdir();
    fixture(dir.path());
    let baseline = dir.path().join("baseline");
    // The function is listed with another length and line: a name is enough.
    let listed =
        format!("# known\n{}\n{}\nfunction of 400 lines (over 150): crates/member/src/lengths.rs:9 long_one\n", FOUND[1], FOUND[2]);
    std::fs::write(&baseline, &listed).unwrap();
    let b = baseline.to_str().unwrap();
    let (code, lines, err) = check(dir.path(), &["--baseline", b]);
    assert_eq!((code, lines), (Some(0), vec![]), "{err}");
    assert!(err.contains("3 known finding(s) tolerated"), "{err}");

    // A new finding is not tolerated by the others.
    std::fs::write(&baseline, listed.replace(FOUND[2], "")).unwrap();
    let (code, lines, _) = check(dir.path(), &["--baseline", b]);
    assert_eq!((code, lines), (Some(1), vec![FOUND[2].to_owned()]));

    // Once beta no longer uses alpha, its entry must go.
    std::fs::write(&baseline, &listed).unwrap();
    write(dir.path(), &[("src/beta.rs", "pub struct Bee;\npub fn helper() {}\n")]);
    let (code, lines, _) = check(dir.path(), &["--baseline", b]);
    assert_eq!(lines, vec![format!("fixed, so remove it from {b}: {}", FOUND[1])]);
    assert_eq!(code, Some(1));

    // Fixed everywhere: clean without a baseline.
    write(dir.path(), &[("crates/member/src/sink.rs", "pub fn flush() {}\n"), ("crates/member/src/lengths.rs", "pub fn short() {}\n")]);
    let (code, lines, err) = check(dir.path(), &[]);
    assert_eq!((code, lines), (Some(0), vec![]), "{err}");
}
