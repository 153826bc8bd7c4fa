//! Errors raised while finding and reading LEAF / FEMNIST data.

use std::path::PathBuf;

/// Everything that can go wrong while locating or loading LEAF data.
///
/// Each variant names the file and, where it applies, the writer, so a bad shard
/// can be found without a debugger.
#[derive(Debug, thiserror::Error)]
pub enum LeafError {
    /// The file or directory could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The path that failed.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid JSON of the LEAF shape (syntax error, wrong types,
    /// or a bad value inside one writer's `x`/`y`).
    #[error("{path}: not a valid LEAF JSON file: {message}")]
    Parse {
        /// The file being parsed.
        path: PathBuf,
        /// What the parser said, including the writer where known.
        message: String,
    },
    /// The JSON parsed but its parts disagree (counts, missing writers, labels).
    #[error("{path}: writer {user}: {what}")]
    Malformed {
        /// The file holding the bad writer.
        path: PathBuf,
        /// The writer id (`-` when the problem is not tied to one writer).
        user: String,
        /// What is wrong.
        what: String,
    },
    /// A path held no LEAF files at all.
    #[error("no LEAF files (*.json or *.json.gz) under {0}")]
    Empty(PathBuf),
    /// The same writer appears twice in one split.
    #[error("writer {user} appears in both {first} and {second}")]
    DuplicateWriter {
        /// The writer id.
        user: String,
        /// The first file holding it.
        first: PathBuf,
        /// The second file holding it.
        second: PathBuf,
    },
    /// A flag or `$VENN_DATA` names a directory that holds no data of the kind asked for.
    #[error(
        "data not found: {tried}. Fix the flag or $VENN_DATA, or unset it to use the built-in data"
    )]
    NotFound {
        /// The path given, and what it lacks.
        tried: String,
    },
}
