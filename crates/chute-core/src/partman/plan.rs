//! Plans: what the partition manager will do, as data.
//!
//! A planner returns a [`Plan`]; one executor in `chute-engine` runs it. A
//! plan can be printed (`--dry-run`), compared in tests and reasoned about
//! without a server. Each step says whether it may run inside a transaction:
//! `DETACH … CONCURRENTLY` and `FINALIZE` may not, so they are steps of their
//! own.

use std::fmt;

use super::interval::IntervalError;
use crate::ident::{IdentError, QualifiedName};

/// The most partitions one plan may create: beyond this the policy is
/// almost certainly a mistake (a 1-minute interval from 1970).
pub const MAX_NEW_PARTITIONS: usize = 20_000;

/// Why a planner made no plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Name(#[from] IdentError),
    #[error(transparent)]
    Interval(#[from] IntervalError),
    #[error("that would create {0} partitions at once (limit {MAX_NEW_PARTITIONS}): check --start, --interval and --premake")]
    TooMany(usize),
}

/// What a step does, for tests and summaries; the SQL is what runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StepKind {
    CreateParent {
        table: QualifiedName,
    },
    ConvertTable {
        table: QualifiedName,
    },
    StoreConfig {
        table: QualifiedName,
    },
    ForgetConfig {
        table: QualifiedName,
    },
    CreatePartition {
        name: QualifiedName,
        from: i64,
        to: i64,
        moves_default_rows: bool,
    },
    CreateDefault {
        name: QualifiedName,
    },
    DetachConcurrently {
        name: QualifiedName,
    },
    Detach {
        name: QualifiedName,
    },
    FinalizeDetach {
        name: QualifiedName,
    },
    DropPartition {
        name: QualifiedName,
    },
    MoveToSchema {
        name: QualifiedName,
        schema: String,
    },
    Undo {
        table: QualifiedName,
    },
    /// The table behind a foreign partition, made on its data node.
    CreateRemote {
        node: String,
        name: QualifiedName,
    },
    /// The table behind a foreign partition, dropped on its data node.
    DropRemote {
        node: String,
        name: QualifiedName,
    },
    /// A step of `chute migrate` (see `crate::migrate`); `phase` names it.
    Migrate {
        table: QualifiedName,
        phase: String,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Step {
    pub kind: StepKind,
    /// One line for people ("create partition x for [a, b)").
    pub description: String,
    pub sql: Vec<String>,
    /// Run inside BEGIN … COMMIT (all statements or none).
    pub transactional: bool,
    /// Run on this data node (a name in `chute.nodes`), not on the
    /// coordinator (scale-out: the remote table behind a foreign partition).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
}

/// An ordered list of steps plus notes for the user (things the planner
/// chose not to do and why).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Plan {
    pub steps: Vec<Step>,
    pub notes: Vec<String>,
}

impl Plan {
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    pub fn push(&mut self, kind: StepKind, description: impl Into<String>, sql: Vec<String>, transactional: bool) {
        self.steps.push(Step { kind, description: description.into(), sql, transactional, node: None });
    }

    /// A step that runs on data node `node` (see [`Step::node`]).
    pub fn push_on(&mut self, node: &str, kind: StepKind, description: impl Into<String>, sql: Vec<String>) {
        self.steps.push(Step { kind, description: description.into(), sql, transactional: true, node: Some(node.to_owned()) });
    }

    pub fn extend(&mut self, other: Plan) {
        self.steps.extend(other.steps);
        self.notes.extend(other.notes);
    }

    /// Partitions this plan creates.
    pub fn created(&self) -> impl Iterator<Item = &QualifiedName> {
        self.steps.iter().filter_map(|s| match &s.kind {
            StepKind::CreatePartition { name, .. } => Some(name),
            _ => None,
        })
    }
}

impl fmt::Display for Plan {
    /// The plan as a SQL script a person can read (and run with psql).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.steps.is_empty() {
            writeln!(f, "-- nothing to do")?;
        }
        for (i, step) in self.steps.iter().enumerate() {
            match &step.node {
                Some(node) => writeln!(f, "-- step {} (on data node {node}): {}", i + 1, step.description)?,
                None => writeln!(f, "-- step {}: {}", i + 1, step.description)?,
            }
            if step.transactional {
                writeln!(f, "BEGIN;")?;
            }
            for sql in &step.sql {
                writeln!(f, "{sql};")?;
            }
            if step.transactional {
                writeln!(f, "COMMIT;")?;
            }
        }
        for n in &self.notes {
            writeln!(f, "-- note: {n}")?;
        }
        Ok(())
    }
}
