//! Errors raised while downloading and converting FEMNIST; each names the file or URL.

use std::path::PathBuf;

use crate::error::LeafError;

/// Everything that can go wrong in [`crate::download`].
#[derive(Debug, thiserror::Error)]
pub enum DownloadError {
    /// The request could not be made or the connection failed before a response.
    #[error("GET {url}: {message}")]
    Http {
        /// The URL requested.
        url: String,
        /// What the HTTP client said.
        message: String,
    },
    /// The server answered with an unexpected status.
    #[error("GET {url}: HTTP status {status}")]
    Status {
        /// The URL requested.
        url: String,
        /// The status code.
        status: u16,
    },
    /// The file listing could not be understood or holds no usable file.
    #[error("file listing {url}: {message}")]
    Listing {
        /// The listing URL.
        url: String,
        /// What is wrong with it.
        message: String,
    },
    /// A local file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The connection ended before the whole file arrived; the partial file is kept.
    #[error(
        "{url}: transfer stopped after {got} of {expected} bytes ({reason}); \
         the partial file {part} is kept: rerun to resume"
    )]
    Truncated {
        /// The URL being fetched.
        url: String,
        /// The `.part` file kept for resuming.
        part: PathBuf,
        /// Bytes on disk so far.
        got: u64,
        /// The advertised size.
        expected: u64,
        /// What ended the transfer.
        reason: String,
    },
    /// The downloaded file has the wrong SHA-256; the partial file was deleted.
    #[error(
        "{file}: SHA-256 mismatch: expected {expected}, got {actual}; the download was deleted"
    )]
    Checksum {
        /// The file name.
        file: String,
        /// The advertised SHA-256 (hex).
        expected: String,
        /// The SHA-256 of what arrived (hex).
        actual: String,
    },
    /// The downloaded file has the wrong size; the partial file was deleted.
    #[error(
        "{file}: size mismatch: expected {expected} bytes, got {actual}; the download was deleted"
    )]
    Size {
        /// The file name.
        file: String,
        /// The advertised size.
        expected: u64,
        /// The size that arrived.
        actual: u64,
    },
    /// A parquet file could not be read.
    #[error("{path}: parquet: {message}")]
    Parquet {
        /// The parquet file.
        path: PathBuf,
        /// What the parquet reader said.
        message: String,
    },
    /// One row of a parquet file is not a FEMNIST sample (missing column, bad label,
    /// undecodable or wrongly sized image).
    #[error("{path}: row {row}: {message}")]
    Row {
        /// The parquet file.
        path: PathBuf,
        /// The 0-based row number within that file.
        row: u64,
        /// What is wrong.
        message: String,
    },
    /// The converted data could not be read back.
    #[error(transparent)]
    Leaf(#[from] LeafError),
}

/// Wrap an I/O error with its path.
pub(crate) fn io_err(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> DownloadError {
    let path = path.into();
    move |source| DownloadError::Io { path, source }
}
