//! One module per subcommand; each returns an [`Outcome`] or an error.

mod bench;
mod cluster;
mod consume;
mod demo;
mod doctor;
mod r#gen;
mod load;
mod local;
mod local_nodes;
mod migrate;
mod partition;
mod serve;
mod simulate;
mod status;

use crate::Outcome;
use crate::args::{Cli, Command};

pub async fn run(cli: Cli) -> anyhow::Result<Outcome> {
    match cli.command {
        Command::Demo(a) => demo::run(&cli.conn, a).await,
        Command::Local(c) => local::run(&cli.conn, c),
        Command::Partition(c) => partition::run(&cli.conn, c).await,
        Command::Load(a) => load::run(&cli.conn, a).await,
        Command::Serve(a) => serve::run(&cli.conn, a).await,
        Command::Consume(a) => consume::run(&cli.conn, a).await,
        Command::Migrate(a) => migrate::run(&cli.conn, a).await,
        Command::Gen(a) => r#gen::run(a),
        Command::Bench(a) => bench::run(&cli.conn, a).await,
        Command::Simulate(a) => simulate::run(&cli.conn, a).await,
        Command::Doctor(a) => doctor::run(&cli.conn, a).await,
        Command::Status(a) => status::run(&cli.conn, a).await,
        Command::Cluster(c) => cluster::run(&cli.conn, c).await,
    }
}

/// How a load or a consumer that ran to its end exits: past `--max-rejects`
/// (an error naming the reject file), with rejected rows, or cleanly.
/// `what` is the noun the message uses ("load", "consumer").
pub(crate) fn ended(
    what: &str,
    reject_limit_exceeded: bool,
    rows_rejected: u64,
    max_rejects: Option<u64>,
    reject_file: Option<&str>,
) -> Outcome {
    if reject_limit_exceeded {
        eprintln!(
            "chute: error: more than {} rows were rejected; the {what} stopped (see {})",
            max_rejects.unwrap_or(0),
            reject_file.unwrap_or("the reject file")
        );
        Outcome::Error
    } else if rows_rejected > 0 {
        Outcome::Rejects
    } else {
        Outcome::Ok
    }
}
