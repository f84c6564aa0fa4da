//! chute-bench: the experiments people pick a partitioning scheme from,
//! rerun on their own server in one command (`chute bench SCENARIO`).
//!
//! Blog posts compare single tables with hourly partitions, hash with range,
//! one COPY stream with many; their numbers come from someone else's
//! hardware and settings. A scenario here is such an experiment as data (a
//! matrix of [`cell::Cell`]s that change one variable at a time), the
//! runner loads each cell into a fresh table through chute's loader or
//! psql's `\copy`, and the report shows the same charts the posts show,
//! next to the server settings that decide them.
//!
//! Layering as elsewhere: [`cell`], [`scenario`], [`workload`],
//! [`permutation`], [`svg`] and [`report`] are pure and unit-tested; only
//! [`run`] talks to a server.

pub mod cell;
pub mod permutation;
pub mod report;
pub mod run;
pub mod scenario;
pub mod simulate;
pub mod svg;
pub mod workload;

pub use cell::{Cell, Layout, Loader, Order};
pub use report::{BenchRun, CellResult};
pub use run::{BenchProgress, BenchTarget};
pub use scenario::{MatrixOptions, SCENARIOS, Scenario};
