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
    1    finished, but some rows were rejected (see the reject file);
         doctor and status: a finding at warning level or above
    2    error, including a reject limit exceeded
    130  interrupted by SIGINT (Ctrl-C)
    143  terminated by SIGTERM

EXAMPLES:
    chute demo                                   # the main job on the embedded server
    chute demo --url postgres://me@db.example/metrics
    PGHOST=/var/run/postgresql chute demo --rows 5000000
    chute local status
    chute partition create metrics --columns \"time timestamptz not null, v float8\" --key time --interval 1h
    chute partition maintain --every 10min";

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

// Each command's arguments are parsed once; their size does not matter.
#[allow(clippy::large_enum_variant)]
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

    /// Create time-partitioned tables and keep them in shape: partitions made
    /// ahead of the data, old ones aged out, nothing stuck in DEFAULT.
    ///
    /// The policy of each table lives in the database (chute.partition_config),
    /// so any host can maintain any table. Every command takes --dry-run, which
    /// prints the SQL it would run and changes nothing.
    #[command(subcommand)]
    Partition(PartitionCommand),

    /// Turn a live plain table into a range-partitioned one while writers
    /// keep writing (a short swap), then move its old rows into interval
    /// partitions online (--split). Re-run the same command after a crash.
    #[command(after_help = "EXAMPLES:
    chute migrate orders --key created_at --interval 1mon --dry-run
    chute migrate orders --key created_at --interval 1mon --extend-primary-key
    chute migrate orders --split --rows-per-s 50000
    chute migrate --status orders")]
    Migrate(MigrateArgs),

    /// Load rows into TABLE from files or stdin, straight into its leaf
    /// partitions with parallel binary COPY.
    ///
    /// Every row is parsed, encoded and routed on the client; each leaf gets
    /// binary COPY batches from several connections at once. Rows whose time
    /// partition does not exist yet get one just in time (from the table's
    /// policy). Bad rows go to a reject file with their line number and the
    /// reason; every good row is loaded.
    #[command(after_help = "EXAMPLES:
    chute load conditions conditions.csv
    chute load conditions part1.csv.gz part2.csv.zst --workers 4
    zcat big.csv.gz | chute load metrics - --header
    chute load events events.jsonl --format jsonl --columns ts,dev_id,payload
    chute load ticks ticks.csv --columns time,symbol,price --epoch ms
    chute load --format tsbs tsbs_iot.tsbs.gz          # tables come from the file
    chute load conditions --gen conditions --rows 50000000
    chute gen lineitem --create | psql \"$(chute local url)\" && chute load lineitem --gen lineitem --rows 60000000
    chute load conditions conditions.csv                # again after a crash: loads only what is missing
    chute load --status                                  # what each load has committed
    zcat big.csv.gz | chute load metrics - --load-id big-2021-06   # a resumable stdin load")]
    Load(LoadArgs),

    /// Write generated data: CSV rows of a table, or tsbs files.
    ///
    /// The same seed and options give the same bytes on every run and every
    /// machine. conditions, lineitem and accounts are rows of one table
    /// (CSV; --create prints a matching CREATE TABLE); iot and devops are the
    /// Time Series Benchmark Suite's use cases as tsbs files, which name
    /// their own tables (load them with chute load --format tsbs).
    #[command(after_help = "EXAMPLES:
    chute gen conditions --rows 10000000 --devices 4000 --fields 10 > conditions.csv
    chute gen lineitem --create | psql \"$(chute local url)\" && chute gen lineitem --rows 6000000 --out lineitem.csv
    chute load lineitem lineitem.csv --workers 8
    chute gen accounts --create | psql \"$(chute local url)\"     # makes pgbench_accounts
    chute gen accounts --rows 10000000 | chute load pgbench_accounts -
    chute gen iot --scale 1000 --from 2021-06-08 --to 2021-06-09 --out iot.tsbs
    chute load --format tsbs iot.tsbs --interval 1h
    chute gen devops --scale 100 --interval 1min --out cpu.tsbs
    chute gen iot --scale 50 | gzip > iot.tsbs.gz")]
    Gen(GenArgs),

    /// Rerun a published loading experiment on this server: each cell of a
    /// matrix loads the same generated rows into a fresh table, and the
    /// results come back as CSV files, an HTML report with charts and a table.
    ///
    /// Scenarios: partitioned-vs-single (tsbs IoT: hourly partitions vs one
    /// table, 0 and 1 extra field index), conditions (plain vs weekly vs
    /// monthly partitions, batches of 10,000 rows), hash-vs-range
    /// (pgbench_accounts: 200 and 800 range or hash partitions, sorted and
    /// shuffled input), parallel-copy (lineitem: 1..N COPY streams, logged vs
    /// unlogged) and custom (a matrix from --layout, --indexes, --order,
    /// --loader, --workers, --batch-rows: the first value of each is the
    /// baseline, every other value is one cell changing that alone).
    ///
    /// The bench owns the schema chute_bench and removes its table when done.
    /// Time partitions are made up front for the rows' dates, so no cell
    /// depends on the clock.
    #[command(after_help = "EXAMPLES:
    chute bench partitioned-vs-single                  # on the embedded server, 1,000,000 rows per cell
    chute bench conditions --rows 10000000 --url postgres://me@db/metrics
    chute bench hash-vs-range --partitions 100,400
    chute bench parallel-copy --workers 1,2,4,8,16
    chute bench custom --layout single,range:1h,hash:64 --order sorted,shuffled --loader chute,psql-copy
    chute bench custom --workload accounts --layout single,ranges:64,hash:64 --order sorted,shuffled
    chute bench conditions --dry-run                   # the cells, without running them")]
    Bench(BenchArgs),

    /// What slows ingestion on this server, and the exact fix for each finding.
    #[command(after_help = crate::commands::doctor::DOCTOR_HELP)]
    Doctor(crate::commands::doctor::DoctorArgs),

    /// One screen: server, ingestion settings, managed tables, loads in progress.
    #[command(after_help = crate::commands::doctor::STATUS_HELP)]
    Status(crate::commands::status::StatusArgs),
}

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
    /// Time between readings of one device (conditions, iot, devops) [default: 10s].
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
    /// factor (lineitem; default: enough for --rows), devices (conditions).
    #[arg(long, value_name = "N")]
    pub scale: Option<u32>,
    /// conditions: devices reporting at each time step [default: 1000].
    #[arg(long, value_name = "N")]
    pub devices: Option<u32>,
    /// conditions: float8 columns data1..dataN [default: 5].
    #[arg(long, value_name = "N")]
    pub fields: Option<u16>,
    /// The first timestamp (conditions, iot, devops) [default: 2021-06-01T00:00:00Z].
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
    /// Input files (plain, .gz or .zst); `-` or nothing reads stdin.
    #[arg(conflicts_with = "generate")]
    pub files: Vec<String>,
    /// Input format.
    #[arg(long, value_enum, default_value_t = FormatArg::Csv)]
    pub format: FormatArg,
    /// The first line is a header (csv, text).
    #[arg(long)]
    pub header: bool,
    /// Field delimiter (csv: `,`; text: tab).
    #[arg(long, value_name = "CHAR")]
    pub delimiter: Option<char>,
    /// The string that means NULL (csv: an unquoted empty field; text: \N).
    #[arg(long, value_name = "STRING")]
    pub null: Option<String>,
    /// Input fields map to these columns, in order; other columns get their defaults.
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    pub columns: Option<Vec<String>>,
    /// Bare numbers in time columns are Unix time in this unit.
    #[arg(long, value_enum, value_name = "UNIT")]
    pub epoch: Option<EpochArg>,
    /// COPY connections (default: the number of cores).
    #[arg(long)]
    pub workers: Option<usize>,
    /// Threads that parse, encode and route (default: half the cores).
    #[arg(long)]
    pub parse_threads: Option<usize>,
    /// Target size of one COPY batch, in MiB.
    #[arg(long, default_value_t = 4)]
    pub batch_mb: usize,
    /// Memory for rows in flight, in MiB (queues and per-partition buffers).
    #[arg(long, default_value_t = 160)]
    pub memory_mb: usize,
    /// Send every row through the parent table and let the server route.
    #[arg(long)]
    pub via_parent: bool,
    /// Reject rows whose time partition does not exist instead of creating it.
    #[arg(long)]
    pub no_create_partitions: bool,
    /// Where rejected rows go (default: <input file name>.rejects in the current directory).
    #[arg(long, value_name = "PATH")]
    pub reject_file: Option<std::path::PathBuf>,
    /// Stop with exit code 2 once more than N rows were rejected.
    #[arg(long, value_name = "N")]
    pub max_rejects: Option<u64>,
    /// Without a terminal: print a progress line this often (tsbs style).
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub report_every: String,
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
    #[arg(long, value_name = "DURATION", conflicts_with_all = ["status", "forget"])]
    pub forget_done_before: Option<String>,
    /// Keep retrying a lost connection or a restarted server this long.
    #[arg(long, default_value = "5min", value_name = "DURATION")]
    pub retry_for: String,
    /// tsbs: partition each measurement table by time with this interval.
    #[arg(long, value_name = "INTERVAL")]
    pub interval: Option<String>,
    /// Send rows that have waited this long without filling a batch (a live
    /// stream's rows reach the table while it waits for more); `off` waits
    /// for full batches [default: 1s when reading stdin, off for files].
    #[arg(long, value_name = "DURATION|off")]
    pub flush_every: Option<String>,
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
pub enum GenArg {
    /// time timestamptz, dev_id int, data1..dataN float8; every device every 10 s.
    Conditions,
    /// TPC-H lineitem, 7 columns: l_orderkey, l_partkey, l_suppkey, l_linenumber bigint, l_shipdate, l_commitdate date, l_comment char(25).
    Lineitem,
    /// pgbench_accounts: aid, bid, abalance int, filler char(84).
    Accounts,
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
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum EpochArg {
    S,
    Ms,
    Us,
    Ns,
}

#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum PartitionCommand {
    /// Make TABLE a range-partitioned parent with a stored policy, and create
    /// its first partitions.
    ///
    /// TABLE may not exist yet (define it with --columns or --like), may be an
    /// empty plain table (converted in one short transaction), or may already
    /// be range-partitioned on the key (adopted as it is).
    #[command(after_help = "EXAMPLES:
    chute partition create metrics --columns \"time timestamptz not null, dev_id int, value float8\" --key time --interval 1h
    chute partition create events --key ts --interval 1d --tz Europe/Berlin --retention 90d --premake 7
    chute partition create readings --like readings_template --key time --interval 1d --hash dev_id:16
    chute partition create ledger --key id --interval 100000 --dry-run")]
    Create(PartitionCreateArgs),

    /// Show the stored policies.
    List {
        /// Print as JSON.
        #[arg(long)]
        json: bool,
    },

    /// Create what is missing ahead, move rows out of DEFAULT, apply
    /// retention (detaching concurrently, one partition at a time) and finish
    /// interrupted detaches. Idempotent: a second run plans nothing.
    #[command(after_help = "EXAMPLES:
    chute partition maintain                      # every table with a policy, once
    chute partition maintain metrics --dry-run    # print the plan only
    chute partition maintain --every 10min        # keep running (systemd, k8s)")]
    Maintain(PartitionMaintainArgs),

    /// Per partition: bounds, rows (estimate) and size; at the top: coverage
    /// ahead of now, rows in DEFAULT, partitions due for retention, policy.
    Status {
        /// Tables to show (default: every table with a policy).
        tables: Vec<String>,
        /// Print as JSON.
        #[arg(long)]
        json: bool,
        /// Pretend the clock reads this (e.g. 2026-12-01T00:00:00Z).
        #[arg(long, value_name = "TIMESTAMP")]
        now: Option<String>,
    },

    /// Turn TABLE back into a plain table with every row, and forget its policy.
    Undo {
        table: String,
        /// Print the SQL plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        lock: LockArgs,
    },
}

#[derive(Debug, Args)]
pub struct PartitionCreateArgs {
    /// The table ([schema.]name).
    pub table: String,
    /// The partition key column (timestamptz, timestamp, date or an integer type).
    #[arg(long)]
    pub key: String,
    /// Partition width: 15min, 1h, 1d, 1w, 1mon, 1y (any whole number), or a
    /// plain number for integer keys (e.g. 100000).
    #[arg(long)]
    pub interval: String,
    /// Intervals kept ready after the one holding now (integer keys: after
    /// the newest row).
    #[arg(long, default_value_t = 4)]
    pub premake: u32,
    /// Create every interval from this key value on (otherwise partitions
    /// start at the interval holding now, and older ones appear only when rows
    /// need them).
    #[arg(long, value_name = "TIMESTAMP|NUMBER")]
    pub start: Option<String>,
    /// Refuse rows further ahead of now than this, instead of making
    /// partitions for a faulty clock (time keys; default 1d).
    #[arg(long, value_name = "DURATION")]
    pub max_future: Option<String>,
    /// Age out partitions whose whole range is older than this (e.g. 30d,
    /// 6mon); rows older than that are refused.
    #[arg(long, value_name = "DURATION")]
    pub retention: Option<String>,
    /// What retention does with an old partition.
    #[arg(long, value_enum, default_value_t = RetentionModeArg::Drop)]
    pub retention_mode: RetentionModeArg,
    /// With --retention-mode detach: move detached partitions to this schema.
    #[arg(long, value_name = "SCHEMA")]
    pub retention_schema: Option<String>,
    /// Time zone whose calendar day-or-longer intervals follow (boundaries
    /// at local midnight). Partition names use the UTC start.
    #[arg(long, default_value = "UTC", value_name = "ZONE")]
    pub tz: String,
    /// Hash sub-partitions under each time partition: COLUMN:N.
    #[arg(long, value_name = "COLUMN:N")]
    pub hash: Option<String>,
    /// Create partitions UNLOGGED (fast, not crash-safe, not replicated).
    #[arg(long)]
    pub unlogged: bool,
    /// Keep a DEFAULT partition (pg_partman habit; makes attaching lock it
    /// and rules out concurrent detach).
    #[arg(long = "default")]
    pub default_partition: bool,
    /// Define a new table like this one.
    #[arg(long, value_name = "TABLE", conflicts_with = "columns")]
    pub like: Option<String>,
    /// Define a new table with these SQL column definitions.
    #[arg(long, value_name = "DEFINITIONS")]
    pub columns: Option<String>,
    #[command(flatten)]
    pub plan: PlanArgs,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RetentionModeArg {
    Drop,
    Detach,
}

#[derive(Debug, Args)]
pub struct PartitionMaintainArgs {
    /// Tables to maintain (default: every table with a policy).
    pub tables: Vec<String>,
    /// Keep running, maintaining again after each DURATION (e.g. 10min).
    #[arg(long, value_name = "DURATION")]
    pub every: Option<String>,
    #[command(flatten)]
    pub plan: PlanArgs,
}

/// How `partition create` and `partition maintain` run their plans.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// Print the SQL plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print plans and outcomes as JSON (one object per table and run).
    #[arg(long)]
    pub json: bool,
    /// Pretend the clock reads this.
    #[arg(long, value_name = "TIMESTAMP")]
    pub now: Option<String>,
    #[command(flatten)]
    pub lock: LockArgs,
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// The table ([schema.]name).
    pub table: String,
    /// The partition key column (timestamptz, timestamp, date or an integer
    /// type, NOT NULL).
    #[arg(long, required_unless_present_any = ["split", "status"])]
    pub key: Option<String>,
    /// Partition width: 15min, 1h, 1d, 1w, 1mon, 1y, or a plain number for integer keys.
    #[arg(long, required_unless_present_any = ["split", "status"])]
    pub interval: Option<String>,
    /// Partitions created ahead, from the end of the old table's range.
    #[arg(long, default_value_t = 4)]
    pub premake: u32,
    /// Time zone whose calendar day-or-longer intervals follow.
    #[arg(long, default_value = "UTC", value_name = "ZONE")]
    pub tz: String,
    /// Grow a primary key that lacks the partition key by it (a unique index
    /// built CONCURRENTLY before the swap).
    #[arg(long)]
    pub extend_primary_key: bool,
    /// Move the old partition's rows into interval partitions (after the swap).
    #[arg(long, conflicts_with = "status")]
    pub split: bool,
    /// Rows per copy batch of the split.
    #[arg(long, default_value_t = 10_000, value_name = "N")]
    pub batch_rows: i64,
    /// Pace the split to about this many rows per second.
    #[arg(long, value_name = "N")]
    pub rows_per_s: Option<f64>,
    /// Keep the old table (detached, with its rows) after the split instead of dropping it.
    #[arg(long)]
    pub keep_old: bool,
    /// Show where the migration of TABLE stands.
    #[arg(long)]
    pub status: bool,
    /// Print the plan and change nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Print as JSON.
    #[arg(long)]
    pub json: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// How DDL waits for locks.
#[derive(Debug, Args, Clone)]
pub struct LockArgs {
    /// Longest one DDL statement waits for a lock before it gives way and
    /// retries (and so the longest it can hold up writers).
    #[arg(long, default_value = "1s", value_name = "DURATION")]
    pub lock_timeout: String,
    /// Give up on a step after retrying this long.
    #[arg(long, default_value = "5min", value_name = "DURATION")]
    pub retry_for: String,
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
    /// Print the URL of the embedded server (for psql or --url), creating
    /// and starting it first if needed, so `psql "$(chute local url)"` works.
    Url,
}

#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The experiment to run.
    #[arg(value_enum)]
    pub scenario: ScenarioArg,
    /// Rows each cell loads.
    #[arg(long, default_value_t = 1_000_000)]
    pub rows: u64,
    /// Where results.csv, rates.csv, report.html and the charts go
    /// (default: bench-out/SCENARIO).
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// COPY connections (parallel-copy and custom: a list to compare).
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub workers: Vec<usize>,
    /// Rows per COPY batch, instead of the loader's default batch size
    /// (custom: a list to compare).
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub batch_rows: Vec<u64>,
    /// Make every table (or partition) UNLOGGED.
    #[arg(long)]
    pub unlogged: bool,
    /// hash-vs-range: partition counts (default 200,800).
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub partitions: Vec<u32>,
    /// custom: the rows: conditions (default), iot, accounts or lineitem.
    #[arg(long, value_name = "WORKLOAD")]
    pub workload: Option<String>,
    /// custom: layouts (single, range:1h, range:1d, ranges:N, hash:N, range:1h+hash:N).
    #[arg(long, value_delimiter = ',', value_name = "LAYOUT,…")]
    pub layout: Vec<String>,
    /// custom: extra field indexes, tsbs style (field, time DESC).
    #[arg(long, value_delimiter = ',', value_name = "N,…")]
    pub indexes: Vec<u32>,
    /// custom: input orders (sorted, shuffled).
    #[arg(long, value_delimiter = ',', value_name = "ORDER,…")]
    pub order: Vec<String>,
    /// custom: loaders (chute, chute-via-parent, psql-copy).
    #[arg(long, value_delimiter = ',', value_name = "LOADER,…")]
    pub loader: Vec<String>,
    /// Seed of the row generator and of the shuffle.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Run each cell N times, each on a fresh table, and report the median
    /// run with the spread of all (a shared machine's noise made visible).
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub repeat: u32,
    /// Print the cells and change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ScenarioArg {
    /// tsbs IoT: hourly partitions vs one table, 0 and 1 extra field index.
    PartitionedVsSingle,
    /// conditions: plain vs weekly vs monthly partitions, batches of 10,000 rows.
    Conditions,
    /// pgbench_accounts: range vs hash partitions, sorted and shuffled.
    HashVsRange,
    /// TPC-H lineitem: 1..N COPY streams, logged vs unlogged.
    ParallelCopy,
    /// A matrix from --layout, --indexes, --order, --loader, --workers, --batch-rows.
    Custom,
}

impl ScenarioArg {
    pub fn name(self) -> &'static str {
        match self {
            ScenarioArg::PartitionedVsSingle => "partitioned-vs-single",
            ScenarioArg::Conditions => "conditions",
            ScenarioArg::HashVsRange => "hash-vs-range",
            ScenarioArg::ParallelCopy => "parallel-copy",
            ScenarioArg::Custom => "custom",
        }
    }
}
