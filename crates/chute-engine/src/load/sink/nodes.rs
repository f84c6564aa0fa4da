//! The sink of a load into a distributed table (scale-out, see `cluster`):
//! each batch's rows go straight to the data node that holds their leaf,
//! never through the coordinator.
//!
//! A leaf that is a foreign table of a chute data node (`chute_node_NAME`)
//! is written on that node, into the table of the same name the partition
//! manager made there; any other leaf (a local partition, the parent when
//! rows go through it) is written on the coordinator. Every server has its
//! own pool of COPY workers (the single-server sink's workers, so retries,
//! rejects and vanished leaves behave the same), and its own journal: the
//! entries saying which input ranges a node's table holds commit in the
//! same transaction as those rows, on that node, so resume and exactly-once
//! hold per node whatever happens to the others.
//!
//! The coordinator's batches may hold leaves of several servers: each
//! batch is split into one sub-batch per server, and answered once all of
//! them are (`Loaded` with their sum, or `Failed` with the first error;
//! what other servers committed stays committed and journaled, so the next
//! run loads only the rest). Leaves made just in time during the load are
//! looked up on the coordinator when first seen.

use std::collections::HashMap;
use std::sync::Arc;

use tokio_postgres::Client;

use super::{Batch, BatchPart, CopyOutcome, Job, Sink, Started, WorkerCtx};
use crate::ConnectOptions;
use crate::load::{LoadError, LoadProgress};

/// A data node as the load sees it.
pub(crate) struct LoadNode {
    pub name: String,
    pub server: String,
    pub options: ConnectOptions,
}

/// The nodes of a distributed load, with their journals opened.
pub(crate) struct Distributed {
    pub nodes: Vec<LoadNode>,
    /// Each node's control connection (holds nothing but keeps the node checked).
    controls: Vec<Client>,
}

impl Distributed {
    /// The data nodes when any of `tables` has a leaf on one (`None`: an
    /// ordinary load into one server).
    pub(crate) async fn detect(
        control: &Client,
        tables: &[Arc<crate::load::routing::Routing>],
        progress: &mut dyn LoadProgress,
    ) -> Result<Option<Distributed>, LoadError> {
        // From the catalog alone (any role can read it): does a leaf of these tables live on a chute data node?
        let parents: Vec<String> = tables.iter().map(|t| t.parent.quoted()).collect();
        let any: bool = control
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM unnest($1::text[]) p(name), pg_partition_tree(to_regclass(p.name)) t
                   JOIN pg_foreign_table ft ON ft.ftrelid = t.relid JOIN pg_foreign_server s ON s.oid = ft.ftserver
                   WHERE s.srvname LIKE 'chute\\_node\\_%')",
                &[&parents],
            )
            .await
            .map_err(|e| LoadError::sql("reading the shard map", e))?
            .get(0);
        if !any {
            return Ok(None);
        }
        let nodes = crate::cluster::all_node_options(control, &crate::connect::ProcessEnv).await.map_err(cluster_error)?;
        if nodes.is_empty() {
            return Err(LoadError::Setup(format!(
                "{} has partitions on data nodes, but chute.nodes records none: record them with chute cluster init",
                tables.first().map(|t| t.parent.to_string()).unwrap_or_default()
            )));
        }
        // The shard map stays as read for the whole load (see `node_conn::SHARD_MAP_LOCK`).
        control
            .execute("SELECT pg_advisory_lock_shared($1)", &[&crate::node_conn::SHARD_MAP_LOCK])
            .await
            .map_err(|e| LoadError::sql("locking the shard map", e))?;
        // DDL drift first: a column the nodes lack would fail every COPY.
        let drift = crate::cluster::detect_drift(control, &crate::connect::ProcessEnv).await.map_err(cluster_error)?;
        let fixes: Vec<String> = drift.iter().map(|d| format!("on node {}: {};", d.node, d.fix)).collect();
        if drift.iter().any(|d| !d.problem.starts_with("index")) {
            let problems: Vec<String> = drift.iter().map(|d| format!("{} on node {}: {}", d.table, d.node, d.problem)).collect();
            return Err(LoadError::Setup(format!(
                "the data nodes' tables differ from the coordinator's ({}); nothing was loaded. Run chute cluster sync-ddl, which applies:\n{}",
                problems.join("; "),
                fixes.join("\n")
            )));
        }
        if !drift.is_empty() {
            progress.notice(&format!(
                "indexes of the coordinator's parent are missing on data nodes (chute cluster sync-ddl makes them): {}",
                fixes.join(" ")
            ));
        }
        let nodes = nodes.into_iter().map(|(n, options)| LoadNode { name: n.name, server: n.server, options }).collect();
        Ok(Some(Distributed { nodes, controls: Vec::new() }))
    }

    /// Registers the load on every node and reads what earlier runs
    /// committed there, into `committed`.
    pub(crate) async fn open_journals(
        &mut self,
        control: &Client,
        spec: &crate::load::LoadSpec,
        entry: crate::load::journal::Entry<'_>,
        committed: &mut crate::load::journal::Committed,
        progress: &mut dyn LoadProgress,
    ) -> Result<(), LoadError> {
        // Transactions an earlier --atomic run prepared and left: resolved
        // first, so the journals read next are final (and no prepared
        // transaction holds a lock this run needs).
        let mut servers = vec![("the coordinator".to_owned(), spec.target.clone())];
        servers.extend(self.nodes.iter().map(|n| (format!("data node {}", n.name), n.options.clone())));
        for r in super::atomic::recover(control, &servers).await? {
            let what = if r.committed { "committed" } else { "rolled back" };
            progress.notice(&format!("{what} the transaction {} an interrupted atomic load left on {}", r.gid, r.server));
        }
        for node in &self.nodes {
            let client = crate::retry::connect(&node.options, spec.retry_for, |e| {
                progress.notice(&format!("data node {} is not reachable ({e}); retrying for up to {:?}", node.name, spec.retry_for))
            })
            .await
            .map_err(|e| LoadError::Setup(format!("data node {} ({}) is not reachable: {e}", node.name, node.options.display_url())))?;
            let c = crate::load::journal::open(&client, &entry)
                .await
                .map_err(|e| LoadError::Setup(format!("on data node {}: {e}", node.name)))?;
            committed.rows += c.rows;
            for (target, sets) in c.by_target {
                committed.by_target.entry(target).or_insert(sets);
            }
            self.controls.push(client);
        }
        Ok(())
    }

    /// Marks the load finished on every node (best effort: a node that is
    /// down keeps its `running` status until the next run).
    pub(crate) async fn close_journals(&self, id: &str, status: &str, through: &[crate::load::CommittedThrough]) {
        for c in &self.controls {
            let _ = crate::load::journal::close(c, id, status, through).await;
        }
    }
}

fn cluster_error(e: crate::cluster::ClusterError) -> LoadError {
    LoadError::Setup(e.to_string())
}

/// Writes each leaf's rows on the server that holds it.
pub(crate) struct NodeSink {
    /// The coordinator's workers' context (local leaves, the parent).
    pub coordinator: Arc<WorkerCtx>,
    pub nodes: Vec<LoadNode>,
    /// COPY connections per server.
    pub workers: usize,
    pub retry_for: std::time::Duration,
    /// `--atomic`: (load id, this run's token, the load's stop flag).
    pub atomic: Option<(String, String, Arc<std::sync::atomic::AtomicBool>)>,
}

impl Sink for NodeSink {
    async fn start(self, batches: flume::Receiver<Batch>, outcomes: flume::Sender<CopyOutcome>) -> Result<Started, LoadError> {
        let mut handles = Vec::new();
        // Pool 0 is the coordinator; pool i + 1 is node i.
        let mut pools = Vec::new();
        let mut contexts = vec![self.coordinator.clone()];
        for n in &self.nodes {
            contexts.push(Arc::new(WorkerCtx { target: n.options.clone(), ..clone_ctx(&self.coordinator) }));
        }
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut atomic_workers = Vec::new();
        for (i, ctx) in contexts.iter().enumerate() {
            let (tx, rx) = flume::bounded::<Job>(self.workers * 2);
            let what = if i == 0 { "the coordinator".to_owned() } else { format!("data node {}", self.nodes[i - 1].name) };
            let connect = || async {
                crate::retry::connect(&ctx.target, self.retry_for, |_| {})
                    .await
                    .map_err(|e| LoadError::Setup(format!("{what} ({}) is not reachable: {e}", ctx.target.display_url())))
            };
            match &self.atomic {
                None => {
                    for _ in 0..self.workers {
                        handles.push(tokio::spawn(worker(connect().await?, rx.clone(), outcomes.clone(), ctx.clone())));
                    }
                }
                Some((load_id, run, _)) => {
                    // One transaction per server for the whole load.
                    let client = connect().await?;
                    if i > 0 {
                        super::atomic::check_prepared_allowed(&what, &client).await?;
                    }
                    let gid = format!("{}:{i}", super::atomic::gid_prefix(load_id, run));
                    let h =
                        tokio::spawn(super::atomic::worker(client, rx.clone(), outcomes.clone(), ctx.clone(), gid.clone(), failed.clone()));
                    atomic_workers.push((super::atomic::Prepared { label: what.clone(), options: ctx.target.clone(), gid }, h));
                }
            }
            pools.push(tx);
        }
        let lookup = crate::retry::connect(&self.coordinator.target, self.retry_for, |_| {}).await?;
        let servers: HashMap<String, usize> = self.nodes.iter().enumerate().map(|(i, n)| (n.server.clone(), i + 1)).collect();
        let budget = self.coordinator.budget.clone();
        let dispatcher = tokio::spawn(dispatch(batches, pools, outcomes, lookup, servers, budget, failed.clone()));
        match self.atomic.clone() {
            None => handles.push(dispatcher),
            Some((load_id, run, cancel)) => {
                let coordinator = self.coordinator.target.clone();
                handles.push(tokio::spawn(async move {
                    let dispatched = matches!(dispatcher.await, Ok(Ok(())));
                    let (mut prepared, mut first) = (Vec::new(), None);
                    for (p, h) in atomic_workers {
                        match h.await {
                            Ok(Ok(true)) => prepared.push(p),
                            Ok(Ok(false)) => {}
                            Ok(Err(e)) => {
                                first.get_or_insert(e);
                            }
                            Err(e) => {
                                first.get_or_insert(LoadError::Setup(format!("a COPY worker of the atomic load failed: {e}")));
                            }
                        }
                    }
                    use std::sync::atomic::Ordering::Relaxed;
                    let commit = dispatched && first.is_none() && !failed.load(Relaxed) && !cancel.load(Relaxed);
                    super::atomic::finish(&coordinator, &load_id, &run, prepared, commit).await?;
                    first.map_or(Ok(()), Err)
                }));
            }
        }
        Ok(Started { workers: handles, backfill: Err("the table's partitions live on data nodes".into()) })
    }
}

fn clone_ctx(c: &WorkerCtx) -> WorkerCtx {
    WorkerCtx {
        target: c.target.clone(),
        load_id: c.load_id.clone(),
        owner: c.owner.clone(),
        owned: c.owned,
        before: c.before.clone(),
        retry_for: c.retry_for,
        budget: c.budget.clone(),
        rejects: c.rejects.clone(),
        turns: c.turns.clone(),
        stop: c.stop.clone(),
    }
}

/// One server's COPY worker: the single-server sink's commit, with the
/// answer going back to the batch's aggregator.
async fn worker(
    mut client: Client,
    rx: flume::Receiver<Job>,
    tx: flume::Sender<CopyOutcome>,
    ctx: Arc<WorkerCtx>,
) -> Result<(), LoadError> {
    while let Ok(job) = rx.recv_async().await {
        let result = super::commit_with_retries(&mut client, &job.batch, &tx, &ctx).await;
        let failed = result.is_err();
        let _ = job.done.send((job.batch, result));
        if failed {
            return Ok(());
        }
    }
    Ok(())
}

/// The pool of each leaf: the node whose server its foreign table uses, or
/// the coordinator (0).
async fn pool_of(lookup: &Client, servers: &HashMap<String, usize>, quoted: &str) -> Result<usize, LoadError> {
    let row = lookup
        .query_opt(
            "SELECT s.srvname::text, n.nspname::text, c.relname::text,
                    coalesce((SELECT substr(o, 13) FROM unnest(ft.ftoptions) o WHERE o LIKE 'schema_name=%'), n.nspname)::text,
                    coalesce((SELECT substr(o, 12) FROM unnest(ft.ftoptions) o WHERE o LIKE 'table_name=%'), c.relname)::text
             FROM pg_foreign_table ft JOIN pg_foreign_server s ON s.oid = ft.ftserver
             JOIN pg_class c ON c.oid = ft.ftrelid JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE ft.ftrelid = to_regclass($1)",
            &[&quoted],
        )
        .await
        .map_err(|e| LoadError::sql("reading the shard map", e))?;
    let Some(row) = row else { return Ok(0) };
    let server: String = row.get(0);
    let Some(&pool) = servers.get(&server) else { return Ok(0) };
    let (schema, name, remote_schema, remote_name): (String, String, String, String) = (row.get(1), row.get(2), row.get(3), row.get(4));
    if schema != remote_schema || name != remote_name {
        return Err(LoadError::Setup(format!(
            "the foreign partition {schema}.{name} points at {remote_schema}.{remote_name} on its node: chute loads nodes directly only into tables of the same name (made by chute partition create --distribute-by)"
        )));
    }
    Ok(pool)
}

/// Splits each batch by server and hands each share to its pool.
async fn dispatch(
    batches: flume::Receiver<Batch>,
    pools: Vec<flume::Sender<Job>>,
    outcomes: flume::Sender<CopyOutcome>,
    lookup: Client,
    servers: HashMap<String, usize>,
    budget: Arc<crate::load::budget::Budget>,
    failed: Arc<std::sync::atomic::AtomicBool>,
) -> Result<(), LoadError> {
    let mut known: HashMap<String, usize> = HashMap::new();
    while let Ok(batch) = batches.recv_async().await {
        let Batch { parts, budget: bytes, batch_id } = batch;
        let mut shares: Vec<Vec<BatchPart>> = (0..pools.len()).map(|_| Vec::new()).collect();
        let mut failure = None;
        for part in parts {
            let pool = match known.get(&part.quoted_name) {
                Some(p) => *p,
                None => match pool_of(&lookup, &servers, &part.quoted_name).await {
                    Ok(p) => {
                        known.insert(part.quoted_name.clone(), p);
                        p
                    }
                    Err(e) => {
                        failure = Some(e);
                        0
                    }
                },
            };
            shares[pool].push(part);
        }
        if let Some(e) = failure {
            let why = e.to_string();
            shares.into_iter().flatten().for_each(|p| p.seg.acks.fail(&why));
            budget.release(bytes);
            failed.store(true, std::sync::atomic::Ordering::Relaxed);
            let _ = outcomes.send(CopyOutcome::Failed(e));
            continue;
        }
        let mut waits = Vec::new();
        for (pool, parts) in shares.into_iter().enumerate().filter(|(_, p)| !p.is_empty()) {
            let (done, wait) = tokio::sync::oneshot::channel();
            let sub = Batch { parts, budget: 0, batch_id: format!("{batch_id}-s{pool}") };
            // A pool whose workers stopped (after a failure) drops the job: its wait reports it.
            let _ = pools[pool].send_async(Job { batch: sub, done }).await;
            waits.push(wait);
        }
        tokio::spawn(answer(waits, bytes, outcomes.clone(), budget.clone(), failed.clone()));
    }
    Ok(())
}

/// Answers one batch once every server's share is done.
async fn answer(
    waits: Vec<tokio::sync::oneshot::Receiver<(Batch, Result<super::Committed, LoadError>)>>,
    bytes: usize,
    tx: flume::Sender<CopyOutcome>,
    budget: Arc<crate::load::budget::Budget>,
    failed: Arc<std::sync::atomic::AtomicBool>,
) {
    let (mut rows, mut sent, mut gone, mut error) = (0u64, 0u64, Vec::new(), None);
    let mut upsert = crate::load::UpsertCounts::default();
    for w in waits {
        match w.await {
            Ok((batch, Ok(c))) => {
                rows += c.rows;
                sent += c.bytes;
                upsert.add(c.upsert);
                gone.extend(super::settle(batch, &c));
            }
            Ok((batch, Err(e))) => {
                batch.fail(&e.to_string());
                error.get_or_insert(e);
            }
            Err(_) => {
                error.get_or_insert(LoadError::Setup("a server's COPY workers stopped after an error (reported above)".into()));
            }
        }
    }
    budget.release(bytes);
    if error.is_some() {
        failed.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    if !gone.is_empty() {
        let _ = tx.send(CopyOutcome::Vanished(gone));
    }
    let _ = tx.send(match error {
        Some(e) => CopyOutcome::Failed(e),
        None => CopyOutcome::Loaded { rows, bytes: sent, upsert },
    });
}
