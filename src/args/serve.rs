//! `chute serve` arguments.

use std::path::PathBuf;

use clap::Args;

use super::values;

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on. Plain HTTP is allowed only on a loopback
    /// address unless --insecure-listen is given.
    #[arg(long, default_value = "127.0.0.1:8086", value_name = "ADDR:PORT")]
    pub listen: String,

    /// Listen on a non-loopback address without TLS.
    #[arg(long)]
    pub insecure_listen: bool,

    /// Serve HTTPS with this PEM certificate chain (with --tls-key).
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert.
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Schema of every table (default: the request's db or bucket, else the search_path).
    #[arg(long)]
    pub schema: Option<String>,

    /// A file with the accepted bearer tokens, one a line; requests must
    /// show one (Authorization: Bearer or Token, Basic password, or v1's p=).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,

    /// COPY connections per table.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,

    /// Threads per table that parse, encode and route rows.
    #[arg(long, default_value_t = 1)]
    pub parse_threads: usize,

    /// Size of one COPY batch per leaf, in MiB of binary rows.
    #[arg(long, default_value_t = 4)]
    pub batch_mb: usize,

    /// Send a leaf's batch at this many rows too, whichever of --batch-rows,
    /// --batch-mb and --max-delay comes first (default: no row limit).
    #[arg(long, value_name = "N")]
    pub batch_rows: Option<usize>,

    /// While every COPY worker is busy, send a partial batch once its oldest
    /// row has waited this long (an idle worker takes what is gathered at once).
    #[arg(long, default_value = "100ms", value_name = "DURATION", value_parser = values::positive_duration)]
    pub max_delay: std::time::Duration,

    /// The memory budget, in MiB: three quarters for requests in flight
    /// (their bodies as read, decompressed and parsed), a quarter shared by
    /// every table's load. A request that does not fit now gets 429 with
    /// Retry-After; one that could never fit, 413.
    #[arg(long, default_value_t = 256)]
    pub memory_mb: usize,

    /// The largest request body (as sent and after gzip), in MiB: 413
    /// beyond, at once when Content-Length says so.
    #[arg(long, default_value_t = 64)]
    pub max_body_mb: usize,

    /// Connections open at once; beyond it new connections wait to be accepted.
    #[arg(long, default_value_t = 1024, value_name = "N")]
    pub max_connections: usize,

    /// A request's headers (and a TLS handshake) must be complete within
    /// this time from its first byte, or the connection is closed.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = values::positive_duration)]
    pub header_timeout: std::time::Duration,

    /// A connection that sends nothing for this long between requests is closed.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = values::positive_duration)]
    pub idle_timeout: std::time::Duration,

    /// A request body may stall for at most this long (408 and the
    /// connection closed beyond it).
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = values::positive_duration)]
    pub body_timeout: std::time::Duration,

    /// Once --body-timeout has passed, a request body must have come at
    /// this average rate, in KiB a second (408 otherwise).
    #[arg(long, default_value_t = 8, value_name = "KIB_PER_S")]
    pub min_body_rate: usize,

    /// After SIGTERM: how long requests in flight get to be committed and
    /// answered; those still waiting then get 503, and serve exits (143)
    /// within a few seconds more, whatever state its tables' loads are in.
    #[arg(long, default_value = "20s", value_name = "DURATION", value_parser = values::duration)]
    pub shutdown_timeout: std::time::Duration,

    /// How long a request waits for its rows to commit before 503.
    #[arg(long, default_value = "60s", value_name = "DURATION", value_parser = values::positive_duration)]
    pub request_timeout: std::time::Duration,

    /// How long each table's load keeps retrying an unreachable server.
    #[arg(long, default_value = "5min", value_name = "DURATION", value_parser = values::duration)]
    pub retry_for: std::time::Duration,

    /// Make a table for a new measurement (partitioned by time every
    /// --interval; tags as text, fields typed from the line protocol) and a
    /// column for a new tag or field. Without it unknown tables and columns
    /// are refused.
    #[arg(long)]
    pub create_tables: bool,

    /// Partition interval of the tables --create-tables makes.
    #[arg(long, default_value = "1d", value_name = "INTERVAL", value_parser = values::interval)]
    pub interval: chute_core::partman::Span,

    /// The longest an ALTER TABLE … ADD COLUMN waits for its lock (it is retried).
    #[arg(long, default_value = "2s", value_name = "DURATION", value_parser = values::positive_duration)]
    pub lock_timeout: std::time::Duration,

    /// How long an Idempotency-Key is remembered: a retry within it is
    /// exactly once (older keys and journal entries are forgotten).
    #[arg(long, default_value = "24h", value_name = "DURATION", value_parser = values::duration)]
    pub idempotency_window: std::time::Duration,

    /// Names this process's lanes in the journal, apart from those of the
    /// other chute serve processes that write the same tables (default: the
    /// host's name and the --listen port). Give each instance its own; keep
    /// it across restarts of an instance.
    #[arg(long, value_name = "ID")]
    pub instance_id: Option<String>,

    /// Reject rows whose time partition does not exist instead of creating it.
    #[arg(long)]
    pub no_create_partitions: bool,

    /// At most this many new partitions for the rows of one request: a
    /// request whose rows need more (old or scattered data) has those rows
    /// refused (400, nothing made for them); send such data with chute load.
    #[arg(long, default_value_t = 16, value_name = "N", value_parser = values::at_least_one)]
    pub max_new_partitions: usize,

    /// At most this many new partitions a minute, over all requests to a table.
    #[arg(long, default_value_t = 120, value_name = "N", value_parser = values::at_least_one)]
    pub max_new_partitions_per_minute: usize,

    /// No partition is made for a row older than this (its partition must
    /// exist already, or the row is refused); `off`: any age.
    #[arg(long, default_value = "off", value_name = "DURATION", value_parser = values::duration_or_off)]
    pub max_age: values::OrOff,

    /// No partition is made for a row further ahead of this server's clock
    /// than this; `off`: any time.
    #[arg(long, default_value = "1d", value_name = "DURATION", value_parser = values::duration_or_off)]
    pub max_future: values::OrOff,

    /// Also write to tables matching PATTERN (`schema.table`, `*` and `?`
    /// wildcards; without a dot, a table name in any schema). Without it
    /// serve writes only to tables with a chute policy (chute partition
    /// create, --create-tables), and never, whatever the patterns, to a
    /// system schema or schema chute. Repeatable.
    #[arg(long, value_name = "PATTERN")]
    pub allow_table: Vec<String>,

    /// Take Prometheus remote write (POST /api/v1/write) and remote read
    /// (POST /api/v1/read): samples go into the samples table of
    /// --prometheus-schema (made with its series and metadata tables on first
    /// use, partitioned by time every --interval).
    #[arg(long)]
    pub prometheus: bool,

    /// The schema of Prometheus's tables (never a system schema nor chute).
    #[arg(long, default_value = "prometheus", value_name = "SCHEMA", requires = "prometheus")]
    pub prometheus_schema: String,

    /// Keep Prometheus's samples this long, when serve makes the samples
    /// table (chute partition maintain drops older partitions); default:
    /// kept until dropped by hand.
    #[arg(long, value_name = "INTERVAL", requires = "prometheus", value_parser = values::interval)]
    pub prometheus_retention: Option<chute_core::partman::Span>,

    /// Check the role serve connects as, then exit: INSERT on every table it
    /// would write and on their partitions, its journal and keys in schema
    /// chute, and nothing more (a superuser, an owner, UPDATE or DELETE are
    /// reported). Exit 0: as it should be; 1: more than serve needs; 2: it
    /// cannot write something it should.
    #[arg(long)]
    pub check: bool,
}
