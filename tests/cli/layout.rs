//! `scripts/check-layout`, which CI runs, on small workspaces made here: it
//! must find a circle that only a grouped import closes, one that only a
//! `super::` path in a `mod.rs` closes, one between module folders that no
//! two files close, and a long function (under the limit of its crate), and
//! it must not count test code, comments or strings. If the check stopped
//! reading any of them, CI would pass whatever the tree holds.

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

#[test]
fn a_circle_between_module_folders_is_found_when_no_two_files_make_one() {
    let dir = open_tempdir();
    write(
        dir.path(),
        &[
            ("Cargo.toml", "[package]\nname = \"folders\"\n"),
            ("src/lib.rs", "mod a;\nmod b;\nmod c;\n"),
            // `a/` as a mod.rs folder, `b/` beside b.rs: x uses y, z uses w,
            // and neither w nor y uses anything, so no file is in a circle.
            ("src/a/mod.rs", "mod x;\npub mod w;\n"),
            ("src/a/x.rs", "use crate::b::y::Why;\nuse super::w::Double;\n"),
            ("src/a/w.rs", "pub struct Double;\n"),
            ("src/b.rs", "pub mod y;\nmod z;\n"),
            ("src/b/y.rs", "pub struct Why;\n"),
            ("src/b/z.rs", "pub fn f() -> crate::a::w::Double {\n    crate::a::w::Double\n}\n"),
            // c uses both, and neither uses it back: no circle.
            ("src/c.rs", "use crate::{a::w::Double, b::y::Why};\n"),
        ],
    );
    let found = "import circle in folders: src/a/ <-> src/b/";
    let (code, lines, err) = check(dir.path(), &[]);
    assert_eq!(lines, [found], "\n--- stderr\n{err}");
    assert_eq!(code, Some(1), "{err}");

    // A baseline lists it as it is printed.
    let baseline = dir.path().join("baseline");
    std::fs::write(&baseline, format!("# known\n{found}\n")).unwrap();
    let (code, lines, err) = check(dir.path(), &["--baseline", baseline.to_str().unwrap()]);
    assert_eq!((code, lines), (Some(0), vec![]), "{err}");

    // Once z no longer reaches into a/, the folders are no circle.
    write(dir.path(), &[("src/b/z.rs", "pub fn f() {}\n")]);
    let (code, lines, err) = check(dir.path(), &[]);
    assert_eq!((code, lines), (Some(0), vec![]), "{err}");
}

#[test]
fn a_crate_may_have_a_function_length_limit_of_its_own() {
    let dir = open_tempdir();
    fixture(dir.path());
    let circles = [FOUND[1], FOUND[2]];

    // member's limit is lower: both its functions of 150 and 151 lines are over it.
    let (code, lines, err) = check(dir.path(), &["--max-fn-lines-in", "member=100"]);
    let mut expected = vec![
        "function of 150 lines (over 100): crates/member/src/lengths.rs:155 at_the_limit".to_owned(),
        "function of 151 lines (over 100): crates/member/src/lengths.rs:1 long_one".to_owned(),
    ];
    expected.extend(circles.map(str::to_owned));
    assert_eq!(lines, expected, "\n--- stderr\n{err}");
    assert_eq!(code, Some(1), "{err}");

    // Higher for member, lower for everyone else: the root package has no
    // function over 2 lines, member none over 200.
    let (code, lines, err) = check(dir.path(), &["--max-fn-lines", "2", "--max-fn-lines-in", "member=200"]);
    assert_eq!((code, lines), (Some(1), circles.map(str::to_owned).to_vec()), "{err}");

    // A crate the workspace does not have is a mistake, not a limit for nothing.
    let (code, lines, err) = check(dir.path(), &["--max-fn-lines-in", "membre=100"]);
    assert_eq!((code, lines), (Some(2), vec![]), "{err}");
    assert!(err.contains("no crate of the workspace: membre"), "{err}");
}
