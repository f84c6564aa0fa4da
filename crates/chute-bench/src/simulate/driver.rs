//! The simulated application: one pacer task asks for operations on time,
//! a fixed set of worker tasks (one per pooled connection) runs them.
//!
//! The pacer ticks every 2 ms. Each kind of operation has its own token
//! bucket: inserts at the sine wave's rate, reads at their share of
//! `--reads-per-s`, updates whenever an order's next lifecycle step comes
//! due. A due operation becomes a ticket in a channel as long as the
//! channel has room (it holds one ticket per connection); when every
//! connection is busy the operation is counted as skipped, not queued
//! without bound, so a slow server shows up as skipped operations and
//! their reason instead of as an ever longer queue. Latency is measured
//! around the statement alone (the server and the network), per kind, into
//! one histogram per second.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use chute_core::generate::SplitMix64;
use hdrhistogram::Histogram;

use super::ops::{Kind, Order, PgTime, Shape, status_after};
use super::pacing::{DueQueue, Recent, TokenBucket, Wave};
use super::pool::Pool;

/// Pacer tick.
const TICK: Duration = Duration::from_millis(2);
/// Seconds' worth of tokens a bucket holds: a pacer later than this loses
/// tokens (counted: the client could not keep pace).
const BURST_S: f64 = 0.05;
/// Updates an order gets after its insert (paid, shipped, delivered).
pub const UPDATES_PER_ORDER: usize = 3;
/// Recent orders kept for reads by id and by customer.
const RECENT: usize = 10_000;

/// A fresh latency histogram: 1 µs to 10 min, two significant digits.
pub fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 2).expect("static bounds")
}

/// What one kind of operation did since the sampler last looked.
#[derive(Debug, Clone)]
pub struct KindWindow {
    /// Latency of the operations done, in microseconds.
    pub latency: Histogram<u64>,
    pub done: u64,
    pub errors: u64,
    /// Asked for while every connection was busy: not sent.
    pub skipped: u64,
}

impl Default for KindWindow {
    fn default() -> Self {
        KindWindow { latency: histogram(), done: 0, errors: 0, skipped: 0 }
    }
}

/// Totals the pacer keeps (never reset; the sampler takes differences).
#[derive(Debug, Clone, Default)]
pub struct PacerTotals {
    /// Operations asked for: the rate's integral (updates: orders come due).
    pub requested: [f64; 5],
    /// Asked for but lost because the pacer ran late (the client was short of CPU).
    pub lost: [f64; 5],
    /// Orders whose update is due but not sent yet.
    pub update_backlog: usize,
}

/// The rates asked for.
#[derive(Debug, Clone, Copy)]
pub struct Rates {
    pub inserts: Wave,
    /// Peak updates per second (the update bucket's rate).
    pub updates_peak: f64,
    /// Reads per second by id, by customer, counts.
    pub reads: [f64; 3],
    /// Between an order's lifecycle steps.
    pub update_after_s: f64,
}

/// State shared by the pacer, the workers and the sampler.
#[derive(Debug)]
pub struct Shared {
    windows: [Mutex<KindWindow>; 5],
    first_errors: Mutex<[Option<String>; 5]>,
    totals: Mutex<PacerTotals>,
    /// Orders waiting for their next update, one queue per step.
    lifecycle: Mutex<[DueQueue<Order>; UPDATES_PER_ORDER]>,
    recent: Mutex<Recent<Order>>,
    /// Workers running an operation right now.
    pub busy: AtomicUsize,
    /// Set to stop the pacer (the workers stop when its channel closes).
    pub stop: AtomicBool,
    /// New orders come from customers 1 to this, uniformly.
    pub customers: i64,
    pub started: Instant,
}

impl Shared {
    pub fn new(started: Instant, seed_orders: Vec<Order>, customers: i64) -> Self {
        let mut recent = Recent::new(RECENT);
        for o in seed_orders {
            recent.push(o);
        }
        Shared {
            windows: Default::default(),
            first_errors: Default::default(),
            totals: Default::default(),
            lifecycle: Default::default(),
            recent: Mutex::new(recent),
            busy: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            customers,
            started,
        }
    }

    fn now(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Takes what each kind did since the last call.
    pub fn take_windows(&self) -> [KindWindow; 5] {
        std::array::from_fn(|i| std::mem::take(&mut *self.windows[i].lock().expect("window")))
    }

    pub fn totals(&self) -> PacerTotals {
        self.totals.lock().expect("totals").clone()
    }

    /// The first error of each kind, if any.
    pub fn first_errors(&self) -> [Option<String>; 5] {
        self.first_errors.lock().expect("errors").clone()
    }

    fn record(&self, kind: Kind, result: Result<u64, String>) {
        let mut w = self.windows[kind.index()].lock().expect("window");
        match result {
            Ok(micros) => {
                w.done += 1;
                w.latency.saturating_record(micros.max(1));
            }
            Err(message) => {
                w.errors += 1;
                drop(w);
                let mut first = self.first_errors.lock().expect("errors");
                first[kind.index()].get_or_insert(message);
            }
        }
    }
}

/// One operation asked for.
#[derive(Debug)]
pub struct Ticket {
    kind: Kind,
    /// The order an update or a read by id touches, and the update's step (1..=3).
    order: Option<(Order, usize)>,
    customer: i64,
}

/// Asks for operations until `end` or until told to stop; closing the
/// channel (by returning) tells the workers to finish.
pub async fn pace(shared: Arc<Shared>, rates: Rates, tx: flume::Sender<Ticket>, end: Arc<Mutex<Option<f64>>>, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    let peaks = [rates.inserts.peak, rates.updates_peak, rates.reads[0], rates.reads[1], rates.reads[2]];
    let mut buckets: Vec<TokenBucket> = peaks.iter().map(|p| TokenBucket::new(*p, BURST_S)).collect();
    let mut last = 0.0;
    let mut next = tokio::time::Instant::now();
    loop {
        next += TICK;
        tokio::time::sleep_until(next).await;
        let now = shared.now();
        if shared.stop.load(Ordering::Relaxed) || end.lock().expect("end").is_some_and(|e| now >= e) {
            return;
        }
        // A pacer woken very late starts its schedule again from now.
        if tokio::time::Instant::now() > next + TICK * 10 {
            next = tokio::time::Instant::now();
        }
        let dt = now - last;
        buckets[0].refill(rates.inserts.expected(last, now));
        buckets[1].refill(rates.updates_peak * dt);
        for (i, r) in rates.reads.iter().enumerate() {
            buckets[2 + i].refill(r * dt);
        }
        last = now;
        let newly_due: usize = shared.lifecycle.lock().expect("lifecycle").iter_mut().map(|q| q.advance(now)).sum();
        dispatch(&shared, &mut buckets, &tx, &mut rng);
        let mut totals = shared.totals.lock().expect("totals");
        for (k, b) in buckets.iter().enumerate() {
            if k != Kind::Update.index() {
                totals.requested[k] = b.requested;
                totals.lost[k] = b.lost;
            }
        }
        totals.requested[Kind::Update.index()] += newly_due as f64;
        totals.update_backlog = shared.lifecycle.lock().expect("lifecycle").iter().map(DueQueue::backlog).sum();
    }
}

/// Sends one ticket per kind in turn while tokens last, so that when
/// connections run short every kind is skipped alike.
fn dispatch(shared: &Shared, buckets: &mut [TokenBucket], tx: &flume::Sender<Ticket>, rng: &mut SplitMix64) {
    loop {
        let mut sent_any = false;
        for kind in Kind::ALL {
            let b = &mut buckets[kind.index()];
            if !b.take() {
                continue;
            }
            let ticket = match kind {
                Kind::Update => match next_due(shared) {
                    Some(o) => Ticket { kind, order: Some(o), customer: 0 },
                    None => {
                        // Nothing due: an update token is not an operation.
                        b.give_back();
                        continue;
                    }
                },
                Kind::Insert => Ticket { kind, order: None, customer: 0 },
                Kind::ReadCount => Ticket { kind, order: None, customer: 0 },
                Kind::ReadId | Kind::ReadCustomer => {
                    let picked = shared.recent.lock().expect("recent").pick(rng.next_u64());
                    match picked {
                        Some(o) => Ticket { kind, customer: o.customer, order: Some((o, 0)) },
                        None => {
                            shared.record(kind, Err("no order to read yet (the table is empty)".into()));
                            continue;
                        }
                    }
                }
            };
            match tx.try_send(ticket) {
                Ok(()) => sent_any = true,
                Err(flume::TrySendError::Full(t)) => {
                    if let (Kind::Update, Some((order, step))) = (t.kind, t.order) {
                        // Still due: it goes out when a connection is free.
                        requeue(shared, order, step);
                        buckets[kind.index()].give_back();
                    } else {
                        shared.windows[kind.index()].lock().expect("window").skipped += 1;
                    }
                }
                Err(flume::TrySendError::Disconnected(_)) => return,
            }
        }
        if !sent_any {
            return;
        }
    }
}

/// The order whose update came due first, with the step it goes to.
fn next_due(shared: &Shared) -> Option<(Order, usize)> {
    let mut queues = shared.lifecycle.lock().expect("lifecycle");
    let (i, _) = queues.iter().enumerate().filter_map(|(i, q)| q.oldest_due().map(|d| (i, d))).min_by(|a, b| a.1.total_cmp(&b.1))?;
    queues[i].pop_due().map(|(_, o)| (o, i + 1))
}

fn requeue(shared: &Shared, order: Order, step: usize) {
    shared.lifecycle.lock().expect("lifecycle")[step - 1].unpop(order);
}

/// Time spans of the workload, in seconds.
#[derive(Debug, Clone, Copy)]
pub struct Spans {
    /// Between an order's lifecycle steps.
    pub update_after_s: f64,
    /// How far back a customer's orders are read.
    pub customer_s: f64,
    /// How far back counts reach.
    pub count_s: f64,
}

/// Now on the simulator's clock, as the key's type counts it.
fn now_pg() -> PgTime {
    PgTime::from_unix_micros(chute_engine::clock::now_micros())
}

/// Runs tickets until the channel closes.
pub async fn work(shared: Arc<Shared>, pool: Pool, shape: Arc<Shape>, rx: flume::Receiver<Ticket>, spans: Spans, seed: u64) {
    let mut rng = SplitMix64::new(seed);
    while let Ok(t) = rx.recv_async().await {
        shared.busy.fetch_add(1, Ordering::Relaxed);
        let result = run_one(&shared, &pool, &shape, &t, spans, &mut rng).await;
        shared.busy.fetch_sub(1, Ordering::Relaxed);
        shared.record(t.kind, result);
    }
}

/// One operation; Ok(latency in µs) when it did what it should.
async fn run_one(shared: &Shared, pool: &Pool, shape: &Shape, t: &Ticket, spans: Spans, rng: &mut SplitMix64) -> Result<u64, String> {
    let update_after_s = spans.update_after_s;
    let conn = pool.get().await.map_err(|e| format!("no connection: {e}"))?;
    let st = &conn.statements[t.kind.index()];
    let describe = |e: tokio_postgres::Error| chute_engine::exec::describe(&e);
    let began = Instant::now();
    match (t.kind, &t.order) {
        (Kind::Insert, _) => {
            // Any customer may order: their orders' index entries land all
            // over a (customer, time) index, as in a real shop.
            let customer = 1 + rng.below(shared.customers.max(1) as u64) as i64;
            let values = shape.insert_values(customer, rng);
            let params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = values.iter().map(|v| v as _).collect();
            let row = conn.client.query_one(st, &params).await.map_err(describe)?;
            let micros = began.elapsed().as_micros() as u64;
            let order = Order { id: row.get(0), key: row.get(1), customer: row.get(2) };
            shared.recent.lock().expect("recent").push(order.clone());
            shared.lifecycle.lock().expect("lifecycle")[0].push(shared.now() + update_after_s, order);
            Ok(micros)
        }
        (Kind::Update, Some((order, step))) => {
            let (to, from) = (status_after(*step), status_after(step - 1));
            let n = conn.client.execute(st, &[&order.id, &order.key, &to, &from]).await.map_err(describe)?;
            let micros = began.elapsed().as_micros() as u64;
            if n != 1 {
                return Err(format!("order {} ({}) was not {from} any more: {n} rows updated", order.id, order.key));
            }
            if *step < UPDATES_PER_ORDER {
                shared.lifecycle.lock().expect("lifecycle")[*step].push(shared.now() + update_after_s, order.clone());
            }
            Ok(micros)
        }
        (Kind::ReadId, Some((order, _))) => {
            let rows = conn.client.query(st, &[&order.id, &order.key]).await.map_err(describe)?;
            let micros = began.elapsed().as_micros() as u64;
            if rows.len() != 1 {
                return Err(format!("order {} ({}) was not found: {} rows", order.id, order.key, rows.len()));
            }
            Ok(micros)
        }
        (Kind::ReadCustomer, _) => {
            conn.client.query(st, &[&t.customer, &now_pg().minus_s(spans.customer_s)]).await.map_err(describe)?;
            Ok(began.elapsed().as_micros() as u64)
        }
        (Kind::ReadCount, _) => {
            conn.client.query_one(st, &[&now_pg().minus_s(spans.count_s)]).await.map_err(describe)?;
            Ok(began.elapsed().as_micros() as u64)
        }
        (kind, None) => Err(format!("{} without an order (a bug in the pacer)", kind.name())),
    }
}
