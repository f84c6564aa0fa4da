//! The client-side value encoder against a real server.
//!
//! chute's iron rule is that a file loading with `psql \copy` loads with
//! chute into the same rows. For random texts of every type (many spellings:
//! signs, exponents, whitespace, precisions, timestamps across DST changes,
//! offsets, junk) these tests compare `encode_text` with what the server makes
//! of the same text (`<type>_send(text::<type>)` in the same TimeZone):
//! - `Ok` bytes must equal the server's, and binary COPY of them must store
//!   the same values as the text path (this covers the receive functions);
//! - `Invalid` only where the server rejects the text too;
//! - `NeedsServer` is always allowed but never for the common forms.

use bytes::Bytes;
use chute_core::encode::CopyWriter;
use chute_core::generate::SplitMix64;
use chute_core::value::{EncodeContext, EpochUnit, PgType, ValueError, encode_text};
use futures_util::SinkExt;
use jiff::Timestamp;
use jiff::tz::TimeZone;
use tokio_postgres::Client;

/// One generated input.
#[derive(Debug, Clone)]
struct Case {
    text: Vec<u8>,
    /// A common form: the fast path must decide it (no NeedsServer).
    common: bool,
}

fn common(text: impl Into<Vec<u8>>) -> Case {
    Case { text: text.into(), common: true }
}

fn odd(text: impl Into<Vec<u8>>) -> Case {
    Case { text: text.into(), common: false }
}

/// A tiny random toolkit over the crate's own PRNG (reproducible by seed).
struct Rng(SplitMix64);

impl Rng {
    /// A fixed seed per test; `CHUTE_TEST_SEED=n` explores other inputs.
    fn new(base: u64) -> Self {
        let extra: u64 = std::env::var("CHUTE_TEST_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
        Rng(SplitMix64::new(base ^ extra))
    }

    fn below(&mut self, n: u64) -> u64 {
        self.0.next_u64() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }

    fn chance(&mut self, p: f64) -> bool {
        self.0.next_f64() < p
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    fn one(&mut self, xs: &[&'static str]) -> &'static str {
        xs[self.below(xs.len() as u64) as usize]
    }

    /// `lo..=hi` random decimal digits.
    fn digits(&mut self, lo: usize, hi: usize) -> String {
        let n = lo + self.below((hi - lo + 1) as u64) as usize;
        (0..n).map(|_| char::from(b'0' + self.below(10) as u8)).collect()
    }

    /// Whitespace PostgreSQL skips around numbers, booleans and dates.
    fn ws(&mut self) -> &'static str {
        self.one(&["", "", "", "", " ", "  ", "\t", "\n", " \r\n", "\x0b", "\x0c"])
    }

    fn case(&mut self, s: &str) -> String {
        s.chars().map(|c| if self.chance(0.5) { c.to_ascii_uppercase() } else { c.to_ascii_lowercase() }).collect()
    }
}

/// What the server made of one text.
#[derive(Debug)]
enum Verdict {
    Value(Vec<u8>),
    Error(String),
}

fn send_function(ty: PgType) -> &'static str {
    match ty {
        PgType::Bool => "boolsend",
        PgType::Int2 => "int2send",
        PgType::Int4 => "int4send",
        PgType::Int8 => "int8send",
        PgType::Float4 => "float4send",
        PgType::Float8 => "float8send",
        PgType::Numeric => "numeric_send",
        PgType::Text => "textsend",
        PgType::Varchar => "varcharsend",
        PgType::Bpchar => "bpcharsend",
        PgType::Name => "namesend",
        PgType::Date => "date_send",
        PgType::Timestamp => "timestamp_send",
        PgType::Timestamptz => "timestamptz_send",
        PgType::Uuid => "uuid_send",
        PgType::Json => "json_send",
        PgType::Jsonb => "jsonb_send",
        PgType::Bytea => "byteasend",
    }
}

/// Installs `try_send`, which runs the text path for many inputs at once and
/// catches each error (inputs travel as bytea so that invalid UTF-8 reaches
/// the server's own encoding check).
async fn install_try_send(client: &Client) {
    client
        .batch_execute(
            r#"
            CREATE FUNCTION try_send(typ text, sendfn text, vals bytea[])
            RETURNS TABLE(ord int, res bytea, err text) LANGUAGE plpgsql AS $$
            BEGIN
              FOR i IN 1 .. coalesce(array_length(vals, 1), 0) LOOP
                ord := i; res := NULL; err := NULL;
                BEGIN
                  EXECUTE format('SELECT %s(convert_from($1, ''UTF8'')::%s)', sendfn, typ) INTO res USING vals[i];
                EXCEPTION WHEN others THEN err := SQLERRM;
                END;
                RETURN NEXT;
              END LOOP;
            END $$;
            "#,
        )
        .await
        .unwrap();
}

async fn server_verdicts(client: &Client, ty: PgType, cases: &[Case]) -> Vec<Verdict> {
    let texts: Vec<&[u8]> = cases.iter().map(|c| c.text.as_slice()).collect();
    let rows = client
        .query("SELECT ord, res, err FROM try_send($1, $2, $3) ORDER BY ord", &[&ty.name(), &send_function(ty), &texts])
        .await
        .unwrap();
    assert_eq!(rows.len(), cases.len());
    rows.iter()
        .map(|r| match r.get::<_, Option<String>>(2) {
            Some(e) => Verdict::Error(e),
            None => Verdict::Value(r.get::<_, Option<Vec<u8>>>(1).unwrap_or_default()),
        })
        .collect()
}

/// Compares the encoder with the server for every case, then loads the
/// accepted ones by binary COPY and by the text path and compares the rows.
async fn check(client: &Client, ty: PgType, ctx: &EncodeContext, cases: &[Case]) {
    let verdicts = server_verdicts(client, ty, cases).await;
    let mut failures = Vec::new();
    let mut accepted = Vec::new();
    let (mut ok, mut invalid, mut deferred) = (0, 0, 0);
    for (i, (case, verdict)) in cases.iter().zip(&verdicts).enumerate() {
        let shown = String::from_utf8_lossy(&case.text);
        // A buffer that already holds a byte: an error must leave it as it was.
        let mut buf = vec![7u8];
        let result = encode_text(ty, &case.text, ctx, &mut buf);
        if result.is_err() {
            assert_eq!(buf, [7], "{ty:?} {shown:?}: output changed on error");
        }
        let out = buf.split_off(1);
        match (result, verdict) {
            (Ok(()), Verdict::Value(want)) => {
                ok += 1;
                // jsonb_send prints the server's normalized JSON: compared through COPY only.
                if ty != PgType::Jsonb && &out != want {
                    failures.push(format!("{shown:?}: encoder {out:02x?}, server {want:02x?}"));
                }
                accepted.push((i as i32, out));
            }
            (Ok(()), Verdict::Error(e)) => failures.push(format!("{shown:?}: encoder accepted {out:02x?}, server rejected: {e}")),
            (Err(ValueError::Invalid(m)), Verdict::Value(_)) => {
                failures.push(format!("{shown:?}: encoder rejected ({m}), server accepted"))
            }
            (Err(ValueError::Invalid(_)), Verdict::Error(_)) => invalid += 1,
            (Err(ValueError::NeedsServer), _) if case.common => failures.push(format!("{shown:?}: common form left to the server")),
            (Err(ValueError::NeedsServer), _) => deferred += 1,
        }
    }
    assert!(
        failures.is_empty(),
        "{ty:?} ({} of {} cases):\n{}",
        failures.len(),
        cases.len(),
        failures[..failures.len().min(40)].join("\n")
    );
    assert!(ok > 0, "{ty:?}: nothing accepted");
    eprintln!("{ty:?}: {ok} encoded, {invalid} invalid, {deferred} left to the server");
    copy_matches_text_path(client, ty, cases, &accepted).await;
}

/// Binary COPY of the encoded values and the text path store the same values.
async fn copy_matches_text_path(client: &Client, ty: PgType, cases: &[Case], accepted: &[(i32, Vec<u8>)]) {
    let name = ty.name();
    client
        .batch_execute(&format!(
            "DROP TABLE IF EXISTS via_copy, via_text; CREATE TABLE via_copy (i int, v {name}); CREATE TABLE via_text (i int, v {name});"
        ))
        .await
        .unwrap();
    let mut buf = Vec::new();
    let mut w = CopyWriter::start(&mut buf);
    for (i, bytes) in accepted {
        w.row(2);
        w.int4(*i);
        w.bytes(bytes);
    }
    w.finish();
    let sink = client.copy_in("COPY via_copy FROM STDIN (FORMAT binary)").await.unwrap();
    let mut sink = Box::pin(sink);
    sink.send(Bytes::from(buf)).await.unwrap();
    sink.as_mut().finish().await.unwrap();
    let ids: Vec<i32> = accepted.iter().map(|(i, _)| *i).collect();
    let texts: Vec<&[u8]> = accepted.iter().map(|(i, _)| cases[*i as usize].text.as_slice()).collect();
    client
        .execute(
            &format!("INSERT INTO via_text SELECT i, convert_from(t, 'UTF8')::{name} FROM unnest($1::int[], $2::bytea[]) AS u(i, t)"),
            &[&ids, &texts],
        )
        .await
        .unwrap();
    let send = send_function(ty);
    let diff: i64 = client
        .query_one(
            &format!(
                "SELECT count(*) FROM via_copy c FULL JOIN via_text t USING (i) WHERE {send}(c.v) IS DISTINCT FROM {send}(t.v) OR c.i IS NULL OR t.i IS NULL"
            ),
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(diff, 0, "{ty:?}: binary COPY stored different values than the text path");
}

fn plain_ctx() -> EncodeContext {
    EncodeContext::default()
}

fn integer_cases(rng: &mut Rng, ty: PgType) -> Vec<Case> {
    let (min, max): (i128, i128) = match ty {
        PgType::Int2 => (i16::MIN.into(), i16::MAX.into()),
        PgType::Int4 => (i32::MIN.into(), i32::MAX.into()),
        _ => (i64::MIN.into(), i64::MAX.into()),
    };
    let mut cases = Vec::new();
    for _ in 0..800 {
        let v: i128 = match rng.below(5) {
            0 => rng.range(-1000, 1000).into(),
            1 => *rng.pick(&[min, max, min - 1, max + 1, 0, -1, 1]),
            2 => i128::from(rng.0.next_u64() as i64) % (max + 1),
            3 => rng.digits(1, 25).parse().unwrap(),
            _ => i128::from(rng.range(-100_000, 100_000)),
        };
        let sign = if v < 0 {
            "-"
        } else if rng.chance(0.2) {
            "+"
        } else {
            ""
        };
        let zeros = if rng.chance(0.1) { "00" } else { "" };
        let text = format!("{}{sign}{zeros}{}{}", rng.ws(), v.abs(), rng.ws());
        cases.push(common(text));
    }
    for junk in ["12x", " 1 2", "1_000", "0x1F", "", " ", "-", "+", "1.0", "1e3", "--1", "+-1", "1-", "99999999999999999999x"] {
        cases.push(common(junk));
    }
    cases.push(odd("\u{a0}12"));
    cases.push(odd("12\u{3000}"));
    cases.push(common("1\u{a0}2"));
    cases
}

fn float_text(rng: &mut Rng, single: bool) -> String {
    let core = match rng.below(6) {
        0 | 1 => {
            let (e, d) = if single {
                let v = f32::from_bits(rng.0.next_u64() as u32);
                if !v.is_finite() {
                    return "1.5".into();
                }
                (format!("{v:e}"), format!("{v}"))
            } else {
                let v = f64::from_bits(rng.0.next_u64());
                if !v.is_finite() {
                    return "2.5".into();
                }
                (format!("{v:e}"), format!("{v}"))
            };
            if rng.chance(0.5) || d.len() > 80 { e } else { d }
        }
        2 => {
            let v = f64::from_bits(rng.0.next_u64());
            if !v.is_finite() {
                return "0.1".into();
            }
            format!("{:.*e}", rng.below(25) as usize, v)
        }
        3 => {
            // Random decimals near the edges of the exponent range.
            let int = rng.digits(0, 19);
            let frac = rng.digits(0, 19);
            let mantissa = if int.is_empty() && frac.is_empty() { "7".to_string() } else { format!("{int}.{frac}") };
            let exp = if single { rng.range(-50, 42) } else { rng.range(-345, 312) };
            format!("{mantissa}e{exp}")
        }
        4 => format!("{}.{}", rng.digits(1, 8), rng.digits(0, 7)),
        _ => rng
            .pick(&[
                "1e-320",
                "4.9e-324",
                "2.4703282292062328e-324",
                "2.4703282292062327e-324",
                "1.7976931348623157e308",
                "1.7976931348623158e308",
                "1.7976931348623159e308",
                "1e-45",
                "7e-46",
                "3.4028235e38",
                "3.40282356e38",
                "3.4028236e38",
                "1.4e-45",
                "0.0",
                "0e999999",
                "1e999999999999",
                "1e-999999999999",
            ])
            .to_string(),
    };
    let sign = *rng.pick(&["", "", "-", "+"]);
    let core = if rng.chance(0.2) { core.replace('e', "E") } else { core };
    format!("{}{sign}{core}{}", rng.ws(), rng.ws())
}

fn float_cases(rng: &mut Rng, single: bool) -> Vec<Case> {
    let mut cases: Vec<Case> = (0..2500).map(|_| common(float_text(rng, single))).collect();
    for special in ["inf", "infinity", "nan"] {
        for _ in 0..4 {
            let sign = *rng.pick(&["", "+", "-"]);
            let text = format!("{}{sign}{}{}", rng.ws(), rng.case(special), rng.ws());
            cases.push(common(text));
        }
    }
    for junk in
        ["1e", "1e+", ".e1", ".", "1_0", "infinit", "infx", "1 e5", "1e 5", "nanx", "--1", "1.2.3", "", "e5", "1.5f", "in", "1\u{a0}2"]
    {
        cases.push(common(junk));
    }
    for tricky in ["  .5e-3", "5.", "-0.0", "1e0", "00000.1", "1E+00", "0.0000000000000000000000000000000000000001e-280", "-.0e-0"] {
        cases.push(common(tricky));
    }
    cases.push(common(format!("{}.{}", "9".repeat(400), "1".repeat(400))));
    cases.push(common(format!("0.{}1e300", "0".repeat(700))));
    for odd_form in ["0x1p3", "-0x1.8p1", "nan(123)", "0x", "\u{a0}1"] {
        cases.push(odd(odd_form));
    }
    cases
}

fn numeric_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for _ in 0..2500 {
        let mut s = String::new();
        s.push_str(rng.ws());
        s.push_str(rng.one(&["", "", "-", "+"]));
        if rng.chance(0.15) {
            s.push_str(&"0".repeat(rng.below(6) as usize));
        }
        let int = rng.digits(0, 29);
        s.push_str(&int);
        if int.is_empty() || rng.chance(0.6) {
            s.push('.');
            let frac = rng.digits(0, 29);
            s.push_str(if int.is_empty() && frac.is_empty() { "5" } else { &frac });
            if rng.chance(0.2) {
                s.push_str(&"0".repeat(rng.below(5) as usize));
            }
        }
        if rng.chance(0.3) {
            s.push_str(rng.one(&["e", "E"]));
            s.push_str(rng.one(&["", "+", "-"]));
            s.push_str(&rng.range(0, 40).to_string());
        }
        s.push_str(rng.ws());
        cases.push(common(s));
    }
    for special in ["NaN", "Infinity", "+Infinity", "-Infinity", "inf", "+inf", "-inf"] {
        let text = format!("{}{}{}", rng.ws(), rng.case(special), rng.ws());
        cases.push(common(text));
    }
    for junk in
        [".", "", "-", "1e", "1e+", "1 e5", "1.2.3", "infinit", "+nan", "-nan", "nanx", "1e5x", "0x10", "1_0", "1e-", "e1", "1\u{a0}2"]
    {
        cases.push(common(junk));
    }
    for tricky in
        ["  .5  ", "-.5", "5.", "0000", "0.0e10", "1e-0", "1e+0", "1E-05", "-0.0e-3", "9e999", "1e-1000", "1e1000", "-00.00100e+2"]
    {
        cases.push(common(tricky));
    }
    cases.push(common("1234567890".repeat(50)));
    cases.push(common(format!("-{}.{}", "1234567890".repeat(50), "0987654321".repeat(50))));
    cases.push(common(format!("0.{}1", "0".repeat(998))));
    for odd_form in ["1e 5", "1e1001", "1e-2147483647", "0e9999999999", "\u{a0}1"] {
        cases.push(odd(odd_form));
    }
    cases
}

fn bool_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for _ in 0..300 {
        let word = *rng.pick(&["true", "false", "yes", "no", "on", "off", "1", "0"]);
        let n = rng.range(1, word.len() as i64) as usize;
        let text = format!("{}{}{}", rng.ws(), rng.case(&word[..n]), rng.ws());
        cases.push(common(text));
    }
    for junk in ["o", "10", "truex", "", "  ", "maybe", "-1", "2", "onn", "yess", "t rue"] {
        cases.push(common(junk));
    }
    cases
}

fn uuid_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for _ in 0..400 {
        let bytes: Vec<u8> = (0..16).map(|_| rng.below(256) as u8).collect();
        let standard = rng.chance(0.6);
        let mut s = String::new();
        for (n, b) in bytes.iter().enumerate() {
            let hex = format!("{b:02x}");
            s.push_str(&match rng.below(3) {
                0 => hex.to_uppercase(),
                _ => hex,
            });
            let hyphen = if standard { matches!(n, 3 | 5 | 7 | 9) } else { n % 2 == 1 && n < 15 && rng.chance(0.3) };
            if hyphen {
                s.push('-');
            }
        }
        if rng.chance(0.2) {
            s = format!("{{{s}}}");
        }
        cases.push(common(s.clone()));
        if rng.chance(0.15) {
            // Broken variants: a digit gone, whitespace, a stray hyphen or brace.
            let broken = match rng.below(5) {
                0 => s[1..].to_string(),
                1 => format!(" {s}"),
                2 => format!("{s}-"),
                3 => format!("{{{s}"),
                _ => s.replacen(|c: char| c.is_ascii_hexdigit(), "g", 1),
            };
            cases.push(common(broken));
        }
    }
    cases
}

fn bytea_cases(rng: &mut Rng) -> Vec<Case> {
    let mut cases = Vec::new();
    for _ in 0..400 {
        let n = rng.below(20) as usize;
        if rng.chance(0.5) {
            let mut s = String::from("\\x");
            for _ in 0..n {
                if rng.chance(0.2) {
                    s.push_str(rng.one(&[" ", "\n", "\t", "\r", "  "]));
                }
                let hex = format!("{:02x}", rng.below(256));
                s.push_str(&if rng.chance(0.3) { hex.to_uppercase() } else { hex });
            }
            cases.push(common(s));
        } else {
            let mut s = String::new();
            for _ in 0..n {
                match rng.below(6) {
                    0 => s.push_str("\\\\"),
                    1 => s.push_str(&format!("\\{:03o}", rng.below(256))),
                    2 => s.push('ä'),
                    _ => s.push(char::from(rng.range(0x20, 0x7e) as u8)),
                }
            }
            cases.push(common(s));
        }
    }
    for junk in ["\\xd e", "\\xdea", "\\xzz", "\\X41", "a\\400", "a\\", "a\\x41", "\\", "x\\0", "\\x\x0b", "\\18", " \\x41", "\\xä"] {
        cases.push(common(junk));
    }
    cases.push(common(&b"a\xffb"[..]));
    cases
}

fn text_cases(rng: &mut Rng, ty: PgType) -> Vec<Case> {
    let pieces = ["a", "Z", " ", "  ", "ä", "€", "😀", "\t", "x'y", "\"", "\\", ",", "ß"];
    let mut cases = Vec::new();
    for _ in 0..300 {
        let len = if ty == PgType::Name { rng.range(55, 70) } else { rng.range(0, 20) } as usize;
        let mut s = String::new();
        while s.len() < len {
            s.push_str(rng.one(&pieces));
        }
        cases.push(common(s));
    }
    cases.push(common("xä€😀".repeat(3000)));
    for bad in [&b"a\0b"[..], b"ab\xc3\x28", b"\xe2\x82", b"\xff", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80", b"ok\xf0\x9f\x98"] {
        cases.push(common(bad));
    }
    cases
}

fn json_cases(rng: &mut Rng) -> Vec<Case> {
    let docs = [
        r#"{"a": 1, "b": [true, null, "x"]}"#,
        r#" {"b":1, "a" : [1,2]} "#,
        "[]",
        "3.14e2",
        r#""grüße \u00e4""#,
        r#"{"a": {"a": 2}, "a": 3}"#,
        "null",
        "  true  ",
    ];
    let mut cases: Vec<Case> = (0..100).map(|_| common(*rng.pick(&docs))).collect();
    for bad in [&b"{\"a\": \"\xff\"}"[..], b"\"\0\""] {
        cases.push(common(bad));
    }
    cases
}

/// Every DST (and other offset) transition of `tz` between 1880 and 2100.
fn transitions(tz: &TimeZone) -> Vec<(i64, i32)> {
    let start = Timestamp::from_second(-2_840_140_800).unwrap();
    let end = Timestamp::from_second(4_102_444_800).unwrap();
    tz.following(start)
        .take_while(|t| t.timestamp() < end)
        .map(|t| {
            let at = t.timestamp().as_second();
            let before = tz.to_offset(Timestamp::from_second(at - 1).unwrap()).seconds();
            (at, before)
        })
        .collect()
}

/// Year, month, day and seconds into the day of a count of seconds since
/// 1970-01-01 00:00 (proleptic Gregorian calendar).
fn civil(local_secs: i64) -> (i64, i64, i64, i64) {
    let z = local_secs.div_euclid(86_400) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(month <= 2), month, day, local_secs.rem_euclid(86_400))
}

/// Timestamp texts in the forms the fast path must decide, plus broken and
/// unknown ones. `zone` supplies DST transitions to cluster around.
fn datetime_cases(rng: &mut Rng, zone: &TimeZone, n: usize) -> Vec<Case> {
    let changes = transitions(zone);
    let mut cases = Vec::new();
    for _ in 0..n {
        let local_secs = match rng.below(3) {
            0 => rng.range(-6_000_000_000, 7_300_000_000),
            1 => rng.range(-62_135_596_800, 253_402_300_799),
            _ if changes.is_empty() => rng.range(0, 2_000_000_000),
            _ => {
                let (at, before) = *rng.pick(&changes);
                let delta = if rng.chance(0.5) { rng.range(-120, 120) * 60 } else { rng.range(-7200, 7200) };
                at + i64::from(before) + delta
            }
        };
        let (y, mo, d, sod) = civil(local_secs);
        let (mut h, mut mi, mut s) = (sod / 3600, sod / 60 % 60, sod % 60);
        let pad = |v: i64, rng: &mut Rng| if rng.chance(0.1) { v.to_string() } else { format!("{v:02}") };
        let (mut mo_s, mut d_s) = (pad(mo, rng), pad(d, rng));
        let mut is_common = true;
        // Sometimes a field out of range, an end-of-day or a leap second.
        match rng.below(40) {
            0 => mo_s = rng.pick(&["13", "00", "0"]).to_string(),
            1 => d_s = rng.pick(&["32", "00", "31", "30", "29"]).to_string(),
            2 => h = *rng.pick(&[24, 25]),
            3 => mi = 60,
            4 => s = *rng.pick(&[60, 61]),
            5 => (h, mi, s) = (23, 59, 60),
            _ => {}
        }
        let mut text = format!("{}{y:04}-{mo_s}-{d_s}", rng.ws());
        if rng.chance(0.9) {
            text.push_str(rng.one(&["T", " ", " ", " ", "t", "  "]));
            text.push_str(&format!("{}:{}", pad(h, rng), pad(mi, rng)));
            if rng.chance(0.85) {
                text.push_str(&format!(":{}", pad(s, rng)));
                if rng.chance(0.5) {
                    let mut frac = rng.digits(1, 9);
                    let digits = frac.len();
                    if digits > 6 && rng.chance(0.5) {
                        frac.replace_range(digits - 1.., "5");
                    }
                    if rng.chance(0.05) {
                        frac = rng.pick(&["0000005", "0000015", "9999995", "9999999", "5000005"]).to_string();
                    }
                    text.push('.');
                    text.push_str(&frac);
                }
            }
            if rng.chance(0.45) {
                text.push_str(rng.one(&["", "", " "]));
                let sign = *rng.pick(&["+", "-"]);
                let oh = if rng.chance(0.05) { 16 } else { rng.range(0, 15) };
                let om = if rng.chance(0.05) { 60 } else { *rng.pick(&[0, 0, 30, 45, 17]) };
                let offset = match rng.below(6) {
                    0 => "Z".to_string(),
                    1 => format!("{sign}{oh:02}"),
                    2 => format!("{sign}{oh:02}{om:02}"),
                    3 => format!("{sign}{oh:02}:{om:02}"),
                    4 => format!("{sign}{oh:02}:{om:02}:{:02}", rng.range(0, 59)),
                    _ => format!("{sign}{oh}"),
                };
                text.push_str(&offset);
            }
        }
        text.push_str(rng.ws());
        if rng.chance(0.03) {
            // A form only the server knows.
            text = format!("{text} {}", rng.pick(&["Europe/Berlin", "CET", "PST", "BC", "UTC"]));
            is_common = false;
        }
        cases.push(Case { text: text.into_bytes(), common: is_common });
    }
    for special in ["infinity", "-infinity", " Infinity ", "-INFINITY"] {
        cases.push(common(special));
    }
    for tricky in [
        "2021-06-08\t12:00",
        "2021-06-08\n12:00:00",
        "2021-06-08 12:00:00\t+02",
        "2021-06-08 12:00:00 -00",
        "2021-06-08 12:00:00+00:00:00",
        "2021-06-08 12:00:00-15:59:59",
        "2021-06-08 12:00:00+15:59:59",
        "2021-06-08 12:00:00+1",
        "2021-06-08 12:00:00-930",
        "2021-06-08 1:2:3",
        "2021-06-08 12:00:00.000000000000000000000000000001",
        "2021-06-08 12:00:00.9999999999",
        "2021-06-08 12:00:00.9999994999",
        "2021-06-08 23:59:59.9999995",
        "2021-06-08 23:59:60.0000004",
        "2021-06-08 24:00:00.0000004",
        "2021-06-08 24:00:00.0000005",
        "0001-01-01 00:00:00+15",
        "0001-01-01",
        "9999-12-31 23:59:59-15",
        "2020-02-29 24:00",
        "2021-6-08",
        "2021-06-08 12:00:00.123456789+05:30",
        "2021-06-08 12:00:00Z ",
        "2021-06-08 12:00:00 z",
        "2021-06-08T12:00:00.5z",
    ] {
        cases.push(common(tricky));
    }
    for odd_form in [
        // Local time beyond jiff's calendar (a timestamptz without offset).
        "9999-12-31 24:00:00",
        "+infinity",
        "Jan 8 2021",
        "06/08/2021",
        "8.6.2021",
        "20210608",
        "21-06-08",
        "2021-06-08 12:30.5",
        "2021-06-08T 12:00",
        "2021-06-08 12:00:00.",
        "2021-06-08+02",
        "2021-06-08 -1:00",
        "epoch",
        "2021-06-08 12:00 Europe/Berlin",
        "12021-06-08",
        "",
    ] {
        cases.push(odd(odd_form));
    }
    cases
}

fn ctx_in(zone: &str) -> EncodeContext {
    EncodeContext { session_tz: Some(TimeZone::get(zone).unwrap()), epoch: None }
}

#[tokio::test]
async fn numbers_and_booleans_match_the_server() {
    let db = chute_testkit::shared().fresh_db("values_numbers").await;
    let client = db.client().await;
    install_try_send(&client).await;
    let mut rng = Rng::new(0x5EED_0001);
    for ty in [PgType::Int2, PgType::Int4, PgType::Int8] {
        let cases = integer_cases(&mut rng, ty);
        check(&client, ty, &plain_ctx(), &cases).await;
    }
    let cases = float_cases(&mut rng, false);
    check(&client, PgType::Float8, &plain_ctx(), &cases).await;
    let cases = float_cases(&mut rng, true);
    check(&client, PgType::Float4, &plain_ctx(), &cases).await;
    let cases = numeric_cases(&mut rng);
    check(&client, PgType::Numeric, &plain_ctx(), &cases).await;
    let cases = bool_cases(&mut rng);
    check(&client, PgType::Bool, &plain_ctx(), &cases).await;
}

#[tokio::test]
async fn text_like_values_match_the_server() {
    let db = chute_testkit::shared().fresh_db("values_text").await;
    let client = db.client().await;
    install_try_send(&client).await;
    let mut rng = Rng::new(0x5EED_0002);
    for ty in [PgType::Text, PgType::Varchar, PgType::Bpchar, PgType::Name] {
        let cases = text_cases(&mut rng, ty);
        check(&client, ty, &plain_ctx(), &cases).await;
    }
    for ty in [PgType::Json, PgType::Jsonb] {
        let cases = json_cases(&mut rng);
        check(&client, ty, &plain_ctx(), &cases).await;
    }
    let cases = uuid_cases(&mut rng);
    check(&client, PgType::Uuid, &plain_ctx(), &cases).await;
    let cases = bytea_cases(&mut rng);
    check(&client, PgType::Bytea, &plain_ctx(), &cases).await;
}

#[tokio::test]
async fn dates_and_timestamps_match_the_server() {
    let db = chute_testkit::shared().fresh_db("values_time").await;
    let client = db.client().await;
    install_try_send(&client).await;
    let mut rng = Rng::new(0x5EED_0003);
    for zone in ["Europe/Berlin", "America/New_York"] {
        client.batch_execute(&format!("SET TimeZone = '{zone}'")).await.unwrap();
        let ctx = ctx_in(zone);
        let tz = TimeZone::get(zone).unwrap();
        let cases = datetime_cases(&mut rng, &tz, 4000);
        check(&client, PgType::Timestamptz, &ctx, &cases).await;
        let cases = datetime_cases(&mut rng, &tz, 1500);
        check(&client, PgType::Timestamp, &ctx, &cases).await;
        let cases = datetime_cases(&mut rng, &tz, 1000);
        check(&client, PgType::Date, &ctx, &cases).await;
    }
}

#[tokio::test]
async fn epoch_numbers_are_unix_time() {
    let db = chute_testkit::shared().fresh_db("values_epoch").await;
    let client = db.client().await;
    client.batch_execute("SET TimeZone = 'America/New_York'").await.unwrap();
    let mut rng = Rng::new(0x5EED_0004);
    let units = [(EpochUnit::Seconds, "1 second"), (EpochUnit::Millis, "1 millisecond"), (EpochUnit::Micros, "1 microsecond")];
    for (unit, interval) in units {
        let ctx = EncodeContext { session_tz: Some(TimeZone::get("America/New_York").unwrap()), epoch: Some(unit) };
        let values: Vec<i64> = (0..200).map(|_| rng.range(-5_000_000_000, 5_000_000_000)).collect();
        let sql = format!(
            "SELECT timestamptz_send('epoch'::timestamptz + n * interval '{interval}'), \
                    timestamp_send('epoch'::timestamp + n * interval '{interval}'), \
                    date_send(('epoch'::timestamp + n * interval '{interval}')::date) \
             FROM unnest($1::int8[]) WITH ORDINALITY AS u(n, o) ORDER BY o"
        );
        let rows = client.query(&sql, &[&values]).await.unwrap();
        for (v, row) in values.iter().zip(&rows) {
            let text = v.to_string();
            for (col, ty) in [PgType::Timestamptz, PgType::Timestamp, PgType::Date].into_iter().enumerate() {
                let mut out = Vec::new();
                encode_text(ty, text.as_bytes(), &ctx, &mut out).unwrap_or_else(|e| panic!("{unit:?} {text}: {e}"));
                assert_eq!(out, row.get::<_, Vec<u8>>(col), "{unit:?} {ty:?} {text}");
            }
        }
    }
}

/// The rows of one table, loaded once by chute's binary COPY and once by
/// text COPY (CSV), are the same rows.
#[tokio::test]
async fn binary_copy_loads_the_same_rows_as_text_copy() {
    let db = chute_testkit::shared().fresh_db("values_copy").await;
    let client = db.client().await;
    client.batch_execute("SET TimeZone = 'Europe/Berlin'").await.unwrap();
    let columns = "id int, b bool, i2 int2, i4 int4, i8 int8, f4 float4, f8 float8, n numeric(12,3), n2 numeric, t text, \
                   vc varchar(3), c char(5), nm name, d date, ts timestamp, tstz timestamptz, u uuid, j json, jb jsonb, by bytea";
    client.batch_execute(&format!("CREATE TABLE via_binary ({columns}); CREATE TABLE via_csv ({columns});")).await.unwrap();
    let types = [
        PgType::Int4,
        PgType::Bool,
        PgType::Int2,
        PgType::Int4,
        PgType::Int8,
        PgType::Float4,
        PgType::Float8,
        PgType::Numeric,
        PgType::Numeric,
        PgType::Text,
        PgType::Varchar,
        PgType::Bpchar,
        PgType::Name,
        PgType::Date,
        PgType::Timestamp,
        PgType::Timestamptz,
        PgType::Uuid,
        PgType::Json,
        PgType::Jsonb,
        PgType::Bytea,
    ];
    let rows: [[Option<&str>; 20]; 4] = [
        [
            Some("1"),
            Some("yes"),
            Some(" -32768"),
            Some("+42 "),
            Some("9223372036854775807"),
            Some("3.4028235e38"),
            Some("-1.5e-320"),
            Some("1.23456"),
            Some("-0.000100e2"),
            Some("grüße, \"quoted\""),
            Some("abc   "),
            Some("ab"),
            Some("a_very_long_name_that_is_cut_at_sixty_three_bytes_by_namein_äöü"),
            Some("2024-02-29"),
            Some("2021-06-08T12:30:05.1234565"),
            Some("2021-10-31 02:30"),
            Some("{A0EEBC99-9C0B4EF8BB6D6BB9BD380A11}"),
            Some(r#"{"b": 1, "a": [1, 2]}"#),
            Some(r#"{"b": 1, "a": [1, 2], "a": 3}"#),
            Some("\\xDEAD beef"),
        ],
        [
            Some("2"),
            Some("OFF"),
            Some("0"),
            Some("-2147483648"),
            Some("-1"),
            Some("-inf"),
            Some("NaN"),
            Some("99.9995"),
            Some("Infinity"),
            Some(""),
            Some("x"),
            Some("abcde"),
            Some(""),
            Some("infinity"),
            Some("2021-06-08 24:00"),
            Some("2021-03-28 02:30:00"),
            Some("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
            Some("[]"),
            Some("null"),
            Some("a\\\\b\\101"),
        ],
        [Some("3"), None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None, None],
        [
            Some("4"),
            Some("t"),
            Some("7"),
            Some("7"),
            Some("7"),
            Some("0.1"),
            Some("0.1"),
            Some("-0"),
            Some("1e-5"),
            Some("😀"),
            Some("ä"),
            Some("€"),
            Some("pg_class"),
            Some("1999-12-31"),
            Some("1850-01-01 00:00:00+00:53:28"),
            Some("2021-06-08 00:00:10+00"),
            Some("00000000000000000000000000000000"),
            Some("1"),
            Some("\"x\""),
            Some("\\x"),
        ],
    ];
    let ctx = ctx_in("Europe/Berlin");
    let mut buf = Vec::new();
    let mut w = CopyWriter::start(&mut buf);
    for row in &rows {
        w.row(row.len() as i16);
        for (field, ty) in row.iter().zip(types) {
            match field {
                None => w.null(),
                Some(text) => {
                    let mut value = Vec::new();
                    encode_text(ty, text.as_bytes(), &ctx, &mut value).unwrap_or_else(|e| panic!("{ty:?} {text:?}: {e}"));
                    w.bytes(&value);
                }
            }
        }
    }
    w.finish();
    let mut csv = String::new();
    for row in &rows {
        let fields: Vec<String> = row.iter().map(|f| f.map_or(String::new(), |t| format!("\"{}\"", t.replace('"', "\"\"")))).collect();
        csv.push_str(&fields.join(","));
        csv.push('\n');
    }
    for (table, format, data) in [("via_binary", "binary", Bytes::from(buf)), ("via_csv", "csv", Bytes::from(csv))] {
        let sink = client.copy_in(&format!("COPY {table} FROM STDIN (FORMAT {format})")).await.unwrap();
        let mut sink = Box::pin(sink);
        sink.send(data).await.unwrap();
        let n = sink.as_mut().finish().await.unwrap();
        assert_eq!(n, rows.len() as u64, "{table}");
    }
    let select = "SELECT id, b, i2, i4, i8, f4, f8, n, n2, t, vc, c, nm, d, ts, tstz, u, j::text, jb, by FROM";
    for (a, b) in [("via_binary", "via_csv"), ("via_csv", "via_binary")] {
        let extra = client.query(&format!("{select} {a} EXCEPT {select} {b}"), &[]).await.unwrap();
        assert!(
            extra.is_empty(),
            "{} rows of {a} are not in {b}: ids {:?}",
            extra.len(),
            extra.iter().map(|r| r.get::<_, i32>(0)).collect::<Vec<_>>()
        );
    }
}

/// json and jsonb are validated by the server's receive functions, so a
/// broken document fails a binary COPY just as it fails a text COPY.
#[tokio::test]
async fn broken_json_fails_binary_copy_too() {
    let db = chute_testkit::shared().fresh_db("values_json").await;
    let client = db.client().await;
    client.batch_execute("CREATE TABLE j (v json); CREATE TABLE jb (v jsonb);").await.unwrap();
    for (table, ty) in [("j", PgType::Json), ("jb", PgType::Jsonb)] {
        let mut value = Vec::new();
        encode_text(ty, b"{\"a\": ", &plain_ctx(), &mut value).unwrap();
        let mut buf = Vec::new();
        let mut w = CopyWriter::start(&mut buf);
        w.row(1);
        w.bytes(&value);
        w.finish();
        let sink = client.copy_in(&format!("COPY {table} FROM STDIN (FORMAT binary)")).await.unwrap();
        let mut sink = Box::pin(sink);
        let sent = sink.send(Bytes::from(buf)).await;
        let finished = sink.as_mut().finish().await;
        assert!(sent.is_err() || finished.is_err(), "{table}: a broken document was loaded");
    }
}

/// Zones with unusual transitions: negative DST (Dublin), half-hour DST
/// (Lord Howe), DST at midnight (São Paulo), a skipped day (Apia), changes
/// between two standard times (Moscow), and UTC.
#[tokio::test]
async fn local_times_in_unusual_zones_match_the_server() {
    let db = chute_testkit::shared().fresh_db("values_zones").await;
    let client = db.client().await;
    install_try_send(&client).await;
    let mut rng = Rng::new(0x5EED_0005);
    for zone in ["Europe/Dublin", "Australia/Lord_Howe", "America/Sao_Paulo", "Pacific/Apia", "Europe/Moscow", "Asia/Kolkata", "UTC"] {
        client.batch_execute(&format!("SET TimeZone = '{zone}'")).await.unwrap();
        let tz = TimeZone::get(zone).unwrap();
        let cases = datetime_cases(&mut rng, &tz, 1000);
        check(&client, PgType::Timestamptz, &ctx_in(zone), &cases).await;
    }
}
