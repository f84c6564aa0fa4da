//! Where each command's help sends a reader for more: every help text ends
//! with its page of the book in `docs/`, so `--help` stays a summary and the
//! book says things at length. Subcommands (`partition create`, `local
//! start`, …) end with their command's page.

use clap::Command;

/// The book's first page, for `chute --help` and any command without a page of its own.
pub const BOOK_INDEX: &str = "docs/README.md";

/// The page of a top-level command.
pub fn page(command: &str) -> &'static str {
    match command {
        "demo" => "docs/demo.md",
        "local" => "docs/local.md",
        "partition" => "docs/partition.md",
        "migrate" => "docs/migrate.md",
        "load" => "docs/load.md",
        "serve" => "docs/serve.md",
        "consume" => "docs/consume.md",
        "gen" => "docs/gen.md",
        "bench" => "docs/bench.md",
        "simulate" => "docs/simulate.md",
        "doctor" | "status" => "docs/doctor.md",
        "cluster" => "docs/cluster.md",
        _ => BOOK_INDEX,
    }
}

/// `cmd` and every subcommand under it, each help ending with its page.
pub fn with_pages(cmd: Command) -> Command {
    let cmd = cmd.mut_subcommands(|sub| {
        let page = page(sub.get_name());
        all_ending_with(sub, page)
    });
    ending_with(cmd, BOOK_INDEX)
}

/// `cmd` and its subcommands (`partition create` belongs to `partition`'s page).
fn all_ending_with(cmd: Command, page: &'static str) -> Command {
    ending_with(cmd, page).mut_subcommands(move |sub| all_ending_with(sub, page))
}

/// Appends "See PAGE." to the short and the long help of `cmd`.
fn ending_with(cmd: Command, page: &str) -> Command {
    let see = format!("See {page}.");
    let short = cmd.get_after_help().map(ToString::to_string);
    let long = cmd.get_after_long_help().map(ToString::to_string).or_else(|| short.clone());
    let join = |text: Option<String>| match text {
        Some(t) if !t.trim().is_empty() => format!("{}\n\n{see}", t.trim_end()),
        _ => see.clone(),
    };
    cmd.after_help(join(short)).after_long_help(join(long))
}
