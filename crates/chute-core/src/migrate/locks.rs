//! The split's lock footprint against the server's lock table.
//!
//! PostgreSQL keeps the locks of every session (beyond 16 "fast path" ones
//! each) in one shared table of `max_locks_per_transaction` times the
//! backend slots and `max_prepared_transactions` entries. When it is full, every session
//! that needs one more lock fails with "out of shared memory" (SQLSTATE
//! 53200), the application's included. A transaction that creates, attaches
//! or writes into a partition holds a lock on it and on each of its indexes
//! until it ends, so one transaction over a year of daily partitions takes
//! thousands: on a server with the default 64, the split used to fail and
//! take the application's writes with it.
//!
//! So the split takes at most a quarter of the table in any one
//! transaction ([`LockTable::budget`]), leaving the rest to the application:
//! the leaves are made a batch at a time, copy batches shrink when they touch
//! too many leaves (the engine measures each batch's locks), and the flatten
//! moves a bounded number of leaves per step. What cannot be cut smaller is
//! the cutover, which attaches every leaf at once (one lock each): it is
//! estimated before the migration starts, and a table whose split would not
//! fit is refused with the setting that makes it fit.

use super::Problem;
use crate::ident::QualifiedName;

/// The server's lock table, as its settings size it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct LockTable {
    pub max_locks_per_transaction: i64,
    /// What the table is sized for: the sum of `max_connections`,
    /// `autovacuum_max_workers`, 1, `max_worker_processes` and
    /// `max_wal_senders` (PostgreSQL's MaxBackends), and
    /// `max_prepared_transactions`.
    pub slots: i64,
}

impl LockTable {
    /// Entries in the shared lock table.
    pub fn capacity(&self) -> i64 {
        self.max_locks_per_transaction * self.slots
    }

    /// The most one transaction of the split may hold: a quarter of the
    /// table, so the application keeps three quarters.
    pub fn budget(&self) -> i64 {
        self.capacity() / 4
    }

    /// The `max_locks_per_transaction` whose budget holds `locks`, rounded up
    /// to a multiple of 32.
    pub fn setting_for(&self, locks: i64) -> i64 {
        let exact = (4 * locks + self.slots - 1) / self.slots.max(1);
        (exact + 31) / 32 * 32
    }
}

/// Locks one new leaf holds in the transaction that makes it: the table,
/// its TOAST table and that one's index (when the table has columns that
/// can be toasted), and each index.
pub fn leaf_locks(indexes: i64, toast: bool) -> i64 {
    1 + indexes + if toast { 2 } else { 0 }
}

/// The cutover's locks: one per leaf (attaching the staging parent locks
/// every partition under it), the old partition and the partition for older
/// keys with their indexes, and the parents, functions and catalog rows.
pub fn cutover_locks(leaves: usize, per_leaf: i64) -> i64 {
    leaves as i64 + 3 * per_leaf + 32
}

/// Leaves one setup transaction makes (each holds `per_leaf` locks and a
/// few more for its CHECK and its attach), at most 64.
pub fn leaves_per_setup_step(budget: i64, per_leaf: i64) -> usize {
    (budget / (per_leaf + 4)).clamp(1, 64) as usize
}

/// Leaves one flatten step may move: the step re-attaches the staging
/// parent (a lock per leaf still under it) and moves each leaf with its
/// indexes.
pub fn flatten_cap(budget: i64, remaining: usize, per_leaf: i64) -> usize {
    ((budget - remaining as i64 - 32) / (per_leaf + 4)).clamp(1, 256) as usize
}

/// Why the split of `table` into `leaves` leaves of `per_leaf` locks each
/// cannot run on this server, if it cannot; `interval` (before the swap,
/// when it can still be chosen) adds the other way out.
pub fn check(table: &QualifiedName, lt: LockTable, leaves: usize, per_leaf: i64, interval: Option<&str>) -> Option<Problem> {
    let need = cutover_locks(leaves, per_leaf);
    if need <= lt.budget() {
        return None;
    }
    let setting = lt.setting_for(need);
    let wider = match interval {
        Some(i) => format!(", or partition by a wider --interval than {i} (fewer leaves, fewer locks)"),
        None => String::new(),
    };
    Some(Problem {
        what: format!(
            "the split of {table} attaches its {leaves} interval partitions in one transaction, about {need} locks; this server's lock table \
             holds {} (max_locks_per_transaction {} x {} connection and worker slots) and chute takes at most a quarter of it ({}) in one \
             transaction, so that the application's sessions never run out of locks (\"out of shared memory\")",
            lt.capacity(),
            lt.max_locks_per_transaction,
            lt.slots,
            lt.budget()
        ),
        fix: format!(
            "raise max_locks_per_transaction to at least {setting} (ALTER SYSTEM SET max_locks_per_transaction = {setting}; it takes a \
             restart of PostgreSQL){wider}"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// PostgreSQL 15's defaults: 64 locks, 100 connections, 3 autovacuum
    /// workers and their launcher, 8 worker processes, 10 WAL senders, no
    /// prepared transactions.
    const DEFAULTS: LockTable = LockTable { max_locks_per_transaction: 64, slots: 100 + 3 + 1 + 8 + 10 };

    #[test]
    fn a_year_of_daily_leaves_fits_the_default_settings_and_thirty_years_do_not() {
        let t = QualifiedName::new("public", "orders");
        assert_eq!(DEFAULTS.capacity(), 7808);
        assert_eq!(DEFAULTS.budget(), 1952);
        // orders: three indexes and a TOAST table.
        let per_leaf = leaf_locks(3, true);
        assert_eq!(per_leaf, 6);
        assert!(check(&t, DEFAULTS, 367, per_leaf, Some("1d")).is_none());
        let p = check(&t, DEFAULTS, 30 * 366, per_leaf, Some("1d")).expect("refused");
        assert!(p.what.contains("10980 interval partitions") && p.what.contains("7808"), "{p:?}");
        let setting = DEFAULTS.setting_for(cutover_locks(30 * 366, per_leaf));
        assert!(p.fix.contains(&format!("max_locks_per_transaction = {setting}")) && p.fix.contains("--interval than 1d"), "{p:?}");
        // The setting it names is enough, and 32 less would not be.
        let raised = LockTable { max_locks_per_transaction: setting, ..DEFAULTS };
        assert!(check(&t, raised, 30 * 366, per_leaf, None).is_none());
        let short = LockTable { max_locks_per_transaction: setting - 32, ..DEFAULTS };
        assert!(check(&t, short, 30 * 366, per_leaf, None).is_some());
    }

    #[test]
    fn batches_stay_within_the_budget() {
        let per_leaf = leaf_locks(3, true);
        let n = leaves_per_setup_step(DEFAULTS.budget(), per_leaf);
        assert_eq!(n, 64);
        assert!(n as i64 * (per_leaf + 4) <= DEFAULTS.budget());
        let tiny = LockTable { max_locks_per_transaction: 10, slots: 20 };
        assert_eq!(leaves_per_setup_step(tiny.budget(), per_leaf), 5);
        // A flatten step re-attaches what is left: fewer leaves move when more remain.
        assert!(flatten_cap(DEFAULTS.budget(), 1500, per_leaf) < flatten_cap(DEFAULTS.budget(), 100, per_leaf));
        assert_eq!(flatten_cap(DEFAULTS.budget(), 5000, per_leaf), 1, "never zero");
    }
}
