//! One module per subcommand; each returns an [`Outcome`] or an error.

mod demo;
mod local;

use crate::Outcome;
use crate::args::{Cli, Command};

pub async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Demo(a) => demo::run(&cli.conn, a).await,
        Command::Local(c) => local::run(&cli.conn, c),
    }
}
