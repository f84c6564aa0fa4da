//! `chute migrate …`: a live plain table becomes partitioned (the swap),
//! then its old rows move into interval partitions (`--split`).

use anyhow::Context;
use chute_core::ident::QualifiedName;
use chute_core::partman::interval::Span;
use chute_core::partman::{KeyType, Policy};
use chute_engine::migrate::{MigrateError, MigrateRequest, Migrator, SplitRequest};

use super::partition::{exec_settings, notices, report_plan, step_printer};
use crate::Outcome;
use crate::args::{ConnArgs, MigrateArgs};
use crate::settings;

pub async fn run(conn: &ConnArgs, a: MigrateArgs) -> anyhow::Result<Outcome> {
    // Flags are checked before a server is chosen, started or connected to.
    if let Some(i) = &a.interval {
        settings::check_interval("--interval", i)?;
    }
    settings::check_zone("--tz", &a.tz)?;
    exec_settings(&a.lock)?;
    let opts = settings::target(conn)?;
    let table = QualifiedName::parse(&a.table)?;
    let mut m = Migrator::connect_within(&opts, exec_settings(&a.lock)?, notices()).await?;
    if a.status {
        let s = m.status(&table).await?;
        if a.json {
            println!("{}", serde_json::to_string_pretty(&s)?);
        } else {
            // Every value starts in one column, after the longest label.
            let row = |label: &str, value: String| println!("{label:<15}{value}");
            row("table", s.table.to_string());
            row("phase", s.phase.to_string());
            row(
                "rows moved",
                match s.rows_total {
                    Some(t) => format!("{} of {t}", s.rows_moved),
                    None => s.rows_moved.to_string(),
                },
            );
            row("rate", s.rate_rows_per_s.map_or_else(|| "-".to_owned(), |r| format!("{r:.0} rows/s")));
            row("longest lock", format!("{} ms (the longest single attempt of the swap or the cutover)", s.longest_lock_ms));
            row(
                "lock footprint",
                format!(
                    "{} locks at most in one transaction of the split (it allows itself {}, a quarter of the server's lock table)",
                    s.max_step_locks, s.lock_budget
                ),
            );
            let dropped = if s.old_partition_exists { "" } else { " (dropped)" };
            row("old partition", format!("{}{dropped}", s.old_partition));
        }
        return Ok(Outcome::Ok);
    }
    let mut printer = step_printer(a.json);
    if a.split {
        let req =
            SplitRequest { table, batch_rows: a.batch_rows.max(1), rows_per_s: a.rows_per_s, keep_old: a.keep_old, dry_run: a.dry_run };
        let plan = m.split(req.clone(), &mut printer).await?;
        report_plan(&req.table, &plan, a.dry_run, a.json);
        if !a.dry_run && !a.json {
            let s = m.status(&req.table).await?;
            eprintln!(
                "chute: {} is split: {} rows moved into interval partitions{}",
                s.table,
                s.rows_moved,
                if a.keep_old { format!("; the old table {} is kept, detached", s.old_partition) } else { String::new() }
            );
        }
        return Ok(Outcome::Ok);
    }
    let key = a.key.clone().context("--key is required")?;
    let interval = Span::parse(a.interval.as_deref().context("--interval is required")?)?;
    let max_future = if interval.is_time() { Some(Span::parse("1d").expect("static")) } else { None };
    // The key's type is filled in from the catalog.
    let policy = Policy { premake: a.premake, max_future, tz: a.tz.clone(), ..Policy::new(table, key, KeyType::Timestamptz, interval) };
    let req = MigrateRequest { policy, extend_primary_key: a.extend_primary_key, dry_run: a.dry_run };
    let now = jiff::Timestamp::now().as_microsecond();
    let plan = match m.migrate(req.clone(), now, &mut printer).await {
        Ok(p) => p,
        Err(e @ MigrateError::Preconditions { .. }) => {
            eprintln!("chute: {e}");
            return Ok(Outcome::Error);
        }
        Err(e @ MigrateError::Aborted { .. }) => return Err(e.into()),
        Err(e) => {
            if !a.dry_run {
                eprintln!(
                    "chute: the migration stopped before finishing; steps already done stay done (see chute migrate --status {}), and running the same command again continues",
                    req.policy.parent
                );
            }
            return Err(e.into());
        }
    };
    let name = m.status(&req.policy.parent).await.map(|s| s.table).unwrap_or_else(|_| req.policy.parent.to_string());
    report_plan(&QualifiedName::parse(&name).unwrap_or(req.policy.parent.clone()), &plan, a.dry_run, a.json);
    if !a.dry_run && !a.json {
        eprintln!(
            "chute: {name} is partitioned by {} on {}; move its old rows with: chute migrate {name} --split",
            req.policy.interval, req.policy.key
        );
    }
    Ok(Outcome::Ok)
}
