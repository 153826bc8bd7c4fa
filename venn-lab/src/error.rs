//! Why an experiment could not run: the library's one error type.

use thiserror::Error;

/// Why an experiment could not run.
#[derive(Debug, Error)]
pub enum LabError {
    /// Setting something up failed.
    #[error("{0}")]
    Setup(String),
}
