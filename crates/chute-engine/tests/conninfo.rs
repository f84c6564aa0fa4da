//! Connection parameters that the rebuilt configuration used to drop are
//! honoured against a real server: `target_session_attrs`, a quoted
//! `options` value, and `PGTZ`/`PGDATESTYLE` sent at start-up.

use chute_engine::ConnectOptions;
use chute_testkit::shared;

fn base() -> String {
    format!("host={} port={} user=postgres dbname=postgres", shared().socket_dir().display(), shared().port())
}

#[tokio::test]
async fn target_session_attrs_read_write_refuses_a_read_only_server() {
    let ro = format!("{} options='-c default_transaction_read_only=on'", base());
    let none: [(&str, &str); 0] = [];
    // Without the attribute the read-only session is fine…
    ConnectOptions::resolve(Some(&ro), &none).unwrap().connect().await.unwrap();
    // …with it, no host offers a read-write session.
    let e = ConnectOptions::resolve(Some(&format!("{ro} target_session_attrs=read-write")), &none).unwrap().connect().await;
    assert!(e.is_err(), "target_session_attrs=read-write connected to a read-only session");
}

#[tokio::test]
async fn quoted_options_and_session_variables_reach_the_server() {
    let conn = format!(r"{} options = '-c chute.test=my\\ value -c work_mem=7MB'", base());
    let env = [("PGTZ", "America/Sao_Paulo"), ("PGDATESTYLE", "ISO, DMY")];
    let c = ConnectOptions::resolve(Some(&conn), &env).unwrap().connect().await.unwrap();
    let row = c
        .query_one(
            "SELECT current_setting('work_mem'), current_setting('TimeZone'), current_setting('DateStyle'), current_setting('chute.test')",
            &[],
        )
        .await
        .unwrap();
    let got: (String, String, String, String) = (row.get(0), row.get(1), row.get(2), row.get(3));
    assert_eq!(got.0, "7MB");
    assert_eq!(got.1, "America/Sao_Paulo");
    assert_eq!(got.2, "ISO, DMY");
    assert_eq!(got.3, "my value", "a quoted value keeps its escaped space");
}
