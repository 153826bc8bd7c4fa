//! Errors of the training stack.

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
    /// A file could not be written or read.
    #[error("io: {0}")]
    Io(String),
}
