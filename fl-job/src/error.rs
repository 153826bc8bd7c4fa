//! Errors of a job's run: the training stack's ([`fl_task::FlError`]) and the runner's own
//! (the manager, the job's server, its report files).

use fl_task::FlError;

/// What can end a job's run.
#[derive(Debug, thiserror::Error)]
pub enum JobError {
    /// Training, aggregation, weights or a bad configuration.
    #[error(transparent)]
    Task(#[from] FlError),
    /// The manager (or the network) failed the job: the typed answer, so a declined
    /// job's quote survives ([`ClientError::quote`](venn_api::client::ClientError::quote)).
    #[error(transparent)]
    Api(#[from] venn_api::client::ClientError),
    /// The job's own server could not start or serve.
    #[error("job server: {0}")]
    Server(String),
    /// The manager broke the protocol (e.g. a round number it should not have).
    #[error("manager: {0}")]
    Manager(String),
    /// A report file could not be written or read.
    #[error("io: {0}")]
    Io(String),
}

impl JobError {
    /// A job configuration that cannot run.
    pub(crate) fn config(why: impl Into<String>) -> Self {
        JobError::Task(FlError::Config(why.into()))
    }

    /// Updates that cannot be combined into a usable model.
    pub(crate) fn fedavg(why: impl Into<String>) -> Self {
        JobError::Task(FlError::FedAvg(why.into()))
    }
}
