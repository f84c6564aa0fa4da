//! Server-wide rules: checkpoints forced by WAL volume, the settings that
//! matter for ingestion, and the round trip between loader and server.

use std::collections::BTreeMap;

use super::{Evidence, Finding, Severity, human_bytes};

/// Checkpoint figures from `pg_stat_bgwriter`, `pg_stat_wal` and the settings.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointFacts {
    pub timed: i64,
    pub requested: i64,
    /// When the bgwriter statistics start, for the evidence.
    pub since: String,
    pub max_wal_size_bytes: i64,
    pub checkpoint_timeout_s: f64,
    pub completion_target: f64,
    /// WAL bytes per second: the higher of the average since the WAL
    /// statistics start and a sample taken while the doctor ran.
    pub wal_bytes_per_s: f64,
}

/// The `max_wal_size` at which checkpoints at this WAL rate come from
/// `checkpoint_timeout` instead of WAL volume: the server starts a checkpoint
/// once WAL since the last one exceeds about max_wal_size / (1 +
/// checkpoint_completion_target). Rounded up to whole 256 MB below 4 GB,
/// whole GB above.
pub fn max_wal_size_for_timed(f: &CheckpointFacts) -> i64 {
    let need = f.wal_bytes_per_s * f.checkpoint_timeout_s * (1.0 + f.completion_target);
    let mb = (need / 1048576.0).ceil() as u64;
    let mb = if mb <= 4096 { mb.div_ceil(256) * 256 } else { mb.div_ceil(1024) * 1024 };
    mb.max(256) as i64 * 1048576
}

/// `2GB` / `768MB`, as a setting value.
pub fn setting_size(bytes: i64) -> String {
    let mb = bytes / 1048576;
    if mb % 1024 == 0 { format!("{}GB", mb / 1024) } else { format!("{mb}MB") }
}

pub fn checkpoints(f: &CheckpointFacts) -> Option<Finding> {
    let want = max_wal_size_for_timed(f);
    if f.requested < 2 || f.requested <= f.timed || want <= f.max_wal_size_bytes {
        return None;
    }
    Some(Finding {
        kind: "checkpoints_by_wal",
        severity: Severity::Warning,
        object: "max_wal_size".into(),
        summary: format!(
            "{} of {} checkpoints were forced by WAL volume (\"checkpoints are occurring too frequently\"): each one rewrites full pages into the WAL again",
            f.requested,
            f.requested + f.timed
        ),
        evidence: vec![
            Evidence::new(
                "pg_stat_bgwriter",
                format!("checkpoints_req = {}, checkpoints_timed = {} since {}", f.requested, f.timed, f.since),
            ),
            Evidence::new(
                "pg_stat_wal, pg_current_wal_lsn()",
                format!(
                    "WAL written at {}/s; at that rate {} s of checkpoint_timeout need max_wal_size {} (now {}, checkpoint_completion_target {}); pg_wal needs that much free disk",
                    human_bytes(f.wal_bytes_per_s as i64),
                    f.checkpoint_timeout_s,
                    setting_size(want),
                    setting_size(f.max_wal_size_bytes),
                    f.completion_target
                ),
            ),
        ],
        fix: vec![format!("ALTER SYSTEM SET max_wal_size = '{}';", setting_size(want)), "SELECT pg_reload_conf();".into()],
    })
}

/// `ALTER SYSTEM SET …` and the reload (or restart) it needs.
fn set(name: &str, value: &str, restart: bool) -> Vec<String> {
    let apply = if restart { "-- then restart the server (this setting needs it)" } else { "SELECT pg_reload_conf();" };
    vec![format!("ALTER SYSTEM SET {name} = '{value}';"), apply.into()]
}

/// Settings as `pg_settings` shows them: name to (setting, unit).
pub type Settings = BTreeMap<String, (String, Option<String>)>;

/// A setting's value in bytes, for memory and size settings.
pub fn bytes_of(settings: &Settings, name: &str) -> Option<i64> {
    let (v, unit) = settings.get(name)?;
    let n: i64 = v.parse().ok()?;
    let scale = match unit.as_deref() {
        Some("B") => 1,
        Some("kB") => 1024,
        Some("8kB") => 8192,
        Some("MB") => 1048576,
        Some("16MB") => 16 * 1048576,
        Some("GB") => 1073741824,
        _ => return None,
    };
    Some(n * scale)
}

fn value<'a>(settings: &'a Settings, name: &str) -> Option<&'a str> {
    settings.get(name).map(|(v, _)| v.as_str())
}

/// The largest number of relations (partitions and their indexes) one
/// statement on a partitioned table may lock, and the table.
#[derive(Debug, Clone, PartialEq)]
pub struct LockDemand {
    pub table: String,
    pub relations: i64,
}

/// Rules over the settings that matter for ingestion.
pub fn settings(s: &Settings, locks: Option<&LockDemand>) -> Vec<Finding> {
    let mut out = Vec::new();
    let finding = |kind, severity, object: &str, summary: String, detail: String, fix| Finding {
        kind,
        severity,
        object: object.to_owned(),
        summary,
        evidence: vec![Evidence::new("pg_settings", detail)],
        fix,
    };
    if value(s, "full_page_writes") == Some("on") && value(s, "wal_compression") == Some("off") {
        out.push(finding(
            "setting",
            Severity::Info,
            "wal_compression",
            "full-page images after each checkpoint go into the WAL uncompressed".into(),
            "full_page_writes = on, wal_compression = off".into(),
            set("wal_compression", "on", false),
        ));
    }
    if value(s, "synchronous_commit") == Some("on") {
        out.push(finding(
            "setting",
            Severity::Info,
            "synchronous_commit",
            "every commit waits for its WAL flush; harmless for chute's large batches, costly for row-by-row writers".into(),
            "synchronous_commit = on".into(),
            vec!["ALTER ROLE CURRENT_USER SET synchronous_commit = 'off';  -- for the loading role only: a crash may lose the last commits, never corrupts".into()],
        ));
    }
    if let Some(b) = bytes_of(s, "maintenance_work_mem")
        && b < 256 * 1048576
    {
        out.push(finding(
            "setting",
            Severity::Info,
            "maintenance_work_mem",
            "index builds (migrate, new partitions' indexes) and vacuum run with little memory".into(),
            format!("maintenance_work_mem = {}", human_bytes(b)),
            set("maintenance_work_mem", "1GB", false),
        ));
    }
    if let Some(b) = bytes_of(s, "shared_buffers")
        && b <= 128 * 1048576
    {
        out.push(finding(
            "setting",
            Severity::Info,
            "shared_buffers",
            "shared_buffers is at its default; the btree right edges of busy partitions compete for 128 MB".into(),
            format!("shared_buffers = {} (about a quarter of the server's memory is usual)", human_bytes(b)),
            set("shared_buffers", "2GB", true),
        ));
    }
    if value(s, "autovacuum") == Some("off") {
        out.push(finding(
            "setting",
            Severity::Warning,
            "autovacuum",
            "autovacuum is off: append-only partitions are never frozen until an anti-wraparound vacuum rewrites them all at once".into(),
            "autovacuum = off".into(),
            set("autovacuum", "on", false),
        ));
    } else if value(s, "autovacuum_vacuum_insert_threshold") == Some("-1") {
        out.push(finding(
            "setting",
            Severity::Warning,
            "autovacuum_vacuum_insert_threshold",
            "inserts never trigger autovacuum: append-only partitions keep no visibility map and freeze all at once later".into(),
            "autovacuum_vacuum_insert_threshold = -1".into(),
            set("autovacuum_vacuum_insert_threshold", "1000", false),
        ));
    }
    if let (Some(d), Some(per_tx)) = (locks, value(s, "max_locks_per_transaction").and_then(|v| v.parse::<i64>().ok())) {
        let conns = value(s, "max_connections").and_then(|v| v.parse::<i64>().ok()).unwrap_or(100)
            + value(s, "max_prepared_transactions").and_then(|v| v.parse::<i64>().ok()).unwrap_or(0);
        if d.relations > per_tx {
            let severity = if d.relations > per_tx * conns { Severity::Warning } else { Severity::Info };
            let want = (d.relations as u64).next_power_of_two().max(64);
            out.push(finding(
                "setting",
                severity,
                "max_locks_per_transaction",
                format!(
                    "a statement that reads every partition of {} locks {} relations, more than max_locks_per_transaction ({per_tx}) per transaction",
                    d.table, d.relations
                ),
                format!(
                    "max_locks_per_transaction = {per_tx}, shared lock table {} entries (x {} connections); pg_inherits, pg_index: {} partitions and indexes",
                    per_tx * conns,
                    conns,
                    d.relations
                ),
                set("max_locks_per_transaction", &want.to_string(), true),
            ));
        }
    }
    out
}

/// The loader's round trip and what it costs per batch: each batch waits
/// about three round trips (COPY start, end, commit) on top of its bytes.
pub fn round_trip(rtt_ms: f64, batch_mb: usize, server: &str) -> Option<Finding> {
    // A COPY stream into one server typically takes 50-100 MB/s.
    let send_ms = batch_mb as f64 / 100.0 * 1000.0;
    let wait_ms = 3.0 * rtt_ms;
    let share = wait_ms / (wait_ms + send_ms);
    if share < 0.05 {
        return None;
    }
    let want_mb = ((wait_ms / 0.05 - wait_ms) / 1000.0 * 100.0).ceil() as usize;
    Some(Finding {
        kind: "round_trip",
        severity: if share >= 0.20 { Severity::Warning } else { Severity::Info },
        object: server.to_owned(),
        summary: format!(
            "the round trip to the server is {rtt_ms:.2} ms: {:.0}% of each {batch_mb} MiB batch is spent waiting",
            share * 100.0
        ),
        evidence: vec![Evidence::new(
            "measured (SELECT 1 from this host)",
            format!(
                "fastest of 21 round trips {rtt_ms:.2} ms; 3 per batch = {wait_ms:.1} ms against {send_ms:.0} ms to send {batch_mb} MiB at 100 MB/s"
            ),
        )],
        fix: vec![format!("run the loader next to the database, or load with --batch-mb {want_mb} and more --workers")],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> CheckpointFacts {
        CheckpointFacts {
            timed: 1,
            requested: 10,
            since: "x".into(),
            max_wal_size_bytes: 32 * 1048576,
            checkpoint_timeout_s: 300.0,
            completion_target: 0.9,
            wal_bytes_per_s: 10.0 * 1048576.0,
        }
    }

    #[test]
    fn wal_size_makes_checkpoints_timed_at_the_observed_rate() {
        // 10 MiB/s x 300 s x 1.9 = 5700 MiB, rounded up to 6 GB.
        assert_eq!(max_wal_size_for_timed(&facts()), 6 * 1073741824);
        let f = checkpoints(&facts()).unwrap();
        assert_eq!(f.fix[0], "ALTER SYSTEM SET max_wal_size = '6GB';");
        let fixed = CheckpointFacts { max_wal_size_bytes: 6 * 1073741824, ..facts() };
        assert!(checkpoints(&fixed).is_none(), "fixed once max_wal_size is large enough");
        let timed = CheckpointFacts { timed: 20, ..facts() };
        assert!(checkpoints(&timed).is_none());
    }

    #[test]
    fn small_sizes_round_to_256_mb() {
        let f = CheckpointFacts { wal_bytes_per_s: 100_000.0, ..facts() };
        assert_eq!(setting_size(max_wal_size_for_timed(&f)), "256MB");
    }

    #[test]
    fn lock_demand_against_max_locks() {
        let mut s = Settings::new();
        s.insert("max_locks_per_transaction".into(), ("64".into(), None));
        s.insert("max_connections".into(), ("2".into(), None));
        let d = LockDemand { table: "t".into(), relations: 400 };
        let f = settings(&s, Some(&d));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].severity, Severity::Warning);
        assert_eq!(f[0].fix[0], "ALTER SYSTEM SET max_locks_per_transaction = '512';");
        assert!(settings(&s, Some(&LockDemand { table: "t".into(), relations: 60 })).is_empty());
    }

    #[test]
    fn round_trip_cost_per_batch() {
        assert!(round_trip(0.5, 4, "s").is_none());
        assert_eq!(round_trip(2.0, 4, "s").unwrap().severity, Severity::Info);
        let f = round_trip(20.0, 4, "s").unwrap();
        assert_eq!(f.severity, Severity::Warning);
    }
}
