//! Where the testbed's data comes from: one lookup order for FEMNIST and for the trace
//! tables, shared by every binary.
//!
//! Order, first match wins:
//! 1. a flag (`--data`, `--traces-dir`, a config's `data` key);
//! 2. `$VENN_DATA` (`$VENN_DATA_DIR` is accepted as its older name);
//! 3. a downloaded data set in the user's data directory ([`user_data_dir`], where
//!    `femnist download` puts the full FEMNIST);
//! 4. the team's shared data beside the workspace (`../shared/data`);
//! 5. the copy this repository carries ([`crate::embedded`]), always present.
//!
//! A flag or variable that names no data is an error rather than a silent fall-through:
//! a user who points at data expects that data. Binaries call [`Located::announce`] so the
//! run says once which data it used.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

pub use crate::data_kind::DataKind;
use crate::data_kind::xdg_dir;
use crate::embedded;
use crate::error::LeafError;

/// Environment variable naming the data directory (holding `femnist/` and `traces/`), or
/// the FEMNIST directory itself.
pub const DATA_ENV: &str = "VENN_DATA";
/// The older name of [`DATA_ENV`], still honoured when `VENN_DATA` is unset.
pub const LEGACY_DATA_ENV: &str = "VENN_DATA_DIR";

/// Which step of the lookup order found the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag or config key.
    Flag,
    /// `$VENN_DATA` (or `$VENN_DATA_DIR`).
    Env,
    /// The user's data directory (`femnist download`).
    Downloaded,
    /// `../shared/data` beside the workspace.
    Shared,
    /// The copy built into the binaries and carried by the repository.
    Embedded,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Flag => "given by flag",
            Origin::Env => "from $VENN_DATA",
            Origin::Downloaded => "downloaded",
            Origin::Shared => "shared data beside the workspace",
            Origin::Embedded => "the copy built into this program",
        })
    }
}

/// Data found on disk, and how it was found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Located {
    /// What kind of data.
    pub kind: DataKind,
    /// The directory holding it.
    pub path: PathBuf,
    /// Which lookup step found it.
    pub origin: Origin,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} ({})",
            self.kind,
            self.path.display(),
            self.origin
        )
    }
}

impl Located {
    /// Print to stderr which data this process uses — once per kind and path, however
    /// many times it is looked up.
    pub fn announce(&self) -> &Self {
        static SEEN: Mutex<Vec<(DataKind, PathBuf)>> = Mutex::new(Vec::new());
        let mut seen = SEEN.lock().unwrap_or_else(|e| e.into_inner());
        let key = (self.kind, self.path.clone());
        if !seen.contains(&key) {
            eprintln!("data: {self}");
            seen.push(key);
        }
        self
    }
}

/// The user's data directory for this project: `$XDG_DATA_HOME/venn`, else
/// `$HOME/.local/share/venn`; `None` when neither variable is set.
pub fn user_data_dir() -> Option<PathBuf> {
    xdg_dir("XDG_DATA_HOME", ".local/share").map(|d| d.join("venn"))
}

/// The shared data directories tried in step 4: relative to the current directory (the
/// workspace root) and beside the workspace this crate was built in.
fn shared_dirs() -> [PathBuf; 2] {
    [
        PathBuf::from("../shared/data"),
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data"),
    ]
}

/// Find `kind` by the module's lookup order; `flag` is step 1.
pub fn locate_data(kind: DataKind, flag: Option<&Path>) -> Result<Located, LeafError> {
    let explicit = flag.map(|p| (p.to_path_buf(), Origin::Flag)).or_else(|| {
        std::env::var_os(DATA_ENV)
            .or_else(|| std::env::var_os(LEGACY_DATA_ENV))
            .filter(|v| !v.is_empty())
            .map(|v| (PathBuf::from(v), Origin::Env))
    });
    if let Some((p, origin)) = explicit {
        return kind
            .resolve(&p)
            .map(|path| Located { kind, path, origin })
            .ok_or_else(|| LeafError::NotFound {
                tried: format!("{} (holds no {kind})", p.display()),
            });
    }
    let found = |dirs: &[PathBuf], origin| {
        dirs.iter()
            .map(|d| d.join(kind.dir_name()))
            .find(|d| kind.holds(d))
            // `a/b/../../shared` would be an unreadable thing to print and record.
            .map(|d| std::fs::canonicalize(&d).unwrap_or(d))
            .map(|path| Located { kind, path, origin })
    };
    if let Some(l) = user_data_dir().and_then(|d| found(&[d], Origin::Downloaded)) {
        return Ok(l);
    }
    if let Some(l) = found(&shared_dirs(), Origin::Shared) {
        return Ok(l);
    }
    Ok(Located {
        kind,
        path: embedded::materialize(kind)?,
        origin: Origin::Embedded,
    })
}

/// Find the FEMNIST directory (see the module docs for the order).
///
/// `flag` (a `--data` argument) and `$VENN_DATA` may name the FEMNIST directory itself or
/// the data directory holding `femnist/`.
pub fn locate(flag: Option<&Path>) -> Result<PathBuf, LeafError> {
    locate_data(DataKind::Femnist, flag).map(|l| l.path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolve_accepts_the_dir_itself_its_parent_and_a_sibling() {
        let root = std::env::temp_dir().join(format!("venn-location-{}", std::process::id()));
        let femnist = root.join("femnist");
        let traces = root.join("traces");
        std::fs::create_dir_all(femnist.join("train")).unwrap();
        std::fs::create_dir_all(&traces).unwrap();
        std::fs::write(traces.join("venn_job_catalog.csv"), "x\n").unwrap();
        assert_eq!(DataKind::Femnist.resolve(&femnist), Some(femnist.clone()));
        assert_eq!(DataKind::Femnist.resolve(&root), Some(femnist.clone()));
        assert_eq!(DataKind::Traces.resolve(&root), Some(traces.clone()));
        // $VENN_DATA naming the FEMNIST directory still finds the tables beside it.
        assert_eq!(DataKind::Traces.resolve(&femnist), Some(traces));
        assert_eq!(DataKind::Femnist.resolve(&root.join("nowhere")), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
