//! The JSON error body every endpoint of the protocol answers with,
//! `{"error": {"code", "message", "field"?, …}}`, and the stable codes it carries.
//! Servers build it with [`crate::HttpError`] (feature `server`); clients read it back
//! through [`crate::client::ClientError`] (feature `client`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use venn_core::admission::AdmissionPlan;

/// Stable machine-readable error codes.
pub mod codes {
    /// A request field is invalid (422); `field` names it.
    pub const INVALID_FIELD: &str = "invalid_field";
    /// A body that is not the request's JSON shape (422): unknown or missing field.
    pub const INVALID_BODY: &str = "invalid_body";
    /// A body that is not JSON (400).
    pub const MALFORMED_JSON: &str = "malformed_json";
    /// A body without `content-type: application/json` (415).
    pub const UNSUPPORTED_MEDIA_TYPE: &str = "unsupported_media_type";
    /// A path parameter of the wrong type, e.g. a non-numeric job id (400).
    pub const INVALID_PATH: &str = "invalid_path";
    /// Any other unreadable request (400).
    pub const BAD_REQUEST: &str = "bad_request";
    /// Missing or wrong token (401).
    pub const UNAUTHORIZED: &str = "unauthorized";
    /// Unknown job, round, task or route (404).
    pub const NOT_FOUND: &str = "not_found";
    /// The path exists but not with this method (405); the `Allow` header lists those it has.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
    /// The request contradicts the current state (409).
    pub const CONFLICT: &str = "conflict";
    /// Admission control declined the job (409); carries `reason` and `quote`.
    pub const DECLINED: &str = "declined";
    /// Admission control evicted the job (410); carries `evicted_at`.
    pub const EVICTED: &str = "evicted";
    /// The round this request belongs to is closed (409, job protocol).
    pub const ROUND_CLOSED: &str = "round_closed";
    /// The task already uploaded (409, job protocol).
    pub const DUPLICATE: &str = "duplicate";
    /// An update the job cannot use (400, job protocol).
    pub const BAD_UPDATE: &str = "bad_update";
    /// The job has not registered yet (503, job protocol).
    pub const NOT_READY: &str = "not_ready";
    /// Too many distinct device requirements (503).
    pub const TOO_MANY_GROUPS: &str = "too_many_groups";
    /// A body over the size limit (413).
    pub const PAYLOAD_TOO_LARGE: &str = "payload_too_large";
    /// The request or its body took longer than the server allows (408).
    pub const TIMEOUT: &str = "timeout";
    /// The registering credential (operator token, or source address) holds its quota
    /// of live jobs (403).
    pub const QUOTA_EXCEEDED: &str = "quota_exceeded";
    /// The client's source sent more requests of this kind than it may (429, with
    /// `Retry-After`).
    pub const RATE_LIMITED: &str = "rate_limited";
    /// A server fault; details are in the server's log (500).
    pub const INTERNAL: &str = "internal";
}

/// The body of every error response.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// What went wrong.
    pub error: ErrorDetail,
}

/// The `error` object.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    /// Stable machine-readable code (see [`codes`]).
    pub code: String,
    /// Human-readable explanation.
    pub message: String,
    /// The request field at fault, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// More members (a declined job's `reason` and `quote`, an evicted job's
    /// `evicted_at`).
    #[serde(flatten)]
    pub detail: Map<String, Value>,
}

impl ErrorDetail {
    /// A declined job's quote: the best plan there was (`None` when none, or when this
    /// is not a `declined` error).
    pub fn quote(&self) -> Option<AdmissionPlan> {
        (self.code == codes::DECLINED)
            .then(|| self.detail.get("quote").cloned())
            .flatten()
            .and_then(|q| serde_json::from_value(q).ok())
    }

    /// A declined job's reason in words.
    pub fn reason(&self) -> Option<&str> {
        self.detail.get("reason").and_then(Value::as_str)
    }
}

impl std::fmt::Display for ErrorDetail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.message, self.code)
    }
}
