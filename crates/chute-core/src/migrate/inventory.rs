//! What a migration does to each object that hangs on the table, one line
//! each, for `chute migrate --dry-run`: the plan's SQL says how, these lines
//! say what becomes of every constraint, index, trigger, grant and
//! row-level security policy an application relies on, including those
//! chute leaves alone.

use super::{Facts, Names};
use crate::partman::Policy;

/// One line per object of `facts.table`, as the swap and the split treat it.
/// `extend`: the primary key gains the partition key (`--extend-primary-key`).
pub fn lines(facts: &Facts, names: &Names, policy: &Policy, extend: bool) -> Vec<String> {
    let t = &facts.table;
    let mut out = Vec::new();
    if let (Some(pk), Some(name)) = (&facts.primary_key, &facts.primary_key_name) {
        let cols = if extend { format!("({}, {})", pk.join(", "), policy.key) } else { format!("({})", pk.join(", ")) };
        out.push(format!(
            "primary key {name} ({}): made on the new parent as {cols} under the same name; the old table's is renamed {} and goes with it",
            pk.join(", "),
            names.old_index(name)
        ));
    }
    for (name, cols) in &facts.unique {
        out.push(format!("unique index {name} ({}): made on the new parent under the same name, on every partition too", cols.join(", ")));
    }
    for (name, def) in &facts.plain_indexes {
        out.push(format!("index {name} ({}): made on the new parent under the same name, on every partition too", def.trim()));
    }
    for (name, def) in &facts.checks {
        out.push(format!("check constraint {name} ({def}): copied to the new parent (LIKE … INCLUDING ALL), so every partition has it"));
    }
    for fk in &facts.foreign_keys {
        out.push(format!(
            "foreign key {} ({}): added to the new parent while it is empty (no scan); the old table's own becomes its \
             partition's (no scan); the split's leaves get it NOT VALID, then VALIDATE (writes continue)",
            fk.name, fk.definition
        ));
    }
    for fk in &facts.referencing_fks {
        out.push(format!("foreign key {fk} (pointing at {t}): refused, see the fix"));
    }
    for tr in &facts.triggers {
        out.push(format!("trigger {tr}: refused, see the fix"));
    }
    let grants: Vec<&str> = facts.grants.acl.iter().map(String::as_str).collect();
    out.push(if grants.is_empty() {
        format!("grants: none beyond the owner {}; the new parent and every partition get the same owner", facts.grants.owner)
    } else {
        format!(
            "grants ({}): copied to the new parent and to every partition chute makes, with the owner {}",
            grants.join(", "),
            facts.grants.owner
        )
    });
    let rls = &facts.row_security;
    if rls.enabled || rls.forced || !rls.policies.is_empty() {
        out.push(format!(
            "row-level security ({}{}): the same on the new parent",
            if rls.enabled { "enabled" } else { "disabled" },
            if rls.forced { ", forced for the owner" } else { "" }
        ));
    } else {
        out.push("row-level security: off, and no policies".into());
    }
    for p in &rls.policies {
        out.push(format!(
            "policy {} ({} {} to {}): made on the new parent with the same USING and WITH CHECK",
            p.name,
            if p.permissive { "permissive" } else { "restrictive" },
            p.command,
            p.roles.join(", ")
        ));
    }
    for (view, _) in &facts.views {
        out.push(format!("view {view}: made again with the same definition, reading the new parent"));
    }
    for (seq, col) in &facts.owned_sequences {
        out.push(format!("sequence {seq} (of {col}): handed over to the new parent's column"));
    }
    for c in &facts.identity_columns {
        out.push(format!("identity column {c}: the new parent's sequence goes on from the old one's value"));
    }
    if facts.replica_identity == 'f' {
        out.push("replica identity FULL: kept on the new parent".into());
    }
    if facts.comment.is_some() {
        out.push("table comment: copied to the new parent".into());
    }
    if !policy.storage.is_empty() {
        out.push(format!("storage parameters ({}): every partition gets them", policy.storage.join(", ")));
    }
    out.push(format!("keys before the oldest interval: in {} (MINVALUE) after the split, as in the old table before it", names.early));
    out
}
