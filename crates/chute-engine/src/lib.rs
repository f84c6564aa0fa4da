//! chute-engine: everything chute does that touches a database, a file or a
//! process: connecting like libpq, the embedded server, the catalog, the one
//! DDL executor and the load pipeline. Pure logic lives in `chute-core`.

pub mod catalog;
pub mod clock;
pub mod cluster;
pub mod conflict;
pub mod connect;
pub mod consume;
pub mod demo;
pub mod doctor;
pub mod error;
pub mod exec;
pub mod layout;
mod lines;
pub mod load;
pub mod local;
pub mod local_nodes;
pub mod migrate;
mod node_conn;
pub mod partman;
mod privilege;
pub mod retention;
pub mod retry;
pub mod schema;
pub mod serve;
pub mod setting;

pub use connect::{ConnectError, ConnectOptions};
