//! Reads every top-level index with its scans, size and the writes to its
//! table, for the pure index rules in `chute_core::doctor::indexes`.

use chute_core::doctor::indexes::IndexFacts;
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
                (SELECT coalesce(sum(s.n_tup_ins + s.n_tup_upd), 0)::int8 FROM (SELECT i.indrelid::regclass AS relid UNION SELECT relid FROM pg_partition_tree(i.indrelid)) pt JOIN pg_stat_all_tables s ON s.relid = pt.relid)
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
        })
        .collect())
}
