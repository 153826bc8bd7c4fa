//! Hyper-parameters of local training, as a serde struct so jobs can ship them as JSON.

use serde::{Deserialize, Serialize};

use crate::error::FlError;

/// Local-training hyper-parameters (SGD with momentum on cross-entropy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Learning rate (of round 0; see `lr_decay`).
    pub lr: f64,
    /// Per-round decay of the learning rate: round `r` (0-based, the manager's round
    /// number) trains at `lr × lr_decay^r`. 1 keeps it constant. Why: with BatchNorm, FedAvg
    /// evaluates the averaged weights with the average of the clients' running statistics,
    /// which fit the clients' own drifted weights, not their average; late in a run, when
    /// the clients still drift as far as in round 1, single rounds fall back by 5–13 points
    /// on that mismatch alone (`fl-job/TRAINING.md`, "MobileNet-V2 under FedAvg"). A decaying
    /// rate shrinks the drift as the model settles.
    pub lr_decay: f64,
    /// Momentum (PyTorch semantics: no dampening).
    pub momentum: f64,
    /// L2 weight decay; 0 disables it.
    pub weight_decay: f64,
    /// Mini-batch size.
    pub batch_size: usize,
    /// Passes over the local data.
    pub local_epochs: usize,
    /// Stop after this many SGD steps in total, if set (then epochs are an upper bound).
    pub max_steps: Option<usize>,
    /// Seed of the per-epoch shuffles (epoch `e` uses `seed + e`).
    pub seed: u64,
}

impl Default for TrainConfig {
    fn default() -> Self {
        Self {
            lr: 0.05,
            lr_decay: 1.0,
            momentum: 0.9,
            weight_decay: 0.0,
            batch_size: 20,
            local_epochs: 1,
            max_steps: None,
            seed: 0,
        }
    }
}

impl TrainConfig {
    /// Refuse settings that cannot train.
    pub fn validate(&self) -> Result<(), FlError> {
        let bad = |m: &str| Err(FlError::Config(m.to_owned()));
        if !(self.lr.is_finite() && self.lr > 0.0) {
            return bad("lr must be positive");
        }
        if !(self.lr_decay > 0.0 && self.lr_decay <= 1.0) {
            return bad("lr_decay must be in (0, 1]");
        }
        if !(0.0..1.0).contains(&self.momentum) {
            return bad("momentum must be in [0, 1)");
        }
        if !(self.weight_decay.is_finite() && self.weight_decay >= 0.0) {
            return bad("weight_decay must be ≥ 0");
        }
        if self.batch_size == 0 {
            return bad("batch_size must be positive");
        }
        if self.local_epochs == 0 && self.max_steps.is_none() {
            return bad("local_epochs must be positive");
        }
        Ok(())
    }

    /// The settings of local training in round `round` (0-based): `lr × lr_decay^round`,
    /// the rest unchanged.
    pub fn for_round(&self, round: u32) -> TrainConfig {
        TrainConfig {
            lr: self.lr * self.lr_decay.powi(round.min(i32::MAX as u32) as i32),
            ..self.clone()
        }
    }
}
