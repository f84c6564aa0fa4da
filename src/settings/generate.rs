//! The options of a generated workload (`chute gen`, `chute load --gen`),
//! checked against the workload chosen and turned into its parameters.

use anyhow::Context;
use chute_core::generate::GenParams;
use chute_core::partman::policy::{parse_duration, parse_instant};

use crate::args::{GenArg, GenOptions};

/// The registry's name of a workload.
pub fn workload_name(g: GenArg) -> &'static str {
    match g {
        GenArg::Conditions => "conditions",
        GenArg::Lineitem => "lineitem",
        GenArg::Accounts => "accounts",
        GenArg::Orders => "orders",
        GenArg::Iot => "iot",
        GenArg::Devops => "devops",
    }
}

/// The table `--create` names when given no TABLE: the workload's own
/// table name where it has one (pgbench's `pgbench_accounts`).
pub fn default_table(g: GenArg) -> &'static str {
    match g {
        GenArg::Accounts => "pgbench_accounts",
        other => workload_name(other),
    }
}

/// Options that the chosen workload cannot use are errors, not ignored.
/// `interval` is the time between readings, where the command has one.
pub fn check_options(o: &GenOptions, workload: GenArg, interval: Option<&str>) -> anyhow::Result<()> {
    let name = workload_name(workload);
    let stream = matches!(workload, GenArg::Iot | GenArg::Devops);
    let timed = matches!(workload, GenArg::Conditions | GenArg::Orders | GenArg::Iot | GenArg::Devops);
    let conditions = workload == GenArg::Conditions;
    let orders = workload == GenArg::Orders;
    let refuse = |given: bool, flag: &str, hint: &str| {
        anyhow::ensure!(!given, "{flag} does not apply to {name}{hint}");
        Ok(())
    };
    refuse(o.devices.is_some() && !conditions, "--devices", "; its size is --scale")?;
    refuse(o.fields.is_some() && !conditions && !orders, "--fields", "")?;
    refuse(
        o.scale.is_some() && workload == GenArg::Accounts,
        "--scale",
        " (100,000 accounts per branch, as in pgbench); choose the size with --rows",
    )?;
    refuse(o.from.is_some() && !timed, "--from", "")?;
    refuse(interval.is_some() && !timed, "--interval", "")?;
    refuse(o.to.is_some() && !stream, "--to", "; choose the size with --rows")?;
    if conditions && o.devices.is_some() && o.scale.is_some() {
        anyhow::ensure!(o.devices == o.scale, "--devices and --scale both give the number of devices: give one");
    }
    Ok(())
}

/// How many rows: --rows, else a million rows of a table, or a stream to its end (--to, or one day).
pub fn rows(o: &GenOptions, stream: bool) -> u64 {
    o.rows.unwrap_or(if stream { u64::MAX } else { 1_000_000 })
}

/// The generator's parameters; `interval` is the time between readings.
pub fn params(o: &GenOptions, interval: Option<&str>) -> anyhow::Result<GenParams> {
    let defaults = GenParams::default();
    let instant = |text: &str, flag: &str| parse_instant(text, &jiff::tz::TimeZone::UTC).with_context(|| flag.to_owned());
    let step_micros = match interval {
        Some(text) => {
            let step = parse_duration(text).context("--interval")?;
            anyhow::ensure!(step.as_micros() > 0, "--interval must be longer than zero");
            i64::try_from(step.as_micros()).context("--interval")?
        }
        None => defaults.step_micros,
    };
    Ok(GenParams {
        seed: o.seed.unwrap_or(defaults.seed),
        scale: o.devices.or(o.scale).unwrap_or(0),
        from_micros: o.from.as_deref().map(|f| instant(f, "--from")).transpose()?.unwrap_or(defaults.from_micros),
        to_micros: o.to.as_deref().map(|t| instant(t, "--to")).transpose()?,
        step_micros,
        fields: o.fields.unwrap_or(defaults.fields),
    })
}
