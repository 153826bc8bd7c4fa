//! The models a job can train, named by [`ModelKind`] (architecture + width).
//!
//! - `resnet.rs`, `mobilenet.rs`: the architectures; `layers.rs`: conv + BatchNorm (+ act);
//!   `cost.rs`: a model's forward multiply-accumulates, from which device time follows.
//! - On the `flex` CPU backend the layers run on fl-job's own kernels (switch:
//!   [`set_cpu_kernels`]): `conv_op.rs` and `bn_op.rs` are the Burn autodiff ops;
//!   `conv_kernels.rs` is the dispatcher that picks each convolution's algorithm:
//!   `conv_direct.rs` (3 × 3 stride 1 on thin layers), `conv_winograd.rs` (3 × 3 stride 1,
//!   tiles in `winograd_f2.rs`, `winograd_f4.rs`, `winograd_variant.rs`), `conv_im2col.rs`
//!   (im2col + GEMM; `im2col_simd.rs` holds its AVX-512 permutes), `depthwise_nhwc.rs` and
//!   `depthwise_planar.rs`. Leaves: `kernel_types.rs` (shared types), `scratch.rs`,
//!   `gemm.rs`, `layout.rs` (planes ↔ channels-innermost), `simd.rs` (`wide!`) and
//!   `isa.rs`, the one place that picks the instruction set (pulp: AVX-512, AVX2 + FMA,
//!   NEON or scalar, once per process). Imports run one way, dispatcher → algorithms →
//!   leaves. Results do not depend on the thread count. Why and how fast:
//!   `fl-job/TRAINING.md`.

mod bn_op;
mod conv_direct;
mod conv_im2col;
mod conv_kernels;
mod conv_op;
mod conv_winograd;
mod cost;
mod depthwise_nhwc;
mod depthwise_planar;
mod gemm;
mod im2col_simd;
mod isa;
mod kernel_types;
mod layers;
mod layout;
mod mobilenet;
mod resnet;
mod scratch;
mod simd;
#[cfg(test)]
mod test_support;
mod winograd_f2;
mod winograd_f4;
mod winograd_variant;

use std::fmt;
use std::str::FromStr;

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

pub use cost::{REFERENCE_MODEL, TRAIN_OVER_FORWARD};
pub use mobilenet::{InvertedResidual, MobileNetV2};
pub use resnet::{BasicBlock, ResNet};

/// Also used by the fused SGD step (`crate::sgd`).
pub(crate) use conv_op::flex_tensor;
pub use conv_op::{cpu_kernels, set_cpu_kernels};
/// The instruction set the CPU kernels run (`avx512`, `avx2`, `neon` or `scalar`).
pub use isa::name as kernel_isa;

use crate::error::FlError;

/// FEMNIST's class count, the models' output size.
pub const NUM_CLASSES: usize = datasets::NUM_CLASSES;

/// Which model, at which width. Written as `resnet18:16` or `mobilenet_v2:0.5`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "model")]
pub enum ModelKind {
    /// ResNet-18 for 28 × 28; `base_width` 64 is the standard network.
    #[serde(rename = "resnet18")]
    ResNet18 {
        /// Channels of the first stage (doubled per stage).
        base_width: usize,
    },
    /// MobileNet-V2 for 28 × 28; `width` 1.0 is the standard network.
    #[serde(rename = "mobilenet_v2")]
    MobileNetV2 {
        /// Width multiplier on every channel count.
        width: f64,
    },
}

impl ModelKind {
    /// A freshly initialised model of this kind on `device`.
    pub fn init(&self, device: &Device) -> Model {
        match *self {
            ModelKind::ResNet18 { base_width } => {
                Model::ResNet18(ResNet::new(base_width, NUM_CLASSES, device))
            }
            ModelKind::MobileNetV2 { width } => {
                Model::MobileNetV2(MobileNetV2::new(width, NUM_CLASSES, device))
            }
        }
    }

    /// Refuse widths that would build a degenerate network.
    pub fn validate(&self) -> Result<(), FlError> {
        let ok = match *self {
            ModelKind::ResNet18 { base_width } => (1..=512).contains(&base_width),
            ModelKind::MobileNetV2 { width } => width.is_finite() && (0.05..=4.0).contains(&width),
        };
        if ok {
            Ok(())
        } else {
            Err(FlError::BadModel(format!("width out of range in {self}")))
        }
    }
}

impl fmt::Display for ModelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelKind::ResNet18 { base_width } => write!(f, "resnet18:{base_width}"),
            ModelKind::MobileNetV2 { width } => write!(f, "mobilenet_v2:{width}"),
        }
    }
}

impl FromStr for ModelKind {
    type Err = FlError;

    /// `resnet18[:BASE]` (default 64) or `mobilenet_v2[:WIDTH]` / `mobilenetv2[:WIDTH]`
    /// (default 1.0).
    fn from_str(s: &str) -> Result<Self, FlError> {
        let bad = || {
            FlError::BadModel(format!(
                "{s:?}: expected resnet18[:BASE_WIDTH] or mobilenet_v2[:WIDTH], e.g. resnet18:16"
            ))
        };
        let (name, arg) = s.split_once(':').map_or((s, None), |(n, a)| (n, Some(a)));
        let kind = match name.to_ascii_lowercase().replace(['-', '_'], "").as_str() {
            "resnet18" => ModelKind::ResNet18 {
                base_width: arg.map_or(Ok(64), str::parse).map_err(|_| bad())?,
            },
            "mobilenetv2" => ModelKind::MobileNetV2 {
                width: arg.map_or(Ok(1.0), str::parse).map_err(|_| bad())?,
            },
            _ => return Err(bad()),
        };
        kind.validate()?;
        Ok(kind)
    }
}

/// A model of any [`ModelKind`]; one type so that training, FedAvg and weight exchange
/// need no generics.
// Both variants are a few hundred bytes of handles; the model is moved rarely, so boxing
// (which Burn's `Module` derive does not support) would buy nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Model {
    /// A ResNet-18.
    ResNet18(ResNet),
    /// A MobileNet-V2.
    MobileNetV2(MobileNetV2),
}

impl Model {
    /// Logits `[n, 62]` for images `[n, 1, 28, 28]`.
    pub fn forward(&self, images: Tensor<4>) -> Tensor<2> {
        match self {
            Model::ResNet18(m) => m.forward(images),
            Model::MobileNetV2(m) => m.forward(images),
        }
    }
}
