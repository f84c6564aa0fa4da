//! Which of several hosts to use: libpq's `target_session_attrs` and
//! `load_balance_hosts`, with libpq's meaning.
//!
//! tokio-postgres knows `any` and `read-write` only, and tries its hosts in
//! order; a failover set-up names a primary and its standbys and wants the
//! one that takes writes now, whichever that is. So chute tries the hosts
//! itself (in order, or shuffled for `load_balance_hosts=random`), asks each
//! what it is (`pg_is_in_recovery()`, `transaction_read_only`) and takes the
//! first that matches, as libpq does; `prefer-standby` takes a standby if
//! any answers, else the first host that does.
//!
//! chute writes: when no `target_session_attrs` is given, it takes the
//! first host that is not in recovery, and a host list of standbys only is
//! an error naming them, instead of a load that meets
//! `read_only_sql_transaction` on its first write. An explicit `any` is
//! libpq's: the first host that answers.

use super::ConnectError;

/// libpq's `target_session_attrs`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SessionAttrs {
    /// Not given: chute writes, so a server in recovery is passed over.
    #[default]
    Writable,
    Any,
    ReadWrite,
    Primary,
    ReadOnly,
    Standby,
    PreferStandby,
}

impl SessionAttrs {
    /// The value libpq spells (`Writable` is no value of its: not given).
    pub fn parse(v: Option<&str>) -> SessionAttrs {
        match v.map(str::to_ascii_lowercase).as_deref() {
            Some("any") => SessionAttrs::Any,
            Some("read-write") => SessionAttrs::ReadWrite,
            Some("primary") => SessionAttrs::Primary,
            Some("read-only") => SessionAttrs::ReadOnly,
            Some("standby") => SessionAttrs::Standby,
            Some("prefer-standby") => SessionAttrs::PreferStandby,
            _ => SessionAttrs::Writable,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SessionAttrs::Writable => "(not given)",
            SessionAttrs::Any => "any",
            SessionAttrs::ReadWrite => "read-write",
            SessionAttrs::Primary => "primary",
            SessionAttrs::ReadOnly => "read-only",
            SessionAttrs::Standby => "standby",
            SessionAttrs::PreferStandby => "prefer-standby",
        }
    }

    /// What a host must be, for messages.
    pub fn wanted(self) -> &'static str {
        match self {
            SessionAttrs::Writable => "a server that is not in recovery (chute writes)",
            SessionAttrs::Any => "a server that answers (target_session_attrs=any)",
            SessionAttrs::ReadWrite => "a server that takes writes (target_session_attrs=read-write)",
            SessionAttrs::Primary => "a primary (target_session_attrs=primary)",
            SessionAttrs::ReadOnly => "a read-only server (target_session_attrs=read-only)",
            SessionAttrs::Standby => "a standby (target_session_attrs=standby)",
            SessionAttrs::PreferStandby => "a server that answers (target_session_attrs=prefer-standby)",
        }
    }

    /// Whether a host must be asked what it is before it is taken.
    pub(super) fn asks(self) -> bool {
        self != SessionAttrs::Any
    }

    /// Whether a server in `state` will do (for prefer-standby: at once,
    /// without looking further).
    pub(super) fn accepts(self, state: ServerState) -> bool {
        match self {
            SessionAttrs::Any => true,
            SessionAttrs::Writable | SessionAttrs::Primary => !state.in_recovery,
            SessionAttrs::ReadWrite => !state.read_only,
            SessionAttrs::ReadOnly => state.read_only,
            SessionAttrs::Standby | SessionAttrs::PreferStandby => state.in_recovery,
        }
    }
}

/// libpq's `load_balance_hosts`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LoadBalance {
    #[default]
    Disable,
    Random,
}

impl LoadBalance {
    pub fn parse(v: Option<&str>) -> LoadBalance {
        match v.map(str::to_ascii_lowercase).as_deref() {
            Some("random") => LoadBalance::Random,
            _ => LoadBalance::Disable,
        }
    }

    /// The order hosts `0..n` are tried in: as listed, or shuffled.
    pub(super) fn order(self, n: usize) -> Vec<usize> {
        static DRAWS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let mut order: Vec<usize> = (0..n).collect();
        if self == LoadBalance::Random {
            let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            let draw = DRAWS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let seed = nanos ^ u64::from(std::process::id()).rotate_left(32) ^ draw.wrapping_mul(0x9E37_79B9_7F4A_7C15);
            let mut rng = chute_core::generate::SplitMix64::new(seed);
            // Fisher-Yates, as libpq shuffles its list.
            for i in (1..n).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                order.swap(i, j);
            }
        }
        order
    }
}

/// What a server said it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerState {
    /// `pg_is_in_recovery()`: a standby (hot or being promoted).
    pub in_recovery: bool,
    /// `transaction_read_only` (a standby, or `default_transaction_read_only`).
    pub read_only: bool,
}

impl ServerState {
    /// What to ask, as text columns of one row (see `own_settings::apply`,
    /// which asks it with chute's session settings, in one round trip).
    pub(super) const QUERY: &'static str = "SELECT pg_is_in_recovery()::text, current_setting('transaction_read_only')";

    /// The answer to [`ServerState::QUERY`].
    pub(super) fn from_text(in_recovery: Option<&str>, read_only: Option<&str>) -> ServerState {
        ServerState { in_recovery: in_recovery == Some("true"), read_only: read_only == Some("on") }
    }

    pub(super) fn describe(self) -> &'static str {
        match (self.in_recovery, self.read_only) {
            (true, _) => "a standby (in recovery)",
            (false, true) => "a primary in read-only mode (default_transaction_read_only)",
            (false, false) => "a primary (read-write)",
        }
    }
}

/// No host matched: what each one was, and what to do.
pub(super) fn no_host_matched(attrs: SessionAttrs, seen: &[(String, ServerState)], failures: &[String]) -> ConnectError {
    let mut found: Vec<String> = seen.iter().map(|(host, s)| format!("{host} is {}", s.describe())).collect();
    found.extend(failures.iter().cloned());
    let advice = match attrs {
        SessionAttrs::Writable | SessionAttrs::Primary | SessionAttrs::ReadWrite if seen.iter().all(|(_, s)| s.in_recovery) => {
            "point chute at the primary, or list both hosts with target_session_attrs=read-write (a standby being promoted takes writes once it leaves recovery)"
        }
        SessionAttrs::Writable | SessionAttrs::Primary | SessionAttrs::ReadWrite => {
            "point chute at a server that takes writes, or list every host with target_session_attrs=read-write"
        }
        _ => "list a host of that kind, or change target_session_attrs",
    };
    ConnectError::NoMatchingHost { wanted: attrs.wanted(), found: found.join("; "), advice, in_flux: !failures.is_empty() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_value_takes_what_libpq_takes() {
        let primary = ServerState { in_recovery: false, read_only: false };
        let read_only_primary = ServerState { in_recovery: false, read_only: true };
        let standby = ServerState { in_recovery: true, read_only: true };
        let table = [
            ("any", [true, true, true]),
            ("read-write", [true, false, false]),
            ("primary", [true, true, false]),
            ("read-only", [false, true, true]),
            ("standby", [false, false, true]),
            ("prefer-standby", [false, false, true]),
        ];
        for (value, want) in table {
            let a = SessionAttrs::parse(Some(value));
            assert_eq!(a.as_str(), value);
            let got = [a.accepts(primary), a.accepts(read_only_primary), a.accepts(standby)];
            assert_eq!(got, want, "{value}");
        }
        let w = SessionAttrs::parse(None);
        assert_eq!([w.accepts(primary), w.accepts(read_only_primary), w.accepts(standby)], [true, true, false]);
        assert!(!SessionAttrs::Any.asks() && SessionAttrs::Writable.asks());
    }

    #[test]
    fn random_order_is_a_shuffle_and_disable_keeps_the_list() {
        assert_eq!(LoadBalance::Disable.order(4), [0, 1, 2, 3]);
        let mut seen_first = std::collections::HashSet::new();
        for _ in 0..200 {
            let mut o = LoadBalance::Random.order(3);
            seen_first.insert(o[0]);
            o.sort_unstable();
            assert_eq!(o, [0, 1, 2]);
        }
        assert_eq!(seen_first.len(), 3, "every host comes first sometimes");
    }
}
