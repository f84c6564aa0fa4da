//! Text-like values (`text`, `varchar`, `bpchar`, `name`, `json`, `jsonb`),
//! `bytea` (`byteain`) and `uuid` (`string_to_uuid`).
//!
//! Text COPY checks that every line is valid in the database encoding
//! (UTF-8 here) before any input function runs, and PostgreSQL's UTF-8 check
//! refuses NUL bytes; binary COPY checks the same for text-like types, so the
//! message is PostgreSQL's `report_invalid_encoding`.

use super::{ValueError, shown, syntax_error};

/// Valid UTF-8 without NUL, or PostgreSQL's message for the first bad byte.
fn check_utf8(text: &[u8]) -> Result<(), ValueError> {
    let bad_at = match std::str::from_utf8(text) {
        Ok(_) => memchr::memchr(0, text),
        Err(e) => Some(memchr::memchr(0, &text[..e.valid_up_to()]).unwrap_or(e.valid_up_to())),
    };
    match bad_at {
        None => Ok(()),
        Some(at) => Err(invalid_encoding(&text[at..])),
    }
}

/// `report_invalid_encoding`: the bytes of the character that starts at the
/// bad byte, as long as the lead byte says, at most what is left.
fn invalid_encoding(rest: &[u8]) -> ValueError {
    let lead = rest[0];
    let len = match lead {
        _ if lead & 0x80 == 0 => 1,
        _ if lead & 0xe0 == 0xc0 => 2,
        _ if lead & 0xf0 == 0xe0 => 3,
        _ if lead & 0xf8 == 0xf0 => 4,
        _ => 1,
    };
    let shown: Vec<String> = rest.iter().take(len).map(|b| format!("0x{b:02x}")).collect();
    ValueError::Invalid(format!("invalid byte sequence for encoding \"UTF8\": {}", shown.join(" ")))
}

/// `text`, `varchar`, `bpchar`, `json`: the bytes as they are. Length limits
/// (`varchar(n)`, `char(n)` padding) are applied by the receive function with
/// the column's typmod exactly as the input function would, and `json` is
/// validated by `json_recv` as by `json_in`.
pub(super) fn encode_plain(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    check_utf8(text)?;
    out.extend_from_slice(text);
    Ok(())
}

/// `jsonb`: format version 1, then the JSON text (validated by `jsonb_recv`).
pub(super) fn encode_jsonb(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    check_utf8(text)?;
    out.push(1);
    out.extend_from_slice(text);
    Ok(())
}

/// Longest `name` in bytes (NAMEDATALEN - 1).
const NAME_MAX_BYTES: usize = 63;

/// `name`: `namein` silently cuts a long name to 63 bytes at a character
/// boundary, while `namerecv` would reject it, so the cut happens here.
pub(super) fn encode_name(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    check_utf8(text)?;
    let mut len = text.len().min(NAME_MAX_BYTES);
    while len < text.len() && (text[len] & 0xc0) == 0x80 {
        len -= 1;
    }
    out.extend_from_slice(&text[..len]);
    Ok(())
}

/// `byteain`: `\x` followed by hex pairs (whitespace between pairs), or the
/// escape format (`\\`, `\ooo` with a first digit 0-3, other bytes as they
/// are).
pub(super) fn encode_bytea(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    check_utf8(text)?;
    if let [b'\\', b'x', hex @ ..] = text {
        return decode_hex(hex, out);
    }
    out.reserve(text.len());
    let mut rest = text;
    while let Some(at) = memchr::memchr(b'\\', rest) {
        out.extend_from_slice(&rest[..at]);
        rest = &rest[at..];
        match rest {
            [_, b'\\', ..] => {
                out.push(b'\\');
                rest = &rest[2..];
            }
            [_, a @ b'0'..=b'3', b @ b'0'..=b'7', c @ b'0'..=b'7', ..] => {
                out.push(((a - b'0') << 6) | ((b - b'0') << 3) | (c - b'0'));
                rest = &rest[4..];
            }
            _ => return Err(ValueError::Invalid("invalid input syntax for type bytea".into())),
        }
    }
    out.extend_from_slice(rest);
    Ok(())
}

/// `hex_decode`: spaces, tabs, newlines and carriage returns may separate
/// pairs but not split one.
fn decode_hex(hex: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    out.reserve(hex.len() / 2);
    let mut i = 0;
    while i < hex.len() {
        let c = hex[i];
        if matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
            i += 1;
            continue;
        }
        let hi = hex_value(hex, i)?;
        let Some(_) = hex.get(i + 1) else {
            return Err(ValueError::Invalid("invalid hexadecimal data: odd number of digits".into()));
        };
        let lo = hex_value(hex, i + 1)?;
        out.push((hi << 4) | lo);
        i += 2;
    }
    Ok(())
}

fn hex_value(hex: &[u8], i: usize) -> Result<u8, ValueError> {
    match hex[i] {
        c @ b'0'..=b'9' => Ok(c - b'0'),
        c @ b'a'..=b'f' => Ok(c - b'a' + 10),
        c @ b'A'..=b'F' => Ok(c - b'A' + 10),
        _ => {
            // PostgreSQL quotes the whole (multibyte) character.
            let ch = std::str::from_utf8(&hex[i..]).ok().and_then(|s| s.chars().next()).map_or(1, char::len_utf8);
            Err(ValueError::Invalid(format!("invalid hexadecimal digit: \"{}\"", shown(&hex[i..i + ch]))))
        }
    }
}

/// `string_to_uuid`: 32 hex digits, optionally in braces, with an optional
/// hyphen after any group of four digits but the last; no whitespace.
pub(super) fn encode_uuid(text: &[u8], out: &mut Vec<u8>) -> Result<(), ValueError> {
    let syntax = || syntax_error("uuid", text);
    let (body, braces) = match text {
        [b'{', inner @ ..] => (inner, true),
        _ => (text, false),
    };
    let mut bytes = [0u8; 16];
    let mut i = 0;
    for (n, byte) in bytes.iter_mut().enumerate() {
        let (Some(&a), Some(&b)) = (body.get(i), body.get(i + 1)) else { return Err(syntax()) };
        let (Some(hi), Some(lo)) = (hex_digit(a), hex_digit(b)) else { return Err(syntax()) };
        *byte = (hi << 4) | lo;
        i += 2;
        if n % 2 == 1 && n < 15 && body.get(i) == Some(&b'-') {
            i += 1;
        }
    }
    let rest = &body[i..];
    let ok = if braces { rest == b"}" } else { rest.is_empty() };
    if !ok {
        return Err(syntax());
    }
    out.extend_from_slice(&bytes);
    Ok(())
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::super::{EncodeContext, PgType, encode_text};
    use super::*;

    fn enc(ty: PgType, s: &[u8]) -> Result<Vec<u8>, ValueError> {
        let mut out = vec![0xAA];
        match encode_text(ty, s, &EncodeContext::default(), &mut out) {
            Ok(()) => Ok(out[1..].to_vec()),
            Err(e) => {
                assert_eq!(out, [0xAA], "output touched on error for {s:?}");
                Err(e)
            }
        }
    }

    fn invalid(r: Result<Vec<u8>, ValueError>) -> String {
        match r {
            Err(ValueError::Invalid(m)) => m,
            other => panic!("expected Invalid, got {other:?}"),
        }
    }

    #[test]
    fn text_types_pass_valid_utf8_through() {
        for ty in [PgType::Text, PgType::Varchar, PgType::Bpchar, PgType::Json] {
            assert_eq!(enc(ty, "grüße  ".as_bytes()), Ok("grüße  ".as_bytes().to_vec()));
            assert_eq!(enc(ty, b""), Ok(vec![]));
        }
        assert_eq!(enc(PgType::Jsonb, br#" {"a": 1} "#), Ok(b"\x01 {\"a\": 1} ".to_vec()));
    }

    #[test]
    fn text_types_reject_what_the_utf8_check_rejects() {
        assert_eq!(invalid(enc(PgType::Text, b"a\0b")), "invalid byte sequence for encoding \"UTF8\": 0x00");
        assert_eq!(invalid(enc(PgType::Text, b"ab\xc3\x28")), "invalid byte sequence for encoding \"UTF8\": 0xc3 0x28");
        assert_eq!(invalid(enc(PgType::Varchar, b"\xe2\x82")), "invalid byte sequence for encoding \"UTF8\": 0xe2 0x82");
        assert_eq!(invalid(enc(PgType::Jsonb, b"\xff")), "invalid byte sequence for encoding \"UTF8\": 0xff");
        // Surrogates and overlong forms are invalid for PostgreSQL as well.
        assert!(matches!(enc(PgType::Text, b"\xed\xa0\x80"), Err(ValueError::Invalid(_))));
        assert!(matches!(enc(PgType::Text, b"\xc0\xaf"), Err(ValueError::Invalid(_))));
        // The NUL is reported if it comes before the bad sequence.
        assert_eq!(invalid(enc(PgType::Text, b"\0\xff")), "invalid byte sequence for encoding \"UTF8\": 0x00");
    }

    #[test]
    fn names_are_cut_like_namein() {
        let long = "a".repeat(70);
        assert_eq!(enc(PgType::Name, long.as_bytes()), Ok(vec![b'a'; 63]));
        let wide = format!("{}ää", "a".repeat(62));
        assert_eq!(enc(PgType::Name, wide.as_bytes()), Ok(vec![b'a'; 62]));
        assert_eq!(enc(PgType::Name, b"abc"), Ok(b"abc".to_vec()));
    }

    #[test]
    fn bytea_hex_and_escape_formats() {
        assert_eq!(enc(PgType::Bytea, b"\\x"), Ok(vec![]));
        assert_eq!(enc(PgType::Bytea, b"\\xDEADbeef"), Ok(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(enc(PgType::Bytea, b"\\x de ad\n\r\t"), Ok(vec![0xde, 0xad]));
        assert_eq!(enc(PgType::Bytea, b"abc\\\\def"), Ok(b"abc\\def".to_vec()));
        assert_eq!(enc(PgType::Bytea, b"a\\101b"), Ok(b"aAb".to_vec()));
        assert_eq!(enc(PgType::Bytea, b"\\177\\377"), Ok(vec![0x7f, 0xff]));
        assert_eq!(enc(PgType::Bytea, "ä".as_bytes()), Ok("ä".as_bytes().to_vec()));
        assert_eq!(invalid(enc(PgType::Bytea, b"\\xd e")), "invalid hexadecimal digit: \" \"");
        assert_eq!(invalid(enc(PgType::Bytea, b"\\xdea")), "invalid hexadecimal data: odd number of digits");
        assert_eq!(invalid(enc(PgType::Bytea, b"\\xzz")), "invalid hexadecimal digit: \"z\"");
        assert_eq!(invalid(enc(PgType::Bytea, "\\xä".as_bytes())), "invalid hexadecimal digit: \"ä\"");
        assert_eq!(invalid(enc(PgType::Bytea, b"\\x\x0b")), "invalid hexadecimal digit: \"\x0b\"");
        for bad in [&b"\\X41"[..], b"a\\400", b"a\\", b"a\\x41", b"\\", b"x\\0", b"\\18", b"\\1234\\"] {
            assert_eq!(invalid(enc(PgType::Bytea, bad)), "invalid input syntax for type bytea", "{bad:?}");
        }
        assert!(matches!(enc(PgType::Bytea, b"a\0"), Err(ValueError::Invalid(_))));
    }

    #[test]
    fn uuids_follow_string_to_uuid() {
        let want: Vec<u8> = vec![0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11];
        for ok in [
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc999c0b4ef8bb6d6bb9bd380a11}",
            "a0ee-bc99-9c0b-4ef8-bb6d-6bb9-bd38-0a11",
            "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "{a0eebc99-9c0b4ef8-bb6d6bb9bd380a11}",
        ] {
            assert_eq!(enc(PgType::Uuid, ok.as_bytes()), Ok(want.clone()), "{ok}");
        }
        for bad in [
            " a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11 ",
            "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11-",
            "a0e-ebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
            "{a0eebc999c0b4ef8bb6d6bb9bd380a11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a11}",
            "a0eebc99--9c0b-4ef8-bb6d-6bb9bd380a11",
            "a0eebc999c0b4ef8bb6d6bb9bd380a1",
            "g0eebc999c0b4ef8bb6d6bb9bd380a11",
            "",
        ] {
            assert_eq!(invalid(enc(PgType::Uuid, bad.as_bytes())), format!("invalid input syntax for type uuid: \"{bad}\""));
        }
    }
}
