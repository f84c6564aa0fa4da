//! Prometheus samples (a [`SamplesFeed`]): rows of a series id, a time
//! in milliseconds since 1970 and a value, that `chute serve`'s remote
//! write resolved and checked (`serve::prom`). Each is 24 bytes on the
//! feed (three 8-byte little-endian numbers: the id, the time, the value's
//! bits) and becomes a binary COPY row of the table's `series_id` (bigint),
//! `time` (timestamptz) and `value` (float8) columns, the value as its bits:
//! NaN payloads, Prometheus's staleness marker among them, are kept.
//!
//! Row `i` of a chunk is line `first_line + i` and starts at offset
//! `base_offset + 24 * i`.

use std::sync::Arc;

use chute_core::value::PgType;

use chute_engine::load::kind::{Kind, one_table};
use chute_engine::load::model::{Chunk, ChunkOut, Filed, Reject, RowPos};
use chute_engine::load::routing::Routing;
use chute_engine::load::{Feed, FeedInput, Input, LoadError, LoadProgress, LoadSpec, Opened, Prepared};

/// Bytes of one sample on the feed.
pub(crate) const ROW: usize = 24;

/// The columns a samples table must have, in the feed's order, and their types.
const COLUMNS: [(&str, PgType, &str); 3] =
    [("series_id", PgType::Int8, "bigint"), ("time", PgType::Timestamptz, "timestamptz"), ("value", PgType::Float8, "float8")];

/// 2000-01-01 (PostgreSQL's epoch) in Unix microseconds.
const PG_EPOCH_OFFSET_MICROS: i64 = 946_684_800_000_000;

async fn prepare(spec: &LoadSpec, control: &tokio_postgres::Client, progress: &mut dyn LoadProgress) -> Result<Prepared, LoadError> {
    let names: Vec<String> = COLUMNS.iter().map(|c| c.0.to_owned()).collect();
    let t = one_table(spec, control, progress, None, Some(&names)).await?;
    for (target, (name, ty, shown)) in t.plan.targets.iter().zip(COLUMNS) {
        if target.ty != Some(ty) {
            return Err(LoadError::Setup(format!(
                "{}: column {name} must be {shown} to hold Prometheus samples (series_id bigint, time timestamptz, value float8)",
                t.info.name
            )));
        }
    }
    let kind = Arc::new(SamplesKind { routing: t.routing.clone() });
    Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind))
}

struct SamplesKind {
    routing: Arc<Routing>,
}

/// A service's feed of Prometheus samples (24-byte rows, see the module's
/// doc) into one samples table.
#[derive(Debug, Clone)]
pub struct SamplesFeed {
    feed: Feed,
}

impl SamplesFeed {
    pub fn new(feed: Feed) -> SamplesFeed {
        SamplesFeed { feed }
    }
}

impl Input for SamplesFeed {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> futures_util::future::BoxFuture<'a, Result<Prepared, LoadError>> {
        use futures_util::FutureExt;
        prepare(spec, control, progress).boxed()
    }

    fn open(&self, _: &LoadSpec, _: &Prepared) -> Result<Opened, LoadError> {
        Ok(FeedInput::open_feed(&self.feed))
    }

    fn is_live(&self) -> bool {
        true
    }
}

/// Appends the binary COPY row of one sample (24 bytes on the feed).
fn encode(sample: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let n = |i: usize| u64::from_le_bytes(sample[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
    let micros = (n(1) as i64).checked_mul(1000).and_then(|m| m.checked_sub(PG_EPOCH_OFFSET_MICROS));
    let Some(micros) = micros else { return Err(format!("sample time {} ms is out of range", n(1) as i64)) };
    out.extend_from_slice(&3i16.to_be_bytes());
    for v in [n(0), micros as u64, n(2)] {
        out.extend_from_slice(&8i32.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
    Ok(())
}

impl Kind for SamplesKind {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let data = chunk.data();
        let range = (chunk.input as u32, chunk.base_offset, chunk.base_offset + data.len() as u64);
        let mut filed = Filed::default();
        let mut rc = self.routing.ctx();
        let mut row = Vec::with_capacity(64);
        for (i, sample) in data.chunks(ROW).enumerate() {
            let line = chunk.first_line + i as u64;
            row.clear();
            let encoded = if sample.len() == ROW { encode(sample, &mut row) } else { Err("malformed sample data (a chute bug)".into()) };
            if let Err(reason) = encoded {
                filed.rejects.push(Reject::new(chunk.input, line, Vec::new(), format!("sample {line}: {reason}")));
                continue;
            }
            let pos = RowPos { input: chunk.input, line, offset: chunk.base_offset + (i * ROW) as u64, range };
            let routed = self.routing.route(&mut rc, &row);
            filed.file(&self.routing, routed, 0, &row, &[], pos);
        }
        filed.finish(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_becomes_a_binary_row_with_its_bits() {
        let mut sample = Vec::new();
        sample.extend_from_slice(&42i64.to_le_bytes());
        sample.extend_from_slice(&1_700_000_000_123i64.to_le_bytes());
        sample.extend_from_slice(&0x7ff0_0000_0000_0002u64.to_le_bytes());
        let mut out = Vec::new();
        encode(&sample, &mut out).unwrap();
        assert_eq!(&out[..2], &3i16.to_be_bytes());
        assert_eq!(&out[2..6], &8i32.to_be_bytes());
        assert_eq!(i64::from_be_bytes(out[6..14].try_into().unwrap()), 42);
        assert_eq!(i64::from_be_bytes(out[18..26].try_into().unwrap()), 1_700_000_000_123_000 - PG_EPOCH_OFFSET_MICROS);
        assert_eq!(u64::from_be_bytes(out[30..38].try_into().unwrap()), 0x7ff0_0000_0000_0002, "the staleness marker's own bits");
        let mut far = sample.clone();
        far[8..16].copy_from_slice(&i64::MAX.to_le_bytes());
        assert!(encode(&far, &mut Vec::new()).unwrap_err().contains("out of range"));
    }
}
