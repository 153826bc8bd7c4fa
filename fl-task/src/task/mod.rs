//! The plug-in point for FL jobs: the [`FlTask`] trait a user implements to bring their own
//! job, and the [`Registry`] through which `fl-job --task NAME` and `device-agent` pick the
//! same implementation by name.
//!
//! A task defines what a job is: how its model starts ([`FlTask::init`]), how a device
//! trains it on its partition ([`FlTask::train`]), how the server combines updates
//! ([`FlTask::aggregate`], FedAvg by default), how it is evaluated
//! ([`FlTask::evaluate`]), and what travels: the [`TaskPlan`] (JSON) and the weights (bytes,
//! opaque to everyone but the task, decoded to named tensors only for aggregation).
//!
//! The built-in jobs — ResNet-18 and MobileNet-V2 on FEMNIST — are [`BurnTask`]s
//! registered under `resnet18-femnist` and `mobilenet_v2-femnist`.

mod burn_task;
mod registry;

pub use burn_task::BurnTask;
pub use registry::{Registry, TaskFactory};

use crate::error::FlError;
use crate::eval::EvalStats;
use crate::tensors::NamedTensor;
use datasets::SampleView;
use std::collections::HashMap;
pub use venn_core::TaskWork;

/// What an assigned device receives from the job before training: the protocol's
/// [`TaskPlan`], defined in `venn-api`.
pub use venn_api::TaskPlan;

/// A device's result.
#[derive(Debug, Clone)]
pub struct LocalUpdate {
    /// The trained weights.
    pub weights: Vec<u8>,
    /// Samples the device trained on (FedAvg's weight).
    pub samples: u64,
    /// Mean training loss.
    pub loss: f64,
}

/// Server-side state a task's aggregation may keep across rounds (e.g. momentum).
#[derive(Debug, Default, Clone)]
pub struct ServerState {
    /// Rounds aggregated so far.
    pub rounds: u32,
    /// Named tensor lists the task keeps, e.g. `"velocity"`.
    pub slots: HashMap<String, Vec<NamedTensor>>,
}

/// An FL job's behaviour. Implementations must be deterministic given their inputs and
/// seeds, and safe to share across threads (devices train concurrently).
pub trait FlTask: Send + Sync {
    /// Registry name.
    fn name(&self) -> &str;

    /// The initial global weights.
    fn init(&self, seed: u64) -> Result<Vec<u8>, FlError>;

    /// Local training of the global weights on one device's data.
    fn train(&self, global: &[u8], data: SampleView<'_>, seed: u64)
    -> Result<LocalUpdate, FlError>;

    /// Local training in round `round` (0-based, the manager's round number: a retried
    /// round keeps it). The drivers — the device agent, the simulator's trainer and
    /// `fl-job fedavg` — call this one. Default: [`FlTask::train`], for tasks whose
    /// training does not depend on the round; override it for a schedule over rounds (the
    /// built-in tasks' `lr_decay`).
    fn train_round(
        &self,
        global: &[u8],
        data: SampleView<'_>,
        seed: u64,
        round: u32,
    ) -> Result<LocalUpdate, FlError> {
        let _ = round;
        self.train(global, data, seed)
    }

    /// Local training of several clients of round `round` from the same global weights,
    /// each with its data and seed; results in input order, each as
    /// [`FlTask::train_round`] would give it. Drivers call this where a
    /// round's clients are known together (`fl-job fedavg --stack-clients`). Default: one
    /// after another; the built-in tasks train them as one computation
    /// ([`crate::train_stacked`]).
    fn train_round_together(
        &self,
        global: &[u8],
        clients: &[(SampleView<'_>, u64)],
        round: u32,
    ) -> Result<Vec<LocalUpdate>, FlError> {
        clients
            .iter()
            .map(|&(data, seed)| self.train_round(global, data, seed, round))
            .collect()
    }

    /// Evaluation of weights on held-out data.
    fn evaluate(&self, weights: &[u8], data: SampleView<'_>) -> Result<EvalStats, FlError>;

    /// Weights → named tensors (for aggregation and checks).
    fn decode(&self, weights: &[u8]) -> Result<Vec<NamedTensor>, FlError>;

    /// Named tensors → weights.
    fn encode(&self, tensors: Vec<NamedTensor>) -> Result<Vec<u8>, FlError>;

    /// The work one device's task does, from which its device time follows
    /// ([`TaskWork`]: samples × epochs × the model's cost per sample, the model's bytes
    /// both ways). `None` (the default, for tasks that cannot say): the job's configured
    /// `workload_s` and `comm_s` time every task alike.
    fn work(&self) -> Option<TaskWork> {
        None
    }

    /// Unlabeled samples the server should hold for [`FlTask::calibrate`] (drawn by the
    /// drivers from held-out data, disjoint from the evaluation set). 0, the default: the
    /// task has no such step and drivers skip it.
    fn calibration_samples(&self) -> usize {
        0
    }

    /// A server-side step after every [`FlTask::aggregate`], on the server's
    /// [`FlTask::calibration_samples`]; its result is the round's global weights (scored,
    /// and sent to the next round's devices). The built-in tasks re-estimate BatchNorm
    /// statistics there ([`crate::recalibrate_bn`]). Default: the weights unchanged.
    fn calibrate(&self, weights: &[u8], data: SampleView<'_>) -> Result<Vec<u8>, FlError> {
        let _ = data;
        Ok(weights.to_vec())
    }

    /// Combines the round's updates into the next global weights. Default: FedAvg, the
    /// sample-weighted mean of every tensor.
    fn aggregate(
        &self,
        global: &[u8],
        updates: &[(Vec<u8>, u64)],
        state: &mut ServerState,
    ) -> Result<Vec<u8>, FlError> {
        let _ = global;
        state.rounds += 1;
        self.encode(weighted_mean(self, updates)?)
    }

    /// Rejects an update that does not belong to this task or holds NaN/Inf; returns its
    /// decoded tensors.
    fn check_update(&self, weights: &[u8]) -> Result<Vec<NamedTensor>, FlError> {
        let tensors = self.decode(weights)?;
        if let Some(t) = tensors
            .iter()
            .find(|t| t.values.iter().any(|v| !v.is_finite()))
        {
            return Err(FlError::Weights(format!("{} holds NaN or Inf", t.path)));
        }
        Ok(tensors)
    }
}

/// The sample-weighted mean of the updates' tensors (accumulated in f64), checking that
/// every update has the same paths and shapes.
pub fn weighted_mean<T: FlTask + ?Sized>(
    task: &T,
    updates: &[(Vec<u8>, u64)],
) -> Result<Vec<NamedTensor>, FlError> {
    // Summed in f64: a sum of client-reported u64 counts could wrap.
    let total: f64 = updates.iter().map(|(_, n)| *n as f64).sum();
    if updates.is_empty() || total == 0.0 {
        return Err(FlError::FedAvg("no samples to average".into()));
    }
    let mut template: Option<Vec<NamedTensor>> = None;
    let mut acc: Vec<Vec<f64>> = Vec::new();
    for (k, (bytes, n)) in updates.iter().enumerate() {
        let tensors = task.decode(bytes)?;
        let t0 = template.get_or_insert_with(|| {
            acc = tensors.iter().map(|t| vec![0.0; t.values.len()]).collect();
            tensors.clone()
        });
        if tensors.len() != t0.len()
            || tensors
                .iter()
                .zip(t0.iter())
                .any(|(a, b)| a.path != b.path || a.shape != b.shape)
        {
            return Err(FlError::FedAvg(format!(
                "update {k} does not match the model's tensors"
            )));
        }
        let w = *n as f64 / total;
        for (a, t) in acc.iter_mut().zip(&tensors) {
            for (x, v) in a.iter_mut().zip(&t.values) {
                *x += w * *v as f64;
            }
        }
    }
    let mut out = template.expect("at least one update");
    for (t, a) in out.iter_mut().zip(acc) {
        t.values = a.into_iter().map(|v| v as f32).collect();
    }
    Ok(out)
}
