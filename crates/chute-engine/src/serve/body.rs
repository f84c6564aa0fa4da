//! Request bodies: gzip (`Content-Encoding: gzip`) is decompressed, and no
//! body grows past `--max-body-mb` as sent or once decompressed (413). A
//! body too large is still read (and dropped) up to four times the limit, so
//! that the client, which is sending it, gets to read the 413.

use std::io::Read;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;

/// Reads the body as sent, up to `max` bytes. A body that arrives in one
/// piece is kept as it is; one in several is gathered once, into a buffer
/// of the size the request announced.
pub(crate) async fn read(body: axum::body::Body, max: usize) -> Result<Bytes, Response> {
    use axum::body::HttpBody;
    use futures_util::StreamExt;
    let announced = (HttpBody::size_hint(&body).lower() as usize).min(max);
    let mut stream = body.into_data_stream();
    let mut first: Option<Bytes> = None;
    let mut out = bytes::BytesMut::new();
    let mut seen = 0usize;
    while let Some(piece) = stream.next().await {
        let piece = piece.map_err(|e| super::error(StatusCode::BAD_REQUEST, "invalid", &format!("cannot read the request body: {e}")))?;
        seen += piece.len();
        if seen <= max {
            match first.take() {
                None if out.is_empty() => first = Some(piece),
                earlier => {
                    if let Some(f) = earlier {
                        out.reserve(announced.max(seen));
                        out.extend_from_slice(&f);
                    }
                    out.extend_from_slice(&piece);
                }
            }
        } else if seen > max.saturating_mul(4) {
            break;
        }
    }
    if seen > max {
        return Err(too_large(max));
    }
    Ok(first.unwrap_or_else(|| out.freeze()))
}

fn too_large(max: usize) -> Response {
    super::error(StatusCode::PAYLOAD_TOO_LARGE, "request too large", &format!("the body is larger than {max} bytes (--max-body-mb)"))
}

/// The body, decompressed, or the answer that refuses it.
pub(crate) fn decode(headers: &HeaderMap, body: Bytes, max: usize) -> Result<Bytes, Response> {
    let encoding = headers.get(header::CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("identity").trim().to_ascii_lowercase();
    let too_large = || {
        super::error(StatusCode::PAYLOAD_TOO_LARGE, "request too large", &format!("the body is larger than {max} bytes (--max-body-mb)"))
    };
    match encoding.as_str() {
        "" | "identity" => {
            if body.len() > max {
                return Err(too_large());
            }
            Ok(body)
        }
        "gzip" | "x-gzip" => {
            let mut out = Vec::with_capacity(body.len() * 4);
            let mut d = flate2::read::MultiGzDecoder::new(&body[..]).take(max as u64 + 1);
            d.read_to_end(&mut out)
                .map_err(|e| super::error(StatusCode::BAD_REQUEST, "invalid", &format!("the gzip body does not decompress: {e}")))?;
            if out.len() > max {
                return Err(too_large());
            }
            Ok(out.into())
        }
        other => Err(super::error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "invalid",
            &format!("Content-Encoding {other:?} is not supported: send identity or gzip"),
        )),
    }
}
