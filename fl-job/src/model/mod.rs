//! The models a job can train, named by [`ModelKind`] (architecture + width).
//!
//! - `resnet.rs`, `mobilenet.rs`: the architectures; `layers.rs`: conv + BatchNorm (+ act).
//! - On the `flex` CPU backend the layers run on fl-job's own kernels (switch:
//!   [`set_cpu_kernels`]): `conv_op.rs` and `bn_op.rs` are the Burn autodiff ops;
//!   `conv_kernels.rs` (im2col + GEMM, planar depthwise), `conv_winograd.rs` (3 × 3
//!   stride 1) and `depthwise_nhwc.rs` (depthwise on small maps) compute on plain slices;
//!   `conv_direct.rs` (3 × 3 stride 1 on thin layers) and `im2col_simd.rs` (im2col of maps
//!   up to 16 pixels) are written in AVX-512 and stand aside on CPUs without it.
//!   `layout.rs` converts between channel planes and channels-innermost buffers;
//!   `simd.rs` compiles those loops for the CPU's widest vectors (`wide!`).
//!   Results do not depend on the thread count. Why and how fast: `fl-job/TRAINING.md`.

mod bn_op;
mod conv_direct;
mod conv_kernels;
mod conv_op;
mod conv_winograd;
mod depthwise_nhwc;
mod im2col_simd;
mod isa;
mod layers;
mod layout;
mod mobilenet;
mod resnet;
mod simd;
mod winograd_f2;
mod winograd_f4;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, Ordering};

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

pub use mobilenet::{InvertedResidual, MobileNetV2};
pub use resnet::{BasicBlock, ResNet};

/// Also used by the fused SGD step (`crate::sgd`).
pub(crate) use conv_op::flex_tensor;

use crate::error::FlError;

static CPU_KERNELS: AtomicBool = AtomicBool::new(true);

/// Chooses, for the whole process, whether the models' convolutions and training-mode
/// BatchNorm + activation run on fl-job's own CPU kernels (the default) or on Burn's ops.
/// Only the `flex` backend has the kernels; others always use Burn's ops. Turning them off
/// is for measuring what they gain (`fl-job bench --burn-ops`) and for tests that compare
/// the two; the gradients agree (see `tests/training.rs`).
pub fn set_cpu_kernels(enabled: bool) {
    CPU_KERNELS.store(enabled, Ordering::Relaxed);
}

/// Whether fl-job's own CPU kernels are in use (see [`set_cpu_kernels`]).
pub fn cpu_kernels() -> bool {
    CPU_KERNELS.load(Ordering::Relaxed)
}

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
