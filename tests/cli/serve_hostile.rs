//! `chute serve` under clients that stall, send too much or too fast
//! (issue 26): slow headers and bodies are cut off, a body over the limit
//! is refused from its `Content-Length`, memory stays within `--memory-mb`
//! and its stated overhead whatever the bodies, and a hostile mix of all of
//! them leaves every request of well-behaved clients answered, exactly once.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use chute_testkit::shared;

use super::serve::{Server, agent, gzip, post};
use crate::common::create_time_partitioned;

const CPU: &str = "time timestamptz not null, host text, usage float8";

/// What `chute serve` may hold besides `--memory-mb` (docs/serve.md: the program,
/// its threads and runtime, PostgreSQL connections, each open connection's
/// buffers), for up to about 1,000 connections.
pub const OVERHEAD_MIB: u64 = 96;

/// A figure of /proc/PID/status in KiB (VmRSS, VmHWM).
pub fn proc_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches(" kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Open file descriptors of a process.
fn fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map(|d| d.count()).unwrap_or(0)
}

/// The open file descriptors of a process once their number has stopped
/// changing (the same for half a second); panics after `limit`.
fn settled_fds(pid: u32, limit: Duration) -> usize {
    let deadline = Instant::now() + limit;
    let (mut last, mut since) = (fds(pid), Instant::now());
    loop {
        // Polling pace; the deadline is `limit`.
        std::thread::sleep(Duration::from_millis(50));
        let now = fds(pid);
        if now != last {
            (last, since) = (now, Instant::now());
        } else if since.elapsed() >= Duration::from_millis(500) {
            return now;
        }
        assert!(Instant::now() < deadline, "the descriptors of serve never settled within {limit:?} (last {last})");
    }
}

/// Raises this process's soft limit of open files (the hostile clients hold hundreds).
pub fn raise_open_files() {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit read and write the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < l.rlim_max {
            l.rlim_cur = l.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
}

/// `n` lines of about 40 bytes, times from `t0` seconds.
pub fn lines(n: usize, host: &str, t0: u64) -> String {
    let mut out = String::with_capacity(n * 48);
    for i in 0..n {
        out.push_str(&format!("cpu,host={host} usage={i} {}\n", (t0 + i as u64 % 86_400) * 1_000_000_000));
    }
    out
}

/// A gzip body of `size` zero bytes (made a piece at a time).
pub fn bomb(size: usize) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    let zeros = vec![b'0'; 1 << 20];
    for _ in 0..size >> 20 {
        e.write_all(&zeros).unwrap();
    }
    e.finish().unwrap()
}

/// A TCP connection to `base` (`http://host:port`).
pub fn connect(base: &str) -> TcpStream {
    let addr = base.trim_start_matches("http://");
    let s = TcpStream::connect(addr).unwrap();
    s.set_nodelay(true).unwrap();
    s
}

/// Waits up to `wait` for the server to close `s` (or answer and close):
/// what it sent first, or `None` if it did not close it in time.
pub fn closed_by_server(s: &mut TcpStream, wait: Duration) -> Option<String> {
    s.set_read_timeout(Some(wait)).unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return Some(String::from_utf8_lossy(&got).into_owned()),
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => return None,
            Err(_) => return Some(String::from_utf8_lossy(&got).into_owned()),
        }
    }
}

#[tokio::test]
async fn slow_headers_slow_bodies_and_idle_connections_are_closed_and_a_declared_huge_body_gets_413_at_once() {
    let db = shared().fresh_db("serve_slow").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let s = Server::start(&url, &["--header-timeout", "1s", "--idle-timeout", "2s", "--body-timeout", "1s", "--min-body-rate", "1"]);
    let pid = s.child.id();
    // The table's load and its connections are started first: they are not
    // the clients'. Counted once the first request's connection is closed
    // and the load's are open.
    assert_eq!(post(&format!("{}/write?db=public", s.base), &[], b"cpu,host=first usage=1 1700000000000000000\n").0, 204);
    let before = settled_fds(pid, Duration::from_secs(30));
    let began = Instant::now();
    // Stopped in the middle of their headers, of their body, or silent from the start.
    let mut heads: Vec<TcpStream> = (0..40).map(|_| connect(&s.base)).collect();
    for c in &mut heads {
        c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Le").unwrap();
    }
    let mut bodies: Vec<TcpStream> = (0..40).map(|_| connect(&s.base)).collect();
    for c in &mut bodies {
        c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\ncpu,host=slow usage=1").unwrap();
    }
    let mut silent: Vec<TcpStream> = (0..20).map(|_| connect(&s.base)).collect();
    // A body that comes, a byte every 200 ms: slower than --min-body-rate once --body-timeout has passed.
    let drip = std::thread::spawn({
        let base = s.base.clone();
        move || {
            let mut c = connect(&base);
            c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n").unwrap();
            let began = Instant::now();
            for _ in 0..200 {
                if c.write_all(b"x").is_err() {
                    break;
                }
                // The client under test: a byte every 200 ms.
                std::thread::sleep(Duration::from_millis(200));
            }
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut answer = String::new();
            let _ = c.read_to_string(&mut answer);
            (began.elapsed(), answer)
        }
    });
    // Accepted (under load the server may take a moment).
    let mut grown = fds(pid);
    let wait = Instant::now();
    while grown < before + 100 && wait.elapsed() < Duration::from_secs(5) {
        // Polling pace; the deadline is the loop's.
        std::thread::sleep(Duration::from_millis(20));
        grown = grown.max(fds(pid));
    }
    assert!(grown >= before + 100, "the connections are open: {before} -> {grown}");
    // A well-behaved request is served meanwhile.
    assert_eq!(post(&format!("{}/write?db=public", s.base), &[], b"cpu,host=good usage=1 1700000000000000000\n").0, 204);
    for c in &mut heads {
        assert!(closed_by_server(c, Duration::from_secs(10)).is_some(), "a connection stopped in its headers was kept");
    }
    for c in &mut bodies {
        let answer = closed_by_server(c, Duration::from_secs(10)).expect("a connection stopped in its body was kept");
        assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
        assert!(answer.contains("--body-timeout"), "{answer}");
    }
    for c in &mut silent {
        assert!(closed_by_server(c, Duration::from_secs(10)).is_some(), "a silent connection was kept");
    }
    // Cut off by their limits (1 and 2 s, plus a margin for a busy machine),
    // not by anything that comes later.
    let took = began.elapsed();
    assert!(took < Duration::from_secs(12), "{took:?}");
    let (dripped, answer) = drip.join().unwrap();
    assert!(answer.starts_with("HTTP/1.1 408") && answer.contains("--min-body-rate"), "{answer}");
    // By --min-body-rate once --body-timeout (1 s) had passed, long before its 40 s of bytes.
    assert!(dripped < Duration::from_secs(8), "{dripped:?}");
    // Every one of them is gone: the descriptors are back where they were.
    let mut after = fds(pid);
    for _ in 0..50 {
        if after <= before + 2 {
            break;
        }
        // Polling pace; the deadline is the loop's (5 s).
        std::thread::sleep(Duration::from_millis(100));
        after = fds(pid);
    }
    assert!(after <= before + 2, "descriptors: {before} before, {grown} with the slow clients, {after} after");

    // 100 MB declared, one byte sent: 413 at once, from Content-Length
    // alone (waiting for the body would have ended in a 408 after the 1 s
    // --body-timeout).
    let mut c = connect(&s.base);
    c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\nc").unwrap();
    let answer = closed_by_server(&mut c, Duration::from_secs(5)).expect("no answer to a declared huge body");
    assert!(answer.starts_with("HTTP/1.1 413") && answer.contains("--max-body-mb"), "{answer}");
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
}

#[tokio::test]
async fn memory_stays_within_the_budget_for_any_body_413_when_it_never_fits_429_when_later() {
    let db = shared().fresh_db("serve_memory").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let c = db.client().await;
    let s = Server::start(&url, &["--memory-mb", "64", "--max-body-mb", "64"]);
    let pid = s.child.id();
    let write = format!("{}/write?db=public", s.base);
    // 63 MB of line protocol: more than the requests' part of 64 MiB can ever hold.
    let huge = lines(1_380_000, "huge", 1_700_000_000);
    assert!(huge.len() > 60 << 20 && huge.len() < 64 << 20, "{}", huge.len());
    let (status, text) = post(&write, &[], huge.as_bytes());
    assert_eq!(status, 413, "{text}");
    assert!(text.contains("--memory-mb"), "{text}");
    // The same through gzip, whose trailer tells its size; then a gzip bomb (1 GiB of zeros) and one whose trailer lies.
    let packed = gzip(huge.as_bytes());
    assert_eq!(post(&write, &[("Content-Encoding", "gzip")], &packed).0, 413);
    let bomb = bomb(1 << 30);
    let (status, text) = post(&write, &[("Content-Encoding", "gzip")], &bomb);
    assert_eq!(status, 413, "{text}");
    let mut liar = bomb.clone();
    let n = liar.len();
    liar[n - 4..].copy_from_slice(&100u32.to_le_bytes());
    let (status, text) = post(&write, &[("Content-Encoding", "gzip")], &liar);
    assert_eq!(status, 413, "{text}");
    drop((huge, packed, bomb, liar));
    let peak = proc_kib(pid, "VmHWM") / 1024;
    eprintln!("serve_memory: peak RSS {peak} MiB at --memory-mb 64 after the bodies that never fit");
    assert!(peak <= 64 + OVERHEAD_MIB, "peak RSS {peak} MiB, over --memory-mb 64 + {OVERHEAD_MIB} MiB");
    drop(s);

    // Clients sending 3 MB bodies at once to a smaller budget (9 MiB for requests): those that do not
    // fit now get 429 and Retry-After, and come back until their rows are written (once: their key).
    let s = Server::start(&url, &["--memory-mb", "12"]);
    let pid = s.child.id();
    let write = format!("{}/write?db=public", s.base);
    let clients: Vec<_> = (0..8)
        .map(|i| {
            let write = write.clone();
            std::thread::spawn(move || {
                let body = lines(60_000, &format!("c{i}"), 1_700_000_000 + i * 100_000);
                let key = format!("mem-{i}");
                let mut busy = 0;
                loop {
                    let mut resp = agent().post(&write).header("Idempotency-Key", &key).send(body.as_bytes()).unwrap();
                    match resp.status().as_u16() {
                        204 => return busy,
                        429 => {
                            assert_eq!(resp.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
                            busy += 1;
                            // A client coming back after a 429, sooner than Retry-After asks.
                            std::thread::sleep(Duration::from_millis(200));
                        }
                        other => panic!("{other}: {}", resp.body_mut().read_to_string().unwrap_or_default()),
                    }
                }
            })
        })
        .collect();
    let busy: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    assert!(busy > 0, "8 bodies of 3 MB at once fit in 9 MiB?");
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 8 * 60_000);
    let peak = proc_kib(pid, "VmHWM") / 1024;
    eprintln!("serve_memory: peak RSS {peak} MiB at --memory-mb 12 ({busy} answers 429)");
    assert!(peak <= 12 + OVERHEAD_MIB, "peak RSS {peak} MiB, over --memory-mb 12 + {OVERHEAD_MIB} MiB");
}

#[tokio::test]
async fn two_large_bodies_at_once_stay_within_the_default_budget() {
    let db = shared().fresh_db("serve_two_big").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", CPU, "1 day", &[]);
    let c = db.client().await;
    let s = Server::start(&url, &[]);
    let pid = s.child.id();
    let write = format!("{}/write?db=public", s.base);
    // Two bodies of 62 MB whose rows take as much again (a 1,000-byte tag a line).
    let clients: Vec<_> = (0..2)
        .map(|i| {
            let write = write.clone();
            std::thread::spawn(move || {
                let tag = format!("{i}{}", "x".repeat(1000));
                let mut body = String::with_capacity(63 << 20);
                for n in 0..61_000u64 {
                    body.push_str(&format!("cpu,host={tag} usage={n} {}\n", (1_700_000_000 + n) * 1_000_000_000));
                }
                assert!(body.len() > 60 << 20 && body.len() < 64 << 20, "{}", body.len());
                let key = format!("big-{i}");
                let mut busy = 0;
                loop {
                    let mut resp = agent().post(&write).header("Idempotency-Key", &key).send(body.as_bytes()).unwrap();
                    match resp.status().as_u16() {
                        204 => return busy,
                        429 => {
                            busy += 1;
                            // A client coming back after a 429.
                            std::thread::sleep(Duration::from_millis(500));
                        }
                        other => panic!("{other}: {}", resp.body_mut().read_to_string().unwrap_or_default()),
                    }
                }
            })
        })
        .collect();
    let busy: u32 = clients.into_iter().map(|c| c.join().unwrap()).sum();
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 122_000);
    let peak = proc_kib(pid, "VmHWM") / 1024;
    eprintln!("serve_two_big: peak RSS {peak} MiB at the default --memory-mb 256 ({busy} answers 429)");
    assert!(peak <= 256 + OVERHEAD_MIB, "peak RSS {peak} MiB, over --memory-mb 256 + {OVERHEAD_MIB} MiB");
}

/// Rows of a well-behaved client's request: ids `first..first + 100`.
fn good_body(first: u64) -> String {
    (first..first + 100).map(|id| format!("cpu,host=good id={id}i {}\n", (1_700_000_000 + id % 86_400) * 1_000_000_000)).collect()
}

#[tokio::test]
async fn a_hostile_mix_leaves_every_request_of_well_behaved_clients_answered_exactly_once() {
    raise_open_files();
    let db = shared().fresh_db("serve_hostile").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, id bigint", "1 day", &[]);
    let c = db.client().await;
    let s = Server::start(
        &url,
        &["--header-timeout", "2s", "--idle-timeout", "4s", "--body-timeout", "2s", "--min-body-rate", "4", "--max-body-mb", "2"],
    );
    let pid = s.child.id();
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[], good_body(0).as_bytes()).0, 204, "warm-up");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let began = Instant::now();

    // 500 slow connections: stopped in their headers, in their body, or silent.
    let slow = std::thread::spawn({
        let base = s.base.clone();
        move || {
            let mut conns = Vec::new();
            for i in 0..500 {
                let mut c = connect(&base);
                let _ = match i % 5 {
                    0 | 1 => c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Typ"),
                    2 | 3 => c.write_all(b"POST /write?db=public HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\ncpu,host=slow id=1i"),
                    _ => Ok(()),
                };
                conns.push(c);
            }
            conns
        }
    });
    // 50 bodies over --max-body-mb: half announce it, half send it chunked.
    let big = std::sync::Arc::new(lines(60_000, "over", 1_700_000_000).into_bytes());
    let over: Vec<_> = (0..50)
        .map(|i| {
            let (write, big) = (write.clone(), big.clone());
            std::thread::spawn(move || {
                let req = agent().post(&write);
                let mut resp = if i % 2 == 0 {
                    req.send(&big[..]).unwrap()
                } else {
                    let reader: Box<dyn Read + Send> = Box::new(std::io::Cursor::new(big.to_vec()));
                    req.send(ureq::SendBody::from_owned_reader(reader)).unwrap()
                };
                (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default())
            })
        })
        .collect();
    // 20 gzip bombs (200 MiB of zeros in 200 KB): half with an honest trailer, half with one that lies.
    let packed = std::sync::Arc::new(bomb(200 << 20));
    let bombs: Vec<_> = (0..20)
        .map(|i| {
            let (write, packed) = (write.clone(), packed.clone());
            std::thread::spawn(move || {
                let mut b = packed.to_vec();
                if i % 2 == 1 {
                    let n = b.len();
                    b[n - 4..].copy_from_slice(&1000u32.to_le_bytes());
                }
                let mut resp = agent().post(&write).header("Content-Encoding", "gzip").send(&b[..]).unwrap();
                (resp.status().as_u16(), resp.body_mut().read_to_string().unwrap_or_default())
            })
        })
        .collect();
    // 100 well-behaved clients, each sending a request with a key of its
    // own, then the next, until the hostile ones are gone.
    let good: Vec<_> = (0..100u64)
        .map(|client| {
            let (write, stop) = (write.clone(), stop.clone());
            std::thread::spawn(move || {
                let agent = agent();
                let (mut latencies, mut acked, mut failed) = (Vec::new(), Vec::new(), Vec::new());
                let mut batch = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let first = (client * 10_000 + batch + 1) * 100;
                    let body = good_body(first);
                    let key = format!("good-{client}-{batch}");
                    let t = Instant::now();
                    let r = agent.post(&write).header("Idempotency-Key", &key).send(body.as_bytes());
                    latencies.push(t.elapsed());
                    match r {
                        Ok(resp) if resp.status().as_u16() == 204 => acked.push(first as i64),
                        Ok(mut resp) => {
                            failed.push(format!("{key}: {} {}", resp.status(), resp.body_mut().read_to_string().unwrap_or_default()))
                        }
                        Err(e) => failed.push(format!("{key}: {e}")),
                    }
                    batch += 1;
                    // The client's own pace: a request, a pause, the next.
                    std::thread::sleep(Duration::from_millis(100));
                }
                (latencies, acked, failed)
            })
        })
        .collect();

    let over: Vec<(u16, String)> = over.into_iter().map(|t| t.join().unwrap()).collect();
    let bombs: Vec<(u16, String)> = bombs.into_iter().map(|t| t.join().unwrap()).collect();
    // The well-behaved clients write until the server has cut off every slow connection.
    let mut slow = slow.join().unwrap();
    let cutoff = Instant::now() + Duration::from_secs(30);
    let kept = slow
        .iter_mut()
        .map(|c| closed_by_server(c, cutoff.saturating_duration_since(Instant::now()).max(Duration::from_millis(1))))
        .filter(Option::is_none)
        .count();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut latencies, mut acked, mut failed) = (Vec::new(), Vec::new(), Vec::new());
    for t in good {
        let (l, a, f) = t.join().unwrap();
        latencies.extend(l);
        acked.extend(a);
        failed.extend(f);
    }
    let took = began.elapsed();
    let peak = proc_kib(pid, "VmHWM") / 1024;

    assert!(over.iter().all(|(status, text)| *status == 413 && text.contains("--max-body-mb")), "{:?}", &over[..2]);
    assert!(bombs.iter().all(|(status, _)| *status == 413), "{bombs:?}");
    // Every slow connection was cut off by the server (their limits are 2 and 4 s).
    assert_eq!(kept, 0, "{kept} of 500 slow connections still open after {took:?}");
    latencies.sort();
    let p99 = latencies[latencies.len() * 99 / 100];
    eprintln!(
        "serve_hostile: {} requests of well-behaved clients in {took:?}, p50 {:?}, p90 {:?}, p99 {p99:?}, max {:?}; peak RSS {peak} MiB",
        latencies.len(),
        latencies[latencies.len() / 2],
        latencies[latencies.len() * 9 / 10],
        latencies.last().unwrap()
    );
    // Not held hostage: every request of the well-behaved clients was
    // answered, and acknowledged, while the hostile ones were there. How fast
    // is the figure printed above (benchmarks carry latency), not a pass mark.
    assert!(!latencies.is_empty() && failed.is_empty(), "{} of {} requests failed: {failed:#?}", failed.len(), latencies.len());
    assert_eq!(acked.len(), latencies.len(), "every request acknowledged");
    assert!(peak <= 256 + OVERHEAD_MIB, "peak RSS {peak} MiB, over --memory-mb 256 + {OVERHEAD_MIB} MiB");
    // Every acknowledged row is there, once; nothing else was written.
    let (n, distinct): (i64, i64) = {
        let r = c.query_one("SELECT count(*), count(DISTINCT id) FROM cpu WHERE id >= 100", &[]).await.unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!(n, distinct, "rows stored twice");
    let present: i64 = c.query_one("SELECT count(*) FROM cpu WHERE id / 100 * 100 = ANY($1)", &[&acked]).await.unwrap().get(0);
    assert_eq!(present, acked.len() as i64 * 100, "acknowledged rows missing");
    assert_eq!(n, present);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
}
