//! What `chute serve` reads of a table: its columns, which one holds the
//! time, and what kind of value each takes.

use chute_core::ident::QualifiedName;
use tokio_postgres::Client;

use super::ServeConfig;
use chute_engine::retry::{Classify, Fault};

pub(crate) use chute_engine::lines::LaneColumn;

/// Why a lane cannot be made.
#[derive(Debug, thiserror::Error)]
pub(crate) enum LaneError {
    #[error("table {0} does not exist: create it (chute partition create) or run chute serve with --create-tables")]
    NoTable(String),
    #[error("table {table} has no time column: name it \"time\" (or partition the table by a timestamptz column)")]
    NoTime { table: String },
    /// The server cannot be reached now (a lost connection, a restart), or
    /// the service cannot take the request now: worth a retry.
    #[error("PostgreSQL is unreachable: {0}")]
    Unreachable(String),
    /// A connection could not be made: unreachable (worth a retry) or
    /// refused (a wrong password, a missing database: not worth one).
    #[error(transparent)]
    Connect(#[from] chute_engine::ConnectError),
    /// chute's own schema could not be made or read.
    #[error(transparent)]
    Schema(#[from] chute_engine::schema::SchemaError),
    /// A statement the server refused, with its SQLSTATE and fields.
    #[error(transparent)]
    Sql(#[from] chute_engine::error::SqlError),
    /// The partition manager could not make a measurement's table.
    #[error("cannot create {table}: {source}")]
    Create { table: String, source: Box<chute_engine::partman::PartmanError> },
    /// A setting chute serve was started with (checked again here).
    #[error("{0}")]
    Setting(String),
    /// A table serve may not write to (see `guard`).
    #[error("{0}")]
    Refused(String),
    /// The request names a column the table does not have.
    #[error("{0}")]
    NoColumn(String),
}

/// How an error should be answered: what a client should do about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    /// Retry later (503 with Retry-After): the server is unreachable or busy.
    Retry,
    /// The request cannot be written as it is (4xx: not worth a retry).
    Refuse(axum::http::StatusCode),
    /// chute serve itself cannot do it until its operator acts (a login
    /// refused, a privilege missing): 500, which clients retry, so nothing
    /// is lost once it is fixed.
    Operator,
}

impl LaneError {
    /// The error's kind, from its variant and, for the server's errors,
    /// what `retry::classify` makes of them (never their text): anything
    /// but fatal is a server that is away or busy, not wrong.
    pub(crate) fn answer(&self) -> Answer {
        use axum::http::StatusCode as S;
        match self {
            LaneError::NoTable(_) => Answer::Refuse(S::NOT_FOUND),
            LaneError::Refused(_) => Answer::Refuse(S::FORBIDDEN),
            LaneError::NoTime { .. } | LaneError::NoColumn(_) => Answer::Refuse(S::BAD_REQUEST),
            _ if self.fault() != Fault::Fatal => Answer::Retry,
            _ => Answer::Operator,
        }
    }
}

impl Classify for LaneError {
    fn fault(&self) -> Fault {
        match self {
            LaneError::Unreachable(_) => Fault::Reconnect,
            LaneError::Connect(e) => e.fault(),
            LaneError::Schema(e) => e.fault(),
            LaneError::Sql(e) => e.fault(),
            LaneError::Create { source, .. } => source.fault(),
            LaneError::NoTable(_) | LaneError::NoTime { .. } | LaneError::Setting(_) | LaneError::Refused(_) | LaneError::NoColumn(_) => {
                Fault::Fatal
            }
        }
    }
}

/// A connection for reading the catalog and changing a table.
pub(crate) async fn connect(config: &ServeConfig) -> Result<tokio_postgres::Client, LaneError> {
    Ok(config.target.connect().await?)
}

/// A failed statement: `Unreachable` when the connection was lost.
pub(crate) fn sql_error(context: String) -> impl FnOnce(tokio_postgres::Error) -> LaneError {
    move |e| {
        if chute_engine::retry::connection_lost(&e) {
            LaneError::Unreachable(e.to_string())
        } else {
            LaneError::Sql(chute_engine::error::SqlError::new(context, e))
        }
    }
}

/// Every column name of `table` (those with defaults too), in order.
pub(crate) async fn column_names(client: &Client, table: &QualifiedName) -> Result<Vec<String>, LaneError> {
    let columns = chute_engine::catalog::columns_of(client, table).await.map_err(sql_error(format!("reading the columns of {table}")))?;
    Ok(columns.into_iter().map(|c| c.name).collect())
}

/// Reads the columns of `table`, time first.
pub(crate) async fn read_columns(client: &Client, table: &QualifiedName) -> Result<Vec<LaneColumn>, LaneError> {
    let all = chute_engine::catalog::columns_of(client, table).await.map_err(sql_error(format!("reading the columns of {table}")))?;
    if all.is_empty() {
        return Err(LaneError::NoTable(table.to_string()));
    }
    chute_engine::lines::line_columns(all).ok_or_else(|| LaneError::NoTime { table: table.to_string() })
}
