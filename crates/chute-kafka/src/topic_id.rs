//! Each topic's id, so that a topic deleted and made again under its name
//! is told from the one the journal's positions were kept for (its offsets
//! start at 0 again; see `chute_engine::load::journal::shared_inputs`).
//!
//! Kafka gives every topic a UUID when it is made (KIP-516, Kafka 2.8).
//! The rdkafka crate does not show it: its metadata has no id. librdkafka
//! has it in its admin API's topic descriptions (`rd_kafka_DescribeTopics`,
//! librdkafka 2.3), which any client may call, so it is asked through the
//! bindings the rdkafka crate exports, on the consumer's own handle.

use std::collections::HashMap;
use std::ffi::{CStr, CString, c_char, c_int};
use std::time::Duration;

use rdkafka::bindings as rd;
use rdkafka::consumer::Consumer;

use crate::KafkaConsumer;

/// Each of `topics`' id (Kafka's base64 form) as the brokers describe it;
/// a topic the brokers describe without one (older than Kafka 2.8) is left
/// out. `Err`: the brokers could not be asked (why).
pub(crate) fn topic_ids(consumer: &KafkaConsumer, topics: &[String], timeout: Duration) -> Result<HashMap<String, String>, String> {
    let names: Vec<CString> = topics.iter().map(|t| CString::new(t.as_str())).collect::<Result<_, _>>().map_err(|e| e.to_string())?;
    let mut pointers: Vec<*const c_char> = names.iter().map(|n| n.as_ptr()).collect();
    let rk = consumer.client().native_ptr();
    let ms = c_int::try_from(timeout.as_millis()).unwrap_or(c_int::MAX);
    // SAFETY: every object made here is destroyed here, after its last use;
    // the names outlive the collection made of them; the result's strings
    // are copied before the event that owns them is destroyed.
    unsafe {
        let collection = rd::rd_kafka_TopicCollection_of_topic_names(pointers.as_mut_ptr(), pointers.len());
        let options = rd::rd_kafka_AdminOptions_new(rk, rd::rd_kafka_admin_op_t::RD_KAFKA_ADMIN_OP_DESCRIBETOPICS);
        let mut why = [0 as c_char; 256];
        let _ = rd::rd_kafka_AdminOptions_set_request_timeout(options, ms, why.as_mut_ptr(), why.len());
        let queue = rd::rd_kafka_queue_new(rk);
        rd::rd_kafka_DescribeTopics(rk, collection, options, queue);
        let event = rd::rd_kafka_queue_poll(queue, ms.saturating_add(1000));
        let out = described(event);
        if !event.is_null() {
            rd::rd_kafka_event_destroy(event);
        }
        rd::rd_kafka_queue_destroy(queue);
        rd::rd_kafka_AdminOptions_destroy(options);
        rd::rd_kafka_TopicCollection_destroy(collection);
        out
    }
}

/// The topics' ids in a DescribeTopics result event.
///
/// # Safety
/// `event` is null or a live event of a DescribeTopics request.
unsafe fn described(event: *mut rd::rd_kafka_event_t) -> Result<HashMap<String, String>, String> {
    let text = |p: *const c_char| if p.is_null() { String::new() } else { unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned() };
    if event.is_null() {
        return Err("the brokers did not describe the topics in time".into());
    }
    // SAFETY (all calls below): `event` is live; what it returns lives as long as it does.
    unsafe {
        if rd::rd_kafka_event_error(event) != rd::rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR {
            return Err(text(rd::rd_kafka_event_error_string(event)));
        }
        let result = rd::rd_kafka_event_DescribeTopics_result(event);
        if result.is_null() {
            return Err("the brokers' answer is not a description of topics".into());
        }
        let mut n = 0usize;
        let descriptions = rd::rd_kafka_DescribeTopics_result_topics(result, &mut n);
        let mut out = HashMap::new();
        for i in 0..n {
            let d = *descriptions.add(i);
            if !rd::rd_kafka_TopicDescription_error(d).is_null() {
                continue;
            }
            let id = rd::rd_kafka_TopicDescription_topic_id(d);
            if id.is_null() || (rd::rd_kafka_Uuid_most_significant_bits(id) == 0 && rd::rd_kafka_Uuid_least_significant_bits(id) == 0) {
                continue;
            }
            out.insert(text(rd::rd_kafka_TopicDescription_name(d)), text(rd::rd_kafka_Uuid_base64str(id)));
        }
        Ok(out)
    }
}
