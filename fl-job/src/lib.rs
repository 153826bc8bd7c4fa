//! # fl-job — running federated-learning jobs against the Venn manager
//!
//! What a job *is* (models, local training, FedAvg, weights, the [`fl_task::task::FlTask`]
//! plug-in) lives in fl-task, on the fl-kernels CPU kernels; this crate runs jobs: the
//! round loop against the manager with the job's own HTTP server ([`runner`]), the
//! `fl-job` binary (`run`, `fedavg`, `centralized`, `bench`), and its reports.
//!
//! ## Layout
//! - [`runner`]: one job against a live manager — submit rounds, serve plans and collect
//!   updates (`runner/server.rs`), aggregate, close each round with the updates it holds
//!   (the manager judges it by venn-core's close rule), evaluate, report.
//! - [`fedavg_run`]: FedAvg without a manager (`fl-job fedavg`), a round's trainings on
//!   fl-task's lanes; [`centralized`]: one model on pooled data.
//! - [`bench`]: training and inference throughput (`fl-job bench`). Plots are venn-plot's.
//! - `error.rs`: [`JobError`], the runner's errors around fl-task's [`fl_task::FlError`].

pub mod bench;
pub mod centralized;
mod error;
pub mod fedavg_run;
pub mod runner;

pub use error::JobError;
