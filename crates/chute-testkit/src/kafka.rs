//! The Kafka fixture: real Apache Kafka brokers (KRaft, no ZooKeeper) for
//! the tests of `chute consume`.
//!
//! The broker is Apache Kafka's own artifacts from Maven Central, which
//! `scripts/ensure-deps` resolves into `target/kafka/` (the class path is in
//! `target/kafka/classpath.txt`), run by the machine's Java 17. Each test
//! binary starts one shared broker on first use ([`shared`]): a log
//! directory formatted for a one-node cluster (broker and controller in one
//! process) on two loopback ports that were free a moment before. Tests
//! that stop or restart a broker, or need TLS and SASL, start owned ones
//! ([`Broker::start`]) that stop when dropped. A test of replication starts
//! a cluster of its own ([`Cluster::start`]): three such nodes, each broker
//! and controller, every one in the quorum, with three copies of each
//! partition.
//!
//! As with the PostgreSQL fixture, a watchdog process in its own process
//! group waits for the test process to end, then kills the broker and
//! removes its directory; brokers left by a run that was killed outright are
//! found by the next run (the owner's pid is in the directory name) and
//! removed. When the artifacts or Java are missing the fixture panics with
//! the command to run: a test never skips silently.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use rdkafka::ClientConfig;
use rdkafka::producer::{BaseRecord, DefaultProducerContext, Producer, ThreadedProducer};

const PREFIX: &str = "chute-kafka-";

/// The artifacts' class path, as `scripts/ensure-deps` wrote it.
pub fn classpath() -> String {
    let file = kafka_dir().join("classpath.txt");
    match std::fs::read_to_string(&file) {
        Ok(cp) if !cp.trim().is_empty() => cp.trim().to_owned(),
        _ => panic!(
            "test fixture: no Apache Kafka artifacts ({} is missing): run scripts/ensure-deps, which resolves them from Maven Central",
            file.display()
        ),
    }
}

/// `target/kafka` of this checkout (or `CHUTE_KAFKA_DIR`).
fn kafka_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("CHUTE_KAFKA_DIR") {
        return PathBuf::from(d);
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/kafka")
}

/// What an owned broker adds to the plain one.
#[derive(Debug, Default, Clone)]
pub struct BrokerSetup {
    /// A third listener, SASL over TLS, with PLAIN and SCRAM-SHA-256 users.
    pub secure: Option<Secure>,
}

/// The SASL_SSL listener's certificate and users.
#[derive(Debug, Clone)]
pub struct Secure {
    /// PEM: the broker's certificate chain and its private key (PKCS#8).
    pub cert_chain: String,
    pub key: String,
    /// (user, password) accepted with SASL/PLAIN.
    pub plain_users: Vec<(String, String)>,
    /// (user, password) accepted with SCRAM-SHA-256.
    pub scram_users: Vec<(String, String)>,
}

/// One broker (and its KRaft controller) in a directory of its own.
#[derive(Debug)]
pub struct Broker {
    root: PathBuf,
    /// The PLAINTEXT listener's port.
    pub port: u16,
    controller_port: u16,
    /// The SASL_SSL listener's port, when set up with one.
    pub secure_port: Option<u16>,
    child: Mutex<Option<Child>>,
    owned: bool,
    role: Role,
}

/// Where a node stands in its cluster: what its `server.properties` say
/// beyond the listeners.
#[derive(Debug, Clone)]
struct Role {
    node_id: u32,
    /// `controller.quorum.voters`: every node, `ID@HOST:CONTROLLER-PORT`.
    voters: String,
    /// Nodes in the cluster: each holds a copy of the internal topics and
    /// of every topic made by the fixture.
    nodes: u32,
}

impl Role {
    fn properties(&self) -> String {
        let (n, isr) = (self.nodes, self.nodes.min(2));
        let mut text = format!(
            "node.id={}\n\
             controller.quorum.voters={}\n\
             offsets.topic.replication.factor={n}\n\
             transaction.state.log.replication.factor={n}\n\
             transaction.state.log.min.isr={isr}\n",
            self.node_id, self.voters
        );
        if n > 1 {
            // A killed node is fenced, and its partitions led elsewhere, 5 s
            // after its last heartbeat (Kafka's default: 9 s). A write is
            // acknowledged once two copies have it. A client quota (see
            // `Cluster::throttle_consumers`) is measured over 2 s, not 11:
            // a client is held to it within 2 s instead of after a burst
            // of ten seconds' worth.
            text.push_str(&format!(
                "min.insync.replicas={isr}\n\
                 broker.heartbeat.interval.ms=500\n\
                 broker.session.timeout.ms=5000\n\
                 quota.window.num=2\n\
                 quota.window.size.seconds=1\n"
            ));
        }
        text
    }
}

static SHARED: OnceLock<Broker> = OnceLock::new();

/// The broker shared by every test in this test binary, started on first use.
pub fn shared() -> &'static Broker {
    SHARED.get_or_init(|| Broker::start_inner(&BrokerSetup::default(), false))
}

impl Broker {
    /// A broker owned by the caller: killed and removed on drop.
    pub fn start(setup: &BrokerSetup) -> Broker {
        Broker::start_inner(setup, true)
    }

    fn start_inner(setup: &BrokerSetup, owned: bool) -> Broker {
        remove_leftovers();
        let mut broker = Broker::new_node(setup, owned);
        broker.role = Role { node_id: 1, voters: format!("1@127.0.0.1:{}", broker.controller_port), nodes: 1 };
        broker.write_config(setup);
        formatted(broker.format(setup, &new_cluster_id()).output());
        broker.launch();
        broker
    }

    /// A directory (its watchdog already watching) and free ports for one
    /// node; nothing written or started yet.
    fn new_node(setup: &BrokerSetup, owned: bool) -> Broker {
        static NODES: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        let seq = NODES.fetch_add(1, Ordering::Relaxed);
        let root = std::env::temp_dir().join(format!("{PREFIX}{}-{nanos:x}-{seq}", std::process::id()));
        std::fs::create_dir_all(&root).unwrap_or_else(|e| panic!("test fixture: cannot create {}: {e}", root.display()));
        spawn_watchdog(&root);
        let ports = free_ports(if setup.secure.is_some() { 3 } else { 2 });
        let (port, controller_port, secure_port) = (ports[0], ports[1], ports.get(2).copied());
        let role = Role { node_id: 1, voters: String::new(), nodes: 1 };
        Broker { root, port, controller_port, secure_port, child: Mutex::new(None), owned, role }
    }

    /// `HOST:PORT` of the plain listener, for `--brokers`.
    pub fn bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `HOST:PORT` of the SASL_SSL listener.
    pub fn secure_bootstrap(&self) -> String {
        format!("127.0.0.1:{}", self.secure_port.expect("a broker set up with a secure listener"))
    }

    fn write_config(&self, setup: &BrokerSetup) {
        let (p, c) = (self.port, self.controller_port);
        let mut listeners = format!("PLAINTEXT://127.0.0.1:{p},CONTROLLER://127.0.0.1:{c}");
        let mut advertised = format!("PLAINTEXT://127.0.0.1:{p}");
        let mut protocols = "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT".to_owned();
        let mut extra = String::new();
        if let (Some(s), Some(sp)) = (&setup.secure, self.secure_port) {
            listeners.push_str(&format!(",SASL_SSL://127.0.0.1:{sp}"));
            advertised.push_str(&format!(",SASL_SSL://127.0.0.1:{sp}"));
            protocols.push_str(",SASL_SSL:SASL_SSL");
            std::fs::write(self.root.join("broker.crt"), &s.cert_chain).expect("write the broker's certificate");
            std::fs::write(self.root.join("broker.key"), &s.key).expect("write the broker's key");
            let plain: String = s.plain_users.iter().map(|(u, pw)| format!(" user_{u}=\"{pw}\"")).collect();
            extra = format!(
                "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256\n\
                 ssl.keystore.type=PEM\n\
                 ssl.keystore.location={root}/broker.pem\n\
                 listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required{plain};\n\
                 listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;\n",
                root = self.root.display()
            );
            // A PEM key store is one file: the private key, then the chain.
            std::fs::write(self.root.join("broker.pem"), format!("{}\n{}", s.key.trim(), s.cert_chain.trim()))
                .expect("write the key store");
        }
        let props = format!(
            "process.roles=broker,controller\n\
             {role}\
             listeners={listeners}\n\
             advertised.listeners={advertised}\n\
             controller.listener.names=CONTROLLER\n\
             inter.broker.listener.name=PLAINTEXT\n\
             listener.security.protocol.map={protocols}\n\
             log.dirs={root}/data\n\
             offsets.topic.num.partitions=4\n\
             group.initial.rebalance.delay.ms=0\n\
             num.partitions=1\n\
             auto.create.topics.enable=false\n\
             log.flush.interval.messages=9223372036854775807\n\
             {extra}",
            role = self.role.properties(),
            root = self.root.display()
        );
        std::fs::write(self.root.join("server.properties"), props).expect("write server.properties");
    }

    /// The command that formats the log directory (KRaft) for the cluster
    /// `cluster_id`, with the SCRAM users when there are any.
    fn format(&self, setup: &BrokerSetup, cluster_id: &str) -> Command {
        let mut args: Vec<String> = vec!["format".into(), "-t".into(), cluster_id.into(), "-c".into(), self.config_path()];
        if let Some(s) = &setup.secure {
            for (u, pw) in &s.scram_users {
                args.push("--add-scram".into());
                args.push(format!("SCRAM-SHA-256=[name={u},password={pw}]"));
            }
        }
        let mut cmd = java("kafka.tools.StorageTool");
        cmd.args(&args);
        cmd
    }

    fn config_path(&self) -> String {
        self.root.join("server.properties").display().to_string()
    }

    /// Starts the broker process and waits until it answers for its metadata.
    fn launch(&self) {
        let pid = self.spawn();
        self.wait_ready(pid);
    }

    /// Starts the broker process (its output to `broker.log`), without waiting.
    fn spawn(&self) -> u32 {
        let log =
            std::fs::OpenOptions::new().create(true).append(true).open(self.root.join("broker.log")).expect("open the broker's log file");
        let child = java("kafka.Kafka")
            .arg(self.config_path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("a second handle on the log file"))
            .stderr(log)
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("test fixture: cannot start the broker: {e}"));
        let pid = child.id();
        std::fs::write(self.root.join("broker.pid"), pid.to_string()).expect("write broker.pid");
        *self.child.lock().expect("broker process") = Some(child);
        pid
    }

    /// Waits until the broker lists every node of its cluster to a client
    /// (a restarted node of a cluster: until it is back in).
    fn wait_ready(&self, pid: u32) {
        let started = Instant::now();
        let consumer: rdkafka::consumer::BaseConsumer =
            self.client_config().create().unwrap_or_else(|e| panic!("test fixture: a Kafka client: {e}"));
        loop {
            if let Ok(m) = rdkafka::consumer::Consumer::fetch_metadata(&consumer, None, Duration::from_millis(500))
                && m.brokers().len() >= self.role.nodes as usize
            {
                return;
            }
            if !chute_engine::local::process_alive(pid as i32) {
                panic!("test fixture: the broker exited at start; its log:\n{}", self.log_tail());
            }
            if started.elapsed() > Duration::from_secs(90) {
                panic!("test fixture: the broker did not answer within 90 s; its log:\n{}", self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last lines of the broker's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.root.join("broker.log")).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }

    /// A client configuration for the plain listener.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap()).set("log_level", "3");
        c
    }

    /// Kills the broker at once (SIGKILL): nothing is flushed or handed over.
    pub fn kill(&self) {
        if let Some(mut child) = self.child.lock().expect("broker process").take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the broker's process runs (it was started and not killed since).
    pub fn running(&self) -> bool {
        self.child.lock().expect("broker process").as_mut().is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// Starts the killed broker again, on the same ports and log directory.
    pub fn restart(&self) {
        self.kill();
        self.launch();
    }

    /// Makes `topic` with `partitions` partitions, and waits until every
    /// partition has a leader.
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        create_topic(&self.bootstrap(), topic, partitions, 1);
    }

    /// Runs one of Kafka's own command-line tools (its main class) against
    /// the plain listener: whether it succeeded, and stdout then stderr.
    pub fn tool(&self, class: &str, args: &[&str]) -> (bool, String) {
        tool(&self.bootstrap(), class, args)
    }

    /// A producer for the plain listener (idempotent, so a retry after a
    /// lost answer does not write a message twice).
    pub fn producer(&self) -> TestProducer {
        TestProducer::new(self.client_config())
    }
}

/// A cluster of Kafka nodes, each a broker and a KRaft controller in one
/// process and directory (its own watchdog, as a [`Broker`]'s), every node
/// a voter of the controller quorum. The internal topics and the topics
/// made with [`Cluster::create_topic`] have a copy on every node; a write
/// is acknowledged once two copies have it (`min.insync.replicas=2`).
/// Killed and removed on drop.
#[derive(Debug)]
pub struct Cluster {
    nodes: Vec<Broker>,
}

impl Cluster {
    /// Formats `n` log directories with one cluster id and starts the nodes;
    /// returns once each lists all `n` to a client.
    pub fn start(n: u32) -> Cluster {
        assert!(n >= 1, "test fixture: a cluster of no node");
        remove_leftovers();
        let setup = BrokerSetup::default();
        let mut nodes: Vec<Broker> = (0..n).map(|_| Broker::new_node(&setup, true)).collect();
        let voters: Vec<String> = nodes.iter().enumerate().map(|(i, b)| format!("{}@127.0.0.1:{}", i + 1, b.controller_port)).collect();
        let cluster_id = new_cluster_id();
        for (i, node) in nodes.iter_mut().enumerate() {
            node.role = Role { node_id: i as u32 + 1, voters: voters.join(","), nodes: n };
            node.write_config(&setup);
        }
        // Formatting is a JVM start each: side by side.
        let formats: Vec<Child> = nodes
            .iter()
            .map(|b| {
                let mut cmd = b.format(&setup, &cluster_id);
                cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap_or_else(|e| panic!("test fixture: cannot run java: {e}"))
            })
            .collect();
        for f in formats {
            formatted(f.wait_with_output());
        }
        // A node is ready only once a quorum of controllers is up: start all, then wait.
        let pids: Vec<u32> = nodes.iter().map(Broker::spawn).collect();
        for (node, pid) in nodes.iter().zip(pids) {
            node.wait_ready(pid);
        }
        Cluster { nodes }
    }

    /// Every node's `HOST:PORT`, comma-separated, for `--brokers`.
    pub fn bootstrap(&self) -> String {
        self.nodes.iter().map(Broker::bootstrap).collect::<Vec<_>>().join(",")
    }

    /// A client configuration with every node to start from.
    pub fn client_config(&self) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", self.bootstrap()).set("log_level", "3");
        c
    }

    /// Node `i` (from 0; its `node.id` is `i + 1`).
    pub fn node(&self, i: usize) -> &Broker {
        &self.nodes[i]
    }

    /// Makes `topic` with `partitions` partitions, a copy of each on every
    /// node, and waits until each has a leader and every copy in sync.
    pub fn create_topic(&self, topic: &str, partitions: u32) {
        create_topic(&self.bootstrap(), topic, partitions, self.nodes.len() as u32);
    }

    /// Runs one of Kafka's own command-line tools against the cluster.
    pub fn tool(&self, class: &str, args: &[&str]) -> (bool, String) {
        tool(&self.bootstrap(), class, args)
    }

    /// An idempotent producer whose writes are acknowledged only once every
    /// copy in sync has them (`acks=all`).
    pub fn producer(&self) -> TestProducer {
        let mut config = self.client_config();
        config.set("acks", "all");
        TestProducer::new(config)
    }

    /// Holds every consumer to `bytes_per_second` of fetched data on each
    /// node (a default client quota: a node delays its answers to a client
    /// over the rate).
    pub fn throttle_consumers(&self, bytes_per_second: u64) {
        let rate = format!("consumer_byte_rate={bytes_per_second}");
        let (ok, text) =
            self.tool("kafka.admin.ConfigCommand", &["--alter", "--add-config", &rate, "--entity-type", "clients", "--entity-default"]);
        assert!(ok, "test fixture: setting the consumers' quota failed:\n{text}");
    }

    /// The node that leads `partition` of `topic`, once the cluster names a
    /// running one (after [`Cluster::kill`], waits until the leadership
    /// moved off the killed node).
    pub fn leader(&self, topic: &str, partition: i32) -> usize {
        let consumer: rdkafka::consumer::BaseConsumer = self.client_config().create().expect("a Kafka client");
        let started = Instant::now();
        let mut seen = None;
        loop {
            if let Ok(m) = rdkafka::consumer::Consumer::fetch_metadata(&consumer, Some(topic), Duration::from_secs(2)) {
                seen = m
                    .topics()
                    .iter()
                    .filter(|t| t.name() == topic)
                    .flat_map(|t| t.partitions())
                    .find(|p| p.id() == partition)
                    .map(|p| p.leader());
                let running = seen.and_then(|id| usize::try_from(id - 1).ok()).filter(|i| self.nodes.get(*i).is_some_and(Broker::running));
                if let Some(i) = running {
                    return i;
                }
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "test fixture: {topic}/{partition} has no running leader after 60 s (the cluster names node.id {seen:?})"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Kills node `i` at once (SIGKILL): nothing is flushed or handed over.
    pub fn kill(&self, i: usize) {
        self.nodes[i].kill();
    }

    /// Starts node `i` again (killing it first if it runs), on the same
    /// ports and log directory; returns once it is back in the cluster.
    pub fn restart(&self, i: usize) {
        self.nodes[i].restart();
    }

    /// The last lines of each node's log.
    pub fn log_tails(&self) -> String {
        self.nodes.iter().enumerate().map(|(i, b)| format!("--- node {i} ({}):\n{}\n", b.root.display(), b.log_tail())).collect()
    }
}

/// Checks the output of the command that formats a log directory.
fn formatted(out: std::io::Result<Output>) {
    let out = out.unwrap_or_else(|e| panic!("test fixture: cannot run java: {e}"));
    assert!(
        out.status.success(),
        "test fixture: formatting the broker's log directory failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A new Kafka cluster id: 16 random bytes, URL-safe base64 without padding.
fn new_cluster_id() -> String {
    let mut bytes = [0u8; 16];
    let seed = format!("{:?}{}", std::time::SystemTime::now(), std::process::id());
    for (i, b) in seed.bytes().enumerate() {
        bytes[i % 16] = bytes[i % 16].wrapping_mul(31).wrapping_add(b);
    }
    base64_url(&bytes)
}

/// Makes `topic` with `partitions` partitions of `replicas` copies each (the
/// broker's own tool), then waits until each has a leader and every copy in sync.
fn create_topic(bootstrap: &str, topic: &str, partitions: u32, replicas: u32) {
    let out = tool(
        bootstrap,
        "org.apache.kafka.tools.TopicCommand",
        &["--create", "--topic", topic, "--partitions", &partitions.to_string(), "--replication-factor", &replicas.to_string()],
    );
    assert!(out.0, "test fixture: creating topic {topic} failed:\n{}", out.1);
    let consumer: rdkafka::consumer::BaseConsumer =
        ClientConfig::new().set("bootstrap.servers", bootstrap).set("log_level", "3").create().expect("a Kafka client");
    let started = Instant::now();
    loop {
        let ready = rdkafka::consumer::Consumer::fetch_metadata(&consumer, Some(topic), Duration::from_secs(2)).is_ok_and(|m| {
            m.topics().iter().any(|t| {
                t.name() == topic
                    && t.partitions().len() == partitions as usize
                    && t.partitions().iter().all(|p| p.leader() >= 0 && p.isr().len() == replicas as usize)
            })
        });
        if ready {
            return;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "test fixture: topic {topic} has no leaders after 60 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Runs one of Kafka's own command-line tools (its main class) against
/// `bootstrap`: whether it succeeded, and stdout then stderr.
fn tool(bootstrap: &str, class: &str, args: &[&str]) -> (bool, String) {
    let out = java(class)
        .args(["--bootstrap-server", bootstrap])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("test fixture: cannot run java: {e}"));
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    (out.status.success(), text)
}

/// Writes messages to topics; [`TestProducer::flush`] waits until the broker has them.
pub struct TestProducer {
    producer: ThreadedProducer<DefaultProducerContext>,
}

impl std::fmt::Debug for TestProducer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TestProducer")
    }
}

/// One message to produce.
#[derive(Debug, Clone, Default)]
pub struct Message<'a> {
    pub partition: Option<i32>,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
    pub headers: &'a [(&'a str, &'a [u8])],
    /// Milliseconds since the Unix epoch (default: the producer's clock).
    pub timestamp: Option<i64>,
}

impl TestProducer {
    /// An idempotent producer (a retry after a lost answer does not write a
    /// message twice) with `config`'s brokers and settings.
    fn new(mut config: ClientConfig) -> TestProducer {
        let producer: ThreadedProducer<DefaultProducerContext> = config
            .set("enable.idempotence", "true")
            .set("linger.ms", "5")
            .set("batch.num.messages", "10000")
            .set("queue.buffering.max.messages", "1000000")
            .set("compression.type", "lz4")
            .create()
            .unwrap_or_else(|e| panic!("test fixture: a Kafka producer: {e}"));
        TestProducer { producer }
    }

    /// Queues one message (waiting while the local queue is full).
    pub fn send(&self, topic: &str, m: &Message<'_>) {
        let mut headers = rdkafka::message::OwnedHeaders::new();
        for (k, v) in m.headers {
            headers = headers.insert(rdkafka::message::Header { key: k, value: Some(*v) });
        }
        let mut record: BaseRecord<'_, [u8], [u8]> = BaseRecord::to(topic).payload(m.payload).headers(headers);
        if let Some(p) = m.partition {
            record = record.partition(p);
        }
        if let Some(k) = m.key {
            record = record.key(k);
        }
        if let Some(t) = m.timestamp {
            record = record.timestamp(t);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((rdkafka::error::KafkaError::MessageProduction(rdkafka::types::RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err((e, _)) => panic!("test fixture: producing to {topic}: {e}"),
            }
        }
    }

    /// Waits until every queued message is on the broker.
    pub fn flush(&self) {
        self.producer.flush(Duration::from_secs(120)).unwrap_or_else(|e| panic!("test fixture: flushing the producer: {e}"));
        assert_eq!(self.producer.in_flight_count(), 0, "test fixture: messages left unsent");
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if self.owned {
            self.kill();
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }
}

/// `java -cp <artifacts> CLASS`, quiet, with a small heap.
pub fn java(class: &str) -> Command {
    let mut c = Command::new("java");
    c.args(["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dlog4j2.level=warn", "-cp", &classpath(), class]);
    c
}

/// `n` different TCP ports on 127.0.0.1 that nothing listens on right now
/// (each held until all are found, so none comes twice).
fn free_ports(n: usize) -> Vec<u16> {
    let held: Vec<std::net::TcpListener> =
        (0..n).map(|_| std::net::TcpListener::bind(("127.0.0.1", 0)).expect("test fixture: cannot bind a TCP port on 127.0.0.1")).collect();
    held.iter().map(|l| l.local_addr().expect("a bound listener has an address").port()).collect()
}

fn base64_url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..=chunk.len() {
            out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
        }
    }
    out
}

/// Waits for this process to end, then kills the broker and removes `root`.
fn spawn_watchdog(root: &Path) {
    let script = r#"
        owner=$1 root=$2
        while kill -0 "$owner" 2>/dev/null; do sleep 1; done
        pid=$(cat "$root/broker.pid" 2>/dev/null)
        [ -n "$pid" ] && kill -9 "$pid" 2>/dev/null
        rm -rf "$root"
    "#;
    // It outlives this process on purpose (it waits for its end): never waited for.
    let spawned = Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg("chute-kafka-watchdog")
        .arg(std::process::id().to_string())
        .arg(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
    if let Err(e) = spawned {
        panic!("test fixture: cannot start the broker's watchdog: {e}");
    }
}

/// Removes brokers whose test process is gone (a killed run).
fn remove_leftovers() {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else { return };
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(PREFIX) else { continue };
        let owner = rest.split('-').next().and_then(|p| p.parse::<i32>().ok());
        if owner.is_none_or(chute_engine::local::process_alive) {
            continue;
        }
        let root = entry.path();
        let pid = std::fs::read_to_string(root.join("broker.pid")).ok().and_then(|s| s.trim().parse::<i32>().ok());
        if let Some(pid) = pid.filter(|p| is_java(*p)) {
            // SAFETY: signalling a java process that a gone test run left.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        let _ = std::fs::remove_dir_all(&root);
    }
}

fn is_java(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "java")
}
