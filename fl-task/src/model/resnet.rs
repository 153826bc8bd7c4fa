//! ResNet-18 adapted to 1 × 28 × 28 FEMNIST: a 3 × 3 stride-1 stem and no max-pool, then
//! 4 stages × 2 basic blocks at widths `w, 2w, 4w, 8w` (strides 1, 2, 2, 2: 28 → 28 → 14
//! → 7 → 4), global average pooling and a linear classifier. `w = 64` is the standard
//! width; smaller `w` keeps experiments fast.

use burn::module::Module;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};

use super::conv_op::Layout;
use super::layers::{Act, ConvBn};

/// Two 3 × 3 conv-BN layers with an identity or 1 × 1 projection shortcut.
#[derive(Module, Debug)]
pub struct BasicBlock {
    conv1: ConvBn,
    conv2: ConvBn,
    shortcut: Option<ConvBn>,
}

impl BasicBlock {
    /// `cin → cout` channels of each of `clients` networks side by side (grouped
    /// convolutions, `model/stacked.rs`); one client is the plain block.
    fn new(cin: usize, cout: usize, stride: usize, clients: usize, device: &Device) -> Self {
        let (k, i, o) = (clients, clients * cin, clients * cout);
        let shortcut = (stride != 1 || cin != cout)
            .then(|| ConvBn::new([i, o], 1, stride, k, Act::None, device));
        Self {
            conv1: ConvBn::new([i, o], 3, stride, k, Act::Relu, device),
            conv2: ConvBn::new([o, o], 3, 1, k, Act::None, device),
            shortcut,
        }
    }

    pub(super) fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let skip = match &self.shortcut {
            Some(s) => s.forward(x.clone()),
            None => x.clone(),
        };
        let h = self.conv1.forward(x);
        self.conv2.forward_add(h, skip, Act::Relu, Layout::Planar)
    }
}

/// ResNet-18 for 28 × 28 grey images.
#[derive(Module, Debug)]
pub struct ResNet {
    stem: ConvBn,
    blocks: Vec<BasicBlock>,
    pool: AdaptiveAvgPool2d,
    fc: Linear,
}

impl ResNet {
    /// A freshly initialised ResNet-18 with base width `base` and `classes` outputs.
    pub fn new(base: usize, classes: usize, device: &Device) -> Self {
        let (stem, blocks, width) = body(base, 1, device);
        Self {
            stem,
            blocks,
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            fc: LinearConfig::new(width, classes).init(device),
        }
    }

    /// Logits `[n, classes]` for images `[n, 1, 28, 28]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let mut x = self.stem.forward(x);
        for b in &self.blocks {
            x = b.forward(x);
        }
        self.fc.forward(self.pool.forward(x).flatten(1, 3))
    }
}

/// The stem and the eight blocks of `clients` ResNet-18s of base width `base` side by side,
/// and the last stage's width of one of them.
pub(super) fn body(
    base: usize,
    clients: usize,
    device: &Device,
) -> (ConvBn, Vec<BasicBlock>, usize) {
    let k = clients;
    let stem = ConvBn::new([k, k * base], 3, 1, k, Act::Relu, device);
    let mut blocks = Vec::new();
    let mut cin = base;
    for (stage, stride) in [1, 2, 2, 2].into_iter().enumerate() {
        let cout = base << stage;
        blocks.push(BasicBlock::new(cin, cout, stride, k, device));
        blocks.push(BasicBlock::new(cout, cout, 1, k, device));
        cin = cout;
    }
    (stem, blocks, cin)
}
