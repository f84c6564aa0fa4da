//! Every valid key value is routed, and a refused one gets its true reason:
//! keys only the server can parse get their partition just in time, the
//! infinities and keys beyond --max-future say so, and key columns with a
//! typmod are routed on the value the server stores (as `psql \copy` loads them).

use bytes::Bytes;
use chute_testkit::shared;
use futures_util::SinkExt;

use crate::common::{chute, create_time_partitioned, open_tempdir, run_expect, summary_value};

/// Keys in forms the client's fast path leaves to the server's parser.
const SERVER_FORMS: [&str; 5] = ["Jan 5 2021 10:00", "1999-01-08 04:05:06 PST", "J2451187", "epoch", "2021-01-05 10:00:00+00 BC"];

#[tokio::test]
async fn keys_only_the_server_parses_get_their_partition_just_in_time() {
    let db = shared().fresh_db("rv_server_forms").await;
    let url = db.url();
    create_time_partitioned(&url, "sf", "id int, time timestamptz not null", "1d", &["--premake", "0"]);
    let dir = open_tempdir();
    let csv: String = SERVER_FORMS.iter().enumerate().map(|(i, t)| format!("{i},{t}\n")).collect();
    std::fs::write(dir.path().join("sf.csv"), &csv).unwrap();
    let (out, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "sf", "sf.csv"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), SERVER_FORMS.len().to_string(), "{out}\n{err}");
    let c = db.client().await;
    for (i, text) in SERVER_FORMS.iter().enumerate() {
        let row = c
            .query_one("SELECT time = $2::text::timestamptz, tableoid::regclass::text FROM sf WHERE id = $1", &[&(i as i32), text])
            .await
            .unwrap();
        let (same, leaf): (bool, String) = (row.get(0), row.get(1));
        assert!(same, "{text:?} is stored as the server parses it");
        assert_ne!(leaf, "sf", "{text:?} sits in a leaf");
    }
}

#[tokio::test]
async fn infinities_and_far_future_keys_are_refused_with_their_true_reason() {
    let db = shared().fresh_db("rv_infinity").await;
    let url = db.url();
    create_time_partitioned(&url, "inf", "id int, time timestamptz not null", "1d", &["--max-future", "1d"]);
    let dir = open_tempdir();
    std::fs::write(dir.path().join("i.csv"), "1,infinity\n2,-infinity\n3,10000-01-01 00:00:00+00\n4,2021-06-08 00:00:00+00\n").unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "inf", "i.csv"]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "1");
    let rejects = std::fs::read_to_string(dir.path().join("i.csv.rejects")).unwrap();
    // Each refused record follows the line giving its reason.
    let lines: Vec<&str> = rejects.lines().collect();
    let line = |record: &str| {
        let at = lines.iter().position(|l| *l == record).unwrap_or_else(|| panic!("no reject for {record}:\n{rejects}"));
        lines[at - 1].to_owned()
    };
    let inf = line("1,infinity");
    assert!(inf.contains("infinity is further ahead than --max-future 1d allows"), "{rejects}");
    assert!(!inf.contains("NULL"), "{rejects}");
    let neg = line("2,-infinity");
    assert!(neg.contains("-infinity is earlier than any time partition"), "{rejects}");
    assert!(!neg.contains("outside the range"), "{rejects}");
    let far = line("3,10000-01-01 00:00:00+00");
    assert!(far.contains("further ahead than --max-future 1d"), "{rejects}");
    assert!(!far.contains("23514"), "{rejects}");

    // With partitions bounded by MAXVALUE and MINVALUE, the infinities go there, as psql \copy puts them.
    let c = db.client().await;
    c.batch_execute(
        "CREATE TABLE inf_top PARTITION OF inf FOR VALUES FROM ('9000-01-01+00') TO (MAXVALUE);
         CREATE TABLE inf_bottom PARTITION OF inf FOR VALUES FROM (MINVALUE) TO ('1000-01-01+00')",
    )
    .await
    .unwrap();
    std::fs::write(dir.path().join("j.csv"), "5,infinity\n6,-infinity\n").unwrap();
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "inf", "j.csv"]), 0);
    let leaf = |id: i32| {
        let c = &c;
        async move { c.query_one("SELECT tableoid::regclass::text FROM inf WHERE id = $1", &[&id]).await.unwrap().get::<_, String>(0) }
    };
    assert_eq!(leaf(5).await, "inf_top");
    assert_eq!(leaf(6).await, "inf_bottom");
}

#[tokio::test]
async fn infinity_goes_to_the_default_partition_when_there_is_one() {
    let db = shared().fresh_db("rv_inf_default").await;
    let url = db.url();
    create_time_partitioned(&url, "infd", "id int, time timestamptz not null", "1d", &[]);
    let c = db.client().await;
    c.batch_execute("CREATE TABLE infd_default PARTITION OF infd DEFAULT").await.unwrap();
    let dir = open_tempdir();
    std::fs::write(dir.path().join("d.csv"), "1,infinity\n2,-infinity\n").unwrap();
    run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "infd", "d.csv"]), 0);
    let n: i64 = c.query_one("SELECT count(*) FROM infd_default", &[]).await.unwrap().get(0);
    assert_eq!(n, 2);
}

/// Two identical tables, `t` and `ref`, partitioned on key columns with a typmod.
const TYPMOD_TABLES: &str = "
    CREATE TABLE {t} (id int, ts timestamptz(0), ms timestamp(3), amount numeric(10,2)) PARTITION BY RANGE (ts);
    CREATE TABLE {t}_d1 PARTITION OF {t} FOR VALUES FROM ('2021-01-01 00:00+00') TO ('2021-01-02 00:00+00') PARTITION BY RANGE (ms);
    CREATE TABLE {t}_d2 PARTITION OF {t} FOR VALUES FROM ('2021-01-02 00:00+00') TO ('2021-01-03 00:00+00') PARTITION BY RANGE (ms);
    CREATE TABLE {t}_d1_early PARTITION OF {t}_d1 FOR VALUES FROM (MINVALUE) TO ('2021-01-02 00:00') PARTITION BY RANGE (amount);
    CREATE TABLE {t}_d1_late PARTITION OF {t}_d1 FOR VALUES FROM ('2021-01-02 00:00') TO (MAXVALUE);
    CREATE TABLE {t}_d2_all PARTITION OF {t}_d2 FOR VALUES FROM (MINVALUE) TO (MAXVALUE);
    CREATE TABLE {t}_low PARTITION OF {t}_d1_early FOR VALUES FROM (MINVALUE) TO (10.00);
    CREATE TABLE {t}_high PARTITION OF {t}_d1_early FOR VALUES FROM (10.00) TO (MAXVALUE);
";

#[tokio::test]
async fn keys_with_a_typmod_are_routed_on_the_value_the_server_stores() {
    let db = shared().fresh_db("rv_typmod").await;
    let c = db.client().await;
    c.batch_execute(&(TYPMOD_TABLES.replace("{t}", "t") + &TYPMOD_TABLES.replace("{t}", "ref"))).await.unwrap();
    let csv = "1,2021-01-01 23:59:59.7+00,2021-01-01 10:00,1\n\
               2,2021-01-01 10:00:00+00,2021-01-01 23:59:59.9996,1\n\
               3,2021-01-01 10:00:00+00,2021-01-01 10:00,9.995\n\
               4,2021-01-01 10:00:00+00,2021-01-01 10:00,9.994\n\
               5,2021-01-01 10:00:00.4+00,2021-01-01 23:59:59.9994,-9.995\n";
    let dir = open_tempdir();
    std::fs::write(dir.path().join("t.csv"), csv).unwrap();
    let (out, err) = run_expect(chute().current_dir(dir.path()).args(["--url", &db.url(), "load", "t", "t.csv"]), 0);
    assert_eq!(summary_value(&out, "rows loaded"), "5", "{err}");
    let sink = c.copy_in::<_, Bytes>("COPY ref FROM STDIN (FORMAT csv)").await.unwrap();
    futures_util::pin_mut!(sink);
    sink.send(Bytes::from_static(csv.as_bytes())).await.unwrap();
    sink.finish().await.unwrap();
    let rows = |t: &'static str| {
        let c = &c;
        async move {
            let sql = format!(
                "SELECT id, ts::text, ms::text, amount::text, substr(tableoid::regclass::text, {}) FROM {t} ORDER BY id",
                t.len() + 1
            );
            let rows = c.query(&sql, &[]).await.unwrap();
            rows.iter()
                .map(|r| (r.get::<_, i32>(0), r.get::<_, String>(1), r.get::<_, String>(2), r.get::<_, String>(3), r.get::<_, String>(4)))
                .collect::<Vec<_>>()
        }
    };
    let (got, want) = (rows("t").await, rows("ref").await);
    assert_eq!(got, want, "\n--- psql \\copy\n{want:#?}\n--- chute\n{got:#?}");
    assert_eq!(want[0].4, "_d2_all", "23:59:59.7 rounds into January 2");
    assert_eq!(want[2].4, "_high", "9.995 rounds to 10.00");
}

#[tokio::test]
async fn a_key_only_the_server_parses_is_refused_past_retention_like_an_iso_key() {
    let db = shared().fresh_db("rv_retention").await;
    let url = db.url();
    create_time_partitioned(&url, "ret", "id int, time timestamptz not null", "1d", &["--retention", "30d"]);
    let c = db.client().await;
    // An old partition made by hand: retention may drop it any moment.
    c.batch_execute("CREATE TABLE ret_old PARTITION OF ret FOR VALUES FROM ('2000-01-01+00') TO ('2000-02-01+00')").await.unwrap();
    let dir = open_tempdir();
    std::fs::write(dir.path().join("r.csv"), "1,Jan 15 2000 10:00\n2,2000-01-15 10:00:00+00\n").unwrap();
    let (out, _) = run_expect(chute().current_dir(dir.path()).args(["--url", &url, "load", "ret", "r.csv"]), 1);
    assert_eq!(summary_value(&out, "rows loaded"), "0");
    let rejects = std::fs::read_to_string(dir.path().join("r.csv.rejects")).unwrap();
    assert_eq!(rejects.matches("older than the retention of 30d").count(), 2, "{rejects}");
}
