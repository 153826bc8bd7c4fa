//! The kinds of data the testbed reads, and where the user's directories are: a leaf that
//! the lookup (`location.rs`) and the built-in copies (`embedded.rs`) both use.

use std::fmt;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A kind of data the testbed reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DataKind {
    /// FEMNIST in the LEAF layout (`train/`, `test/`).
    Femnist,
    /// The trace tables (job catalog, device specs, eligibility, capacity).
    Traces,
}

impl DataKind {
    /// The directory name under a data directory.
    pub fn dir_name(self) -> &'static str {
        match self {
            DataKind::Femnist => "femnist",
            DataKind::Traces => "traces",
        }
    }

    /// Whether `dir` holds this kind of data.
    pub(crate) fn holds(self, dir: &Path) -> bool {
        match self {
            DataKind::Femnist => dir.join("train").is_dir(),
            DataKind::Traces => dir.join("venn_job_catalog.csv").is_file(),
        }
    }

    /// The other kind.
    pub(crate) fn other(self) -> DataKind {
        match self {
            DataKind::Femnist => DataKind::Traces,
            DataKind::Traces => DataKind::Femnist,
        }
    }

    /// `p` itself if it holds this kind, else `p/<dir_name>`, else — when `p` holds the
    /// other kind, as `$VENN_DATA` naming the FEMNIST directory does — the sibling
    /// `p/../<dir_name>`.
    pub(crate) fn resolve(self, p: &Path) -> Option<PathBuf> {
        let sibling = p
            .parent()
            .filter(|_| self.other().holds(p))
            .map(|d| d.join(self.dir_name()));
        [
            Some(p.to_path_buf()),
            Some(p.join(self.dir_name())),
            sibling,
        ]
        .into_iter()
        .flatten()
        .find(|d| self.holds(d))
    }
}

impl fmt::Display for DataKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DataKind::Femnist => "FEMNIST",
            DataKind::Traces => "trace tables",
        })
    }
}

/// An XDG base directory: `$var` if set and non-empty, else `$HOME/<home_default>`.
pub(crate) fn xdg_dir(var: &str, home_default: &str) -> Option<PathBuf> {
    let non_empty = |k: &str| std::env::var_os(k).filter(|v| !v.is_empty());
    non_empty(var)
        .map(PathBuf::from)
        .or_else(|| non_empty("HOME").map(|h| PathBuf::from(h).join(home_default)))
}
