//! The server's own counters, read once a second: `pg_stat_database` for
//! the database, `pg_statio_user_tables` and `pg_stat_user_tables` summed
//! over every relation of the table's partition tree (`pg_partition_tree`),
//! `pg_statio_user_indexes` per index (a partition's index counts under its
//! partitioned parent index, `pg_partition_root`), and
//! `pg_current_wal_lsn()` for WAL bytes.
//!
//! Differences are taken per relation, so a tree whose leaves change under
//! a migration is followed exactly: a relation that appears (a new
//! partition, the split's staging leaves) counts from zero, one that is
//! dropped stops counting. The staging tree and the old partition of a
//! migration (`T_chute_split`, `T_chute_old`) are followed too, so the
//! migration's own reads show where they happen.

use std::collections::HashMap;

use chute_core::ident::QualifiedName;
use chute_core::migrate::Names;
use chute_engine::ConnectOptions;
use tokio_postgres::Client;

use super::SimError;

/// Counters of one moment.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    /// blks_read, blks_hit, xact_commit, blk_read_time (ms, as a whole number of µs).
    db: [i64; 4],
    /// Per table relation: heap read, heap hit, index read, index hit,
    /// toast read, toast hit, rows inserted, rows updated.
    tables: HashMap<u32, [i64; 8]>,
    /// Per index relation: its (root) index name, read, hit.
    indexes: HashMap<u32, (String, i64, i64)>,
    wal_lsn: u64,
    /// Leaf tables of the table's own tree.
    pub leaves: i64,
}

/// What happened between two readings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerDelta {
    pub db_blks_read: i64,
    pub db_blks_hit: i64,
    pub db_xact_commit: i64,
    /// Milliseconds spent reading blocks (track_io_timing; 0 when off).
    pub db_blk_read_ms: f64,
    pub heap_blks_read: i64,
    pub heap_blks_hit: i64,
    pub idx_blks_read: i64,
    pub idx_blks_hit: i64,
    pub toast_blks_read: i64,
    pub toast_blks_hit: i64,
    pub tup_ins: i64,
    pub tup_upd: i64,
    pub wal_bytes: i64,
    /// (index name, blocks read, blocks hit), by name.
    pub indexes: Vec<(String, i64, i64)>,
}

impl ServerDelta {
    pub fn table_blks_read(&self) -> i64 {
        self.heap_blks_read + self.idx_blks_read + self.toast_blks_read
    }

    pub fn table_blks_hit(&self) -> i64 {
        self.heap_blks_hit + self.idx_blks_hit + self.toast_blks_hit
    }
}

/// Which relations count: the table's tree, and a migration's old
/// partition and staging tree.
#[derive(Debug, Clone)]
pub struct Watch {
    names: [String; 3],
}

impl Watch {
    pub fn new(table: &QualifiedName) -> Result<Watch, SimError> {
        let n = Names::new(table).map_err(|e| SimError::Setup(e.to_string()))?;
        Ok(Watch { names: [table.quoted(), n.old.quoted(), n.staging.quoted()] })
    }
}

const TABLES_SQL: &str = "
WITH roots AS (SELECT to_regclass(r) AS oid FROM unnest($1::text[]) r),
     rels AS (SELECT oid FROM roots WHERE oid IS NOT NULL
              UNION SELECT t.relid FROM roots, pg_partition_tree(roots.oid) t WHERE roots.oid IS NOT NULL)
SELECT s.relid::oid, coalesce(s.heap_blks_read, 0), coalesce(s.heap_blks_hit, 0), coalesce(s.idx_blks_read, 0),
       coalesce(s.idx_blks_hit, 0), coalesce(s.toast_blks_read, 0), coalesce(s.toast_blks_hit, 0),
       coalesce(u.n_tup_ins, 0), coalesce(u.n_tup_upd, 0),
       (s.relid IN (SELECT t.relid FROM pg_partition_tree(to_regclass($1[1])) t WHERE t.isleaf)
        OR (s.relid = to_regclass($1[1]) AND (SELECT relkind FROM pg_class WHERE oid = s.relid) = 'r'))
FROM pg_statio_user_tables s JOIN pg_stat_user_tables u USING (relid)
WHERE s.relid IN (SELECT oid FROM rels)";

const INDEXES_SQL: &str = "
WITH roots AS (SELECT to_regclass(r) AS oid FROM unnest($1::text[]) r),
     rels AS (SELECT oid FROM roots WHERE oid IS NOT NULL
              UNION SELECT t.relid FROM roots, pg_partition_tree(roots.oid) t WHERE roots.oid IS NOT NULL)
SELECT i.indexrelid::oid, coalesce(pg_partition_root(i.indexrelid), i.indexrelid)::regclass::text,
       coalesce(i.idx_blks_read, 0), coalesce(i.idx_blks_hit, 0)
FROM pg_statio_user_indexes i WHERE i.relid IN (SELECT oid FROM rels)";

const DB_SQL: &str = "
SELECT blks_read, blks_hit, xact_commit, (blk_read_time * 1000)::int8, pg_current_wal_lsn()::text
FROM pg_stat_database WHERE datname = current_database()";

/// The sampler's own connection, made again when the server went away (a
/// restart during the run); remembers when it could not read.
pub struct Reader {
    options: ConnectOptions,
    watch: Watch,
    client: Client,
    /// Readings that failed, and the first failure.
    failed: usize,
    first_failure: Option<String>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("failed", &self.failed).finish_non_exhaustive()
    }
}

impl Reader {
    pub async fn connect(options: ConnectOptions, watch: Watch) -> Result<Reader, SimError> {
        let client = options.connect().await?;
        Ok(Reader { options, watch, client, failed: 0, first_failure: None })
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The connection, made again first if it was lost.
    pub async fn reconnected(&mut self) -> Result<&Client, SimError> {
        if self.client.is_closed() {
            self.client = self.options.connect().await?;
        }
        Ok(&self.client)
    }

    /// One reading; a lost connection is made again once before giving up.
    pub async fn read(&mut self) -> Result<Counters, SimError> {
        let result = match self.reconnected().await {
            Ok(_) => read(&self.client, &self.watch).await,
            Err(e) => Err(e),
        };
        if let Err(e) = &result {
            self.failed += 1;
            self.first_failure.get_or_insert_with(|| e.to_string());
        }
        result
    }

    /// A note when some readings failed.
    pub fn outages(&self) -> Option<String> {
        self.first_failure.as_ref().map(|e| {
            format!(
                "the server's counters could not be read {} time(s) (first: {e}); those windows show no server figures, and the next reading counts what happened meanwhile (unless the server's statistics were reset, as after a crash)",
                self.failed
            )
        })
    }
}

/// Reads every counter (three queries, each its own statistics snapshot).
pub async fn read(client: &Client, watch: &Watch) -> Result<Counters, SimError> {
    let names: Vec<&str> = watch.names.iter().map(String::as_str).collect();
    let db = client.query_one(DB_SQL, &[]).await.map_err(SimError::sql("reading pg_stat_database"))?;
    let mut c = Counters {
        db: [db.get(0), db.get(1), db.get(2), db.get(3)],
        wal_lsn: parse_lsn(db.get(4)).ok_or_else(|| SimError::Setup("the server gave an unreadable WAL position".into()))?,
        ..Counters::default()
    };
    for r in client.query(TABLES_SQL, &[&names]).await.map_err(SimError::sql("reading pg_statio_user_tables"))? {
        c.tables.insert(r.get(0), std::array::from_fn(|i| r.get(i + 1)));
        if r.get::<_, Option<bool>>(9) == Some(true) {
            c.leaves += 1;
        }
    }
    for r in client.query(INDEXES_SQL, &[&names]).await.map_err(SimError::sql("reading pg_statio_user_indexes"))? {
        c.indexes.insert(r.get(0), (r.get(1), r.get(2), r.get(3)));
    }
    Ok(c)
}

/// `16/B374D848` as a byte position.
pub fn parse_lsn(text: &str) -> Option<u64> {
    let (hi, lo) = text.split_once('/')?;
    Some((u64::from_str_radix(hi, 16).ok()? << 32) | u64::from_str_radix(lo, 16).ok()?)
}

/// What changed from `prev` to `cur`, relation by relation.
pub fn delta(prev: &Counters, cur: &Counters) -> ServerDelta {
    let mut t = [0i64; 8];
    for (relid, now) in &cur.tables {
        let before = prev.tables.get(relid).copied().unwrap_or_default();
        for i in 0..8 {
            // A counter never goes back; a relation dropped and its oid
            // reused would, and then counts from zero.
            let d = now[i] - before[i];
            t[i] += if d < 0 { now[i] } else { d };
        }
    }
    let mut by_name: HashMap<&str, (i64, i64)> = HashMap::new();
    for (relid, (name, read, hit)) in &cur.indexes {
        let (_, r0, h0) = prev.indexes.get(relid).cloned().unwrap_or_default();
        let e = by_name.entry(name).or_default();
        e.0 += if read < &r0 { *read } else { read - r0 };
        e.1 += if hit < &h0 { *hit } else { hit - h0 };
    }
    let mut indexes: Vec<(String, i64, i64)> = by_name.into_iter().map(|(n, (r, h))| (n.to_owned(), r, h)).collect();
    indexes.sort();
    ServerDelta {
        db_blks_read: cur.db[0] - prev.db[0],
        db_blks_hit: cur.db[1] - prev.db[1],
        db_xact_commit: cur.db[2] - prev.db[2],
        db_blk_read_ms: (cur.db[3] - prev.db[3]) as f64 / 1000.0,
        heap_blks_read: t[0],
        heap_blks_hit: t[1],
        idx_blks_read: t[2],
        idx_blks_hit: t[3],
        toast_blks_read: t[4],
        toast_blks_hit: t[5],
        tup_ins: t[6],
        tup_upd: t[7],
        wal_bytes: cur.wal_lsn.saturating_sub(prev.wal_lsn) as i64,
        indexes,
    }
}

/// Waits until none of `pids` is a server process any more: a backend
/// flushes its statistics before it leaves `pg_stat_activity`, so after
/// this the counters hold everything the pool's sessions did. Gives up
/// after `patience` and says how many were left.
pub async fn wait_for_exit(client: &Client, pids: &[i32], patience: std::time::Duration) -> Result<usize, SimError> {
    let deadline = std::time::Instant::now() + patience;
    loop {
        let left: i64 = client
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE pid = ANY($1)", &[&pids])
            .await
            .map_err(SimError::sql("waiting for the pool's sessions to end"))?
            .get(0);
        if left == 0 || std::time::Instant::now() >= deadline {
            return Ok(left as usize);
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lsns_read_as_bytes() {
        assert_eq!(parse_lsn("0/0"), Some(0));
        assert_eq!(parse_lsn("16/B374D848"), Some((0x16 << 32) | 0xB374_D848));
        assert_eq!(parse_lsn("nope"), None);
    }

    #[test]
    fn deltas_follow_relations_that_come_and_go() {
        let mut a = Counters { db: [10, 100, 5, 0], wal_lsn: 1000, ..Counters::default() };
        a.tables.insert(1, [5, 50, 1, 10, 0, 0, 100, 0]);
        a.tables.insert(2, [7, 70, 0, 0, 0, 0, 3, 3]);
        a.indexes.insert(11, ("orders_pkey".into(), 1, 10));
        let mut b = Counters { db: [15, 180, 9, 2500], wal_lsn: 5096, ..Counters::default() };
        b.tables.insert(1, [6, 60, 2, 12, 0, 0, 110, 4]); // +1 +10 +1 +2, 10 ins, 4 upd
        b.tables.insert(3, [1, 1, 0, 0, 0, 0, 2, 0]); // new: counts from zero
        // relation 2 was dropped: it counts no more
        b.indexes.insert(11, ("orders_pkey".into(), 3, 14));
        b.indexes.insert(12, ("orders_pkey".into(), 1, 1)); // a new partition's index under the same parent
        let d = delta(&a, &b);
        assert_eq!((d.db_blks_read, d.db_blks_hit, d.db_xact_commit), (5, 80, 4));
        assert_eq!(d.db_blk_read_ms, 2.5);
        assert_eq!((d.heap_blks_read, d.heap_blks_hit, d.idx_blks_read, d.idx_blks_hit), (2, 11, 1, 2));
        assert_eq!((d.tup_ins, d.tup_upd), (12, 4));
        assert_eq!(d.wal_bytes, 4096);
        assert_eq!(d.indexes, [("orders_pkey".to_owned(), 3, 5)]);
        assert_eq!(d.table_blks_read(), 3);
    }
}
