//! A new input needs a new `Input` implementation and nothing else: this
//! one lives only here. Its source hands out ticks (a time and a price) as
//! a payload of its own, and its kind encodes them as binary COPY rows and
//! files them through the engine's public model; the engine routes them to
//! the table's leaves, refuses the row no partition takes, journals the rest
//! under the input's identity, and skips every committed row when the same
//! load runs again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};

use chute_core::ident::QualifiedName;
use chute_engine::load::ack::{AckId, AckRef, Completion};
use chute_engine::load::kind::{Kind, one_table};
use chute_engine::load::model::{Chunk, ChunkOut, Filed, Payload, RowPos};
use chute_engine::load::routing::Routing;
use chute_engine::load::source::Source;
use chute_engine::load::{Delivery, Identity, Input, LoadError, LoadProgress, LoadSpec, NoProgress, Opened, Prepared, RejectOrigin, run};
use chute_testkit::shared;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;

/// Microseconds from 1970 to 2000, PostgreSQL's epoch.
const PG_EPOCH: i64 = 946_684_800_000_000;
/// 2024-01-01 00:00 UTC in Unix microseconds.
const JAN_1: i64 = 1_704_067_200_000_000;
const HOUR: i64 = 3_600_000_000;

/// Ticks: one every `step` from 2024-01-01, `n` of them, and one more on
/// 2030-01-01, which no partition of the table takes.
#[derive(Debug)]
struct Ticks {
    n: u64,
    step: i64,
}

impl Ticks {
    fn all(&self) -> Vec<(i64, f64)> {
        let mut t: Vec<(i64, f64)> = (0..self.n as i64).map(|i| (JAN_1 + i * self.step, 100.0 + i as f64 / 4.0)).collect();
        t.push((1_893_456_000_000_000, -1.0));
        t
    }
}

impl Input for Ticks {
    fn prepare<'a>(
        &'a self,
        spec: &'a LoadSpec,
        control: &'a tokio_postgres::Client,
        progress: &'a mut dyn LoadProgress,
    ) -> BoxFuture<'a, Result<Prepared, LoadError>> {
        async move {
            let t = one_table(spec, control, progress, None, Some(&["time".to_owned(), "price".to_owned()])).await?;
            let kind = Arc::new(TickKind { routing: t.routing.clone() });
            Ok(Prepared::one_table(t.routing, t.via_parent_reason, &t.info, kind))
        }
        .boxed()
    }

    fn open(&self, spec: &LoadSpec, _: &Prepared) -> Result<Opened, LoadError> {
        let mut o = Opened::new(Box::new(TickSource { ticks: self.all() }), Delivery::Rerun, Arc::new(AtomicU64::new(0)));
        o.names = vec!["ticks".into()];
        o.identity = Some(Identity::Inputs {
            table: spec.table().to_string(),
            ids: vec![format!("ticks:{}:{}", self.n, self.step)],
            generated: true,
        });
        o.rejects = RejectOrigin { default_path: Some("ticks.rejects".into()), ..RejectOrigin::nowhere(1) };
        Ok(o)
    }
}

/// Sends the ticks in chunks of 100, each numbered by its first tick's index.
struct TickSource {
    ticks: Vec<(i64, f64)>,
}

impl Source for TickSource {
    fn read(self: Box<Self>, out: &flume::Sender<Chunk>, _: &AtomicBool, acks: &flume::Sender<Completion>) -> Result<(), LoadError> {
        for (n, piece) in self.ticks.chunks(100).enumerate() {
            let start = n as u64 * 100;
            let end = start + piece.len() as u64;
            let id = AckId { input: 0, start, end, first_line: start + 1, end_line: end + 1, tag: n as u64 };
            let chunk = Chunk {
                input: 0,
                first_line: start + 1,
                base_offset: start,
                ack: Some(AckRef::new(id, acks.clone())),
                payload: Payload::Other(Box::new(piece.to_vec())),
            };
            if out.send(chunk).is_err() {
                break;
            }
        }
        Ok(())
    }
}

struct TickKind {
    routing: Arc<Routing>,
}

impl Kind for TickKind {
    fn process(&self, chunk: &Chunk) -> ChunkOut {
        let Payload::Other(any) = &chunk.payload else { panic!("a tick chunk holds ticks") };
        let ticks = any.downcast_ref::<Vec<(i64, f64)>>().expect("ticks");
        let range = (0, chunk.base_offset, chunk.base_offset + ticks.len() as u64);
        let mut filed = Filed::default();
        let mut ctx = self.routing.ctx();
        let mut row = Vec::new();
        for (i, (micros, price)) in ticks.iter().enumerate() {
            row.clear();
            row.extend_from_slice(&2i16.to_be_bytes());
            row.extend_from_slice(&8i32.to_be_bytes());
            row.extend_from_slice(&(micros - PG_EPOCH).to_be_bytes());
            row.extend_from_slice(&8i32.to_be_bytes());
            row.extend_from_slice(&price.to_bits().to_be_bytes());
            let offset = chunk.base_offset + i as u64;
            let raw = format!("{micros},{price}");
            let routed = self.routing.route(&mut ctx, &row);
            filed.file(&self.routing, routed, 0, &row, raw.as_bytes(), RowPos { input: 0, line: offset + 1, offset, range });
        }
        filed.finish(range)
    }
}

#[tokio::test]
async fn an_input_made_up_here_loads_routes_rejects_and_resumes_exactly_once() {
    let db = shared().fresh_db("made_up_input").await;
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE ticks (time timestamptz NOT NULL, price float8) PARTITION BY RANGE (time);
         CREATE TABLE ticks_d1 PARTITION OF ticks FOR VALUES FROM ('2024-01-01 00:00+00') TO ('2024-01-02 00:00+00');
         CREATE TABLE ticks_d2 PARTITION OF ticks FOR VALUES FROM ('2024-01-02 00:00+00') TO ('2024-01-03 00:00+00');",
    )
    .await
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let spec = || {
        // 480 ticks every 6 minutes: 48 hours, 240 in each day's partition.
        LoadSpec::builder(db.options.clone(), QualifiedName::new("public", "ticks"))
            .reject_file(Some(dir.path().join("ticks.rejects")))
            .no_create_partitions(true)
            .build(Arc::new(Ticks { n: 480, step: HOUR / 10 }))
            .unwrap()
    };

    let first = run(spec(), &mut NoProgress).await.unwrap();
    assert_eq!((first.stats.rows_loaded, first.stats.rows_rejected, first.stats.rows_skipped), (480, 1, 0));
    assert!(first.load_id.as_deref().is_some_and(|id| id.starts_with("gen-")), "{:?}", first.load_id);
    for (leaf, want) in [("ticks_d1", 240i64), ("ticks_d2", 240)] {
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM {leaf}"), &[]).await.unwrap().get(0);
        assert_eq!(n, want, "{leaf}");
    }
    let sum: f64 = c.query_one("SELECT sum(price) FROM ticks", &[]).await.unwrap().get(0);
    let want: f64 = (0..480).map(|i| 100.0 + f64::from(i) / 4.0).sum();
    assert_eq!(sum, want);
    let rejects = std::fs::read_to_string(dir.path().join("ticks.rejects")).unwrap();
    assert!(rejects.contains("ticks:481:") && rejects.contains("1893456000000000,-1"), "{rejects}");

    // The same load again: every committed row is skipped, nothing doubles.
    let again = run(spec(), &mut NoProgress).await.unwrap();
    assert_eq!((again.stats.rows_loaded, again.stats.rows_skipped), (0, 480), "{again:?}");
    let n: i64 = c.query_one("SELECT count(*) FROM ticks", &[]).await.unwrap().get(0);
    assert_eq!(n, 480);
}
