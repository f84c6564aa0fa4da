//! A failed statement, kept whole: what chute was doing, and the driver's
//! error with the server's SQLSTATE, message, detail, hint, table and
//! constraint, as rust-postgres keeps them. Errors of chute's own kinds
//! (`LoadError`, `PartmanError`, `MigrateError`, `DoctorError`, `ExecError`)
//! hold one of these rather than its text, so a caller asks
//! [`SqlError::code`] and branches on the SQLSTATE, never on the words.

use tokio_postgres::error::{DbError, SqlState};

/// A statement that failed, with what it was for.
#[derive(Debug)]
pub struct SqlError(Box<Inner>);

#[derive(Debug)]
struct Inner {
    /// What chute was doing ("COPY into public.t", "reading chute.loads").
    context: String,
    source: tokio_postgres::Error,
}

impl SqlError {
    pub fn new(context: impl Into<String>, source: tokio_postgres::Error) -> SqlError {
        SqlError(Box::new(Inner { context: context.into(), source }))
    }

    /// The server's SQLSTATE; `None` when the error is not the server's
    /// (a closed connection, an I/O error).
    pub fn code(&self) -> Option<&SqlState> {
        self.0.source.code()
    }

    /// The server's error with its fields (`detail()`, `hint()`, `table()`,
    /// `constraint()`, `column()`, `where_()` …).
    pub fn as_db_error(&self) -> Option<&DbError> {
        self.0.source.as_db_error()
    }

    pub fn detail(&self) -> Option<&str> {
        self.as_db_error().and_then(DbError::detail)
    }

    pub fn hint(&self) -> Option<&str> {
        self.as_db_error().and_then(DbError::hint)
    }

    pub fn table(&self) -> Option<&str> {
        self.as_db_error().and_then(DbError::table)
    }

    pub fn constraint(&self) -> Option<&str> {
        self.as_db_error().and_then(DbError::constraint)
    }

    pub fn context(&self) -> &str {
        &self.0.context
    }

    /// The driver's own error.
    pub fn driver(&self) -> &tokio_postgres::Error {
        &self.0.source
    }

    /// The connection is gone (or the server is restarting): the work can
    /// be redone on a new connection.
    pub fn connection_lost(&self) -> bool {
        crate::retry::connection_lost(&self.0.source)
    }
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The server's message, SQLSTATE, detail and hint, after the context.
        let what = describe(&self.0.source);
        if self.0.context.is_empty() { f.write_str(&what) } else { write!(f, "{}: {what}", self.0.context) }
    }
}

/// Not `source()`: `Display` already shows the driver's message, which a
/// printed error chain would repeat.
impl std::error::Error for SqlError {}

impl crate::retry::Classify for SqlError {
    fn fault(&self) -> crate::retry::Fault {
        crate::retry::classify(&self.0.source)
    }
}

impl From<tokio_postgres::Error> for SqlError {
    fn from(source: tokio_postgres::Error) -> SqlError {
        SqlError::new(String::new(), source)
    }
}

/// Describes a database error with its detail and hint, for one line.
pub fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => {
            let mut s = format!("{} (SQLSTATE {})", db.message(), db.code().code());
            if let Some(d) = db.detail() {
                s.push_str(&format!("; {d}"));
            }
            if let Some(h) = db.hint() {
                s.push_str(&format!("; hint: {h}"));
            }
            if db.code() == &SqlState::DISK_FULL {
                s.push_str(
                    "; the server's disk is full: free space there (or grow the volume) and try again: the failed transaction \
                     left nothing, what was committed stays, and the same chute command run again (load, consume) loads only the rest",
                );
            }
            if db.code() == &SqlState::READ_ONLY_SQL_TRANSACTION {
                s.push_str(
                    "; the server is a standby (in recovery) or read-only: point chute at the primary, or list every host with target_session_attrs=read-write",
                );
            }
            s
        }
        None => e.to_string(),
    }
}
