//! The flags of `chute gen` and `chute load`.

use std::path::PathBuf;
use std::time::Duration;

use chute_core::partman::Span;
use clap::Args;

use super::values;

#[derive(Debug, Args)]
pub struct GenArgs {
    /// What to generate.
    #[arg(value_enum)]
    pub workload: GenArg,
    /// Write to FILE instead of stdout (plain; compress through a pipe).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Output format [default: csv for conditions, lineitem and accounts; tsbs for iot and devops].
    #[arg(long, value_enum)]
    pub format: Option<GenFormatArg>,
    #[command(flatten)]
    pub options: GenOptions,
    /// Time between readings of one device (conditions, iot, devops), or between two orders (orders) [default: 10s].
    #[arg(long, value_name = "DURATION")]
    pub interval: Option<String>,
    /// csv: first write a line with the column names.
    #[arg(long)]
    pub header: bool,
    /// Print a CREATE TABLE statement for a table the rows fit, instead of
    /// the rows; the table is TABLE ([schema.]name) or named after the workload
    /// (accounts: pgbench_accounts, as pgbench names it).
    #[arg(long, value_name = "TABLE", num_args = 0..=1, require_equals = true, default_missing_value = "")]
    pub create: Option<String>,
}

/// What a generated workload looks like: shared by `chute gen` and `chute load --gen`.
#[derive(Debug, Clone, Default, Args)]
pub struct GenOptions {
    /// Rows [default: 1000000]; iot and devops stop after N rows (without
    /// --rows, `chute gen` runs them until --to).
    #[arg(long, value_name = "N")]
    pub rows: Option<u64>,
    /// The seed: the same seed gives the same data [default: 42].
    #[arg(long, value_name = "N")]
    pub seed: Option<u64>,
    /// Size: trucks (iot, default 10), hosts (devops, default 10), TPC-H scale
    /// factor (lineitem; default: enough for --rows), devices (conditions),
    /// customers (orders, default 100000).
    #[arg(long, value_name = "N")]
    pub scale: Option<u32>,
    /// conditions: devices reporting at each time step [default: 1000].
    #[arg(long, value_name = "N")]
    pub devices: Option<u32>,
    /// conditions: float8 columns data1..dataN; orders: text columns note1..noteN [default: 5].
    #[arg(long, value_name = "N")]
    pub fields: Option<u16>,
    /// The first timestamp (conditions, orders, iot, devops) [default: 2021-06-01T00:00:00Z].
    #[arg(long, value_name = "TIMESTAMP")]
    pub from: Option<String>,
    /// iot, devops: where the series end, exclusive [default: one day after
    /// --from, or no end with --rows].
    #[arg(long, value_name = "TIMESTAMP")]
    pub to: Option<String>,
}

impl GenOptions {
    /// Which options were given, by flag, for "does not apply" errors.
    pub fn given(&self) -> Vec<&'static str> {
        let mut v = Vec::new();
        for (set, flag) in [
            (self.rows.is_some(), "--rows"),
            (self.seed.is_some(), "--seed"),
            (self.scale.is_some(), "--scale"),
            (self.devices.is_some(), "--devices"),
            (self.fields.is_some(), "--fields"),
            (self.from.is_some(), "--from"),
            (self.to.is_some(), "--to"),
        ] {
            if set {
                v.push(flag);
            }
        }
        v
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GenFormatArg {
    Csv,
    /// Time Series Benchmark Suite files (iot, devops).
    Tsbs,
}

#[derive(Debug, Args)]
pub struct LoadArgs {
    /// The table to load ([schema.]name). With --format tsbs every
    /// positional argument is a file: the tables come from the file.
    #[arg(required_unless_present_any = ["status", "forget", "forget_done_before", "generate"])]
    pub table: Option<String>,
    /// Input files (plain, .gz or .zst; Parquet, Arrow IPC); `-` or nothing reads stdin.
    #[arg(conflicts_with = "generate")]
    pub files: Vec<String>,
    /// Input format [default: parquet or arrow when every file's name ends
    /// so (.parquet, .pq; .arrow, .feather, .arrows, .ipc), else csv; such a
    /// file compressed whole (.parquet.gz) is refused: decompress it first].
    #[arg(long, value_enum)]
    pub format: Option<FormatArg>,
    /// Parquet and Arrow: make TABLE from the data's schema if it does not
    /// exist (with --key and --interval: partitioned, as chute partition create).
    #[arg(long)]
    pub create: bool,
    /// With --create: the partition key column.
    #[arg(long, value_name = "COLUMN", requires = "create")]
    pub key: Option<String>,
    /// The first line is a header (csv, text).
    #[arg(long)]
    pub header: bool,
    /// Field delimiter (csv: `,`; text: tab).
    #[arg(long, value_name = "CHAR", value_parser = values::ascii_char)]
    pub delimiter: Option<u8>,
    /// The string that means NULL (csv: an unquoted empty field; text: \N).
    #[arg(long, value_name = "STRING")]
    pub null: Option<String>,
    /// Input fields map to these columns, in order; other columns get their defaults.
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    pub columns: Option<Vec<String>>,
    /// Bare numbers in time columns are Unix time in this unit.
    #[arg(long, value_enum, value_name = "UNIT")]
    pub epoch: Option<EpochArg>,
    /// jsonl: drop keys the table has no column for [default: a record with
    /// such a key is rejected, as an unknown column in a CSV header is].
    #[arg(long)]
    pub ignore_unknown: bool,
    /// COPY connections (default: the number of cores).
    #[arg(long, value_parser = values::at_least_one)]
    pub workers: Option<usize>,
    /// Threads that parse, encode and route (default: half the cores).
    #[arg(long, value_parser = values::at_least_one)]
    pub parse_threads: Option<usize>,
    /// Target size of one COPY batch, in MiB.
    #[arg(long, default_value_t = 4, value_parser = values::at_least_one)]
    pub batch_mb: usize,
    /// Memory for rows in flight, in MiB (queues and per-partition buffers; at least 8).
    #[arg(long, default_value_t = 160, value_parser = clap::value_parser!(u64).range(8..))]
    pub memory_mb: u64,
    /// Send every row through the parent table and let the server route.
    #[arg(long)]
    pub via_parent: bool,
    /// Reject rows whose time partition does not exist instead of creating it.
    #[arg(long)]
    pub no_create_partitions: bool,
    /// Partitions this load creates: fill each before anyone can see it
    /// (COPY FREEZE into a standalone table in the transaction that creates
    /// it, indexes built after the rows, then ATTACH); an empty partition
    /// that exists (made ahead) is filled the same way as a new table and
    /// swapped in for it. auto: intervals wholly in the past (an existing
    /// partition: one that ended --backfill-after ago); on: every partition
    /// the load creates (refused on layouts that cannot) or fills while
    /// empty (each that cannot is named); off: create partitions first,
    /// then COPY.
    #[arg(long, value_enum, default_value_t = BackfillArg::Auto, value_name = "auto|on|off")]
    pub backfill: BackfillArg,
    /// --backfill auto swaps an empty partition that exists only when its
    /// range ended at least this long ago [default: one interval].
    #[arg(long, value_name = "DURATION", value_parser = values::duration)]
    pub backfill_after: Option<Duration>,
    /// The longest a swap waits for its locks (and so holds up writers of
    /// the table) before it gives way and tries again (until --retry-for).
    #[arg(long, default_value = "1s", value_name = "DURATION", value_parser = values::duration)]
    pub lock_timeout: Duration,
    /// maintenance_work_mem for building a backfilled partition's indexes.
    #[arg(long, default_value = "256MB", value_name = "SIZE", value_parser = values::memory_size)]
    pub backfill_index_memory: u64,
    /// Upsert: a row whose conflict key is in the table already keeps the
    /// row there (nothing) or overwrites it (update); duplicates within the
    /// input apply in input order. Each partition's batch is staged with
    /// COPY and merged with INSERT … ON CONFLICT [default: such a row is
    /// rejected, as COPY rejects it].
    #[arg(long, value_enum, value_name = "nothing|update")]
    pub on_conflict: Option<OnConflictArg>,
    /// With --on-conflict: the columns that identify a row [default: the
    /// primary key, or the table's one unique index].
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires = "on_conflict")]
    pub conflict_key: Option<Vec<String>>,
    /// With --on-conflict update: the columns overwritten [default: every loaded column not in the key].
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires = "on_conflict")]
    pub update_columns: Option<Vec<String>>,
    /// With --on-conflict update: overwrite only where this SQL holds, over
    /// the row in the table (t) and the incoming one (excluded), e.g.
    /// "excluded.updated_at > t.updated_at".
    #[arg(long, value_name = "SQL", requires = "on_conflict")]
    pub update_if: Option<String>,
    /// Where rejected rows go (default: <input file name>.rejects in the current directory).
    #[arg(long, value_name = "PATH")]
    pub reject_file: Option<std::path::PathBuf>,
    /// Stop with exit code 2 once more than N rows were rejected.
    #[arg(long, value_name = "N")]
    pub max_rejects: Option<u64>,
    /// Without a terminal: print a progress line this often (tsbs style).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = values::duration)]
    pub report_every: Duration,
    /// Write the periodic figures (time, rows, rows/s) to this CSV file.
    #[arg(long, value_name = "FILE")]
    pub rates_csv: Option<std::path::PathBuf>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
    /// Name the load for its journal (default: derived from the table and
    /// the inputs' path, size and modification time). Needed to resume stdin.
    #[arg(long, value_name = "ID")]
    pub load_id: Option<String>,
    /// When the same load is already running (same id), wait for it to
    /// finish and then load what it left, instead of refusing (exit 2).
    #[arg(long)]
    pub wait: bool,
    /// Show what loads have committed (all, or the one named) and exit.
    #[arg(long, value_name = "ID", num_args = 0..=1, default_missing_value = "")]
    pub status: Option<String>,
    /// Forget a load's journal (the same command then loads everything again) and exit.
    #[arg(long, value_name = "ID")]
    pub forget: Option<String>,
    /// Forget every load that finished more than DURATION ago (e.g. 30d) and
    /// exit; unfinished loads stay, so they can still be resumed.
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["status", "forget"], value_parser = values::duration)]
    pub forget_done_before: Option<Duration>,
    /// Scale-out: commit on every data node or on none (two-phase commit;
    /// the nodes need max_prepared_transactions > 0). A crash between
    /// prepare and commit is resolved by the next run or `chute cluster recover`.
    #[arg(long)]
    pub atomic: bool,
    /// Keep retrying a lost connection or a restarted server this long.
    #[arg(long, default_value = "5min", value_name = "DURATION", value_parser = values::duration)]
    pub retry_for: Duration,
    /// tsbs, and --create: partition each table by time with this interval.
    #[arg(long, value_name = "INTERVAL", value_parser = values::interval)]
    pub interval: Option<Span>,
    /// Send rows that have waited this long without filling a batch (a live
    /// stream's rows reach the table while it waits for more); `off` waits
    /// for full batches [default: 1s when reading stdin, off for files].
    #[arg(long, value_name = "DURATION|off", value_parser = values::duration_or_off)]
    pub flush_every: Option<values::OrOff>,
    /// Load generated data instead of files (no file is written): rows of
    /// TABLE, or for iot and devops the tsbs tables themselves (no TABLE).
    #[arg(long = "gen", value_enum, value_name = "WORKLOAD")]
    pub generate: Option<GenArg>,
    /// With --gen iot or devops: the schema their tables go in (made if
    /// missing) [default: the connection's current schema].
    #[arg(long, value_name = "NAME")]
    pub schema: Option<String>,
    /// With --gen: the workload's options, as for chute gen.
    #[command(flatten)]
    pub gen_options: GenOptions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnConflictArg {
    Nothing,
    Update,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackfillArg {
    Auto,
    On,
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GenArg {
    /// time timestamptz, dev_id int, data1..dataN float8; every device every 10 s.
    Conditions,
    /// TPC-H lineitem, 7 columns: l_orderkey, l_partkey, l_suppkey, l_linenumber bigint, l_shipdate, l_commitdate date, l_comment char(25).
    Lineitem,
    /// pgbench_accounts: aid, bid, abalance int, filler char(84).
    Accounts,
    /// a shop's orders: id (identity), created_at, updated_at, status, customer_id, amount, tax, note1..noteN text; one order every 10 s.
    Orders,
    /// tsbs iot: trucks' readings and diagnostics, as a tsbs file (tables tags, readings, diagnostics).
    Iot,
    /// tsbs cpu-only: hosts' cpu usage, as a tsbs file (tables tags, cpu).
    Devops,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FormatArg {
    Csv,
    Text,
    Jsonl,
    /// Time Series Benchmark Suite files (tags + one table per measurement).
    Tsbs,
    /// Parquet files (columns matched to the table's by name).
    Parquet,
    /// Arrow IPC files and streams (.arrow, .feather; `-`: a stream on stdin).
    Arrow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EpochArg {
    S,
    Ms,
    Us,
    Ns,
}
