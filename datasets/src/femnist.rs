//! The FEMNIST layout (`train/`, `test/`, `partial/`) and its stats.

use std::collections::BTreeSet;
use std::path::Path;

use serde::Serialize;

use crate::error::LeafError;
use crate::leaf::{IMAGE_PIXELS, Writer, read_leaf};
use crate::location::{DataKind, Located, locate_data};
use crate::samples::Samples;
use crate::shuffle::shuffled_indices;

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

    /// The fixed evaluation set: `n` samples drawn without replacement from the test parts
    /// of every writer, by `seed` alone (the same set for every job, policy and run seed
    /// that asks with the same `n` and `seed`), in their stored order. All test samples
    /// when there are at most `n`.
    ///
    /// Why a sample of every writer's test part rather than the test parts of a few
    /// writers: FEMNIST is non-IID by writer, so a few writers' handwriting is a biased
    /// and small (a few hundred samples) yardstick; 2,000 samples over all writers give a
    /// 95 % interval of about ±2 points at 60 % accuracy.
    pub fn eval_set(&self, n: usize, seed: u64) -> Samples {
        let total: usize = self.test.iter().map(Writer::len).sum();
        let mut pick = shuffled_indices(total, seed);
        pick.truncate(n.min(total));
        pick.sort_unstable();
        let mut out = Samples {
            images: Vec::with_capacity(pick.len() * IMAGE_PIXELS),
            labels: Vec::with_capacity(pick.len()),
        };
        let (mut w, mut base) = (0usize, 0usize);
        for i in pick {
            while i >= base + self.test[w].len() {
                base += self.test[w].len();
                w += 1;
            }
            let writer = &self.test[w];
            let k = i - base;
            out.images
                .extend_from_slice(&writer.images[k * IMAGE_PIXELS..(k + 1) * IMAGE_PIXELS]);
            out.labels.push(writer.labels[k]);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writer `id` with `n` samples whose pixels and labels encode (writer, sample).
    fn writer(w: u8, n: u8) -> Writer {
        Writer {
            id: format!("f{w:04}_00"),
            images: (0..n).flat_map(|k| [w * 16 + k; IMAGE_PIXELS]).collect(),
            labels: (0..n).map(|k| w * 16 + k).collect(),
        }
    }

    #[test]
    fn eval_set_is_fixed_by_seed_and_spans_writers() {
        let data = Femnist {
            test: (0..10).map(|w| writer(w, 10)).collect(),
            ..Femnist::default()
        };
        let a = data.eval_set(40, 3);
        assert_eq!(a, data.eval_set(40, 3));
        assert_ne!(a, data.eval_set(40, 4));
        assert_eq!(a.labels.len(), 40);
        assert_eq!(a.images.len(), 40 * IMAGE_PIXELS);
        // Images travel with their labels, each sample at most once.
        for (k, &l) in a.labels.iter().enumerate() {
            assert!(
                a.images[k * IMAGE_PIXELS..(k + 1) * IMAGE_PIXELS]
                    .iter()
                    .all(|&p| p == l)
            );
        }
        let mut seen = a.labels.clone();
        seen.dedup();
        assert_eq!(seen.len(), 40);
        // 40 of 100 samples drawn at random touch most of the ten writers.
        let writers: BTreeSet<u8> = a.labels.iter().map(|l| l / 16).collect();
        assert!(writers.len() >= 8, "{writers:?}");
        // Asking for more than there is gives everything.
        assert_eq!(data.eval_set(1000, 3).labels.len(), 100);
    }
}
