//! `chute serve --create-tables` spoken to by the unmodified official
//! InfluxDB Python clients (`influxdb` for v1, `influxdb-client` for v2,
//! from PyPI into target/pyclients by scripts/ensure-deps): a query returns
//! exactly what they wrote, types, tags and timestamps at each precision.

use std::path::PathBuf;
use std::process::Command;

use chute_testkit::shared;

use super::serve::{Server, post};
use crate::common::{column, open_tempdir};

/// The Python of the venv that holds the clients (made by scripts/ensure-deps).
pub fn python() -> PathBuf {
    let py = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/pyclients/bin/python");
    if !py.exists() {
        let status =
            Command::new("bash").arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-deps")).arg("--pyclients").status();
        assert!(status.is_ok_and(|s| s.success()), "cannot make target/pyclients: run scripts/ensure-deps");
    }
    py
}

const SCRIPT: &str = r#"
import sys
base = sys.argv[1]
port = int(base.rsplit(":", 1)[1])

# v1: the `influxdb` package, database (schema) py1.
from influxdb import InfluxDBClient as V1
v1 = V1(host="127.0.0.1", port=port, database="py1")
v1.write_points([
    {"measurement": "weather", "tags": {"loc": "a b", "site": "x,1"}, "time": 1700000000,
     "fields": {"temp": 21.5, "hum": 40, "ok": True, "note": 'say "hi"'}},
], time_precision="s")
v1.write_points([{"measurement": "weather", "tags": {"loc": "ms"}, "time": 1700000001123, "fields": {"temp": -1.25}}], time_precision="ms")
v1.write_points([{"measurement": "weather", "tags": {"loc": "us"}, "time": 1700000002123456, "fields": {"temp": 0.0}}], time_precision="u")
v1.write_points([{"measurement": "weather", "tags": {"loc": "m"}, "time": 28333334, "fields": {"temp": 1.0}}], time_precision="m")
v1.write_points([{"measurement": "weather", "tags": {"loc": "ns"}, "time": 1700000003123456000, "fields": {"temp": 2.0, "extra": "new"}}])

# v2: `influxdb-client`, bucket (schema) py2, synchronous writes, gzip on.
from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS
with InfluxDBClient(url=base, token="any", org="o", enable_gzip=True) as c:
    w = c.write_api(write_options=SYNCHRONOUS)
    w.write(bucket="py2", record=Point("cpu").tag("host", "h1").field("usage", 0.5).field("n", 7).field("up", False).time(1700000000123456789, WritePrecision.NS))
    w.write(bucket="py2", record=Point("cpu").tag("host", "h2").field("usage", 1.5).time(1700000001123456, WritePrecision.US))
    w.write(bucket="py2", record=Point("cpu").tag("host", "h3").field("usage", 2.5).time(1700000002123, WritePrecision.MS))
    w.write(bucket="py2", record=Point("cpu").tag("host", "h4").field("usage", 3.5).time(1700000003, WritePrecision.S))
    w.write(bucket="py2", record="cpu,host=h5 big=18446744073709551615u 1700000004000000000")
    # A bad line: the client raises with chute's answer.
    try:
        w.write(bucket="py2", record="cpu,host=h6 usage=\"text\" 1700000005000000000")
        print("NO ERROR")
    except Exception as e:
        print("REFUSED", getattr(e, "status", None), getattr(e, "message", str(e)).replace("\n", " "))
print("DONE")
"#;

#[tokio::test]
async fn the_official_python_clients_write_and_a_query_returns_what_they_wrote() {
    let db = shared().fresh_db("serve_py").await;
    let url = db.url();
    let py = python();
    let s = Server::start(&url, &["--create-tables", "--interval", "1 day"]);
    let dir = open_tempdir();
    let script = dir.path().join("clients.py");
    std::fs::write(&script, SCRIPT).unwrap();
    let out = Command::new(&py).arg(&script).arg(&s.base).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stdout.contains("DONE"), "{stdout}\n{stderr}\n{}", s.log());
    assert!(stdout.contains("REFUSED 400"), "{stdout}");
    assert!(stdout.contains("line 1: field") && stdout.contains("is a string but column"), "{stdout}");

    let c = db.client().await;
    // Types as the line protocol gave them.
    let types: Vec<String> = column(
        &c,
        "SELECT table_schema || '.' || table_name || '.' || column_name || ' ' || data_type FROM information_schema.columns \
         WHERE table_schema IN ('py1', 'py2') AND table_name IN ('weather', 'cpu') ORDER BY table_schema, table_name, column_name",
    )
    .await;
    assert_eq!(
        types,
        vec![
            "py1.weather.extra text",
            "py1.weather.hum bigint",
            "py1.weather.loc text",
            "py1.weather.note text",
            "py1.weather.ok boolean",
            "py1.weather.site text",
            "py1.weather.temp double precision",
            "py1.weather.time timestamp with time zone",
            "py2.cpu.big numeric",
            "py2.cpu.host text",
            "py2.cpu.n bigint",
            "py2.cpu.time timestamp with time zone",
            "py2.cpu.up boolean",
            "py2.cpu.usage double precision",
        ]
    );
    let weather: Vec<String> = c
        .query(
            "SELECT concat_ws('|', to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), loc, site, temp, hum, ok, note, extra) \
             FROM py1.weather ORDER BY time",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        weather,
        vec![
            "2023-11-14 22:13:20.000000|a b|x,1|21.5|40|t|say \"hi\"",
            "2023-11-14 22:13:21.123000|ms|-1.25",
            "2023-11-14 22:13:22.123456|us|0",
            "2023-11-14 22:13:23.123456|ns|2|new",
            "2023-11-14 22:14:00.000000|m|1",
        ]
    );
    let cpu: Vec<String> = c
        .query("SELECT concat_ws('|', to_char(time AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'), host, usage, n, up, big) FROM py2.cpu ORDER BY time", &[])
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(
        cpu,
        vec![
            "2023-11-14 22:13:20.123457|h1|0.5|7|f",
            "2023-11-14 22:13:21.123456|h2|1.5",
            "2023-11-14 22:13:22.123000|h3|2.5",
            "2023-11-14 22:13:23.000000|h4|3.5",
            "2023-11-14 22:13:24.000000|h5|18446744073709551615",
        ]
    );
    // Partitioned by day, rows in leaves, the policy kept like chute partition create's.
    let n: i64 = c.query_one("SELECT count(*) FROM ONLY py2.cpu", &[]).await.unwrap().get(0);
    assert_eq!(n, 0);
    let policies: i64 = c.query_one("SELECT count(*) FROM chute.partition_config", &[]).await.unwrap().get(0);
    assert_eq!(policies, 2);

    // Without --create-tables an unknown column is refused with what to do.
    drop(s);
    let s = Server::start(&url, &[]);
    let (status, text) = post(&format!("{}/write?db=py2", s.base), &[], b"cpu,host=h9 newfield=1 1700000009000000000\n");
    assert_eq!(status, 400, "{text}");
    assert!(text.contains("no column \\\"newfield\\\"") && text.contains("--create-tables"), "{text}");
}

/// What InfluxDB clients ask before they write (tsbs's loader `SHOW
/// DATABASES`, Telegraf `CREATE DATABASE`), through the `influxdb` package
/// (pinned: 5.3.2, the version this was tested with) and raw.
const QUERY_SCRIPT: &str = r#"
import sys
import influxdb
from influxdb import InfluxDBClient
from influxdb.exceptions import InfluxDBClientError
assert influxdb.__version__ == "5.3.2", influxdb.__version__
port = int(sys.argv[1].rsplit(":", 1)[1])
c = InfluxDBClient(host="127.0.0.1", port=port, database="tele")
print("DBS1", sorted(d["name"] for d in c.get_list_database()))
c.create_database("tele")
c.create_database("tele")
print("DBS2", sorted(d["name"] for d in c.get_list_database()))
print("MEAS1", c.get_list_measurements())
c.write_points([{"measurement": "cpu", "tags": {"host": "a"}, "time": 1700000000, "fields": {"usage": 0.5}}], time_precision="s")
c.write_points([{"measurement": "mem", "tags": {"host": "a"}, "time": 1700000001, "fields": {"used": 7}}], time_precision="s")
print("MEAS2", sorted(m["name"] for m in c.get_list_measurements()))
print("RP", c.get_list_retention_policies("tele"))
for q in ["SELECT * FROM cpu", "DROP DATABASE tele"]:
    try:
        c.query(q)
        print("NO ERROR", q)
    except InfluxDBClientError as e:
        print("REFUSED", q, "|", str(e))
try:
    c.create_database("pg_catalog")
    print("NO ERROR pg_catalog")
except InfluxDBClientError as e:
    print("REFUSED pg_catalog |", str(e))
print("PING", c.ping())
print("DONE")
"#;

#[tokio::test]
async fn influxdb_clients_list_and_create_databases_and_measurements_then_write() {
    let db = shared().fresh_db("serve_query").await;
    let url = db.url();
    let py = python();
    let s = Server::start(&url, &["--create-tables"]);
    // Raw first: InfluxDB 1.x's shapes.
    let (status, text) = super::serve::get(&format!("{}/query?q=show%20databases", s.base));
    assert_eq!(status, 200, "{text}");
    assert_eq!(text, r#"{"results":[{"series":[{"columns":["name"],"name":"databases","values":[["public"]]}],"statement_id":0}]}"#);
    let (status, text) = super::serve::get(&format!("{}/query?q=SHOW%20DATABASES%3B%20SELECT%201", s.base));
    assert_eq!(status, 200, "{text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["results"][1]["statement_id"], 1, "{text}");
    assert!(v["results"][1]["error"].as_str().unwrap().starts_with("chute serve does not run queries"), "{text}");
    assert_eq!(super::serve::get(&format!("{}/query", s.base)).0, 400, "no q");
    let resp = super::serve::agent().get(&format!("{}/api/v2/ping", s.base)).call().unwrap();
    assert_eq!(resp.status().as_u16(), 204);
    assert!(resp.headers().get("x-influxdb-version").is_some());
    let (status, text) = super::serve::get(&format!("{}/health", s.base));
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["status"], "pass", "{text}");
    assert!(v["name"].is_string() && v["message"].is_string() && v["checks"].is_array() && v["version"].is_string(), "{text}");

    let dir = open_tempdir();
    let script = dir.path().join("query.py");
    std::fs::write(&script, QUERY_SCRIPT).unwrap();
    let out = Command::new(&py).arg(&script).arg(&s.base).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("DONE"), "{stdout}\n{}\n{}", String::from_utf8_lossy(&out.stderr), s.log());
    assert!(stdout.contains("DBS1 ['public']"), "{stdout}");
    assert!(stdout.contains("DBS2 ['public', 'tele']"), "{stdout}");
    assert!(stdout.contains("MEAS1 []"), "{stdout}");
    assert!(stdout.contains("MEAS2 ['cpu', 'mem']"), "{stdout}");
    assert!(
        stdout.contains("RP [{'name': 'autogen', 'duration': '0s', 'shardGroupDuration': '168h0m0s', 'replicaN': 1, 'default': True}]"),
        "{stdout}"
    );
    assert!(stdout.contains("REFUSED SELECT * FROM cpu | chute serve does not run queries"), "{stdout}");
    assert!(stdout.contains("REFUSED DROP DATABASE tele | chute serve does not run queries"), "{stdout}");
    assert!(stdout.contains("REFUSED pg_catalog | chute serve does not write to schema pg_catalog"), "{stdout}");
    assert!(stdout.contains("PING 1.8.10"), "{stdout}");
    let c = db.client().await;
    let usage: f64 = c.query_one("SELECT usage FROM tele.cpu", &[]).await.unwrap().get(0);
    assert_eq!(usage, 0.5);
    let used: i64 = c.query_one("SELECT used FROM tele.mem", &[]).await.unwrap().get(0);
    assert_eq!(used, 7);
    // Without --create-tables, CREATE DATABASE of a schema that exists succeeds; of one that does not, says what to do.
    drop(s);
    let s = Server::start(&url, &[]);
    let q = |stmt: &str| super::serve::get(&format!("{}/query?q={}", s.base, stmt.replace(' ', "%20")));
    let (status, text) = q("CREATE DATABASE tele");
    assert_eq!((status, text.as_str()), (200, r#"{"results":[{"statement_id":0}]}"#));
    let (_, text) = q("CREATE DATABASE nosuch");
    assert!(text.contains("database nosuch does not exist") && text.contains("--create-tables"), "{text}");
    let (_, text) = q("SHOW MEASUREMENTS ON tele");
    assert_eq!(
        text,
        r#"{"results":[{"series":[{"columns":["name"],"name":"measurements","values":[["cpu"],["mem"]]}],"statement_id":0}]}"#
    );
}
