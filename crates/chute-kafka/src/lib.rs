//! `chute consume`, the Kafka door: the partitions of Kafka topics loaded
//! into a table through chute's load engine (`chute_engine`), exactly once
//! without Kafka transactions. The consumer and its runs are in `consume`;
//! the load's input (a run's partitions, read from the journal's positions,
//! cut into chunks of whole messages) in `source`. The CLI links this
//! crate; the Python package does not (nor librdkafka with it).

pub mod consume;
mod source;
mod topic_id;

pub use source::{DeadLetterTopic, KafkaConsumer, KafkaInput, KafkaPart, KafkaRun, MessageFields, MessageFormat, Watch, kafka_error};
