//! Kafka partitions (`chute consume`): messages of the partitions a run was
//! given, read from where the journal says each is committed through, cut
//! into chunks of whole messages of one partition.
//!
//! A chunk's rows are journaled at their message's offset (`Marks`), so a
//! partition read again from any earlier point skips exactly the rows each
//! leaf already holds. A run ends when its consumer's group is rebalanced
//! (the next run takes the new assignment over: see `crate::consume`), when
//! it is stopped, or with `until` at the end offsets it was given.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use chute_core::parse::json_array as array;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, Rebalance};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::Message;
use rdkafka::{ClientContext, Offset, TopicPartitionList};

use chute_engine::load::ack::{AckId, AckRef, Completion};
use chute_engine::load::model::{Chunk, Marks, Payload};
use chute_engine::load::source::Source;
use chute_engine::load::{Delivery, Input, LoadError, LoadProgress, LoadSpec, Opened, Prepared, RejectOrigin, Shared, TextFormat, kinds};
use chute_engine::retry::{self, Classify, Fault, Policy};

/// A consumer of chute's: it notes every rebalance of its group.
pub type KafkaConsumer = BaseConsumer<Watch>;

/// Counts the group's rebalances and keeps the assignment they made.
#[derive(Debug, Default)]
pub struct Watch {
    pub generation: AtomicU64,
    pub assigned: Mutex<Vec<(String, i32)>>,
    /// librdkafka's last error (it never quotes a setting's value): why the
    /// brokers could not be reached, for the message that says so.
    pub last_error: Mutex<Option<String>>,
    /// When librdkafka last said every broker is down (it says so again
    /// after each failed reconnection while they are).
    pub all_down_at: Mutex<Option<Instant>>,
    /// The group's last rebalance gave this consumer no partition.
    pub given_none: AtomicBool,
}

impl ClientContext for Watch {
    fn log(&self, level: rdkafka::config::RDKafkaLogLevel, _facility: &str, log_message: &str) {
        use rdkafka::config::RDKafkaLogLevel as L;
        if matches!(level, L::Emerg | L::Alert | L::Critical | L::Error) {
            // "[thrd:…]: broker: what happened": the part after the thread's name.
            let text = log_message.split_once("]: ").map_or(log_message, |(_, t)| t);
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(text.to_owned());
        }
    }

    fn error(&self, error: KafkaError, reason: &str) {
        // "All brokers are down" follows the error that says why: it would hide it.
        if error.rdkafka_error_code() != Some(RDKafkaErrorCode::AllBrokersDown) {
            *self.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.to_owned());
        } else {
            *self.all_down_at.lock().unwrap_or_else(|p| p.into_inner()) = Some(Instant::now());
        }
    }
}

impl Watch {
    /// Why the brokers cannot be reached, while librdkafka says every one
    /// is down (it last said so less than a reconnection backoff ago).
    pub fn unreachable(&self) -> Option<String> {
        let at = (*self.all_down_at.lock().unwrap_or_else(|p| p.into_inner()))?;
        (at.elapsed() < Duration::from_secs(12))
            .then(|| self.last_error.lock().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_else(|| "every broker is down".to_owned()))
    }

    /// librdkafka's last error. Its log and error events wait in the
    /// consumer's queue until a poll serves them, so the queue is served
    /// first (nothing is assigned yet when this is asked: no message is taken).
    pub fn last_error(consumer: &KafkaConsumer) -> Option<String> {
        for _ in 0..64 {
            let _ = consumer.poll(Duration::ZERO);
        }
        consumer.context().last_error.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ConsumerContext for Watch {
    fn post_rebalance(&self, _consumer: &BaseConsumer<Self>, rebalance: &Rebalance<'_>) {
        let mut assigned = self.assigned.lock().unwrap_or_else(|p| p.into_inner());
        match rebalance {
            Rebalance::Assign(tpl) => {
                *assigned = tpl.elements().iter().map(|e| (e.topic().to_owned(), e.partition())).collect();
                self.given_none.store(assigned.is_empty(), Ordering::SeqCst);
            }
            Rebalance::Revoke(_) => assigned.clear(),
            Rebalance::Error(_) => return,
        }
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

/// One partition a run reads.
#[derive(Debug, Clone)]
pub struct KafkaPart {
    /// Its number in the journal (`journal::shared_inputs`).
    pub input: u32,
    pub topic: String,
    pub partition: i32,
    /// Stop at this offset (`--until-end`: the end it had when the consumer started).
    pub until: Option<i64>,
}

/// What one run of a consumer reads (its [`KafkaInput`]).
#[derive(Clone)]
pub struct KafkaRun {
    pub consumer: Arc<KafkaConsumer>,
    pub parts: Vec<KafkaPart>,
    /// Every partition's name by its journal number ("topic/partition").
    pub names: Vec<String>,
    /// The group's rebalance count when the run was made: another one ends it.
    pub generation: u64,
    /// Set once the run stopped because the group was rebalanced.
    pub rebalanced: Arc<AtomicBool>,
    /// Set when the run's connection to the server was lost: the server
    /// reached now (a standby promoted after a failover) may lack commits
    /// the run counted, so the run ends and the next one reads the
    /// positions that server holds (see `crate::consume`).
    pub reread: Arc<AtomicBool>,
    /// Where each partition is read from, filled once the journal is open.
    pub(crate) seek: Arc<OnceLock<HashMap<u32, u64>>>,
    /// The run's token in the journal (it owns the partitions under it), once the journal is open.
    pub owner: Arc<OnceLock<String>>,
    /// How far each partition is committed so far (its next offset), from the acknowledgements.
    pub through: Arc<Mutex<HashMap<u32, u64>>>,
    /// The thread that gathers `through`: done once every acknowledgement fired.
    pub(crate) gatherer: Arc<Mutex<Option<std::thread::JoinHandle<()>>>>,
    /// Send a partition's messages after they waited this long, even fewer than a chunk.
    pub flush_after: Duration,
    /// Columns filled from the message's key, headers and timestamp (JSON messages).
    pub fields: Arc<MessageFields>,
    /// Rejected messages go to this topic instead of the reject file.
    pub dead_letter: Option<Arc<dyn chute_engine::load::rejects::DeadLetter>>,
    /// Messages received so far (a run that lags and receives none is waiting for the broker).
    pub received: Arc<AtomicU64>,
    /// What the run is waiting for, to be said to the user (by the load's progress).
    pub notices: Arc<Mutex<Vec<String>>>,
}

/// A dead-letter topic: each rejected record is a message with the
/// headers `chute.partition` (TOPIC/PARTITION), `chute.offset` and
/// `chute.reason`; `flush` waits until the brokers have them all.
pub struct DeadLetterTopic {
    pub producer: rdkafka::producer::ThreadedProducer<rdkafka::producer::DefaultProducerContext>,
    pub topic: String,
}

impl std::fmt::Debug for DeadLetterTopic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeadLetterTopic").field("topic", &self.topic).finish()
    }
}

/// A message the producer did not take: a full queue frees up as the
/// brokers acknowledge; anything else is not worth a retry.
struct Produce(KafkaError);

impl Classify for Produce {
    fn fault(&self) -> Fault {
        match self.0 {
            KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull) => Fault::Again,
            _ => Fault::Fatal,
        }
    }
}

impl chute_engine::load::rejects::DeadLetter for DeadLetterTopic {
    fn send(&self, input: &str, line: u64, raw: &[u8], reason: &str) -> Result<(), String> {
        use rdkafka::message::{Header, OwnedHeaders};
        let offset = line.to_string();
        let headers = OwnedHeaders::new()
            .insert(Header { key: "chute.partition", value: Some(input) })
            .insert(Header { key: "chute.offset", value: Some(&offset) })
            .insert(Header { key: "chute.reason", value: Some(reason) });
        let mut record = Some(rdkafka::producer::BaseRecord::<(), [u8]>::to(&self.topic).payload(raw).headers(headers));
        // The producer's queue fills when rejects come faster than the
        // brokers take them: wait for room, as long as `flush` waits.
        let policy = Policy::new(Duration::from_millis(5), Duration::from_millis(200), Duration::from_secs(60), &[Fault::Again]);
        let sent = retry::run_blocking(&policy, |_| {
            let r = record.take().expect("the record comes back with each failure");
            self.producer.send(r).map_err(|(e, r)| {
                record = Some(r);
                Produce(e)
            })
        });
        sent.map_err(|p| match policy.gave_up_on(&p) {
            true => format!("{}: the dead-letter topic {} took nothing for 60s", p.0, self.topic),
            false => p.0.to_string(),
        })
    }

    fn flush(&self) -> Result<(), String> {
        use rdkafka::producer::Producer;
        self.producer.flush(Duration::from_secs(60)).map_err(|e| e.to_string())
    }

    fn name(&self) -> String {
        format!("dead-letter topic {}", self.topic)
    }
}

/// Columns a JSON message's rows get from the message itself.
#[derive(Debug, Clone, Default)]
pub struct MessageFields {
    pub key: Option<String>,
    /// (header name, column)
    pub headers: Vec<(String, String)>,
    pub timestamp: Option<String>,
}

impl MessageFields {
    pub fn is_empty(&self) -> bool {
        self.key.is_none() && self.headers.is_empty() && self.timestamp.is_none()
    }

    /// `"col": value, …` for one message (text values; null when the message has none).
    fn members<M: Message>(&self, m: &M) -> String {
        use rdkafka::message::Headers;
        let text = |b: Option<&[u8]>| b.map_or_else(|| "null".to_owned(), |b| json_string(&String::from_utf8_lossy(b)));
        let mut out = String::new();
        if let Some(col) = &self.key {
            out.push_str(&format!("{}: {},", json_string(col), text(m.key())));
        }
        for (name, col) in &self.headers {
            let value = m.headers().and_then(|h| h.iter().find(|h| h.key == name).and_then(|h| h.value));
            out.push_str(&format!("{}: {},", json_string(col), text(value)));
        }
        if let Some(col) = &self.timestamp {
            let at = m
                .timestamp()
                .to_millis()
                .and_then(|ms| jiff::Timestamp::from_millisecond(ms).ok())
                .map_or_else(|| "null".to_owned(), |t| json_string(&t.to_string()));
            out.push_str(&format!("{}: {at},", json_string(col)));
        }
        out
    }
}

fn json_string(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| "null".to_owned())
}

/// Appends `payload`'s lines to `data`, each JSON object line given `members` first.
fn append_with(data: &mut Vec<u8>, payload: &[u8], members: &str) {
    for line in payload.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let start = line.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(line.len());
        if line.get(start) == Some(&b'{') {
            data.extend_from_slice(b"{");
            let rest = &line[start + 1..];
            let empty = rest.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'}');
            let m = if empty { members.trim_end_matches(',') } else { members };
            data.extend_from_slice(m.as_bytes());
            data.extend_from_slice(rest);
        } else {
            // Not an object: left as it is, and rejected as such.
            data.extend_from_slice(line);
        }
        data.push(b'\n');
    }
}

impl KafkaRun {
    pub fn new(consumer: Arc<KafkaConsumer>, parts: Vec<KafkaPart>, names: Vec<String>, generation: u64, flush_after: Duration) -> Self {
        KafkaRun {
            consumer,
            parts,
            names,
            generation,
            rebalanced: Default::default(),
            reread: Default::default(),
            seek: Default::default(),
            owner: Default::default(),
            through: Default::default(),
            gatherer: Default::default(),
            flush_after,
            fields: Default::default(),
            dead_letter: None,
            received: Default::default(),
            notices: Default::default(),
        }
    }

    /// Waits until every acknowledgement of the run fired (call once the
    /// load returned): `through` is then final.
    pub fn settle(&self) {
        let handle = self.gatherer.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for KafkaRun {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KafkaRun").field("parts", &self.parts).field("generation", &self.generation).finish()
    }
}

pub(crate) struct KafkaSource {
    pub(crate) run: KafkaRun,
    /// JSON messages: a message that is an array holds one row an element.
    pub(crate) json_arrays: bool,
    /// Each message's records end with a line end, chute's own when it has
    /// none (every format but CSV and text, which parse each message on its own).
    pub(crate) line_ends: bool,
    pub(crate) chunk_bytes: usize,
    pub(crate) bytes_read: Arc<AtomicU64>,
}

/// A partition's messages not sent yet.
struct Pending {
    input: u32,
    until: Option<i64>,
    /// The offset after the last message sent (where the next chunk's range starts).
    sent_to: u64,
    data: Vec<u8>,
    starts: Vec<u32>,
    offsets: Vec<u64>,
    since: Option<Instant>,
    done: bool,
}

impl Source for KafkaSource {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, cancel: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError> {
        let run = &self.run;
        let from = run.seek.get().cloned().unwrap_or_default();
        // Acknowledgements pass through here on their way to the load: how far
        // each partition is committed is known while the run goes on.
        let acks = &gather(run, acks, run.names.len().max(1));
        let mut tag = 0u64;
        let mut scratch = Vec::new();
        let mut pending: HashMap<(String, i32), Pending> = HashMap::new();
        let mut tpl = TopicPartitionList::new();
        for p in &run.parts {
            let at = from.get(&p.input).copied().unwrap_or(0);
            // Nothing before `at` is left: the committed prefix starts there.
            tag += 1;
            AckRef::new(AckId { input: p.input, start: 0, end: at, first_line: 0, end_line: at, tag }, acks.clone()).settle();
            let done = p.until.is_some_and(|u| at as i64 >= u);
            pending.insert(
                (p.topic.clone(), p.partition),
                Pending {
                    input: p.input,
                    until: p.until,
                    sent_to: at,
                    data: Vec::new(),
                    starts: Vec::new(),
                    offsets: Vec::new(),
                    since: None,
                    done,
                },
            );
            if !done {
                tpl.add_partition_offset(&p.topic, p.partition, Offset::Offset(at as i64)).map_err(kafka_error)?;
            }
        }
        run.consumer.assign(&tpl).map_err(kafka_error)?;
        let send = |p: &mut Pending, tag: &mut u64| -> bool {
            if p.offsets.is_empty() {
                return true;
            }
            *tag += 1;
            let (first, end) = (p.offsets[0], p.offsets[p.offsets.len() - 1] + 1);
            let ack =
                AckRef::new(AckId { input: p.input, start: p.sent_to, end, first_line: first, end_line: end, tag: *tag }, acks.clone());
            let marks = Marks { starts: std::mem::take(&mut p.starts), offsets: std::mem::take(&mut p.offsets), range: (p.sent_to, end) };
            p.sent_to = end;
            p.since = None;
            let chunk = Chunk {
                input: p.input as usize,
                first_line: first,
                base_offset: 0,
                ack: Some(ack),
                payload: Payload::Messages { data: std::mem::take(&mut p.data), marks },
            };
            out.send(chunk).is_ok()
        };
        loop {
            if cancel.load(Ordering::Relaxed) {
                return Ok(());
            }
            if run.consumer.context().generation.load(Ordering::SeqCst) != run.generation {
                // What is not sent yet is read again by whoever has the partition now.
                run.rebalanced.store(true, Ordering::SeqCst);
                return Ok(());
            }
            if run.reread.load(Ordering::Relaxed) {
                // What is not sent yet is read again by the next run, from the server's positions.
                return Ok(());
            }
            if pending.values().all(|p| p.done && p.offsets.is_empty()) {
                return Ok(());
            }
            match run.consumer.poll(Duration::from_millis(50)) {
                Some(Ok(m)) => {
                    run.received.fetch_add(1, Ordering::Relaxed);
                    // (No allocation per message: a run has a few partitions.)
                    let (topic, partition) = (m.topic(), m.partition());
                    let Some(p) = pending.iter_mut().find(|((t, n), _)| *n == partition && t == topic).map(|(_, p)| p) else { continue };
                    let offset = m.offset() as u64;
                    if p.done || offset < p.sent_to || p.offsets.last().is_some_and(|l| offset <= *l) {
                        continue;
                    }
                    let payload = m.payload().unwrap_or_default();
                    self.bytes_read.fetch_add(payload.len() as u64, Ordering::Relaxed);
                    p.starts.push(p.data.len() as u32);
                    p.offsets.push(offset);
                    // An array of rows becomes their lines (one an element); one that
                    // cannot be split stays as it is, one bad line.
                    let payload = if self.json_arrays && array::looks_like_array(payload) {
                        scratch.clear();
                        if array::array_as_lines(payload, &mut scratch) { &scratch[..] } else { payload }
                    } else {
                        payload
                    };
                    if run.fields.is_empty() {
                        p.data.extend_from_slice(payload);
                        // (CSV and text are parsed message by message: a line end of
                        // chute's own after a trailing backslash would be data.)
                        if self.line_ends && !payload.ends_with(b"\n") {
                            p.data.push(b'\n');
                        }
                    } else {
                        append_with(&mut p.data, payload, &run.fields.members(&m));
                    }
                    p.since.get_or_insert_with(Instant::now);
                    if p.until.is_some_and(|u| offset as i64 + 1 >= u) {
                        p.done = true;
                    }
                    if (p.done || p.data.len() >= self.chunk_bytes) && !send(p, &mut tag) {
                        return Ok(());
                    }
                }
                Some(Err(KafkaError::PartitionEOF(partition))) => {
                    // At the end: a partition whose last offsets hold no message (transaction markers) is done too.
                    for ((_, n), p) in pending.iter_mut() {
                        if *n == partition && p.until.is_some() && p.offsets.is_empty() {
                            p.done = p.done || at_end(&run.consumer, p, &run.parts);
                        }
                    }
                }
                Some(Err(e)) if fatal(&e) => return Err(kafka_error(e)),
                // Brokers restarting, leaders moving: librdkafka retries by itself.
                Some(Err(_)) | None => {}
            }
            // One clock read a message (six partitions' `elapsed()` each were a third of this thread's time).
            let now = Instant::now();
            for p in pending.values_mut() {
                if p.since.is_some_and(|s| now.saturating_duration_since(s) >= run.flush_after) && !send(p, &mut tag) {
                    return Ok(());
                }
            }
        }
    }
}

/// A channel for the run's acknowledgements that keeps `run.through` up to
/// date and passes each on to `load`.
fn gather(run: &KafkaRun, load: &flume::Sender<Completion>, inputs: usize) -> flume::Sender<Completion> {
    let (tx, rx) = flume::unbounded::<Completion>();
    let (load, through) = (load.clone(), run.through.clone());
    let handle = std::thread::spawn(move || {
        let mut prefix = chute_engine::load::ack::CommittedPrefix::new(inputs);
        for c in rx.iter() {
            let input = c.id.input;
            if prefix.absorb(&c)
                && let Some((_, at)) = prefix.through().get(input as usize)
            {
                through.lock().unwrap_or_else(|p| p.into_inner()).insert(input, *at);
            }
            let _ = load.send(c);
        }
    });
    *run.gatherer.lock().unwrap_or_else(|p| p.into_inner()) = Some(handle);
    tx
}

/// Whether a partition at its end has reached its `until` (the consumer's
/// position is past it: the offsets left held no message).
fn at_end(consumer: &KafkaConsumer, p: &Pending, parts: &[KafkaPart]) -> bool {
    let Some(part) = parts.iter().find(|k| k.input == p.input) else { return true };
    let Ok(positions) = consumer.position() else { return false };
    let Some(e) = positions.find_partition(&part.topic, part.partition) else { return false };
    match (e.offset(), p.until) {
        (Offset::Offset(o), Some(u)) => o >= u,
        _ => false,
    }
}

/// Errors no retry mends: the consumer stops.
fn fatal(e: &KafkaError) -> bool {
    matches!(
        e.rdkafka_error_code(),
        Some(
            RDKafkaErrorCode::Fatal
                | RDKafkaErrorCode::SaslAuthenticationFailed
                | RDKafkaErrorCode::Authentication
                | RDKafkaErrorCode::TopicAuthorizationFailed
                | RDKafkaErrorCode::GroupAuthorizationFailed
                | RDKafkaErrorCode::SSL
        )
    )
}

pub fn kafka_error(e: KafkaError) -> LoadError {
    LoadError::Input { input: "Kafka".into(), message: e.to_string() }
}

/// What a message holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MessageFormat {
    /// Delimited text: one or more records (a JSON message may be an array of objects).
    Text(TextFormat),
    /// InfluxDB line protocol, timestamps in this unit.
    LineProtocol(chute_core::parse::lineproto::Precision),
}

/// Partitions of Kafka topics, one run of a consumer (`crate::consume`):
/// each message holds one or more records in `format`. Journaled under the
/// consumer's load id, by message offset; the partitions are shared with
/// the group's other consumers.
#[derive(Debug, Clone)]
pub struct KafkaInput {
    run: KafkaRun,
    format: MessageFormat,
    /// Bytes of messages a chunk gathers at most.
    chunk_bytes: usize,
}

impl KafkaInput {
    pub fn new(run: KafkaRun, format: MessageFormat, chunk_bytes: usize) -> KafkaInput {
        KafkaInput { run, format, chunk_bytes }
    }
}

impl Input for KafkaInput {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> futures_util::future::BoxFuture<'a, Result<Prepared, LoadError>> {
        use futures_util::FutureExt;
        match self.format {
            MessageFormat::Text(f) => kinds::delimited(spec, f, (false, true), control, progress).boxed(),
            MessageFormat::LineProtocol(p) => chute_engine::lines::kind::prepare(spec, p, control, progress).boxed(),
        }
    }

    fn open(&self, _: &LoadSpec, _: &Prepared) -> Result<Opened, LoadError> {
        let run = &self.run;
        let topic = run.parts.first().map_or("kafka", |p| p.topic.as_str());
        let bytes_read = Arc::new(AtomicU64::new(0));
        let source = KafkaSource {
            run: run.clone(),
            json_arrays: self.format == MessageFormat::Text(TextFormat::Jsonl),
            line_ends: !matches!(self.format, MessageFormat::Text(TextFormat::Csv | TextFormat::Text)),
            chunk_bytes: self.chunk_bytes,
            bytes_read: bytes_read.clone(),
        };
        let mut o = Opened::new(Box::new(source), Delivery::Rerun, bytes_read);
        o.names = run.names.clone();
        o.rejects = RejectOrigin {
            default_path: Some(format!("{topic}.rejects").into()),
            dead_letter: run.dead_letter.clone(),
            ..RejectOrigin::nowhere(run.names.len().max(1))
        };
        o.shared = Some(Shared { inputs: run.parts.iter().map(|p| p.input).collect(), seek: run.seek.clone(), owner: run.owner.clone() });
        Ok(o)
    }

    fn is_live(&self) -> bool {
        true
    }
}
