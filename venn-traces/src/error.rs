//! The error type shared by every trace loader in this crate.
//!
//! Messages always start with the file (and, when one line is at fault, its
//! 1-based line number counting the header) so a user can jump straight to it.

use std::path::PathBuf;

/// Why an input file or option could not be used.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The file could not be opened or read.
    #[error("{}: cannot read: {source}", .file.display())]
    Io {
        /// The file being read.
        file: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// One line of the file is wrong.
    #[error("{}:{}: {}", .file.display(), .line, .what)]
    Malformed {
        /// The file being read.
        file: PathBuf,
        /// 1-based line number, the header being line 1.
        line: usize,
        /// What is wrong with the line.
        what: String,
    },
    /// The file as a whole is wrong (empty, wrong row count, inconsistent record).
    #[error("{}: {}", .file.display(), .what)]
    Invalid {
        /// The file being read.
        file: PathBuf,
        /// What is wrong with it.
        what: String,
    },
    /// A `--workload` name that is neither a known workload nor an existing file.
    #[error("unknown workload `{name}`: expected one of {known}, or a path to a job CSV")]
    UnknownWorkload {
        /// The name that was given.
        name: String,
        /// The accepted names, comma separated.
        known: String,
    },
    /// An option value that cannot work (for example a negative rate).
    #[error("invalid option: {0}")]
    InvalidOption(String),
}
