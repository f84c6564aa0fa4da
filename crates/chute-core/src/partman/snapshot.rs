//! What the planners know of a partitioned table: a snapshot of its
//! catalog (partitions, DEFAULT, newest key, grants, and for a distributed
//! table what its remote tables are made of), read by the engine and handed
//! to every planner.

use crate::ident::QualifiedName;

/// One range partition of the parent, as the catalog has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionInfo {
    pub name: QualifiedName,
    /// Lower bound (`i64::MIN` for MINVALUE).
    pub from: i64,
    /// Upper bound, exclusive (`i64::MAX` for MAXVALUE).
    pub to: i64,
    /// `pg_inherits.inhdetachpending`: a concurrent detach was interrupted.
    pub detach_pending: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultInfo {
    pub name: QualifiedName,
    /// Starts of the intervals that rows in the DEFAULT partition fall in.
    pub row_intervals: Vec<i64>,
}

/// What the planners need to know about a partitioned table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    pub partitions: Vec<PartitionInfo>,
    pub default: Option<DefaultInfo>,
    /// The newest key in the table (premake for integer keys and for data
    /// ahead of the clock).
    pub max_key: Option<i64>,
    pub grants: Grants,
    /// A distributed table (`Policy::distribution`): what its remote tables are made of.
    pub remote: Option<RemoteDdl>,
}

/// How the table behind a foreign partition is made on its data node: the
/// parent's columns and indexes, as the coordinator's catalog has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RemoteDdl {
    /// Column definitions, as in `CREATE TABLE t (…)`.
    pub columns: String,
    /// Each index of the parent from `USING` on: `USING btree ("time")`.
    pub indexes: Vec<String>,
}

/// Who owns the parent and who may do what on it: copied to each new
/// partition, so loading a leaf directly needs no more rights than loading
/// the parent.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    pub owner: String,
    pub current_user: String,
    /// `aclitem` texts, e.g. `loader=arw/owner`, `=r/owner` (PUBLIC).
    pub acl: Vec<String>,
}
