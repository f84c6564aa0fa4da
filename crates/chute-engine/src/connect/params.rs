//! Every libpq connection parameter and environment variable, and what
//! chute does with it.
//!
//! Rebuilding a tokio-postgres configuration from a few known fields lost
//! the rest silently (`hostaddr`, keepalives, `target_session_attrs`, a
//! `channel_binding=require` downgraded), and `PGSERVICE` named a server
//! that was never read. Here each libpq parameter is listed once with its
//! variable and is either honoured or refused with a message naming it;
//! an unknown key is an error, as in libpq. Values come from the string
//! first, then the service file (`service` / `PGSERVICE`, looked up in
//! `PGSERVICEFILE` or `~/.pg_service.conf`, then `PGSYSCONFDIR`'s
//! `pg_service.conf`), then the environment.

use std::collections::HashMap;
use std::path::PathBuf;

use super::{ConnectError, Env, conninfo};

/// Where a value came from, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    Given,
    Service(String),
    Env(&'static str),
}

impl Origin {
    /// How to name a setting from here in a message.
    pub fn name(&self, key: &str) -> String {
        match self {
            Origin::Given => key.to_owned(),
            Origin::Service(s) => format!("{key} (from service {s:?})"),
            Origin::Env(var) => (*var).to_owned(),
        }
    }
}

/// What chute does with a parameter.
#[derive(Clone, Copy)]
enum Support {
    Honoured,
    /// Honoured for these values only (compared case-insensitively);
    /// refused otherwise with the reason.
    Values(&'static [&'static str], &'static str),
    /// Refused whenever it is set, with the reason.
    Refused(&'static str),
}

/// libpq's parameters (PostgreSQL 17), each with its environment variable.
const PARAMS: &[(&str, Option<&str>, Support)] = &[
    ("host", Some("PGHOST"), Support::Honoured),
    ("hostaddr", Some("PGHOSTADDR"), Support::Honoured),
    ("port", Some("PGPORT"), Support::Honoured),
    ("dbname", Some("PGDATABASE"), Support::Honoured),
    ("user", Some("PGUSER"), Support::Honoured),
    ("password", Some("PGPASSWORD"), Support::Honoured),
    ("passfile", Some("PGPASSFILE"), Support::Honoured),
    ("service", Some("PGSERVICE"), Support::Honoured),
    ("options", Some("PGOPTIONS"), Support::Honoured),
    ("application_name", Some("PGAPPNAME"), Support::Honoured),
    ("fallback_application_name", None, Support::Honoured),
    ("connect_timeout", Some("PGCONNECT_TIMEOUT"), Support::Honoured),
    ("tcp_user_timeout", None, Support::Honoured),
    ("keepalives", None, Support::Honoured),
    ("keepalives_idle", None, Support::Honoured),
    ("keepalives_interval", None, Support::Honoured),
    ("keepalives_count", None, Support::Honoured),
    (
        "channel_binding",
        Some("PGCHANNELBINDING"),
        Support::Values(&["disable", "prefer", "require"], "it must be disable, prefer or require"),
    ),
    (
        "target_session_attrs",
        Some("PGTARGETSESSIONATTRS"),
        Support::Values(
            &["any", "read-write", "primary", "read-only", "standby", "prefer-standby"],
            "it must be any, read-write, primary, read-only, standby or prefer-standby",
        ),
    ),
    ("load_balance_hosts", Some("PGLOADBALANCEHOSTS"), Support::Values(&["disable", "random"], "it must be disable or random")),
    ("sslmode", Some("PGSSLMODE"), Support::Honoured),
    ("sslrootcert", Some("PGSSLROOTCERT"), Support::Honoured),
    ("sslcert", Some("PGSSLCERT"), Support::Honoured),
    ("sslkey", Some("PGSSLKEY"), Support::Honoured),
    // Accepted and unused: only an encrypted key needs it, and those are
    // refused with their own message.
    ("sslpassword", None, Support::Honoured),
    ("sslsni", Some("PGSSLSNI"), Support::Values(&["1"], "chute always sends the host name (SNI) in the TLS handshake")),
    ("sslcompression", Some("PGSSLCOMPRESSION"), Support::Values(&["0"], "TLS compression is not supported")),
    ("requiressl", Some("PGREQUIRESSL"), Support::Values(&["0"], "use sslmode=require instead")),
    (
        "client_encoding",
        Some("PGCLIENTENCODING"),
        Support::Values(&["utf8", "utf-8", "unicode", "auto"], "chute sends and reads UTF8 only"),
    ),
    ("gssencmode", Some("PGGSSENCMODE"), Support::Values(&["disable", "prefer"], "chute has no GSSAPI encryption")),
    ("sslcrl", Some("PGSSLCRL"), Support::Refused("certificate revocation lists are not supported")),
    ("sslcrldir", Some("PGSSLCRLDIR"), Support::Refused("certificate revocation lists are not supported")),
    ("ssl_min_protocol_version", Some("PGSSLMINPROTOCOLVERSION"), Support::Refused("chute always speaks TLS 1.2 or 1.3")),
    ("ssl_max_protocol_version", Some("PGSSLMAXPROTOCOLVERSION"), Support::Refused("chute always speaks TLS 1.2 or 1.3")),
    ("sslnegotiation", Some("PGSSLNEGOTIATION"), Support::Values(&["postgres"], "chute negotiates TLS the classic way only")),
    ("sslcertmode", Some("PGSSLCERTMODE"), Support::Refused("the client certificate is sent whenever its file exists")),
    ("requirepeer", Some("PGREQUIREPEER"), Support::Refused("checking the server's user on a socket is not supported")),
    ("require_auth", Some("PGREQUIREAUTH"), Support::Refused("restricting authentication methods is not supported")),
    ("krbsrvname", Some("PGKRBSRVNAME"), Support::Refused("Kerberos/GSSAPI authentication is not supported")),
    ("gsslib", Some("PGGSSLIB"), Support::Refused("Kerberos/GSSAPI authentication is not supported")),
    ("gssdelegation", Some("PGGSSDELEGATION"), Support::Values(&["0"], "Kerberos/GSSAPI authentication is not supported")),
    ("replication", None, Support::Values(&["0", "false", "off", "no"], "chute does not open replication connections")),
];

/// Session defaults libpq sends at start-up from the environment, as the
/// server setting each names.
pub const SESSION_ENV: &[(&str, &str)] = &[("PGDATESTYLE", "datestyle"), ("PGTZ", "timezone"), ("PGGEQO", "geqo")];

/// The parameters of one connection, each with where it came from.
#[derive(Debug, Default)]
pub struct Params {
    values: HashMap<&'static str, (String, Origin)>,
}

impl Params {
    /// The string's parameters, then the service file's, then the
    /// environment's; each checked against [`PARAMS`].
    pub fn gather(conn: Option<&str>, env: &dyn Env) -> Result<Params, ConnectError> {
        let mut p = Params::default();
        if let Some(conn) = conn {
            let pairs = conninfo::parse(conn).map_err(|e| ConnectError::Invalid(e.0))?;
            for (k, v) in pairs {
                // The string's keys are libpq keywords (it was read so), and
                // each keyword is in PARAMS (a test checks).
                let key = known(&k).ok_or_else(|| ConnectError::Invalid(format!("chute does not know the libpq parameter {k:?}")))?;
                p.values.insert(key, (v, Origin::Given));
            }
        }
        if let Some((service, _)) =
            p.get("service").map(|(s, o)| (s.to_owned(), o.clone())).or_else(|| env.var("PGSERVICE").map(|s| (s, Origin::Env("PGSERVICE"))))
        {
            for (k, v) in service_params(&service, env)? {
                let key = known(&k).ok_or_else(|| {
                    ConnectError::Invalid(format!(
                        "service {service:?} sets {k:?}, which is not a libpq connection parameter: fix the service file"
                    ))
                })?;
                p.values.entry(key).or_insert((v, Origin::Service(service.clone())));
            }
        }
        for (key, var, _) in PARAMS {
            if let Some(var) = var
                && let Some(v) = env.var(var)
            {
                p.values.entry(key).or_insert((v, Origin::Env(var)));
            }
        }
        p.check()?;
        Ok(p)
    }

    fn check(&self) -> Result<(), ConnectError> {
        for (key, _, support) in PARAMS {
            let Some((value, origin)) = self.values.get(key) else { continue };
            match support {
                Support::Honoured => {}
                Support::Values(ok, _) if ok.iter().any(|o| o.eq_ignore_ascii_case(value.trim())) => {}
                Support::Values(_, why) | Support::Refused(why) => {
                    let shown = if value.chars().count() > 40 { "…".into() } else { format!("={value:?}") };
                    return Err(ConnectError::Invalid(format!(
                        "chute does not support {}{shown}: {why}; remove it to connect without it",
                        origin.name(key)
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn get(&self, key: &str) -> Option<(&str, &Origin)> {
        self.values.get(key).map(|(v, o)| (v.as_str(), o))
    }

    pub fn value(&self, key: &str) -> Option<String> {
        self.values.get(key).map(|(v, _)| v.clone())
    }

    /// `key` as a number of seconds (libpq's integer parameters).
    pub fn seconds(&self, key: &str) -> Result<Option<u64>, ConnectError> {
        self.number(key)
    }

    pub fn number<T: std::str::FromStr>(&self, key: &str) -> Result<Option<T>, ConnectError> {
        match self.get(key) {
            None => Ok(None),
            Some((v, o)) => {
                v.trim().parse().map(Some).map_err(|_| ConnectError::Invalid(format!("{}={v:?} is not a whole number", o.name(key))))
            }
        }
    }
}

fn known(key: &str) -> Option<&'static str> {
    PARAMS.iter().map(|(k, _, _)| *k).find(|k| *k == key)
}

/// The parameters a service defines, from the first file that has it:
/// `PGSERVICEFILE` (or `~/.pg_service.conf`), then `pg_service.conf` in
/// `PGSYSCONFDIR` (Debian's libpq: `/etc/postgresql-common`).
fn service_params(service: &str, env: &dyn Env) -> Result<Vec<(String, String)>, ConnectError> {
    let user_file =
        env.var("PGSERVICEFILE").map(PathBuf::from).or_else(|| env.var("HOME").map(|h| PathBuf::from(h).join(".pg_service.conf")));
    let sys_file = PathBuf::from(env.var("PGSYSCONFDIR").unwrap_or_else(|| "/etc/postgresql-common".into())).join("pg_service.conf");
    let mut looked = Vec::new();
    for file in user_file.into_iter().chain([sys_file]) {
        looked.push(file.display().to_string());
        let Ok(text) = std::fs::read_to_string(&file) else { continue };
        if let Some(params) = service_section(&text, service, &file)? {
            return Ok(params);
        }
    }
    Err(ConnectError::Invalid(format!(
        "definition of service {service:?} not found (looked in {}): add a [{service}] section to ~/.pg_service.conf or set PGSERVICEFILE",
        looked.join(" and ")
    )))
}

/// The `key=value` lines of `[service]` in a pg_service.conf, or `None`
/// when the file has no such section.
fn service_section(text: &str, service: &str, file: &std::path::Path) -> Result<Option<Vec<(String, String)>>, ConnectError> {
    let mut inside = false;
    let mut found = None;
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            if found.is_some() {
                break;
            }
            inside = name == service;
            if inside {
                found = Some(Vec::new());
            }
            continue;
        }
        if !inside {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            return Err(ConnectError::Invalid(format!("syntax error in service file {}, line {}: write key=value", file.display(), n + 1)));
        };
        if k.trim() == "service" {
            return Err(ConnectError::Invalid(format!(
                "nested service specifications not supported in service file {}, line {}",
                file.display(),
                n + 1
            )));
        }
        found.as_mut().expect("inside a section").push((k.trim().to_owned(), v.trim().to_owned()));
    }
    Ok(found)
}

/// Escapes a value for the server's `options` start-up parameter, where
/// spaces separate arguments and a backslash escapes.
pub fn options_escape(v: &str) -> String {
    let mut out = String::with_capacity(v.len());
    for c in v.chars() {
        if c.is_whitespace() || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_and_refused_parameters_are_named() {
        let none: [(&str, &str); 0] = [];
        let e = Params::gather(Some("host=h bogus=1"), &none).unwrap_err().to_string();
        assert!(e.contains("an option after host=… is not a libpq parameter"), "{e}");
        let e = Params::gather(Some("host=h hots=1"), &none).unwrap_err().to_string();
        assert!(e.contains("\"hots\": did you mean \"host\"?"), "{e}");
        let e = Params::gather(Some("host=h sslcrl=/x"), &none).unwrap_err().to_string();
        assert!(e.contains("sslcrl"), "{e}");
        let e = Params::gather(None, &[("PGTARGETSESSIONATTRS", "standbys")]).unwrap_err().to_string();
        assert!(e.contains("PGTARGETSESSIONATTRS") && e.contains("prefer-standby"), "{e}");
        let e = Params::gather(Some("load_balance_hosts=round-robin"), &none).unwrap_err().to_string();
        assert!(e.contains("disable or random"), "{e}");
        for v in ["primary", "standby", "prefer-standby"] {
            assert!(Params::gather(None, &[("PGTARGETSESSIONATTRS", v), ("PGLOADBALANCEHOSTS", "random")]).is_ok(), "{v}");
        }
        assert!(Params::gather(Some("target_session_attrs=read-write channel_binding=require keepalives=0"), &none).is_ok());
    }

    #[test]
    fn every_keyword_the_reader_accepts_is_listed_here_and_no_other() {
        let mut listed: Vec<&str> = PARAMS.iter().map(|(k, _, _)| *k).collect();
        let mut read: Vec<&str> = conninfo::KEYWORDS.to_vec();
        listed.sort_unstable();
        read.sort_unstable();
        assert_eq!(listed, read);
    }

    #[test]
    fn service_file_fills_in_below_the_string() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("svc.conf");
        std::fs::write(&file, "# c\n[other]\nhost=no\n[mine]\nhost=svc-host\nport = 6001\ndbname=svcdb\n").unwrap();
        let f = file.to_str().unwrap();
        let p = Params::gather(Some("dbname=given"), &[("PGSERVICE", "mine"), ("PGSERVICEFILE", f), ("PGHOST", "envhost")]).unwrap();
        assert_eq!(p.value("host").as_deref(), Some("svc-host"));
        assert_eq!(p.value("port").as_deref(), Some("6001"));
        assert_eq!(p.value("dbname").as_deref(), Some("given"));
        let e = Params::gather(Some("service=nope"), &[("PGSERVICEFILE", f), ("PGSYSCONFDIR", "/nonexistent")]).unwrap_err().to_string();
        assert!(e.contains("\"nope\" not found"), "{e}");
    }
}
