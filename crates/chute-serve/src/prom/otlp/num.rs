//! The proto3 JSON mapping of OTLP's scalar fields, for serde: a 64-bit
//! integer is a decimal string or a number; a double is a number or one of
//! "NaN", "Infinity", "-Infinity"; bytes are base64 (standard or URL-safe,
//! padded or not); `null` is the field's default.

use serde::de::{Deserializer, Error};
use serde_json::Value;

fn int<T: std::str::FromStr>(v: &Value) -> Result<T, String> {
    match v {
        Value::Number(n) => n.to_string().parse().map_err(|_| format!("{n} is not an integer of this field's size")),
        Value::String(s) => s.trim().parse().map_err(|_| format!("{s:?} is not an integer of this field's size")),
        other => Err(format!("{other} is not an integer")),
    }
}

fn float(v: &Value) -> Result<f64, String> {
    match v {
        Value::Number(n) => n.as_f64().ok_or_else(|| format!("{n} is not a double")),
        Value::String(s) => match s.as_str() {
            "NaN" => Ok(f64::NAN),
            "Infinity" => Ok(f64::INFINITY),
            "-Infinity" => Ok(f64::NEG_INFINITY),
            s => s.trim().parse().map_err(|_| format!("{s:?} is not a double")),
        },
        other => Err(format!("{other} is not a double")),
    }
}

pub(crate) fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(0),
        v => int(&v).map_err(D::Error::custom),
    }
}

pub(crate) fn f64<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(0.0),
        v => float(&v).map_err(D::Error::custom),
    }
}

pub(crate) fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(None),
        v => int(&v).map(Some).map_err(D::Error::custom),
    }
}

pub(crate) fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(None),
        v => float(&v).map(Some).map_err(D::Error::custom),
    }
}

pub(crate) fn vec_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(vec![]),
        Value::Array(a) => a.iter().map(int).collect::<Result<_, _>>().map_err(D::Error::custom),
        other => Err(D::Error::custom(format!("{other} is not an array of integers"))),
    }
}

pub(crate) fn vec_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(vec![]),
        Value::Array(a) => a.iter().map(float).collect::<Result<_, _>>().map_err(D::Error::custom),
        other => Err(D::Error::custom(format!("{other} is not an array of doubles"))),
    }
}

pub(crate) fn opt_base64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
    match <Value as serde::Deserialize>::deserialize(d)? {
        Value::Null => Ok(None),
        Value::String(s) => base64(&s).map(Some).ok_or_else(|| D::Error::custom(format!("{s:?} is not base64"))),
        other => Err(D::Error::custom(format!("{other} is not a base64 string"))),
    }
}

/// Standard or URL-safe base64, padded or not.
fn base64(s: &str) -> Option<Vec<u8>> {
    let digit = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let s = s.trim_end_matches('=').as_bytes();
    let (mut out, mut acc, mut bits) = (Vec::with_capacity(s.len() * 3 / 4), 0u32, 0);
    for c in s {
        acc = (acc << 6) | u32::from(digit(*c)?);
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
    fn base64_both_alphabets_padded_or_not() {
        assert_eq!(base64("aGVsbG8=").unwrap(), b"hello");
        assert_eq!(base64("aGVsbG8").unwrap(), b"hello");
        assert_eq!(base64("-_8").unwrap(), base64("+/8=").unwrap());
        assert!(base64("a b").is_none());
    }
}
