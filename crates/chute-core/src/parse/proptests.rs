//! Property tests and fuzz targets for the parsers and boundary finders.
//!
//! The promise that makes parallel parsing safe is that where a reader cuts
//! its buffer never changes what comes out, so the first group of tests feeds
//! random inputs through [`parse_chunked`] with random read sizes and compares
//! every record, position, error and end marker with a single-chunk parse.
//! The second group writes random values with small CSV and text writers (the
//! quoting rules of PostgreSQL's `COPY … TO`) and reads them back, and checks
//! JSON Lines against `serde_json`. The `fuzz_*` tests throw arbitrary bytes
//! at every parser and boundary finder: nothing may panic and every position
//! must lie inside the input. They are the project's fuzz targets, bounded
//! to run in seconds; raise `PROPTEST_CASES` to fuzz longer.

use proptest::prelude::*;

use super::tests_support::{Event, parse_all, parse_chunk_events, parse_chunked};
use super::{
    Boundary, ChunkEnd, CsvOptions, CsvParser, Format, JsonlParser, RecordParser, TextOptions, TextParser, TsbsParser, parse_tsbs_header,
};

fn csv_parsers() -> Vec<CsvParser> {
    let with = |opts: CsvOptions| CsvParser::new(opts).unwrap();
    vec![
        with(CsvOptions::default()),
        with(CsvOptions { escape: b'\\', null: b"N".to_vec(), header: true, ..CsvOptions::default() }),
        with(CsvOptions { delimiter: b';', expected_fields: Some(2), ..CsvOptions::default() }),
    ]
}

fn text_parsers() -> Vec<TextParser> {
    let with = |opts: TextOptions| TextParser::new(opts).unwrap();
    vec![with(TextOptions::default()), with(TextOptions { delimiter: b',', null: Vec::new(), header: true, expected_fields: Some(2) })]
}

/// Unknown keys ignored: the tests check values and grammar with keys of any name.
fn jsonl_parser() -> JsonlParser {
    JsonlParser::new(vec!["a".into(), "b".into()]).unwrap().unknown_keys(super::jsonl::UnknownKeys { ignore: true, ..Default::default() })
}

const TSBS_HEADER: &[u8] = b"tags,name string,fleet string\nreadings,lat,lon\ndiag,fuel\n\n";

fn tsbs_parser() -> TsbsParser {
    TsbsParser::new(parse_tsbs_header(TSBS_HEADER).unwrap().unwrap().0)
}

/// Bytes drawn from `alphabet`: few symbols, so quotes, escapes, markers and
/// line ends meet each other often.
fn bytes_from(alphabet: &'static [u8], max: usize) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(prop::sample::select(alphabet), 0..max)
}

/// Read sizes for the simulated reader.
fn reads() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1usize..24, 1..6)
}

/// Lines of a tsbs body, some of them wrong.
fn tsbs_body() -> impl Strategy<Value = Vec<u8>> {
    let line = prop::sample::select(vec![
        &b"tags,name=a,fleet=b"[..],
        b"tags,fleet=,name=c,port=1",
        b"tags,name",
        b"tags,",
        b"tags",
        b"readings,1,2.5,",
        b"readings,-3,,",
        b"diag,7,1",
        b"diag,x,1",
        b"cpu,1,1",
        b"",
        b"\r",
    ]);
    let ending = prop::sample::select(vec![&b"\n"[..], b"\r\n", b"\n\n"]);
    prop::collection::vec((line, ending), 0..12).prop_map(|lines| lines.into_iter().flat_map(|(l, e)| [l, e].concat()).collect())
}

/// Checks that cutting `input` anywhere the boundary finder allows gives the
/// same events as parsing it in one piece.
fn check_chunking(p: &dyn Format, input: &[u8], first_line: u64, base_offset: u64, reads: &[usize]) -> Result<(), TestCaseError> {
    let mut whole = Vec::new();
    let whole_end = parse_chunk_events(p, input, first_line, base_offset, &mut whole);
    let (chunked, chunked_end) = parse_chunked(p, input, first_line, base_offset, reads);
    prop_assert_eq!(&whole, &chunked, "input {:?}", String::from_utf8_lossy(input));
    prop_assert_eq!(whole_end, chunked_end);
    Ok(())
}

/// Parses arbitrary bytes and checks that every position lies inside the
/// chunk, in order, and that the boundary finder answers sensibly.
fn check_sane(p: &dyn Format, input: &[u8]) -> Result<(), TestCaseError> {
    let (base, first_line) = (1000u64, 7u64);
    let mut events = Vec::new();
    let end = parse_chunk_events(p, input, first_line, base, &mut events);
    let mut next_offset = base;
    let mut last_line = first_line;
    for e in &events {
        let pos = match e {
            Event::Record(_, pos) => *pos,
            Event::Error(e) => e.pos,
        };
        prop_assert!(pos.offset >= next_offset && pos.len > 0, "{:?} after {}", pos, next_offset);
        prop_assert!(pos.offset + u64::from(pos.len) <= base + input.len() as u64);
        prop_assert!(pos.line >= last_line);
        next_offset = pos.offset + u64::from(pos.len);
        last_line = pos.line;
    }
    if let ChunkEnd::EndOfData { line, offset } = end {
        prop_assert!(offset >= next_offset && offset < base + input.len() as u64 && line >= last_line);
    }
    for eof in [false, true] {
        if let Some(cut) = p.last_record_end(input, eof) {
            prop_assert!(cut > 0 && cut <= input.len());
        } else {
            prop_assert!(!eof || input.is_empty());
        }
    }
    if let Some(n) = p.end_of_data(input) {
        prop_assert!(n <= input.len());
    }
    Ok(())
}

/// Writes one CSV row the way `COPY … TO (FORMAT csv)` does.
fn write_csv_row(opts: &CsvOptions, row: &[Option<String>], out: &mut Vec<u8>) {
    for (i, value) in row.iter().enumerate() {
        if i > 0 {
            out.push(opts.delimiter);
        }
        let Some(v) = value else {
            out.extend_from_slice(&opts.null);
            continue;
        };
        let v = v.as_bytes();
        let quote = v == opts.null.as_slice()
            || v == b"\\."
            || v.iter().any(|&b| b == opts.delimiter || b == opts.quote || b == b'\n' || b == b'\r');
        if !quote {
            out.extend_from_slice(v);
            continue;
        }
        out.push(opts.quote);
        for &b in v {
            if b == opts.quote || b == opts.escape {
                out.push(opts.escape);
            }
            out.push(b);
        }
        out.push(opts.quote);
    }
    out.push(b'\n');
}

/// Writes one text-format row the way `COPY … TO` does.
fn write_text_row(row: &[Option<String>], out: &mut Vec<u8>) {
    for (i, value) in row.iter().enumerate() {
        if i > 0 {
            out.push(b'\t');
        }
        let Some(v) = value else {
            out.extend_from_slice(b"\\N");
            continue;
        };
        for &b in v.as_bytes() {
            match b {
                b'\\' => out.extend_from_slice(b"\\\\"),
                b'\t' => out.extend_from_slice(b"\\t"),
                b'\n' => out.extend_from_slice(b"\\n"),
                b'\r' => out.extend_from_slice(b"\\r"),
                0x08 => out.extend_from_slice(b"\\b"),
                _ => out.push(b),
            }
        }
    }
    out.push(b'\n');
}

fn values(alphabet: &'static [u8]) -> impl Strategy<Value = Option<String>> {
    prop::option::of(bytes_from(alphabet, 6).prop_map(|v| String::from_utf8(v).unwrap()))
}

fn table(alphabet: &'static [u8]) -> impl Strategy<Value = Vec<Vec<Option<String>>>> {
    (1usize..5).prop_flat_map(move |n| prop::collection::vec(prop::collection::vec(values(alphabet), n), 0..8))
}

fn records_of(events: Vec<Event>) -> Vec<Vec<Option<String>>> {
    events.into_iter().map(|e| e.unwrap_record().0).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn csv_chunking_changes_nothing(input in bytes_from(b"a,;\"\"\n\n\r\\.N", 80), reads in reads()) {
        for p in csv_parsers() {
            check_chunking(&p, &input, 1, 0, &reads)?;
        }
    }

    #[test]
    fn text_chunking_changes_nothing(input in bytes_from(b"a\t,\\\\\n\n\r.N0x", 80), reads in reads()) {
        for p in text_parsers() {
            check_chunking(&p, &input, 1, 0, &reads)?;
        }
    }

    #[test]
    fn jsonl_chunking_changes_nothing(input in bytes_from(b"{}[]\"\":,ab1 \n\n\\", 80), reads in reads()) {
        check_chunking(&jsonl_parser(), &input, 1, 0, &reads)?;
    }

    #[test]
    fn tsbs_chunking_changes_nothing(body in tsbs_body(), reads in reads()) {
        check_chunking(&tsbs_parser(), &body, 5, TSBS_HEADER.len() as u64, &reads)?;
    }

    #[test]
    fn csv_values_round_trip(
        rows in table(b"a,;|\t\"\\\n\r. N"),
        delimiter in prop::sample::select(vec![b',', b';', b'\t', b'|']),
        escape in prop::sample::select(vec![b'"', b'\\']),
        null in prop::sample::select(vec![&b""[..], b"N", b"\\N"]),
        reads in reads(),
    ) {
        let width = rows.first().map(Vec::len);
        let opts = CsvOptions { delimiter, escape, null: null.to_vec(), expected_fields: width, ..CsvOptions::default() };
        let mut input = Vec::new();
        for row in &rows {
            write_csv_row(&opts, row, &mut input);
        }
        let p = CsvParser::new(opts).unwrap();
        let (events, end) = parse_all(&p, &input);
        prop_assert_eq!(end, ChunkEnd::Complete);
        prop_assert_eq!(records_of(events), rows.clone());
        let (events, _) = parse_chunked(&p, &input, 1, 0, &reads);
        prop_assert_eq!(records_of(events), rows);
    }

    #[test]
    fn text_values_round_trip(rows in table(b"a\t\\\n\r\x08.N0x"), reads in reads()) {
        let mut input = Vec::new();
        for row in &rows {
            write_text_row(row, &mut input);
        }
        let p = TextParser::new(TextOptions { expected_fields: rows.first().map(Vec::len), ..TextOptions::default() }).unwrap();
        let (events, end) = parse_all(&p, &input);
        prop_assert_eq!(end, ChunkEnd::Complete);
        prop_assert_eq!(records_of(events), rows.clone());
        let (events, _) = parse_chunked(&p, &input, 1, 0, &reads);
        prop_assert_eq!(records_of(events), rows);
    }

    #[test]
    fn jsonl_values_match_serde_json(
        a in prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(serde_json::Value::from),
            "[a-z\"\\\\\u{0}-\u{1f}é😀]{0,6}".prop_map(serde_json::Value::from),
            prop::collection::vec(any::<u8>(), 0..3).prop_map(serde_json::Value::from),
        ],
        b_missing in any::<bool>(),
        extra in "[a-c]{1,2}",
    ) {
        let mut object = serde_json::Map::new();
        object.insert(extra.clone(), serde_json::json!({"nested": [1, "x"]}));
        object.insert("a".into(), a.clone());
        if !b_missing {
            object.insert("b".into(), serde_json::Value::from("bee"));
        }
        let line = serde_json::to_string(&object).unwrap();
        let (events, _) = parse_all(&jsonl_parser(), line.as_bytes());
        let (fields, _) = events.into_iter().next().unwrap().unwrap_record();
        // What the column should hold: a string's text, NULL, or the JSON text.
        let expected = |key: &str| match object.get(key) {
            None | Some(serde_json::Value::Null) => None,
            Some(serde_json::Value::String(s)) => Some(s.clone()),
            Some(other) => Some(other.to_string()),
        };
        prop_assert_eq!(fields, vec![expected("a"), expected("b")], "line {}", line);
    }

    #[test]
    fn jsonl_accepts_what_serde_json_accepts(line in bytes_from(b"{}[]\"\":,ab1-0.e \\ntru", 40)) {
        let ours = parse_all(&jsonl_parser(), &line).0;
        let theirs = serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&line);
        let blank = line.iter().all(|&b| b == b' ');
        if !blank && !matches!(&theirs, Err(e) if e.to_string().contains("out of range")) {
            prop_assert_eq!(matches!(ours.first(), Some(Event::Record(..))), theirs.is_ok(), "line {:?}", String::from_utf8_lossy(&line));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn fuzz_csv(input in prop::collection::vec(any::<u8>(), 0..400), reads in reads()) {
        for p in csv_parsers() {
            check_sane(&p, &input)?;
            check_chunking(&p, &input, 1, 0, &reads)?;
        }
    }

    #[test]
    fn fuzz_text(input in prop::collection::vec(any::<u8>(), 0..400), reads in reads()) {
        for p in text_parsers() {
            check_sane(&p, &input)?;
            check_chunking(&p, &input, 1, 0, &reads)?;
        }
    }

    #[test]
    fn fuzz_jsonl(input in prop::collection::vec(any::<u8>(), 0..400), reads in reads()) {
        check_sane(&jsonl_parser(), &input)?;
        check_chunking(&jsonl_parser(), &input, 1, 0, &reads)?;
    }

    #[test]
    fn fuzz_tsbs(input in prop::collection::vec(any::<u8>(), 0..400), reads in reads()) {
        let p = tsbs_parser();
        check_sane(&p, &input)?;
        check_chunking(&p, &input, 1, 0, &reads)?;
        p.parse_records(&input, 1, 0, &mut |r, _| assert_eq!(r.tags.len(), 2), &mut |_| {});
        if let Ok(Some((_, consumed, lines))) = parse_tsbs_header(&input) {
            prop_assert!(consumed <= input.len() && lines >= 2);
        }
    }

    #[test]
    fn fuzz_tsbs_header(input in prop::collection::vec(prop::sample::select(&b"tags,ab =\n\r"[..]), 0..60)) {
        if let Ok(Some((header, consumed, lines))) = parse_tsbs_header(&input) {
            prop_assert!(consumed <= input.len());
            prop_assert_eq!(lines as usize, header.measurements.len() + 2);
        }
    }
}

#[test]
fn every_parser_is_a_format() {
    let formats: Vec<Box<dyn Format>> = vec![
        Box::new(CsvParser::new(CsvOptions::default()).unwrap()),
        Box::new(TextParser::new(TextOptions::default()).unwrap()),
        Box::new(jsonl_parser()),
        Box::new(tsbs_parser()),
    ];
    for f in &formats {
        let as_parser: &dyn RecordParser = f.as_ref();
        let as_boundary: &dyn Boundary = f.as_ref();
        let _ = as_parser.parse_chunk(b"", 1, 0, &mut |_, _| {}, &mut |_| {});
        assert_eq!(as_boundary.last_record_end(b"", true), None);
    }
}
