//! The flags of `chute doctor` and `chute status`.

use std::path::PathBuf;

use clap::Args;

pub const DOCTOR_HELP: &str = "EXAMPLES:
    chute doctor                      # every table and the server's settings
    chute doctor metrics events       # these tables (and the server-wide checks)
    chute doctor --json               # machine-readable (schema in docs/doctor.md)
    chute doctor --index-window 30d   # an unused index: no scan for 30 days (default 7d)
    chute doctor metrics --sample today.csv --header   # how sorted is this input, at what cost

Exit status 0 when nothing at warning level or above is found, 1 otherwise,
2 on error: usable from cron or a CI step.";

pub const STATUS_HELP: &str = "EXAMPLES:
    chute status
    chute status --json               # the same document as chute doctor --json

Exit status 0 when chute doctor would find nothing at warning level or above,
1 otherwise, 2 on error.";

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Tables to check (default: every table); server-wide checks always run.
    pub tables: Vec<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub thresholds: Thresholds,
    /// A CSV file of rows for TABLE (in its column order): how sorted they are
    /// by the partition key, and what that costs in a trial load into a
    /// scratch copy of the table (removed afterwards).
    #[arg(long, value_name = "FILE")]
    pub sample: Option<PathBuf>,
    /// The sample's first line is a header.
    #[arg(long, requires = "sample")]
    pub header: bool,
    /// Rows of the sample to read.
    #[arg(long, default_value_t = 100_000, requires = "sample", value_name = "N")]
    pub sample_rows: usize,
}

/// What counts as large or costly; shared by `doctor` and `status`.
#[derive(Debug, Args, Clone)]
pub struct Thresholds {
    /// Plain tables with a time column at least this large (MiB, indexes
    /// included) are reported as candidates for partitioning, and partitions
    /// this large that are far larger than the ones before them.
    #[arg(long, default_value_t = 1024, value_name = "MIB")]
    pub large_table_mb: i64,
    /// The loader's batch size, to cost the round trip per batch (chute load --batch-mb).
    #[arg(long, default_value_t = 4, value_name = "MIB")]
    pub batch_mb: usize,
    /// How long to watch the WAL grow, in seconds (the rate behind max_wal_size).
    #[arg(long, default_value_t = 1.0, value_name = "SECONDS")]
    pub wal_sample: f64,
    /// An index is called unused only after this long without a scan, as
    /// chute has watched it (each run records the indexes' scan counts in
    /// the chute schema); until then: "not enough history yet".
    #[arg(long, default_value = "7d", value_name = "DURATION")]
    pub index_window: String,
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Print as JSON (the same document as `chute doctor --json`).
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub thresholds: Thresholds,
}
