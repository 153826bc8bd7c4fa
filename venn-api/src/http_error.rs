//! [`HttpError`]: an HTTP status with the protocol's JSON error body, answered by axum
//! handlers (`IntoResponse`). The manager maps its domain errors onto it; a job's server
//! answers its devices with it.

use crate::error::{ErrorBody, ErrorDetail, codes};
use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};
use venn_core::admission::AdmissionPlan;

/// An error answered to an API client.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct HttpError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code (see [`codes`]).
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// The request field at fault, when one is.
    pub field: Option<String>,
    /// More members of the `error` object (e.g. a declined job's `reason` and `quote`).
    pub detail: Map<String, Value>,
}

impl HttpError {
    /// An error with a status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        HttpError {
            status,
            code,
            message: message.into(),
            field: None,
            detail: Map::new(),
        }
    }

    /// A 422 about one field.
    pub fn field(field: impl Into<String>, message: impl Into<String>) -> Self {
        let field = field.into();
        HttpError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: codes::INVALID_FIELD,
            message: format!("{field}: {}", message.into()),
            field: Some(field),
            detail: Map::new(),
        }
    }

    /// A 401 for a missing or wrong token.
    pub fn unauthorized(what: &str) -> Self {
        HttpError::new(
            StatusCode::UNAUTHORIZED,
            codes::UNAUTHORIZED,
            format!("missing or wrong {what}"),
        )
    }

    /// A 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        HttpError::new(StatusCode::NOT_FOUND, codes::NOT_FOUND, message)
    }

    /// A 409.
    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        HttpError::new(StatusCode::CONFLICT, code, message)
    }

    /// A 409 for a job the admission controller declined: `reason` in words and `quote`,
    /// the best plan there was (`null` when no capacity is forecast).
    pub fn declined(reason: &str, quote: Option<AdmissionPlan>) -> Self {
        let mut e = HttpError::conflict(
            codes::DECLINED,
            format!("declined by admission control, nothing was registered: {reason}"),
        );
        e.detail.insert("reason".into(), Value::from(reason));
        e.detail.insert(
            "quote".into(),
            serde_json::to_value(quote).unwrap_or(Value::Null),
        );
        e
    }

    /// A 410 for a job the admission controller evicted at `at` (epoch seconds).
    pub fn evicted(job: u64, at: Option<f64>) -> Self {
        let mut e = HttpError::new(
            StatusCode::GONE,
            codes::EVICTED,
            format!(
                "job {job} was evicted by admission control: the devices that checked in fell \
                 short of the admitted jobs' usage, and the most recently admitted running jobs \
                 leave first; register it again"
            ),
        );
        e.detail
            .insert("evicted_at".into(), at.map_or(Value::Null, Value::from));
        e
    }

    /// A 500 that hides internals from the client but logs them.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        tracing::error!(error = %err, "internal error");
        HttpError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            codes::INTERNAL,
            "internal error; see the server's log",
        )
    }

    /// The wire body.
    pub fn body(&self) -> ErrorBody {
        ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message.clone(),
                field: self.field.clone(),
                detail: self.detail.clone(),
            },
        }
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.status, Json(self.body())).into_response()
    }
}
