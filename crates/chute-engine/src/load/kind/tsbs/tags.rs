//! tsbs tag sets: each row needs the id of its tag set in the `tags` table.
//! Parse threads look ids up in a shared cache; a row whose tag set is new
//! waits (as a `PendingRow`) while the coordinator, through `TagResolver`,
//! finds or inserts its tag set under an advisory lock, patches the id into
//! the row's encoded bytes and routes it.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use tokio_postgres::Client;
use tokio_postgres::types::ToSql;

use super::super::super::LoadError;
use super::super::super::model::{Filed, PendingRow};
use super::super::super::routing::Routing;
use super::TAGS_ID_AT;

/// Tag set ids, shared copy-on-write: a parse thread takes the current map
/// once per chunk (an `Arc` clone, not a copy of the map); the coordinator
/// replaces it when it learns new ids, which happens only for new tag sets.
pub(crate) type TagCache = Arc<RwLock<Arc<HashMap<Vec<u8>, i32>>>>;

/// Inserts new tag sets and hands out their ids.
pub(crate) struct TagResolver {
    pub(super) cache: TagCache,
    /// Finds a tag set (`IS NOT DISTINCT FROM` on every tag) or inserts it.
    pub(super) sql: String,
    /// The tags table's oid: the second key of the advisory lock that
    /// serializes lookups-then-inserts across loads and sessions.
    pub(super) lock_key: i32,
}

impl TagResolver {
    pub(crate) async fn resolve(
        &mut self,
        client: &Client,
        pending: &mut std::collections::VecDeque<PendingRow>,
        tables: &[Arc<Routing>],
        out: &mut Filed,
    ) -> Result<(), LoadError> {
        // A row leaves `pending` only once it has its id: after an error the
        // rest can be resolved again (on a new connection; the session's
        // advisory lock ends with the old one).
        let new: Vec<&PendingRow> = {
            let cache = self.cache.read().expect("tag cache");
            let mut seen = std::collections::HashSet::new();
            pending.iter().filter(|p| !cache.contains_key(&p.key) && seen.insert(p.key.as_slice())).collect()
        };
        if !new.is_empty() {
            let lock = client.execute("SELECT pg_advisory_lock($1, $2)", &[&crate::schema::LOCK_CLASS, &self.lock_key]).await;
            lock.map_err(|e| LoadError::sql("locking the tags table's tag sets", e))?;
            let mut found = Vec::with_capacity(new.len());
            let mut result = Ok(());
            for p in &new {
                match self.find_or_add(client, &p.tags).await {
                    Ok(id) => found.push((p.key.clone(), id)),
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                }
            }
            let unlock = client.execute("SELECT pg_advisory_unlock($1, $2)", &[&crate::schema::LOCK_CLASS, &self.lock_key]).await;
            result?;
            unlock.map_err(|e| LoadError::sql("unlocking the tags table's tag sets", e))?;
            Arc::make_mut(&mut self.cache.write().expect("tag cache")).extend(found);
        }
        let cache = self.cache.read().expect("tag cache").clone();
        while let Some(mut p) = pending.pop_front() {
            let id = *cache.get(&p.key).expect("every tag set was found or added above");
            p.row[TAGS_ID_AT..TAGS_ID_AT + 4].copy_from_slice(&id.to_be_bytes());
            let table = &tables[usize::from(p.table)];
            let routed = table.route(&mut p.route, &p.row);
            out.file(table, routed, p.table, &p.row, &p.raw, p.at);
        }
        Ok(())
    }

    /// The id of a tag set, inserted if no row has it. Runs under the lock;
    /// a row another writer inserted meanwhile (a conflict, so nothing
    /// returned) is found by the next try's new snapshot.
    async fn find_or_add(&self, client: &Client, tags: &[Option<String>]) -> Result<i32, LoadError> {
        let params: Vec<&(dyn ToSql + Sync)> = tags.iter().map(|t| t as &(dyn ToSql + Sync)).collect();
        for _ in 0..3 {
            let row = client.query_opt(&self.sql, &params).await.map_err(|e| LoadError::sql("adding a tag set to tags", e))?;
            if let Some(row) = row {
                return Ok(row.get(0));
            }
        }
        Err(LoadError::Setup(format!(
            "the tag set {tags:?} is neither found in nor added to tags (a writer outside chute keeps changing it?): run the load again"
        )))
    }
}
