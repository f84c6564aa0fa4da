//! `chute doctor TABLE --sample FILE`: reads the first rows of a CSV file
//! into a scratch schema, measures how sorted they are by the partition key,
//! and times a trial load of them as given and sorted into a scratch copy of
//! the table with the same indexes and one partition per interval touched.
//! The scratch schema is removed afterwards, also after an error.

use std::io::BufRead;
use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use chute_core::doctor::Finding;
use chute_core::doctor::sample::{self, SampleSource, TrialTimes};
use chute_core::ident::{QualifiedName, quote_ident};
use chute_core::partman::Policy;
use futures_util::SinkExt;
use tokio_postgres::Client;

use super::DoctorError;
use crate::catalog;

/// At most this many partitions are made for the trial load.
const MAX_TRIAL_PARTITIONS: usize = 1000;

#[derive(Debug, Clone)]
pub struct SampleRequest<'a> {
    pub file: &'a Path,
    pub header: bool,
    pub max_rows: usize,
}

pub async fn check(client: &Client, policy: &Policy, req: &SampleRequest<'_>) -> Result<Option<Finding>, DoctorError> {
    let scratch = format!("chute_doctor_{}", std::process::id());
    let q = quote_ident(&scratch);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {q} CASCADE; CREATE SCHEMA {q}"))
        .await
        .map_err(|e| DoctorError::sql("creating the scratch schema", e))?;
    let result = run(client, policy, req, &scratch).await;
    let dropped = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {q} CASCADE")).await;
    let finding = result?;
    dropped.map_err(|e| DoctorError::sql(&format!("removing the scratch schema {scratch}"), e))?;
    Ok(finding)
}

async fn run(client: &Client, policy: &Policy, req: &SampleRequest<'_>, scratch: &str) -> Result<Option<Finding>, DoctorError> {
    let target = &policy.parent;
    let sql = |what: &'static str| move |e: tokio_postgres::Error| DoctorError::sql(what, e);
    let columns: Vec<String> =
        crate::catalog::columns_of(client, target).await.map_err(sql("reading the table's columns"))?.into_iter().map(|c| c.name).collect();
    let key_field = columns
        .iter()
        .position(|c| *c == policy.key)
        .ok_or_else(|| DoctorError::Other(format!("{target} has no column {:?}", policy.key)))?
        + 1;
    let cols = columns.iter().map(|c| quote_ident(c)).collect::<Vec<_>>().join(", ");
    let raw = QualifiedName::new(scratch, "raw").quoted();
    let trial = QualifiedName::new(scratch, "trial");
    client
        .batch_execute(&format!("CREATE TABLE {raw} (LIKE {t}); ALTER TABLE {raw} ADD COLUMN chute_ord bigserial;", t = target.quoted()))
        .await
        .map_err(sql("creating the scratch table"))?;
    copy_sample(client, &raw, &cols, req).await?;

    let key = quote_ident(&policy.key);
    let keys: Vec<i64> = client
        .query(&format!("SELECT {} FROM {raw} ORDER BY chute_ord", catalog::key_as_i64(policy, &key)), &[])
        .await
        .map_err(sql("reading the sample's keys"))?
        .iter()
        .map(|r| r.get(0))
        .collect();
    if keys.is_empty() {
        return Err(DoctorError::Other(format!("{} holds no rows to sample", req.file.display())));
    }
    let zone = policy.zone().map_err(|e| DoctorError::Other(e.to_string()))?;
    let starts: Vec<i64> =
        keys.iter().map(|k| policy.interval.floor(*k, &zone)).collect::<Result<_, _>>().map_err(|e| DoctorError::Other(e.to_string()))?;
    let order = sample::order(&keys, &starts);
    let times =
        if order.partitions <= MAX_TRIAL_PARTITIONS { Some(trial_load(client, policy, &raw, &trial, &cols, &starts).await?) } else { None };
    let src = SampleSource {
        table: target.to_string(),
        file: req.file.display().to_string(),
        key: policy.key.clone(),
        key_field,
        header: req.header,
        numeric_key: !policy.key_type.is_time(),
    };
    Ok(sample::finding(&src, &order, times))
}

/// Sends the first `max_rows` lines (after the header) to the scratch table.
async fn copy_sample(client: &Client, raw: &str, cols: &str, req: &SampleRequest<'_>) -> Result<(), DoctorError> {
    let file = std::fs::File::open(req.file).map_err(|e| DoctorError::Other(format!("cannot read {}: {e}", req.file.display())))?;
    let mut lines = Vec::new();
    let limit = req.max_rows + usize::from(req.header);
    for line in std::io::BufReader::new(file).split(b'\n').take(limit) {
        let mut line = line.map_err(|e| DoctorError::Other(format!("cannot read {}: {e}", req.file.display())))?;
        line.push(b'\n');
        lines.extend_from_slice(&line);
    }
    let copy = format!("COPY {raw} ({cols}) FROM STDIN (FORMAT csv, HEADER {})", req.header);
    let sink = client.copy_in::<_, Bytes>(copy.as_str()).await.map_err(|e| DoctorError::sql("loading the sample", e))?;
    futures_util::pin_mut!(sink);
    sink.send(Bytes::from(lines)).await.map_err(|e| DoctorError::sql("loading the sample", e))?;
    sink.finish().await.map_err(|e| DoctorError::sql("loading the sample (is it CSV in the table's column order?)", e))?;
    Ok(())
}

/// Loads the sample into a partitioned copy of the table twice in each
/// order, alternating, and keeps each order's fastest run.
async fn trial_load(
    client: &Client,
    policy: &Policy,
    raw: &str,
    trial: &QualifiedName,
    cols: &str,
    starts: &[i64],
) -> Result<TrialTimes, DoctorError> {
    let sql = |what: &'static str| move |e: tokio_postgres::Error| DoctorError::sql(what, e);
    let zone = policy.zone().map_err(|e| DoctorError::Other(e.to_string()))?;
    let mut ddl = format!(
        "CREATE TABLE {} (LIKE {} INCLUDING DEFAULTS INCLUDING INDEXES) PARTITION BY RANGE ({});",
        trial.quoted(),
        policy.parent.quoted(),
        quote_ident(&policy.key)
    );
    let mut distinct = starts.to_vec();
    distinct.sort_unstable();
    distinct.dedup();
    for (i, from) in distinct.iter().enumerate() {
        let to = policy.interval.next(*from, &zone).map_err(|e| DoctorError::Other(e.to_string()))?;
        let lit = |v: i64| policy.key_type.literal(v).map_err(|e| DoctorError::Other(e.to_string()));
        ddl.push_str(&format!(
            "CREATE TABLE {} PARTITION OF {} FOR VALUES FROM ({}) TO ({});",
            trial.with_name(format!("p{i}")).quoted(),
            trial.quoted(),
            lit(*from)?,
            lit(to)?
        ));
    }
    client.batch_execute(&ddl).await.map_err(sql("creating the trial table"))?;
    let key = quote_ident(&policy.key);
    let mut best = [f64::MAX, f64::MAX];
    for round in 0..4 {
        let sorted = round % 2 == 1;
        let order = if sorted { format!("{key}, chute_ord") } else { "chute_ord".into() };
        client.batch_execute(&format!("TRUNCATE {}", trial.quoted())).await.map_err(sql("emptying the trial table"))?;
        let t0 = Instant::now();
        client
            .batch_execute(&format!("INSERT INTO {} ({cols}) SELECT {cols} FROM {raw} ORDER BY {order}", trial.quoted()))
            .await
            .map_err(sql("the trial load"))?;
        let s = t0.elapsed().as_secs_f64();
        best[usize::from(sorted)] = best[usize::from(sorted)].min(s);
    }
    Ok(TrialTimes { given_s: best[0], sorted_s: best[1] })
}
