//! Manager settings (CLI flags map onto these).

use serde::{Deserialize, Serialize};
use venn_core::admission::AdmissionParams;
use venn_core::{FitRule, PolicyConfig, SupplyConfig};

/// How the manager schedules and paces.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Settings {
    /// The policy and its parameters; a custom policy needs a registry that knows it
    /// ([`crate::Manager::open_with_registry`]).
    pub policy: PolicyConfig,
    /// Supply-estimator window.
    pub supply: SupplyConfig,
    /// Seed of the core's random generator.
    pub seed: u64,
    /// How a device that says when it leaves (`online_for_s` at check-in) judges whether
    /// an offered job fits ([`venn_core::fit`]).
    #[serde(default)]
    pub fit: FitRule,
    /// Seconds an idle device is told to wait before checking in again.
    pub retry_after_s: f64,
    /// Seconds past the round deadline a task's lease still runs.
    pub lease_grace_s: f64,
    /// Seconds past its deadline after which the manager aborts a round its job left open.
    pub round_grace_s: f64,
    /// Largest request body accepted, in bytes.
    pub max_body_bytes: usize,
    /// Posted-price admission control (see [`crate::admission`]): `None` (the default)
    /// registers every job as before; `Some` makes a statement of work mandatory at
    /// registration and admits, holds, declines or evicts jobs by it.
    #[serde(default)]
    pub admission: Option<AdmissionParams>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            policy: PolicyConfig::default(),
            supply: SupplyConfig::default(),
            seed: 0,
            fit: FitRule::default(),
            retry_after_s: 5.0,
            lease_grace_s: 30.0,
            round_grace_s: 60.0,
            max_body_bytes: 64 * 1024,
            admission: None,
        }
    }
}
