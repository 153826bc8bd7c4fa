//! Building the simulated manager's policy. Every policy lives in `venn-core` (or is a
//! custom one registered in a [`PolicyRegistry`]): the simulator only builds a
//! `ResourceManager` from the config's [`PolicyConfig`], so simulation and the live manager
//! run the very same scheduling code.
//!
//! `fifo` is job-arrival order (the authors' `FIFOScheduler`: a job keeps its place across
//! rounds); `fifo-request` orders by the current round request instead, which under the
//! paper's load sends every closed or aborted round to the back of the queue and starves
//! nearly every request until its deadline.

use venn_core::{ManagerConfig, PolicyConfig, PolicyRegistry, ResourceManager};

use super::error::SimError;

/// Builds a resource manager running the configured policy from `registry`.
pub fn manager(
    policy: &PolicyConfig,
    cfg: ManagerConfig,
    registry: &PolicyRegistry,
) -> Result<ResourceManager, SimError> {
    // The core's error already lists every policy the registry knows.
    ResourceManager::with_registry(cfg, policy, registry)
        .map_err(|e| SimError::Config(e.to_string()))
}
