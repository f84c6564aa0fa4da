//! The partition manager's pure half: intervals, policies, plans and the
//! planners that turn a policy, a catalog snapshot and a clock reading into a
//! plan. The engine reads the catalog, reads the clock and executes plans.

pub mod backfill;
mod distribute;
pub mod interval;
pub mod plan;
pub mod planner;
pub mod policy;

pub use interval::Span;
pub use plan::{Plan, Step, StepKind};
pub use planner::{DefaultInfo, Existing, Grants, PartitionInfo, RemoteDdl, Snapshot, TableSource};
pub use policy::{Distribution, HashSub, KeyType, Policy, Retention, RetentionMode};
