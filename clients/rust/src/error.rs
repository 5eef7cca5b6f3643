//! The extension's errors by SQLSTATE (docs/reference.md, "Errors"), each
//! with the HTTP status the IETF Idempotency-Key draft gives it.

use std::fmt;

use tokio_postgres::error::DbError;

/// An error of a key function, or of getting a connection for one.
///
/// The variants the extension raises carry PostgreSQL's error (message,
/// detail naming the key and scope) in [`DbFailure`].
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// IK001: the key was used before with a different request.  HTTP 422.
    RequestMismatch(DbFailure),
    /// IK002: stale fencing token; another attempt claimed the key since.  HTTP 409.
    StaleToken(DbFailure),
    /// IK003: the key is not processing (completed or failed already).  HTTP 409.
    NotProcessing(DbFailure),
    /// IK004: no such key in this scope.  HTTP 404.
    KeyNotFound(DbFailure),
    /// IK005: a NULL token outside the transaction that claimed the key (a bug).  HTTP 500.
    TokenRequired(DbFailure),
    /// IK006: row level security is recorded but off (a restore that skipped triggers).  HTTP 503.
    RowSecurityOff(DbFailure),
    /// 22004 / 22023: a NULL, empty or over-long key or scope, control characters in one,
    /// or an argument out of range (lease, await_result).  HTTP 400.
    InvalidKey(DbFailure),
    /// Another data exception (class 22): PostgreSQL refused the request as `jsonb`
    /// (a `\u0000` in a string, a number beyond `numeric`).  HTTP 400.
    InvalidRequest(DbFailure),
    /// 25006: a read-only transaction or a hot standby.  HTTP 503 (send to the primary).
    ReadOnly(DbFailure),
    /// Any other database error (a lost connection, a missing grant, ...).  HTTP 500.
    Database(tokio_postgres::Error),
    /// No connection could be had from the pool.  HTTP 500.
    Pool(String),
    /// The database answered something this crate does not understand, or a
    /// [`Claimed`](crate::Claimed) was used where it cannot be (its
    /// transaction in use, its handler returned).  HTTP 500.
    Unexpected(String),
}

/// A database error the extension raised: the driver's error and its SQLSTATE.
#[derive(Debug)]
pub struct DbFailure {
    pub(crate) error: tokio_postgres::Error,
}

impl DbFailure {
    /// The SQLSTATE, five characters.
    pub fn code(&self) -> &str {
        self.db().map(|d| d.code().code()).unwrap_or("")
    }
    /// PostgreSQL's message.
    pub fn message(&self) -> &str {
        self.db().map(|d| d.message()).unwrap_or("")
    }
    /// PostgreSQL's detail (it names the key and the scope), if any.
    pub fn detail(&self) -> Option<&str> {
        self.db().and_then(|d| d.detail())
    }
    /// The driver's error.
    pub fn source_error(&self) -> &tokio_postgres::Error {
        &self.error
    }
    fn db(&self) -> Option<&DbError> {
        self.error.as_db_error()
    }
}

impl Error {
    /// Translates a driver error by its SQLSTATE; errors that are not the
    /// extension's stay [`Error::Database`].
    pub fn from_postgres(error: tokio_postgres::Error) -> Error {
        let code = match error.as_db_error() {
            Some(db) => db.code().code().to_owned(),
            None => return Error::Database(error),
        };
        let f = DbFailure { error };
        match Kind::of(&code) {
            Kind::RequestMismatch => Error::RequestMismatch(f),
            Kind::StaleToken => Error::StaleToken(f),
            Kind::NotProcessing => Error::NotProcessing(f),
            Kind::KeyNotFound => Error::KeyNotFound(f),
            Kind::TokenRequired => Error::TokenRequired(f),
            Kind::RowSecurityOff => Error::RowSecurityOff(f),
            Kind::InvalidKey => Error::InvalidKey(f),
            Kind::InvalidRequest => Error::InvalidRequest(f),
            Kind::ReadOnly => Error::ReadOnly(f),
            Kind::Other => Error::Database(f.error),
        }
    }

    /// The SQLSTATE, when the database answered with one.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            Error::Database(e) => e.as_db_error().map(|d| d.code().code()),
            Error::Pool(_) | Error::Unexpected(_) => None,
            other => other.failure().map(DbFailure::code),
        }
    }

    /// The HTTP status of this error (docs/reference.md's table).
    pub fn http_status(&self) -> u16 {
        match self {
            Error::RequestMismatch(_) => 422,
            Error::StaleToken(_) | Error::NotProcessing(_) => 409,
            Error::KeyNotFound(_) => 404,
            Error::InvalidKey(_) | Error::InvalidRequest(_) => 400,
            Error::RowSecurityOff(_) | Error::ReadOnly(_) => 503,
            Error::TokenRequired(_) | Error::Database(_) | Error::Pool(_) | Error::Unexpected(_) => 500,
        }
    }

    /// True when retrying later with the same key can succeed (409, 503).
    pub fn is_retryable(&self) -> bool {
        matches!(self.http_status(), 409 | 503)
    }

    fn failure(&self) -> Option<&DbFailure> {
        match self {
            Error::RequestMismatch(f)
            | Error::StaleToken(f)
            | Error::NotProcessing(f)
            | Error::KeyNotFound(f)
            | Error::TokenRequired(f)
            | Error::RowSecurityOff(f)
            | Error::InvalidKey(f)
            | Error::InvalidRequest(f)
            | Error::ReadOnly(f) => Some(f),
            Error::Database(_) | Error::Pool(_) | Error::Unexpected(_) => None,
        }
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Error {
        Error::from_postgres(e)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Database(e) => write!(f, "database error: {e}"),
            Error::Pool(m) => write!(f, "no database connection: {m}"),
            Error::Unexpected(m) => write!(f, "{m}"),
            other => {
                let d = other.failure().expect("extension error");
                write!(f, "{} ({})", d.message(), d.code())?;
                if let Some(detail) = d.detail() {
                    write!(f, ": {detail}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Database(e) => Some(e),
            Error::Pool(_) | Error::Unexpected(_) => None,
            other => other.failure().map(|f| &f.error as &(dyn std::error::Error + 'static)),
        }
    }
}

/// What a SQLSTATE means here (kept apart so that it can be tested without
/// a server: the driver's errors cannot be made by hand).
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub(crate) enum Kind {
    RequestMismatch,
    StaleToken,
    NotProcessing,
    KeyNotFound,
    TokenRequired,
    RowSecurityOff,
    InvalidKey,
    InvalidRequest,
    ReadOnly,
    Other,
}

impl Kind {
    pub(crate) fn of(code: &str) -> Kind {
        match code {
            "IK001" => Kind::RequestMismatch,
            "IK002" => Kind::StaleToken,
            "IK003" => Kind::NotProcessing,
            "IK004" => Kind::KeyNotFound,
            "IK005" => Kind::TokenRequired,
            "IK006" => Kind::RowSecurityOff,
            "22004" | "22023" => Kind::InvalidKey,
            "25006" => Kind::ReadOnly,
            c if c.starts_with("22") => Kind::InvalidRequest,
            _ => Kind::Other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Kind;

    #[test]
    fn sqlstates_map_to_kinds() {
        assert_eq!(Kind::of("IK001"), Kind::RequestMismatch);
        assert_eq!(Kind::of("IK002"), Kind::StaleToken);
        assert_eq!(Kind::of("IK003"), Kind::NotProcessing);
        assert_eq!(Kind::of("IK004"), Kind::KeyNotFound);
        assert_eq!(Kind::of("IK005"), Kind::TokenRequired);
        assert_eq!(Kind::of("IK006"), Kind::RowSecurityOff);
        assert_eq!(Kind::of("22004"), Kind::InvalidKey);
        assert_eq!(Kind::of("22023"), Kind::InvalidKey);
        // jsonb refusing the body: \u0000 (22P05), a number beyond numeric (22003)
        assert_eq!(Kind::of("22P05"), Kind::InvalidRequest);
        assert_eq!(Kind::of("22003"), Kind::InvalidRequest);
        assert_eq!(Kind::of("25006"), Kind::ReadOnly);
        for other in ["42501", "40001", "57014", "IK999", ""] {
            assert_eq!(Kind::of(other), Kind::Other, "{other}");
        }
    }
}
