//! `chute partition …`: the partition manager from the command line.

use std::time::Duration;

use anyhow::Context;
use chute_core::doctor::shell_word;
use chute_core::ident::QualifiedName;
use chute_core::partman::interval::Span;
use chute_core::partman::policy::{parse_duration, parse_instant};
use chute_core::partman::{HashSub, KeyType, Plan, Policy, Retention, RetentionMode, Step, StepKind};
use chute_engine::ConnectOptions;
use chute_engine::catalog::CatalogError;
use chute_engine::exec::{ExecSettings, StepEvent};
use chute_engine::partman::{CreateRequest, PartitionManager, PartmanError, TableStatus};
use jiff::tz::TimeZone;

use crate::Outcome;
use crate::args::{
    ConnArgs, LockArgs, PartitionCommand, PartitionCreateArgs, PartitionMaintainArgs, PlacementArg, RetentionModeArg, TableConflictArg,
    TableUpsertArgs,
};
use crate::settings;
use crate::signals::{Second, Signals};

pub async fn run(conn: &ConnArgs, cmd: PartitionCommand) -> anyhow::Result<Outcome> {
    // Flags are checked before a server is chosen, started or connected to.
    if let PartitionCommand::Create(a) = &cmd {
        settings::check_interval("--interval", &a.interval)?;
        settings::check_zone("--tz", &a.tz)?;
    }
    let opts = settings::target(conn)?;
    match cmd {
        PartitionCommand::Create(a) => create(&opts, a).await,
        PartitionCommand::List { json } => list(&opts, json).await,
        PartitionCommand::Maintain(a) => maintain(&opts, a).await,
        PartitionCommand::Status { tables, json, now } => status(&opts, tables, json, now).await,
        PartitionCommand::Undo { table, dry_run, lock } => release(&opts, &table, Release::Undo, dry_run, &lock).await,
        PartitionCommand::Forget { table, dry_run, lock } => release(&opts, &table, Release::Forget, dry_run, &lock).await,
        PartitionCommand::Set(a) => {
            anyhow::ensure!(a.upsert.on_conflict.is_some(), "say what to set: --on-conflict error|nothing|update");
            set_upsert(&opts, &table_name(&a.table)?, &a.upsert).await?;
            Ok(Outcome::Ok)
        }
    }
}

/// Stores a table's upsert setting and says what it is now.
async fn set_upsert(opts: &ConnectOptions, table: &QualifiedName, a: &TableUpsertArgs) -> anyhow::Result<()> {
    use chute_core::upsert::{ConflictAction, OnConflict};
    let Some(action) = a.on_conflict else { return Ok(()) };
    let mut want = OnConflict::new(match action {
        TableConflictArg::Error => ConflictAction::Error,
        TableConflictArg::Nothing => ConflictAction::Nothing,
        TableConflictArg::Update => ConflictAction::Update,
    });
    want.key = a.conflict_key.clone();
    want.update_columns = a.update_columns.clone();
    want.update_if = a.update_if.clone();
    want.per_request = a.per_request;
    let client = opts.connect().await?;
    let stored = chute_engine::conflict::set_table_setting(&client, table, Some(&want)).await.map_err(anyhow::Error::msg)?;
    match stored {
        Some(s) => eprintln!(
            "chute: {table} upserts: on conflict {}{}",
            s.describe(),
            if s.per_request { " (a request may choose another)" } else { "" }
        ),
        None => eprintln!("chute: {table} does not upsert: a row whose key is there already is rejected"),
    }
    Ok(())
}

pub(super) fn exec_settings(lock: &LockArgs) -> anyhow::Result<ExecSettings> {
    Ok(ExecSettings {
        lock_timeout: parse_duration(&lock.lock_timeout).context("--lock-timeout")?,
        retry_for: parse_duration(&lock.retry_for).context("--retry-for")?,
    })
}

fn now_micros(now: &Option<String>) -> anyhow::Result<i64> {
    match now {
        Some(t) => Ok(parse_instant(t, &TimeZone::UTC).context("--now")?),
        None => Ok(chute_engine::clock::now_micros()),
    }
}

fn table_name(t: &str) -> anyhow::Result<QualifiedName> {
    Ok(QualifiedName::parse(t)?)
}

/// Says on stderr what a run does besides its steps (a lost connection and
/// the reconnect).
pub(super) fn notices() -> chute_engine::exec::Notices {
    chute_engine::exec::Notices::new(|what| eprintln!("chute: {what}"))
}

/// Prints each step as it runs (stderr), unless JSON was asked for.
pub(super) fn step_printer(quiet: bool) -> impl FnMut(usize, &Step, StepEvent) {
    move |i, step, event| {
        if quiet {
            return;
        }
        match event {
            StepEvent::Started => {}
            StepEvent::Retrying { attempt, pause } => {
                eprintln!("chute: step {}: lock not granted within the timeout; retry {attempt} in {:.1}s", i + 1, pause.as_secs_f64())
            }
            StepEvent::Done => eprintln!("chute: done: {}", step.description),
        }
    }
}

async fn create(opts: &ConnectOptions, a: PartitionCreateArgs) -> anyhow::Result<Outcome> {
    let now = now_micros(&a.plan.now)?;
    let interval = Span::parse(&a.interval)?;
    let hash = match &a.hash {
        Some(h) => {
            let (col, n) = h.rsplit_once(':').context("--hash takes COLUMN:N, e.g. dev_id:16")?;
            Some(HashSub { column: col.to_owned(), modulus: n.parse().context("--hash takes COLUMN:N with N a whole number")? })
        }
        None => match (&a.distribute_by, a.shards) {
            (Some(col), Some(n)) => Some(HashSub { column: col.clone(), modulus: n }),
            _ => None,
        },
    };
    let retention = match &a.retention {
        Some(r) => Some(Retention {
            keep: Span::parse(r).context("--retention")?,
            mode: match a.retention_mode {
                RetentionModeArg::Drop => RetentionMode::Drop,
                RetentionModeArg::Detach => RetentionMode::Detach,
            },
            schema: a.retention_schema.clone(),
        }),
        None => {
            anyhow::ensure!(a.retention_schema.is_none(), "--retention-schema goes with --retention and --retention-mode detach");
            None
        }
    };
    let max_future = match &a.max_future {
        Some(m) => Some(Span::parse(m).context("--max-future")?),
        None if interval.is_time() => Some(Span::parse("1d").expect("static")),
        None => None,
    };
    // The key's type is filled in from the catalog.
    let policy = Policy {
        premake: a.premake,
        max_future,
        retention,
        tz: a.tz.clone(),
        hash,
        unlogged: a.unlogged,
        default_partition: a.default_partition,
        ..Policy::new(table_name(&a.table)?, a.key.clone(), KeyType::Timestamptz, interval)
    };
    let like = a.like.as_deref().map(table_name).transpose()?;
    let mut mgr = PartitionManager::connect(opts, exec_settings(&a.plan.lock)?).await?;
    let mut policy = policy;
    if a.distribute_by.is_some() || a.placement.is_some() {
        let nodes = chute_engine::cluster::nodes(mgr.client()).await?;
        let flag = if a.placement.is_some() { "--placement" } else { "--distribute-by" };
        anyhow::ensure!(!nodes.is_empty(), "{flag} needs data nodes: add them first with chute cluster init --node NAME=URL …");
        let placement = a.placement.map(|p| match p {
            PlacementArg::RoundRobin => chute_core::partman::policy::Placement::RoundRobin,
            PlacementArg::Hash => chute_core::partman::policy::Placement::Hash,
        });
        policy.distribution = Some(chute_core::partman::Distribution { nodes: nodes.into_iter().map(|n| n.name).collect(), placement });
    }
    let req = CreateRequest { policy, like, columns: a.columns.clone(), start: a.start.clone() };
    let (policy, plan) = mgr.create(req, now, a.plan.dry_run, &mut step_printer(a.plan.json)).await?;
    report_plan(&policy.parent, &plan, a.plan.dry_run, a.plan.json);
    if !a.plan.dry_run {
        set_upsert(opts, &policy.parent, &a.upsert).await?;
    }
    if !a.plan.dry_run && !a.plan.json {
        eprintln!(
            "chute: {} is partitioned by {} on {} ({} partitions created); keep it ahead with: chute partition maintain --every 10min",
            policy.parent,
            policy.interval,
            policy.key,
            plan.created().count()
        );
    }
    Ok(Outcome::Ok)
}

pub(super) fn report_plan(table: &QualifiedName, plan: &Plan, dry_run: bool, json: bool) {
    if json {
        let v = serde_json::json!({ "table": table.to_string(), "dry_run": dry_run, "steps": plan.steps, "notes": plan.notes });
        println!("{v}");
    } else if dry_run {
        println!("-- plan for {table} (dry run: nothing was changed)");
        print!("{plan}");
    } else {
        for n in &plan.notes {
            eprintln!("chute: note: {n}");
        }
    }
}

async fn list(opts: &ConnectOptions, json: bool) -> anyhow::Result<Outcome> {
    let mgr = PartitionManager::connect(opts, ExecSettings::default()).await?;
    let policies = mgr.policies().await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&policies)?);
        return Ok(Outcome::Ok);
    }
    if policies.is_empty() {
        println!("no policies yet: chute partition create TABLE --key COLUMN --interval 1d");
        return Ok(Outcome::Ok);
    }
    println!("{:<32} {:<14} {:<8} {:>7}  {:<16} {:<14} extras", "table", "key", "interval", "premake", "retention", "tz");
    for p in policies {
        let retention =
            p.retention.as_ref().map(|r| format!("{} ({})", r.keep, if r.mode == RetentionMode::Drop { "drop" } else { "detach" }));
        let mut extras = Vec::new();
        if let Some(h) = &p.hash {
            extras.push(format!("hash {}:{}", h.column, h.modulus));
        }
        if p.default_partition {
            extras.push("default".into());
        }
        if p.unlogged {
            extras.push("unlogged".into());
        }
        if let Some(m) = p.max_future {
            extras.push(format!("max-future {m}"));
        }
        println!(
            "{:<32} {:<14} {:<8} {:>7}  {:<16} {:<14} {}",
            p.parent.to_string(),
            format!("{} {}", p.key, p.key_type.sql_name()),
            p.interval.to_string(),
            p.premake,
            retention.unwrap_or_else(|| "-".into()),
            p.tz,
            extras.join(", ")
        );
    }
    Ok(Outcome::Ok)
}

async fn maintain(opts: &ConnectOptions, a: PartitionMaintainArgs) -> anyhow::Result<Outcome> {
    let settings = exec_settings(&a.plan.lock)?;
    let every = a.every.as_deref().map(parse_duration).transpose().context("--every")?;
    anyhow::ensure!(!(every.is_some() && a.plan.now.is_some()), "--now and --every do not go together");
    let named: Vec<QualifiedName> = a.tables.iter().map(|t| table_name(t)).collect::<anyhow::Result<_>>()?;
    // Listening from the start to the end of the run: a signal during a
    // pass ends it cleanly (the table being changed finishes, or its lock
    // wait ends), then chute exits 130 or 143.
    let stop = Signals::listen(Second::Wait);
    let mut mgr = PartitionManager::connect_within(opts, settings, notices()).await?;
    mgr.set_cancel(stop.flag());
    loop {
        let failed = maintain_once(&mut mgr, &named, &a, &stop).await?;
        if let Some(outcome) = stopped(&stop, "maintenance stopped") {
            return Ok(outcome);
        }
        let Some(pause) = every else {
            return Ok(if failed > 0 { Outcome::Error } else { Outcome::Ok });
        };
        if !a.plan.json {
            eprintln!("chute: next maintenance in {}", humanize(pause));
        }
        let mut signal = stop.clone();
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = signal.first() => {}
        }
        if let Some(outcome) = stopped(&stop, "maintenance stopped between runs") {
            return Ok(outcome);
        }
        // A long-running daemon outlives connections: reconnect when needed.
        if mgr.client().is_closed() {
            mgr = PartitionManager::connect_within(opts, settings, notices()).await?;
            mgr.set_cancel(stop.flag());
        }
    }
}

/// The signal's outcome once one came, said on stderr.
fn stopped(signals: &Signals, what: &str) -> Option<Outcome> {
    let outcome = signals.outcome()?;
    let how = if outcome == Outcome::Terminated { "terminated" } else { "interrupted" };
    eprintln!("chute: {how}; {what}");
    Some(outcome)
}

fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{}h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{}min", s / 60)
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

/// One pass over the tables; returns how many failed (each failure is
/// reported, and the other tables are still maintained).
async fn maintain_once(
    mgr: &mut PartitionManager,
    named: &[QualifiedName],
    a: &PartitionMaintainArgs,
    stop: &Signals,
) -> anyhow::Result<usize> {
    let now = now_micros(&a.plan.now)?;
    let tables: Vec<QualifiedName> =
        if named.is_empty() { mgr.policies().await?.into_iter().map(|p| p.parent).collect() } else { named.to_vec() };
    if tables.is_empty() && !a.plan.json {
        eprintln!("chute: no table has a policy yet; nothing to maintain");
    }
    let mut failed = 0;
    for t in &tables {
        if stop.outcome().is_some() {
            break;
        }
        match mgr.maintain(t, now, a.plan.dry_run, &mut step_printer(a.plan.json)).await {
            Ok(plan) => {
                report_plan(t, &plan, a.plan.dry_run, a.plan.json);
                if !a.plan.dry_run && !a.plan.json {
                    eprintln!("chute: maintained {t}: {}", summarize(&plan));
                }
            }
            // A policy left by a table dropped with SQL: nothing to maintain there, and
            // no reason to fail the other tables' runs (a cron job's) until it is forgotten.
            Err(PartmanError::Catalog(CatalogError::NoTable(_))) if named.is_empty() => {
                let fix = format!("chute partition forget {}", shell_word(&t.to_string()));
                if a.plan.json {
                    println!("{}", serde_json::json!({ "table": t.to_string(), "skipped": "the table no longer exists", "fix": fix }));
                } else {
                    eprintln!(
                        "chute: warning: skipped {t}: chute keeps a partition policy for it, but the table no longer exists (dropped with SQL?); `{fix}` removes the policy"
                    );
                }
            }
            Err(e) => {
                failed += 1;
                let gone = matches!(e, PartmanError::Catalog(CatalogError::NoTable(_)));
                let mut e = e.to_string();
                if gone {
                    e += &format!(
                        "; if it was dropped with SQL, `chute partition forget {}` removes its policy",
                        shell_word(&t.to_string())
                    );
                }
                if a.plan.json {
                    println!("{}", serde_json::json!({ "table": t.to_string(), "error": e }));
                } else {
                    eprintln!("chute: error: maintaining {t}: {e}");
                }
            }
        }
    }
    Ok(failed)
}

fn summarize(plan: &Plan) -> String {
    use chute_core::partman::StepKind as K;
    if plan.is_empty() {
        return "nothing to do".into();
    }
    let count = |f: fn(&K) -> bool| plan.steps.iter().filter(|s| f(&s.kind)).count();
    let parts = [
        (count(|k| matches!(k, K::CreatePartition { .. })), "partitions created"),
        (count(|k| matches!(k, K::CreatePartition { moves_default_rows: true, .. })), "of them with rows moved out of DEFAULT"),
        (count(|k| matches!(k, K::DetachConcurrently { .. } | K::Detach { .. })), "detached"),
        (count(|k| matches!(k, K::FinalizeDetach { .. })), "interrupted detaches finished"),
        (count(|k| matches!(k, K::DropPartition { .. })), "dropped"),
        (count(|k| matches!(k, K::MoveToSchema { .. })), "moved to the retention schema"),
        (count(|k| matches!(k, K::CreateDefault { .. })), "DEFAULT partition created"),
    ];
    parts.iter().filter(|(n, _)| *n > 0).map(|(n, what)| format!("{n} {what}")).collect::<Vec<_>>().join(", ")
}

async fn status(opts: &ConnectOptions, tables: Vec<String>, json: bool, now: Option<String>) -> anyhow::Result<Outcome> {
    let now = now_micros(&now)?;
    let mgr = PartitionManager::connect(opts, ExecSettings::default()).await?;
    let names: Vec<QualifiedName> = if tables.is_empty() {
        mgr.policies().await?.into_iter().map(|p| p.parent).collect()
    } else {
        tables.iter().map(|t| table_name(t)).collect::<anyhow::Result<_>>()?
    };
    let mut all = Vec::new();
    for t in &names {
        all.push(mgr.status(t, now).await?);
    }
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else if all.is_empty() {
        println!("no policies yet: chute partition create TABLE --key COLUMN --interval 1d");
    } else {
        for (i, s) in all.iter().enumerate() {
            if i > 0 {
                println!();
            }
            print_status(s);
        }
    }
    Ok(Outcome::Ok)
}

fn print_status(s: &TableStatus) {
    let p = &s.policy;
    let mut policy = format!("key {} ({}), interval {}, premake {}, tz {}", p.key, p.key_type.sql_name(), p.interval, p.premake, p.tz);
    if let Some(m) = p.max_future {
        policy.push_str(&format!(", max-future {m}"));
    }
    if let Some(r) = &p.retention {
        policy.push_str(&format!(", retention {} ({})", r.keep, if r.mode == RetentionMode::Drop { "drop" } else { "detach" }));
    }
    if let Some(h) = &p.hash {
        policy.push_str(&format!(", hash {}:{}", h.column, h.modulus));
    }
    println!("table        {}", s.table);
    println!("policy       {policy}");
    println!("now          {}", s.now);
    match &s.covered_until {
        Some(u) => println!("coverage     until {u} ({} intervals ahead of the current one; premake {})", s.intervals_ahead, s.premake),
        None => println!("coverage     NONE: no partition holds now; run chute partition maintain {}", s.table),
    }
    match s.rows_in_default {
        Some(n) => println!("default      {n} rows"),
        None => println!("default      none"),
    }
    if s.due_for_retention.is_empty() {
        println!("retention    nothing due");
    } else {
        println!("retention    {} due: {}", s.due_for_retention.len(), s.due_for_retention.join(", "));
    }
    if !s.pending_detach.is_empty() {
        println!("pending      interrupted detach: {} (maintain finishes it)", s.pending_detach.join(", "));
    }
    println!("maintain     would run {} steps", s.maintain_would_run);
    println!();
    println!("{:<44} {:<27} {:<27} {:>12} {:>10}", "partition", "from", "to", "rows (est.)", "size");
    for part in &s.partitions {
        let flag = if part.due_for_retention { "  (due)" } else { "" };
        println!("{:<44} {:<27} {:<27} {:>12} {:>10}{flag}", part.name, part.from, part.to, part.rows_estimate, human_bytes(part.bytes));
    }
}

/// Sizes as indicatif writes them (`1.50 MiB`).
fn human_bytes(b: i64) -> String {
    indicatif::HumanBytes(b.max(0) as u64).to_string()
}

/// `partition undo` and `partition forget`: one plan for one table, shown
/// with `--dry-run`, else run and told in one line.
#[derive(Clone, Copy)]
enum Release {
    /// Back to a plain table with all its rows; its policy forgotten.
    Undo,
    /// The policy of a table dropped with SQL forgotten.
    Forget,
}

async fn release(opts: &ConnectOptions, table: &str, which: Release, dry_run: bool, lock: &LockArgs) -> anyhow::Result<Outcome> {
    let name = table_name(table)?;
    let mut mgr = PartitionManager::connect(opts, exec_settings(lock)?).await?;
    let mut printer = step_printer(false);
    let plan = match which {
        Release::Undo => mgr.undo(&name, dry_run, &mut printer).await?,
        Release::Forget => mgr.forget(&name, dry_run, &mut printer).await?,
    };
    if dry_run {
        report_plan(&name, &plan, true, false);
        return Ok(Outcome::Ok);
    }
    match which {
        Release::Undo => eprintln!("chute: {name} is a plain table again, with all its rows; its policy is forgotten"),
        Release::Forget => {
            // The policy's own name: `forget t` finds `public.t` (or `m.t`).
            let forgotten = plan.steps.iter().find_map(|s| match &s.kind {
                StepKind::ForgetConfig { table } => Some(table.to_string()),
                _ => None,
            });
            eprintln!(
                "chute: forgot the partition policy of {}; `chute partition maintain` no longer visits it",
                forgotten.unwrap_or_else(|| name.to_string())
            )
        }
    }
    Ok(Outcome::Ok)
}
