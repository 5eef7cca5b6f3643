//! `application/problem+json` answers (RFC 9457), and the extension's errors
//! as HTTP (docs/reference.md, "Errors").

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::header::{HeaderValue, CONTENT_TYPE, RETRY_AFTER};
use http::StatusCode;

use crate::Error;

/// An error answer: `{"type": "about:blank", "title", "status", "detail"}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub status: StatusCode,
    pub title: String,
    pub detail: String,
    /// `Retry-After`, in seconds, when set.
    pub retry_after: Option<u32>,
}

impl Problem {
    pub fn new(status: StatusCode, title: impl Into<String>, detail: impl Into<String>) -> Problem {
        Problem {
            status,
            title: title.into(),
            detail: detail.into(),
            retry_after: None,
        }
    }

    /// With a `Retry-After` header of `secs` seconds (at least 1).
    pub fn retry_after(mut self, secs: u32) -> Problem {
        self.retry_after = Some(secs.max(1));
        self
    }

    /// The JSON body.
    pub fn body(&self) -> String {
        serde_json::json!({
            "type": "about:blank",
            "title": self.title,
            "status": self.status.as_u16(),
            "detail": self.detail,
        })
        .to_string()
    }

    /// What an error of the key functions answers.  Errors that are not the
    /// client's business (a lost connection, a missing grant) are logged here
    /// and answered 500 without details: no SQL, no stack trace.
    pub fn from_error(e: &Error) -> Problem {
        let detail = |f: &crate::DbFailure| f.detail().unwrap_or(f.message()).to_owned();
        match e {
            Error::RequestMismatch(f) => Problem::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "Idempotency-Key reused with a different request body",
                detail(f),
            ),
            Error::InvalidKey(f) => Problem::new(
                StatusCode::BAD_REQUEST,
                "Invalid Idempotency-Key or scope",
                f.message().to_owned(),
            ),
            Error::InvalidRequest(_) => Problem::new(
                StatusCode::BAD_REQUEST,
                "Invalid request",
                "PostgreSQL did not accept the body.",
            ),
            Error::StaleToken(_) | Error::NotProcessing(_) => Problem::new(
                StatusCode::CONFLICT,
                "This attempt lost its claim on the Idempotency-Key",
                "Another attempt took the key over; retry to get its result.",
            )
            .retry_after(1),
            Error::ReadOnly(_) => {
                Problem::new(StatusCode::SERVICE_UNAVAILABLE, "Database is read-only", "Retry later.").retry_after(1)
            }
            Error::RowSecurityOff(_) => {
                log::error!("{e}");
                Problem::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Service unavailable",
                    "The idempotency keys are unavailable until an operator restores them.",
                )
                .retry_after(60)
            }
            Error::KeyNotFound(f) => Problem::new(StatusCode::NOT_FOUND, "Idempotency-Key not found", detail(f)),
            _ => {
                log::error!("request failed: {e}");
                Problem::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Internal error",
                    "The request was not processed.",
                )
            }
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut r = Response::new(Body::from(self.body()));
        *r.status_mut() = self.status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("application/problem+json"));
        if let Some(s) = self.retry_after {
            r.headers_mut().insert(RETRY_AFTER, HeaderValue::from(s));
        }
        r
    }
}

impl IntoResponse for Error {
    fn into_response(self) -> Response {
        Problem::from_error(&self).into_response()
    }
}

impl From<Error> for Problem {
    fn from(e: Error) -> Problem {
        Problem::from_error(&e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problem_json_and_headers() {
        let p = Problem::new(StatusCode::CONFLICT, "Busy", "Retry.").retry_after(0);
        assert_eq!(p.retry_after, Some(1));
        let v: serde_json::Value = serde_json::from_str(&p.body()).unwrap();
        assert_eq!(v["type"], "about:blank");
        assert_eq!(v["title"], "Busy");
        assert_eq!(v["status"], 409);
        assert_eq!(v["detail"], "Retry.");
        let r = p.into_response();
        assert_eq!(r.status(), StatusCode::CONFLICT);
        assert_eq!(r.headers()[CONTENT_TYPE], "application/problem+json");
        assert_eq!(r.headers()[RETRY_AFTER], "1");
    }

    #[test]
    fn pool_errors_are_500_without_details() {
        let p = Problem::from_error(&Error::Pool("connection refused to 10.0.0.1".into()));
        assert_eq!(p.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(!p.body().contains("10.0.0.1"));
    }
}
