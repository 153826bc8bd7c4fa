//! Errors of the training stack (the job runner's own are fl-job's `JobError`).

/// What can go wrong in training, aggregation or weight exchange.
#[derive(Debug, thiserror::Error)]
pub enum FlError {
    /// A model name or width that does not describe a model.
    #[error("bad model: {0}")]
    BadModel(String),
    /// Weight bytes that are not ours, are truncated, or belong to another model.
    #[error("weights: {0}")]
    Weights(String),
    /// Models that cannot be averaged together.
    #[error("fedavg: {0}")]
    FedAvg(String),
    /// A training configuration that cannot run.
    #[error("bad training config: {0}")]
    Config(String),
    /// The backend failed to read a tensor back.
    #[error("tensor read: {0}")]
    Tensor(String),
    /// A file could not be written or read.
    #[error("io: {0}")]
    Io(String),
}
