//! Every relative link in README.md and the book (`docs/**/*.md`) points at
//! a file that exists and, with a `#fragment`, at a heading of that page
//! (mdbook does not check links itself). Anchors are made from headings as
//! GitHub and mdbook make them. Every page of the book is in its
//! SUMMARY.md, or the built book would lack it.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use crate::readme::markdown_files;

/// The text of a page outside fenced code blocks, line by line (numbered
/// from 1), with inline code spans blanked so their brackets are no links.
fn prose(page: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in page.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push((i + 1, without_code_spans(line)));
        }
    }
    out
}

fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut in_code = false;
    for c in line.chars() {
        if c == '`' {
            in_code = !in_code;
            out.push(c);
        } else {
            out.push(if in_code { ' ' } else { c });
        }
    }
    out
}

/// A heading's anchor: lower case, letters, digits, `-` and `_` kept, spaces
/// made `-`, everything else dropped (GitHub's and mdbook's rule).
fn slug(heading: &str) -> String {
    // A link in a heading counts by its text.
    let mut text = String::new();
    let mut rest = heading;
    while let Some(open) = rest.find('[') {
        let Some(mid) = rest[open..].find("](").map(|m| open + m) else { break };
        let Some(close) = rest[mid..].find(')').map(|c| mid + c) else { break };
        text.push_str(&rest[..open]);
        text.push_str(&rest[open + 1..mid]);
        rest = &rest[close + 1..];
    }
    text.push_str(rest);
    text.trim()
        .chars()
        .flat_map(char::to_lowercase)
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page's headings (a repeated heading gets `-1`, `-2`, …).
fn anchors(page: &str) -> HashSet<String> {
    let mut seen = HashSet::new();
    let mut fenced = false;
    for line in page.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        let hashes = line.chars().take_while(|c| *c == '#').count();
        if fenced || hashes == 0 || hashes > 6 || !line[hashes..].starts_with(' ') {
            continue;
        }
        let base = slug(&line[hashes..]);
        let mut anchor = base.clone();
        let mut n = 0;
        while !seen.insert(anchor.clone()) {
            n += 1;
            anchor = format!("{base}-{n}");
        }
    }
    seen
}

/// The targets of a line's inline links and images, `[text](target)`.
fn targets(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        // `[text](target "title")`
        let target = after[..end].split_whitespace().next().unwrap_or("");
        out.push(target.trim_start_matches('<').trim_end_matches('>').to_owned());
        rest = &after[end..];
    }
    out
}

/// What is wrong with the links of the page at `file` (relative to `root`),
/// one line each: the page, its line, the link and why.
fn broken_links(root: &Path, file: &str) -> Vec<String> {
    let page = std::fs::read_to_string(root.join(file)).unwrap_or_else(|e| panic!("{file}: {e}"));
    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
    let mut broken = Vec::new();
    for (line_no, line) in prose(&page) {
        for target in targets(&line) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').map_or((target.as_str(), None), |(p, f)| (p, Some(f)));
            let linked: PathBuf = if path.is_empty() { PathBuf::from(file) } else { normalize(&dir.join(path)) };
            let full = root.join(&linked);
            if !full.exists() {
                broken.push(format!("{file} line {line_no}: ({target}): {} does not exist", linked.display()));
                continue;
            }
            if let Some(fragment) = fragment.filter(|f| !f.is_empty()) {
                if linked.extension().is_none_or(|x| x != "md") {
                    continue;
                }
                let text = std::fs::read_to_string(&full).unwrap();
                if !anchors(&text).contains(fragment) {
                    broken.push(format!(
                        "{file} line {line_no}: ({target}): {} has no heading with the anchor #{fragment}",
                        linked.display()
                    ));
                }
            }
        }
    }
    broken
}

/// `a/b/../c` as `a/c`, so a link that climbs out of the repository is seen.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                if !out.pop() {
                    out.push("..");
                }
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

fn pages(root: &Path) -> Vec<String> {
    std::iter::once("README.md".to_owned()).chain(markdown_files(root, "docs")).collect()
}

#[test]
fn every_relative_link_of_the_readme_and_the_book_resolves() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let broken: Vec<String> = pages(root).iter().flat_map(|f| broken_links(root, f)).collect();
    assert!(broken.is_empty(), "{} broken link(s):\n{}", broken.len(), broken.join("\n"));
}

#[test]
fn every_page_of_the_book_is_in_its_summary() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let summary = std::fs::read_to_string(root.join("docs/SUMMARY.md")).unwrap();
    let listed: HashSet<String> =
        prose(&summary).iter().flat_map(|(_, l)| targets(l)).map(|t| normalize(&Path::new("docs").join(t)).display().to_string()).collect();
    let missing: Vec<String> = markdown_files(root, "docs").into_iter().filter(|f| f != "docs/SUMMARY.md" && !listed.contains(f)).collect();
    assert!(missing.is_empty(), "pages missing from docs/SUMMARY.md (mdbook would leave them out): {missing:?}");
}

/// The checker itself finds a missing file, a missing anchor and a link out
/// of the tree, and passes good links, in code or not.
#[test]
fn the_link_checker_finds_what_is_broken() {
    let dir = crate::common::open_tempdir();
    let root = dir.path();
    std::fs::create_dir_all(root.join("docs/sub")).unwrap();
    std::fs::write(
        root.join("docs/a.md"),
        "# Page A\n\n## `chute load`: the loader (fast)\n\n## Twice\n\n## Twice\n\n```sh\n[not a link](nowhere.md)\n```\n",
    )
    .unwrap();
    std::fs::write(
        root.join("docs/sub/b.md"),
        "# B\n\nGood: [a](../a.md), [load](../a.md#chute-load-the-loader-fast), [second](../a.md#twice-1), [self](#b), \
         [site](https://example.org/x.md), `[code](gone.md)`.\n\
         Bad: [gone](gone.md) and [anchor](../a.md#no-such-heading)\n\nAlso [up](../../../outside.md).\n",
    )
    .unwrap();
    assert!(broken_links(root, "docs/a.md").is_empty(), "{:?}", broken_links(root, "docs/a.md"));
    let broken = broken_links(root, "docs/sub/b.md");
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].starts_with("docs/sub/b.md line 4: (gone.md): docs/sub/gone.md does not exist"), "{broken:#?}");
    assert!(broken[1].contains("(../a.md#no-such-heading): docs/a.md has no heading with the anchor #no-such-heading"), "{broken:#?}");
    assert!(broken[2].starts_with("docs/sub/b.md line 6: (../../../outside.md)"), "{broken:#?}");
}

/// The charts and run outputs committed under docs/ name no directory of the
/// machine that made them (`chute bench` and `chute simulate` name runs by
/// their directory's name; the bench scripts run them by name). The run logs
/// (docs/benchmarks/history.md) quote paths as they were, and stay as written.
#[test]
fn no_chart_or_run_output_in_the_docs_holds_a_machine_path() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut todo = vec![root.join("docs")];
    let mut found = Vec::new();
    let mut checked = 0;
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                if path != root.join("docs/book") {
                    todo.push(path);
                }
                continue;
            }
            let ext = path.extension().and_then(|x| x.to_str()).unwrap_or("");
            if !["svg", "csv", "md", "html"].contains(&ext) || path.ends_with("docs/benchmarks/history.md") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            checked += 1;
            for machine in ["/tmp/", "/root/", "/home/", "/work/"] {
                if text.contains(machine) {
                    found.push(format!("{} holds {machine}…", path.strip_prefix(root).unwrap().display()));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} files checked");
    assert!(found.is_empty(), "machine paths in the docs (regenerate with the script that made them):\n{}", found.join("\n"));
}

/// Where the code sends a reader must exist: every `docs/….md` a source
/// file names (help texts, error messages, comments) is a page of the book,
/// and every "the README's X section" is a heading of README.md (the
/// README is short now; an error that sends a user to a section it lost
/// would send them nowhere).
#[test]
fn every_page_and_readme_section_the_code_names_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    let headings: Vec<String> =
        readme.lines().filter(|l| l.starts_with('#')).map(|l| l.trim_start_matches('#').trim().to_lowercase()).collect();
    let mut todo = vec![root.join("src")];
    todo.extend(std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path().join("src")));
    let (mut wrong, mut named) = (Vec::new(), 0);
    while let Some(dir) = todo.pop() {
        for e in std::fs::read_dir(&dir).unwrap() {
            let path = e.unwrap().path();
            if path.is_dir() {
                todo.push(path);
                continue;
            }
            if path.extension().and_then(|x| x.to_str()) != Some("rs") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let file = path.strip_prefix(root).unwrap().display().to_string();
            for page in docs_paths(&text) {
                named += 1;
                if !root.join(&page).is_file() {
                    wrong.push(format!("{file} names {page}, which does not exist"));
                }
            }
            for section in readme_sections(&text) {
                if !headings.iter().any(|h| h.contains(&section.to_lowercase())) {
                    wrong.push(format!("{file} sends the reader to the README's {section} section, which README.md does not have"));
                }
            }
        }
    }
    assert!(named > 10, "only {named} book pages named in the code: is the scan looking in the right place?");
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Every `docs/….md` in a text.
fn docs_paths(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("docs/") {
        let tail = &rest[at..];
        let len = tail.find(|c: char| !(c.is_ascii_alphanumeric() || "/-_.".contains(c))).unwrap_or(tail.len());
        let candidate = tail[..len].trim_end_matches('.');
        if candidate.ends_with(".md") {
            out.push(candidate.to_owned());
        }
        rest = &tail[len.max(5)..];
    }
    out
}

/// X of every "README's X section" in a text.
fn readme_sections(text: &str) -> Vec<String> {
    text.match_indices("README's ")
        .filter_map(|(at, m)| {
            let tail = &text[at + m.len()..];
            let end = tail.find(" section")?;
            Some(tail[..end].trim_matches(|c| c == '"' || c == '`').to_owned()).filter(|s| s.len() < 40)
        })
        .collect()
}
