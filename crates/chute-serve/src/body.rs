//! Request bodies, read within limits:
//!
//! - **Size** (`--max-body-mb`, as sent and once decompressed): a
//!   `Content-Length` over it gets 413 before a byte of the body is read
//!   (the connection is closed after the answer); a body without one, or a
//!   gzip body, gets 413 as soon as it grows past it. A gzip body whose
//!   trailer says it decompresses past the limit is refused before it is
//!   decompressed.
//! - **Memory** (`--memory-mb`): the request's reservation (see `memory`)
//!   is taken for `Content-Length` before reading, and grows with a body of
//!   unknown length and with decompression: 413 when the body could never
//!   fit, 429 when it could later.
//! - **Time** (`--body-timeout`, `--min-body-rate`): the body may stall for
//!   at most `--body-timeout` at a time, and after that long it must have
//!   come at `--min-body-rate` on average; otherwise 408 and the connection
//!   is closed. A slow client therefore holds a connection for a bounded
//!   time, whatever it sends.

use std::io::Read;
use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;

use super::Shared;
use super::http::Stage;
use super::memory::Reservation;

/// How a body must arrive, validated by the CLI.
#[derive(Debug, Clone)]
pub(crate) struct BodyLimits {
    /// The largest body, as sent and decompressed.
    pub max: usize,
    /// The longest the body may stall.
    pub stall: Duration,
    /// Bytes a second, on average once `stall` has passed.
    pub min_rate: usize,
}

/// Reads the body as sent, within the limits, into `reserved`. A body that
/// arrives in one piece is kept as it is; one in several is gathered once,
/// into a buffer of the size the request announced.
pub(crate) async fn read(s: &Shared, headers: &HeaderMap, body: axum::body::Body, reserved: &mut Reservation) -> Result<Bytes, Response> {
    use futures_util::StreamExt;
    let limits = &s.config.body;
    let announced = match headers.get(header::CONTENT_LENGTH) {
        None => None,
        Some(v) => match v.to_str().ok().and_then(|v| v.trim().parse::<u64>().ok()) {
            Some(n) => Some(n),
            None => return Err(close(super::error(StatusCode::BAD_REQUEST, "invalid", "Content-Length is not a number"))),
        },
    };
    if let Some(n) = announced {
        if n > limits.max as u64 {
            return Err(too_large(limits.max));
        }
        reserved.need(reserved.bytes() + n as usize)?;
    }
    let base = reserved.bytes() - announced.unwrap_or(0) as usize;
    let mut stream = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut out = bytes::BytesMut::new();
    let mut seen = 0usize;
    let started = tokio::time::Instant::now();
    let mut last = started;
    let mut stage = s.stage.clone();
    loop {
        // The next piece is due within the stall limit, and soon enough for the average rate.
        let by_rate = started + limits.stall + Duration::from_secs_f64(seen as f64 / limits.min_rate.max(1) as f64);
        let due = (last + limits.stall).min(by_rate);
        let piece = tokio::select! {
            p = tokio::time::timeout_at(due, stream.next()) => match p {
                Ok(p) => p,
                Err(_) => return Err(too_slow(limits, seen)),
            },
            _ = stage.wait_for(|st| *st == Stage::Stopped) => return Err(super::unavailable("the service is stopping: retry")),
        };
        let Some(piece) = piece else { break };
        let piece =
            piece.map_err(|e| close(super::error(StatusCode::BAD_REQUEST, "invalid", &format!("cannot read the request body: {e}"))))?;
        last = tokio::time::Instant::now();
        seen += piece.len();
        if seen > limits.max {
            return Err(too_large(limits.max));
        }
        if announced.is_none_or(|n| seen as u64 > n) {
            // Unknown length (or more than announced, which hyper refuses anyway): grow as it comes.
            reserved.need(base + seen.next_multiple_of(64 << 10))?;
        }
        match first.take() {
            None if out.is_empty() => first = Some(piece),
            earlier => {
                if let Some(f) = earlier {
                    out.reserve(announced.map_or(seen * 2, |n| n as usize).max(seen));
                    out.extend_from_slice(&f);
                }
                out.extend_from_slice(&piece);
            }
        }
    }
    // What is held now: the body (and the buffer it was gathered in).
    let held = base + if first.is_some() { seen } else { out.capacity() };
    let _ = reserved.resize(held.max(base));
    Ok(first.unwrap_or_else(|| out.freeze()))
}

/// The answer that closes the connection after it (the rest of the body is not read).
fn close(mut r: Response) -> Response {
    r.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

fn too_large(max: usize) -> Response {
    close(super::error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request too large",
        &format!("the body is larger than {max} bytes (--max-body-mb): send smaller requests"),
    ))
}

fn too_slow(limits: &BodyLimits, seen: usize) -> Response {
    close(super::error(
        StatusCode::REQUEST_TIMEOUT,
        "request timeout",
        &format!(
            "the body stopped after {seen} bytes: it must not stall for {:?} (--body-timeout) and must come at {} bytes a second \
             or more (--min-body-rate)",
            limits.stall, limits.min_rate
        ),
    ))
}

/// Decompresses in steps of this many bytes, growing the reservation before the buffer.
const STEP: usize = 1 << 20;

/// The body, decompressed, or the answer that refuses it. `reserved` holds
/// the body as sent on entry, and what the returned bytes take on return.
pub(crate) fn decode(headers: &HeaderMap, body: Bytes, max: usize, reserved: &mut Reservation) -> Result<Bytes, Response> {
    let encoding = content_encoding(headers)?;
    match encoding.as_str() {
        "" | "identity" => {
            if body.len() > max {
                return Err(too_large(max));
            }
            Ok(body)
        }
        "gzip" | "x-gzip" => {
            if !body.starts_with(&[0x1f, 0x8b]) {
                return Err(super::error(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    "the body is not gzip (it does not start with gzip's magic bytes) although Content-Encoding says gzip: send it compressed, or without the header",
                ));
            }
            // The trailer's size (of the last member, modulo 2^32): a body that says
            // it is too large is refused unread; one that lies is stopped at the limit.
            let said = body.len().checked_sub(4).map(|at| u32::from_le_bytes(body[at..].try_into().expect("4 bytes")) as usize);
            if let Some(n) = said.filter(|n| *n > max) {
                return Err(close(super::error(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "request too large",
                    &format!(
                        "the gzip body says (in its last 4 bytes, gzip's size trailer) it decompresses to {n} bytes, more than {max} (--max-body-mb): \
                         send smaller requests, and nothing after the gzip stream"
                    ),
                )));
            }
            let held = reserved.bytes();
            let mut out = Vec::new();
            let mut d = flate2::bufread::MultiGzDecoder::new(&body[..]);
            loop {
                let want = (out.len() + STEP).min(max + 1);
                if want > out.capacity() {
                    // Doubling (from the trailer's size, when it has one), each step reserved first.
                    let cap = want.max(out.capacity() * 2).max(said.unwrap_or(0) + 1).min(max + 1);
                    reserved.need(held + cap)?;
                    out.reserve_exact(cap - out.len());
                }
                let got = (&mut d)
                    .take((want - out.len()) as u64)
                    .read_to_end(&mut out)
                    .map_err(|e| super::error(StatusCode::BAD_REQUEST, "invalid", &format!("the gzip body does not decompress: {e}")))?;
                if out.len() > max {
                    return Err(too_large(max));
                }
                if got == 0 {
                    break;
                }
            }
            // Every byte sent must be gzip: what follows the last member is not ignored.
            if !d.into_inner().is_empty() {
                return Err(super::error(
                    StatusCode::BAD_REQUEST,
                    "invalid",
                    "bytes follow the gzip body's last member: send the gzip stream alone",
                ));
            }
            // The compressed body is dropped on return: only the decompressed one is held.
            let _ = reserved.resize(held.saturating_sub(body.len()) + out.capacity());
            Ok(out.into())
        }
        other => Err(super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            &format!("Content-Encoding {other:?} is not supported: send identity or gzip"),
        )),
    }
}

/// The body's one content coding (`identity` when none is named), or the
/// answer refusing the request: several codings (two `Content-Encoding`
/// headers, or a list) are not decoded, and neither is a transfer coding
/// other than `chunked` (hyper decodes only that one).
fn content_encoding(headers: &HeaderMap) -> Result<String, Response> {
    let unsupported = |what: String| super::error(StatusCode::UNSUPPORTED_MEDIA_TYPE, "invalid", &what);
    for te in headers.get_all(header::TRANSFER_ENCODING) {
        let te = te.to_str().unwrap_or("?").to_ascii_lowercase();
        if te.split(',').map(str::trim).any(|c| c != "chunked") {
            return Err(close(super::error(
                StatusCode::BAD_REQUEST,
                "invalid",
                &format!(
                    "Transfer-Encoding {te:?} is not decoded: send chunked or a Content-Length, and compress with Content-Encoding: gzip"
                ),
            )));
        }
    }
    let mut codings = Vec::new();
    for v in headers.get_all(header::CONTENT_ENCODING) {
        let v = v.to_str().map_err(|_| unsupported("Content-Encoding is not ASCII: send identity or gzip".into()))?;
        codings.extend(v.split(',').map(|c| c.trim().to_ascii_lowercase()).filter(|c| !c.is_empty()));
    }
    match codings.as_slice() {
        [] => Ok("identity".into()),
        [one] => Ok(one.clone()),
        many => Err(unsupported(format!("Content-Encoding {}: send one coding, identity or gzip", many.join(", ")))),
    }
}
