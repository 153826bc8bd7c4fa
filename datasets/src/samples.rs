//! Sample views, the pixel transform the models see, and seeded mini-batching.

use crate::leaf::{IMAGE_PIXELS, Writer};
use crate::shuffle::shuffled_indices;

/// What a model sees for a stored pixel `k` (LEAF value `k/255`, 1.0 = white background):
/// `1 − k/255`, so the background is 0.0 and ink is near 1.0, as in MNIST. Inverting keeps
/// the mostly-white background from dominating every activation. No mean/std scaling:
/// the models start with BatchNorm.
pub fn model_pixel(k: u8) -> f32 {
    f32::from(255 - k) / 255.0
}

/// A borrowed set of samples: flat images (`len × 784` raw pixels) and labels.
#[derive(Debug, Clone, Copy)]
pub struct SampleView<'a> {
    /// Raw pixels, see [`Writer::images`].
    pub images: &'a [u8],
    /// Labels `0..62`.
    pub labels: &'a [u8],
}

/// An owned set of samples, e.g. many writers merged for centralized training.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Samples {
    /// Raw pixels, see [`Writer::images`].
    pub images: Vec<u8>,
    /// Labels `0..62`.
    pub labels: Vec<u8>,
}

impl Samples {
    /// All samples of `writers`, in order.
    pub fn from_writers<'a>(writers: impl IntoIterator<Item = &'a Writer>) -> Self {
        let mut s = Samples::default();
        for w in writers {
            s.images.extend_from_slice(&w.images);
            s.labels.extend_from_slice(&w.labels);
        }
        s
    }

    /// A borrowed view.
    pub fn view(&self) -> SampleView<'_> {
        SampleView {
            images: &self.images,
            labels: &self.labels,
        }
    }
}

impl Writer {
    /// A borrowed view of this writer's samples.
    pub fn view(&self) -> SampleView<'_> {
        SampleView {
            images: &self.images,
            labels: &self.labels,
        }
    }
}

/// A gathered mini-batch of raw samples.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Batch {
    /// `len × 784` raw pixels.
    pub images: Vec<u8>,
    /// Labels `0..62`.
    pub labels: Vec<u8>,
}

impl Batch {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// The pixels as the model sees them ([`model_pixel`]), `len × 784`.
    pub fn model_pixels(&self) -> Vec<f32> {
        self.images.iter().map(|&k| model_pixel(k)).collect()
    }
}

impl<'a> SampleView<'a> {
    /// Number of samples.
    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// Whether the view is empty.
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty()
    }

    /// Samples `range` of the view, in stored order.
    ///
    /// # Panics
    /// If `range` reaches past the view's end.
    pub fn slice(&self, range: std::ops::Range<usize>) -> SampleView<'a> {
        SampleView {
            images: &self.images[range.start * IMAGE_PIXELS..range.end * IMAGE_PIXELS],
            labels: &self.labels[range],
        }
    }

    /// Gather the samples at `idx` into a batch.
    pub fn gather(&self, idx: &[usize]) -> Batch {
        let mut images = Vec::with_capacity(idx.len() * IMAGE_PIXELS);
        let mut labels = Vec::with_capacity(idx.len());
        for &i in idx {
            images.extend_from_slice(&self.images[i * IMAGE_PIXELS..(i + 1) * IMAGE_PIXELS]);
            labels.push(self.labels[i]);
        }
        Batch { images, labels }
    }

    /// Mini-batches of `batch_size` (the last may be smaller) covering every sample once,
    /// shuffled by `seed`, or in stored order when `seed` is `None`.
    pub fn batches(
        &self,
        batch_size: usize,
        seed: Option<u64>,
    ) -> impl Iterator<Item = Batch> + 'a {
        assert!(batch_size > 0, "batch size must be positive");
        let order = match seed {
            Some(s) => shuffled_indices(self.len(), s),
            None => (0..self.len()).collect(),
        };
        let view = *self;
        (0..order.len().div_ceil(batch_size)).map(move |b| {
            let end = ((b + 1) * batch_size).min(order.len());
            view.gather(&order[b * batch_size..end])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(n: usize) -> Samples {
        Samples {
            images: (0..n * IMAGE_PIXELS)
                .map(|i| (i / IMAGE_PIXELS) as u8)
                .collect(),
            labels: (0..n as u8).collect(),
        }
    }

    #[test]
    fn transform_inverts_background() {
        assert_eq!(model_pixel(255), 0.0);
        assert_eq!(model_pixel(0), 1.0);
    }

    #[test]
    fn batches_cover_all_samples_once_and_replay_by_seed() {
        let s = samples(45);
        let b: Vec<Batch> = s.view().batches(20, Some(3)).collect();
        assert_eq!(b.iter().map(Batch::len).collect::<Vec<_>>(), [20, 20, 5]);
        let mut seen: Vec<u8> = b.iter().flat_map(|b| b.labels.clone()).collect();
        for batch in &b {
            for (i, &l) in batch.labels.iter().enumerate() {
                assert_eq!(batch.images[i * IMAGE_PIXELS], l, "image follows its label");
            }
        }
        seen.sort_unstable();
        assert_eq!(seen, (0..45).collect::<Vec<u8>>());
        let again: Vec<Batch> = s.view().batches(20, Some(3)).collect();
        assert_eq!(b, again);
        let plain: Vec<Batch> = s.view().batches(20, None).collect();
        assert_eq!(plain[0].labels, (0..20).collect::<Vec<u8>>());
    }
}
