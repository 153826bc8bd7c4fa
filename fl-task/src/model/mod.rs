//! The models a job can train, named by [`ModelKind`] (architecture + width).
//!
//! - `resnet.rs`, `mobilenet.rs`: the architectures; `layers.rs`: conv + BatchNorm (+ act);
//!   `cost.rs`: a model's forward multiply-accumulates, from which device time follows;
//!   `running.rs`: BatchNorm running statistics kept as plain values while a training runs.
//! - `stacked.rs`: several clients' networks as one of grouped layers, which
//!   `crate::stacked` trains as one computation; `by_client.rs` runs such a grouped layer
//!   on the kernels as each client's own dense layer.
//! - On the `flex` CPU backend the layers run on the fl-kernels crate's CPU kernels
//!   (switch: [`set_cpu_kernels`]): `conv_op.rs` and `bn_op.rs` are the Burn autodiff ops
//!   around them (and BatchNorm's own arithmetic). Results do not depend on the thread
//!   count. Why and how fast: `fl-job/TRAINING.md`.

mod bn_op;
mod by_client;
mod conv_op;
mod cost;
mod layers;
mod mobilenet;
mod resnet;
mod running;
mod stacked;

use std::fmt;
use std::str::FromStr;

use burn::module::Module;
use burn::tensor::{Device, Tensor};
use serde::{Deserialize, Serialize};

pub use mobilenet::{InvertedResidual, MobileNetV2};
pub use resnet::{BasicBlock, ResNet};
pub use stacked::{Stacked, StackedMobileNet, StackedResNet};

/// Also used by the fused SGD step (`crate::sgd`).
pub(crate) use conv_op::flex_tensor;
pub use conv_op::{cpu_kernels, set_cpu_kernels};
/// The instruction set the CPU kernels run (`avx512`, `avx2`, `neon` or `scalar`).
pub use fl_kernels::isa::name as kernel_isa;
pub(crate) use layers::with_bn_momentum;
pub(crate) use running::collecting as collecting_running_stats;

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

/// The reference model of the device capacity trace: the Venn authors' testbed reads a
/// device's `computation_ms_per_sample` as its latency for MobileNet-V2 on FEMNIST (its
/// dry-run model profile), so a model's device time scales with its forward
/// multiply-accumulates over this one's.
pub const REFERENCE_MODEL: ModelKind = ModelKind::MobileNetV2 { width: 1.0 };

/// FedScale's factor from a forward pass to a training step of one sample (backward ≈
/// 2 × forward).
pub const TRAIN_OVER_FORWARD: f64 = 3.0;

/// The model's counts (`cost.rs`).
fn count(kind: &ModelKind) -> cost::Count {
    match *kind {
        ModelKind::ResNet18 { base_width } => cost::resnet18(base_width),
        ModelKind::MobileNetV2 { width } => cost::mobilenet_v2(width),
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
