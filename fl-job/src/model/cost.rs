//! What a model costs per sample, counted from its architecture: multiply-accumulates of a
//! forward pass (convolutions and the classifier; BatchNorm, activations and pooling are a
//! few per activation and left out) and the bytes of its weights. Device time in the
//! testbed follows from these (`venn_core::TaskWork`): a job of a larger model, or a
//! device with more samples, takes longer, as in FedScale.
//!
//! The counts mirror `resnet.rs` and `mobilenet.rs` layer for layer on 1 × 28 × 28 input;
//! a test checks them against PyTorch's layer shapes (values from `fl-job/bench`, see the
//! test).

use super::mobilenet::{STAGES, scaled};
use super::{ModelKind, NUM_CLASSES};

/// The reference model of the device capacity trace: the Venn authors' testbed reads a
/// device's `computation_ms_per_sample` as its latency for MobileNet-V2 on FEMNIST (its
/// dry-run model profile), so a model's device time scales with its forward
/// multiply-accumulates over this one's.
pub const REFERENCE_MODEL: ModelKind = ModelKind::MobileNetV2 { width: 1.0 };

/// FedScale's factor from a forward pass to a training step of one sample (backward ≈
/// 2 × forward).
pub const TRAIN_OVER_FORWARD: f64 = 3.0;

/// Running totals over a model's layers.
#[derive(Default)]
struct Count {
    macs: u64,
    values: u64,
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

fn resnet18(base: usize) -> Count {
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

fn mobilenet_v2(width: f64) -> Count {
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

fn count(kind: &ModelKind) -> Count {
    match *kind {
        ModelKind::ResNet18 { base_width } => resnet18(base_width),
        ModelKind::MobileNetV2 { width } => mobilenet_v2(width),
    }
}

impl ModelKind {
    /// Multiply-accumulates of one forward pass of one 1 × 28 × 28 sample.
    pub fn forward_macs(&self) -> u64 {
        count(self).macs
    }

    /// Bytes of the model's float tensors (parameters and BatchNorm running statistics, 4
    /// bytes each): what a device downloads and uploads per task, give or take the
    /// encoding's few bytes of framing.
    pub fn weight_bytes(&self) -> u64 {
        4 * count(self).values
    }

    /// Milliseconds of training per sample on the capacity trace's reference device
    /// (78 ms/sample for [`REFERENCE_MODEL`]'s forward pass): `3 × 78 × forward_macs /
    /// REFERENCE_MODEL.forward_macs()`. What `venn_core::TaskWork::ref_ms_per_sample` holds.
    pub fn ref_train_ms_per_sample(&self) -> f64 {
        TRAIN_OVER_FORWARD
            * venn_core::profile::REFERENCE_MS_PER_SAMPLE
            * self.forward_macs() as f64
            / REFERENCE_MODEL.forward_macs() as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counted independently in PyTorch on `fl-job/bench/fedavg_torch.py`'s models: forward
    /// hooks summing `out.numel() × in_channels / groups × k²` per Conv2d plus the Linear's
    /// weight size, and the float entries of the state dict (`fl-job/TRAINING.md`, "Device
    /// time").
    #[test]
    fn forward_macs_match_pytorch_counts() {
        for (kind, macs, values) in EXPECTED {
            let kind: ModelKind = kind.parse().unwrap();
            assert_eq!(kind.forward_macs(), macs, "{kind}");
            assert_eq!(kind.weight_bytes(), 4 * values, "{kind}");
        }
        assert_eq!(REFERENCE_MODEL.ref_train_ms_per_sample(), 3.0 * 78.0);
    }

    /// (model, forward multiply-accumulates, float values in the state dict).
    const EXPECTED: [(&str, u64, u64); 7] = [
        ("resnet18:4", 1_808_896, 46_866),
        ("resnet18:8", 7_175_168, 180_838),
        ("resnet18:16", 28_579_840, 710_286),
        ("resnet18:64", 455_827_456, 11_209_086),
        ("mobilenet_v2:0.25", 2_524_176, 328_046),
        ("mobilenet_v2:0.5", 6_839_648, 785_358),
        ("mobilenet_v2:1.0", 21_817_168, 2_336_830),
    ];
}
