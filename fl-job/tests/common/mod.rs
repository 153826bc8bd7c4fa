//! Helpers shared by the integration tests: small models and a synthetic batch.

#![allow(dead_code)]

use burn::tensor::Device;
use datasets::{IMAGE_PIXELS, Samples};
use fl_task::{Model, ModelKind};

/// Burn's CPU backend keeps one random state per process and models draw from it
/// lazily, so a test that seeds it holds this lock, as does every test in the same
/// binary that draws random numbers.
pub fn rng_lock() -> std::sync::MutexGuard<'static, ()> {
    static RNG: std::sync::Mutex<()> = std::sync::Mutex::new(());
    RNG.lock().unwrap_or_else(|e| e.into_inner())
}

/// The CPU device the tests run on.
pub fn device() -> Device {
    Device::flex()
}

/// A ResNet-18 small enough to train in milliseconds.
pub const TINY_RESNET: ModelKind = ModelKind::ResNet18 { base_width: 4 };
/// A MobileNet-V2 at the smallest sensible width.
pub const TINY_MOBILENET: ModelKind = ModelKind::MobileNetV2 { width: 0.25 };

/// A fresh model of `kind`.
pub fn model(kind: ModelKind) -> Model {
    kind.init(&device())
}

/// `n` synthetic samples: label `i % classes`, with a bar whose position encodes the label,
/// so the task is learnable.
pub fn samples(n: usize, classes: u8) -> Samples {
    let mut s = Samples::default();
    for i in 0..n {
        let label = (i % classes as usize) as u8;
        // A light, deterministic texture on the background: on a perfectly blank background
        // whole channels are constant over the batch, BatchNorm divides rounding noise by
        // √ε, and any two correct implementations drift apart (see `tests/training.rs`).
        let mut img: Vec<u8> = (0..IMAGE_PIXELS)
            .map(|p| {
                let h = (p as u32 ^ (i as u32).wrapping_mul(0x9E37_79B9)).wrapping_mul(0x85EB_CA6B);
                255 - (h >> 27) as u8
            })
            .collect();
        let row = 2 + 3 * label as usize % 24;
        for c in 4..24 {
            img[row * 28 + c] = 0;
            img[(row + 1) * 28 + c] = 30;
        }
        s.images.extend(img);
        s.labels.push(label);
    }
    s
}
