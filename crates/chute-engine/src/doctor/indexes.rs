//! Reads every top-level index with its scans, size and the writes to its
//! table, for the pure index rules in `chute_core::doctor::indexes`.

use chute_core::doctor::indexes::{IndexFacts, Watch, judge};
use chute_core::ident::QualifiedName;
use tokio_postgres::Client;

use super::{DoctorError, USER_SCHEMAS};

/// Indexes that are not a partition of another index, on the tables in
/// `tables` (every user table when `None`). A partitioned index sums its
/// partitions' scans and sizes, and its table its partitions' writes.
pub async fn read(client: &Client, tables: Option<&[u32]>) -> Result<Vec<IndexFacts>, DoctorError> {
    let sql = format!(
        "SELECT i.indexrelid, n.nspname::text, c.relname::text, tn.nspname::text, t.relname::text,
                pg_get_indexdef(i.indexrelid), am.amname::text,
                ARRAY(SELECT i.indkey[k]::text || '/' || i.indclass[k]::text || '/' || i.indcollation[k]::text || '/' || i.indoption[k]::text
                      FROM generate_series(0, i.indnkeyatts - 1) k ORDER BY k),
                ARRAY(SELECT i.indkey[k]::text FROM generate_series(i.indnkeyatts, i.indnatts - 1) k ORDER BY k),
                pg_get_expr(i.indexprs, i.indrelid), pg_get_expr(i.indpred, i.indrelid),
                i.indisprimary, i.indisunique,
                (SELECT con.conname::text FROM pg_constraint con WHERE con.conindid = i.indexrelid ORDER BY con.contype <> 'f' DESC LIMIT 1),
                (SELECT f.conname::text FROM pg_constraint f
                  WHERE f.conrelid = i.indrelid AND f.contype = 'f' AND i.indnkeyatts >= cardinality(f.conkey)
                    AND (SELECT array_agg(x ORDER BY x) FROM unnest(f.conkey) x)
                      = (SELECT array_agg(i.indkey[k] ORDER BY i.indkey[k]) FROM generate_series(0, cardinality(f.conkey) - 1) k)
                  LIMIT 1),
                c.relkind = 'I',
                (SELECT coalesce(sum(s.idx_scan), 0)::int8 FROM (SELECT i.indexrelid::regclass AS relid UNION SELECT relid FROM pg_partition_tree(i.indexrelid)) pt JOIN pg_stat_all_indexes s ON s.indexrelid = pt.relid),
                (SELECT coalesce(sum(pg_relation_size(pt.relid)), 0)::int8 FROM (SELECT i.indexrelid::regclass AS relid UNION SELECT relid FROM pg_partition_tree(i.indexrelid)) pt),
                (SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd), 0)::int8 FROM (SELECT i.indrelid::regclass AS relid UNION SELECT relid FROM pg_partition_tree(i.indrelid)) pt JOIN pg_stat_all_tables s ON s.relid = pt.relid),
                i.indrelid
         FROM pg_index i
         JOIN pg_class c ON c.oid = i.indexrelid
         JOIN pg_namespace n ON n.oid = c.relnamespace
         JOIN pg_class t ON t.oid = i.indrelid
         JOIN pg_namespace tn ON tn.oid = t.relnamespace
         JOIN pg_am am ON am.oid = c.relam
         WHERE {USER_SCHEMAS} AND t.relkind IN ('r', 'p', 'm')
           AND NOT EXISTS (SELECT 1 FROM pg_inherits h WHERE h.inhrelid = i.indexrelid)
           AND ($1::oid[] IS NULL OR i.indrelid = ANY($1))
         ORDER BY i.indrelid, i.indexrelid",
    );
    let tables: Option<Vec<u32>> = tables.map(|t| t.to_vec());
    let rows = client.query(&sql, &[&tables]).await.map_err(|e| DoctorError::sql("reading the indexes", e))?;
    Ok(rows
        .iter()
        .map(|r| IndexFacts {
            oid: r.get(0),
            name: QualifiedName::new(r.get::<_, String>(1), r.get::<_, String>(2)),
            table: QualifiedName::new(r.get::<_, String>(3), r.get::<_, String>(4)),
            definition: r.get(5),
            access_method: r.get(6),
            key_columns: r.get(7),
            include_columns: r.get(8),
            expressions: r.get(9),
            predicate: r.get(10),
            primary: r.get(11),
            unique: r.get(12),
            constraint: r.get(13),
            serves_foreign_key: r.get(14),
            partitioned: r.get(15),
            scans: r.get(16),
            bytes: r.get(17),
            rows_written: r.get(18),
            table_oid: r.get(19),
            unscanned_since: None,
        })
        .collect())
}

/// When the statistics start and the server's clock, in µs since the epoch.
pub struct Clock {
    pub stats_start: i64,
    pub now: i64,
}

/// Judges each index against chute's record of it (`chute.index_watch`)
/// and keeps the new records, setting `unscanned_since`. The statistics
/// start at their last reset in this database or their last loss (a crash
/// or an immediate stop resets `pg_stat_bgwriter.stats_reset` too), else
/// at the server's start. A standby keeps statistics of its own and cannot
/// write: nothing is judged there; nor where chute may not keep the record
/// (the returned reason says why).
pub async fn watch(client: &Client, indexes: &mut [IndexFacts]) -> Result<(Clock, Option<String>), DoctorError> {
    let r = client
        .query_one(
            "SELECT (extract(epoch FROM coalesce(greatest(d.stats_reset, b.stats_reset), pg_postmaster_start_time())) * 1000000)::int8,
                    (extract(epoch FROM now()) * 1000000)::int8, pg_is_in_recovery()
             FROM pg_stat_database d, pg_stat_bgwriter b WHERE d.datname = current_database()",
            &[],
        )
        .await
        .map_err(|e| DoctorError::sql("reading when the statistics start", e))?;
    let clock = Clock { stats_start: r.get(0), now: r.get(1) };
    if r.get::<_, bool>(2) {
        let why = "this server is a standby, whose statistics are its own: judge indexes on the primary, and check the standby's pg_stat_user_indexes before dropping one";
        return Ok((clock, Some(why.into())));
    }
    if let Err(e) = crate::schema::ensure(client).await {
        return Ok((clock, Some(format!("{e}"))));
    }
    let oids: Vec<u32> = indexes.iter().map(|i| i.oid).collect();
    let rows = match client
        .query(
            "SELECT indexrelid, indrelid, (extract(epoch FROM since) * 1000000)::int8, scans FROM chute.index_watch WHERE indexrelid = ANY($1)",
            &[&oids],
        )
        .await
    {
        Ok(rows) => rows,
        // A role that may not read chute's tables: no history, no verdict.
        Err(e) => return Ok((clock, Some(crate::exec::describe(&e)))),
    };
    let mut changed: (Vec<u32>, Vec<u32>, Vec<i64>, Vec<i64>) = Default::default();
    for ix in indexes.iter_mut() {
        // A record of another table's index of the same oid is not this one's.
        let record = rows
            .iter()
            .find(|r| r.get::<_, u32>(0) == ix.oid && r.get::<_, u32>(1) == ix.table_oid)
            .map(|r| Watch { since: r.get(2), scans: r.get(3) });
        let w = judge(record, ix.scans, clock.stats_start, clock.now);
        ix.unscanned_since = Some(w.since);
        if record != Some(w) {
            changed.0.push(ix.oid);
            changed.1.push(ix.table_oid);
            changed.2.push(w.since);
            changed.3.push(w.scans);
        }
    }
    let write = client
        .execute(
            "INSERT INTO chute.index_watch (indexrelid, indrelid, since, scans)
             SELECT i, t, to_timestamp(s / 1000000.0), n FROM unnest($1::oid[], $2::oid[], $3::int8[], $4::int8[]) u(i, t, s, n)
             ON CONFLICT (indexrelid) DO UPDATE SET indrelid = EXCLUDED.indrelid, since = EXCLUDED.since, scans = EXCLUDED.scans",
            &[&changed.0, &changed.1, &changed.2, &changed.3],
        )
        .await;
    let prune = async {
        client
            .execute(
                "DELETE FROM chute.index_watch w WHERE NOT EXISTS (SELECT 1 FROM pg_index i WHERE i.indexrelid = w.indexrelid AND i.indrelid = w.indrelid)",
                &[],
            )
            .await
    };
    if let Err(e) = match write {
        Ok(_) => prune.await,
        Err(e) => Err(e),
    } {
        // What was judged from the records stands; only today's sightings are lost.
        for ix in indexes.iter_mut() {
            if ix.unscanned_since == Some(clock.now) {
                ix.unscanned_since = None;
            }
        }
        return Ok((clock, Some(crate::exec::describe(&e))));
    }
    Ok((clock, None))
}
