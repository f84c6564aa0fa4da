//! `chute serve` at its limits: PostgreSQL down (requests wait up to
//! --request-timeout, then 503 with Retry-After; /ready says so; nothing
//! acknowledged is lost), the memory budget full (429 with Retry-After),
//! a body too large (413), and HTTPS.

use std::time::Duration;

use chute_engine::local::StopMode;
use chute_testkit::{TestCluster, shared};

use super::serve::{Server, agent, get, post};
use crate::common::{create_time_partitioned, wait_for};

#[tokio::test]
async fn postgres_down_means_503_after_the_deadline_and_the_retry_lands_once_it_is_back() {
    let cluster = TestCluster::start();
    let db = cluster.fresh_db("serve_down").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    let s = Server::start(&url, &["--request-timeout", "3s", "--retry-for", "10min"]);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[("Idempotency-Key", "a")], b"cpu,host=a usage=1 1700000000000000000\n").0, 204);

    cluster.cluster.stop(StopMode::Fast).unwrap();
    let began = std::time::Instant::now();
    let mut resp = agent().post(&write).header("Idempotency-Key", "b").send(&b"cpu,host=b usage=2 1700000000000000000\n"[..]).unwrap();
    assert_eq!(resp.status().as_u16(), 503, "{}", resp.body_mut().read_to_string().unwrap_or_default());
    assert_eq!(resp.headers().get("retry-after").and_then(|v| v.to_str().ok()), Some("1"));
    assert!(began.elapsed() >= Duration::from_secs(2) && began.elapsed() < Duration::from_secs(20), "{:?}", began.elapsed());
    assert_eq!(get(&format!("{}/ready", s.base)).0, 503);
    assert_eq!(get(&format!("{}/health", s.base)).0, 200, "alive, not ready");

    cluster.cluster.start().unwrap();
    // The client retries with its key until it is acknowledged.
    let mut status = 0;
    for _ in 0..60 {
        status = post(&write, &[("Idempotency-Key", "b")], b"cpu,host=b usage=2 1700000000000000000\n").0;
        if status == 204 {
            break;
        }
        // A client's pause before its retry (Retry-After says 1 s).
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(status, 204, "{}", s.log());
    let c = db.client().await;
    let hosts: Vec<String> = c.query("SELECT host FROM cpu ORDER BY host", &[]).await.unwrap().iter().map(|r| r.get(0)).collect();
    assert_eq!(hosts, vec!["a", "b"], "{}", s.log());
    let mut ready = 0;
    for _ in 0..20 {
        ready = get(&format!("{}/ready", s.base)).0;
        if ready == 200 {
            break;
        }
        // A health checker's pace.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(ready, 200);
}

#[tokio::test]
async fn a_full_memory_budget_answers_429_and_a_huge_body_413() {
    let db = shared().fresh_db("serve_full").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    // Requests wait 2 s for their batch: the requests' part of the budget (12 of 16 MiB) holds one
    // 3 MB request at a time (its body and the rows it is parsed into, about 7 MiB).
    let s = Server::start(&url, &["--memory-mb", "16", "--max-delay", "2s", "--batch-mb", "64", "--max-body-mb", "5"]);
    let write = format!("{}/write?db=public", s.base);
    let big: String = (0..80_000).map(|i| format!("cpu,host=h{i} usage={i} 1700000000000000000\n")).collect();
    assert!(big.len() > 3 << 20 && big.len() < 5 << 20, "{}", big.len());
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (write, big) = (write.clone(), big.clone());
            std::thread::spawn(move || {
                let mut resp = agent().post(&write).send(big.as_bytes()).unwrap();
                let retry_after = resp.headers().get("retry-after").map(|v| v.to_str().unwrap().to_owned());
                (resp.status().as_u16(), retry_after, resp.body_mut().read_to_string().unwrap_or_default())
            })
        })
        .collect();
    let answers: Vec<_> = clients.into_iter().map(|c| c.join().unwrap()).collect();
    let ok = answers.iter().filter(|a| a.0 == 204).count();
    let busy: Vec<_> = answers.iter().filter(|a| a.0 == 429).collect();
    assert!(ok >= 1 && !busy.is_empty() && ok + busy.len() == 4, "{answers:?}");
    assert!(busy.iter().all(|a| a.1.as_deref() == Some("1") && a.2.contains("--memory-mb")), "{busy:?}");
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM cpu", &[]).await.unwrap().get(0);
    assert_eq!(n as usize, ok * 80_000);
    // Larger than --max-body-mb: 413, also when it only gets that large once decompressed.
    let huge = big.repeat(2);
    assert_eq!(post(&write, &[], huge.as_bytes()).0, 413);
    let (status, text) = post(&write, &[("Content-Encoding", "gzip")], &super::serve::gzip(huge.as_bytes()));
    assert_eq!(status, 413, "{text}");
}

#[tokio::test]
async fn https_with_a_certificate_and_key() {
    let db = shared().fresh_db("serve_tls").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    let dir = crate::common::open_tempdir();
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap().self_signed(&key).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    let s = Server::start(&url, &["--tls-cert", cert_path.to_str().unwrap(), "--tls-key", key_path.to_str().unwrap()]);
    let port = s.base.strip_prefix("https://127.0.0.1:").unwrap_or_else(|| panic!("{}", s.base)).to_owned();
    let curl = |scheme: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "20", "--cacert"])
            .arg(&cert_path)
            .args(["--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("{scheme}://localhost:{port}/write?db=public"))
            .args(["--data-binary", "cpu,host=tls usage=1 1700000000000000000"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert_eq!(curl("https"), "204", "{}", s.log());
    assert_ne!(curl("http"), "204", "plain HTTP is not served on the TLS port");
    let c = db.client().await;
    let n: i64 = c.query_one("SELECT count(*) FROM cpu WHERE host = 'tls'", &[]).await.unwrap().get(0);
    assert_eq!(n, 1);
    // A key that is not the certificate's is refused before listening.
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(&key_path, other.serialize_pem()).unwrap();
    let out = crate::common::chute()
        .args(["--url", &url, "serve", "--listen", "127.0.0.1:0", "--tls-cert", cert_path.to_str().unwrap(), "--tls-key"])
        .arg(&key_path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
}

#[tokio::test]
async fn keys_older_than_the_idempotency_window_are_forgotten() {
    let db = shared().fresh_db("serve_window").await;
    let url = db.url();
    create_time_partitioned(&url, "cpu", "time timestamptz not null, host text, usage float8", "1 day", &[]);
    let args = ["--idempotency-window", "1s"];
    let s = Server::start(&url, &args);
    let write = format!("{}/write?db=public", s.base);
    let line = b"cpu,host=old usage=1 1700000000000000000\n";
    assert_eq!(post(&write, &[("Idempotency-Key", "old")], line).0, 204);
    assert_eq!(post(&write, &[("Idempotency-Key", "old")], line).0, 204, "within the window: a replay");
    let c = db.client().await;
    let count = async |sql: &str| -> i64 { c.query_one(sql, &[]).await.unwrap().get(0) };
    assert_eq!(count("SELECT count(*) FROM cpu").await, 1);
    assert!(count("SELECT count(*) FROM chute.load_journal WHERE load_id LIKE 'serve public.cpu @%'").await > 0);
    let (code, log) = s.terminate();
    assert_eq!(code, Some(143), "{log}");
    // Until the key and the journal's entries are older than the window, by the server's clock.
    wait_for("the key and the journal to age past the 1 s window", Duration::from_secs(30), || async {
        count(
            "SELECT (SELECT count(*) FROM chute.serve_requests WHERE created_at >= now() - interval '1 s')
                  + (SELECT count(*) FROM chute.load_journal WHERE committed_at >= now() - interval '1 s')",
        )
        .await
            == 0
    })
    .await;
    // The next lane start forgets the key and the journal entries before the window.
    let s = Server::start(&url, &args);
    let write = format!("{}/write?db=public", s.base);
    assert_eq!(post(&write, &[("Idempotency-Key", "new")], b"cpu,host=new usage=2 1700000000000000000\n").0, 204);
    assert_eq!(count("SELECT count(*) FROM chute.serve_requests WHERE key = 'old'").await, 0);
    assert_eq!(count("SELECT count(*) FROM chute.serve_requests WHERE key = 'new'").await, 1);
    assert_eq!(count("SELECT count(*) FROM chute.load_journal WHERE committed_at < now() - interval '1 s'").await, 0);
    // Past the window a retry is a new request.
    assert_eq!(post(&write, &[("Idempotency-Key", "old")], line).0, 204);
    assert_eq!(count("SELECT count(*) FROM cpu WHERE host = 'old'").await, 2);
}
