//! chute-core: everything chute does that needs neither a socket nor a clock.
//!
//! Parsers, the binary COPY encoder, the partition router (with PostgreSQL's
//! own hash functions), the partition planners and the row generators live
//! here so that each can be tested, fuzzed and benchmarked without a server.
//! Nothing in this crate depends on tokio or a database driver; anything that
//! talks to PostgreSQL belongs in `chute-engine`.

pub mod arrow;
pub mod doctor;
pub mod encode;
pub mod generate;
pub mod ident;
pub mod migrate;
mod numeric;
pub mod parse;
pub mod partman;
pub mod pghash;
pub mod route;
pub mod rowenc;
pub mod upsert;
pub mod value;
