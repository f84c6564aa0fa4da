//! The partition manager's pure half: intervals, policies, plans and the
//! planners that turn a policy, a catalog snapshot and a clock reading into a
//! plan. The engine reads the catalog, reads the clock and executes plans.

pub mod backfill;
mod distribute;
pub mod interval;
mod naming;
pub mod plan;
pub mod planner;
pub mod policy;
mod snapshot;
pub mod swap;

pub use interval::Span;
pub use plan::{Plan, PlanError, Step, StepKind};
pub use planner::{Existing, TableSource};
pub use policy::{Distribution, HashSub, KeyType, Policy, Retention, RetentionMode};
pub use snapshot::{DefaultInfo, Grants, PartitionInfo, RemoteDdl, Snapshot};
