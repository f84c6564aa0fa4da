//! The HTTP server under `chute serve`, built on hyper's HTTP/1 connection
//! (not `axum::serve`, which sets no limit): a client that connects and
//! stalls must not hold the service.
//!
//! - **Connections** (`--max-connections`): at most so many are open; beyond
//!   it new ones wait in the kernel's accept queue until one closes.
//! - **Headers** (`--header-timeout`): once a request's first byte has
//!   arrived, its headers must be complete within this time (and a TLS
//!   handshake too), or the connection is closed.
//! - **Idle connections** (`--idle-timeout`): a connection that sends
//!   nothing between requests (or after connecting) for this long is closed,
//!   and so is one whose client stops reading its answer.
//! - **Bodies** (`--body-timeout`, `--min-body-rate`): see `body::read`.
//!
//! Each connection's phase (idle, reading headers, busy with a request) is
//! kept by its `Clock`: reads mark the first byte of a request, the service
//! marks when the headers were complete and when the answer was made. A
//! watchdog beside the connection closes it past its phase's limit.
//!
//! Shutdown (`Stage`): `Draining` stops accepting, closes idle connections
//! and lets the others finish their request (hyper's graceful shutdown);
//! `Stopped` (at `--shutdown-timeout`) makes the requests still waiting
//! answer 503 at once (see `submit`), and a moment later every connection
//! is dropped.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use axum::Router;
use axum::http::header;
use axum::response::Response;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};

/// Where the service is in its life; every connection and every request
/// waiting for its rows watches it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Stage {
    Running,
    /// No new connection; each open one ends after its current request.
    Draining,
    /// The shutdown deadline passed: requests still waiting answer 503 now.
    Stopped,
}

/// The limits of connections, validated by the CLI.
#[derive(Debug, Clone)]
pub(crate) struct Limits {
    pub max_connections: usize,
    pub header_timeout: Duration,
    pub idle_timeout: Duration,
    pub shutdown_timeout: Duration,
}

/// How long connections get after `Stopped` to send the answers made then.
const FLUSH_GRACE: Duration = Duration::from_secs(1);

/// Serves `app` on `listener` (TLS when `tls` is given) until `shutdown`
/// completes, then drains: returns once every connection is closed, or
/// `--shutdown-timeout` plus a second after `shutdown` at the latest.
pub(crate) async fn serve_until(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    limits: Limits,
    stage: watch::Sender<Stage>,
    shutdown: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let accepting = tokio::spawn(accept_loop(listener, tls, app, limits.clone(), slots.clone(), stage.subscribe()));
    shutdown.await;
    let _ = stage.send(Stage::Draining);
    accepting.abort();
    let all = u32::try_from(limits.max_connections).unwrap_or(u32::MAX);
    let drained = tokio::time::timeout(limits.shutdown_timeout, slots.acquire_many(all)).await;
    if drained.is_err() {
        let _ = stage.send(Stage::Stopped);
        let _ = tokio::time::timeout(FLUSH_GRACE, slots.acquire_many(all)).await;
    }
    // Whatever is still open is dropped with the runtime.
}

async fn accept_loop(
    listener: TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    app: Router,
    limits: Limits,
    slots: Arc<Semaphore>,
    stage: watch::Receiver<Stage>,
) {
    let mut complained = None::<Instant>;
    loop {
        // At the limit, no connection is accepted: the next ones wait in the accept queue.
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let (tcp, _) = match listener.accept().await {
            Ok(v) => v,
            Err(e) => {
                // Out of file descriptors and the like: pause, then go on.
                // Pacing, not a retry of work: the listener accepts until shutdown.
                if complained.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                    eprintln!("chute serve: cannot accept a connection: {e}");
                    complained = Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = tcp.set_nodelay(true);
        let (app, limits, stage, tls) = (app.clone(), limits.clone(), stage.clone(), tls.clone());
        tokio::spawn(async move {
            let _slot = slot;
            match tls {
                None => connection(tcp, app, &limits, stage).await,
                Some(acceptor) => {
                    // The handshake is bounded like a request's headers.
                    if let Ok(Ok(stream)) = tokio::time::timeout(limits.header_timeout, acceptor.accept(tcp)).await {
                        connection(stream, app, &limits, stage).await;
                    }
                }
            }
        });
    }
}

/// Serves one connection until it closes, its clock runs out, or the service stops.
async fn connection<S>(io: S, app: Router, limits: &Limits, mut stage: watch::Receiver<Stage>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let clock = Arc::new(Clock::new());
    let io = TokioIo::new(Metered { inner: io, clock: clock.clone() });
    let service = {
        let clock = clock.clone();
        hyper::service::service_fn(move |req: hyper::Request<Incoming>| {
            clock.mark(Phase::Busy);
            let (app, clock) = (app.clone(), clock.clone());
            let answer: Pin<Box<dyn Future<Output = Result<Response, Infallible>> + Send>> = Box::pin(async move {
                let r: Result<Response, Infallible> = tower::ServiceExt::oneshot(app, req).await;
                if let Ok(r) = &r
                    && r.headers().get(header::CONNECTION).is_some_and(|v| v == "close")
                {
                    // Answered before its body was read (413, 429, 408): see `linger`.
                    clock.linger.store(true, Ordering::Relaxed);
                }
                clock.mark(Phase::Idle);
                r
            });
            answer
        })
    };
    let mut conn = hyper::server::conn::http1::Builder::new().keep_alive(true).serve_connection(io, service);
    let tick = (limits.header_timeout.min(limits.idle_timeout) / 5).clamp(Duration::from_millis(20), Duration::from_secs(1));
    let mut stopped_at = None::<tokio::time::Instant>;
    if *stage.borrow() >= Stage::Draining {
        Pin::new(&mut conn).graceful_shutdown();
    }
    let done = loop {
        tokio::select! {
            r = std::future::poll_fn(|cx| conn.poll_without_shutdown(cx)) => break r.is_ok(),
            changed = stage.changed() => {
                let now = if changed.is_ok() { *stage.borrow() } else { Stage::Stopped };
                if now >= Stage::Draining {
                    Pin::new(&mut conn).graceful_shutdown();
                }
                if now == Stage::Stopped && stopped_at.is_none() {
                    stopped_at = Some(tokio::time::Instant::now() + FLUSH_GRACE);
                }
                if changed.is_err() {
                    // The service is gone.
                    return;
                }
            }
            // Pacing, not a retry: the connection's clocks are checked each tick.
            _ = tokio::time::sleep(tick) => {
                if clock.expired(limits) || stopped_at.is_some_and(|t| tokio::time::Instant::now() >= t) {
                    return;
                }
            }
        }
    };
    if done && clock.linger.load(Ordering::Relaxed) {
        linger(conn.into_parts().io.into_inner()).await;
    }
}

/// Closes a connection whose answer was sent before its request's body was
/// read: our side is shut first, then what the client still sends is read
/// and dropped for a moment. Closed at once, the client's unread body would
/// make the kernel reset the connection, and a client still sending would
/// lose the answer (413, 429) before reading it.
async fn linger<S: AsyncRead + AsyncWrite + Unpin>(mut io: Metered<S>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let until = tokio::time::Instant::now() + LINGER;
    if tokio::time::timeout_at(until, io.inner.shutdown()).await.is_err() {
        return;
    }
    let mut scratch = vec![0u8; 64 << 10];
    while let Ok(Ok(n)) = tokio::time::timeout_at(until, io.inner.read(&mut scratch)).await {
        if n == 0 {
            return;
        }
    }
}

/// How long `linger` reads what a client still sends.
const LINGER: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// Waiting for a request (since connecting or since the last answer).
    Idle,
    /// A request's first byte has arrived; its headers are not complete.
    Head,
    /// The service has the request (it bounds its own body and work).
    Busy,
}

/// A connection's phase and since when.
struct Clock {
    phase: Mutex<(Phase, Instant)>,
    /// The connection closes after an answer sent before its request's body was read.
    linger: AtomicBool,
}

impl Clock {
    fn new() -> Clock {
        Clock { phase: Mutex::new((Phase::Idle, Instant::now())), linger: AtomicBool::new(false) }
    }

    fn mark(&self, phase: Phase) {
        *self.phase.lock().expect("connection clock") = (phase, Instant::now());
    }

    /// Bytes arrived: an idle connection starts a request.
    fn read(&self) {
        let mut c = self.phase.lock().expect("connection clock");
        if c.0 == Phase::Idle {
            *c = (Phase::Head, Instant::now());
        }
    }

    fn expired(&self, limits: &Limits) -> bool {
        let (phase, since) = *self.phase.lock().expect("connection clock");
        match phase {
            Phase::Idle => since.elapsed() >= limits.idle_timeout,
            Phase::Head => since.elapsed() >= limits.header_timeout,
            Phase::Busy => false,
        }
    }
}

/// A connection's stream, telling its clock when bytes arrive.
struct Metered<S> {
    inner: S,
    clock: Arc<Clock>,
}

impl<S: AsyncRead + Unpin> AsyncRead for Metered<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.clock.read();
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Metered<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(mut self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[std::io::IoSlice<'_>]) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Raises this process's soft limit of open files to its hard limit, so
/// that `--max-connections` is not cut short by a default of 1,024; the
/// limit it ends with.
pub(crate) fn raise_open_files() -> u64 {
    let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit write and read the struct we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) != 0 {
            return 1024;
        }
        if l.rlim_cur < l.rlim_max {
            let raised = libc::rlimit { rlim_cur: l.rlim_max, rlim_max: l.rlim_max };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                l.rlim_cur = l.rlim_max;
            }
        }
    }
    l.rlim_cur
}
