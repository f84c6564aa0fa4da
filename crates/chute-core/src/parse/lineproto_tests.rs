use std::borrow::Cow;

use proptest::prelude::*;

use super::*;

fn one(text: &str) -> Line<'_> {
    parse_line(text, Precision::Nanoseconds, 42).unwrap().unwrap()
}

fn err(text: &str) -> String {
    parse_line(text, Precision::Nanoseconds, 42).unwrap_err()
}

#[test]
fn a_plain_line() {
    let l = one("cpu,host=a,region=eu usage=0.5,count=3i,big=18446744073709551615u,ok=t,msg=\"hi there\" 1700000000000000000");
    assert_eq!(l.measurement, "cpu");
    assert_eq!(l.tags, vec![(Cow::from("host"), Cow::from("a")), (Cow::from("region"), Cow::from("eu"))]);
    assert_eq!(
        l.fields,
        vec![
            (Cow::from("usage"), FieldValue::Float(0.5)),
            (Cow::from("count"), FieldValue::Int(3)),
            (Cow::from("big"), FieldValue::UInt(u64::MAX)),
            (Cow::from("ok"), FieldValue::Bool(true)),
            (Cow::from("msg"), FieldValue::Str(Cow::from("hi there"))),
        ]
    );
    assert_eq!(l.time_ns, 1_700_000_000_000_000_000);
}

#[test]
fn without_tags_or_timestamp() {
    let l = one("m v=1");
    assert!(l.tags.is_empty());
    assert_eq!(l.fields, vec![(Cow::from("v"), FieldValue::Float(1.0))]);
    assert_eq!(l.time_ns, 42, "the default time");
    assert_eq!(one("m v=1 ").time_ns, 42, "trailing space");
}

#[test]
fn escapes() {
    let l = one(r#"we\ ather\,x,lo\=c\ 1=a\,b\ c f\=1\ x="say \"hi\" \\ ok",g=-2.5e3 5"#);
    assert_eq!(l.measurement, "we ather,x");
    assert_eq!(l.tags, vec![(Cow::from("lo=c 1"), Cow::from("a,b c"))]);
    assert_eq!(l.fields[0], (Cow::from("f=1 x"), FieldValue::Str(Cow::from(r#"say "hi" \ ok"#))));
    assert_eq!(l.fields[1].1, FieldValue::Float(-2500.0));
    // A backslash before anything else is a backslash.
    assert_eq!(one(r"m\x,t=a\b v=1").measurement, r"m\x");
    assert_eq!(one(r"m\x,t=a\b v=1").tags[0].1, r"a\b");
    assert_eq!(one(r#"m v="a\nb""#).fields[0].1, FieldValue::Str(Cow::from(r"a\nb")));
}

#[test]
fn booleans_every_spelling() {
    for t in ["t", "T", "true", "True", "TRUE"] {
        assert_eq!(one(&format!("m v={t}")).fields[0].1, FieldValue::Bool(true), "{t}");
    }
    for f in ["f", "F", "false", "False", "FALSE"] {
        assert_eq!(one(&format!("m v={f}")).fields[0].1, FieldValue::Bool(false), "{f}");
    }
}

#[test]
fn precision_scales_to_nanoseconds() {
    let at = |p| parse_line("m v=1 1700000000", p, 0).unwrap().unwrap().time_ns;
    assert_eq!(at(Precision::Seconds), 1_700_000_000_000_000_000);
    assert_eq!(at(Precision::Milliseconds), 1_700_000_000_000_000);
    assert_eq!(at(Precision::Microseconds), 1_700_000_000_000);
    assert_eq!(at(Precision::Nanoseconds), 1_700_000_000);
    assert_eq!(parse_line("m v=1 -5", Precision::Seconds, 0).unwrap().unwrap().time_ns, -5_000_000_000);
    assert_eq!(Precision::parse("u").unwrap(), Precision::Microseconds);
    assert_eq!(Precision::parse("ns").unwrap(), Precision::Nanoseconds);
    assert_eq!(Precision::parse("h").unwrap().nanos(), 3_600_000_000_000);
    assert_eq!(Precision::parse("m").unwrap().nanos(), 60_000_000_000);
    assert!(Precision::parse("d").unwrap_err().contains("ns, us, ms or s"));
}

#[test]
fn bad_lines_say_why() {
    assert!(err("m").contains("field set is missing"));
    assert!(err("m,t=a").contains("field set is missing"));
    assert!(err("m,t=a ").contains("field set is missing"));
    assert!(err(",t=a v=1").contains("measurement name is missing"));
    assert!(err("m,t v=1").contains("has no value"));
    assert!(err("m,t= v=1").contains("empty value"));
    assert!(err("m v").contains("has no value"));
    assert!(err("m v=").contains("empty value"));
    assert!(err("m v=abc").contains("bad value"));
    assert!(err("m v=inf").contains("bad value"), "not a decimal number");
    assert!(err("m v=NaN").contains("bad value"));
    assert!(err("m v=1.5i").contains("bad value"));
    assert!(err("m v=-1u").contains("bad value"));
    assert!(err("m v=99999999999999999999i").contains("bad value"), "overflows i64");
    assert!(err(r#"m v="open"#).contains("no closing quote"));
    assert!(err(r#"m v="a"b"#).contains("after the string"));
    assert!(err(r"m\").contains("backslash"));
    assert!(err(r"m,t=a\").contains("backslash"));
    assert!(err("m v=1 12x").contains("bad timestamp"));
    assert!(err("m v=1 1 2").contains("bad timestamp"));
    assert!(err("m v=1 99999999999999999999").contains("out of range"));
    assert!(parse_line("m v=1 9999999999999", Precision::Seconds, 0).unwrap_err().contains("out of range"));
    assert!(err("m v=1,v=2").contains("twice"));
    assert!(err("m,v=a v=2").contains("twice"));
    assert!(err("m time=2").contains("\"time\""));
    assert!(err("m,time=x v=2").contains("\"time\""));
}

#[test]
fn blank_and_comment_lines_are_skipped_and_lines_are_numbered() {
    let body = "# a comment\n\nm v=1 1\r\n  \nm v=oops\nm v=2i 2\n";
    let mut seen = Vec::new();
    parse_lines(body, Precision::Nanoseconds, 0, |n, r| seen.push((n, r.map(|l| l.time_ns))));
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0], (3, Ok(1)));
    assert_eq!(seen[1].0, 5);
    assert!(seen[1].1.as_ref().unwrap_err().contains("bad value"));
    assert_eq!(seen[2], (6, Ok(2)));
}

#[test]
fn lines_parsed_into_one_set_are_the_lines_parsed_alone() {
    let body = "m,a=1,b=x v=1,w=\"s\" 5\nm,a=1 v=oops\nm,z=2 v=1,v=2\n\nn,t=\\ a u=3u,b=t 7\nm v=1\n";
    let mut set = LineSet::default();
    let mut got = Vec::new();
    parse_lines_into(body, Precision::Nanoseconds, 9, &mut set, |n, r| got.push((n, r)));
    let mut want = Vec::new();
    parse_lines(body, Precision::Nanoseconds, 9, |n, r| want.push((n, r)));
    assert_eq!(got.len(), want.len());
    for ((n, g), (m, w)) in got.into_iter().zip(want) {
        assert_eq!(n, m);
        match (g, w) {
            (Ok(g), Ok(w)) => {
                assert_eq!(g.measurement, w.measurement);
                assert_eq!(g.time_ns, w.time_ns);
                assert_eq!(set.tags[g.tags], w.tags[..]);
                assert_eq!(set.fields[g.fields], w.fields[..]);
            }
            (Err(g), Err(w)) => assert_eq!(g, w),
            other => panic!("line {n}: {other:?}"),
        }
    }
    // A bad line leaves nothing of itself behind.
    assert_eq!(set.tags.len(), 2 + 1);
    assert_eq!(set.fields.len(), 2 + 2 + 1);
}

#[test]
fn a_wide_first_line_does_not_size_the_set_past_what_the_body_holds() {
    // A first line of 2,000 fields, then 100,000 lines of one: room for 2,000 fields a line
    // would be 200 million entries (11 GB).
    let mut body: String = (0..2000).map(|i| format!("f{i}=1")).collect::<Vec<_>>().join(",");
    body.insert_str(0, "m ");
    body.push('\n');
    body.push_str(&"m f0=2\n".repeat(100_000));
    let mut set = LineSet::default();
    let mut n = 0;
    parse_lines_into(&body, Precision::Nanoseconds, 0, &mut set, |_, r| {
        r.unwrap();
        n += 1;
    });
    assert_eq!(n, 100_001);
    assert_eq!(set.fields.len(), 2000 + 100_000);
    // What the body can hold, and at most as much again from growing past an estimate.
    assert!(set.fields.capacity() <= 2 * (body.len() / 4 + 2000), "{} entries for a body of {} bytes", set.fields.capacity(), body.len());
}

fn name() -> impl Strategy<Value = String> {
    // Any printable text without line ends, including every special character.
    "[a-z ,=\\\\\"é_#]{1,8}".prop_filter("not time, not starting with # or a blank", |s| s != "time" && !s.starts_with(['#', ' ', '\t']))
}

fn value() -> impl Strategy<Value = FieldValue<'static>> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(FieldValue::Float),
        any::<i64>().prop_map(FieldValue::Int),
        any::<u64>().prop_map(FieldValue::UInt),
        any::<bool>().prop_map(FieldValue::Bool),
        "[a-z ,=\\\\\"é]{0,8}".prop_map(|s| FieldValue::Str(Cow::Owned(s))),
    ]
}

fn line() -> impl Strategy<Value = Line<'static>> {
    (name(), proptest::collection::vec((name(), name()), 0..3), proptest::collection::vec((name(), value()), 1..4), any::<i64>())
        .prop_map(|(m, tags, fields, t)| {
            let mut seen = std::collections::HashSet::new();
            let tags: Vec<_> =
                tags.into_iter().filter(|(k, _)| seen.insert(k.clone())).map(|(k, v)| (Cow::Owned(k), Cow::Owned(v))).collect();
            let fields: Vec<_> = fields.into_iter().filter(|(k, _)| seen.insert(k.clone())).map(|(k, v)| (Cow::Owned(k), v)).collect();
            Line { measurement: Cow::Owned(m), tags, fields, time_ns: t }
        })
        .prop_filter("a field is left", |l| !l.fields.is_empty())
}

proptest! {
    #[test]
    fn written_lines_parse_back_to_themselves(l in line()) {
        let mut text = String::new();
        write_line(&l, &mut text);
        let back = parse_line(&text, Precision::Nanoseconds, 0).unwrap().unwrap();
        prop_assert_eq!(back, l, "{}", text);
    }

    #[test]
    fn many_lines_keep_their_numbers(ls in proptest::collection::vec(line(), 1..6)) {
        let mut body = String::new();
        for l in &ls {
            write_line(l, &mut body);
            body.push('\n');
        }
        let mut got = Vec::new();
        parse_lines(&body, Precision::Nanoseconds, 0, |n, r| got.push((n, r.unwrap().into_owned())));
        prop_assert_eq!(got.len(), ls.len());
        for (i, (n, l)) in got.into_iter().enumerate() {
            prop_assert_eq!(n, i as u64 + 1);
            prop_assert_eq!(&l, &ls[i]);
        }
    }

    #[test]
    fn any_text_parses_or_fails_without_panicking(s in "\\PC{0,40}") {
        let _ = parse_line(&s, Precision::Seconds, 0);
    }
}

#[test]
fn a_key_twice_in_a_line_is_refused_and_keys_alike_in_length_and_last_byte_are_not_the_same() {
    for line in ["m v1=1,v1=2", "m,v1=a v1=2", "m a=1,b=2,a=3", "m,k=x a=1,k=2", r"m a\ b=1,a\ b=2", "m,t=a,t=b f=1", "m,t=a,u=b,t=c f=1"] {
        assert!(err(line).contains("appears twice in the line"), "{line}: {}", err(line));
    }
    assert!(err("m,host=a,host=b f=1").starts_with("tag \"host\""), "a tag twice is refused as a field twice is");
    let l = one("m,t1=a,u1=b f=1");
    assert_eq!(l.tags.len(), 2, "tags alike in length and last byte are not the same");
    let l = one("m,a1=x b1=1,c1=2,v1=3,v2=4");
    assert_eq!(l.fields.iter().map(|(k, _)| k.as_ref()).collect::<Vec<_>>(), ["b1", "c1", "v1", "v2"]);
    // The same through the set of many lines (what chute serve parses with).
    let mut set = LineSet::default();
    let mut got = Vec::new();
    parse_lines_into("m v1=1,v2=2\nm v1=1,v1=2\nm,v2=a v2=1\n", Precision::Nanoseconds, 0, &mut set, |n, r| got.push((n, r.is_ok())));
    assert_eq!(got, [(1, true), (2, false), (3, false)], "the blank last line is no line");
}

/// The timestamp as it was read before it was read in one pass: checked digits, then `str::parse`.
fn timestamp_by_parse(s: &str, precision: Precision) -> Result<i64, bool> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(true);
    }
    s.parse::<i64>().ok().and_then(|v| v.checked_mul(precision.nanos())).ok_or(false)
}

proptest! {
    #[test]
    fn timestamps_read_in_one_pass_are_those_str_parse_reads(
        s in prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            "-?[0-9]{0,22}",
            "-?[0-9x ]{0,6}",
        ],
        p in prop_oneof![Just(Precision::Nanoseconds), Just(Precision::Milliseconds), Just(Precision::Seconds), Just(Precision::Hours)],
    ) {
        let got = timestamp(&s, p).map_err(|e| e.starts_with("bad timestamp"));
        prop_assert_eq!(got, timestamp_by_parse(&s, p));
    }
}

#[test]
fn the_ends_of_the_timestamp_range() {
    assert_eq!(timestamp(&i64::MIN.to_string(), Precision::Nanoseconds), Ok(i64::MIN));
    assert_eq!(timestamp(&i64::MAX.to_string(), Precision::Nanoseconds), Ok(i64::MAX));
    assert!(timestamp("9223372036854775808", Precision::Nanoseconds).unwrap_err().contains("out of range"));
    assert!(timestamp("-9223372036854775809", Precision::Nanoseconds).unwrap_err().contains("out of range"));
    assert!(
        timestamp("99999999999999999999x", Precision::Nanoseconds).unwrap_err().contains("bad timestamp"),
        "a non-digit after an overflow"
    );
    assert!(timestamp("-", Precision::Nanoseconds).unwrap_err().contains("bad timestamp"));
    assert!(timestamp("+5", Precision::Nanoseconds).unwrap_err().contains("bad timestamp"));
}

/// A field's value as a line reads it (`None`: the line is refused).
fn read_in_a_line(s: &str) -> Option<FieldValue<'static>> {
    let text = format!("m v={s} 1");
    let line = parse_line(&text, Precision::Nanoseconds, 0).ok()??;
    Some(match line.fields.into_iter().next()?.1 {
        FieldValue::Str(t) => FieldValue::Str(Cow::Owned(t.into_owned())),
        FieldValue::Float(f) => FieldValue::Float(f),
        FieldValue::Int(i) => FieldValue::Int(i),
        FieldValue::UInt(u) => FieldValue::UInt(u),
        FieldValue::Bool(b) => FieldValue::Bool(b),
    })
}

/// Whether a value read in a line (the fast path first) is the one read
/// in full, floats to the bit.
fn same_reading(s: &str) -> bool {
    match (read_in_a_line(s), field_scalar(s)) {
        (Some(FieldValue::Float(a)), Some(FieldValue::Float(b))) => a.to_bits() == b.to_bits(),
        (a, b) => a == b,
    }
}

proptest! {
    /// The fast path gives what `str::parse` gives, to the bit, and a value
    /// read in a line is the value read in full.
    #[test]
    fn plain_decimals_read_as_str_parse_reads_them(
        s in prop_oneof![
            "-?[0-9]{0,20}([.][0-9]{0,25})?",
            any::<f64>().prop_map(|f| f.to_string()),
            any::<f64>().prop_map(|f| format!("{f:?}")),
            (any::<i64>(), 0u32..24).prop_map(|(m, k)| format!("{}.{:0>width$}", m / 10i64.pow(k.min(18)), (m % 10i64.pow(k.min(18))).unsigned_abs(), width = k.min(18) as usize)),
        ],
    ) {
        if let Some(v) = simple_decimal(s.as_bytes()) {
            let want: f64 = s.parse().expect("a decimal str::parse reads");
            prop_assert_eq!(v.to_bits(), want.to_bits(), "{}", s);
        }
        prop_assert!(same_reading(&s), "{}", s);
    }

    #[test]
    fn any_field_text_reads_in_a_line_as_in_full(s in "[-+.0-9eEiutrufalsTRUEFALSnNIf_x]{0,12}") {
        prop_assert!(same_reading(&s), "{}", s);
    }
}

#[test]
fn the_edges_of_the_plain_decimal_fast_path() {
    for s in [
        "9007199254740992",
        "9007199254740993",
        "0.1",
        "-0.0",
        "1.",
        ".5",
        "-.5",
        "0.0000000000000000000001",
        "123456789012345678901",
        "1e5",
        "+1",
    ] {
        assert!(same_reading(s), "{s}");
        if let Some(v) = simple_decimal(s.as_bytes()) {
            assert_eq!(v.to_bits(), s.parse::<f64>().unwrap().to_bits(), "{s}");
        }
    }
    // Over 2^53: an exact division, rounded to even as the full parse rounds.
    assert_eq!(simple_decimal(b"9007199254740993"), Some(9007199254740992.0));
    assert!(simple_decimal(b"12345678901234567890").is_none(), "over 19 digits: parsed in full");
    assert!(simple_decimal(b"-0.0").unwrap().is_sign_negative());
    for s in [".", "-", "", "1.2.3", "--1", "1-"] {
        assert_eq!(simple_decimal(s.as_bytes()), None, "{s}");
    }
}

proptest! {
    /// A plain decimal read where it stands in a line is the field read alone.
    #[test]
    fn decimals_read_in_place_are_those_read_alone(v in "-?[0-9]{0,20}([.][0-9]{0,25})?", end in prop_oneof![Just(""), Just(","), Just(" "), Just("x")]) {
        let text = format!("{v}{end}");
        match plain_decimal_at(text.as_bytes()) {
            Some((f, len)) => {
                prop_assert_eq!(len, v.len());
                prop_assert_eq!(Some(f.to_bits()), simple_decimal(v.as_bytes()).map(f64::to_bits));
                prop_assert!(end != "x");
            }
            None => prop_assert!(end == "x" || simple_decimal(v.as_bytes()).is_none()),
        }
    }
}
