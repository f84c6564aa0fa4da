//! Load generator for `chute serve` (docs/benchmarks.md): N clients post
//! line-protocol batches to `/write` and report rows/s and the latency of
//! each request (sent → answered 204, i.e. committed), or write the same
//! rows as CSV for `chute load`. Each client cycles through 8 batches made
//! before the clock starts, and sends one of them (its eighth) before the
//! clock starts, to open its connection (`--no-warm-up`: not).
//!
//! ```text
//! serve-client --base http://127.0.0.1:8086 --clients 100 --rows 1000 --seconds 30 [--rate ROWS_PER_S]
//! serve-client --csv rows.csv --clients 100 --rows 1000 --batches 50
//! ```
//!
//! Rows go to `bench(time timestamptz, host text, v1..v5 float8)` in the
//! schema `public`: host is a tag, v1..v5 are fields, times in ms spread
//! over one day.

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn row_values(client: u64, batch: u64, r: u64, rows: u64) -> (u64, String, [f64; 5]) {
    let seq = (client * 1_000_000 + batch) * rows + r;
    let ts = 1_700_000_000_000 + (seq * 7) % 86_400_000;
    let x = (seq % 1000) as f64;
    (ts, format!("host_{}", client % 100), [x + 0.5, x * 2.0, x / 4.0, 1.25, x + 7.0])
}

fn body(client: u64, batch: u64, rows: u64) -> String {
    let mut out = String::with_capacity(rows as usize * 90);
    for r in 0..rows {
        let (ts, host, v) = row_values(client, batch, r, rows);
        out.push_str(&format!("bench,host={host} v1={},v2={},v3={},v4={},v5={} {ts}\n", v[0], v[1], v[2], v[3], v[4]));
    }
    out
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).cloned()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |name: &str, default: u64| arg(&args, name).map_or(default, |v| v.parse().expect("a number"));
    let clients = num("--clients", 100);
    let rows = num("--rows", 1000);
    if let Some(path) = arg(&args, "--csv") {
        let batches = num("--batches", 50);
        let mut f = std::io::BufWriter::new(std::fs::File::create(&path).expect("create the CSV file"));
        let cycle = num("--cycle", 0);
        if arg(&args, "--interleave").is_some() || args.iter().any(|a| a == "--interleave") {
            for b in 0..batches {
                for c in 0..clients {
                    let bb = if cycle > 0 { b % cycle } else { b };
                    for r in 0..rows {
                        let (ts, host, v) = row_values(c, bb, r, rows);
                        writeln!(f, "{ts},{host},{},{},{},{},{}", v[0], v[1], v[2], v[3], v[4]).expect("write");
                    }
                }
            }
            return;
        }
        for c in 0..clients {
            for b in 0..batches {
                for r in 0..rows {
                    let (ts, host, v) = row_values(c, b, r, rows);
                    writeln!(f, "{ts},{host},{},{},{},{},{}", v[0], v[1], v[2], v[3], v[4]).expect("write");
                }
            }
        }
        return;
    }
    let base = arg(&args, "--base").unwrap_or_else(|| "http://127.0.0.1:8086".into());
    let seconds = num("--seconds", 30);
    // Total rows/s to offer (0: as fast as answers come).
    let rate = num("--rate", 0);
    // --no-warm-up: the clock also measures each client's first connection and request.
    let warm = !args.iter().any(|a| a == "--no-warm-up");
    let url = format!("{base}/write?db=public&precision=ms");
    let stop = Arc::new(AtomicBool::new(false));
    let sent_rows = Arc::new(AtomicU64::new(0));
    let failed = Arc::new(AtomicU64::new(0));
    let hist = Arc::new(Mutex::new(hdrhistogram::Histogram::<u64>::new_with_bounds(1, 600_000_000, 3).expect("histogram")));
    let ready = Arc::new(std::sync::Barrier::new(clients as usize + 1));
    // --dump FILE: every acknowledged request as "ms-since-start latency-us client", for a look at the tail.
    let dump_path = arg(&args, "--dump");
    let dump = dump_path.as_ref().map(|_| Arc::new(Mutex::new(Vec::<(u64, u64, u64)>::new())));
    let origin = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|c| {
            let (stop, sent_rows, failed, hist, url) = (stop.clone(), sent_rows.clone(), failed.clone(), hist.clone(), url.clone());
            let ready = ready.clone();
            let dump = dump.clone();
            std::thread::spawn(move || {
                let agent: ureq::Agent =
                    ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(Duration::from_secs(120))).build().into();
                // With --rate, each client sends one batch every `every`, starting at a staggered offset.
                let every = (rate > 0).then(|| Duration::from_secs_f64(rows as f64 * clients as f64 / rate as f64));
                // Bodies made before the clock starts (cycled), so that making
                // them does not take the machine's cores from the service.
                let bodies: Vec<String> = (0..8).map(|b| body(c, b, rows)).collect();
                // Each client's connection is made, and used once, before the
                // clock starts: the clock measures a service that clients
                // already talk to, not 100 connections being opened at once.
                if warm {
                    let _ = agent.post(&url).send(bodies[7].as_bytes());
                }
                ready.wait();
                // The clients' turns are spread evenly over `every`, from the moment the clock starts.
                let mut next = Instant::now() + every.map_or(Duration::ZERO, |e| e.mul_f64(c as f64 / clients as f64));
                let mut batch = 0;
                while !stop.load(Ordering::Relaxed) {
                    if every.is_some() {
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        next += every.unwrap_or_default();
                    }
                    let b = &bodies[batch as usize % bodies.len()];
                    let t = Instant::now();
                    let ok = matches!(agent.post(&url).send(b.as_bytes()), Ok(r) if r.status().as_u16() == 204);
                    let us = t.elapsed().as_micros() as u64;
                    if ok {
                        sent_rows.fetch_add(rows, Ordering::Relaxed);
                        hist.lock().expect("histogram").record(us.max(1)).ok();
                        if let Some(d) = &dump {
                            d.lock().expect("dump").push((t.duration_since(origin).as_millis() as u64, us, c));
                        }
                    } else {
                        failed.fetch_add(1, Ordering::Relaxed);
                    }
                    batch += 1;
                }
            })
        })
        .collect();
    ready.wait();
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    stop.store(true, Ordering::Relaxed);
    let measured = began.elapsed().as_secs_f64();
    let rows_at_stop = sent_rows.load(Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    if let (Some(path), Some(d)) = (&dump_path, &dump) {
        let mut f = std::io::BufWriter::new(std::fs::File::create(path).expect("create the dump file"));
        for (at, us, c) in d.lock().expect("dump").iter() {
            writeln!(f, "{at} {us} {c}").expect("write");
        }
    }
    let h = hist.lock().expect("histogram");
    println!(
        "{{\"clients\": {clients}, \"rows_per_request\": {rows}, \"offered_rows_per_s\": {rate}, \"seconds\": {measured:.1}, \
         \"rows_acknowledged\": {rows_at_stop}, \"rows_per_s\": {:.0}, \"requests_failed\": {}, \
         \"latency_ms\": {{\"p50\": {:.1}, \"p90\": {:.1}, \"p99\": {:.1}, \"max\": {:.1}}}}}",
        rows_at_stop as f64 / measured,
        failed.load(Ordering::Relaxed),
        h.value_at_quantile(0.5) as f64 / 1000.0,
        h.value_at_quantile(0.9) as f64 / 1000.0,
        h.value_at_quantile(0.99) as f64 / 1000.0,
        h.max() as f64 / 1000.0,
    );
}
