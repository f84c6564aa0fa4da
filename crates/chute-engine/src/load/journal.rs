//! Exactly once: which input rows each leaf already holds.
//!
//! A row is identified by its input (path, size and modification time, or
//! `--load-id`) and where it starts: its byte offset (files) or its sequence
//! number (generated rows). Every COPY batch records, in the same transaction
//! as its rows, the input ranges it covers for its leaf (`chute.load_journal`).
//! A batch only ever claims a range when it holds *every* row of that range
//! that routes to its leaf (chunks enter an accumulator whole), so on resume a
//! row is skipped exactly when its offset lies in a committed range of the
//! leaf it routes to. Nothing depends on chunk size, batch size or worker
//! count, so any of them may change between runs.
//!
//! Inputs that several runs of one load share at once (the partitions of a
//! Kafka topic, read by the consumers of a group) are named in
//! `chute.load_positions`: their number in the journal, the position before
//! which every row of them is committed or rejected (a lower bound, moved on
//! when a run ends: where a run starts reading), and the run that owns each
//! now (see `claim::fence`). Their rows are journaled at their message's
//! offset, like bytes of a file.
//!
//! An entry also names the physical table it describes (oid and relfilenode
//! at commit), so a table dropped, made again, truncated or rewritten since
//! is noticed instead of trusted (see `open`); `claim` keeps a load to one
//! run at a time.

use std::collections::HashMap;

use tokio_postgres::Client;

use super::LoadError;

/// FNV-1a, 64 bits: stable across builds (std's hasher is not).
pub fn stable_hash(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for b in p.bytes().chain([0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// Sorted, non-overlapping half-open ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RangeSet(Vec<(u64, u64)>);

impl RangeSet {
    pub(crate) fn from_ranges(mut v: Vec<(u64, u64)>) -> Self {
        v.sort_unstable();
        let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
        for (a, b) in v {
            match out.last_mut() {
                Some(last) if a <= last.1 => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        RangeSet(out)
    }

    #[inline]
    pub(crate) fn contains(&self, x: u64) -> bool {
        let i = self.0.partition_point(|r| r.0 <= x);
        i > 0 && x < self.0[i - 1].1
    }
}

/// Appends a range to a list, merging it with the last one when they touch.
pub(crate) fn push_range(ranges: &mut Vec<(u32, u64, u64)>, r: (u32, u64, u64)) {
    if let Some(last) = ranges.last_mut()
        && last.0 == r.0
        && r.1 <= last.2
        && r.2 >= last.1
    {
        last.1 = last.1.min(r.1);
        last.2 = last.2.max(r.2);
        return;
    }
    ranges.push(r);
}

/// What earlier runs of this load committed, by journal target name and input.
#[derive(Debug, Default)]
pub(crate) struct Committed {
    pub by_target: HashMap<String, Vec<RangeSet>>,
    pub rows: i64,
    /// Shared inputs this run took: where each is to be read from.
    pub positions: HashMap<u32, u64>,
    /// What `chute.loads` said before this run took the load (see
    /// `claim::fence`); `None` for a load whose inputs runs share.
    pub before: Option<Before>,
}

/// What a target loaded as text (not binary) COPY is journaled under: its name and this.
const TEXT_SUFFIX: &str = " (text)";

/// The name a batch's target is journaled under.
pub(crate) fn target_key(name: &str, text: bool) -> String {
    if text { format!("{name}{TEXT_SUFFIX}") } else { name.to_owned() }
}

/// What `chute.loads` said of a load before this run took it: its owner
/// then (`None`: no row, a new load) and the row's other columns, to write
/// the claim again when a failover lost it (see `claim::fence`).
#[derive(Debug, Clone)]
pub(crate) struct Before {
    pub previous: Option<String>,
    pub table: String,
    pub inputs: String,
}

/// Reads what `chute.loads` says of the load before `owner` takes it
/// (under the load's lock: no other run changes it meanwhile).
async fn before(client: &Client, load_id: &str, owner: &str, (table, inputs): (&str, &str)) -> Result<Before, LoadError> {
    let row = client
        .query_opt("SELECT owner FROM chute.loads WHERE load_id = $1", &[&load_id])
        .await
        .map_err(|e| LoadError::sql("reading chute.loads", e))?;
    let previous = row.and_then(|r| r.get::<_, Option<String>>(0)).filter(|p| p != owner);
    Ok(Before { previous, table: table.to_owned(), inputs: inputs.to_owned() })
}

/// A load as `chute.loads` records it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Entry<'a> {
    pub load_id: &'a str,
    /// The table (or tables) it loads, as people read them.
    pub table: &'a str,
    /// Its inputs, as people read them.
    pub inputs: &'a str,
    pub n_inputs: usize,
    /// This run's token (see `claim`).
    pub owner: &'a str,
    /// The shared inputs this run reads (see the module's doc), which it
    /// takes over from whichever run had them; `None`: the load is one
    /// run's at a time.
    pub shared: Option<&'a [u32]>,
    /// Rows committed by loads whose ids start with this are skipped too
    /// (see `LoadBuilder::skip_committed_by`).
    pub also: Option<&'a str>,
}

/// Registers the load (or finds its earlier runs), makes `owner` (this run)
/// the one run that may commit to it (see `claim`), and reads what earlier
/// runs committed.
///
/// Each entry names the physical table it describes: the target's oid and
/// its relfilenode at commit. Entries of a table that is gone (dropped, also
/// by retention, or dropped and made again under the same name) describe rows
/// that are gone: they are pruned and their rows load again. A table whose
/// relfilenode changed since (TRUNCATE, VACUUM FULL, CLUSTER, a rewriting
/// ALTER TABLE) may or may not hold its rows, so the load is refused rather
/// than guessed at. A partitioned parent (`--via-parent`) has no storage of
/// its own: an empty parent with committed entries counts as truncated.
pub(crate) async fn open(client: &Client, entry: &Entry<'_>) -> Result<Committed, LoadError> {
    let Entry { load_id, table, inputs, n_inputs, owner, shared, also } = *entry;
    let missing =
        crate::privilege::journal_missing(client).await.map_err(|e| LoadError::sql("reading the role's privileges on schema chute", e))?;
    if let Some(missing) = missing {
        return Err(LoadError::Setup(missing));
    }
    crate::schema::ensure(client).await?;
    let before = match shared {
        Some(_) => None,
        None => Some(before(client, load_id, owner, (table, inputs)).await?),
    };
    client
        .execute(
            "INSERT INTO chute.loads (load_id, table_name, inputs, owner) VALUES ($1, $2, $3, $4)
             ON CONFLICT (load_id) DO UPDATE SET owner = $4",
            &[&load_id, &table, &inputs, &owner],
        )
        .await
        .map_err(|e| LoadError::sql("registering the load in chute.loads", e))?;
    // Taken over before the journal is read: the update waits for the
    // batches of the run that had them, so the journal holds those too.
    let mut positions = HashMap::new();
    if let Some(shared) = shared {
        let shared: Vec<i32> = shared.iter().map(|i| *i as i32).collect();
        let rows = client
            .query(
                "UPDATE chute.load_positions SET owner = $3, updated_at = now() WHERE load_id = $1 AND input = ANY($2)
                 RETURNING input, position",
                &[&load_id, &shared, &owner],
            )
            .await
            .map_err(|e| LoadError::sql("taking the load's partitions over in chute.load_positions", e))?;
        positions = rows.iter().map(|r| (r.get::<_, i32>(0) as u32, r.get::<_, i64>(1) as u64)).collect();
        if positions.len() != shared.len() {
            return Err(LoadError::Setup(format!("load {load_id}: some of its partitions are not in chute.load_positions")));
        }
    }
    client
        .execute(
            "DELETE FROM chute.load_journal j WHERE j.load_id = $1 AND NOT EXISTS (SELECT 1 FROM pg_class c WHERE c.oid = j.rel)",
            &[&load_id],
        )
        .await
        .map_err(|e| LoadError::sql("pruning chute.load_journal", e))?;
    let Entries { raw, mut rewritten, parents, total } = entries(client, load_id, also, n_inputs).await?;
    for (name, sql_name) in &parents {
        // `sql_name` is the server's own quoting of the oid (regclass output).
        let holds: bool = client
            .query_one(&format!("SELECT EXISTS (SELECT 1 FROM {sql_name})"), &[])
            .await
            .map_err(|e| LoadError::sql(format!("checking that {name} still holds its rows"), e))?
            .get(0);
        if !holds {
            rewritten.push(name.clone());
        }
    }
    if !rewritten.is_empty() {
        rewritten.sort();
        return Err(LoadError::Setup(rewritten_message(load_id, &rewritten)));
    }
    // Only now is the load running again: a refused run leaves its status as it was.
    client
        .execute("UPDATE chute.loads SET status = 'running', finished_at = NULL WHERE load_id = $1", &[&load_id])
        .await
        .map_err(|e| LoadError::sql("updating chute.loads", e))?;
    let by_target = raw.into_iter().map(|(k, v)| (k, v.into_iter().map(RangeSet::from_ranges).collect())).collect();
    Ok(Committed { by_target, rows: total, positions, before })
}

/// What `open` reads of the journal: ranges by target and input, the
/// targets whose storage changed since, the partitioned parents among
/// them (by the server's own quoting), and the rows committed.
struct Entries {
    raw: HashMap<String, Vec<Vec<(u64, u64)>>>,
    rewritten: Vec<String>,
    parents: HashMap<String, String>,
    total: i64,
}

/// Reads the entries of `load_id`, and those of the loads whose ids start with `also`.
async fn entries(client: &Client, load_id: &str, also: Option<&str>, n_inputs: usize) -> Result<Entries, LoadError> {
    let rows = client
        .query(
            "SELECT j.target, j.input, j.starts, j.ends, j.rows, j.relfilenode::int8, c.relfilenode::int8, c.relkind::text,
                    c.oid::regclass::text, j.load_id = $1
             FROM chute.load_journal j JOIN pg_class c ON c.oid = j.rel
             WHERE j.load_id = $1 OR starts_with(j.load_id, $2)",
            &[&load_id, &also],
        )
        .await
        .map_err(|e| LoadError::sql("reading chute.load_journal", e))?;
    let mut raw: HashMap<String, Vec<Vec<(u64, u64)>>> = HashMap::new();
    let mut rewritten: Vec<String> = Vec::new();
    let mut parents: HashMap<String, String> = HashMap::new();
    let mut total = 0;
    for r in rows {
        let target: String = r.get(0);
        let input: i32 = r.get(1);
        let starts: Vec<i64> = r.get(2);
        let ends: Vec<i64> = r.get(3);
        let (then, now): (Option<i64>, i64) = (r.get(5), r.get(6));
        let name = target.strip_suffix(TEXT_SUFFIX).unwrap_or(&target).to_owned();
        if !r.get::<_, bool>(9) {
            // Another load's entry: what it says of the storage as it is now
            // (its own runs keep it up to date, see `also`), its rows not counted.
            if r.get::<_, String>(7) == "p" || then == Some(now) {
                let per_input = raw.entry(target).or_insert_with(|| vec![Vec::new(); n_inputs]);
                if let Some(v) = per_input.get_mut(input as usize) {
                    v.extend(starts.iter().zip(&ends).map(|(a, b)| (*a as u64, *b as u64)));
                }
            }
            continue;
        }
        if r.get::<_, String>(7) == "p" {
            parents.entry(name.clone()).or_insert_with(|| r.get(8));
        } else if then != Some(now) && !rewritten.contains(&name) {
            rewritten.push(name.clone());
        }
        total += r.get::<_, i64>(4);
        let per_input = raw.entry(target).or_insert_with(|| vec![Vec::new(); n_inputs]);
        if let Some(v) = per_input.get_mut(input as usize) {
            v.extend(starts.iter().zip(&ends).map(|(a, b)| (*a as u64, *b as u64)));
        }
    }
    Ok(Entries { raw, rewritten, parents, total })
}

/// What the shared inputs of a load are read from now, beyond their names
/// (see [`shared_inputs`]).
#[derive(Debug, Clone, Copy)]
pub struct SharedOrigin<'a> {
    /// Each input's source id, in the order of the names: one that changes
    /// when the source is made again under its name (a Kafka topic's id);
    /// `None` when the source has none to give.
    pub source_ids: &'a [Option<String>],
    /// The table the load writes into (its quoted name), whose oid the
    /// positions are kept for; `None` for a load into several tables.
    pub table: Option<&'a str>,
}

/// An input that starts over from its beginning, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Restarted {
    pub name: String,
    /// Its source is not the one its position was kept for (a topic deleted and made again).
    pub new_source: bool,
    /// Its table is not the one its position was kept for (dropped and made again).
    pub new_table: bool,
}

/// The journal's number of each shared input of a load (a Kafka topic's
/// partition, by name), numbering the names it has not seen yet after the
/// others: a number never changes, whatever partitions a topic gains.
/// Registers the load in `chute.loads` if new.
///
/// A position is kept for one source and one table (`origin`): an input
/// whose source id or table oid is not the one it was kept for starts over
/// from its beginning (its position goes back to 0 and its journal entries
/// are dropped), as `chute load` loads a file again into a table made
/// again. Those inputs are returned with why.
pub async fn shared_inputs(
    client: &mut Client,
    (load_id, table, inputs): (&str, &str, &str),
    names: &[String],
    origin: SharedOrigin<'_>,
) -> Result<(Vec<u32>, Vec<Restarted>), LoadError> {
    crate::schema::ensure(client).await?;
    let txn = client.transaction().await.map_err(|e| LoadError::sql("numbering the load's partitions", e))?;
    let key = stable_hash(&["chute positions", load_id]) as i64;
    let ids: Vec<Option<&str>> = names.iter().enumerate().map(|(i, _)| origin.source_ids.get(i).and_then(|s| s.as_deref())).collect();
    let numbered = async {
        txn.execute("SELECT pg_advisory_xact_lock($1)", &[&key]).await?;
        txn.execute(
            "INSERT INTO chute.loads (load_id, table_name, inputs) VALUES ($1, $2, $3) ON CONFLICT (load_id) DO NOTHING",
            &[&load_id, &table, &inputs],
        )
        .await?;
        txn.execute(
            "INSERT INTO chute.load_positions (load_id, input, name)
             SELECT $1, (SELECT coalesce(max(input) + 1, 0) FROM chute.load_positions WHERE load_id = $1)
                        + (row_number() OVER (ORDER BY u.i))::int - 1, u.n
             FROM unnest($2::text[]) WITH ORDINALITY u(n, i)
             WHERE NOT EXISTS (SELECT 1 FROM chute.load_positions p WHERE p.load_id = $1 AND p.name = u.n)",
            &[&load_id, &names],
        )
        .await?;
        let restarted = restart_moved(&txn, load_id, names, &ids, origin.table).await?;
        let numbered =
            txn.query("SELECT name, input FROM chute.load_positions WHERE load_id = $1 AND name = ANY($2)", &[&load_id, &names]).await?;
        Ok::<_, tokio_postgres::Error>((numbered, restarted))
    }
    .await
    .map_err(|e| LoadError::sql("numbering the load's partitions in chute.load_positions", e))?;
    txn.commit().await.map_err(|e| LoadError::sql("numbering the load's partitions", e))?;
    let (numbered, restarted) = numbered;
    let by_name: HashMap<String, i32> = numbered.iter().map(|r| (r.get(0), r.get(1))).collect();
    Ok((names.iter().map(|n| by_name.get(n).copied().unwrap_or_default() as u32).collect(), restarted))
}

/// In `shared_inputs`' transaction: sends the inputs whose source or table
/// changed back to their beginning, and records what each position is now kept
/// for. A position kept for no source id (one of schema version 10, or a
/// source that has none) takes the current one as its own.
async fn restart_moved(
    txn: &tokio_postgres::Transaction<'_>,
    load_id: &str,
    names: &[String],
    ids: &[Option<&str>],
    table: Option<&str>,
) -> Result<Vec<Restarted>, tokio_postgres::Error> {
    let rows = txn
        .query(
            "WITH now AS (SELECT u.n, u.sid, CASE WHEN $4::text IS NULL THEN NULL ELSE to_regclass($4)::oid END AS rel
                          FROM unnest($2::text[], $3::text[]) u(n, sid)),
                  moved AS (SELECT p.input, p.name,
                                   coalesce(p.source_id <> now.sid, false) AS new_source,
                                   coalesce(p.rel <> now.rel, false) AS new_table
                            FROM chute.load_positions p JOIN now ON p.name = now.n
                            WHERE p.load_id = $1),
                  dropped AS (DELETE FROM chute.load_journal j USING moved m
                              WHERE j.load_id = $1 AND j.input = m.input AND (m.new_source OR m.new_table))
             UPDATE chute.load_positions p
             SET position = CASE WHEN m.new_source OR m.new_table THEN 0 ELSE p.position END,
                 rows_before = CASE WHEN m.new_source OR m.new_table THEN 0 ELSE p.rows_before END,
                 source_id = coalesce(now.sid, p.source_id), rel = coalesce(now.rel, p.rel), updated_at = now()
             FROM moved m JOIN now ON now.n = m.name
             WHERE p.load_id = $1 AND p.input = m.input
             RETURNING p.name, m.new_source, m.new_table",
            &[&load_id, &names, &ids, &table],
        )
        .await?;
    Ok(rows
        .iter()
        .map(|r| Restarted { name: r.get(0), new_source: r.get(1), new_table: r.get(2) })
        .filter(|r| r.new_source || r.new_table)
        .collect())
}

/// In a batch's transaction: how many shared inputs of the load `owner`
/// still owns, holding their rows `FOR SHARE` until it commits (see `claim::fence`).
pub(crate) async fn hold_inputs(txn: &tokio_postgres::Transaction<'_>, load_id: &str, owner: &str) -> Result<usize, tokio_postgres::Error> {
    let rows = txn.query("SELECT input FROM chute.load_positions WHERE load_id = $1 AND owner = $2 FOR SHARE", &[&load_id, &owner]).await?;
    Ok(rows.len())
}

/// Moves the shared inputs `owner` still owns on to where they are
/// committed through (never back).
pub async fn advance(client: &Client, load_id: &str, owner: &str, through: &[(u32, u64)]) -> Result<(), LoadError> {
    let inputs: Vec<i32> = through.iter().map(|t| t.0 as i32).collect();
    let at: Vec<i64> = through.iter().map(|t| t.1 as i64).collect();
    client
        .execute(
            "UPDATE chute.load_positions p SET position = greatest(p.position, t.at), updated_at = now()
             FROM unnest($3::int[], $4::int8[]) t(input, at)
             WHERE p.load_id = $1 AND p.owner = $2 AND p.input = t.input",
            &[&load_id, &owner, &inputs, &at],
        )
        .await
        .map_err(|e| LoadError::sql("recording how far the load's partitions are committed", e))?;
    Ok(())
}

/// Where each shared input of a load is committed through, by name.
pub async fn positions(client: &Client, load_id: &str) -> Result<Vec<(String, u64)>, LoadError> {
    let rows = client
        .query("SELECT name, position FROM chute.load_positions WHERE load_id = $1 ORDER BY input", &[&load_id])
        .await
        .map_err(|e| LoadError::sql("reading chute.load_positions", e))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get::<_, i64>(1) as u64)).collect())
}

/// Why a load whose tables were truncated or rewritten stops, and what to do.
fn rewritten_message(load_id: &str, tables: &[String]) -> String {
    let shown = if tables.len() > 3 { format!("{} and {} more", tables[..3].join(", "), tables.len() - 3) } else { tables.join(", ") };
    format!(
        "{shown} {} truncated or rewritten (TRUNCATE, VACUUM FULL, CLUSTER or an ALTER TABLE that rewrites it) since load {load_id} \
         committed rows into it, so its journal no longer says which of those rows are there; nothing was loaded. To load every row \
         again, run `chute load --forget {load_id}` and then this command again (rows still in the table are then loaded a second time)",
        if tables.len() == 1 { "was" } else { "were" }
    )
}

/// Marks the load finished (or how it ended).
/// `through`: how far each input is committed (see `ack`).
pub(crate) async fn close(client: &Client, load_id: &str, status: &str, through: &[super::CommittedThrough]) -> Result<(), LoadError> {
    let through = serde_json::to_string(through).map_err(|e| LoadError::Setup(format!("recording how far the load got: {e}")))?;
    client
        .execute(
            "UPDATE chute.loads SET status = $2, finished_at = now(), committed_through = $3::text::jsonb WHERE load_id = $1",
            &[&load_id, &status, &through],
        )
        .await
        .map_err(|e| LoadError::sql("updating chute.loads", e))?;
    Ok(())
}

/// One journal entry per input a batch covers.
pub(crate) fn journal_rows(ranges: &[(u32, u64, u64)]) -> Vec<(i32, Vec<i64>, Vec<i64>)> {
    let mut by_input: HashMap<u32, Vec<(u64, u64)>> = HashMap::new();
    for (i, a, b) in ranges {
        by_input.entry(*i).or_default().push((*a, *b));
    }
    let mut out: Vec<(i32, Vec<i64>, Vec<i64>)> = by_input
        .into_iter()
        .map(|(i, v)| {
            let set = RangeSet::from_ranges(v);
            (i as i32, set.0.iter().map(|r| r.0 as i64).collect(), set.0.iter().map(|r| r.1 as i64).collect())
        })
        .collect();
    out.sort_by_key(|r| r.0);
    out
}

/// `chute load --status`: every load this database knows.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LoadRecord {
    pub load_id: String,
    pub table: String,
    pub inputs: String,
    pub status: String,
    pub started_at: String,
    pub finished_at: Option<String>,
    pub rows_committed: i64,
    pub batches: i64,
    pub targets: i64,
    /// When the load ended: how far each input was committed (see `ack`).
    pub committed_through: Option<Vec<super::CommittedThrough>>,
}

pub async fn list(client: &Client, load_id: Option<&str>) -> Result<Vec<LoadRecord>, LoadError> {
    if crate::schema::version(client).await.map_err(|e| LoadError::sql("reading chute.meta", e))?.unwrap_or(0) < 2 {
        return Ok(vec![]);
    }
    let rows = client
        .query(
            "SELECT l.load_id, l.table_name, l.inputs, l.status, l.started_at::text, l.finished_at::text,
                    coalesce(sum(j.rows), 0)::int8, count(DISTINCT j.batch_id), count(DISTINCT j.target),
                    -- (a journal older than version 4 has no such column)
                    (to_jsonb(l) -> 'committed_through')::text
             FROM chute.loads l LEFT JOIN chute.load_journal j USING (load_id)
             WHERE $1::text IS NULL OR l.load_id = $1
             GROUP BY l.load_id ORDER BY l.started_at",
            &[&load_id],
        )
        .await
        .map_err(|e| LoadError::sql("reading chute.loads", e))?;
    Ok(rows
        .iter()
        .map(|r| LoadRecord {
            load_id: r.get(0),
            table: r.get(1),
            inputs: r.get(2),
            status: r.get(3),
            started_at: r.get(4),
            finished_at: r.get(5),
            rows_committed: r.get(6),
            batches: r.get(7),
            targets: r.get(8),
            committed_through: r.get::<_, Option<String>>(9).and_then(|t| serde_json::from_str(&t).ok()),
        })
        .collect())
}

/// `chute load --forget ID`: drops a load's journal (a later run of the same
/// command loads everything again). Returns whether it existed.
pub async fn forget(client: &Client, load_id: &str) -> Result<bool, LoadError> {
    if crate::schema::version(client).await.map_err(|e| LoadError::sql("reading chute.meta", e))?.unwrap_or(0) < 2 {
        return Ok(false);
    }
    let n = client
        .execute("DELETE FROM chute.loads WHERE load_id = $1", &[&load_id])
        .await
        .map_err(|e| LoadError::sql("deleting from chute.loads", e))?;
    Ok(n > 0)
}

/// `chute load --forget-done-before AGE`: forgets the loads that finished
/// (status `done`) more than `age` ago, so the journal does not grow for
/// ever; running, interrupted and failed loads stay, since they may still be
/// resumed. Returns the forgotten loads' ids, oldest first.
pub async fn forget_done_before(client: &Client, age: std::time::Duration) -> Result<Vec<String>, LoadError> {
    if crate::schema::version(client).await.map_err(|e| LoadError::sql("reading chute.meta", e))?.unwrap_or(0) < 2 {
        return Ok(vec![]);
    }
    let seconds = age.as_secs_f64();
    let rows = client
        .query(
            "WITH gone AS (
                 DELETE FROM chute.loads
                 WHERE status = 'done' AND finished_at < now() - make_interval(secs => $1)
                 RETURNING load_id, finished_at)
             SELECT load_id FROM gone ORDER BY finished_at, load_id",
            &[&seconds],
        )
        .await
        .map_err(|e| LoadError::sql("deleting from chute.loads", e))?;
    Ok(rows.iter().map(|r| r.get(0)).collect())
}

/// What a batch's commit records of one target: the input ranges whose
/// rows for it are all in the batch (see the module's doc).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Claim<'a> {
    pub ranges: &'a [(u32, u64, u64)],
    /// The name the target is journaled under (see `target_key`).
    pub target: &'a str,
    /// The relation the rows are in.
    pub relation: &'a str,
    pub rows: u64,
}

/// Records, in the transaction that loads them, which input ranges a
/// target now holds.
pub(crate) async fn record(
    txn: &tokio_postgres::Transaction<'_>,
    load_id: &str,
    batch_id: &str,
    claim: Claim<'_>,
) -> Result<(), tokio_postgres::Error> {
    let Claim { ranges, target, relation, rows } = claim;
    for (i, (input, starts, ends)) in journal_rows(ranges).into_iter().enumerate() {
        // The rows count goes on the first entry only, so sums stay right.
        let rows = if i == 0 { rows as i64 } else { 0 };
        // The physical table the rows are in: its oid and relfilenode now (see `open`).
        txn.execute(
            "INSERT INTO chute.load_journal (load_id, batch_id, target, input, starts, ends, rows, rel, relfilenode)
             SELECT $1, $2, $3, $4, $5, $6, $7, c.oid, c.relfilenode FROM pg_class c WHERE c.oid = $8::text::regclass",
            &[&load_id, &batch_id, &target, &input, &starts, &ends, &rows, &relation],
        )
        .await?;
    }
    Ok(())
}

/// After a lost connection: whether batch `batch_id` committed, and with how many rows.
pub(crate) async fn landed(
    client: &impl tokio_postgres::GenericClient,
    load_id: &str,
    batch_id: &str,
) -> Result<Option<u64>, tokio_postgres::Error> {
    let row = client
        .query_one(
            "SELECT count(*) > 0, coalesce(sum(rows), 0)::int8 FROM chute.load_journal WHERE load_id = $1 AND batch_id = $2",
            &[&load_id, &batch_id],
        )
        .await?;
    Ok(row.get::<_, bool>(0).then(|| row.get::<_, i64>(1) as u64))
}

/// What the journals of this server and of its data nodes (scale-out) say:
/// a distributed load's rows are journaled on the nodes that hold them, so
/// each load's figures are summed over every server. A node that cannot be
/// reached is left out and named in the second value.
pub async fn list_everywhere(client: &Client, load_id: Option<&str>) -> Result<(Vec<LoadRecord>, Vec<String>), LoadError> {
    let mut loads = list(client, load_id).await?;
    let (nodes, unreachable) = node_clients(client).await;
    for (_, c) in nodes {
        for n in list(&c, load_id).await.unwrap_or_default() {
            if let Some(l) = loads.iter_mut().find(|l| l.load_id == n.load_id) {
                l.rows_committed += n.rows_committed;
                l.batches += n.batches;
                l.targets += n.targets;
            }
        }
    }
    Ok((loads, unreachable))
}

/// Forgets a load on this server and on every data node; whether any had it,
/// and the nodes that could not be reached.
pub async fn forget_everywhere(client: &Client, load_id: &str) -> Result<(bool, Vec<String>), LoadError> {
    let (nodes, unreachable) = node_clients(client).await;
    let mut found = false;
    for (node, c) in nodes {
        found |= forget(&c, load_id).await.map_err(|e| LoadError::Setup(format!("on data node {node}: {e}")))?;
    }
    found |= forget(client, load_id).await?;
    Ok((found, unreachable))
}

/// The data nodes recorded on this server, connected, and the ones that
/// could not be reached (with why).
async fn node_clients(client: &Client) -> (Vec<(String, Client)>, Vec<String>) {
    let nodes = crate::cluster::all_node_options(client, &crate::connect::ProcessEnv).await.unwrap_or_default();
    let (mut up, mut down) = (Vec::new(), Vec::new());
    for (n, o) in nodes {
        match o.connect().await {
            Ok(c) => up.push((n.name, c)),
            Err(e) => down.push(format!("data node {} is not reachable ({e}); its journal is left out", n.name)),
        }
    }
    (up, down)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_merge_and_contain() {
        let s = RangeSet::from_ranges(vec![(10, 20), (0, 5), (18, 30), (40, 41)]);
        assert_eq!(s.0, [(0, 5), (10, 30), (40, 41)]);
        for (x, want) in [(0, true), (4, true), (5, false), (9, false), (10, true), (29, true), (30, false), (40, true), (41, false)] {
            assert_eq!(s.contains(x), want, "{x}");
        }
        let mut v = vec![];
        push_range(&mut v, (0, 0, 10));
        push_range(&mut v, (0, 10, 20));
        push_range(&mut v, (1, 20, 30));
        push_range(&mut v, (1, 0, 5));
        assert_eq!(v, [(0, 0, 20), (1, 20, 30), (1, 0, 5)]);
        assert_eq!(journal_rows(&v), [(0, vec![0], vec![20]), (1, vec![0, 20], vec![5, 30])]);
    }

    #[test]
    fn the_hash_is_stable() {
        assert_eq!(stable_hash(&["a", "b"]), stable_hash(&["a", "b"]));
        assert_ne!(stable_hash(&["ab", ""]), stable_hash(&["a", "b"]));
        assert_eq!(stable_hash(&[]), 0xcbf2_9ce4_8422_2325);
    }
}
