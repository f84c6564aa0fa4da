//! Bearer tokens (`--token-file`): a request shows one as
//! `Authorization: Bearer T` or `Token T` (InfluxDB v2 clients), HTTP Basic
//! with the token as the password, or v1's `p=T` query parameter (InfluxDB
//! v1 clients). Tokens are compared in constant time and never logged.

use std::collections::HashMap;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;

/// `Ok` when no token is required or the request shows a valid one.
pub(crate) fn check(tokens: &[String], headers: &HeaderMap, query: &HashMap<String, String>) -> Result<(), Response> {
    if tokens.is_empty() {
        return Ok(());
    }
    let shown = presented(headers, query);
    let ok = shown.iter().any(|s| tokens.iter().any(|t| same(t.as_bytes(), s.as_bytes())));
    if ok {
        return Ok(());
    }
    let message = if shown.is_empty() {
        "authentication required: send Authorization: Bearer <token> (or Token <token>)"
    } else {
        "the token is not valid"
    };
    let mut r = super::error(StatusCode::UNAUTHORIZED, "unauthorized", message);
    r.headers_mut().insert(header::WWW_AUTHENTICATE, axum::http::HeaderValue::from_static("Bearer"));
    Err(r)
}

/// Every token the request shows.
fn presented(headers: &HeaderMap, query: &HashMap<String, String>) -> Vec<String> {
    let mut out = Vec::new();
    for v in headers.get_all(header::AUTHORIZATION) {
        let Ok(v) = v.to_str() else { continue };
        let (scheme, rest) = v.split_once(' ').unwrap_or((v, ""));
        let rest = rest.trim();
        match scheme.to_ascii_lowercase().as_str() {
            "bearer" | "token" => out.push(rest.to_owned()),
            "basic" => {
                if let Some(pair) = base64_decode(rest).and_then(|b| String::from_utf8(b).ok())
                    && let Some((_, password)) = pair.split_once(':')
                {
                    out.push(password.to_owned());
                }
            }
            _ => {}
        }
    }
    if let Some(p) = query.get("p") {
        out.push(p.clone());
    }
    out
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Standard base64 (with or without padding).
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in s.bytes().filter(|&c| c != b'=') {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_from_every_place_a_client_puts_them() {
        let tokens = vec!["s3cret".to_owned()];
        let mut h = HeaderMap::new();
        let q = HashMap::new();
        assert!(check(&tokens, &h, &q).is_err());
        h.insert(header::AUTHORIZATION, "Token s3cret".parse().unwrap());
        assert!(check(&tokens, &h, &q).is_ok());
        h.insert(header::AUTHORIZATION, "Bearer wrong".parse().unwrap());
        assert_eq!(check(&tokens, &h, &q).unwrap_err().status(), StatusCode::UNAUTHORIZED);
        // user:s3cret
        h.insert(header::AUTHORIZATION, "Basic dXNlcjpzM2NyZXQ=".parse().unwrap());
        assert!(check(&tokens, &h, &q).is_ok());
        let q: HashMap<String, String> = [("u".to_owned(), "x".to_owned()), ("p".to_owned(), "s3cret".to_owned())].into();
        assert!(check(&tokens, &HeaderMap::new(), &q).is_ok());
        assert!(check(&[], &HeaderMap::new(), &HashMap::new()).is_ok());
    }
}
