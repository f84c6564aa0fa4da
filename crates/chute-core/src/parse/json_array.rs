//! A JSON array of rows, as one message or request may carry them
//! (`[{"time": …}, {"time": …}]`), turned into JSON Lines: one element a
//! line, each then read by [`super::jsonl`] like any other line.
//!
//! Only the array's own structure is read here: where each element starts
//! and ends (strings, their escapes and nesting taken into account). Each
//! element is checked when its line is parsed, so a bad element is a bad
//! line (rejected with the reason the JSON Lines parser gives) while the
//! others load. Whitespace between tokens may hold newlines, which would cut
//! an element into several lines: they become spaces. Inside a string a raw
//! newline (any control character) is not JSON; such an array is not
//! split, and the whole message is then one bad line.

/// Appends the elements of the JSON array `payload` to `out`, one a line,
/// and returns true; returns false and leaves `out` as it was when
/// `payload` is not one array whose elements can be told apart (its first
/// token is not `[`, a string or bracket is left open, or something follows
/// the closing `]`). An empty array appends one empty line (no row).
pub fn array_as_lines(payload: &[u8], out: &mut Vec<u8>) -> bool {
    let start = out.len();
    if split(payload, out) {
        true
    } else {
        out.truncate(start);
        false
    }
}

/// Whether `payload`'s first token is `[`: a message that may be an array of rows.
pub fn looks_like_array(payload: &[u8]) -> bool {
    payload.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

fn split(payload: &[u8], out: &mut Vec<u8>) -> bool {
    let mut i = match payload.iter().position(|b| !b.is_ascii_whitespace()) {
        Some(p) if payload[p] == b'[' => p + 1,
        _ => return false,
    };
    // Nesting inside the outer array, whether inside a string, after a backslash.
    let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
    let mut element_has_bytes = false;
    let mut elements = 0usize;
    let mut closed = false;
    while i < payload.len() {
        let b = payload[i];
        i += 1;
        if in_string {
            if b < 0x20 {
                return false;
            }
            out.push(b);
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => {
                in_string = true;
                element_has_bytes = true;
                out.push(b);
            }
            b'{' | b'[' => {
                depth += 1;
                element_has_bytes = true;
                out.push(b);
            }
            b'}' | b']' if depth > 0 => {
                depth -= 1;
                out.push(b);
            }
            b']' => {
                // The outer array's end: the last element, if any, ends here.
                if element_has_bytes {
                    out.push(b'\n');
                    elements += 1;
                } else if elements > 0 {
                    // `[1,]`: a trailing comma is not JSON.
                    return false;
                }
                closed = true;
                break;
            }
            b',' if depth == 0 => {
                if !element_has_bytes {
                    return false;
                }
                out.push(b'\n');
                elements += 1;
                element_has_bytes = false;
            }
            b'\n' | b'\r' | b'\t' | b' ' => {
                // Between tokens: kept as a space, never as a line end.
                if element_has_bytes {
                    out.push(b' ');
                }
            }
            _ => {
                element_has_bytes = true;
                out.push(b);
            }
        }
    }
    if !closed || payload[i..].iter().any(|b| !b.is_ascii_whitespace()) {
        return false;
    }
    if elements == 0 {
        out.push(b'\n');
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(payload: &str) -> Option<String> {
        let mut out = b"kept|".to_vec();
        let ok = array_as_lines(payload.as_bytes(), &mut out);
        let text = String::from_utf8(out).unwrap();
        if ok {
            Some(text.strip_prefix("kept|").unwrap().to_owned())
        } else {
            assert_eq!(text, "kept|", "a refused array leaves the buffer as it was");
            None
        }
    }

    #[test]
    fn elements_become_lines() {
        assert_eq!(lines(r#"[{"a":1},{"a":2}]"#).as_deref(), Some("{\"a\":1}\n{\"a\":2}\n"));
        assert_eq!(
            lines(" \n[ {\"a\": [1, 2]} ,\n {\"b\": {\"c\": \"]\"}} ] \n").as_deref(),
            Some("{\"a\": [1, 2]} \n{\"b\": {\"c\": \"]\"}} \n")
        );
    }

    #[test]
    fn brackets_commas_and_quotes_in_strings_do_not_split() {
        assert_eq!(lines(r#"[{"s":"a,b]}[{"},{"s":"q\"uote\\"}]"#).as_deref(), Some("{\"s\":\"a,b]}[{\"}\n{\"s\":\"q\\\"uote\\\\\"}\n"));
    }

    #[test]
    fn newlines_between_tokens_become_spaces() {
        assert_eq!(lines("[{\"a\":\n1,\r\n\"b\":2}]").as_deref(), Some("{\"a\": 1,  \"b\":2}\n"));
    }

    #[test]
    fn an_empty_array_is_one_empty_line() {
        assert_eq!(lines("[]").as_deref(), Some("\n"));
        assert_eq!(lines(" [ \n ] ").as_deref(), Some("\n"));
    }

    #[test]
    fn elements_that_are_not_objects_are_left_to_the_line_parser() {
        assert_eq!(lines("[1, \"x\", null]").as_deref(), Some("1\n\"x\"\nnull\n"));
    }

    #[test]
    fn what_is_not_one_array_is_refused() {
        for bad in [
            "{\"a\":1}",
            "[{\"a\":1}",
            "[{\"a\":1}] x",
            "[{\"a\":1}][]",
            "[{\"a\":\"open]",
            "[,{\"a\":1}]",
            "[{\"a\":1},,{\"a\":2}]",
            "[{\"a\":1},]",
            "[{\"a\":\"raw\nnewline\"}]",
            "",
        ] {
            assert_eq!(lines(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn looks_like_array_reads_the_first_token() {
        assert!(looks_like_array(b"  \n[1]"));
        assert!(!looks_like_array(b"{\"a\":[1]}"));
        assert!(!looks_like_array(b""));
    }
}
