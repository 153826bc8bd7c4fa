//! Policy names as the simulator accepts them, and the one policy the
//! simulator adds to `venn-core`'s set.
//!
//! **`fifo` is job-arrival order here.** The authors' `FIFOScheduler`
//! (`src/baseline.py`) keeps jobs in the order they *arrived* and serves the
//! first job with open demand; a new round request keeps the job's place.
//! `venn-core`'s `fifo` orders by the time the *current request* was
//! submitted, so every closed or aborted round sends the job to the back of
//! the queue. Under the paper's load (about five times more concurrent
//! per-round demand than check-ins per deadline) that rotation starves every
//! request until its deadline and almost no round succeeds. The simulator's
//! `fifo` is therefore [`FifoByArrival`]; the core's variant stays available
//! as `fifo-request`.

use venn_core::policy::{DeviceCtx, Policy, SchedView};
use venn_core::{JobId, JobState, ManagerConfig, PolicyParams, ResourceManager, SeededRng};

use super::error::SimError;

/// Names `venn-sim` accepts: `venn_core::POLICY_NAMES`, `irs` and `fifo-request`.
pub const SIM_POLICY_NAMES: &[&str] = &[
    "random",
    "random-order",
    "fifo",
    "fifo-request",
    "srsf",
    "venn",
    "irs",
];

/// First come, first served by job arrival (the authors' `FIFOScheduler`).
#[derive(Debug, Default, Clone, Copy)]
pub struct FifoByArrival;

impl Policy for FifoByArrival {
    fn name(&self) -> &'static str {
        "fifo"
    }

    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        job.registered_at.secs()
    }

    fn select(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        _: &mut SeededRng,
    ) -> Option<JobId> {
        view.best_head(dev)
    }
}

/// Builds a resource manager running the policy called `name`.
pub fn manager(
    name: &str,
    cfg: ManagerConfig,
    params: PolicyParams,
) -> Result<ResourceManager, SimError> {
    match name {
        "fifo" => Ok(ResourceManager::new(cfg, Box::new(FifoByArrival))),
        "fifo-request" => Ok(ResourceManager::with_policy(cfg, "fifo", params)?),
        other => ResourceManager::with_policy(cfg, other, params).map_err(|e| {
            SimError::Config(format!(
                "{e}; venn-sim accepts {}",
                SIM_POLICY_NAMES.join(", ")
            ))
        }),
    }
}
