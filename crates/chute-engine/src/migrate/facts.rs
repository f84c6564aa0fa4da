//! Reads what `chute migrate` must know about a table from `pg_catalog`.

use chute_core::ident::QualifiedName;
use chute_core::migrate::plan::Progress;
use chute_core::migrate::{Facts, ForeignKey, Names, RlsPolicy, RowSecurity};
use tokio_postgres::Client;

use crate::catalog::{self, CatalogError, TableInfo};

fn strings(rows: Vec<tokio_postgres::Row>) -> Vec<String> {
    rows.into_iter().map(|r| r.get(0)).collect()
}

/// A table's storage parameters (`fillfactor=70`, …), which its leaves get
/// after a migration (a partitioned parent cannot hold them).
pub async fn storage(client: &Client, table: &QualifiedName) -> Result<Vec<String>, tokio_postgres::Error> {
    let row = client
        .query_one("SELECT coalesce(reloptions, '{}')::text[] FROM pg_class WHERE oid = $1::text::regclass", &[&table.quoted()])
        .await?;
    Ok(row.get(0))
}

pub async fn read(client: &Client, info: &TableInfo, key: &str) -> Result<Facts, CatalogError> {
    let oid = info.oid;
    let row = client
        .query_one(
            "SELECT c.relpersistence::text, c.relreplident::text, obj_description(c.oid, 'pg_class'),
                    (SELECT format_type(atttypid, NULL) FROM pg_attribute WHERE attrelid = c.oid AND attname = $2 AND attnum > 0 AND NOT attisdropped),
                    coalesce((SELECT attnotnull FROM pg_attribute WHERE attrelid = c.oid AND attname = $2 AND attnum > 0 AND NOT attisdropped), false)
             FROM pg_class c WHERE c.oid = $1",
            &[&oid, &key],
        )
        .await?;
    let (pk, primary_key_name, unique, plain_indexes) = indexes(client, oid).await?;
    let (referencing_fks, views, matviews, triggers, publications, inheritance) = dependents(client, oid).await?;
    let identity_columns = strings(
        client
            .query("SELECT attname::text FROM pg_attribute WHERE attrelid = $1 AND attidentity <> '' AND NOT attisdropped", &[&oid])
            .await?,
    );
    let generated_columns = strings(
        client
            .query("SELECT attname::text FROM pg_attribute WHERE attrelid = $1 AND attgenerated <> '' AND NOT attisdropped", &[&oid])
            .await?,
    );
    let (foreign_keys, checks, row_security) = definitions(client, oid).await?;
    Ok(Facts {
        table: info.name.clone(),
        relkind: info.relkind,
        persistence: row.get::<_, String>(0).chars().next().unwrap_or('p'),
        replica_identity: row.get::<_, String>(1).chars().next().unwrap_or('d'),
        comment: row.get(2),
        key_type: row.get(3),
        key_not_null: row.get(4),
        primary_key: pk,
        primary_key_name,
        unique,
        plain_indexes,
        referencing_fks,
        foreign_keys,
        checks,
        row_security,
        views,
        matviews,
        triggers,
        publications,
        inheritance,
        identity_columns,
        generated_columns,
        owned_sequences: catalog::owned_sequences(client, oid).await?,
        grants: info.grants.clone(),
    })
}

/// A table's indexes: its primary key's columns and name, its other unique
/// indexes (name, columns), and its plain ones (name, `USING …`).
type Indexes = (Option<Vec<String>>, Option<String>, Vec<(String, Vec<String>)>, Vec<(String, String)>);

async fn indexes(client: &Client, oid: u32) -> Result<Indexes, tokio_postgres::Error> {
    let index_cols = "array(SELECT a.attname::text FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                            JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum ORDER BY k.n)";
    let pk_row = client
        .query_opt(
            &format!("SELECT {index_cols}, ci.relname::text FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid WHERE i.indrelid = $1 AND i.indisprimary"),
            &[&oid],
        )
        .await?;
    let pk = pk_row.as_ref().map(|r| r.get::<_, Vec<String>>(0));
    let primary_key_name = pk_row.as_ref().map(|r| r.get::<_, String>(1));
    let unique = client
        .query(
            &format!(
                "SELECT ci.relname::text, {index_cols} FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
                 WHERE i.indrelid = $1 AND i.indisunique AND NOT i.indisprimary ORDER BY 1"
            ),
            &[&oid],
        )
        .await?
        .into_iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, Vec<String>>(1)))
        .collect();
    let plain_indexes = client
        .query(
            "SELECT ci.relname::text, substring(pg_get_indexdef(i.indexrelid) FROM ' USING .*$') FROM pg_index i
             JOIN pg_class ci ON ci.oid = i.indexrelid
             WHERE i.indrelid = $1 AND NOT i.indisunique ORDER BY i.indexrelid",
            &[&oid],
        )
        .await?
        .into_iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, String>(1)))
        .collect();
    Ok((pk, primary_key_name, unique, plain_indexes))
}

/// What depends on a table or it on: foreign keys that reference it, its
/// views (name, definition) and materialized views, triggers,
/// publications, inheritance parents and children.
type Dependents = (Vec<String>, Vec<(String, String)>, Vec<String>, Vec<String>, Vec<String>, Vec<String>);

async fn dependents(client: &Client, oid: u32) -> Result<Dependents, tokio_postgres::Error> {
    let referencing_fks = strings(
        client
            .query(
                "SELECT format('%I on %s', conname, conrelid::regclass) FROM pg_constraint WHERE contype = 'f' AND confrelid = $1",
                &[&oid],
            )
            .await?,
    );
    let dependents = |kind: &'static str| {
        format!(
            "SELECT DISTINCT v.oid::regclass::text, pg_get_viewdef(v.oid) FROM pg_depend d JOIN pg_rewrite r ON r.oid = d.objid
             JOIN pg_class v ON v.oid = r.ev_class WHERE d.classid = 'pg_rewrite'::regclass AND d.refobjid = $1 AND v.oid <> $1 AND v.relkind = '{kind}'"
        )
    };
    let views = client.query(&dependents("v"), &[&oid]).await?.into_iter().map(|r| (r.get(0), r.get(1))).collect();
    let matviews = strings(client.query(&dependents("m"), &[&oid]).await?);
    let triggers = strings(client.query("SELECT tgname::text FROM pg_trigger WHERE tgrelid = $1 AND NOT tgisinternal", &[&oid]).await?);
    let publications = strings(
        client
            .query(
                "SELECT p.pubname::text FROM pg_publication_rel pr JOIN pg_publication p ON p.oid = pr.prpubid WHERE pr.prrelid = $1",
                &[&oid],
            )
            .await?,
    );
    let inheritance = strings(
        client
            .query(
                "SELECT inhparent::regclass::text FROM pg_inherits WHERE inhrelid = $1
                 UNION ALL SELECT inhrelid::regclass::text FROM pg_inherits WHERE inhparent = $1",
                &[&oid],
            )
            .await?,
    );
    Ok((referencing_fks, views, matviews, triggers, publications, inheritance))
}

/// The definitions the new parent gets again: foreign keys to other
/// tables, CHECK constraints (for the inventory) and row-level security.
/// They are printed while `search_path` is only `pg_catalog` (then put back
/// as it was), so every name in them is schema-qualified and means the same
/// in any session.
async fn definitions(client: &Client, oid: u32) -> Result<(Vec<ForeignKey>, Vec<(String, String)>, RowSecurity), CatalogError> {
    // Set and put back at session level: a caller may be inside a transaction of its own.
    let before: String = client.query_one("SELECT current_setting('search_path')", &[]).await?.get(0);
    client.execute("SELECT set_config('search_path', 'pg_catalog', false)", &[]).await?;
    let read = async {
        let fks = client
            .query(
                "SELECT conname::text, pg_get_constraintdef(oid), convalidated, confrelid::regclass::text FROM pg_constraint
                 WHERE conrelid = $1 AND contype = 'f' AND confrelid <> $1 AND conparentid = 0 ORDER BY conname",
                &[&oid],
            )
            .await?
            .iter()
            .map(|r| ForeignKey { name: r.get(0), definition: r.get(1), validated: r.get(2), referenced: r.get(3) })
            .collect();
        let checks = client
            .query("SELECT conname::text, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = $1 AND contype = 'c' ORDER BY conname", &[
                &oid,
            ])
            .await?
            .iter()
            .map(|r| (r.get(0), r.get(1)))
            .collect();
        let flags = client.query_one("SELECT relrowsecurity, relforcerowsecurity FROM pg_class WHERE oid = $1", &[&oid]).await?;
        let policies = client
            .query(
                "SELECT polname::text, polpermissive,
                        CASE polcmd WHEN 'r' THEN 'SELECT' WHEN 'a' THEN 'INSERT' WHEN 'w' THEN 'UPDATE' WHEN 'd' THEN 'DELETE' ELSE 'ALL' END,
                        ARRAY(SELECT CASE WHEN r = 0 THEN 'public' ELSE pg_get_userbyid(r)::text END FROM unnest(polroles) r),
                        pg_get_expr(polqual, polrelid), pg_get_expr(polwithcheck, polrelid)
                 FROM pg_policy WHERE polrelid = $1 ORDER BY polname",
                &[&oid],
            )
            .await?
            .iter()
            .map(|r| RlsPolicy { name: r.get(0), permissive: r.get(1), command: r.get(2), roles: r.get(3), using: r.get(4), check: r.get(5) })
            .collect();
        Ok::<_, tokio_postgres::Error>((fks, checks, RowSecurity { enabled: flags.get(0), forced: flags.get(1), policies }))
    }
    .await;
    let end = client.execute("SELECT set_config('search_path', $1, false)", &[&before]).await;
    let v = read?;
    end?;
    Ok(v)
}

/// What of the pre-swap steps the catalog shows done.
pub async fn progress(client: &Client, names: &Names) -> Result<Progress, CatalogError> {
    let schema = names.table.schema.clone().unwrap_or_else(|| "public".into());
    let row = client
        .query_one(
            "SELECT to_regclass($1) IS NOT NULL,
                    (SELECT i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $2 AND c.relname = $3),
                    EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = to_regclass($4) AND conname = $3),
                    (SELECT convalidated FROM pg_constraint WHERE conrelid = to_regclass($4) AND conname = $5)",
            &[&names.new_parent.quoted(), &schema, &names.pk_index, &names.table.quoted(), &names.range_check],
        )
        .await?;
    Ok(Progress { new_parent_exists: row.get(0), pk_index: row.get(1), pk_constraint: row.get(2), range_check: row.get(3) })
}

/// One aggregate of a table's key (`expr`, e.g. `min(…)` turned into the
/// planners' i64).
pub async fn key_aggregate(client: &Client, table: &QualifiedName, expr: &str) -> Result<Option<i64>, CatalogError> {
    Ok(client.query_one(&format!("SELECT {expr} FROM {}", table.quoted()), &[]).await?.get(0))
}
