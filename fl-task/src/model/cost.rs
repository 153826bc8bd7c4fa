//! What a model costs per sample, counted from its architecture: multiply-accumulates of a
//! forward pass (convolutions and the classifier; BatchNorm, activations and pooling are a
//! few per activation and left out) and the bytes of its weights. Device time in the
//! testbed follows from these (`venn_core::TaskWork`): a job of a larger model, or a
//! device with more samples, takes longer, as in FedScale.
//!
//! The counts mirror `resnet.rs` and `mobilenet.rs` layer for layer on 1 × 28 × 28 input;
//! `ModelKind::forward_macs` and `ModelKind::weight_bytes` (in `mod.rs`, with a test against
//! PyTorch's counts) read them.

use datasets::NUM_CLASSES;

use super::mobilenet::{STAGES, scaled};

/// Running totals over a model's layers.
#[derive(Default)]
pub(super) struct Count {
    /// Multiply-accumulates of one forward pass of one sample.
    pub macs: u64,
    /// Float values: parameters and BatchNorm running statistics.
    pub values: u64,
}

impl Count {
    /// A bias-free convolution with "same" padding (`kernel / 2`) on a square `side` input,
    /// followed by BatchNorm (γ, β, running mean and variance: 4 values a channel); returns
    /// the output side.
    fn conv_bn(
        &mut self,
        [cin, cout]: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        side: usize,
    ) -> usize {
        let pad = kernel / 2;
        let out = (side + 2 * pad - kernel) / stride + 1;
        let weights = cout * (cin / groups) * kernel * kernel;
        self.macs += (weights * out * out) as u64;
        self.values += (weights + 4 * cout) as u64;
        out
    }

    /// The linear classifier (weights and bias).
    fn linear(&mut self, cin: usize) {
        self.macs += (cin * NUM_CLASSES) as u64;
        self.values += ((cin + 1) * NUM_CLASSES) as u64;
    }
}

/// ResNet-18 of base width `base` (`resnet.rs`).
pub(super) fn resnet18(base: usize) -> Count {
    let mut n = Count::default();
    let mut side = n.conv_bn([1, base], 3, 1, 1, 28);
    let mut cin = base;
    for (stage, stride) in [1, 2, 2, 2].into_iter().enumerate() {
        let cout = base << stage;
        for (c_in, s) in [(cin, stride), (cout, 1)] {
            let out = n.conv_bn([c_in, cout], 3, s, 1, side);
            n.conv_bn([cout, cout], 3, 1, 1, out);
            if s != 1 || c_in != cout {
                n.conv_bn([c_in, cout], 1, s, 1, side);
            }
            side = out;
        }
        cin = cout;
    }
    n.linear(cin);
    n
}

/// MobileNet-V2 of width multiplier `width` (`mobilenet.rs`).
pub(super) fn mobilenet_v2(width: f64) -> Count {
    let mut n = Count::default();
    let mut cin = scaled(32, width);
    let mut side = n.conv_bn([1, cin], 3, 1, 1, 28);
    for (t, c, repeats, s) in STAGES {
        let cout = scaled(c, width);
        for i in 0..repeats {
            let stride = if i == 0 { s } else { 1 };
            let hidden = cin * t;
            if t != 1 {
                n.conv_bn([cin, hidden], 1, 1, 1, side);
            }
            let out = n.conv_bn([hidden, hidden], 3, stride, hidden, side);
            n.conv_bn([hidden, cout], 1, 1, 1, out);
            side = out;
            cin = cout;
        }
    }
    let last = scaled(1280, width.max(1.0));
    n.conv_bn([cin, last], 1, 1, 1, side);
    n.linear(last);
    n
}
