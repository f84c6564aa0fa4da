//! The pure half of `chute doctor`: findings as data, and the rules that turn
//! figures read from the catalog and the statistics views into findings.
//!
//! The engine reads the numbers; everything that decides whether they are a
//! problem, how bad, and what exactly fixes it lives here, so each rule is
//! unit-tested without a server and the integration tests only have to make
//! each condition happen for real.

pub mod defaults;
pub mod indexes;
pub mod partitions;
pub mod sample;
pub mod server;

use serde::Serialize;

/// How much a finding matters. Warning and above make `chute doctor` and
/// `chute status` exit 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Advice: worth knowing, not a problem on its own.
    Info,
    /// Slows ingestion or will fail it later.
    Warning,
    /// Fails ingestion now (for example no partition holds the present).
    Critical,
}

impl std::fmt::Display for Severity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        })
    }
}

/// One figure behind a finding, and the view or catalog it was read from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Evidence {
    pub view: String,
    pub detail: String,
}

impl Evidence {
    pub fn new(view: &str, detail: impl Into<String>) -> Self {
        Evidence { view: view.to_owned(), detail: detail.into() }
    }
}

/// One thing that slows ingestion, with its evidence and its fix.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// Stable name of the check, e.g. `unused_index` (see docs/doctor.md).
    pub kind: &'static str,
    pub severity: Severity,
    /// The index, table, setting or host the finding is about.
    pub object: String,
    pub summary: String,
    pub evidence: Vec<Evidence>,
    /// What fixes it, in order: SQL statements (each to be run on its own,
    /// since some cannot run in a transaction block) or `chute` commands.
    pub fix: Vec<String>,
}

/// Whether any finding should make the command exit 1.
pub fn unhealthy(findings: &[Finding]) -> bool {
    findings.iter().any(|f| f.severity >= Severity::Warning)
}

/// `s` as one shell word, for fixes that are commands: as is when it holds
/// only characters no shell treats specially, else in single quotes.
pub fn shell_word(s: &str) -> String {
    if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "_.,:/=+-@%".contains(c)) {
        s.to_owned()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// `12.3 MiB`-style sizes for evidence lines. Written here rather than
/// with indicatif (which the CLI uses for its own sizes): chute-core takes
/// no terminal crate, and findings' evidence is data, in `--json` too.
pub fn human_bytes(b: i64) -> String {
    let f = b as f64;
    if f >= 1073741824.0 {
        format!("{:.1} GiB", f / 1073741824.0)
    } else if f >= 1048576.0 {
        format!("{:.1} MiB", f / 1048576.0)
    } else {
        format!("{:.0} kB", f / 1024.0)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn shell_words() {
        assert_eq!(super::shell_word("public.m"), "public.m");
        assert_eq!(super::shell_word("public.\"Big T\""), "'public.\"Big T\"'");
        assert_eq!(super::shell_word("/tmp/it's.csv"), "'/tmp/it'\\''s.csv'");
    }
}
