//! Building a partition tree from the catalog's description: checking that
//! chute can route each key (types, collations, opclasses) and making each
//! node's dispatch (range bounds sorted for binary search, list values in a
//! map, hash slots by modulus and remainder).

use super::*;

pub(super) fn unsupported(table: &QualifiedName, reason: impl Into<String>) -> RouteError {
    RouteError::Unsupported { table: table.clone(), reason: reason.into() }
}

pub(super) fn invalid(partition: &QualifiedName, reason: impl Into<String>) -> RouteError {
    RouteError::InvalidBound { partition: partition.clone(), reason: reason.into() }
}

/// Checks that the client can route on this key, before any bound is read.
pub fn check_key(table: &QualifiedName, strategy: Strategy, key: &[KeyColumnSpec]) -> Result<(), RouteError> {
    if key.is_empty() {
        return Err(unsupported(table, "its partition key has no columns"));
    }
    if key.len() > PARTITION_MAX_KEYS {
        return Err(unsupported(table, format!("its partition key has {} columns, more than PostgreSQL allows", key.len())));
    }
    if strategy == Strategy::List && key.len() != 1 {
        return Err(unsupported(table, "a LIST key must have exactly one column"));
    }
    for col in key {
        check_key_column(table, strategy, col)?;
    }
    Ok(())
}

pub(super) fn check_key_column(table: &QualifiedName, strategy: Strategy, col: &KeyColumnSpec) -> Result<(), RouteError> {
    let name = &col.name;
    if col.position.is_none() {
        return Err(unsupported(table, format!("its partition key contains the expression {name}; only plain columns can be routed")));
    }
    if !col.default_opclass {
        return Err(unsupported(
            table,
            format!("key column {name:?} uses the operator class {}, not the default one for type {}", col.opclass, col.type_name),
        ));
    }
    let collatable = match strategy {
        Strategy::Hash => {
            if HashKind::from_type_oid(col.type_oid).is_none() {
                return Err(unsupported(table, format!("key column {name:?} has type {}, which the router cannot hash", col.type_name)));
            }
            Codec::from_type_oid(col.type_oid).is_some_and(|(_, collatable)| collatable)
        }
        Strategy::Range | Strategy::List => match Codec::from_type_oid(col.type_oid) {
            Some((_, collatable)) => collatable,
            None => {
                return Err(unsupported(table, format!("key column {name:?} has type {}, which the router cannot compare", col.type_name)));
            }
        },
    };
    if !collatable {
        return Ok(());
    }
    match (&col.collation, strategy) {
        (KeyCollation::Nondeterministic(c), _) => Err(unsupported(
            table,
            format!("key column {name:?} uses the nondeterministic collation {c:?}, whose equality only the server can compute"),
        )),
        (KeyCollation::C(_), _) | (KeyCollation::Deterministic(_), Strategy::List | Strategy::Hash) => Ok(()),
        (other, _) => Err(unsupported(
            table,
            format!(
                "{} key column {name:?} uses the collation {:?}, whose sort order only the server knows (only \"C\" and \"POSIX\" sort byte-wise)",
                strategy.sql(),
                other.name()
            ),
        )),
    }
}

/// The codec of a checked range or list key column.
pub(super) fn codec_of(table: &QualifiedName, col: &KeyColumnSpec) -> Result<Codec, RouteError> {
    Codec::from_type_oid(col.type_oid).map(|(codec, _)| codec).ok_or_else(|| unsupported(table, format!("type {}", col.type_name)))
}

pub(super) fn set_default(slot: &mut Option<Target>, partition: &QualifiedName, target: Target) -> Result<(), RouteError> {
    if slot.replace(target).is_some() {
        return Err(invalid(partition, "a second DEFAULT partition"));
    }
    Ok(())
}

pub(super) fn wrong_bound(spec: &TableSpec, p: &PartitionSpec) -> RouteError {
    invalid(&p.name, format!("{:?} is not a bound of a {}-partitioned table", p.bound, spec.strategy.sql()))
}

pub(super) type Built = (Dispatch, Option<Target>);

pub(super) fn range_dispatch(spec: &TableSpec, targets: &[Target]) -> Result<Built, RouteError> {
    let codecs = spec.key.iter().map(|c| codec_of(&spec.name, c)).collect::<Result<Vec<_>, _>>()?;
    let decode = |p: &PartitionSpec, datums: &[RangeDatum]| -> Result<Box<[Datum]>, RouteError> {
        if datums.len() != spec.key.len() {
            return Err(invalid(&p.name, format!("{} values for a key of {} columns", datums.len(), spec.key.len())));
        }
        datums
            .iter()
            .zip(&codecs)
            .zip(&spec.key)
            .map(|((d, codec), col)| match d {
                RangeDatum::MinValue => Ok(Datum::Min),
                RangeDatum::MaxValue => Ok(Datum::Max),
                RangeDatum::Value(wire) => Scalar::decode(*codec, wire)
                    .map(Datum::Value)
                    .ok_or_else(|| invalid(&p.name, format!("{wire:02x?} is not a binary {} value for {:?}", col.type_name, col.name))),
            })
            .collect()
    };
    let mut default = None;
    let mut parts = Vec::with_capacity(spec.partitions.len());
    for (p, &target) in spec.partitions.iter().zip(targets) {
        match &p.bound {
            BoundSpec::Default => set_default(&mut default, &p.name, target)?,
            BoundSpec::Range { from, to } => {
                let (lower, upper) = (decode(p, from)?, decode(p, to)?);
                if cmp_bounds(&lower, &upper) != Ordering::Less {
                    return Err(invalid(&p.name, "its lower bound is not below its upper bound"));
                }
                parts.push((lower, upper, target, &p.name));
            }
            _ => return Err(wrong_bound(spec, p)),
        }
    }
    parts.sort_by(|a, b| cmp_bounds(&a.0, &b.0));
    if let Some(w) = parts.windows(2).find(|w| cmp_bounds(&w[0].1, &w[1].0) == Ordering::Greater) {
        return Err(invalid(w[1].3, format!("it overlaps {}", w[0].3)));
    }
    let mut lowers = Vec::with_capacity(parts.len() * spec.key.len());
    let mut uppers = Vec::with_capacity(parts.len() * spec.key.len());
    let mut sorted_targets = Vec::with_capacity(parts.len());
    for (lower, upper, target, _) in parts {
        lowers.extend(lower.into_vec());
        uppers.extend(upper.into_vec());
        sorted_targets.push(target);
    }
    Ok((Dispatch::Range { codecs, lowers, uppers, targets: sorted_targets }, default))
}

pub(super) fn list_dispatch(spec: &TableSpec, targets: &[Target]) -> Result<Built, RouteError> {
    let col = &spec.key[0];
    let codec = codec_of(&spec.name, col)?;
    let mut default = None;
    let mut null = None;
    let mut entries: Vec<(Scalar, Target, &QualifiedName)> = Vec::new();
    for (p, &target) in spec.partitions.iter().zip(targets) {
        match &p.bound {
            BoundSpec::Default => set_default(&mut default, &p.name, target)?,
            BoundSpec::List(values) => {
                for v in values {
                    match v {
                        None if null.is_some() => return Err(invalid(&p.name, "NULL is listed by two partitions")),
                        None => null = Some(target),
                        Some(wire) => {
                            let s = Scalar::decode(codec, wire).ok_or_else(|| {
                                invalid(&p.name, format!("{wire:02x?} is not a binary {} value for {:?}", col.type_name, col.name))
                            })?;
                            entries.push((s, target, &p.name));
                        }
                    }
                }
            }
            _ => return Err(wrong_bound(spec, p)),
        }
    }
    entries.sort_by(|a, b| cmp_values(a.0.as_value(), b.0.as_value()));
    if let Some(w) = entries.windows(2).find(|w| cmp_values(w[0].0.as_value(), w[1].0.as_value()) == Ordering::Equal) {
        return Err(invalid(w[1].2, format!("it lists a value {} lists too", w[0].2)));
    }
    let (values, targets) = entries.into_iter().map(|(s, t, _)| (s, t)).unzip();
    Ok((Dispatch::List { codec, values, targets, null }, default))
}

pub(super) fn hash_dispatch(spec: &TableSpec, targets: &[Target]) -> Result<Dispatch, RouteError> {
    let kinds = spec
        .key
        .iter()
        .map(|c| HashKind::from_type_oid(c.type_oid).ok_or_else(|| unsupported(&spec.name, format!("type {}", c.type_name))))
        .collect::<Result<Vec<_>, _>>()?;
    let mut bounds = Vec::with_capacity(spec.partitions.len());
    for (p, &target) in spec.partitions.iter().zip(targets) {
        match p.bound {
            BoundSpec::Hash { modulus, remainder } if modulus > 0 && remainder < modulus => {
                bounds.push((modulus, remainder, target, &p.name))
            }
            BoundSpec::Hash { modulus, remainder } => {
                return Err(invalid(&p.name, format!("modulus {modulus}, remainder {remainder}")));
            }
            BoundSpec::Default => return Err(invalid(&p.name, "a hash-partitioned table cannot have a DEFAULT partition")),
            _ => return Err(wrong_bound(spec, p)),
        }
    }
    let greatest = bounds.iter().map(|b| b.0).max().unwrap_or(1);
    if let Some(b) = bounds.iter().find(|b| !greatest.is_multiple_of(b.0)) {
        return Err(invalid(b.3, format!("modulus {} does not divide the greatest modulus {greatest}", b.0)));
    }
    let mut moduli: Vec<u64> = bounds.iter().map(|b| b.0).collect();
    moduli.sort_unstable();
    moduli.dedup();
    if moduli.iter().sum::<u64>() > MAX_HASH_SLOTS {
        return Err(unsupported(&spec.name, format!("hash moduli up to {greatest} need too large a routing table")));
    }
    let mut groups: Vec<(u64, Vec<Option<Target>>)> = moduli.iter().map(|&m| (m, vec![None; m as usize])).collect();
    for (modulus, remainder, target, name) in bounds {
        let Some((_, slots)) = groups.iter_mut().find(|g| g.0 == modulus) else { continue };
        if slots[remainder as usize].replace(target).is_some() {
            return Err(invalid(name, format!("two partitions have modulus {modulus}, remainder {remainder}")));
        }
    }
    Ok(Dispatch::Hash { kinds, greatest, groups })
}
