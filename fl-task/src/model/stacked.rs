//! Several clients' networks (ResNet-18 or MobileNet-V2) as one, for client-batched training
//! (`crate::stacked`): client `k`'s channels are the `k`-th block of every layer's channels,
//! every convolution is grouped by client (a client's filters see only its own channels;
//! on the CPU kernels each group runs as the client's own dense layer, `conv_op.rs`),
//! BatchNorm is per channel and so per client already, and the classifier is one matrix
//! product per client, batched.
//!
//! So one forward and backward pass computes each client's own loss and gradients, as if
//! each had run alone, while every operation is launched once for all of them: what makes
//! many small trainings fast where per-operation overhead dominates (a GPU's kernel
//! launches; `fl-job/TRAINING.md` has why it does not pay on our CPU kernels).
//!
//! Every float tensor has the clients along its first axis, in blocks of equal size, in the
//! same visiting order as [`ResNet`](super::ResNet)'s, each block laid out as the lone
//! network's tensor.

use burn::module::{Module, Param};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::tensor::{Device, Tensor};

use super::conv_op::{self, Layout};
use super::layers::ConvBn;
use super::mobilenet::{self, InvertedResidual, scaled};
use super::resnet::{self, BasicBlock};
use super::{ModelKind, NUM_CLASSES};

/// Several clients' networks of one [`ModelKind`] side by side.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum Stacked {
    /// ResNet-18s.
    ResNet18(StackedResNet),
    /// MobileNet-V2s.
    MobileNetV2(StackedMobileNet),
}

impl Stacked {
    /// `clients` networks of kind `kind` (their weights are replaced before use).
    pub fn new(kind: ModelKind, clients: usize, device: &Device) -> Self {
        match kind {
            ModelKind::ResNet18 { base_width } => {
                Stacked::ResNet18(StackedResNet::new(base_width, NUM_CLASSES, clients, device))
            }
            ModelKind::MobileNetV2 { width } => {
                Stacked::MobileNetV2(StackedMobileNet::new(width, NUM_CLASSES, clients, device))
            }
        }
    }

    /// Logits `[clients, n, classes]` for images `[n, clients, 28, 28]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<3> {
        match self {
            Stacked::ResNet18(m) => m.forward(x),
            Stacked::MobileNetV2(m) => m.forward(x),
        }
    }
}

/// `clients` ResNet-18s of one base width, side by side.
#[derive(Module, Debug)]
pub struct StackedResNet {
    stem: ConvBn,
    blocks: Vec<BasicBlock>,
    pool: AdaptiveAvgPool2d,
    head: StackedLinear,
}

/// One `width → classes` Linear per client: `weight` `[clients, width, classes]`, `bias`
/// `[clients, classes]` (each client's block laid out as `burn::nn::Linear`'s).
#[derive(Module, Debug)]
pub struct StackedLinear {
    weight: Param<Tensor<3>>,
    bias: Param<Tensor<2>>,
}

impl StackedLinear {
    fn new(clients: usize, width: usize, classes: usize, device: &Device) -> Self {
        StackedLinear {
            weight: Param::from_tensor(Tensor::zeros([clients, width, classes], device)),
            bias: Param::from_tensor(Tensor::zeros([clients, classes], device)),
        }
    }

    /// `[n, clients · width]` features → `[clients, n, classes]`.
    fn classify(&self, features: Tensor<2>) -> Tensor<3> {
        let [clients, width, _] = self.weight.shape().dims();
        let n = features.dims()[0];
        self.forward(features.reshape([n, clients, width]).swap_dims(0, 1))
    }

    /// `[clients, n, width]` → `[clients, n, classes]`.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        x.matmul(self.weight.val()) + self.bias.val().unsqueeze_dim(1)
    }
}

impl StackedResNet {
    /// `clients` freshly initialised networks (their weights are replaced before use).
    pub fn new(base: usize, classes: usize, clients: usize, device: &Device) -> Self {
        let (stem, blocks, width) = resnet::body(base, clients, device);
        Self {
            stem,
            blocks,
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            head: StackedLinear::new(clients, width, classes, device),
        }
    }

    /// Logits `[clients, n, classes]` for images `[n, clients, 28, 28]`: channel `k` holds
    /// client `k`'s batch.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<3> {
        let mut x = self.stem.forward(x);
        for b in &self.blocks {
            x = b.forward(x);
        }
        self.head.classify(self.pool.forward(x).flatten(1, 3))
    }
}

/// `clients` MobileNet-V2s of one width, side by side (the lone network's layout:
/// channels-last on the CPU kernels, planar elsewhere; `mobilenet.rs`).
#[derive(Module, Debug)]
pub struct StackedMobileNet {
    stem: ConvBn,
    blocks: Vec<InvertedResidual>,
    head: ConvBn,
    pool: AdaptiveAvgPool2d,
    classifier: StackedLinear,
}

impl StackedMobileNet {
    /// `clients` freshly initialised networks (their weights are replaced before use).
    pub fn new(width: f64, classes: usize, clients: usize, device: &Device) -> Self {
        let (stem, blocks, cin) = mobilenet::body(width, clients, device);
        let last = scaled(1280, width.max(1.0));
        Self {
            stem,
            blocks,
            head: mobilenet::head(cin, last, clients, device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            classifier: StackedLinear::new(clients, last, classes, device),
        }
    }

    /// Logits `[clients, n, classes]` for images `[n, clients, 28, 28]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<3> {
        let features = if conv_op::cpu_kernels() && conv_op::on_flex(&x) {
            let mut x = self
                .stem
                .forward_in(x.permute([0, 2, 3, 1]), Layout::ChannelsLast);
            for b in &self.blocks {
                x = b.forward(x, Layout::ChannelsLast);
            }
            let x = self.head.forward_in(x, Layout::ChannelsLast);
            let [n, h, w, c] = x.dims();
            x.reshape([n, h * w, c]).mean_dim(1).reshape([n, c])
        } else {
            let mut x = self.stem.forward(x);
            for b in &self.blocks {
                x = b.forward(x, Layout::Planar);
            }
            self.pool.forward(self.head.forward(x)).flatten(1, 3)
        };
        self.classifier.classify(features)
    }
}
