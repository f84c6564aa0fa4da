//! Typmod rounding on the client against a real server.
//!
//! The router sees a key as chute encodes it, so `apply_typmod` must give the
//! bytes the server stores in a `timestamptz(p)`, `timestamp(p)` or
//! `numeric(p,s)` column: the same as the server's text cast with the typmod,
//! and (since binary COPY passes the column's typmod to the receive function)
//! the same as what binary COPY of the unrounded value stores.

use bytes::Bytes;
use chute_core::encode::CopyWriter;
use chute_core::value::{EncodeContext, PgType, ValueError, apply_typmod, encode_text};
use futures_util::SinkExt;

/// (type, SQL type with typmod, texts)
const CASES: [(PgType, &str, &[&str]); 4] = [
    (
        PgType::Timestamptz,
        "timestamptz(0)",
        &[
            "2021-01-01 23:59:59.7+00",
            "2021-01-01 23:59:59.5+00",
            "2021-01-01 23:59:59.499999+00",
            "1969-12-31 23:59:59.5+00",
            "1999-01-01 00:00:00.5+00",
            "infinity",
        ],
    ),
    (PgType::Timestamptz, "timestamptz(2)", &["2021-06-08 10:00:00.125+00", "2021-06-08 10:00:00.124999+00", "1900-01-01 00:00:00.005+00"]),
    (PgType::Timestamp, "timestamp(3)", &["2021-01-01 23:59:59.9996", "2021-01-01 23:59:59.9994", "1960-05-05 12:00:00.0005", "-infinity"]),
    (PgType::Numeric, "numeric(10,2)", &["9.995", "9.994", "-9.995", "0.005", "-0.004", "12345678.999", "1e-7", "NaN", "99999999.994"]),
];

fn typmod_of(sql: &str) -> i32 {
    let inner: Vec<i32> = sql[sql.find('(').unwrap() + 1..sql.len() - 1].split(',').map(|s| s.trim().parse().unwrap()).collect();
    match inner.as_slice() {
        [p] => *p,
        [p, s] => ((p << 16) | (s & 0x7ff)) + 4,
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn client_rounding_matches_the_servers_text_and_binary_input() {
    let db = chute_testkit::shared().fresh_db("typmod").await;
    let c = db.client().await;
    for (ty, sql_type, texts) in CASES {
        let typmod = typmod_of(sql_type);
        c.batch_execute(&format!("DROP TABLE IF EXISTS bin; CREATE TABLE bin (i int, v {sql_type})")).await.unwrap();
        let mut buf = Vec::new();
        let mut w = CopyWriter::start(&mut buf);
        let mut rounded = Vec::new();
        for (i, text) in texts.iter().enumerate() {
            let mut unrounded = Vec::new();
            encode_text(ty, text.as_bytes(), &EncodeContext::default(), &mut unrounded).unwrap();
            w.row(2);
            w.int4(i as i32);
            w.bytes(&unrounded);
            let mut r = unrounded.clone();
            apply_typmod(ty, typmod, &mut r, 0).unwrap();
            rounded.push(r);
        }
        w.finish();
        let sink = c.copy_in("COPY bin FROM STDIN (FORMAT binary)").await.unwrap();
        let mut sink = Box::pin(sink);
        sink.send(Bytes::from(buf)).await.unwrap();
        sink.as_mut().finish().await.unwrap();
        let send = format!("{}_send", ty.name());
        for (i, text) in texts.iter().enumerate() {
            let row = c
                .query_one(&format!("SELECT {send}(v), {send}($2::text::{sql_type}) FROM bin WHERE i = $1"), &[&(i as i32), text])
                .await
                .unwrap();
            let (stored, cast): (Vec<u8>, Vec<u8>) = (row.get(0), row.get(1));
            assert_eq!(rounded[i], cast, "{text:?} as {sql_type}: client rounding differs from the server's cast");
            assert_eq!(stored, cast, "{text:?} as {sql_type}: binary COPY of the unrounded value stores another value");
        }
    }
}

#[tokio::test]
async fn values_the_typmod_rejects_are_left_to_the_server() {
    let db = chute_testkit::shared().fresh_db("typmod_rej").await;
    let c = db.client().await;
    for (text, sql_type) in [("99999999.995", "numeric(10,2)"), ("Infinity", "numeric(10,2)")] {
        let mut v = Vec::new();
        encode_text(PgType::Numeric, text.as_bytes(), &EncodeContext::default(), &mut v).unwrap();
        assert_eq!(apply_typmod(PgType::Numeric, typmod_of(sql_type), &mut v, 0), Err(ValueError::NeedsServer));
        let err = c.query_one(&format!("SELECT $1::text::{sql_type}"), &[&text]).await.unwrap_err();
        assert_eq!(err.code(), Some(&tokio_postgres::error::SqlState::NUMERIC_VALUE_OUT_OF_RANGE), "{text} {sql_type}");
    }
}
