//! `chute consume`: Kafka topics into a table, exactly once, without Kafka
//! transactions.
//!
//! A consumer joins its group and loads the partitions the group gives it
//! as one load (a [`KafkaInput`]): each partition is an input of the
//! load's journal (`journal::shared_inputs` numbers them) and a message's
//! offset is where its rows are, so every batch records the offsets it
//! holds in the transaction of its rows. A run reads each partition from the
//! journal's position, never from the group's offsets, and skips what a
//! leaf already holds; the group's offsets are committed after a run only
//! so that lag tools see them. Each rebalance of the group ends the run
//! (its batches in flight finish, or fail if another consumer took their
//! partitions over: see `claim::fence`) and the next run takes the new
//! assignment from the journal again.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use crate::{KafkaConsumer, KafkaInput, KafkaPart, KafkaRun, MessageFormat, Watch};
use chute_engine::load::{LoadBuilder, LoadError, LoadProgress, TextFormat, journal};

/// Everything a consumer needs, validated.
#[derive(Debug, Clone)]
pub struct ConsumeSpec {
    /// The load each run makes: table, server, batching, rejects, stop flag
    /// (its input is each run's partitions: built per run).
    pub load: LoadBuilder,
    pub brokers: String,
    pub topics: Vec<String>,
    pub group: String,
    pub format: MessageFormat,
    /// Stop once every partition reached the end it had at start.
    pub until_end: bool,
    /// librdkafka settings (TLS, SASL, timeouts), applied after chute's own.
    pub kafka_options: Vec<(String, String)>,
    /// A partition's messages are sent after waiting this long (default 200 ms).
    pub flush_after: Duration,
    /// Columns filled from each message's key, headers and timestamp (JSON messages).
    pub fields: crate::MessageFields,
    /// Serve `GET /metrics` (Prometheus text) here.
    pub metrics_listen: Option<std::net::SocketAddr>,
    /// Rejected messages go to this topic (with their partition, offset and reason) instead of the reject file.
    pub dead_letter_topic: Option<String>,
}

/// What a consumer did, over all its runs.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ConsumeReport {
    pub load_id: String,
    pub rows_loaded: u64,
    pub rows_skipped: u64,
    pub rows_rejected: u64,
    pub bytes_read: u64,
    pub seconds: f64,
    /// Runs: one per assignment the group gave this consumer.
    pub runs: u64,
    pub interrupted: bool,
    pub reject_limit_exceeded: bool,
    pub reject_file: Option<String>,
    /// Every partition of the topics and where it is committed through (its next offset).
    pub positions: Vec<Position>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Position {
    pub partition: String,
    pub offset: u64,
}

/// The journal's name for a consumer group's load of `topics` into `table`.
pub fn load_id(group: &str, topics: &[String], table: &str) -> String {
    format!("kafka:{group}:{}:{table}", topics.join(","))
}

/// Consumes until stopped (or, with `until_end`, until every partition
/// reached the end it had at start).
pub async fn run(spec: ConsumeSpec, progress: &mut dyn LoadProgress) -> Result<ConsumeReport, LoadError> {
    let began = Instant::now();
    if !spec.fields.is_empty() && spec.format != MessageFormat::Text(TextFormat::Jsonl) {
        return Err(setup("the message's key, headers and timestamp fill columns of JSON messages only".into()));
    }
    let metrics = match spec.metrics_listen {
        Some(addr) => Some(serve_metrics(addr).await?),
        None => None,
    };
    let consumer = Arc::new(consumer(&spec)?);
    let dead_letter = match &spec.dead_letter_topic {
        Some(topic) => Some(dead_letter(&spec, topic)?),
        None => None,
    };
    let parts = {
        let (c, topics) = (consumer.clone(), spec.topics.clone());
        tokio::task::spawn_blocking(move || partitions(&c, &topics)).await.map_err(|e| setup(format!("reading the topics: {e}")))??
    };
    let table = spec.load.table().to_string();
    let id = spec.load.given_load_id().map(str::to_owned).unwrap_or_else(|| load_id(&spec.group, &spec.topics, &table));
    let names: Vec<String> = parts.iter().map(|(t, p)| format!("{t}/{p}")).collect();
    let numbers = number_partitions(&spec, (&id, &table), &consumer, (&parts, &names), progress).await?;
    let mut by_number = vec![String::new(); numbers.iter().max().map_or(0, |m| *m as usize + 1)];
    for (n, name) in numbers.iter().zip(&names) {
        by_number[*n as usize] = name.clone();
    }
    let number: HashMap<(String, i32), u32> = parts.iter().cloned().zip(numbers.iter().copied()).collect();
    let ends: HashMap<(String, i32), i64> = if spec.until_end {
        let (c, parts) = (consumer.clone(), parts.clone());
        tokio::task::spawn_blocking(move || high_watermarks(&c, &parts))
            .await
            .map_err(|e| setup(format!("reading the topics' ends: {e}")))??
    } else {
        HashMap::new()
    };
    let topics: Vec<&str> = spec.topics.iter().map(String::as_str).collect();
    consumer.subscribe(&topics).map_err(crate::kafka_error)?;
    let mut report = ConsumeReport { load_id: id.clone(), ..Default::default() };
    // Partitions found at their end, by a run or before one.
    let mut finished: std::collections::HashSet<u32> = std::collections::HashSet::new();
    // The consumer's progress over all its runs.
    let mut before = chute_engine::load::LoadStats::default();
    loop {
        let Some((generation, assigned)) = wait_for_assignment(&consumer, &spec, progress).await else { break };
        let parts: Vec<KafkaPart> = assigned
            .iter()
            .filter_map(|(t, p)| {
                let input = *number.get(&(t.clone(), *p))?;
                Some(KafkaPart { input, topic: t.clone(), partition: *p, until: ends.get(&(t.clone(), *p)).copied() })
            })
            .filter(|p| !finished.contains(&p.input))
            .collect();
        if spec.until_end && parts.is_empty() {
            break;
        }
        let mut run = KafkaRun::new(consumer.clone(), parts.clone(), by_number.clone(), generation, spec.flush_after);
        run.fields = Arc::new(spec.fields.clone());
        run.dead_letter = dead_letter.clone();
        let rebalanced = run.rebalanced.clone();
        let input = Arc::new(KafkaInput::new(run.clone(), spec.format, spec.load.chunk_size()));
        let load = spec.load.clone().load_id(Some(id.clone())).build(input)?;
        report.runs += 1;
        // The keeper's one connection, made before the run commits anything (see `keep_positions`).
        let kept_on = connect(&spec, spec.load.retries_for()).await.ok();
        let (finish, finishing) = tokio::sync::oneshot::channel();
        let keeper = tokio::spawn(keep_positions(run.clone(), (spec.load.target().clone(), kept_on), id.clone(), parts.clone(), finishing));
        let mut counting = Counting { inner: &mut *progress, last: Default::default(), before: &before, began, run: &run, told: None };
        let outcome = chute_engine::load::run(load, &mut counting).await;
        // What this run did, added to what the consumer did before it: its
        // progress counts on across runs (each run's own stats start at 0).
        let mut run_stats = match &outcome {
            Ok(r) => r.stats.clone(),
            Err(_) => counting.last.clone(),
        };
        // Every acknowledgement has fired once the load returned: how far each partition got is final.
        let settling = run.clone();
        let _ = tokio::task::spawn_blocking(move || settling.settle()).await;
        let through = run.through.lock().unwrap_or_else(|p| p.into_inner()).clone();
        // The keeper moves the positions on to `through` a last time, on its connection.
        let _ = finish.send(());
        let _ = keeper.await;
        let reread = run.reread.load(Ordering::SeqCst);
        if reread && !spec.load.stop_flag().load(Ordering::SeqCst) {
            run_stats.rows_loaded = held_after_failover(&spec, &id, &run, run_stats.rows_loaded, progress).await;
        }
        add_run(&mut before, &run_stats);
        if !reread {
            commit_to_group(&consumer, &parts, &through, CommitMode::Sync);
        }
        let moved = rebalanced.load(Ordering::SeqCst) || consumer.context().generation.load(Ordering::SeqCst) != generation;
        let r = match outcome {
            Ok(r) => r,
            // Another consumer took partitions over while batches were in flight: they load them.
            Err(e) if moved => {
                progress.notice(&format!("the group was rebalanced: {e}"));
                continue;
            }
            Err(e) => return Err(e),
        };
        report.reject_file = r.reject_file.clone().or(report.reject_file.take());
        // After a lost connection, how far the run got is what the server holds: the next run reads it.
        for p in parts.iter().filter(|_| !reread) {
            let at = through.get(&p.input).copied().or_else(|| r.committed_through.get(p.input as usize).map(|t| t.byte));
            if let (Some(at), Some(u)) = (at, p.until)
                && at as i64 >= u
            {
                finished.insert(p.input);
            }
        }
        if r.reject_limit_exceeded {
            report.reject_limit_exceeded = true;
            break;
        }
        if r.interrupted || spec.load.stop_flag().load(Ordering::SeqCst) {
            report.interrupted = true;
            break;
        }
        if spec.until_end && parts.iter().all(|p| finished.contains(&p.input)) && !moved {
            break;
        }
    }
    report.interrupted |= spec.load.stop_flag().load(Ordering::SeqCst);
    // The runs' counts, summed once (progress reads the same totals), a
    // run the group's rebalance ended included: its committed rows are loaded.
    report.rows_loaded = before.rows_loaded;
    report.rows_skipped = before.rows_skipped;
    report.rows_rejected = before.rows_rejected;
    report.bytes_read = before.bytes_read;
    if let Some(m) = metrics {
        m.abort();
    }
    close(consumer).await;
    match connect(&spec, spec.load.retries_for()).await {
        Ok(client) => {
            report.positions =
                journal::positions(&client, &id).await?.into_iter().map(|(partition, offset)| Position { partition, offset }).collect();
        }
        // Stopped while the server is gone: what was committed stays committed; only the summary lacks it.
        Err(e) if report.interrupted => progress.notice(&format!("stopped; the committed positions cannot be shown: {e}")),
        Err(e) => return Err(e.into()),
    }
    report.seconds = began.elapsed().as_secs_f64();
    Ok(report)
}

/// The journal's number of each partition (`names`, of `parts`), whose
/// positions are kept for the topic's id and the table's oid: a partition
/// of a topic deleted and made again, or into a table dropped and made
/// again, is read from its start (and the consumer says so).
async fn number_partitions(
    spec: &ConsumeSpec,
    (id, table): (&str, &str),
    consumer: &Arc<KafkaConsumer>,
    (parts, names): (&[(String, i32)], &[String]),
    progress: &mut dyn LoadProgress,
) -> Result<Vec<u32>, LoadError> {
    let ids = {
        let (c, topics) = (consumer.clone(), spec.topics.clone());
        tokio::task::spawn_blocking(move || crate::topic_id::topic_ids(&c, &topics, Duration::from_secs(30)))
            .await
            .map_err(|e| setup(format!("reading the topics' ids: {e}")))?
    };
    let ids = ids.unwrap_or_else(|e| {
        progress.notice(&format!(
            "the brokers did not give the topics' ids ({e}): a topic deleted and made again under its name will not be noticed"
        ));
        HashMap::new()
    });
    let source_ids: Vec<Option<String>> = parts.iter().map(|(t, _)| ids.get(t).cloned()).collect();
    let quoted = spec.load.table().quoted();
    let origin = journal::SharedOrigin { source_ids: &source_ids, table: (spec.load.table().name != "-").then_some(quoted.as_str()) };
    let mut client = connect(spec, spec.load.retries_for()).await?;
    // Before the first write (the partitions' numbers and positions): a
    // pool that shares chute's sessions is refused with its mode named, as
    // every writer is, not left to break a transaction below.
    chute_engine::pooler::check(spec.load.target(), &client).await?;
    let (numbers, restarted) = journal::shared_inputs(&mut client, (id, table, &spec.topics.join(", ")), names, origin).await?;
    let what = |new_topic: bool| -> Vec<&str> {
        restarted.iter().filter(|r| if new_topic { r.new_source } else { r.new_table }).map(|r| r.name.as_str()).collect()
    };
    let (topic, table_too) = (what(true), what(false));
    if !topic.is_empty() {
        progress.notice(&format!(
            "{} belong to a topic deleted and made again since this group last read it (its id changed): read from their start",
            topic.join(", ")
        ));
    }
    if !table_too.is_empty() {
        progress.notice(&format!(
            "{table} was dropped and made again since this group last loaded it: {} are read from their start",
            table_too.join(", ")
        ));
    }
    Ok(numbers)
}

/// Leaves the group now, even while a lag reading still holds the consumer
/// (it then fails): the group's next consumer gets the partitions at once,
/// not after this one's session timed out.
async fn close(consumer: Arc<KafkaConsumer>) {
    let _ = tokio::task::spawn_blocking(move || {
        if consumer.close_queue().is_ok() {
            let until = Instant::now() + Duration::from_secs(10);
            while !consumer.closed() && Instant::now() < until {
                let _ = consumer.poll(Duration::from_millis(100));
            }
        }
    })
    .await;
}

/// A connection to the server, retried for up to `retry_for` unless the consumer is stopped.
async fn connect(spec: &ConsumeSpec, retry_for: Duration) -> Result<tokio_postgres::Client, chute_engine::ConnectError> {
    chute_engine::retry::connect_unless_stopped(spec.load.target(), retry_for, &spec.load.stop_flag()).await
}

fn setup(message: String) -> LoadError {
    LoadError::Setup(message)
}

/// The consumer, with chute's settings and then the user's.
fn consumer(spec: &ConsumeSpec) -> Result<KafkaConsumer, LoadError> {
    let queue = (spec.load.memory() / 4).clamp(1 << 20, 1 << 30);
    let mut config = ClientConfig::new();
    config
        .set("bootstrap.servers", &spec.brokers)
        .set("group.id", &spec.group)
        // Offsets live in chute's journal; the group's are written after, for lag tools.
        .set("enable.auto.commit", "false")
        .set("enable.auto.offset.store", "false")
        .set("auto.offset.reset", "earliest")
        .set("enable.partition.eof", "true")
        // Fetched messages wait in librdkafka's queue: bounded, so a slow server pauses fetching.
        .set("queued.max.messages.kbytes", (queue >> 10).to_string())
        // Fetches as large as the queue allows (librdkafka's defaults, 1 MiB
        // a partition, kept the consumer 1.3x slower on one broker).
        .set("fetch.max.bytes", queue.min(64 << 20).to_string())
        .set("max.partition.fetch.bytes", (queue / 4).clamp(1 << 20, 16 << 20).to_string())
        // A full queue pauses fetching this long (librdkafka's default: a second, idle once drained).
        .set("fetch.queue.backoff.ms", "20");
    for (k, v) in &spec.kafka_options {
        config.set(k, v);
    }
    config.create_with_context(Watch::default()).map_err(|e| setup(format!("cannot make a Kafka consumer: {}", redact(&e.to_string()))))
}

/// The dead-letter topic's producer (idempotent: a retry writes a message once).
fn dead_letter(spec: &ConsumeSpec, topic: &str) -> Result<Arc<dyn chute_engine::load::rejects::DeadLetter>, LoadError> {
    let mut config = ClientConfig::new();
    config.set("bootstrap.servers", &spec.brokers).set("enable.idempotence", "true").set("linger.ms", "5");
    for (k, v) in &spec.kafka_options {
        // The consumer's own settings are not the producer's.
        if !k.starts_with("group.") && !k.starts_with("session.") && !k.starts_with("heartbeat.") && !k.contains("offset") {
            config.set(k, v);
        }
    }
    let producer =
        config.create().map_err(|e| setup(format!("cannot make the dead-letter topic's producer: {}", redact(&e.to_string()))))?;
    Ok(Arc::new(crate::DeadLetterTopic { producer, topic: topic.to_owned() }))
}

/// A librdkafka message with any secret it may quote blanked out.
fn redact(message: &str) -> String {
    message
        .split_inclusive(|c: char| c.is_whitespace() || c == ',')
        .map(|w| if w.contains("password") || w.contains("secret") { "[redacted] " } else { w })
        .collect()
}

/// Every partition of `topics`; a topic the brokers do not have is refused.
fn partitions(consumer: &KafkaConsumer, topics: &[String]) -> Result<Vec<(String, i32)>, LoadError> {
    let mut out = Vec::new();
    for topic in topics {
        let md = consumer.fetch_metadata(Some(topic), Duration::from_secs(30)).map_err(|e| {
            let why = Watch::last_error(consumer);
            setup(format!(
                "cannot read topic {topic:?} from the brokers: {e}{}; check --brokers and the TLS and SASL settings",
                why.map(|w| format!(" ({w})")).unwrap_or_default()
            ))
        })?;
        let t = md.topics().iter().find(|t| t.name() == topic);
        match t {
            Some(t) if t.error().is_none() && !t.partitions().is_empty() => {
                let mut ps: Vec<i32> = t.partitions().iter().map(|p| p.id()).collect();
                ps.sort_unstable();
                out.extend(ps.into_iter().map(|p| (topic.clone(), p)));
            }
            _ => {
                return Err(setup(format!(
                    "topic {topic:?} does not exist on the brokers (or this client may not read it): create it first, \
                     e.g. kafka-topics.sh --create --topic {topic} --partitions 6"
                )));
            }
        }
    }
    Ok(out)
}

fn high_watermarks(consumer: &KafkaConsumer, parts: &[(String, i32)]) -> Result<HashMap<(String, i32), i64>, LoadError> {
    let mut out = HashMap::new();
    for (t, p) in parts {
        let (_, high) =
            consumer.fetch_watermarks(t, *p, Duration::from_secs(30)).map_err(|e| setup(format!("cannot read where {t}/{p} ends: {e}")))?;
        out.insert((t.clone(), *p), high);
    }
    Ok(out)
}

/// Waits until the group gives this consumer partitions, saying what it
/// waits for every little while (a killed member's partitions are given out
/// only once its session timed out; a broker may be down). `None`: stopped.
async fn wait_for_assignment(
    consumer: &Arc<KafkaConsumer>,
    spec: &ConsumeSpec,
    progress: &mut dyn LoadProgress,
) -> Option<(u64, Vec<(String, i32)>)> {
    let began = Instant::now();
    let mut period = Duration::from_secs(5);
    loop {
        match poll_for_assignment(consumer, spec, period).await {
            Waited::Assigned(generation, assigned) => return Some((generation, assigned)),
            Waited::Stopped => return None,
            Waited::Still => progress.notice(&waiting_line(consumer, spec, began.elapsed())),
        }
        period = Duration::from_secs(15);
    }
}

/// What polling the group for an assignment came to.
enum Waited {
    Assigned(u64, Vec<(String, i32)>),
    Stopped,
    /// Nothing assigned within the time given.
    Still,
}

/// Polls the group for up to `period` until it gives this consumer
/// partitions (the messages polled meanwhile are read again by the run).
async fn poll_for_assignment(consumer: &Arc<KafkaConsumer>, spec: &ConsumeSpec, period: Duration) -> Waited {
    let cancel = spec.load.stop_flag();
    let c = consumer.clone();
    tokio::task::spawn_blocking(move || {
        let until = Instant::now() + period;
        let mut settled: Option<(u64, Instant)> = None;
        loop {
            if cancel.load(Ordering::SeqCst) {
                return Waited::Stopped;
            }
            let _ = c.poll(Duration::from_millis(100));
            let generation = c.context().generation.load(Ordering::SeqCst);
            let assigned = c.context().assigned.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if assigned.is_empty() {
                if Instant::now() >= until {
                    return Waited::Still;
                }
                settled = None;
                continue;
            }
            // The same assignment for a moment: the rebalance is over.
            match settled {
                Some((g, since)) if g == generation && since.elapsed() >= Duration::from_millis(200) => {
                    return Waited::Assigned(generation, assigned);
                }
                Some((g, _)) if g == generation => {}
                _ => settled = Some((generation, Instant::now())),
            }
        }
    })
    .await
    .unwrap_or(Waited::Stopped)
}

/// What a consumer without partitions is waiting for, in a line.
fn waiting_line(consumer: &KafkaConsumer, spec: &ConsumeSpec, waited: Duration) -> String {
    let secs = waited.as_secs();
    if let Some(why) = consumer.context().unreachable() {
        return format!("broker unreachable ({why}): retrying; no partition is read until it answers ({secs}s so far)");
    }
    if consumer.context().given_none.load(Ordering::SeqCst) {
        return format!(
            "waiting for the group's partitions ({secs}s so far): the group gave this consumer none, as it has more members \
             than the topics have partitions; it gets some when a member leaves"
        );
    }
    let session = spec.kafka_options.iter().rev().find(|(k, _)| k == "session.timeout.ms").map_or("45000", |(_, v)| v.as_str());
    format!(
        "waiting for the group's partitions ({secs}s so far): the broker has assigned none yet; members of a killed consumer are \
         dropped after session.timeout.ms={session} (a consumer with its own group.instance.id takes its old place at once)"
    )
}

/// Tells the group how far the run's partitions are committed (for lag
/// tools only: chute reads its own positions from the journal).
fn commit_to_group(consumer: &KafkaConsumer, parts: &[KafkaPart], through: &HashMap<u32, u64>, mode: CommitMode) {
    let mut tpl = TopicPartitionList::new();
    for p in parts {
        if let Some(at) = through.get(&p.input)
            && *at > 0
        {
            let _ = tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(*at as i64));
        }
    }
    if tpl.count() > 0 {
        // A partition another consumer has now is refused by the group: nothing lost, its owner commits it.
        let _ = consumer.commit(&tpl, mode);
    }
}

/// While a run goes on: five times a second, moves the journal's positions of its
/// partitions on to where they are committed (so a restart after a kill
/// reads little again) and commits them to the group (so lag tools see them);
/// once more when `finish` fires (the run's acknowledgements are final).
///
/// Only over `client`, the one connection made before the run committed
/// anything: a position committed after the batches it covers, on the
/// server that has them, survives a failover only if they do (its WAL comes
/// after theirs). Once that connection is lost (or was never made) no
/// position moves in this run: the server reached next (a standby promoted)
/// may lack commits the run counted. The run goes on while no server
/// answers (its batches retry, and say so); once one answers, or when the
/// run is over, the keeper sets `run.reread`: the run ends and the next
/// reads the positions that server holds, so what the old primary took
/// with it is read from Kafka again.
async fn keep_positions(
    run: KafkaRun,
    (target, mut client): (chute_engine::ConnectOptions, Option<tokio_postgres::Client>),
    id: String,
    parts: Vec<KafkaPart>,
    mut finish: tokio::sync::oneshot::Receiver<()>,
) {
    let mut last: HashMap<u32, u64> = HashMap::new();
    let mut quiet = Quiet { received: 0, since: Instant::now(), told: None };
    for tick in 0u64.. {
        let finishing = tokio::select! {
            // Pacing, not a retry.
            _ = tokio::time::sleep(Duration::from_millis(200)) => false,
            _ = &mut finish => true,
        };
        if tick % 5 == 0 && !finishing {
            let behind = lag(&run, &parts).await;
            quiet.look(&run, behind);
        }
        let Some(c) = client.as_ref().filter(|c| !c.is_closed()) else {
            client = None;
            // One try a tick, to learn when a server answers again (not to write to it).
            if finishing || target.connect().await.is_ok() {
                run.reread.store(true, Ordering::SeqCst);
                return;
            }
            continue;
        };
        if let Some(owner) = run.owner.get() {
            let now = run.through.lock().unwrap_or_else(|p| p.into_inner()).clone();
            if now != last {
                let at: Vec<(u32, u64)> = now.iter().map(|(i, o)| (*i, *o)).collect();
                if journal::advance(c, &id, owner, &at).await.is_err() {
                    // The connection is taken as lost: nothing moves over another one.
                    client = None;
                    if finishing {
                        run.reread.store(true, Ordering::SeqCst);
                        return;
                    }
                    continue;
                }
                commit_to_group(&run.consumer, &parts, &now, CommitMode::Async);
                last = now;
            }
        }
        if finishing {
            return;
        }
    }
}

/// After a run lost its connection: the rows of its batches the journal of
/// the server reached now holds (the run counted `counted`), saying how
/// many the old server took with it (their messages are read again).
async fn held_after_failover(spec: &ConsumeSpec, id: &str, run: &KafkaRun, counted: u64, progress: &mut dyn LoadProgress) -> u64 {
    let Some(token) = run.owner.get() else { return counted };
    let held: Result<u64, String> = async {
        let c = connect(spec, spec.load.retries_for()).await.map_err(|e| e.to_string())?;
        c.query_one(
            "SELECT coalesce(sum(rows), 0)::int8 FROM chute.load_journal WHERE load_id = $1 AND split_part(batch_id, '-', 1) = $2",
            &[&id, token],
        )
        .await
        .map(|r| r.get::<_, i64>(0) as u64)
        .map_err(|e| e.to_string())
    }
    .await;
    let held = match held {
        Ok(h) => h,
        Err(e) => {
            progress
                .notice(&format!("the connection to the server was lost: the partitions are read on from the positions it holds ({e})"));
            return counted;
        }
    };
    let lost = counted.saturating_sub(held);
    progress.notice(&if lost > 0 {
        format!(
            "{lost} rows whose commit the old server acknowledged are not on the server now (lost in a failover): their messages \
             are read from Kafka again"
        )
    } else {
        "the connection to the server was lost: the partitions are read on from the positions the server holds".to_owned()
    });
    held.min(counted)
}

/// The lag of each partition of the run (its end offset minus where it is
/// committed through), as the gauge `chute_consume_lag{partition}`; their sum.
async fn lag(run: &KafkaRun, parts: &[KafkaPart]) -> u64 {
    let (consumer, parts) = (run.consumer.clone(), parts.to_vec());
    let through = run.through.lock().unwrap_or_else(|p| p.into_inner()).clone();
    tokio::task::spawn_blocking(move || {
        let mut total = 0;
        for p in &parts {
            if let Ok((_, high)) = consumer.fetch_watermarks(&p.topic, p.partition, Duration::from_secs(1)) {
                let at = through.get(&p.input).copied().unwrap_or(0) as i64;
                let behind = (high - at).max(0);
                ::metrics::gauge!("chute_consume_lag", "partition" => format!("{}/{}", p.topic, p.partition)).set(behind as f64);
                total += behind as u64;
            }
        }
        total
    })
    .await
    .unwrap_or(0)
}

/// A run that lags and has received nothing for a while: the broker is not
/// sending (a restart's partition leaders not elected yet, a fetch stuck).
/// Said every 30 s while it lasts, unless the broker cannot be reached at all
/// (which `Counting` says).
struct Quiet {
    /// Messages received when last looked.
    received: u64,
    /// Since when nothing was received while the run lagged.
    since: Instant,
    told: Option<Instant>,
}

impl Quiet {
    fn look(&mut self, run: &KafkaRun, behind: u64) {
        let received = run.received.load(Ordering::Relaxed);
        if received != self.received || behind == 0 {
            (self.received, self.since) = (received, Instant::now());
            return;
        }
        let quiet = self.since.elapsed();
        if quiet >= Duration::from_secs(30)
            && self.told.is_none_or(|t| t.elapsed() >= Duration::from_secs(30))
            && run.consumer.context().unreachable().is_none()
        {
            run.notices.lock().unwrap_or_else(|p| p.into_inner()).push(format!(
                "the broker sent nothing for {}s though the partitions are {behind} messages behind their end: waiting for it \
                 (after a broker restart it may still be electing partition leaders)",
                quiet.as_secs()
            ));
            self.told = Some(Instant::now());
        }
    }
}

/// A load's progress, passed on, counted into `chute_consume_rows_total`,
/// `chute_consume_bytes_total` and `chute_consume_rejects_total`.
/// The reporter is told the consumer's totals: the runs before this one
/// (`before`) plus this run's, over the time since the consumer started.
/// It also says what the run waits for: the notices of `run`, and a
/// broker that cannot be reached (every 10 s while it cannot).
struct Counting<'a> {
    inner: &'a mut dyn LoadProgress,
    last: chute_engine::load::LoadStats,
    before: &'a chute_engine::load::LoadStats,
    began: Instant,
    run: &'a KafkaRun,
    /// When the user was last told the broker cannot be reached.
    told: Option<Instant>,
}

impl LoadProgress for Counting<'_> {
    fn update(&mut self, stats: &chute_engine::load::LoadStats) {
        ::metrics::counter!("chute_consume_rows_total").increment(stats.rows_loaded.saturating_sub(self.last.rows_loaded));
        ::metrics::counter!("chute_consume_bytes_total").increment(stats.bytes_read.saturating_sub(self.last.bytes_read));
        ::metrics::counter!("chute_consume_rejects_total").increment(stats.rows_rejected.saturating_sub(self.last.rows_rejected));
        self.last = stats.clone();
        let mut total = self.before.clone();
        add_run(&mut total, stats);
        total.seconds = self.began.elapsed().as_secs_f64();
        total.bytes_total = None;
        self.inner.update(&total);
        let notices = std::mem::take(&mut *self.run.notices.lock().unwrap_or_else(|p| p.into_inner()));
        for n in notices {
            self.inner.notice(&n);
        }
        if let Some(why) = self.run.consumer.context().unreachable()
            && self.told.is_none_or(|t| t.elapsed() >= Duration::from_secs(10))
        {
            self.inner.notice(&format!(
                "broker unreachable ({why}): retrying; the partitions are read on from where they are committed once it answers"
            ));
            self.told = Some(Instant::now());
        }
    }

    fn notice(&mut self, message: &str) {
        self.inner.notice(message);
    }
}

/// Adds one run's counts to the consumer's totals.
fn add_run(total: &mut chute_engine::load::LoadStats, run: &chute_engine::load::LoadStats) {
    total.rows_loaded += run.rows_loaded;
    total.rows_skipped += run.rows_skipped;
    total.rows_rejected += run.rows_rejected;
    total.bytes_read += run.bytes_read;
    total.bytes_sent += run.bytes_sent;
    total.bytes_committed += run.bytes_committed;
    total.batches += run.batches;
    total.partitions_touched = total.partitions_touched.max(run.partitions_touched);
    total.partitions_created += run.partitions_created;
}

/// `GET /metrics` on `addr`: the process's metrics as Prometheus text
/// (the consumer's, and each batch's commit time, `chute_batch_commit_seconds`).
async fn serve_metrics(addr: std::net::SocketAddr) -> Result<tokio::task::JoinHandle<()>, LoadError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = chute_engine::metrics_text::recorder();
    let listener = tokio::net::TcpListener::bind(addr).await.map_err(|e| setup(format!("cannot listen on {addr} for /metrics: {e}")))?;
    Ok(tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 16 << 10 {
                    match tokio::time::timeout(Duration::from_secs(10), conn.read(&mut buf)).await {
                        Ok(Ok(n)) if n > 0 => head.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let (status, body) = if head.starts_with(b"GET /metrics ") || head.starts_with(b"GET /metrics?") {
                    ("200 OK", chute_engine::metrics_text::render())
                } else {
                    ("404 Not Found", "GET /metrics\n".to_owned())
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: text/plain; version=0.0.4\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    }))
}
