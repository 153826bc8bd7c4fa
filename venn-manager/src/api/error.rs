//! The HTTP face of the manager's errors: [`ServiceError`] → status + the protocol's
//! JSON error body ([`HttpError`]), so handlers answer domain errors with `?`.

use crate::error::ServiceError;
use axum::http::StatusCode;
use venn_api::{HttpError, codes};
use venn_core::CoreError;

/// The code of a 507: the manager's disk is full, nothing of the request was stored.
pub const STORAGE_FULL: &str = "storage_full";

/// The code of a 503 from the store: an I/O error of the database's files, or a write
/// refused until the manager has rebuilt its state after one failed.
pub const STORAGE_UNAVAILABLE: &str = "storage_unavailable";

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
        if e.storage_unavailable() {
            return HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                STORAGE_UNAVAILABLE,
                "the manager's storage failed: nothing of this request was stored; retry later",
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::writer::WriteError;
    use std::sync::Arc;

    fn sqlite(code: i32) -> Arc<rusqlite::Error> {
        Arc::new(rusqlite::Error::SqliteFailure(
            rusqlite::ffi::Error::new(code),
            None,
        ))
    }

    /// What a client may retry is told apart from the manager's own faults.
    #[test]
    fn storage_failures_are_507_or_503_and_the_rest_500() {
        let answer = |e: WriteError| {
            let h = HttpError::from(ServiceError::Write(e));
            (h.status, h.code.to_string())
        };
        const FULL: i32 = 13; // SQLITE_FULL
        const IOERR: i32 = 10; // SQLITE_IOERR
        const CONSTRAINT: i32 = 19; // SQLITE_CONSTRAINT
        assert_eq!(
            answer(WriteError::Sql(sqlite(FULL))),
            (StatusCode::INSUFFICIENT_STORAGE, STORAGE_FULL.into())
        );
        assert_eq!(
            answer(WriteError::Sql(sqlite(IOERR))),
            (StatusCode::SERVICE_UNAVAILABLE, STORAGE_UNAVAILABLE.into())
        );
        assert_eq!(
            answer(WriteError::Refused(sqlite(CONSTRAINT))),
            (StatusCode::SERVICE_UNAVAILABLE, STORAGE_UNAVAILABLE.into())
        );
        assert_eq!(
            answer(WriteError::Sql(sqlite(CONSTRAINT))).0,
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
