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

/// Evaluate `model` on `data` in batches of `batch_size`, using BatchNorm running statistics.
pub fn evaluate(
    model: &Model,
    data: SampleView<'_>,
    batch_size: usize,
    device: &Device,
) -> EvalStats {
    let model = model.valid().to_device(device);
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let (mut correct, mut loss_sum, mut n) = (0i64, 0.0f64, 0usize);
    for batch in data.batches(batch_size.max(1), None) {
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
