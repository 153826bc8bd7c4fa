//! The built-in tasks: a Burn model of [`ModelKind`] trained on FEMNIST with SGD, aggregated
//! with FedAvg. ResNet-18 and MobileNet-V2 are this one type with different kinds.

use super::{FlTask, LocalUpdate, TaskWork};
use crate::backend::Backend;
use crate::calibrate::recalibrate_bn;
use crate::config::TrainConfig;
use crate::error::FlError;
use crate::eval::{EvalStats, evaluate};
use crate::model::ModelKind;
use crate::stacked::{StackedClient, train_stacked};
use crate::tensors::{NamedTensor, read_tensors, write_tensors};
use crate::train::train_local;
use crate::weights;
use burn::tensor::Device;
use datasets::SampleView;
use serde::{Deserialize, Serialize};
use std::sync::Mutex;

/// A Burn model on FEMNIST.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BurnTask {
    /// Registry name.
    pub name: String,
    /// Model and width.
    pub kind: ModelKind,
    /// Local-training hyper-parameters.
    pub train: TrainConfig,
    /// Evaluation batch size; 0 leaves it to [`crate::eval::auto_eval_batch`].
    pub eval_batch: usize,
    /// Held-out samples on which the server re-estimates the BatchNorm statistics of the
    /// averaged weights after every round ([`crate::recalibrate_bn`]); 0 keeps FedAvg's
    /// averaged statistics. Why: those describe the clients' drifted weights, not their
    /// average, and single rounds of MobileNet-V2 fell back by 3–13 points on that alone
    /// (`fl-job/TRAINING.md`, "BatchNorm statistics re-estimated by the server").
    #[serde(default)]
    pub bn_calibration: usize,
}

impl BurnTask {
    fn device(&self) -> Device {
        Backend::default().device()
    }
}

impl FlTask for BurnTask {
    fn name(&self) -> &str {
        &self.name
    }

    fn init(&self, seed: u64) -> Result<Vec<u8>, FlError> {
        self.kind.validate()?;
        let device = self.device();
        // The backend has one random state per process and parameters draw from it when
        // first used (inside `to_bytes`): without the lock, jobs initialising at the same
        // time in one process (venn-lab) would interleave draws and lose reproducibility.
        static SEEDED_INIT: Mutex<()> = Mutex::new(());
        let _one_at_a_time = SEEDED_INIT.lock().unwrap_or_else(|e| e.into_inner());
        device.seed(seed);
        weights::to_bytes(self.kind, &self.kind.init(&device))
    }

    /// Round 0's training (the learning rate undecayed).
    fn train(
        &self,
        global: &[u8],
        data: SampleView<'_>,
        seed: u64,
    ) -> Result<LocalUpdate, FlError> {
        self.train_round(global, data, seed, 0)
    }

    fn train_round(
        &self,
        global: &[u8],
        data: SampleView<'_>,
        seed: u64,
        round: u32,
    ) -> Result<LocalUpdate, FlError> {
        let device = self.device();
        let model = weights::load(self.kind, global, &device)?;
        let cfg = TrainConfig {
            seed,
            ..self.train.for_round(round)
        };
        let (model, stats) = train_local(model, data, &cfg, &device)?;
        Ok(LocalUpdate {
            weights: weights::to_bytes(self.kind, &model)?,
            samples: data.labels.len() as u64,
            loss: stats.mean_loss,
        })
    }

    fn train_round_together(
        &self,
        global: &[u8],
        clients: &[(SampleView<'_>, u64)],
        round: u32,
    ) -> Result<Vec<LocalUpdate>, FlError> {
        let device = self.device();
        let model = weights::load(self.kind, global, &device)?;
        let cfgs: Vec<TrainConfig> = clients
            .iter()
            .map(|&(_, seed)| TrainConfig {
                seed,
                ..self.train.for_round(round)
            })
            .collect();
        let stacked: Vec<StackedClient<'_>> = clients
            .iter()
            .zip(&cfgs)
            .map(|(&(data, _), cfg)| StackedClient { data, cfg })
            .collect();
        train_stacked(&model, self.kind, &stacked, &device)?
            .into_iter()
            .zip(clients)
            .map(|((model, stats), (data, _))| {
                Ok(LocalUpdate {
                    weights: weights::to_bytes(self.kind, &model)?,
                    samples: data.labels.len() as u64,
                    loss: stats.mean_loss,
                })
            })
            .collect()
    }

    fn evaluate(&self, w: &[u8], data: SampleView<'_>) -> Result<EvalStats, FlError> {
        let device = self.device();
        let model = weights::load(self.kind, w, &device)?;
        Ok(evaluate(&model, data, self.eval_batch, &device))
    }

    fn calibration_samples(&self) -> usize {
        self.bn_calibration
    }

    fn calibrate(&self, w: &[u8], data: SampleView<'_>) -> Result<Vec<u8>, FlError> {
        if self.bn_calibration == 0 || data.is_empty() {
            return Ok(w.to_vec());
        }
        let device = self.device();
        let model = weights::load(self.kind, w, &device)?;
        weights::to_bytes(self.kind, &recalibrate_bn(model, data, &device))
    }

    fn work(&self) -> Option<TaskWork> {
        let cfg = &self.train;
        Some(TaskWork {
            epochs: cfg.local_epochs as f64,
            ref_ms_per_sample: self.kind.ref_train_ms_per_sample(),
            model_bytes: self.kind.weight_bytes() as f64,
            max_samples: cfg.max_steps.map(|s| (s * cfg.batch_size) as f64),
        })
    }

    fn decode(&self, w: &[u8]) -> Result<Vec<NamedTensor>, FlError> {
        read_tensors(&weights::load(self.kind, w, &self.device())?)
    }

    fn encode(&self, tensors: Vec<NamedTensor>) -> Result<Vec<u8>, FlError> {
        let model = write_tensors(self.kind.init(&self.device()), tensors)?;
        weights::to_bytes(self.kind, &model)
    }
}
