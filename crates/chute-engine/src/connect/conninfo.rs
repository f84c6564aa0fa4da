//! Reading a connection string the way libpq reads it.
//!
//! Splitting `key=value` strings on whitespace (and URLs on their first `@`
//! or `:`) showed pieces of passwords in error messages and lost quoted
//! values with spaces. This module is the one tokenizer (single quotes,
//! backslash escapes, spaces around `=`, as libpq's `conninfo_parse`) and
//! the one URL parser (user information up to the `@`, several
//! `host:port` pairs, percent escapes, query parameters, as libpq's
//! `conninfo_uri_parse`) that everything else uses: resolution, TLS
//! options, redaction. A parse error names the key or the part of the URL
//! that is wrong and never shows a value.

/// Keys whose values are secrets: never shown.
const SECRET_KEYS: &[&str] = &["password", "sslpassword"];

/// libpq's connection keywords (PostgreSQL 17). A key that is not one of
/// them is refused, as libpq refuses it. These are the only words of a
/// string that could not be read that an error quotes back as they are:
/// any other word may be a piece of a password (an unquoted password with
/// a space is two words; a mistyped URL is one word holding it).
pub const KEYWORDS: &[&str] = &[
    "host",
    "hostaddr",
    "port",
    "dbname",
    "user",
    "password",
    "passfile",
    "service",
    "options",
    "application_name",
    "fallback_application_name",
    "connect_timeout",
    "tcp_user_timeout",
    "keepalives",
    "keepalives_idle",
    "keepalives_interval",
    "keepalives_count",
    "channel_binding",
    "target_session_attrs",
    "load_balance_hosts",
    "sslmode",
    "sslrootcert",
    "sslcert",
    "sslkey",
    "sslpassword",
    "sslsni",
    "sslcompression",
    "requiressl",
    "client_encoding",
    "gssencmode",
    "sslcrl",
    "sslcrldir",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "sslnegotiation",
    "sslcertmode",
    "requirepeer",
    "require_auth",
    "krbsrvname",
    "gsslib",
    "gssdelegation",
    "replication",
];

/// How a `key=value` string is written, for the end of its errors.
const KEY_VALUE_FORM: &str = "write key=value pairs separated by spaces, quoting a value that has a space in it (password='my secret')";

/// How a URL is written, for the end of its errors.
const URL_FORM: &str = "write postgresql://user:password@host:port/dbname";

/// A string that is not a valid connection string. The message never holds
/// a value from it, and of its other words only those that cannot be a
/// piece of a secret: libpq keywords, a URL scheme that ends before any
/// ':' or '@', an unknown option name close to a keyword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Whether `s` is a URL (libpq's two schemes) rather than `key=value` pairs.
pub fn is_url(s: &str) -> bool {
    s.starts_with("postgresql://") || s.starts_with("postgres://")
}

/// The parameters in a URL or `key=value` string, in order, as libpq would
/// read them: a URL's parts become `user`, `password`, `host`, `port` and
/// `dbname`, with several hosts as comma-separated lists. Every key is one
/// of [`KEYWORDS`].
pub fn parse(s: &str) -> Result<Vec<(String, String)>, ParseError> {
    if is_url(s) { parse_url(s) } else { parse_key_values(s) }
}

/// Where a word of a `key=value` string is, named by the key before it
/// (a keyword: reading stops at the first key that is not one).
fn place(previous: Option<&str>) -> String {
    match previous {
        None => "at the start of the connection string".into(),
        Some(k) => format!("after {k}=…"),
    }
}

/// A string that was meant as a URL but does not start with one of libpq's
/// two schemes (`postgres//…`, `postgres:/…`, `postgress://…`,
/// `u:pw@host/db`), told apart from `key=value` pairs by its first word
/// having a ':', '/' or '@' before any '='. Of the word, only a scheme
/// that is PostgreSQL's (letters before any ':', '/' or '@', close to
/// `postgres` or one of [`PG_SCHEMES`]) and the ':' and '/' after it are
/// shown.
fn url_mistake(s: &str) -> Option<ParseError> {
    let first = s.split(char::is_whitespace).find(|w| !w.is_empty())?;
    let stop = first.find([':', '/', '@', '='])?;
    if first[stop..].starts_with('=') {
        return None;
    }
    let lead = &first[..stop];
    let punct: String = first[stop..].chars().take_while(|c| *c == ':' || *c == '/').collect();
    let scheme_like =
        lead.starts_with(|c: char| c.is_ascii_alphabetic()) && lead.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c));
    let lower = lead.to_ascii_lowercase();
    let postgres_like =
        scheme_like && (["postgres", "postgresql"].iter().any(|p| edit_distance(&lower, p) <= 3) || PG_SCHEMES.contains(&lower.as_str()));
    let message = if postgres_like && (lower == "postgres" || lower == "postgresql") && punct == "://" {
        if s.starts_with(char::is_whitespace) {
            return Some(ParseError("the URL has white space before its scheme: remove it".into()));
        }
        format!("the URL's scheme \"{lead}://\" must be in lower case")
    } else if scheme_like && lower == "jdbc" && punct == ":" {
        return Some(ParseError(format!("a JDBC URL (jdbc:postgresql://…) is not one libpq reads: leave out \"jdbc:\" and {URL_FORM}")));
    } else if postgres_like && punct == "://" {
        format!("the URL's scheme \"{lead}://\" is not one libpq reads (postgresql:// or postgres://)")
    } else if scheme_like && punct == "://" {
        "the URL's scheme (before its \"://\") is not one libpq reads (postgresql:// or postgres://)".to_owned()
    } else if postgres_like && !punct.is_empty() {
        format!("the URL does not start \"postgresql://\" or \"postgres://\" (it starts \"{lead}{punct}\")")
    } else if first.contains('@') {
        "the connection string looks like a URL without its scheme".to_owned()
    } else {
        "the connection string is neither a URL nor key=value pairs (its first word has a ':', '/' or '@' before any '=')".to_owned()
    };
    Some(ParseError(format!("{message}: {URL_FORM} (or key=value pairs: host=… user=… dbname=…)")))
}

/// Schemes other programs use for PostgreSQL, shown back when mistaken
/// for libpq's (any other first word is not: it may be a user name or a
/// password that lost the scheme in front of it).
const PG_SCHEMES: &[&str] = &["pg", "pgsql", "psql", "postgis", "timescale", "timescaledb", "redshift", "cockroachdb"];

/// Where an unknown option was found, for [`unknown_key`].
enum Found<'a> {
    /// In a `key=value` string, after this key (a keyword), if any.
    KeyValues(Option<&'a str>),
    /// In a URL's query.
    Url,
}

/// An option that is not a libpq parameter. Its name is shown only when it
/// is a word people write for a keyword (`database`, `username`) or a plain
/// word at most two letters from one, which is then suggested, and it does
/// not follow a password: any other name may be a piece of a password
/// (`password=my secret=x`, a URL whose password holds a '?'), and it is
/// found by where it is instead.
fn unknown_key(key: &str, found: Found<'_>) -> ParseError {
    let after_secret = matches!(found, Found::KeyValues(Some(p)) if SECRET_KEYS.contains(&p));
    if let Some(k) = meant_keyword(key).filter(|_| !after_secret) {
        return ParseError(format!("invalid connection option \"{key}\": did you mean \"{k}\"? (see docs/connecting.md)"));
    }
    let (place, form) = match found {
        Found::KeyValues(previous) => (place(previous), KEY_VALUE_FORM),
        Found::Url => ("in the URL's query".to_owned(), "percent-encode '?' in a user name or password as %3F"),
    };
    ParseError(format!(
        "an option {place} is not a libpq parameter (its name is not shown: it may be part of a password): docs/connecting.md lists the parameters; {form}"
    ))
}

/// Names other programs use for a libpq keyword.
const ALIASES: &[(&str, &str)] = &[
    ("database", "dbname"),
    ("db", "dbname"),
    ("username", "user"),
    ("pass", "password"),
    ("passwd", "password"),
    ("pwd", "password"),
    ("hostname", "host"),
    ("server", "host"),
    ("ssl", "sslmode"),
    ("timeout", "connect_timeout"),
];

/// The keyword `key` most likely stands for: an alias of it, or at most
/// two letters away from it, ignoring case (a plain word of three letters
/// or more).
fn meant_keyword(key: &str) -> Option<&'static str> {
    let lower = key.to_ascii_lowercase();
    if let Some((_, k)) = ALIASES.iter().find(|(a, _)| *a == lower) {
        return Some(k);
    }
    if lower.len() < 3 || !lower.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    KEYWORDS.iter().map(|k| (edit_distance(&lower, k), *k)).filter(|(d, _)| *d <= 2).min_by_key(|(d, _)| *d).map(|(_, k)| k)
}

/// Levenshtein distance between two ASCII words.
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = diagonal + usize::from(ca != *cb);
            diagonal = row[j + 1];
            row[j + 1] = substitute.min(row[j] + 1).min(row[j + 1] + 1);
        }
    }
    row[b.len()]
}

/// libpq's `conninfo_parse`: `key = value` pairs separated by whitespace; a
/// value is either single-quoted (a backslash escapes any character, so
/// `\'` and `\\`) or runs to the next whitespace (a backslash escapes there
/// too). Reading stops at the first key that is not a keyword.
pub fn parse_key_values(s: &str) -> Result<Vec<(String, String)>, ParseError> {
    if let Some(e) = url_mistake(s) {
        return Err(e);
    }
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out: Vec<(String, String)> = Vec::new();
    let skip_ws = |i: &mut usize| {
        while *i < chars.len() && chars[*i].is_whitespace() {
            *i += 1;
        }
    };
    loop {
        skip_ws(&mut i);
        if i >= chars.len() {
            return Ok(out);
        }
        let previous = out.last().map(|(k, _)| k.as_str());
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        skip_ws(&mut i);
        if i >= chars.len() || chars[i] != '=' {
            return Err(if KEYWORDS.contains(&key.as_str()) {
                ParseError(format!("missing \"=\" after \"{key}\" in the connection string: {KEY_VALUE_FORM}"))
            } else {
                ParseError(format!(
                    "a word {} has no \"=\" (it is not shown: it may be part of a password): {KEY_VALUE_FORM}",
                    place(previous)
                ))
            });
        }
        if !KEYWORDS.contains(&key.as_str()) {
            return Err(unknown_key(&key, Found::KeyValues(previous)));
        }
        i += 1;
        skip_ws(&mut i);
        let mut value = String::new();
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            loop {
                match chars.get(i) {
                    None => {
                        return Err(ParseError(format!(
                            "the quoted value of \"{key}\" has no closing quote (write a quote inside a value as \\')"
                        )));
                    }
                    Some('\\') => {
                        if let Some(c) = chars.get(i + 1) {
                            value.push(*c);
                        }
                        i += 2;
                    }
                    Some('\'') => {
                        i += 1;
                        break;
                    }
                    Some(c) => {
                        value.push(*c);
                        i += 1;
                    }
                }
            }
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                if chars[i] == '\\' && i + 1 < chars.len() {
                    i += 1;
                }
                value.push(chars[i]);
                i += 1;
            }
        }
        out.push((key, value));
    }
}

/// libpq's `conninfo_uri_parse`: `scheme://[user[:password]@][host[:port][,…]][/dbname][?key=value&…]`.
pub fn parse_url(s: &str) -> Result<Vec<(String, String)>, ParseError> {
    let rest = s.split_once("://").map(|(_, r)| r).ok_or_else(|| ParseError("not a postgresql:// URL".into()))?;
    let mut out = Vec::new();
    // The authority ends at the first '/' or '?'; user information ends at
    // the one '@' in it.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    if tail.split('?').next().is_some_and(|path| path.contains('@')) {
        // An '@' after the first '/' means the user information held a '/':
        // libpq would take the rest as a database name.
        return Err(ParseError(
            "the URL has an '@' after a '/': percent-encode '/' and '@' in a user name or password (as %2F and %40)".into(),
        ));
    }
    let hostlist = match authority.matches('@').count() {
        0 => authority,
        1 => {
            let (userinfo, hosts) = authority.split_once('@').expect("one @");
            let (user, password) = match userinfo.split_once(':') {
                Some((u, p)) => (u, Some(p)),
                None => (userinfo, None),
            };
            if !user.is_empty() {
                out.push(("user".into(), decode(user, "the user name")?));
            }
            if let Some(p) = password {
                let p = decode(p, "the password").map_err(|_| {
                    ParseError("the URL's password has a '%' that is not a %XX escape: percent-encode it (% as %25)".into())
                })?;
                out.push(("password".into(), p));
            }
            hosts
        }
        _ => {
            return Err(ParseError(
                "the URL has more than one '@' before its host: percent-encode '@' in a user name or password as %40 (and ':' as %3A, '/' as %2F)"
                    .into(),
            ));
        }
    };
    let (hosts, ports) = split_hosts(hostlist)?;
    if hosts.iter().any(|h| !h.is_empty()) {
        out.push(("host".into(), hosts.join(",")));
    }
    if ports.iter().any(|p| !p.is_empty()) {
        out.push(("port".into(), ports.join(",")));
    }
    let (path, query) = match tail.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (tail, None),
    };
    let dbname = path.strip_prefix('/').unwrap_or(path);
    if !dbname.is_empty() {
        out.push(("dbname".into(), decode(dbname, "the database name")?));
    }
    for pair in query.into_iter().flat_map(|q| q.split('&')).filter(|p| !p.is_empty()) {
        let Some((k, v)) = pair.split_once('=') else {
            return Err(ParseError("a URL query parameter has no \"=\": write ?key=value&key=value".into()));
        };
        let key = decode(k, "a query parameter name")?;
        if key != "ssl" && !KEYWORDS.contains(&key.as_str()) {
            return Err(unknown_key(&key, Found::Url));
        }
        let what = format!("the value of \"{key}\"");
        let value = decode(v, &what)
            .map_err(|e| if SECRET_KEYS.contains(&key.as_str()) { ParseError(format!("{what} has a bad % escape")) } else { e })?;
        // libpq: ssl=true is the JDBC spelling of sslmode=require, and the
        // only value of ssl it takes.
        if key == "ssl" {
            if value != "true" {
                return Err(ParseError("a URL's ssl parameter can only be ssl=true (meaning sslmode=require): use sslmode=…".into()));
            }
            out.push(("sslmode".into(), "require".into()));
        } else {
            out.push((key, value));
        }
    }
    Ok(out)
}

/// `h1:p1,h2,[::1]:p3` into hosts and ports (an empty port where none is
/// given), percent-decoded.
fn split_hosts(list: &str) -> Result<(Vec<String>, Vec<String>), ParseError> {
    let mut hosts = Vec::new();
    let mut ports = Vec::new();
    if list.is_empty() {
        return Ok((hosts, ports));
    }
    for item in list.split(',') {
        let (host, port) = if let Some(v6) = item.strip_prefix('[') {
            let (h, after) = v6.split_once(']').ok_or_else(|| ParseError("an IPv6 host in the URL has no closing ']'".into()))?;
            match after {
                "" => (h, ""),
                a if a.starts_with(':') => (h, &a[1..]),
                _ => return Err(ParseError("unexpected characters after an IPv6 host's ']' in the URL".into())),
            }
        } else {
            match item.rsplit_once(':') {
                Some((h, p)) => (h, p),
                None => (item, ""),
            }
        };
        if !port.is_empty() && port.parse::<u16>().is_err() {
            return Err(ParseError(
                "a port in the URL is not a number: percent-encode ':' '@' and '/' in a user name or password (as %3A %40 %2F)".into(),
            ));
        }
        hosts.push(decode(host, "a host name")?);
        ports.push(port.to_owned());
    }
    Ok((hosts, ports))
}

/// Undoes `%XX` escapes; a `%` that does not start one is an error, as in libpq.
fn decode(s: &str, what: &str) -> Result<String, ParseError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(0) | None => return Err(ParseError(format!("{what} in the URL has a '%' that is not a %XX escape (write % as %25)"))),
                Some(b) => out.push(b),
            }
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| ParseError(format!("{what} in the URL is not UTF-8 once its % escapes are decoded")))
}

/// A value written for a `key=value` string: quoted when it has to be.
pub fn quote_value(v: &str) -> String {
    if !v.is_empty() && !v.chars().any(|c| c.is_whitespace() || c == '\'' || c == '\\') {
        return v.to_owned();
    }
    let mut q = String::from("'");
    for c in v.chars() {
        if c == '\'' || c == '\\' {
            q.push('\\');
        }
        q.push(c);
    }
    q.push('\'');
    q
}

/// `params` as a `key=value` string, secrets left out.
pub fn to_key_values_without_secrets(params: &[(String, String)]) -> String {
    params
        .iter()
        .filter(|(k, _)| !SECRET_KEYS.contains(&k.as_str()))
        .map(|(k, v)| format!("{k}={}", quote_value(v)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Hides passwords in a URL or key=value string before it is shown. A
/// string that parses is shown as read, each secret as `<hidden>`; one that
/// does not is not shown at all, since where its secret ends is unknown.
pub fn redact(conn: &str) -> String {
    let Ok(params) = parse(conn) else {
        return "<connection string not shown: it could not be read>".into();
    };
    if is_url(conn) {
        let base_end = conn.find('?').unwrap_or(conn.len());
        let (base, query) = conn.split_at(base_end);
        let scheme_end = base.find("://").expect("a URL") + 3;
        let authority_end = base[scheme_end..].find('/').map_or(base.len(), |i| scheme_end + i);
        let mut shown = base.to_owned();
        if let Some(at) = base[scheme_end..authority_end].find('@') {
            let userinfo = &base[scheme_end..scheme_end + at];
            if let Some((user, _)) = userinfo.split_once(':') {
                shown = format!("{}{user}:<hidden>{}", &base[..scheme_end], &base[scheme_end + at..]);
            }
        }
        if let Some(q) = query.strip_prefix('?') {
            let pairs: Vec<String> = q
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if SECRET_KEYS.contains(&decode(k, "").unwrap_or_default().as_str()) => format!("{k}=<hidden>"),
                    _ => kv.to_owned(),
                })
                .collect();
            shown = format!("{shown}?{}", pairs.join("&"));
        }
        return shown;
    }
    params
        .iter()
        .map(|(k, v)| if SECRET_KEYS.contains(&k.as_str()) { format!("{k}=<hidden>") } else { format!("{k}={}", quote_value(v)) })
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(s: &str) -> Vec<(String, String)> {
        parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn key_values_as_libpq_reads_them() {
        assert_eq!(kv("password='S3 cr3t PW_x' port=abc"), pairs(&[("password", "S3 cr3t PW_x"), ("port", "abc")]));
        assert_eq!(kv("password = S3cr3tPW_x host=h"), pairs(&[("password", "S3cr3tPW_x"), ("host", "h")]));
        assert_eq!(kv("password= S3cr3tPW_x"), pairs(&[("password", "S3cr3tPW_x")]));
        assert_eq!(kv(r"password='S3cr3t\' PW_x' user=u"), pairs(&[("password", "S3cr3t' PW_x"), ("user", "u")]));
        assert_eq!(kv(r"options=x\ y application_name=''"), pairs(&[("options", "x y"), ("application_name", "")]));
        assert!(parse("password='open").unwrap_err().0.contains("no closing quote"));
        assert!(!parse("password 'S3cr3t'").unwrap_err().0.contains("S3cr3t"));
    }

    #[test]
    fn urls_as_libpq_reads_them() {
        assert_eq!(
            kv("postgres://u:p%40ss@a:1,b:2/db?sslmode=require&application_name=x%20y"),
            pairs(&[
                ("user", "u"),
                ("password", "p@ss"),
                ("host", "a,b"),
                ("port", "1,2"),
                ("dbname", "db"),
                ("sslmode", "require"),
                ("application_name", "x y")
            ])
        );
        assert_eq!(kv("postgresql://[::1]:5433,h/d"), pairs(&[("host", "::1,h"), ("port", "5433,"), ("dbname", "d")]));
        for bad in ["postgres://u2:p@ss:w/rd%PW!@h/db", "postgres://u:S3cr@3tPW_xyz@host/db"] {
            let e = parse(bad).unwrap_err().0;
            assert!(!e.contains("ss:w") && !e.contains("3tPW") && !e.contains("rd%PW"), "{e}");
        }
    }

    #[test]
    fn redaction_never_shows_a_secret() {
        for (s, secret) in [
            ("password='S3 cr3t PW_x' port=abc", "cr3t"),
            ("password = S3cr3tPW_x", "S3cr3tPW_x"),
            ("password= S3cr3tPW_x", "S3cr3tPW_x"),
            (r"password='S3cr3t\' PW_x'", "PW_x"),
            ("postgres://u2:p@ss:w/rd%PW!@h/db", "PW"),
            ("postgres://u:S3cr@3tPW_xyz@host/db", "3tPW"),
            ("postgres://u:pw@h:5/d?sslpassword=kp", "kp"),
        ] {
            let r = redact(s);
            assert!(!r.contains(secret), "{s} -> {r}");
        }
        assert_eq!(redact("postgres://u:pw@h:5/d"), "postgres://u:<hidden>@h:5/d");
        assert_eq!(redact("host=h password = 'a b' user=u"), "host=h password=<hidden> user=u");
    }

    /// The error for `s`, which must not read.
    fn refused(s: &str) -> String {
        match parse(s) {
            Ok(p) => panic!("{s:?} was read as {p:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn a_mistyped_url_is_named_by_its_scheme_only() {
        for (s, says) in [
            ("postgres//u:S3cr3tPW_xyz@127.0.0.1/t4", "does not start \"postgresql://\" or \"postgres://\" (it starts \"postgres//\")"),
            ("postgres:/u:S3cr3tPW_xyz@127.0.0.1/t4", "(it starts \"postgres:/\")"),
            ("postgresql:u:S3cr3tPW_xyz@h/db", "(it starts \"postgresql:\")"),
            ("postgress://u:S3cr3tPW_xyz@127.0.0.1/t4", "scheme \"postgress://\" is not one libpq reads"),
            ("pgsql://u:S3cr3tPW_xyz@h/db", "scheme \"pgsql://\" is not one libpq reads"),
            ("POSTGRES://u:S3cr3tPW_xyz@h/db", "scheme \"POSTGRES://\" must be in lower case"),
            (" postgres://u:S3cr3tPW_xyz@h/db", "white space before its scheme"),
            ("u:S3cr3tPW_xyz@host:5460/db", "looks like a URL without its scheme"),
            ("S3cr3tPW_xyz@host/db", "looks like a URL without its scheme"),
            ("jdbc:postgresql://h/db?user=u&password=S3cr3tPW_xyz", "leave out \"jdbc:\""),
            ("host:5460/S3cr3tPW_xyz", "neither a URL nor key=value pairs"),
            ("S3cr3tPWxyz://h/db", "the URL's scheme (before its \"://\") is not one libpq reads"),
        ] {
            let e = refused(s);
            assert!(e.contains(says), "{s:?}: {e}");
            assert!(!e.contains("S3cr3t") && !e.contains("PW_xyz") && !e.contains("PWxyz"), "{s:?}: {e}");
        }
    }

    #[test]
    fn a_word_that_is_not_a_keyword_is_found_by_its_place_not_shown() {
        let e = refused("password=S3cr3t PW_xyz host=h");
        assert!(e.contains("a word after password=… has no \"=\""), "{e}");
        assert!(!e.contains("PW_xyz"), "{e}");
        let e = refused("S3cr3tPW_xyz host=h");
        assert!(e.contains("a word at the start of the connection string has no \"=\""), "{e}");
        let e = refused("host h");
        assert!(e.contains("missing \"=\" after \"host\""), "{e}");
        // The rest of an unquoted password with an '=' in it.
        let e = refused("host=h password=S3cr3t PW_xyz=1");
        assert!(e.contains("an option after password=… is not a libpq parameter"), "{e}");
        assert!(!e.contains("PW_xyz"), "{e}");
        // Even a word close to a keyword is not shown after a password.
        let e = refused("password=my hots=1");
        assert!(!e.contains("hots"), "{e}");
        // A typing mistake or another program's name for a keyword is.
        assert!(refused("host=h sslmdoe=require").contains("\"sslmdoe\": did you mean \"sslmode\"?"));
        assert!(refused("database=x").contains("\"database\": did you mean \"dbname\"?"));
        assert!(refused("postgres://h/db?prot=1").contains("\"prot\": did you mean \"port\"?"));
        let e = refused("host=h bogus=1");
        assert!(e.contains("an option after host=… is not a libpq parameter"), "{e}");
        // A password with a '?' splits the URL there; the query's name is
        // part of it.
        let e = refused("postgres://u:12?a=S3cr3t@h/db");
        assert!(e.contains("an option in the URL's query is not a libpq parameter"), "{e}");
        assert!(!e.contains("\"a\""), "{e}");
        assert!(refused("postgres://h/db?ssl=yes").contains("ssl=true"));
        assert_eq!(kv("postgres://h/db?ssl=true"), pairs(&[("host", "h"), ("dbname", "db"), ("sslmode", "require")]));
    }

    /// Every shape of string a password may end up in when something else
    /// is mistyped, with passwords holding each character that ends a part
    /// of a URL or a key=value string: no piece of the password is in the
    /// error.
    #[test]
    fn no_piece_of_a_password_is_in_any_error() {
        let templates = [
            "postgres//u:{S}@127.0.0.1/t4",
            "postgres:/u:{S}@127.0.0.1/t4",
            "postgress://u:{S}@127.0.0.1/t4",
            "postgresql:u:{S}@h",
            "POSTGRES://u:{S}@h/db",
            " postgres://u:{S}@h/db",
            "u:{S}@host:5460/db",
            "{S}@host:5460/db",
            "jdbc:postgresql://h/db?user=u&password={S}",
            "postgres://u:{S}@h/db",
            "postgresql://u:{S}@h:5432/db?sslmode=require",
            "postgres://u:{S}@[::1]:5432/db",
            "postgres://u@h/db?password={S}",
            "postgres://u@h/db?sslpassword={S}&sslmode=require",
            "password={S}",
            "password={S} host=h",
            "host=h password={S} port=5432",
            "host=h password='{S}",
            "host=h password='{S}' port=1",
            "password = {S} user=u",
            "user=u sslpassword={S} sslmode=require",
            "host=h {S}",
            "{S}",
        ];
        let secrets = [
            "Q7x",
            "Q7x Z9w",
            "Q7x=Z9w",
            "Q7x Z9w=K4v",
            "Q7x:Z9w",
            "Q7x@Z9w",
            "Q7x/Z9w",
            "Q7x?Z9w=K4v",
            "12?Q7x=Z9w",
            "12/Q7x",
            "Q7x%Z9w",
            "Q7x'Z9w",
            r"Q7x\Z9w",
            "Q7x&Z9w=K4v",
            "Q7x#Z9w",
            "Q7x,Z9w:1",
            "Q7x]Z9w",
            "[Q7x",
            "Q7x://Z9w",
            "Q7x\tZ9w",
            "Q7x Z9w='K4v",
        ];
        let mut refusals = 0;
        for t in templates {
            for secret in secrets {
                let s = t.replace("{S}", secret);
                let Err(e) = parse(&s) else { continue };
                refusals += 1;
                for piece in ["Q7x", "Z9w", "K4v"] {
                    assert!(!e.0.contains(piece), "{s:?}: the error shows {piece:?}: {e}");
                }
                assert!(!e.0.is_empty());
            }
        }
        // Most of them are refused: the mistyped URLs always are.
        assert!(refusals > templates.len() * secrets.len() / 2, "{refusals} refused");
        for t in &templates[..9] {
            for secret in secrets {
                assert!(parse(&t.replace("{S}", secret)).is_err(), "{t} with {secret:?}");
            }
        }
    }
}
