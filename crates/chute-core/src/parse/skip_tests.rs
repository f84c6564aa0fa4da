//! `Boundary::carry` and `Boundary::first_record_end`: a reader that drops
//! what it has read of a long record, keeping only the stand-in, must still
//! find that record's end exactly where it is.

use super::csv::{CsvOptions, CsvParser};
use super::jsonl::JsonlParser;
use super::text::{TextOptions, TextParser};
use super::{Boundary, Format};

/// Reads `input` (a long first record, then more) `step` bytes at a time,
/// dropping what was read for a stand-in whenever the format gives one, and
/// returns where the first record ended in `input`.
fn skip_first(format: &dyn Format, input: &[u8], step: usize) -> Option<usize> {
    let (mut buf, mut stand_in, mut consumed) = (Vec::new(), 0usize, 0usize);
    let mut at = 0;
    while at < input.len() {
        let to = (at + step).min(input.len());
        buf.extend_from_slice(&input[at..to]);
        at = to;
        if let Some(end) = format.first_record_end(&buf) {
            return Some(consumed + end - stand_in);
        }
        if let Some(s) = format.carry(&buf) {
            consumed += buf.len() - stand_in;
            stand_in = s.len();
            buf = s;
        }
    }
    None
}

fn check(format: &dyn Format, record: &[u8], rest: &[u8]) {
    let input = [record, rest].concat();
    for step in 1..=7 {
        assert_eq!(skip_first(format, &input, step), Some(record.len()), "step {step}: {:?}", String::from_utf8_lossy(record));
    }
}

#[test]
fn csv_skips_quoted_newlines_and_doubled_quotes() {
    let csv = CsvParser::new(CsvOptions::default()).unwrap();
    check(&csv, b"1,\"a\nb\"\"\nc\"\"\"\"\",\"\"\n", b"2,x\n");
    check(&csv, b"1,\"\"\"\",plain,\"x\ny\"\r\n", b"2,\"q\"\n");
    check(&csv, b"1,abc\"def\nxyz\"\n", b"2\n");
}

#[test]
fn csv_with_an_escape_character_never_cuts_between_escape_and_quote() {
    let csv = CsvParser::new(CsvOptions { escape: b'\\', ..CsvOptions::default() }).unwrap();
    check(&csv, b"1,\"a\\\"\nb\\\\\",\"\\\"\n\"\n", b"2,x\n");
    assert_eq!(csv.carry(b"1,\"ab\\"), None, "an escape as the last byte is not decided yet");
}

#[test]
fn text_keeps_the_parity_of_trailing_backslashes() {
    let text = TextParser::new(TextOptions::default()).unwrap();
    check(&text, b"1\ta\\\nb\\\\\\\nc\\\\\n", b"2\tx\n");
    assert_eq!(text.carry(b"ab\\\\\\"), Some(b"\\".to_vec()));
    assert_eq!(text.carry(b"ab\\\\"), Some(Vec::new()));
}

#[test]
fn jsonl_records_end_at_every_newline() {
    let jsonl = JsonlParser::new(vec!["a".into()]).unwrap();
    check(&jsonl, b"{\"a\": \"long value\"}\n", b"{\"a\": 1}\n");
}
