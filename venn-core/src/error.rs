//! Errors the resource manager returns for inputs it cannot accept.

use crate::ids::{DeviceId, JobId, RoundId};
use thiserror::Error;

/// Why an input was rejected. The state is unchanged whenever an error is returned.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum CoreError {
    /// No such job (never registered, or already removed).
    #[error("unknown job {0}")]
    UnknownJob(JobId),
    /// A job with this id already exists.
    #[error("job {0} already exists")]
    DuplicateJob(JobId),
    /// The job has no open round with this number.
    #[error("{job} has no open {round}")]
    UnknownRound {
        /// The job.
        job: JobId,
        /// The round named.
        round: RoundId,
    },
    /// The device holds no task in this round.
    #[error("{device} has no task in {round} of {job}")]
    UnknownTask {
        /// The job.
        job: JobId,
        /// The round.
        round: RoundId,
        /// The device named.
        device: DeviceId,
    },
    /// The task already reached a final state.
    #[error("the task of {device} in {round} of {job} is already {state}")]
    TaskClosed {
        /// The job.
        job: JobId,
        /// The round.
        round: RoundId,
        /// The device.
        device: DeviceId,
        /// Its final state.
        state: &'static str,
    },
    /// The job already has an open round (one round at a time).
    #[error("{job} already has {round} open")]
    RoundAlreadyOpen {
        /// The job.
        job: JobId,
        /// The open round.
        round: RoundId,
    },
    /// A field of an input is out of range.
    #[error("invalid {field}: {reason}")]
    Invalid {
        /// The offending field, as named in the API.
        field: &'static str,
        /// What is wrong.
        reason: String,
    },
    /// Every group slot is taken.
    #[error("too many distinct job requirements at once (limit {0})")]
    TooManyGroups(usize),
    /// No policy has this name (the second field lists the known names).
    #[error("unknown policy {0:?} (known: {1})")]
    UnknownPolicy(String, String),
    /// A policy's arguments do not fit its parameter type.
    #[error("invalid arguments for policy {policy:?}: {reason}")]
    PolicyArgs {
        /// The policy.
        policy: String,
        /// What is wrong (e.g. the unknown key).
        reason: String,
    },
    /// A policy of this name is registered already.
    #[error("a policy named {0:?} is registered already")]
    DuplicatePolicy(String),
}

impl CoreError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        CoreError::Invalid {
            field,
            reason: reason.into(),
        }
    }
}
