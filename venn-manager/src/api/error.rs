//! The HTTP face of the manager's errors: [`ServiceError`] → status + the protocol's
//! JSON error body ([`HttpError`]), so handlers answer domain errors with `?`.

use crate::error::ServiceError;
use axum::http::StatusCode;
use venn_api::{HttpError, codes};
use venn_core::CoreError;

/// The code of a 507: the manager's disk is full, nothing of the request was stored.
pub const STORAGE_FULL: &str = "storage_full";

impl From<ServiceError> for HttpError {
    fn from(e: ServiceError) -> Self {
        if e.storage_full() {
            // Not logged per request: the store's writer logged the failure once, with
            // the database's path.
            return HttpError::new(
                StatusCode::INSUFFICIENT_STORAGE,
                STORAGE_FULL,
                "the manager's disk is full: nothing of this request was stored; retry later",
            );
        }
        match e {
            ServiceError::Core(c) => core(c),
            ServiceError::Invalid { field, reason } => HttpError::field(field, reason),
            ServiceError::Unauthorized(what) => HttpError::unauthorized(what),
            ServiceError::NotFound(m) => HttpError::not_found(m),
            ServiceError::Declined { reason, quote } => HttpError::declined(&reason, quote),
            ServiceError::Evicted { job, at } => HttpError::evicted(job, at),
            q @ ServiceError::Quota { .. } => {
                HttpError::new(StatusCode::FORBIDDEN, codes::QUOTA_EXCEEDED, q.to_string())
            }
            ServiceError::Store(e) => HttpError::internal(e),
            ServiceError::Write(e) => HttpError::internal(e),
            ServiceError::Internal(e) => HttpError::internal(e),
        }
    }
}

fn core(e: CoreError) -> HttpError {
    let msg = e.to_string();
    match e {
        CoreError::UnknownJob(_)
        | CoreError::UnknownRound { .. }
        | CoreError::UnknownTask { .. } => HttpError::not_found(msg),
        CoreError::DuplicateJob(_)
        | CoreError::RoundAlreadyOpen { .. }
        | CoreError::TaskClosed { .. } => HttpError::conflict(codes::CONFLICT, msg),
        CoreError::Invalid { field, reason } => HttpError::field(field, reason),
        CoreError::TooManyGroups(_) => {
            HttpError::new(StatusCode::SERVICE_UNAVAILABLE, codes::TOO_MANY_GROUPS, msg)
        }
        CoreError::UnknownPolicy(..)
        | CoreError::PolicyArgs { .. }
        | CoreError::DuplicatePolicy(_) => HttpError::field("policy", msg),
    }
}
