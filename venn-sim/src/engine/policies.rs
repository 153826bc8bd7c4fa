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

/// Builds a resource manager running the policy called `name`.
pub fn manager(
    name: &str,
    cfg: ManagerConfig,
    params: PolicyParams,
) -> Result<ResourceManager, SimError> {
    // The core's error already lists every policy it knows.
    ResourceManager::with_policy(cfg, name, params).map_err(|e| SimError::Config(e.to_string()))
}
