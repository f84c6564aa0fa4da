//! The names chute gives the tables it makes for a policy: a partition per
//! interval, the hash children of a leaf, the DEFAULT partition. Each is
//! checked against PostgreSQL's 63-byte limit before any step is planned.

use super::interval::{MICROS_PER_DAY, Span, Unit, to_timestamp};
use super::plan::PlanError;
use super::policy::Policy;
use crate::ident::check_length;

/// The partition name for the interval starting at `from`: the parent's name,
/// `_p`, and the UTC start (integer keys: the start value).
pub fn partition_name(policy: &Policy, from: i64) -> Result<String, PlanError> {
    let base = &policy.parent.name;
    let name = match policy.interval {
        Span::Integer(_) => {
            if from < 0 {
                format!("{base}_pm{}", from.unsigned_abs())
            } else {
                format!("{base}_p{from}")
            }
        }
        Span::Time { unit, .. } => {
            let ts = to_timestamp(from)?;
            let utc_midnight = from.rem_euclid(MICROS_PER_DAY) == 0;
            let fmt = match unit {
                _ if !utc_midnight => "%Y%m%d_%H%M",
                Unit::Minutes | Unit::Hours => "%Y%m%d_%H%M",
                Unit::Days | Unit::Weeks => "%Y%m%d",
                Unit::Months => "%Y%m",
                Unit::Years => "%Y",
            };
            let fmt = if matches!(unit, Unit::Months | Unit::Years) && !first_of_month_utc(from)? { "%Y%m%d_%H%M" } else { fmt };
            format!("{base}_p{}", ts.strftime(fmt))
        }
    };
    check_length(&name)?;
    Ok(name)
}

fn first_of_month_utc(from: i64) -> Result<bool, PlanError> {
    Ok(to_timestamp(from)?.to_zoned(jiff::tz::TimeZone::UTC).day() == 1)
}

/// Names of the hash children of a leaf.
pub fn hash_child_name(leaf: &str, remainder: u32) -> Result<String, PlanError> {
    let name = format!("{leaf}_h{remainder}");
    check_length(&name)?;
    Ok(name)
}

pub fn default_name(policy: &Policy) -> Result<String, PlanError> {
    let name = format!("{}_default", policy.parent.name);
    check_length(&name)?;
    Ok(name)
}

/// Checks every name a policy will generate for partitions near `now`, so a
/// parent whose name is too long is refused before any DDL runs.
pub fn check_names(policy: &Policy, sample_start: i64) -> Result<(), PlanError> {
    let leaf = partition_name(policy, sample_start)?;
    if let Some(h) = &policy.hash {
        hash_child_name(&leaf, h.modulus - 1)?;
    }
    if policy.default_partition {
        default_name(policy)?;
    }
    Ok(())
}
