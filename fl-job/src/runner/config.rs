//! What one live FL job does: its task, device requirement, rounds, per-round target and
//! over-commit, deadline, and when to stop. Loadable from TOML.

use serde::{Deserialize, Serialize};
use venn_core::Requirement;

fn overcommit() -> f64 {
    1.3
}
fn min_fraction() -> f64 {
    0.8
}
fn retries() -> u32 {
    10
}
fn eval_samples() -> usize {
    2000
}

/// A live job's settings.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JobConfig {
    /// Job name (shown by the manager).
    pub name: String,
    /// Task name in the registry, e.g. `resnet18-femnist`.
    pub task: String,
    /// Task parameters (e.g. `{ width = 8, train = { lr = 0.05 } }`).
    #[serde(default)]
    pub params: serde_json::Value,
    /// Devices the job may use.
    #[serde(default)]
    pub requirement: Requirement,
    /// Rounds to run (fewer if the target accuracy is reached).
    pub rounds: u32,
    /// Results wanted per round.
    pub target_participants: u32,
    /// Devices requested per round = ceil(target × over-commit), as production FL
    /// systems over-provision against drop-outs.
    #[serde(default = "overcommit")]
    pub overcommit: f64,
    /// Seconds each round may take.
    pub deadline_s: f64,
    /// The round succeeds once this fraction of the target has reported.
    #[serde(default = "min_fraction")]
    pub min_response_fraction: f64,
    /// Stop once test accuracy reaches this.
    #[serde(default)]
    pub target_accuracy: Option<f64>,
    /// Seed of the initial model and the local shuffles.
    #[serde(default)]
    pub seed: u64,
    /// Give up a round after this many aborted attempts.
    #[serde(default = "retries")]
    pub max_attempts: u32,
    /// Size of the fixed evaluation set: test samples drawn from every writer's test part
    /// by `eval_seed` (`Femnist::eval_set`), the same for every policy and run seed.
    /// 2,000 gives each accuracy a 95 % interval of about ±2 points; every row records
    /// its interval. Fewer are used when the data has fewer test samples.
    #[serde(default = "eval_samples")]
    pub eval_samples: usize,
    /// Seed of the evaluation set's draw (not of the job: jobs with different `seed`s
    /// share the set unless this differs too).
    #[serde(default)]
    pub eval_seed: u64,
    /// Statement of work for a manager that runs admission control (`[statement]`:
    /// `value = [[seconds, value], …]`, `rounds = [[rounds, probability], …]`,
    /// `demand`, `round_s`, optional `max_wait_s`); ignored by a manager without it.
    #[serde(default)]
    pub statement: Option<venn_core::admission::StatementOfWork>,
}

impl JobConfig {
    /// The first setting that cannot work, as (key, reason).
    pub fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.rounds == 0 {
            return Err(("rounds", "must be at least 1".into()));
        }
        if self.eval_samples == 0 {
            return Err(("eval_samples", "must be at least 1".into()));
        }
        if self.target_participants == 0 {
            return Err(("target_participants", "must be at least 1".into()));
        }
        if !(self.overcommit.is_finite() && self.overcommit >= 1.0) {
            return Err(("overcommit", "must be ≥ 1".into()));
        }
        if !(self.deadline_s.is_finite() && self.deadline_s > 0.0) {
            return Err(("deadline_s", "must be positive".into()));
        }
        if !(self.min_response_fraction > 0.0 && self.min_response_fraction <= 1.0) {
            return Err(("min_response_fraction", "must be in (0, 1]".into()));
        }
        if let Some(a) = self.target_accuracy
            && !(0.0..=1.0).contains(&a)
        {
            return Err(("target_accuracy", "must be in [0, 1]".into()));
        }
        if let Some(sow) = &self.statement
            && let Err(venn_core::CoreError::Invalid { field, reason }) = sow.validate()
        {
            return Err((field, reason));
        }
        Ok(())
    }

    /// Devices to request per round.
    pub fn demand(&self) -> u32 {
        (self.target_participants as f64 * self.overcommit).ceil() as u32
    }

    /// Results that make a round a success.
    pub fn needed(&self) -> u32 {
        ((self.target_participants as f64 * self.min_response_fraction).ceil() as u32).max(1)
    }
}
