//! # fl-task — what an FL job is: models, local training, FedAvg, weights, [`task::FlTask`]
//!
//! Everything a device needs to train a job, and nothing of how jobs talk to the manager
//! (that is fl-job's runner): Burn models (ResNet-18, MobileNet-V2) for FEMNIST on the
//! fl-kernels CPU kernels, local SGD training, evaluation, FedAvg, the weight encoding
//! that travels, and the [`task::FlTask`] plug-in point with its [`task::Registry`], through
//! which a job and the device agent pick the same implementation by name.
//!
//! Burn 0.22 dropped backend generics: tensors and modules are concrete and a
//! [`burn::tensor::Device`] value picks the backend at run time. So every function here
//! takes `&Device` (see [`Backend`]) instead of a type parameter.
//!
//! ## Layout
//! - [`task`]: [`task::FlTask`], [`task::Registry`], the built-in [`task::BurnTask`].
//! - [`model`]: the architectures and their Burn autodiff ops over fl-kernels
//!   (`model/conv_op.rs`, `model/bn_op.rs`); what a model costs per sample.
//! - `train.rs` ([`train_local`]: cross-entropy and SGD, `sgd.rs` its fused step),
//!   `stacked.rs` ([`train_stacked`]: a round's clients as one network, bit for bit their
//!   lone trainings on the CPU kernels),
//!   `eval.rs` ([`evaluate`]), `fedavg.rs` ([`fedavg`]), [`weights`] (bytes that travel),
//!   `tensors.rs` (named tensors, for aggregation), `config.rs` ([`TrainConfig`]),
//!   `calibrate.rs` ([`recalibrate_bn`]: BatchNorm statistics of averaged weights).
//! - [`lanes`]: a round's trainings side by side, one thread each.
//!
//! The pieces a federated round needs:
//! [`ModelKind::init`] → [`train_local`] on a writer's [`datasets::SampleView`] →
//! [`weights::to_bytes`] (what travels) → [`weights::load`] → [`fedavg`] → [`recalibrate_bn`]
//! (optional) → [`evaluate`].

mod backend;
mod calibrate;
mod config;
mod error;
mod eval;
mod fedavg;
pub mod lanes;
pub mod model;
mod sgd;
mod stacked;
pub mod task;
mod tensors;
mod train;
pub mod weights;

pub use backend::Backend;
pub use calibrate::{CALIBRATION_BATCH, recalibrate_bn};
pub use config::TrainConfig;
pub use error::FlError;
pub use eval::{EvalStats, LANE_EVAL_BATCH, auto_eval_batch, evaluate};
pub use fedavg::fedavg;
pub use model::{Model, ModelKind, cpu_kernels, set_cpu_kernels};
pub use stacked::{StackedClient, train_stacked};
pub use tensors::{NamedTensor, read_shapes, read_tensors, trainable_params, write_tensors};
pub use train::{TrainStats, train_local, train_local_with};
