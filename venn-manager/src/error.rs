//! The manager's domain error: what the service layer fails with, in its own terms.
//! The HTTP layer maps it to a status and the protocol's JSON body
//! (`api/error.rs`); nothing here knows about HTTP.

use venn_core::CoreError;
use venn_core::admission::AdmissionPlan;

/// Why a manager operation failed.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The core refused the input (unknown job or round, duplicate, invalid, …).
    #[error(transparent)]
    Core(#[from] CoreError),
    /// A request field is invalid.
    #[error("{field}: {reason}")]
    Invalid {
        /// The field, dotted for nested ones (`statement.rounds`).
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A missing or wrong token.
    #[error("missing or wrong {0}")]
    Unauthorized(&'static str),
    /// No such job, round or task.
    #[error("{0}")]
    NotFound(String),
    /// Admission control declined the job; nothing was registered.
    #[error("declined by admission control, nothing was registered: {reason}")]
    Declined {
        /// Why, in words.
        reason: String,
        /// The best plan there was (`None` while no capacity is forecast).
        quote: Option<AdmissionPlan>,
    },
    /// Admission control evicted the job.
    #[error("job {job} was evicted by admission control")]
    Evicted {
        /// The job.
        job: u64,
        /// When (epoch seconds), if recorded.
        at: Option<f64>,
    },
    /// The registering credential holds its quota of live jobs already.
    #[error("{credential} holds {quota} live jobs, its quota: end one first")]
    Quota {
        /// Whose quota, in words (never the secret itself).
        credential: String,
        /// The quota.
        quota: usize,
    },
    /// The SQLite store failed.
    #[error("store: {0}")]
    Store(#[from] rusqlite::Error),
    /// A write queued to the store's writer did not commit.
    #[error("store: {0}")]
    Write(#[from] crate::writer::WriteError),
    /// Anything else that is the manager's fault.
    #[error("{0}")]
    Internal(String),
}

impl ServiceError {
    /// An invalid field.
    pub fn field(field: impl Into<String>, reason: impl Into<String>) -> Self {
        ServiceError::Invalid {
            field: field.into(),
            reason: reason.into(),
        }
    }

    /// No such job, round or task.
    pub fn not_found(message: impl Into<String>) -> Self {
        ServiceError::NotFound(message.into())
    }

    /// Did the store fail, or refuse, because the disk is full (SQLITE_FULL)? The HTTP
    /// layer answers 507 `storage_full`.
    pub fn storage_full(&self) -> bool {
        match self {
            ServiceError::Store(e) => crate::writer::is_disk_full(e),
            ServiceError::Write(e) => e.is_disk_full(),
            _ => false,
        }
    }

    /// Did the store fail at its files (an I/O error), or refuse until the manager has
    /// rebuilt its state, so that nothing was stored and a retry may succeed? The HTTP
    /// layer answers 503 `storage_unavailable`.
    pub fn storage_unavailable(&self) -> bool {
        match self {
            ServiceError::Store(e) => crate::writer::is_io_error(e),
            ServiceError::Write(e) => e.is_storage_failure(),
            _ => false,
        }
    }

    /// A fault of the manager's own.
    pub fn internal(err: impl std::fmt::Display) -> Self {
        ServiceError::Internal(err.to_string())
    }
}
