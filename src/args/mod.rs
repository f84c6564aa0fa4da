//! Command-line syntax (clap). These are the raw "low" arguments; anything
//! that needs checking beyond clap's types is turned into validated settings
//! in `settings.rs` before a command runs.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

mod book;
mod cluster;
mod consume;
mod doctor;
mod load;
mod partition;
mod serve;
pub mod values;

pub use cluster::*;
pub use consume::*;
pub use doctor::*;
pub use load::*;
pub use partition::*;
pub use serve::*;

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

impl Cli {
    /// Parses the command line as [`Parser::parse`] does, with every help
    /// text ending with its page of the book (`book.rs`).
    pub fn parse_with_book() -> Cli {
        use clap::{CommandFactory, FromArgMatches};
        let matches = book::with_pages(Cli::command()).get_matches();
        Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit())
    }
}

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

    /// Serve an HTTP ingest endpoint: InfluxDB line protocol (v1 /write,
    /// v2 /api/v2/write), CSV / JSON Lines (/v1/tables/TABLE) and, with
    /// --prometheus, Prometheus remote write and read (/api/v1/write,
    /// /api/v1/read), loaded into the tables' leaf partitions; a request is
    /// answered only after its rows are committed.
    #[command(after_help = "EXAMPLES:
    chute serve                                        # http://127.0.0.1:8086
    chute serve --listen 0.0.0.0:8086 --insecure-listen --token-file tokens.txt
    curl -i 'http://127.0.0.1:8086/write?db=public' --data-binary 'cpu,host=a usage=0.5 1700000000000000000'
    chute serve --prometheus --listen 127.0.0.1:9201   # Prometheus's remote_write and remote_read url: http://127.0.0.1:9201/api/v1/write, …/read

Prometheus's long-term storage: see docs/prometheus.md")]
    Serve(ServeArgs),

    /// Consume Kafka topics into TABLE, exactly once: the offset of each
    /// partition's last row commits in chute's journal with the rows, and
    /// every partition is read from there after a restart or a rebalance.
    ///
    /// Rows are parsed, routed to the leaf partitions and loaded with binary
    /// COPY as `chute load` loads them. The consumer group's offsets are
    /// committed after, for lag tools only. Runs until stopped (SIGTERM
    /// finishes the batches in flight), or with --until-end until every
    /// partition reached the end it had at start.
    #[command(after_help = "EXAMPLES:
    chute consume conditions --brokers localhost:9092 --topic conditions --until-end
    chute consume conditions --brokers k1:9092,k2:9092 --topic conditions --group loaders
    chute consume ticks --brokers localhost:9092 --topic ticks --format csv --columns time,symbol,price
    chute consume conditions --brokers k1:9093 --topic conditions --kafka-option security.protocol=SASL_SSL --kafka-option-file kafka.conf")]
    Consume(ConsumeArgs),

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

    /// Run an orders application's reads and writes against a table and
    /// measure what the server does: rates, latency, blocks read and hit per
    /// second, WAL; before and after partitioning it, or while `chute
    /// migrate` partitions it.
    ///
    /// New orders arrive on a sine wave between a floor and the peak; each is
    /// updated along its lifecycle (placed, paid, shipped, delivered) after
    /// delays; reads fetch recent orders by id, a customer's orders of the
    /// last days, and counts over a recent time range. Samples come every
    /// second from pg_stat_database, pg_statio_user_tables and
    /// pg_statio_user_indexes (summed over the table's partitions) and the
    /// WAL position; the output is samples.csv, summary.csv and report.html
    /// with charts, like chute bench's. Where the simulator cannot reach the
    /// asked-for rates it says so, and why.
    #[command(after_help = "EXAMPLES:
    chute simulate --create --rows 2000000 --history 365d --duration 0      # make and fill an orders table, nothing else
    chute simulate --duration 5m --out before                               # the workload on the one table
    chute migrate orders --key created_at --interval 1d --extend-primary-key && chute migrate orders --split
    chute simulate --duration 5m --out after --compare before               # the same workload, side by side
    chute simulate --during-migrate --migrate-after 60s --out live           # partition it while the workload runs
    chute simulate --writes-per-s 1000 --reads-per-s 10000 --wave 60s --json")]
    Simulate(SimulateArgs),

    /// What slows ingestion on this server, and the exact fix for each finding.
    #[command(after_help = DOCTOR_HELP)]
    Doctor(DoctorArgs),

    /// One screen: server, ingestion settings, managed tables, loads in progress.
    #[command(after_help = STATUS_HELP)]
    Status(StatusArgs),

    /// Scale-out: one logical table over several PostgreSQL servers (a
    /// coordinator and data nodes), loaded with no coordinator in the data path.
    #[command(subcommand, after_help = CLUSTER_HELP)]
    Cluster(ClusterCommand),
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

    /// Scale-out: distribute the table over N data nodes (on the embedded
    /// server: `chute local start --nodes N` first, done for you; with
    /// --url: the coordinator's nodes from `chute cluster init`).
    #[arg(long, value_name = "N")]
    pub nodes: Option<u32>,
}

#[derive(Debug, Subcommand)]
pub enum LocalCommand {
    /// Create (first time) and start the embedded server.
    Start {
        /// Scale-out: also start N data nodes (each an embedded server in
        /// DATA_DIR-nodeI) and record them on this one, the coordinator.
        #[arg(long, value_name = "N")]
        nodes: Option<u32>,
    },
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

#[derive(Debug, Args)]
pub struct SimulateArgs {
    /// The orders table ([schema.]name).
    #[arg(long, default_value = "orders", value_name = "TABLE")]
    pub table: String,
    /// The table's time key (timestamptz, timestamp or date).
    #[arg(long, default_value = "created_at", value_name = "COLUMN")]
    pub key: String,
    /// Make the table (id, created_at, updated_at, status, customer_id,
    /// amount, tax, note1..noteN) and fill it with --rows orders spread over
    /// --history, with chute's loader; an interrupted --create finishes when
    /// run again.
    #[arg(long)]
    pub create: bool,
    /// --create: orders of history.
    #[arg(long, default_value_t = 1_000_000, value_name = "N", requires = "create")]
    pub rows: u64,
    /// --create: how far back the history reaches.
    #[arg(long, default_value = "365d", value_name = "DURATION", requires = "create")]
    pub history: String,
    /// --create: wide text columns (note1..noteN, 30 to 60 characters each).
    #[arg(long, default_value_t = 10, value_name = "N", requires = "create")]
    pub columns: u16,
    /// --create: customers the orders belong to [default: --rows / 20, at least 1000].
    #[arg(long, value_name = "N", requires = "create")]
    pub customers: Option<u64>,
    /// How long the workload runs (0 with --create: only make the table).
    #[arg(long, default_value = "10min", value_name = "DURATION")]
    pub duration: String,
    /// Peak writes per second, inserts and updates together: each new order
    /// is one insert and three updates, so new orders peak at a quarter of this.
    #[arg(long, default_value_t = 1000.0, value_name = "N")]
    pub writes_per_s: f64,
    /// Reads per second.
    #[arg(long, default_value_t = 10_000.0, value_name = "N")]
    pub reads_per_s: f64,
    /// Period of the new orders' sine wave.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub wave: String,
    /// The wave's trough as a fraction of its peak (0 to 1).
    #[arg(long, default_value_t = 0.5, value_name = "FRACTION")]
    pub floor: f64,
    /// Shares of the reads in percent: by id, a customer's orders, counts.
    #[arg(long, default_value = "70,25,5", value_name = "ID,CUSTOMER,COUNT")]
    pub read_mix: String,
    /// Time between an order's lifecycle steps (placed, paid, shipped, delivered).
    #[arg(long, default_value = "5s", value_name = "DURATION")]
    pub update_after: String,
    /// A customer's orders are read over this many days.
    #[arg(long, default_value_t = 7, value_name = "DAYS")]
    pub customer_days: u32,
    /// Counts cover this recent range.
    #[arg(long, default_value = "10s", value_name = "DURATION")]
    pub count_range: String,
    /// Connections in the pool [default: sized from the rates].
    #[arg(long, value_name = "N")]
    pub connections: Option<usize>,
    /// Partition the table with chute migrate (the swap, then the split)
    /// while the workload runs, and mark each phase on the charts; the run
    /// lasts until the migration is done and --migrate-after more has passed.
    #[arg(long)]
    pub during_migrate: bool,
    /// --during-migrate: workload before the migration starts (and after it ends).
    #[arg(long, default_value = "30s", value_name = "DURATION", requires = "during_migrate")]
    pub migrate_after: String,
    /// --during-migrate: the partition width.
    #[arg(long, default_value = "1d", value_name = "INTERVAL", requires = "during_migrate")]
    pub migrate_interval: String,
    /// --during-migrate: partitions made ahead.
    #[arg(long, default_value_t = 4, value_name = "N", requires = "during_migrate")]
    pub premake: u32,
    /// --during-migrate: rows per copy batch of the split.
    #[arg(long, default_value_t = 10_000, value_name = "N", requires = "during_migrate")]
    pub batch_rows: i64,
    /// --during-migrate: pace the split to about this many rows per second.
    #[arg(long, value_name = "N", requires = "during_migrate")]
    pub split_rows_per_s: Option<f64>,
    #[command(flatten)]
    pub lock: LockArgs,
    /// An earlier run's --out directory: its figures go beside this run's
    /// on the charts and in the summary (before and after).
    #[arg(long, value_name = "DIR")]
    pub compare: Option<PathBuf>,
    /// Where samples.csv, indexes.csv, summary.csv, report.html and the charts go.
    #[arg(long, default_value = "simulate-out", value_name = "DIR")]
    pub out: PathBuf,
    /// Seed of the generated orders and of the choices the workload makes.
    #[arg(long, default_value_t = 42)]
    pub seed: u64,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
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
