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
        self.test_draw(0, n, seed)
    }

    /// A job's held-out samples: its evaluation set ([`Femnist::eval_set`]) and, when its
    /// task wants `calibration` samples, the calibration set after it in the same draw;
    /// refused when the test parts cannot supply all of those (the evaluation set alone may
    /// be smaller than asked, as `eval_set` allows).
    pub fn held_out(
        &self,
        eval_samples: usize,
        calibration: usize,
        seed: u64,
    ) -> Result<HeldOut, TooFewHeldOut> {
        let calibration_set = self.calibration_set(eval_samples, calibration, seed);
        if calibration_set.labels.len() < calibration {
            return Err(TooFewHeldOut {
                wanted: calibration,
                evaluated: eval_samples,
                available: calibration_set.labels.len(),
            });
        }
        Ok(HeldOut {
            test: self.eval_set(eval_samples, seed),
            calibration: calibration_set,
        })
    }

    /// The server's calibration set: the `n` test samples that come after the evaluation
    /// set's `skip` in the same seeded draw (so disjoint from `eval_set(skip, seed)`), in
    /// their stored order; fewer, possibly none, when the test parts run out. A server may
    /// hold such unlabeled samples to re-estimate BatchNorm statistics of averaged weights
    /// (`fl_task::recalibrate_bn`); they are never scored.
    pub fn calibration_set(&self, skip: usize, n: usize, seed: u64) -> Samples {
        self.test_draw(skip, n, seed)
    }

    /// Test samples `skip..skip + n` of the shuffle of all test samples seeded by `seed`,
    /// in stored order.
    fn test_draw(&self, skip: usize, n: usize, seed: u64) -> Samples {
        let total: usize = self.test.iter().map(Writer::len).sum();
        let mut pick = shuffled_indices(total, seed);
        pick.truncate(skip.saturating_add(n).min(total));
        pick.drain(..skip.min(pick.len()));
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

/// A job's held-out samples ([`Femnist::held_out`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HeldOut {
    /// The evaluation set every round is scored on.
    pub test: Samples,
    /// The server's unlabeled calibration set (its labels unused), disjoint from `test`;
    /// empty when the task wants none.
    pub calibration: Samples,
}

/// The data's test parts hold fewer samples than a job's evaluation and calibration sets
/// together.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "bn_calibration = {wanted} wants held-out samples beyond the {evaluated} evaluated, but the \
     data's test parts hold only {available} more"
)]
pub struct TooFewHeldOut {
    /// Calibration samples asked for.
    pub wanted: usize,
    /// The evaluation set's size.
    pub evaluated: usize,
    /// Test samples left after the evaluation set.
    pub available: usize,
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

    /// The calibration set continues the evaluation set's draw: disjoint from it, the two
    /// together the first `skip + n` samples of the draw, and short when the test parts end.
    #[test]
    fn calibration_set_is_disjoint_from_the_eval_set() {
        let data = Femnist {
            test: (0..10).map(|w| writer(w, 10)).collect(),
            ..Femnist::default()
        };
        let eval: BTreeSet<u8> = data.eval_set(40, 3).labels.into_iter().collect();
        let calib: BTreeSet<u8> = data.calibration_set(40, 30, 3).labels.into_iter().collect();
        assert_eq!(calib.len(), 30);
        assert!(eval.is_disjoint(&calib));
        let both: BTreeSet<u8> = data.eval_set(70, 3).labels.into_iter().collect();
        assert_eq!(both, &eval | &calib);
        assert_eq!(data.calibration_set(90, 30, 3).labels.len(), 10);
        assert!(data.calibration_set(200, 30, 3).labels.is_empty());
        let held = data.held_out(40, 30, 3).unwrap();
        assert_eq!(held.test, data.eval_set(40, 3));
        assert_eq!(held.calibration, data.calibration_set(40, 30, 3));
        let short = data.held_out(90, 30, 3).unwrap_err();
        assert_eq!(short.available, 10);
        assert!(short.to_string().contains("bn_calibration = 30"), "{short}");
    }
}
