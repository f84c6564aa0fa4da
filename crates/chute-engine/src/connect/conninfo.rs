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

/// A string that is not a valid connection string. The message never holds
/// a value from it.
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
/// `dbname`, with several hosts as comma-separated lists.
pub fn parse(s: &str) -> Result<Vec<(String, String)>, ParseError> {
    if is_url(s) { parse_url(s) } else { parse_key_values(s) }
}

/// libpq's `conninfo_parse`: `key = value` pairs separated by whitespace; a
/// value is either single-quoted (a backslash escapes any character, so
/// `\'` and `\\`) or runs to the next whitespace (a backslash escapes there
/// too).
pub fn parse_key_values(s: &str) -> Result<Vec<(String, String)>, ParseError> {
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    let mut out = Vec::new();
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
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        skip_ws(&mut i);
        if i >= chars.len() || chars[i] != '=' {
            return Err(ParseError(format!("missing \"=\" after {key:?} in the connection string (write key=value pairs)")));
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
                            "the quoted value of {key:?} has no closing quote (write a quote inside a value as \\')"
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
        let what = format!("the value of {key:?}");
        let value = decode(v, &what)
            .map_err(|e| if SECRET_KEYS.contains(&key.as_str()) { ParseError(format!("{what} has a bad % escape")) } else { e })?;
        // libpq: ssl=true is the JDBC spelling of sslmode=require.
        if key == "ssl" && value == "true" {
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
        assert_eq!(kv(r"a=x\ y b=''"), pairs(&[("a", "x y"), ("b", "")]));
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
}
