//! The API's error type: every failure becomes an HTTP status with a JSON body
//! `{"error": {"code", "message", "field"?}}` that names what was wrong.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::{Map, Value};
use venn_core::CoreError;
use venn_core::admission::Plan;

/// An error answered to an API client.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct AppError {
    /// HTTP status.
    pub status: StatusCode,
    /// Stable machine-readable code.
    pub code: &'static str,
    /// Human-readable explanation.
    pub message: String,
    /// The request field at fault, when one is.
    pub field: Option<String>,
    /// More members of the `error` object (e.g. a declined job's `reason` and `quote`).
    pub detail: Map<String, Value>,
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    field: Option<&'a str>,
    #[serde(flatten)]
    detail: &'a Map<String, Value>,
}

impl AppError {
    /// An error with a status, code and message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        AppError {
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
        AppError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_field",
            message: format!("{field}: {}", message.into()),
            field: Some(field),
            detail: Map::new(),
        }
    }

    /// A 401 for a missing or wrong token.
    pub fn unauthorized(what: &str) -> Self {
        AppError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            format!("missing or wrong {what}"),
        )
    }

    /// A 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        AppError::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A 409 for a job the admission controller declined: `reason` in words and `quote`,
    /// the best plan there was (`null` when no capacity is forecast).
    pub fn declined(reason: &str, quote: Option<Plan>) -> Self {
        let mut e = AppError::new(
            StatusCode::CONFLICT,
            "declined",
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
        let mut e = AppError::new(
            StatusCode::GONE,
            "evicted",
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
        AppError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "internal error; see the manager's log",
        )
    }
}

impl From<CoreError> for AppError {
    fn from(e: CoreError) -> Self {
        let msg = e.to_string();
        match e {
            CoreError::UnknownJob(_)
            | CoreError::UnknownRound { .. }
            | CoreError::UnknownTask { .. } => AppError::not_found(msg),
            CoreError::DuplicateJob(_)
            | CoreError::RoundAlreadyOpen { .. }
            | CoreError::TaskClosed { .. } => AppError::new(StatusCode::CONFLICT, "conflict", msg),
            CoreError::Invalid { field, reason } => AppError::field(field, reason),
            CoreError::TooManyGroups(_) => {
                AppError::new(StatusCode::SERVICE_UNAVAILABLE, "too_many_groups", msg)
            }
            CoreError::UnknownPolicy(..)
            | CoreError::PolicyArgs { .. }
            | CoreError::DuplicatePolicy(_) => AppError::field("policy", msg),
        }
    }
}

impl From<rusqlite::Error> for AppError {
    fn from(e: rusqlite::Error) -> Self {
        AppError::internal(e)
    }
}

impl IntoResponse for AppError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                message: &self.message,
                field: self.field.as_deref(),
                detail: &self.detail,
            },
        };
        (self.status, Json(body)).into_response()
    }
}
