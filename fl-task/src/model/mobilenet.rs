//! MobileNet-V2 adapted to 1 × 28 × 28 FEMNIST.
//!
//! The standard inverted-residual table (expansion t, channels c, repeats n, stride s) with
//! a width multiplier on every channel count (rounded to a multiple of 8, as in the paper's
//! reference code; the 1280-channel head only grows, never shrinks). The stem is a 3 × 3
//! *stride-1* convolution, since 28 × 28 is already small; the stage strides stay standard,
//! so the maps go 28 → 14 → 7 → 4 → 2. Keeping those strides (rather than CIFAR-style
//! stride-1 early stages) made training 2.5–3× faster in a probe here, because depthwise
//! backward on large maps is the slow part on the CPU backend.
//!
//! Initialisation is torchvision's for MobileNet-V2, not Burn's default: convolutions
//! N(0, 2 / (c_out · k²)) (Kaiming-normal over PyTorch's fan-out, which does not divide by
//! the groups, so a depthwise filter starts small), the classifier N(0, 0.01) with a zero
//! bias, BatchNorm γ = 1, β = 0. With Burn's (and PyTorch's) default Kaiming-uniform over the
//! fan-in, FedAvg at lr 0.1 stalled at one class for rounds and fell back to it after it had
//! reached 30 %, in our training and in PyTorch's replay of it from the same initial weights
//! alike (`fl-job/TRAINING.md`, "MobileNet-V2 under FedAvg").

use burn::module::{Module, Param};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{Initializer, Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use super::conv_op::{self, Layout};
use super::layers::{Act, ConvBn};

/// (expansion, channels, repeats, first stride) per stage, from the MobileNet-V2 paper.
pub(super) const STAGES: [(usize, usize, usize, usize); 7] = [
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
];

/// `c · width` rounded to the nearest multiple of 8, never below 8 nor 10 % under `c · width`.
pub(super) fn scaled(c: usize, width: f64) -> usize {
    let v = c as f64 * width;
    let mut r = (((v + 4.0) / 8.0).floor() as usize * 8).max(8);
    if (r as f64) < 0.9 * v {
        r += 8;
    }
    r
}

/// A [`ConvBn`] with torchvision's MobileNet-V2 initialisation: Kaiming-normal over
/// `c_out · k²` (PyTorch's fan-out of a convolution weight, groups not divided out).
fn conv_bn(
    channels: [usize; 2],
    kernel: usize,
    stride: usize,
    groups: usize,
    act: Act,
    device: &Device,
) -> ConvBn {
    let std = (2.0 / (channels[1] * kernel * kernel) as f64).sqrt();
    let init = Initializer::Normal { mean: 0.0, std };
    ConvBn::with_init(channels, kernel, stride, groups, act, init, device)
}

/// Expand (1 × 1) → depthwise 3 × 3 → project (1 × 1, linear), with a skip when shapes match.
#[derive(Module, Debug)]
pub struct InvertedResidual {
    expand: Option<ConvBn>,
    depthwise: ConvBn,
    project: ConvBn,
    residual: bool,
}

impl InvertedResidual {
    /// `cin → cout` channels of each of `clients` networks side by side (grouped
    /// convolutions, `model/stacked.rs`); one client is the plain block.
    fn new(
        [cin, cout]: [usize; 2],
        stride: usize,
        t: usize,
        clients: usize,
        device: &Device,
    ) -> Self {
        let (k, hidden) = (clients, cin * t);
        let [i, h, o] = [cin, hidden, cout].map(|c| k * c);
        Self {
            expand: (t != 1).then(|| conv_bn([i, h], 1, 1, k, Act::Relu6, device)),
            depthwise: conv_bn([h, h], 3, stride, h, Act::Relu6, device),
            project: conv_bn([h, o], 1, 1, k, Act::None, device),
            residual: stride == 1 && cin == cout,
        }
    }

    pub(super) fn forward(&self, x: Tensor<4>, layout: Layout) -> Tensor<4> {
        let h = match &self.expand {
            Some(e) => e.forward_in(x.clone(), layout),
            None => x.clone(),
        };
        let d = self.depthwise.forward_in(h, layout);
        if self.residual {
            self.project.forward_add(d, x, Act::None, layout)
        } else {
            self.project.forward_in(d, layout)
        }
    }
}

/// MobileNet-V2 for 28 × 28 grey images.
#[derive(Module, Debug)]
pub struct MobileNetV2 {
    stem: ConvBn,
    blocks: Vec<InvertedResidual>,
    head: ConvBn,
    pool: AdaptiveAvgPool2d,
    classifier: Linear,
}

impl MobileNetV2 {
    /// A freshly initialised MobileNet-V2 with width multiplier `width` and `classes` outputs.
    pub fn new(width: f64, classes: usize, device: &Device) -> Self {
        let (stem, blocks, cin) = body(width, 1, device);
        let last = scaled(1280, width.max(1.0));
        let mut classifier = LinearConfig::new(last, classes)
            .with_initializer(Initializer::Normal {
                mean: 0.0,
                std: 0.01,
            })
            .init(device);
        classifier.bias = Some(Param::from_tensor(Tensor::zeros([classes], device)));
        Self {
            stem,
            blocks,
            head: head(cin, last, 1, device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            classifier,
        }
    }

    /// Logits `[n, classes]` for images `[n, 1, 28, 28]`.
    ///
    /// On fl-job's CPU kernels the activations run channels-last from the stem to the pool
    /// (`fl_kernels::channels_last`: every 1 × 1 convolution one GEMM over the batch's
    /// pixels, no layout copies between layers); elsewhere planar, on Burn's ops.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        if conv_op::cpu_kernels() && conv_op::on_flex(&x) {
            return self.forward_channels_last(x);
        }
        let mut x = self.stem.forward(x);
        for b in &self.blocks {
            x = b.forward(x, Layout::Planar);
        }
        let x = self.head.forward(x);
        self.classifier.forward(self.pool.forward(x).flatten(1, 3))
    }

    /// [`MobileNetV2::forward`] with `[n, h, w, c]` activations; the pool is a mean over the
    /// pixels (what the adaptive 1 × 1 pool computes).
    fn forward_channels_last(&self, x: Tensor<4>) -> Tensor<2> {
        let [n, c, h, w] = x.dims();
        // One input channel (FEMNIST): `[n, 1, h, w]` and `[n, h, w, 1]` are the same values.
        let mut x = if c == 1 {
            x.reshape([n, h, w, 1])
        } else {
            x.permute([0, 2, 3, 1])
        };
        x = self.stem.forward_in(x, Layout::ChannelsLast);
        for b in &self.blocks {
            x = b.forward(x, Layout::ChannelsLast);
        }
        let x = self.head.forward_in(x, Layout::ChannelsLast);
        let [n, h, w, c] = x.dims();
        let pooled = x.reshape([n, h * w, c]).mean_dim(1).reshape([n, c]);
        self.classifier.forward(pooled)
    }
}

/// The stem and the inverted-residual blocks of `clients` MobileNet-V2s of width `width` side
/// by side, and the last block's channels of one of them.
pub(super) fn body(
    width: f64,
    clients: usize,
    device: &Device,
) -> (ConvBn, Vec<InvertedResidual>, usize) {
    let k = clients;
    let mut cin = scaled(32, width);
    let stem = conv_bn([k, k * cin], 3, 1, k, Act::Relu6, device);
    let mut blocks = Vec::new();
    for (t, c, n, s) in STAGES {
        let cout = scaled(c, width);
        for i in 0..n {
            let stride = if i == 0 { s } else { 1 };
            blocks.push(InvertedResidual::new([cin, cout], stride, t, k, device));
            cin = cout;
        }
    }
    (stem, blocks, cin)
}

/// The 1 × 1 head convolution `cin → last` of `clients` networks side by side.
pub(super) fn head(cin: usize, last: usize, clients: usize, device: &Device) -> ConvBn {
    conv_bn(
        [clients * cin, clients * last],
        1,
        1,
        clients,
        Act::Relu6,
        device,
    )
}

#[cfg(test)]
mod tests {
    use super::scaled;

    #[test]
    fn width_rounding_matches_the_reference_rule() {
        assert_eq!(scaled(32, 1.0), 32);
        assert_eq!(scaled(32, 0.5), 16);
        assert_eq!(scaled(24, 0.5), 16);
        assert_eq!(scaled(16, 0.5), 8);
        assert_eq!(scaled(1280, 1.0), 1280);
    }
}
