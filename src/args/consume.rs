//! `chute consume` arguments.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

#[derive(Debug, Args)]
pub struct ConsumeArgs {
    /// The table to load (schema-qualified if needed); its time partitions
    /// are made just in time, as `chute load` makes them. With --format
    /// line-protocol, `-` (or SCHEMA.-) loads each line into the table its
    /// measurement names, in the search_path's first schema (or SCHEMA).
    pub table: String,

    /// Kafka brokers to start from, HOST:PORT[,HOST:PORT…].
    #[arg(long, value_name = "HOST:PORT[,…]")]
    pub brokers: String,

    /// Topics to consume (comma-separated or repeated).
    #[arg(long, value_delimiter = ',', required = true, value_name = "TOPIC")]
    pub topic: Vec<String>,

    /// The consumer group: consumers of one group share the topics'
    /// partitions (and one journal), each partition read by one of them.
    #[arg(long, default_value = "chute", value_name = "GROUP")]
    pub group: String,

    /// What a message holds: one JSON object per line or a JSON array of
    /// them (json), CSV or text (COPY's text format) lines, or InfluxDB line
    /// protocol lines whose measurement is the table's name (line-protocol).
    /// A message may hold several lines.
    #[arg(long, value_enum, default_value_t = MessageFormat::Json)]
    pub format: MessageFormat,

    /// line-protocol: the unit of the lines' timestamps (ns, us, ms or s).
    #[arg(long, default_value = "ns", value_name = "UNIT")]
    pub precision: String,

    /// Stop once every partition reached the end offset it had at start
    /// (default: run until stopped).
    #[arg(long)]
    pub until_end: bool,

    /// The columns the fields fill, in order (default: every column of the table).
    #[arg(long, value_delimiter = ',', value_name = "COL,…")]
    pub columns: Option<Vec<String>>,

    /// JSON messages: drop keys the table has no column for [default: a row
    /// with such a key is rejected, with its offset].
    #[arg(long)]
    pub ignore_unknown: bool,

    /// JSON messages: this column gets the message's key (as text).
    #[arg(long, value_name = "COLUMN")]
    pub key_column: Option<String>,

    /// JSON messages: column COL gets header NAME's value (as text); repeatable.
    #[arg(long, value_name = "NAME=COL")]
    pub header_column: Vec<String>,

    /// JSON messages: this column gets the message's timestamp.
    #[arg(long, value_name = "COLUMN")]
    pub timestamp_column: Option<String>,

    /// A librdkafka setting, KEY=VALUE (repeatable): TLS and SASL, e.g.
    /// security.protocol=SASL_SSL, sasl.mechanism=SCRAM-SHA-256,
    /// sasl.username=…, ssl.ca.location=FILE. Secrets are better read from
    /// a file: --kafka-option-file.
    #[arg(long = "kafka-option", value_name = "KEY=VALUE")]
    pub kafka_options: Vec<String>,

    /// librdkafka settings from a file, KEY=VALUE a line (# comments): keeps
    /// sasl.password out of the command line.
    #[arg(long, value_name = "FILE")]
    pub kafka_option_file: Option<PathBuf>,

    /// Bad messages go to this Kafka topic instead of the reject file, with
    /// the headers chute.partition, chute.offset and chute.reason.
    #[arg(long, value_name = "TOPIC")]
    pub dead_letter_topic: Option<String>,

    /// Bad messages go here, with their partition and offset (default: TOPIC.rejects).
    #[arg(long, value_name = "FILE")]
    pub reject_file: Option<PathBuf>,

    /// Stop once more than this many rows were rejected since the consumer
    /// last got its partitions (a rebalance starts the count again); rows are
    /// counted a chunk at a time, and the chunk that passed the limit is
    /// still filed whole (its good rows committed).
    #[arg(long, value_name = "N")]
    pub max_rejects: Option<u64>,

    /// COPY connections.
    #[arg(long, default_value_t = 2)]
    pub workers: usize,

    /// Size of one COPY batch per leaf, in MiB of binary rows.
    #[arg(long, default_value_t = 4)]
    pub batch_mb: usize,

    /// Send a leaf's batch at this many rows too (default: no row limit).
    #[arg(long, value_name = "N")]
    pub batch_rows: Option<usize>,

    /// The memory budget for rows in flight, in MiB (fetching pauses when it is full).
    #[arg(long, default_value_t = 160)]
    pub memory_mb: usize,

    /// Send rows once they waited this long, even in a partial batch.
    #[arg(long, default_value = "200ms", value_name = "DURATION")]
    pub flush_every: String,

    /// Names the load in chute's journal (default: kafka:GROUP:TOPICS:TABLE).
    #[arg(long, value_name = "ID")]
    pub load_id: Option<String>,

    /// Keep retrying a lost connection, a restarted server or a failover
    /// this long (what is not committed is read again from Kafka meanwhile).
    #[arg(long, default_value = "5min", value_name = "DURATION", value_parser = crate::args::values::duration)]
    pub retry_for: std::time::Duration,

    /// Serve GET /metrics (Prometheus text: rows, bytes, rejects, batch
    /// commit times, lag per partition) on this address.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// Without a terminal: print a progress line this often, counting the
    /// consumer's rows over every rebalance.
    #[arg(long, default_value = "10s", value_name = "DURATION", value_parser = crate::args::values::duration)]
    pub report_every: std::time::Duration,

    /// Print the final report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MessageFormat {
    Json,
    Csv,
    Text,
    LineProtocol,
}
