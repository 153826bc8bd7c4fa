//! The baselines: `random` (Meta's and Apple's managers: each check-in goes to a uniformly
//! random eligible job), `random-order` (the paper's optimised baseline: each request draws
//! a random priority), `fifo` (job arrival order, as the authors' `FIFOScheduler`: a job
//! keeps its place across rounds), `fifo-request` (arrival order of the current round
//! request: every new or retried round goes to the back) and `srsf` (smallest remaining
//! demand of the current request first).

use super::{DeviceCtx, Policy, RequestPlan, SchedView};
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::job::JobState;
use crate::rng::SeededRng;

/// Uniformly random eligible job per check-in.
#[derive(Debug, Default, Clone, Copy)]
pub struct Random;

/// A random priority per round request: the framework's per-request ticket (see
/// [`Policy::on_request`]), kept per job.
#[derive(Debug, Default, Clone)]
pub struct RandomOrder {
    /// Priority of each job's current request, dropped when the job is removed.
    priority: FastMap<JobId, f64>,
}

/// First come, first served by job arrival.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fifo;

/// First come, first served by round-request arrival.
#[derive(Debug, Default, Clone, Copy)]
pub struct FifoRequest;

/// Smallest remaining demand of the current request first.
#[derive(Debug, Default, Clone, Copy)]
pub struct Srsf;

fn submitted(job: &JobState) -> f64 {
    job.current
        .as_ref()
        .map_or(f64::INFINITY, |r| r.submitted_at.secs())
}

impl Policy for Random {
    fn name(&self) -> &'static str {
        "random"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        submitted(job)
    }
    fn select(
        &mut self,
        v: &SchedView<'_>,
        d: &DeviceCtx<'_>,
        rng: &mut SeededRng,
    ) -> Option<JobId> {
        v.random_job(d, rng)
    }
}

impl Policy for RandomOrder {
    fn name(&self) -> &'static str {
        "random-order"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        match (&job.current, self.priority.get(&job.id)) {
            (Some(_), Some(p)) => *p,
            _ => f64::INFINITY,
        }
    }
    fn on_request(
        &mut self,
        job: &JobState,
        _: &SchedView<'_>,
        ticket: f64,
        _: &mut SeededRng,
    ) -> RequestPlan {
        self.priority.insert(job.id, ticket);
        RequestPlan::default()
    }
    fn on_restore(&mut self, job: &JobState, _: &SchedView<'_>, ticket: f64) {
        self.priority.insert(job.id, ticket);
    }
    fn on_job_removed(&mut self, job: &JobState) {
        self.priority.remove(&job.id);
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}

impl Policy for Fifo {
    fn name(&self) -> &'static str {
        "fifo"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        job.registered_at.secs()
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}

impl Policy for FifoRequest {
    fn name(&self) -> &'static str {
        "fifo-request"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        submitted(job)
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}

impl Policy for Srsf {
    fn name(&self) -> &'static str {
        "srsf"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        job.open_demand() as f64
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}
