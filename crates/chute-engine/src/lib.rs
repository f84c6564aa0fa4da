//! chute-engine: everything chute does that touches a database, a file or a
//! process: connecting like libpq, the embedded server, the catalog, the one
//! DDL executor, the partition manager and the load engine. Pure logic lives
//! in `chute-core`; the doors that feed the load engine from a network or a
//! columnar format live in crates of their own (`chute-serve`, `chute-kafka`,
//! `chute-arrow`), which implement its `load::Input` trait, so that a
//! program links only the doors it uses.

pub mod catalog;
pub mod clock;
pub mod cluster;
pub mod conflict;
pub mod connect;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod exec;
pub mod layout;
pub mod lines;
pub mod load;
pub mod local;
pub mod local_nodes;
pub mod metrics_text;
pub mod migrate;
mod node_conn;
pub mod partman;
pub mod pooler;
mod privilege;
pub mod retention;
pub mod retry;
pub mod schema;
pub mod setting;

pub use connect::{ConnectError, ConnectOptions};
