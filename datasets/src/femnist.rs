//! The FEMNIST layout (`train/`, `test/`, `partial/`) and its stats.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use crate::error::LeafError;
use crate::leaf::{Writer, read_leaf};
use crate::location::{DataKind, Located, locate_data};

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
    /// Where the data was found, when it was opened with [`Femnist::open`].
    pub source: Option<Located>,
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
    /// Find FEMNIST by the lookup order ([`locate_data`]: `flag`, `$VENN_DATA`, a
    /// downloaded set, `../shared/data`, the subset built in), say on stderr which one is
    /// used, and load `set` from it, recording the source.
    pub fn open(flag: Option<&Path>, set: WriterSet) -> Result<Self, LeafError> {
        let found = locate_data(DataKind::Femnist, flag)?;
        found.announce();
        let mut data = Self::load(&found.path, set)?;
        data.source = Some(found);
        Ok(data)
    }

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
