//! InfluxDB's query endpoint, for what clients send before they write and
//! for administration, with InfluxDB 1.x's JSON shapes; and `/ping`,
//! `/api/v2/ping` and the v2 `/health`.
//!
//! `GET|POST /query?q=…` (or `q` in a form body) runs, per `;`-separated
//! statement:
//!
//! - `SHOW DATABASES`: the schemas serve writes to (`--schema`; else those
//!   holding a table it may write, and with `--create-tables` every schema
//!   the role may create tables in);
//! - `CREATE DATABASE name`: succeeds when the schema exists; with
//!   `--create-tables` makes it first (`CREATE SCHEMA IF NOT EXISTS`), as
//!   InfluxDB makes a database; never a system schema nor `chute`;
//! - `SHOW MEASUREMENTS [ON db]`: the tables serve may write in that schema;
//! - `SHOW RETENTION POLICIES [ON db]`: InfluxDB's default, `autogen`.
//!
//! Any other statement gets InfluxDB's error JSON saying that chute serve
//! does not run queries. tsbs's influx loader asks `SHOW DATABASES` before
//! writing; Telegraf sends `CREATE DATABASE` when it starts.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use chute_core::ident::quote_ident;
use serde_json::{Value, json};

use super::Shared;
use super::guard::system_schema;

/// The InfluxDB API version chute serve answers as.
const INFLUX_VERSION: &str = "1.8.10";

pub(crate) async fn ping(Query(q): Query<HashMap<String, String>>) -> Response {
    let mut r = if q.get("verbose").is_some_and(|v| v == "true") {
        super::json(StatusCode::OK, json!({ "version": INFLUX_VERSION })).into_response()
    } else {
        StatusCode::NO_CONTENT.into_response()
    };
    influx_headers(r.headers_mut());
    r
}

/// InfluxDB 2's health document.
pub(crate) async fn health() -> Response {
    let mut r = super::json(
        StatusCode::OK,
        json!({
            "name": "chute serve",
            "message": "ready for writes",
            "status": "pass",
            "checks": [],
            "version": INFLUX_VERSION,
            "commit": env!("CARGO_PKG_VERSION"),
        }),
    );
    influx_headers(r.headers_mut());
    r
}

fn influx_headers(h: &mut HeaderMap) {
    h.insert("x-influxdb-version", HeaderValue::from_static(INFLUX_VERSION));
    h.insert("x-influxdb-build", HeaderValue::from_static("OSS"));
    h.insert("x-chute-version", HeaderValue::from_static(env!("CARGO_PKG_VERSION")));
}

pub(crate) async fn query(
    State(s): State<Arc<Shared>>,
    Query(mut q): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Response {
    if let Err(r) = super::auth::check(&s.config.tokens, &headers, &q) {
        return r;
    }
    // A form body (the influx CLI's) counts as parameters too.
    let form =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|t| t.starts_with("application/x-www-form-urlencoded"));
    if form && let Ok(bytes) = axum::body::to_bytes(body, 1 << 20).await {
        for (k, v) in form_pairs(&bytes) {
            q.entry(k).or_insert(v);
        }
    }
    let Some(text) = q.get("q").filter(|t| !t.trim().is_empty()) else {
        return super::json(StatusCode::BAD_REQUEST, json!({ "error": "missing required parameter \"q\"" }));
    };
    let mut results = Vec::new();
    for (i, statement) in split_statements(text).iter().enumerate() {
        let mut result = match run(&s, statement, q.get("db").map(String::as_str)).await {
            Ok(series) if series.is_empty() => json!({}),
            Ok(series) => json!({ "series": series }),
            Err(e) => json!({ "error": e }),
        };
        result["statement_id"] = json!(i);
        results.push(result);
    }
    super::json(StatusCode::OK, json!({ "results": results }))
}

/// One statement: its series (InfluxDB's `{"name", "columns", "values"}`), or its error.
async fn run(s: &Shared, statement: &str, db: Option<&str>) -> Result<Vec<Value>, String> {
    let words = words(statement);
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let up: Vec<&str> = upper.iter().map(String::as_str).collect();
    match up.as_slice() {
        ["SHOW", "DATABASES"] => {
            let names = databases(s).await?;
            Ok(vec![series("databases", &["name"], names.into_iter().map(|n| json!([n])).collect())])
        }
        ["CREATE", "DATABASE", _, rest @ ..] if rest.is_empty() || rest[0] == "WITH" => {
            create_database(s, &words[2]).await?;
            Ok(Vec::new())
        }
        ["SHOW", "MEASUREMENTS", rest @ ..] => {
            let (on, rest) = on_clause(rest, &words[2..]);
            if !rest.iter().all(|w| *w == "LIMIT" || *w == "OFFSET" || w.parse::<u64>().is_ok()) {
                return Err(not_a_query(statement));
            }
            let schema = target_schema(s, on.or(db))?;
            let names = measurements(s, &schema).await?;
            if names.is_empty() {
                return Ok(Vec::new());
            }
            Ok(vec![series("measurements", &["name"], names.into_iter().map(|n| json!([n])).collect())])
        }
        ["SHOW", "RETENTION", "POLICIES", rest @ ..] => {
            let (on, rest) = on_clause(rest, &words[3..]);
            if !rest.is_empty() {
                return Err(not_a_query(statement));
            }
            let schema = target_schema(s, on.or(db))?;
            if !schema_exists(s, &schema).await? {
                return Err(format!("database not found: {schema}"));
            }
            let values = vec![json!(["autogen", "0s", "168h0m0s", 1, true])];
            Ok(vec![json!({ "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"], "values": values })])
        }
        _ => Err(not_a_query(statement)),
    }
}

fn not_a_query(statement: &str) -> String {
    format!(
        "chute serve does not run queries: it writes to PostgreSQL, where the data is to be queried with SQL; it answers only \
         SHOW DATABASES, CREATE DATABASE, SHOW MEASUREMENTS and SHOW RETENTION POLICIES (not {:?})",
        statement.trim()
    )
}

fn series(name: &str, columns: &[&str], values: Vec<Value>) -> Value {
    json!({ "name": name, "columns": columns, "values": values })
}

/// `ON db` at the start of `upper` (with its original spelling in `words`), and what follows it.
fn on_clause<'a>(upper: &'a [&'a str], words: &'a [String]) -> (Option<&'a str>, &'a [&'a str]) {
    match upper {
        ["ON", _, rest @ ..] => (Some(words[1].as_str()), rest),
        _ => (None, upper),
    }
}

/// The schema a statement is about: `--schema`, else its database.
fn target_schema(s: &Shared, db: Option<&str>) -> Result<String, String> {
    s.config.schema.clone().or(db.map(str::to_owned)).ok_or_else(|| "database name required".to_owned())
}

async fn client(s: &Shared) -> Result<tokio_postgres::Client, String> {
    s.config.target.connect().await.map_err(|e| format!("PostgreSQL is unreachable: {e}"))
}

fn failed(e: tokio_postgres::Error) -> String {
    chute_engine::error::SqlError::new("chute serve's /query", e).to_string()
}

async fn databases(s: &Shared) -> Result<Vec<String>, String> {
    if let Some(schema) = &s.config.schema {
        return Ok(vec![schema.clone()]);
    }
    let c = client(s).await?;
    let mut names: Vec<String> =
        super::guard::writable_tables(&c, &s.config.allow_tables).await.map_err(failed)?.into_iter().map(|(schema, _)| schema).collect();
    if s.config.create_tables {
        let rows = c
            .query(
                "SELECT nspname::text FROM pg_namespace WHERE has_schema_privilege(oid, 'CREATE')
                 AND nspname NOT LIKE 'pg\\_%' AND nspname NOT IN ('information_schema', 'chute')",
                &[],
            )
            .await
            .map_err(failed)?;
        names.extend(rows.iter().map(|r| r.get::<_, String>(0)));
    }
    names.sort();
    names.dedup();
    Ok(names)
}

async fn measurements(s: &Shared, schema: &str) -> Result<Vec<String>, String> {
    let c = client(s).await?;
    Ok(super::guard::writable_tables(&c, &s.config.allow_tables)
        .await
        .map_err(failed)?
        .into_iter()
        .filter(|(sc, _)| sc == schema)
        .map(|(_, name)| name)
        .collect())
}

async fn schema_exists(s: &Shared, schema: &str) -> Result<bool, String> {
    let c = client(s).await?;
    let r = c.query_one("SELECT to_regnamespace($1) IS NOT NULL", &[&quote_ident(schema)]).await.map_err(failed)?;
    Ok(r.get(0))
}

async fn create_database(s: &Shared, name: &str) -> Result<(), String> {
    if s.config.schema.is_some() {
        // Every write goes to --schema: the database asked for is accepted as InfluxDB accepts an existing one.
        return Ok(());
    }
    if system_schema(name) {
        return Err(format!("chute serve does not write to schema {name}: it is a system schema or chute's own"));
    }
    if schema_exists(s, name).await? {
        return Ok(());
    }
    if !s.config.create_tables {
        return Err(format!(
            "database {name} does not exist: create schema {} in PostgreSQL, or run chute serve with --create-tables",
            quote_ident(name)
        ));
    }
    let c = client(s).await?;
    c.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", quote_ident(name))).await.map_err(failed)?;
    eprintln!("chute serve: created schema {name} (CREATE DATABASE)");
    Ok(())
}

/// The statements of a query, split at `;` outside quotes.
fn split_statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    for ch in text.chars() {
        match (quote, ch) {
            (None, ';') => out.push(std::mem::take(&mut cur)),
            (None, '"' | '\'') => {
                quote = Some(ch);
                cur.push(ch);
            }
            (Some(q), c) if c == q => {
                quote = None;
                cur.push(ch);
            }
            _ => cur.push(ch),
        }
    }
    out.push(cur);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// A statement's words: identifiers in double quotes are one word, unquoted.
fn words(statement: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = statement.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut w = String::new();
            while let Some(c) = chars.next() {
                match c {
                    '\\' => w.extend(chars.next()),
                    '"' => break,
                    c => w.push(c),
                }
            }
            out.push(w);
        } else {
            let mut w = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                w.push(c);
                chars.next();
            }
            out.push(w);
        }
    }
    out
}

/// `application/x-www-form-urlencoded` pairs.
fn form_pairs(body: &[u8]) -> Vec<(String, String)> {
    let decode = |s: &[u8]| {
        let plus: Vec<u8> = s.iter().map(|&b| if b == b'+' { b' ' } else { b }).collect();
        percent_encoding::percent_decode(&plus).decode_utf8_lossy().into_owned()
    };
    body.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|p| match p.iter().position(|&b| b == b'=') {
            Some(i) => (decode(&p[..i]), decode(&p[i + 1..])),
            None => (decode(p), String::new()),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_and_words() {
        assert_eq!(split_statements("SHOW DATABASES; create database \"a;b\";"), vec!["SHOW DATABASES", " create database \"a;b\""]);
        assert_eq!(words(" CREATE DATABASE \"my db\" WITH DURATION 1d"), vec!["CREATE", "DATABASE", "my db", "WITH", "DURATION", "1d"]);
        assert_eq!(
            form_pairs(b"q=SHOW+DATABASES&db=a%2Fb&x"),
            vec![("q".to_owned(), "SHOW DATABASES".to_owned()), ("db".to_owned(), "a/b".to_owned()), ("x".to_owned(), String::new())]
        );
    }
}
