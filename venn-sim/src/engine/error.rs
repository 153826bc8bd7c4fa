//! The engine's error type.

use venn_traces::InputError;

/// Why a simulation could not be set up or run.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A configuration value is unusable.
    #[error("configuration: {0}")]
    Config(String),
    /// An input file or generator failed.
    #[error(transparent)]
    Input(#[from] InputError),
    /// The core rejected an input; a simulator bug or an invalid job.
    #[error("venn-core: {0}")]
    Core(#[from] venn_core::CoreError),
    /// Writing results failed.
    #[error("{path}: {source}")]
    Io {
        /// The file being written.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}
