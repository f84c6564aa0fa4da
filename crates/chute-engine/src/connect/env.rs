//! Where connection settings come from besides `--url`: the `PG*`
//! environment (behind the `Env` trait, so tests pass their own), the home
//! directory and the OS user name (libpq's default user).

use std::path::PathBuf;

use super::PG_ENV_VARS;

/// A source of environment variables, so resolution is testable without
/// touching the process environment.
pub trait Env {
    fn var(&self, name: &str) -> Option<String>;
}

/// The process environment.
#[derive(Debug, Clone, Copy)]
pub struct ProcessEnv;

impl Env for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    }
}

impl<const N: usize> Env for [(&str, &str); N] {
    fn var(&self, name: &str) -> Option<String> {
        self.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
    }
}

/// True when the user configured a server through `PG*` variables.
pub fn env_names_a_server(env: &dyn Env) -> bool {
    PG_ENV_VARS.iter().any(|v| env.var(v).is_some())
}

pub(super) fn home_dir() -> Option<PathBuf> {
    std::env::var_os("HOME").filter(|h| !h.is_empty()).map(PathBuf::from)
}

/// The OS user name, libpq's default user.
pub fn os_user_name() -> String {
    if let Some(u) = std::env::var("USER").ok().filter(|u| !u.is_empty()) {
        return u;
    }
    // The effective user's entry in the password database, as libpq reads it.
    if let Ok(name) = whoami::username() {
        return name;
    }
    "postgres".into()
}
