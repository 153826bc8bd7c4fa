//! Small building blocks shared by the models: conv + BatchNorm (+ activation).

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};

/// The activation after a [`ConvBn`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Act {
    None,
    Relu,
    Relu6,
}

/// Convolution without bias (BatchNorm follows), then BatchNorm, then an activation.
#[derive(Module, Debug)]
pub struct ConvBn {
    conv: Conv2d,
    bn: BatchNorm,
    /// 0 = none, 1 = ReLU, 2 = ReLU6; a `u8` because module constants must be primitives.
    act: u8,
}

impl ConvBn {
    /// `kernel` × `kernel` convolution with "same" padding for odd kernels.
    pub(crate) fn new(
        channels: [usize; 2],
        kernel: usize,
        stride: usize,
        groups: usize,
        act: Act,
        device: &Device,
    ) -> Self {
        let pad = kernel / 2;
        let conv = Conv2dConfig::new(channels, [kernel, kernel])
            .with_stride([stride, stride])
            .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
            .with_groups(groups)
            .with_bias(false)
            .init(device);
        let bn = BatchNormConfig::new(channels[1]).init(device);
        let act = match act {
            Act::None => 0,
            Act::Relu => 1,
            Act::Relu6 => 2,
        };
        Self { conv, bn, act }
    }

    /// Forward pass.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let x = self.bn.forward(self.conv.forward(x));
        match self.act {
            1 => relu(x),
            2 => x.clamp(0.0, 6.0),
            _ => x,
        }
    }
}
