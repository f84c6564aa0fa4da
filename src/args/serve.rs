//! `chute serve` arguments.

use std::path::PathBuf;

use clap::Args;

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
    #[arg(long, default_value = "100ms", value_name = "DURATION")]
    pub max_delay: String,

    /// Budget for the bytes of requests in flight, all together, in MiB;
    /// when full, new requests get 429 with Retry-After.
    #[arg(long, default_value_t = 256)]
    pub memory_mb: usize,

    /// The largest request body (after gzip), in MiB (413 beyond).
    #[arg(long, default_value_t = 64)]
    pub max_body_mb: usize,

    /// How long a request waits for its rows to commit before 503.
    #[arg(long, default_value = "60s", value_name = "DURATION")]
    pub request_timeout: String,

    /// How long each table's load keeps retrying an unreachable server.
    #[arg(long, default_value = "5min", value_name = "DURATION")]
    pub retry_for: String,

    /// Make a table for a new measurement (partitioned by time every
    /// --interval; tags as text, fields typed from the line protocol) and a
    /// column for a new tag or field. Without it unknown tables and columns
    /// are refused.
    #[arg(long)]
    pub create_tables: bool,

    /// Partition interval of the tables --create-tables makes.
    #[arg(long, default_value = "1d", value_name = "INTERVAL")]
    pub interval: String,

    /// The longest an ALTER TABLE … ADD COLUMN waits for its lock (it is retried).
    #[arg(long, default_value = "2s", value_name = "DURATION")]
    pub lock_timeout: String,

    /// How long an Idempotency-Key is remembered: a retry within it is
    /// exactly once (older keys and journal entries are forgotten).
    #[arg(long, default_value = "24h", value_name = "DURATION")]
    pub idempotency_window: String,

    /// Reject rows whose time partition does not exist instead of creating it.
    #[arg(long)]
    pub no_create_partitions: bool,
}
