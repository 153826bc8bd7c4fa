//! Hyper-parameters of local training, as a serde struct so jobs can ship them as JSON.

use serde::{Deserialize, Serialize};

use crate::error::FlError;

/// Local-training hyper-parameters (SGD with momentum on cross-entropy).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TrainConfig {
    /// Learning rate.
    pub lr: f64,
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
}
