//! How rows find their leaf, per target table.
//!
//! A plain table is its own leaf. A partitioned table is routed on the
//! client with the partition tree read from the catalog, on the encoded key
//! bytes of each row; when that is not possible (row-level security or
//! triggers on the parent, a layout the router does not support, a key column
//! the input does not fill, or `--via-parent`) rows go through the parent and
//! the reason is told to the user. Rows whose time partition does not exist
//! get one just in time from the table's policy; leaf ids stay stable when the
//! tree is re-read after that.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use chute_core::encode::{PG_EPOCH_OFFSET_DAYS, PG_EPOCH_OFFSET_MICROS};
use chute_core::ident::QualifiedName;
use chute_core::partman::interval::MICROS_PER_DAY;
use chute_core::partman::planner::{self, KeyLimits};
use chute_core::partman::{KeyType, Policy};
use chute_core::route::{PartitionTree, Route};
use chute_core::rowenc::field_ranges;

use super::target::{self, ColumnPlan};
use super::{LoadError, LoadProgress, LoadSpec};
use crate::catalog::TableInfo;
use crate::exec::ExecSettings;
use crate::partman::PartitionManager;
use crate::retry::{self, Classify};

/// A leaf: an id in the load's leaf registry, or the parent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LeafRef {
    Leaf(u32),
    Parent,
}

pub enum Routed {
    To(LeafRef),
    /// No partition yet; the policy may create the interval starting here.
    Missing {
        start: i64,
    },
    Reject(String),
}

impl std::fmt::Debug for Routed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routed").finish_non_exhaustive()
    }
}

/// Just-in-time creation: the policy and what it allows.
pub(crate) struct Jit {
    pub info: TableInfo,
    pub policy: Policy,
    /// What the policy allows as of the last clock reading (see [`Jit::limits`]).
    limits: RwLock<Limits>,
    /// Where the key sits among the row's fields.
    key_field: usize,
    /// The key column's type with its typmod, for casting key texts.
    pub key_cast: String,
}

/// The keys a policy allows at one moment: the same limits and retention
/// cut-off `partition maintain` computes (`planner::key_limits`), so a row
/// the loader takes is never one retention drops at that moment.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// The clock reading these hold for.
    pub now: i64,
    pub keys: KeyLimits,
    /// Keys below this lie in intervals that end at or before the retention
    /// cut-off (the start of the interval holding the cut-off).
    oldest: Option<i64>,
}

impl Limits {
    fn at(policy: &Policy, now: i64) -> Result<Limits, chute_core::partman::planner::PlanError> {
        let keys = planner::key_limits(policy, None, now)?;
        let oldest = match keys.retention_cutoff {
            Some(c) => Some(policy.interval.floor(c, &policy.zone()?)?),
            None => None,
        };
        Ok(Limits { now, keys, oldest })
    }
}

impl Jit {
    /// The limits now. A load may run for days (a stream from stdin): the
    /// max-future limit and the retention cut-off move with the clock.
    pub(crate) fn limits(&self) -> Limits {
        let now = crate::clock::now_micros();
        let cached = *self.limits.read().expect("limits");
        if (now - cached.now).abs() < 100_000 {
            return cached;
        }
        match Limits::at(&self.policy, now) {
            Ok(l) => {
                *self.limits.write().expect("limits") = l;
                l
            }
            Err(_) => cached,
        }
    }
}

/// One version of the partition tree, with its leaves' registry ids.
pub(crate) struct TreeState {
    tree: PartitionTree,
    ids: Vec<u32>,
}

pub(crate) enum RouteMode {
    /// A plain table: every row to leaf 0.
    Single,
    /// Everything through the parent.
    Parent,
    /// Client-side routing into leaves.
    Tree(Box<TreeMode>),
}

pub(crate) struct TreeMode {
    state: RwLock<Arc<TreeState>>,
    table_to_target: Vec<Option<usize>>,
    jit: Option<Jit>,
    no_create: bool,
    /// Partitions being backfilled: not in the catalog for anyone else yet,
    /// but rows route to them (kept apart from the tree, so re-reading the
    /// tree does not lose them).
    virtuals: RwLock<Arc<Vec<Virtual>>>,
}

/// A backfilled partition's interval and leaf id.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Virtual {
    pub from: i64,
    pub to: i64,
    pub id: u32,
}

/// How rows of one table find their leaf.
pub struct Routing {
    pub(crate) parent: QualifiedName,
    /// `("a", "b", …)` for this table's COPY statements.
    pub(crate) copy_list: String,
    pub(crate) mode: RouteMode,
    /// Leaf names by id; append-only, so ids held by accumulators stay valid.
    registry: RwLock<Vec<QualifiedName>>,
    /// What earlier runs of this load committed, per (leaf, text) and input.
    committed: std::sync::OnceLock<std::collections::HashMap<(LeafRef, bool), Vec<super::journal::RangeSet>>>,
    /// How the table's rows are written (see `write`): COPY, INSERTs when
    /// row-level security applies to the loading role, a merge for upserts.
    pub(crate) writer: Arc<dyn super::write::Writer>,
    /// Row-level security applies to the loading role (rows go in as INSERTs).
    pub(crate) rls: bool,
}

impl std::fmt::Debug for Routing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routing").finish_non_exhaustive()
    }
}

/// Per-chunk routing state: the tree version in use and a scratch buffer.
pub struct RouteCtx {
    state: Option<Arc<TreeState>>,
    virtuals: Arc<Vec<Virtual>>,
    ranges: Vec<Option<(usize, usize)>>,
    /// The policy's limits when this context was made.
    limits: Option<Limits>,
}

impl std::fmt::Debug for RouteCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteCtx").finish_non_exhaustive()
    }
}

impl Routing {
    pub(crate) fn single(name: QualifiedName, copy_list: String) -> Routing {
        Routing {
            parent: name.clone(),
            copy_list,
            mode: RouteMode::Single,
            registry: RwLock::new(vec![name]),
            committed: Default::default(),
            writer: Arc::new(super::write::CopyWriter),
            rls: false,
        }
    }

    pub(crate) fn via_parent(name: QualifiedName, copy_list: String) -> Routing {
        Routing {
            parent: name,
            copy_list,
            mode: RouteMode::Parent,
            registry: RwLock::new(vec![]),
            committed: Default::default(),
            writer: Arc::new(super::write::CopyWriter),
            rls: false,
        }
    }

    fn tree(
        name: QualifiedName,
        copy_list: String,
        tree: PartitionTree,
        table_to_target: Vec<Option<usize>>,
        jit: Option<Jit>,
        no_create: bool,
    ) -> Routing {
        let names: Vec<QualifiedName> = tree.leaves.iter().map(|l| l.name.clone()).collect();
        let ids = (0..names.len() as u32).collect();
        Routing {
            parent: name,
            copy_list,
            mode: RouteMode::Tree(Box::new(TreeMode {
                state: RwLock::new(Arc::new(TreeState { tree, ids })),
                table_to_target,
                jit,
                no_create,
                virtuals: Default::default(),
            })),
            registry: RwLock::new(names),
            committed: Default::default(),
            writer: Arc::new(super::write::CopyWriter),
            rls: false,
        }
    }

    /// Makes `tree` the version new chunks route with.
    pub(crate) fn install(&self, tree: PartitionTree) {
        let RouteMode::Tree(t) = &self.mode else { return };
        let state = &t.state;
        let mut reg = self.registry.write().expect("leaf registry");
        let ids = tree
            .leaves
            .iter()
            .map(|l| match reg.iter().position(|n| *n == l.name) {
                Some(i) => i as u32,
                None => {
                    reg.push(l.name.clone());
                    (reg.len() - 1) as u32
                }
            })
            .collect();
        *state.write().expect("tree state") = Arc::new(TreeState { tree, ids });
    }

    pub fn ctx(&self) -> RouteCtx {
        let (state, virtuals) = match &self.mode {
            RouteMode::Tree(t) => (Some(t.state.read().expect("tree state").clone()), t.virtuals.read().expect("virtual leaves").clone()),
            _ => (None, Default::default()),
        };
        RouteCtx { state, virtuals, ranges: Vec::with_capacity(16), limits: self.jit().map(Jit::limits) }
    }

    /// Rows of `[from, to)` go to the partition `name` from now on, before
    /// it exists for anyone else (a backfill). Returns its leaf id.
    pub(crate) fn open_virtual(&self, name: &QualifiedName, from: i64, to: i64) -> u32 {
        let RouteMode::Tree(t) = &self.mode else { return 0 };
        let id = {
            let mut reg = self.registry.write().expect("leaf registry");
            match reg.iter().position(|n| n == name) {
                Some(i) => i as u32,
                None => {
                    reg.push(name.clone());
                    (reg.len() - 1) as u32
                }
            }
        };
        let mut v = t.virtuals.write().expect("virtual leaves");
        let mut list: Vec<Virtual> = v.as_ref().clone();
        // Sorted by interval (they never overlap): rows find theirs by binary search.
        list.insert(list.partition_point(|x| x.from < from), Virtual { from, to, id });
        *v = Arc::new(list);
        id
    }

    /// Rows of a backfill that did not happen route as if it never began.
    pub(crate) fn close_virtual(&self, id: u32) {
        let RouteMode::Tree(t) = &self.mode else { return };
        let mut v = t.virtuals.write().expect("virtual leaves");
        let list: Vec<Virtual> = v.iter().filter(|x| x.id != id).copied().collect();
        *v = Arc::new(list);
    }

    /// A backfilled partition found missing later (the server that attached
    /// it was lost in a failover, or it was dropped since): its rows no
    /// longer route to it, they take the tree as it is now.
    pub(crate) fn forget_virtual(&self, name: &str) {
        let RouteMode::Tree(t) = &self.mode else { return };
        let ids: Vec<u32> = {
            let reg = self.registry.read().expect("leaf registry");
            t.virtuals.read().expect("virtual leaves").iter().filter(|v| reg[v.id as usize].to_string() == name).map(|v| v.id).collect()
        };
        for id in ids {
            self.close_virtual(id);
        }
    }

    /// Another context on the same tree version as `ctx`: rows routed later
    /// with it land where rows routed with `ctx` did (a chunk's rows for one
    /// leaf must travel together, see `journal`).
    pub(crate) fn same_version(ctx: &RouteCtx) -> RouteCtx {
        RouteCtx { state: ctx.state.clone(), virtuals: ctx.virtuals.clone(), ranges: Vec::new(), limits: ctx.limits }
    }

    pub(crate) fn name(&self, leaf: LeafRef) -> QualifiedName {
        match leaf {
            LeafRef::Leaf(i) => self.registry.read().expect("leaf registry")[i as usize].clone(),
            LeafRef::Parent => self.parent.clone(),
        }
    }

    /// Takes what earlier runs committed into this table's leaves (journal
    /// target names as keys); returns how many targets matched.
    pub(crate) fn set_committed(&self, committed: &super::journal::Committed) -> usize {
        let mut map = std::collections::HashMap::new();
        let reg = self.registry.read().expect("leaf registry");
        let refs = reg.iter().enumerate().map(|(i, n)| (LeafRef::Leaf(i as u32), n)).chain([(LeafRef::Parent, &self.parent)]);
        for (leaf, name) in refs {
            for text in [false, true] {
                if let Some(sets) = committed.by_target.get(&super::journal::target_key(&name.to_string(), text)) {
                    map.insert((leaf, text), sets.clone());
                }
            }
        }
        let n = map.len();
        let _ = self.committed.set(map);
        n
    }

    /// Did an earlier run of this load commit the row at `offset` of `input` into `leaf`?
    #[inline]
    pub(crate) fn is_committed(&self, leaf: LeafRef, text: bool, input: usize, offset: u64) -> bool {
        match self.committed.get() {
            Some(map) if !map.is_empty() => map.get(&(leaf, text)).and_then(|v| v.get(input)).is_some_and(|set| set.contains(offset)),
            _ => false,
        }
    }

    /// Whether rows are routed into partitions on the client.
    pub(crate) fn is_tree(&self) -> bool {
        matches!(self.mode, RouteMode::Tree(_))
    }

    pub(crate) fn jit(&self) -> Option<&Jit> {
        match &self.mode {
            RouteMode::Tree(t) => t.jit.as_ref(),
            _ => None,
        }
    }

    /// Routes one encoded row.
    pub fn route(&self, ctx: &mut RouteCtx, row: &[u8]) -> Routed {
        let RouteMode::Tree(t) = &self.mode else {
            return Routed::To(if matches!(self.mode, RouteMode::Single) { LeafRef::Leaf(0) } else { LeafRef::Parent });
        };
        let (table_to_target, jit, no_create) = (&t.table_to_target, &t.jit, &t.no_create);
        let state = ctx.state.as_ref().expect("tree mode has a state");
        if field_ranges(row, &mut ctx.ranges).is_none() {
            return Routed::Reject("the encoded row is malformed (a chute bug)".into());
        }
        let ranges = &ctx.ranges;
        let field = |pos: usize| -> Option<&[u8]> {
            let t = table_to_target.get(pos).copied().flatten()?;
            let (s, l) = ranges.get(t).copied().flatten()?;
            Some(&row[s..s + l])
        };
        match state.tree.route(field) {
            Route::Leaf(id) => {
                // Past retention is refused even while its partition exists:
                // `partition maintain` may drop it any moment.
                if let Some(j) = jit
                    && ctx.limits.is_some_and(|l| l.oldest.is_some())
                    && let Some(key) =
                        ranges.get(j.key_field).copied().flatten().and_then(|(s, l)| key_value(j.policy.key_type, &row[s..s + l]))
                    && let Some(refusal) = past_retention(j, ctx.limits, key)
                {
                    return refusal;
                }
                Routed::To(LeafRef::Leaf(state.ids[id as usize]))
            }
            Route::NoPartition { parent, level } => {
                let Some(j) = jit.as_ref().filter(|_| level == 0) else {
                    return Routed::Reject(format!("no partition of relation {parent} found for row (SQLSTATE 23514)"));
                };
                let key = ranges.get(j.key_field).copied().flatten().map(|(s, l)| &row[s..s + l]);
                if !ctx.virtuals.is_empty()
                    && let Some(k) = key.and_then(|w| key_value(j.policy.key_type, w))
                    && let Some(v) = ctx.virtuals.get(ctx.virtuals.partition_point(|v| v.to <= k)).filter(|v| v.from <= k)
                {
                    // Past retention is refused, as for a partition in the tree.
                    return past_retention(j, ctx.limits, k).unwrap_or(Routed::To(LeafRef::Leaf(v.id)));
                }
                let limits = ctx.limits.map_or_else(|| j.limits().keys, |l| l.keys);
                missing(j, &limits, *no_create, parent, key)
            }
            Route::BadKey { position } => {
                Routed::Reject(format!("the key column at position {position} has a malformed value (a chute bug)"))
            }
        }
    }
}

impl Routing {
    /// Routes a row the server parses itself (it travels as text, through
    /// the parent) on its key's wire value alone: to the parent when a
    /// top-level partition (or the DEFAULT one) takes the key, else just in
    /// time creation or the true reason for refusing it. Tables without a
    /// policy leave everything to the server.
    pub(crate) fn route_key(&self, ctx: &RouteCtx, key: Option<&[u8]>) -> Routed {
        let (RouteMode::Tree(t), Some(state)) = (&self.mode, ctx.state.as_ref()) else { return Routed::To(LeafRef::Parent) };
        let Some(j) = t.jit.as_ref() else { return Routed::To(LeafRef::Parent) };
        let pos = state.tree.top_level_key().columns[0].position;
        match state.tree.route(|p| if p == pos { key } else { None }) {
            Route::NoPartition { parent, level: 0 } => {
                let limits = ctx.limits.map_or_else(|| j.limits().keys, |l| l.keys);
                missing(j, &limits, t.no_create, parent, key)
            }
            _ => {
                // Past retention is refused even while its partition exists, as for binary rows.
                key.and_then(|w| key_value(j.policy.key_type, w))
                    .and_then(|k| past_retention(j, ctx.limits, k))
                    .unwrap_or(Routed::To(LeafRef::Parent))
            }
        }
    }
}

impl Jit {
    /// Where the key sits among the row's fields.
    pub(crate) fn key_field(&self) -> usize {
        self.key_field
    }
}

/// A key in an interval past retention, refused even while its partition
/// exists (`partition maintain` may drop it any moment), with the reason.
fn past_retention(j: &Jit, limits: Option<Limits>, key: i64) -> Option<Routed> {
    let limits = limits?;
    if limits.oldest.is_none_or(|oldest| key >= oldest) {
        return None;
    }
    planner::check_key(&j.policy, &KeyLimits { max_key: None, ..limits.keys }, key).err().map(|r| Routed::Reject(r.to_string()))
}

/// A row no top-level partition holds: the interval to create, or why not.
fn missing(j: &Jit, limits: &KeyLimits, no_create: bool, parent: &QualifiedName, key: Option<&[u8]>) -> Routed {
    let Some(wire) = key else {
        return Routed::Reject(format!("no partition of relation {parent} found for row: the key {:?} is NULL", j.policy.key));
    };
    if let Some(reason) = infinite_key(j, parent, wire) {
        return Routed::Reject(reason);
    }
    let Some(key) = key_value(j.policy.key_type, wire) else {
        return Routed::Reject(format!("no partition of relation {parent} found for row: its key is outside the range chute handles"));
    };
    if let Err(refusal) = planner::check_key(&j.policy, limits, key) {
        return Routed::Reject(refusal.to_string());
    }
    if no_create {
        return Routed::Reject(format!(
            "no partition of relation {parent} holds this row, and {} forbids making one",
            crate::setting::Setting::NoCreatePartitions
        ));
    }
    match j.policy.interval.floor(key, &j.policy.zone().unwrap_or(jiff::tz::TimeZone::UTC)) {
        Ok(start) => Routed::Missing { start },
        Err(e) => Routed::Reject(e.to_string()),
    }
}

/// The true reason to refuse `infinity` or `-infinity`, which no partition
/// chute creates can hold (only a bound at MAXVALUE or MINVALUE, or a
/// DEFAULT partition, which the tree routes to before this is asked).
fn infinite_key(j: &Jit, parent: &QualifiedName, wire: &[u8]) -> Option<String> {
    let (later, earlier) = match j.policy.key_type {
        KeyType::Timestamptz | KeyType::Timestamp => {
            let v = i64::from_be_bytes(wire.try_into().ok()?);
            (v == i64::MAX, v == i64::MIN)
        }
        KeyType::Date => {
            let v = i32::from_be_bytes(wire.try_into().ok()?);
            (v == i32::MAX, v == i32::MIN)
        }
        _ => return None,
    };
    let unless = format!("no partition of {parent} can hold it (only one bounded by MAXVALUE or MINVALUE, or a DEFAULT partition, could)");
    if later {
        Some(match &j.policy.max_future {
            Some(m) => format!("infinity is further ahead than {} {m} allows: {unless}", crate::setting::Setting::MaxFuture),
            None => format!("infinity is later than any time partition: {unless}"),
        })
    } else if earlier {
        Some(match &j.policy.retention {
            Some(r) => format!("-infinity is older than the retention of {}: {unless}", r.keep),
            None => format!("-infinity is earlier than any time partition: {unless}"),
        })
    } else {
        None
    }
}

/// A key's binary wire value as the planner's i64.
fn key_value(ty: KeyType, v: &[u8]) -> Option<i64> {
    Some(match ty {
        KeyType::Timestamptz | KeyType::Timestamp => i64::from_be_bytes(v.try_into().ok()?).checked_add(PG_EPOCH_OFFSET_MICROS)?,
        KeyType::Date => {
            (i64::from(i32::from_be_bytes(v.try_into().ok()?)) + i64::from(PG_EPOCH_OFFSET_DAYS)).checked_mul(MICROS_PER_DAY)?
        }
        KeyType::Int2 => i64::from(i16::from_be_bytes(v.try_into().ok()?)),
        KeyType::Int4 => i64::from(i32::from_be_bytes(v.try_into().ok()?)),
        KeyType::Int8 => i64::from_be_bytes(v.try_into().ok()?),
    })
}

/// Decides how one table's rows are routed and, for an upsert, how they
/// are merged; returns the routing and, when rows go through the parent, why.
pub(crate) async fn build(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    info: &TableInfo,
    plan: &ColumnPlan,
    progress: &mut dyn LoadProgress,
) -> Result<(Routing, Option<String>), LoadError> {
    let (mut routing, reason) = route(spec, control, info, plan, progress).await?;
    if let Some(want) = &spec.on_conflict {
        routing.writer = Arc::new(super::write::merge::MergeWriter(merge_plan(control, info, plan, &routing, want).await?));
    }
    Ok((routing, reason))
}

/// An upsert made concrete for this table and checked with the server
/// before any row moves (see `conflict`), or the refusal with its fix.
async fn merge_plan(
    control: &tokio_postgres::Client,
    info: &TableInfo,
    plan: &ColumnPlan,
    routing: &Routing,
    want: &chute_core::upsert::OnConflict,
) -> Result<super::write::merge::MergePlan, LoadError> {
    use crate::conflict::{self, ConflictError};
    let refused = |e: ConflictError| match e {
        ConflictError::Refused(m) => LoadError::Setup(m),
        ConflictError::Sql(e) => LoadError::Sql(e),
    };
    if routing.rls {
        return Err(LoadError::Setup(format!(
            "row-level security on {} applies to this role, so its rows go in as INSERTs that chute does not upsert yet: load as a role \
             the policies do not apply to (such as the owner), or without {}",
            info.name,
            crate::setting::Setting::OnConflict
        )));
    }
    let loaded: Vec<String> = plan.targets.iter().map(|t| t.name.clone()).collect();
    let resolved = conflict::resolve(control, info, &loaded, want).await.map_err(refused)?;
    let leaves = info.relkind != 'p' || !matches!(routing.mode, RouteMode::Parent);
    let leaf = match &routing.mode {
        RouteMode::Tree(_) => routing.registry.read().expect("leaf registry").first().cloned(),
        _ => None,
    };
    conflict::check_with_server(control, info, &loaded, &resolved, leaf.as_ref()).await.map_err(refused)?;
    Ok(super::write::merge::MergePlan::new(info.oid as usize, &routing.parent.quoted(), &plan.copy_list, &resolved, &loaded, leaves))
}

/// How one table's rows are routed; returns the routing and, when rows go
/// through the parent, why.
async fn route(
    spec: &LoadSpec,
    control: &tokio_postgres::Client,
    info: &TableInfo,
    plan: &ColumnPlan,
    progress: &mut dyn LoadProgress,
) -> Result<(Routing, Option<String>), LoadError> {
    let parent = |reason: String, progress: &mut dyn LoadProgress| {
        progress.notice(&format!("loading {} through the parent: {reason}", info.name));
        Ok((Routing::via_parent(info.name.clone(), plan.copy_list.clone()), Some(reason)))
    };
    let access = crate::privilege::table_access(control, info.oid, info.relkind == 'p')
        .await
        .map_err(|e| LoadError::sql(format!("reading the privileges on {}", info.name), e))?;
    if !access.insert {
        return Err(LoadError::Setup(format!(
            "role {} may not insert into {} (SQLSTATE 42501): as its owner run {}; then run the load again",
            access.role,
            info.name,
            access.insert_grant(&info.name)
        )));
    }
    if access.rls_active {
        let reason = format!(
            "row-level security on {} applies to role {}, and PostgreSQL refuses COPY there (SQLSTATE 0A000): rows go in as batched INSERTs \
             that its policies check (slower than COPY; a role the policies do not apply to, such as the owner, loads with COPY)",
            info.name, access.role
        );
        progress.notice(&format!("loading {} through the parent: {reason}", info.name));
        let mut routing = Routing::via_parent(info.name.clone(), plan.copy_list.clone());
        let insert = super::write::insert::InsertPlan::new(control, &info.name.quoted(), info.oid, plan).await?;
        routing.writer = Arc::new(super::write::insert::InsertWriter(insert));
        routing.rls = true;
        return Ok((routing, Some(reason)));
    }
    if spec.via_parent {
        return Ok((
            Routing::via_parent(info.name.clone(), plan.copy_list.clone()),
            Some(format!("{} was given", crate::setting::Setting::ViaParent)),
        ));
    }
    if let Some(reason) = target::parent_only_reason(info) {
        return parent(reason, progress);
    }
    if info.relkind != 'p' {
        return Ok((Routing::single(info.name.clone(), plan.copy_list.clone()), None));
    }
    let tree = match read_tree(control, &info.name).await {
        Ok(t) => t,
        Err(crate::layout::LayoutError::Route(e)) => return parent(format!("chute cannot route this layout itself ({e})"), progress),
        Err(e) if e.connection_lost() => {
            return Err(LoadError::Layout { context: format!("reading the partitions of {}", info.name), source: Box::new(e) });
        }
        Err(e) => return Err(LoadError::Setup(format!("reading the partitions of {}: {e}", info.name))),
    };
    if access.leaves_denied > 0 {
        return parent(
            format!(
                "role {} may insert into {} but not directly into {} of its partitions (such as {}); PostgreSQL routes what is inserted through the parent",
                access.role,
                info.name,
                access.leaves_denied,
                access.leaf_example.as_deref().unwrap_or("?")
            ),
            progress,
        );
    }
    if let Some(pos) = tree.key_positions().iter().find(|p| plan.table_to_target.get(**p).copied().flatten().is_none()) {
        return parent(
            format!("the partition key column at position {} is not among the loaded columns; the server fills its default", pos + 1),
            progress,
        );
    }
    let jit = jit_for(spec, info, &tree, plan, access.owns, progress).await?;
    Ok((Routing::tree(info.name.clone(), plan.copy_list.clone(), tree, plan.table_to_target.clone(), jit, spec.no_create_partitions), None))
}

/// The table's policy, when it has one whose key is the tree's top-level range key.
async fn jit_for(
    spec: &LoadSpec,
    info: &TableInfo,
    tree: &PartitionTree,
    plan: &ColumnPlan,
    owns: bool,
    progress: &mut dyn LoadProgress,
) -> Result<Option<Jit>, LoadError> {
    let mgr = PartitionManager::connect(&spec.target, Default::default()).await?;
    let policy = match mgr.policies().await {
        Ok(ps) => ps.into_iter().find(|p| p.parent == info.name),
        // A lost connection is retried by the caller; an unreadable policy means no JIT.
        Err(e) if e.connection_lost() => return Err(e.into()),
        Err(_) => return Ok(None),
    };
    let Some(policy) = policy else { return Ok(None) };
    let top = tree.top_level_key();
    if top.strategy != chute_core::route::Strategy::Range || top.columns.len() != 1 || top.columns[0].name != policy.key {
        return Ok(None);
    }
    let Some(key_field) = plan.table_to_target.get(top.columns[0].position).copied().flatten() else { return Ok(None) };
    if !owns {
        // ATTACH PARTITION needs the parent's owner (and reading the newest
        // key needs SELECT on the partitions): rather than fail on a
        // partition unrelated to the row, make none.
        progress.notice(&format!(
            "the loading role does not own {0}, and only its owner may create and attach partitions: rows with no partition yet are \
             rejected instead of created just in time; make partitions ahead as the owner (chute partition maintain {0}) or load as the owner",
            info.name
        ));
        return Ok(None);
    }
    let key_cast: String = mgr
        .client()
        .query_one(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = $1 AND attname = $2",
            &[&info.oid, &top.columns[0].name],
        )
        .await
        .map_err(|e| LoadError::sql("reading the partition key's type", e))?
        .get(0);
    let limits =
        Limits::at(&policy, crate::clock::now_micros()).map_err(|e| LoadError::Setup(format!("the policy of {}: {e}", info.name)))?;
    Ok(Some(Jit { info: info.clone(), policy, limits: RwLock::new(limits), key_field, key_cast }))
}

/// Reads a partition tree. A partition dropped while the catalog is read
/// (retention running meanwhile) shows an empty bound: read again.
async fn read_tree(client: &tokio_postgres::Client, root: &QualifiedName) -> Result<PartitionTree, crate::layout::LayoutError> {
    retry::run!(&retry::Policy::reread(), |_| crate::layout::load_partition_tree(client, root))
}

/// Reads the partition tree of `parent` again and routes new rows with it.
pub(crate) async fn reread_tree(client: &tokio_postgres::Client, routing: &Routing) -> Result<(), LoadError> {
    let tree = read_tree(client, &routing.parent)
        .await
        .map_err(|e| LoadError::Layout { context: format!("re-reading the partitions of {}", routing.parent), source: Box::new(e) })?;
    routing.install(tree);
    Ok(())
}

/// Keeps one partition manager connection for just-in-time creation.
pub(crate) struct JitCreator {
    mgr: Option<PartitionManager>,
    /// How long a lost connection is retried (`--retry-for`).
    retry_for: Duration,
}

impl JitCreator {
    pub(crate) fn new(retry_for: Duration) -> Self {
        JitCreator { mgr: None, retry_for }
    }

    /// Creates the partitions for `starts`, then re-reads the tree. Returns
    /// the partitions created. A lost connection (a restarted server, or
    /// postgres_fdw on the coordinator losing a data node: SQLSTATE class 08
    /// either way) is retried on a new one: each attempt plans against the
    /// catalog as it finds it, so what an earlier attempt committed is not
    /// made twice.
    pub(crate) async fn create(
        &mut self,
        spec_target: &crate::ConnectOptions,
        routing: &Routing,
        starts: &[i64],
    ) -> Result<Vec<QualifiedName>, LoadError> {
        let Some(j) = routing.jit() else { return Ok(Vec::new()) };
        let policy = retry::Policy::reconnect(self.retry_for);
        let made = retry::run!(&policy, |a| async {
            if a.reconnect() {
                self.mgr = None;
            }
            self.attempt(spec_target, routing, j, starts).await
        });
        made.map_err(|e| match policy.gave_up_on(&e) {
            true => LoadError::Setup(format!(
                "making new partitions of {}: {e}; it was retried for {} {:?}: check that the server and every data node are up (chute cluster status shows a node that is down), then run the same command again: the rows committed so far are skipped",
                routing.parent,
                crate::setting::Setting::RetryFor,
                self.retry_for
            )),
            false => e,
        })
    }

    async fn attempt(
        &mut self,
        spec_target: &crate::ConnectOptions,
        routing: &Routing,
        j: &Jit,
        starts: &[i64],
    ) -> Result<Vec<QualifiedName>, LoadError> {
        if self.mgr.as_ref().is_none_or(|m| m.client().is_closed()) {
            let settings = ExecSettings { retry_for: self.retry_for, ..ExecSettings::default() };
            self.mgr = Some(PartitionManager::connect(spec_target, settings).await?);
        }
        let mgr = self.mgr.as_mut().expect("connected above");
        let created = mgr.ensure(&j.info, &j.policy, starts, j.limits().now).await?;
        reread_tree(mgr.client(), routing).await?;
        Ok(created)
    }
}
