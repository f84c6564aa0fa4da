//! Settings as the front end in use names them.
//!
//! The engine's messages often say what to change ("raise the memory
//! budget", "run with backfill off"). It never writes a flag's text for
//! that: a setting is a [`Setting`], and how it is shown is the front end's
//! choice, installed once when it starts ([`name_settings_with`]): the CLI
//! shows `--memory-mb`, the Python package `memory_mb=`, and a Rust program
//! that installs nothing sees the field of the spec it set
//! (`memory_budget`). So the engine's errors name what is wrong, and the
//! front end adds the name its user typed.

use std::fmt;
use std::sync::OnceLock;

/// A setting of a load (or of a table's policy) that a message can point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Setting {
    /// `LoadSpec::memory_budget`.
    MemoryBudget,
    /// `LoadSpec::backfill`.
    Backfill,
    /// `LoadSpec::retry_for`.
    RetryFor,
    /// `LoadSpec::atomic`.
    Atomic,
    /// `LoadSpec::wait`.
    Wait,
    /// `LoadSpec::load_id`.
    LoadId,
    /// `LoadSpec::columns`.
    Columns,
    /// The input format (the front end's choice of `Input`).
    Format,
    /// `LoadSpec::via_parent`.
    ViaParent,
    /// `LoadSpec::no_create_partitions`.
    NoCreatePartitions,
    /// `LoadSpec::tsbs_schema`.
    Schema,
    /// A table policy's `max_future`.
    MaxFuture,
    /// `LoadSpec::on_conflict` (its action), or a table's upsert setting.
    OnConflict,
    /// The conflict key of an upsert (`OnConflict::key`).
    ConflictKey,
    /// The columns an upsert overwrites (`OnConflict::update_columns`).
    UpdateColumns,
    /// The condition of an upsert's update (`OnConflict::update_if`).
    UpdateIf,
    /// `LoadSpec::parse_threads`.
    ParseThreads,
    /// `LoadSpec::workers`.
    Workers,
    /// `LoadSpec::batch_bytes`.
    BatchBytes,
    /// `LoadSpec::batch_rows`.
    BatchRows,
    /// `LoadSpec::chunk_bytes`.
    ChunkBytes,
    /// `LoadSpec::lock_timeout`.
    LockTimeout,
    /// `LoadSpec::backfill_after`.
    BackfillAfter,
    /// `LoadSpec::flush_every`.
    FlushEvery,
    /// `LoadSpec::ignore_unknown`.
    IgnoreUnknown,
    /// `LoadSpec::new_partitions` (its counts).
    MaxNewPartitions,
    /// `LoadSpec::new_partitions.max_age`.
    MaxAge,
}

impl Setting {
    /// The engine's own name: the field a Rust program sets.
    pub fn field(self) -> &'static str {
        match self {
            Setting::MemoryBudget => "memory_budget",
            Setting::Backfill => "backfill",
            Setting::RetryFor => "retry_for",
            Setting::Atomic => "atomic",
            Setting::Wait => "wait",
            Setting::LoadId => "load_id",
            Setting::Columns => "columns",
            Setting::Format => "format",
            Setting::ViaParent => "via_parent",
            Setting::NoCreatePartitions => "no_create_partitions",
            Setting::Schema => "tsbs_schema",
            Setting::MaxFuture => "max_future",
            Setting::OnConflict => "on_conflict",
            Setting::ConflictKey => "on_conflict.key",
            Setting::UpdateColumns => "on_conflict.update_columns",
            Setting::UpdateIf => "on_conflict.update_if",
            Setting::ParseThreads => "parse_threads",
            Setting::Workers => "workers",
            Setting::BatchBytes => "batch_bytes",
            Setting::BatchRows => "batch_rows",
            Setting::ChunkBytes => "chunk_bytes",
            Setting::LockTimeout => "lock_timeout",
            Setting::BackfillAfter => "backfill_after",
            Setting::FlushEvery => "flush_every",
            Setting::IgnoreUnknown => "ignore_unknown",
            Setting::MaxNewPartitions => "new_partitions",
            Setting::MaxAge => "new_partitions.max_age",
        }
    }

    /// The setting with a value, as a user would write it ("--backfill off").
    pub fn with(self, value: &'static str) -> Named {
        Named { setting: self, value: Some(value) }
    }
}

/// How a front end names a setting, with the value when one is given.
pub type Naming = fn(Setting, Option<&str>) -> String;

static NAMING: OnceLock<Naming> = OnceLock::new();

/// Installs the front end's naming; the first call wins (one process has one front end).
pub fn name_settings_with(naming: Naming) {
    let _ = NAMING.set(naming);
}

fn name(setting: Setting, value: Option<&str>) -> String {
    match NAMING.get() {
        Some(f) => f(setting, value),
        None => match value {
            Some(v) => format!("{} = {v}", setting.field()),
            None => setting.field().to_owned(),
        },
    }
}

impl fmt::Display for Setting {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&name(*self, None))
    }
}

/// A setting with its value, named by the front end.
#[derive(Debug, Clone, Copy)]
pub struct Named {
    setting: Setting,
    value: Option<&'static str>,
}

impl fmt::Display for Named {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&name(self.setting, self.value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_a_front_end_a_setting_is_named_by_its_field() {
        // (No test installs a naming: the process-wide one stays the default here.)
        assert_eq!(Setting::MemoryBudget.to_string(), "memory_budget");
        assert_eq!(Setting::Backfill.with("off").to_string(), "backfill = off");
    }
}
