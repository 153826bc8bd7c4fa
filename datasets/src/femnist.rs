//! The FEMNIST layout (`train/`, `test/`, `partial/`), finding it on disk, and its stats.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::LeafError;
use crate::leaf::{Writer, read_leaf};

/// Environment variable naming the data directory.
pub const DATA_ENV: &str = "VENN_DATA";

/// Which writers to load.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriterSet {
    /// The 396 complete writers under `train/` and `test/`.
    #[default]
    Main,
    /// The small writers under `partial/train` and `partial/test`.
    Partial,
    /// Both.
    All,
}

/// FEMNIST, split per writer into train and test parts (each sorted by writer id).
#[derive(Debug, Clone, Default)]
pub struct Femnist {
    /// Train parts, one per writer.
    pub train: Vec<Writer>,
    /// Test parts, one per writer (a writer may lack one).
    pub test: Vec<Writer>,
}

/// Counts printed by `femnist stats`; other tools parse this JSON.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Distinct writers over train and test.
    pub writers: usize,
    /// Train samples.
    pub train_samples: usize,
    /// Test samples.
    pub test_samples: usize,
    /// Distinct labels over train and test.
    pub classes: usize,
}

impl Femnist {
    /// Load `root/train` and `root/test` (and/or `root/partial/{train,test}`).
    pub fn load(root: &Path, set: WriterSet) -> Result<Self, LeafError> {
        let mut dirs = Vec::new();
        if set != WriterSet::Partial {
            dirs.push(root.to_path_buf());
        }
        if set != WriterSet::Main {
            dirs.push(root.join("partial"));
        }
        let mut out = Femnist::default();
        for d in dirs {
            out.train.extend(read_leaf(&d.join("train"))?);
            out.test.extend(read_leaf(&d.join("test"))?);
        }
        out.train.sort_by(|a, b| a.id.cmp(&b.id));
        out.test.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(out)
    }

    /// Writer ids over train and test, sorted.
    pub fn writer_ids(&self) -> Vec<&str> {
        let ids: BTreeSet<&str> = self
            .train
            .iter()
            .chain(&self.test)
            .map(|w| w.id.as_str())
            .collect();
        ids.into_iter().collect()
    }

    /// One writer's (train, test) partition.
    pub fn partition(&self, id: &str) -> (Option<&Writer>, Option<&Writer>) {
        fn find<'a>(ws: &'a [Writer], id: &str) -> Option<&'a Writer> {
            ws.binary_search_by(|w| w.id.as_str().cmp(id))
                .ok()
                .map(|i| &ws[i])
        }
        (find(&self.train, id), find(&self.test, id))
    }

    /// Writer, sample and class counts.
    pub fn stats(&self) -> Stats {
        let count = |ws: &[Writer]| ws.iter().map(Writer::len).sum();
        let classes: BTreeSet<u8> = self
            .train
            .iter()
            .chain(&self.test)
            .flat_map(|w| w.labels.iter().copied())
            .collect();
        Stats {
            writers: self.writer_ids().len(),
            train_samples: count(&self.train),
            test_samples: count(&self.test),
            classes: classes.len(),
        }
    }
}

/// `p` if it is a FEMNIST directory (has `train/`), else `p/femnist` if that is one.
fn femnist_dir(p: &Path) -> Option<PathBuf> {
    if p.join("train").is_dir() {
        Some(p.to_path_buf())
    } else if p.join("femnist").join("train").is_dir() {
        Some(p.join("femnist"))
    } else {
        None
    }
}

/// Find the FEMNIST directory.
///
/// Order: `flag` (a `--data` argument), then `$VENN_DATA`, then `../shared/data/femnist`
/// relative to the current directory (the workspace root), then the same path beside the
/// workspace this crate was built in. Each may name the FEMNIST directory itself or the
/// shared data directory holding `femnist/`. An explicit flag or variable that does not
/// point at data is an error rather than silently falling back.
pub fn locate(flag: Option<&Path>) -> Result<PathBuf, LeafError> {
    let explicit = flag
        .map(Path::to_path_buf)
        .or_else(|| std::env::var_os(DATA_ENV).map(PathBuf::from));
    let candidates: Vec<PathBuf> = match explicit {
        Some(p) => vec![p],
        None => vec![
            PathBuf::from("../shared/data/femnist"),
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/femnist"),
        ],
    };
    candidates
        .iter()
        .find_map(|p| femnist_dir(p))
        .ok_or_else(|| LeafError::NotFound {
            tried: candidates
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
        })
}
