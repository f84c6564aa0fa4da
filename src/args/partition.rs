//! The flags of `chute partition` and `chute migrate`.

use clap::{Args, Subcommand};

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

    /// Change TABLE's stored settings: what `chute serve` does with a row
    /// whose key is in the table already (an upsert).
    #[command(after_help = "EXAMPLES:
    chute partition set metrics --on-conflict update
    chute partition set metrics --on-conflict update --update-if \"excluded.updated_at > t.updated_at\" --per-request
    chute partition set metrics --on-conflict error       # back to refusing such rows")]
    Set(PartitionSetArgs),

    /// Turn TABLE back into a plain table with every row, and forget its policy.
    Undo {
        table: String,
        /// Print the SQL plan and change nothing.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        lock: LockArgs,
    },

    /// Forget the stored policy of TABLE, a table that no longer exists
    /// (dropped with SQL rather than with `undo`): `maintain` skips such a
    /// policy with a warning until then, and a new table of that name would
    /// inherit it.
    #[command(after_help = "EXAMPLES:
    chute partition forget metrics --dry-run   # the SQL it would run
    chute partition forget metrics")]
    Forget {
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
    /// Scale-out: hash-distribute each time partition on this column over
    /// the data nodes of `chute cluster init` (shards are postgres_fdw
    /// foreign tables on the coordinator, ordinary tables on the nodes).
    #[arg(long, value_name = "COLUMN", requires = "shards", conflicts_with = "hash")]
    pub distribute_by: Option<String>,
    /// With --distribute-by: hash shards per time partition, placed round-robin on the nodes.
    #[arg(long, value_name = "N", requires = "distribute_by")]
    pub shards: Option<u32>,
    /// Scale-out without hash shards: each time partition is a foreign
    /// table on one data node, consecutive intervals on consecutive nodes
    /// (round-robin) or by a hash of the partition's name.
    #[arg(long, value_enum, value_name = "HOW", conflicts_with_all = ["distribute_by", "hash"])]
    pub placement: Option<PlacementArg>,
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
    pub upsert: TableUpsertArgs,
    #[command(flatten)]
    pub plan: PlanArgs,
}

#[derive(Debug, Args)]
pub struct PartitionSetArgs {
    /// The table ([schema.]name), which has a policy.
    pub table: String,
    #[command(flatten)]
    pub upsert: TableUpsertArgs,
}

/// A table's upsert setting, used by `chute serve` for every write to it.
#[derive(Debug, Clone, Args)]
pub struct TableUpsertArgs {
    /// What a row whose conflict key is in the table already does: error
    /// (rejected, as COPY rejects it), nothing (the row there stays) or
    /// update (it takes the incoming row's values).
    #[arg(long, value_enum, value_name = "error|nothing|update")]
    pub on_conflict: Option<TableConflictArg>,
    /// The columns that identify a row [default: the primary key, or the table's one unique index].
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires = "on_conflict")]
    pub conflict_key: Option<Vec<String>>,
    /// update: the columns overwritten [default: every column not in the key].
    #[arg(long, value_delimiter = ',', value_name = "A,B", requires = "on_conflict")]
    pub update_columns: Option<Vec<String>>,
    /// update: only where this SQL holds (t: the row there, excluded: the incoming one).
    #[arg(long, value_name = "SQL", requires = "on_conflict")]
    pub update_if: Option<String>,
    /// A `chute serve` request may choose another action for its own rows (`?on_conflict=…`).
    #[arg(long, requires = "on_conflict")]
    pub per_request: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum TableConflictArg {
    Error,
    Nothing,
    Update,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum PlacementArg {
    RoundRobin,
    Hash,
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
    /// Give up on a step after retrying this long; after a lost connection
    /// (a failover), give up reconnecting after this long.
    #[arg(long, default_value = "5min", value_name = "DURATION")]
    pub retry_for: String,
}
