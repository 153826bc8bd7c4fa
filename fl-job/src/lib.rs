//! Federated-learning jobs: Burn models (ResNet-18, MobileNet-V2) for FEMNIST, local
//! training, evaluation, FedAvg and weight exchange.
//!
//! Burn 0.22 dropped backend generics: tensors and modules are concrete and a
//! [`burn::tensor::Device`] value picks the backend at run time. So every function here
//! takes `&Device` (see [`Backend`]) instead of a type parameter.
//!
//! The pieces a federated job needs:
//! [`ModelKind::init`] → [`train_local`] on a writer's [`datasets::SampleView`] →
//! [`weights::to_bytes`] (what travels) → [`weights::load`] → [`fedavg`] → [`evaluate`].
//! A round's local trainings run side by side on [`lanes`], one thread each.

mod backend;
pub mod bench;
pub mod centralized;

mod config;
mod error;
mod eval;
mod fedavg;
pub mod fedavg_run;
pub mod lanes;
pub mod model;
pub mod plot;

pub mod runner;
mod sgd;
pub mod task;
mod tensors;
mod train;
pub mod weights;

pub use backend::Backend;
pub use config::TrainConfig;
pub use error::FlError;
pub use eval::{EvalStats, evaluate};
pub use fedavg::fedavg;
pub use model::{Model, ModelKind, cpu_kernels, set_cpu_kernels};
pub use tensors::{NamedTensor, read_shapes, read_tensors, trainable_params, write_tensors};
pub use train::{TrainStats, train_local, train_local_with};
