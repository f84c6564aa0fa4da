//! The Kafka fixture itself: a broker starts, takes messages and gives them back.

use std::time::{Duration, Instant};

use chute_testkit::kafka::{Message, shared};
use rdkafka::Message as _;
use rdkafka::consumer::{BaseConsumer, Consumer};

#[test]
fn a_message_goes_round_the_shared_broker() {
    let broker = shared();
    broker.create_topic("fixture_round", 2);
    let p = broker.producer();
    for i in 0..10 {
        let payload = format!("m{i}");
        p.send("fixture_round", &Message { partition: Some(i % 2), payload: payload.as_bytes(), ..Message::default() });
    }
    p.flush();
    let consumer: BaseConsumer =
        broker.client_config().set("group.id", "fixture").set("auto.offset.reset", "earliest").create().expect("a consumer");
    consumer.subscribe(&["fixture_round"]).expect("subscribe");
    let mut got = Vec::new();
    let started = Instant::now();
    while got.len() < 10 && started.elapsed() < Duration::from_secs(60) {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got.sort();
    assert_eq!(got, (0..10).map(|i| format!("m{i}")).collect::<Vec<_>>());
}
