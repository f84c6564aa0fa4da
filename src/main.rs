//! The `chute` command line: parses arguments, turns them into validated
//! settings, runs one command and maps its outcome to an exit code. All the
//! work happens in `chute-engine` and `chute-core`; this crate only talks to
//! people (help, progress, summaries, errors).

mod args;
mod commands;
mod progress;
mod settings;
mod signals;

use std::io::Write;
use std::process::ExitCode;

/// Exit codes, documented in `--help`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Everything done, nothing rejected.
    Ok = 0,
    /// Finished, but some rows were rejected (see the reject file); for
    /// `doctor` and `status`: a finding at warning level or above.
    Rejects = 1,
    /// An error, including a reject limit exceeded.
    Error = 2,
    /// Stopped by SIGINT (Ctrl-C) after cleaning up.
    Interrupted = 130,
    /// Stopped by SIGTERM after cleaning up.
    Terminated = 143,
}

fn main() -> ExitCode {
    quiet_when_stdout_closes();
    let args = args::Cli::parse_with_book();
    chute_engine::setting::name_settings_with(settings::flag);
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("chute: cannot start the async runtime: {e}");
            return ExitCode::from(Outcome::Error as u8);
        }
    };
    let outcome = runtime.block_on(commands::run(args));
    // Worker tasks may still hold connections; do not wait for them.
    runtime.shutdown_background();
    match outcome {
        Ok(o) => ExitCode::from(o as u8),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::SUCCESS;
            }
            let _ = writeln!(std::io::stderr(), "chute: error: {e:#}");
            ExitCode::from(Outcome::Error as u8)
        }
    }
}

/// `chute doctor | head`: `println!` panics once the reader of our stdout
/// has gone (std ignores SIGPIPE, so the write fails with EPIPE). As for
/// `chute gen … | head` (see `is_broken_pipe`), that ends the command
/// quietly with success; every other panic keeps the default report. std
/// offers no typed error here, only its panic message.
fn quiet_when_stdout_closes() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let text = payload.downcast_ref::<String>().map(String::as_str).or_else(|| payload.downcast_ref::<&str>().copied());
        if text.is_some_and(|t| t.starts_with("failed printing to stdout") && t.contains("os error 32")) {
            std::process::exit(0);
        }
        report(info)
    }));
}

/// `chute gen … | head` closes our stdout early; that is not an error.
fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| c.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe))
}
