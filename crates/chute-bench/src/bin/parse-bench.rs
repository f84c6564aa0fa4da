//! The CSV and text parsers alone, on one core: how many records a second
//! `parse_chunk` turns into fields, with no server, no encoding and no
//! routing. The loader benchmarks (`scripts/bench-loader`) measure the whole
//! path; this one tells whether a change to a parser's record loop cost
//! speed, which the loader's figures are too noisy to show.
//!
//! ```text
//! cargo run --release -p chute-bench --bin parse-bench -- [--rows N] [--runs K] [--chunk-kib C] [--conditions FILE] [--only CASE]
//! ```
//!
//! With `--conditions FILE` (a file of `chute gen conditions`), one more
//! case parses its first `--rows` rows as CSV and encodes each into a binary
//! COPY row (`RowEncoder::encode_memo`, columns timestamptz, int4 and five
//! float8) as the loader's parse threads do: the client's CPU per row
//! without the server beside it, which `chute load`'s own figures on this
//! 2-core machine cannot show within a few percent.
//!
//! Each case is the `conditions` shape (time, device, five numbers; about
//! 75 bytes a row) in one format: plain rows, and rows with a quoted (CSV)
//! or escaped (text) field in each, which take the parsers' slow split. The
//! input is cut into chunks as the engine's reader cuts it (at the last
//! record end of each `--chunk-kib` piece) and parsed through `dyn Format`,
//! as the engine holds a parser. Each case runs `--runs` times, interleaved
//! with the others so a busy moment of the machine hurts every case alike;
//! the report gives the median and the best run in million rows a second.

use std::hint::black_box;
use std::time::Instant;

use chute_core::parse::{ChunkEnd, CsvOptions, CsvParser, Format, TextOptions, TextParser};
use chute_core::rowenc::{Memo, RowEncoder, RowOutcome, TargetColumn};
use chute_core::value::{EncodeContext, PgType};

struct Case {
    name: &'static str,
    parser: Box<dyn Format>,
    input: Vec<u8>,
    /// Where each chunk ends, as a reader cuts the input.
    cuts: Vec<usize>,
    /// Each record is also encoded into a binary row with this encoder.
    encoder: Option<RowEncoder>,
}

/// Row `i` in `delimiter`-separated form; `special` is put in the device
/// name (a quoted or escaped piece) when given.
fn row(i: u64, delimiter: u8, special: Option<&str>) -> String {
    let d = delimiter as char;
    let (sec, min, hour) = (i % 60, (i / 60) % 60, (i / 3600) % 24);
    let device = match special {
        Some(s) => format!("dev{s}{}", i % 1000),
        None => format!("dev_{}", i % 1000),
    };
    format!(
        "2021-06-01 {hour:02}:{min:02}:{sec:02}+00{d}{device}{d}{}.{}{d}{}{d}{}.25{d}-{}.5{d}{}\n",
        i % 97,
        i % 10,
        i % 1013,
        i % 89,
        i % 7,
        i * 3
    )
}

fn input(rows: u64, delimiter: u8, special: Option<&str>) -> Vec<u8> {
    let mut out = String::with_capacity(rows as usize * 80);
    for i in 0..rows {
        out.push_str(&row(i, delimiter, special));
    }
    out.into_bytes()
}

/// The chunk ends a reader would cut: the last record end of every piece of
/// `chunk` bytes, as `Boundary::last_record_end` finds it.
fn cuts(parser: &dyn Format, input: &[u8], chunk: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut start = 0;
    while start < input.len() {
        let end = (start + chunk).min(input.len());
        let eof = end == input.len();
        let n = parser.last_record_end(&input[start..end], eof).expect("a chunk holds at least one record");
        start += n;
        out.push(start);
    }
    out
}

/// Parses every chunk once; returns (records, seconds).
fn run(case: &Case) -> (u64, f64) {
    let mut records = 0u64;
    let mut bytes = 0usize;
    let mut out: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut memo = Memo::default();
    let began = Instant::now();
    let (mut start, mut line) = (0usize, 1u64);
    for &end in &case.cuts {
        let chunk = &case.input[start..end];
        let done = case.parser.parse_chunk(
            chunk,
            line,
            start as u64,
            &mut |fields, _| {
                records += 1;
                match &case.encoder {
                    Some(encoder) => {
                        if out.len() > (1 << 20) - 1024 {
                            bytes += out.len();
                            out.clear();
                        }
                        assert_eq!(encoder.encode_memo(fields, &mut out, &mut memo), RowOutcome::Binary, "{}", case.name);
                    }
                    None => bytes += fields.get(1).map_or(0, <[u8]>::len),
                }
            },
            &mut |e| panic!("{}: {e}", case.name),
        );
        assert_eq!(done, ChunkEnd::Complete);
        line += chute_core::parse::count_lines(chunk);
        start = end;
    }
    let took = began.elapsed().as_secs_f64();
    black_box(bytes);
    (records, took)
}

/// Makes a case's parser and input.
type MakeCase<'a> = dyn Fn() -> (Box<dyn Format>, Vec<u8>) + 'a;

/// The encoder of the `conditions` table: timestamptz, int4, five float8.
fn conditions_encoder() -> RowEncoder {
    let column = |name: &str, type_oid: u32, ty: PgType| TargetColumn { name: name.into(), type_oid, ty: Some(ty), typmod: -1 };
    let mut columns = vec![column("time", 1184, PgType::Timestamptz), column("dev_id", 23, PgType::Int4)];
    columns.extend((1..=5).map(|i| column(&format!("data{i}"), 701, PgType::Float8)));
    RowEncoder::new(columns, EncodeContext::default())
}

/// The first `rows` lines of `path`.
fn first_rows(path: &str, rows: u64) -> Vec<u8> {
    let all = std::fs::read(path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let end = all
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i)
        .nth(rows as usize - 1)
        .unwrap_or_else(|| panic!("{path} has fewer than {rows} rows"));
    all[..=end].to_vec()
}

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        Some(i) => args.get(i + 1).and_then(|v| v.parse().ok()).unwrap_or_else(|| panic!("{name} takes a number")),
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let rows = arg(&args, "--rows", 2_000_000);
    let runs = arg(&args, "--runs", 7).max(1) as usize;
    let chunk = arg(&args, "--chunk-kib", 1024) as usize * 1024;
    let csv = |opts: CsvOptions| -> Box<dyn Format> { Box::new(CsvParser::new(opts).expect("valid CSV options")) };
    let text = |opts: TextOptions| -> Box<dyn Format> { Box::new(TextParser::new(opts).expect("valid text options")) };
    let only = args.iter().position(|a| a == "--only").map(|i| args.get(i + 1).expect("--only takes a case name").as_str());
    let wanted = |name: &str| only.is_none_or(|o| o == name);
    let csv_opts = || CsvOptions { expected_fields: Some(7), ..CsvOptions::default() };
    let text_opts = || TextOptions { expected_fields: Some(7), ..TextOptions::default() };
    let case = |name, parser: Box<dyn Format>, input: Vec<u8>, encoder| {
        let cuts = cuts(parser.as_ref(), &input, chunk);
        Case { name, parser, input, cuts, encoder }
    };
    let mut cases: Vec<Case> = Vec::new();
    // Each case's input is made only when the case runs (`--only`).
    let made: [(&'static str, &MakeCase<'_>); 4] = [
        ("csv plain", &|| (csv(csv_opts()), input(rows, b',', None))),
        ("csv quoted", &|| (csv(csv_opts()), input(rows, b',', Some("\"_,\"")))),
        ("text plain", &|| (text(text_opts()), input(rows, b'\t', None))),
        ("text escaped", &|| (text(text_opts()), input(rows, b'\t', Some("\\t")))),
    ];
    for (name, make) in made {
        if wanted(name) {
            let (parser, input) = make();
            cases.push(case(name, parser, input, None));
        }
    }
    let conditions = args.iter().position(|a| a == "--conditions").map(|i| args.get(i + 1).expect("--conditions takes a file"));
    if let Some(path) = conditions.filter(|_| wanted("csv+encode")) {
        cases.push(case("csv+encode", csv(csv_opts()), first_rows(path, rows), Some(conditions_encoder())));
    }
    let mut rates: Vec<Vec<f64>> = vec![Vec::new(); cases.len()];
    for _ in 0..runs {
        for (case, rates) in cases.iter().zip(&mut rates) {
            let (records, secs) = run(case);
            assert_eq!(records, rows, "{}: every row is a record", case.name);
            rates.push(records as f64 / secs / 1e6);
        }
    }
    println!("{rows} rows, {runs} runs, chunks of {} KiB, one core (M rows/s)", chunk / 1024);
    println!("{:<14} {:>8} {:>8} {:>10} {:>10}", "case", "median", "best", "bytes/row", "ns/row");
    for (case, rates) in cases.iter().zip(&mut rates) {
        rates.sort_by(f64::total_cmp);
        let median = rates[rates.len() / 2];
        let best = rates[rates.len() - 1];
        println!("{:<14} {median:>8.2} {best:>8.2} {:>10.1} {:>10.1}", case.name, case.input.len() as f64 / rows as f64, 1e3 / median);
    }
}
