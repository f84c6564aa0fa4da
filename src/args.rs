//! Command-line syntax (clap). These are the raw "low" arguments; anything
//! that needs checking beyond clap's types is turned into validated settings
//! in `settings.rs` before a command runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

const AFTER_HELP: &str = "\
CONNECTING:
    chute connects as psql does. --url takes a postgres:// URL or a libpq
    key=value string; parameters it leaves out come from PGHOST, PGPORT,
    PGUSER, PGPASSWORD, PGDATABASE and PGSSLMODE, and a missing password is
    looked up in ~/.pgpass (or PGPASSFILE). Unix sockets work (host=/path).

    With no --url and no PG* variable set, chute uses its own embedded
    PostgreSQL: it starts one on first use (initdb + pg_ctl from the installed
    server binaries), says so, and leaves it running for the next command
    until `chute local stop`. It listens only on a unix socket in its data
    directory (~/.local/share/chute/pg; /var/lib/chute/pg as root).

EXIT STATUS:
    0    success
    1    finished, but some rows were rejected (see the reject file)
    2    error, including a reject limit exceeded
    130  interrupted by SIGINT (Ctrl-C)
    143  terminated by SIGTERM

EXAMPLES:
    chute demo                                   # the main job on the embedded server
    chute demo --url postgres://me@db.example/metrics
    PGHOST=/var/run/postgresql chute demo --rows 5000000
    chute local status";

/// chute moves time-series rows into PostgreSQL as fast as the server can take
/// them, into natively partitioned tables that it creates, keeps ahead of the
/// data and ages out.
#[derive(Debug, Parser)]
#[command(name = "chute", version, about, long_about, after_long_help = AFTER_HELP, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub conn: ConnArgs,

    #[command(subcommand)]
    pub command: Command,
}

/// How to reach the server; shared by every command.
#[derive(Debug, Args, Clone)]
pub struct ConnArgs {
    /// Server to use: a postgres:// URL or a libpq key=value string.
    /// Without it, PG* variables apply; with neither, the embedded server.
    #[arg(long, short = 'd', global = true, value_name = "URL")]
    pub url: Option<String>,

    /// Data directory of the embedded server.
    #[arg(long, global = true, value_name = "DIR", env = "CHUTE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run chute's main job end to end: make a partitioned `conditions` table,
    /// generate rows and load them, then print what happened.
    ///
    /// The table is `chute_demo.conditions` (time timestamptz, dev_id int,
    /// data1..data5 float8, an index on time), partitioned by day. It is
    /// dropped and made again on every run, so the demo never touches a table
    /// of yours.
    Demo(DemoArgs),

    /// Manage the embedded PostgreSQL server.
    #[command(subcommand)]
    Local(LocalCommand),
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Rows to generate and load.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,

    /// Devices reporting (rows are spread evenly over them).
    #[arg(long, default_value_t = 1000)]
    pub devices: u32,

    /// Days of data, ending at today's midnight (UTC).
    #[arg(long, default_value_t = 7)]
    pub days: u32,

    /// Seed of the row generator.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,

    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum LocalCommand {
    /// Create (first time) and start the embedded server.
    Start,
    /// Stop the embedded server. Its data stays for the next start.
    Stop,
    /// Say whether the embedded server exists and runs, and where.
    Status {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Print the URL of the embedded server (for psql or --url).
    Url,
}
