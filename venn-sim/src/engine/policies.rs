//! Policy names as the simulator accepts them. Every policy lives in `venn-core`: the
//! simulator only builds a `ResourceManager` by name, so simulation and the live manager
//! run the very same scheduling code.
//!
//! `fifo` is job-arrival order (the authors' `FIFOScheduler`: a job keeps its place across
//! rounds); `fifo-request` orders by the current round request instead, which under the
//! paper's load sends every closed or aborted round to the back of the queue and starves
//! nearly every request until its deadline.

use venn_core::{ManagerConfig, PolicyParams, ResourceManager};

use super::error::SimError;

/// Names `venn-sim` accepts: `venn_core::POLICY_NAMES` and `irs`.
pub const SIM_POLICY_NAMES: &[&str] = &[
    "random",
    "random-order",
    "fifo",
    "fifo-request",
    "srsf",
    "venn",
    "random-delay",
    "chunked",
    "irs",
];

/// Builds a resource manager running the policy called `name`.
pub fn manager(
    name: &str,
    cfg: ManagerConfig,
    params: PolicyParams,
) -> Result<ResourceManager, SimError> {
    ResourceManager::with_policy(cfg, name, params).map_err(|e| {
        SimError::Config(format!(
            "{e}; venn-sim accepts {}",
            SIM_POLICY_NAMES.join(", ")
        ))
    })
}
