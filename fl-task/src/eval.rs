//! Evaluation: accuracy and mean cross-entropy on a sample set, without autodiff.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::Device;
use datasets::SampleView;
use serde::{Deserialize, Serialize};

use crate::model::Model;

/// Test metrics.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct EvalStats {
    /// Samples evaluated.
    pub samples: usize,
    /// Fraction classified correctly, in [0, 1].
    pub accuracy: f64,
    /// Mean cross-entropy.
    pub loss: f64,
}

impl EvalStats {
    /// The metrics of disjoint sample sets evaluated apart, combined as one evaluation of
    /// all of them: hits and losses weighted by each part's samples, added in part order.
    pub fn combine(parts: &[EvalStats]) -> EvalStats {
        let n: usize = parts.iter().map(|p| p.samples).sum();
        let (mut hits, mut loss) = (0.0f64, 0.0f64);
        for p in parts.iter().filter(|p| p.samples > 0) {
            // `accuracy` is hits / samples: the count comes back exactly.
            hits += (p.accuracy * p.samples as f64).round();
            loss += p.loss * p.samples as f64;
        }
        EvalStats {
            samples: n,
            accuracy: if n > 0 { hits / n as f64 } else { f64::NAN },
            loss: if n > 0 { loss / n as f64 } else { f64::NAN },
        }
    }
}

/// [`auto_eval_batch`] on a pool of one thread (a lane).
pub const LANE_EVAL_BATCH: usize = 50;

/// The evaluation batch when a task leaves it to us (`batch_size` 0): 50 samples on a pool
/// of one thread (a round's evaluations run one per thread, on lanes), 200 on a larger one.
///
/// Why it depends on the pool: on one thread the smaller batch keeps MobileNet-V2 ×0.25's
/// 28 × 28 layers in the caches, and over two threads the larger one gives each thread
/// enough work per layer. `fl-job bench --batch B`, inference samples/s, 2026-12-07 (Intel
/// Xeon, two runs each): 1 thread, batch 50 / 200 — MobileNet-V2 ×0.25 3,639–3,640 /
/// 3,190–3,214, ResNet-18 ×4 11,050–11,876 / 10,862–11,994, ResNet-18 ×16 1,649–1,814 /
/// 1,667–1,768; 2 threads — MobileNet-V2 ×0.25 5,747–5,851 / 5,941–6,264, ResNet-18 ×4
/// 16,593–16,667 / 19,519–20,618. The accuracy does not depend on it (evaluation
/// normalises with the running statistics, sample by sample).
pub fn auto_eval_batch() -> usize {
    if rayon::current_num_threads() == 1 {
        LANE_EVAL_BATCH
    } else {
        200
    }
}

/// Evaluate `model` on `data` in batches of `batch_size` ([`auto_eval_batch`] when 0), using
/// BatchNorm running statistics.
pub fn evaluate(
    model: &Model,
    data: SampleView<'_>,
    batch_size: usize,
    device: &Device,
) -> EvalStats {
    let model = model.valid().to_device(device);
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let (mut correct, mut loss_sum, mut n) = (0i64, 0.0f64, 0usize);
    let batch_size = if batch_size == 0 {
        auto_eval_batch()
    } else {
        batch_size
    };
    for batch in data.batches(batch_size, None) {
        let (images, labels) = batch.to_tensors(device);
        let (loss, hits) = crate::train::on_worker(|| {
            let logits = model.forward(images);
            let loss: f64 = loss_fn
                .forward(logits.clone(), labels.clone())
                .into_scalar::<f32>()
                .into();
            let hits: i64 = logits
                .argmax(1)
                .flatten::<1>(0, 1)
                .equal(labels)
                .int()
                .sum()
                .into_scalar::<i64>();
            (loss, hits)
        });
        correct += hits;
        loss_sum += loss * batch.len() as f64;
        n += batch.len();
    }
    EvalStats {
        samples: n,
        accuracy: if n > 0 {
            correct as f64 / n as f64
        } else {
            f64::NAN
        },
        loss: if n > 0 { loss_sum / n as f64 } else { f64::NAN },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn combined_parts_count_every_hit_and_weight_losses_by_samples() {
        let parts = [
            EvalStats {
                samples: 3,
                accuracy: 2.0 / 3.0,
                loss: 1.5,
            },
            EvalStats {
                samples: 0,
                accuracy: f64::NAN,
                loss: f64::NAN,
            },
            EvalStats {
                samples: 7,
                accuracy: 5.0 / 7.0,
                loss: 0.5,
            },
        ];
        let all = EvalStats::combine(&parts);
        assert_eq!(all.samples, 10);
        assert_eq!(all.accuracy, 0.7);
        assert!((all.loss - 0.8).abs() < 1e-15);
        assert!(EvalStats::combine(&[]).accuracy.is_nan());
    }
}
