//! `random-delay`: random start delays spread congestion out without knowing the jobs'
//! patterns (Leighton, Maggs & Rao 1994 for packets; Ghaffari 2015 for many distributed
//! jobs sharing a network). Each job — or, with `delay_per_round`, each round request —
//! waits a delay drawn uniformly from [0, scale·Δ] (at most half the round's time to its
//! deadline, so a delayed round can still run), where Δ is the current congestion
//! (open demand competing for the job's devices over their check-in rate, see
//! [`super::congestion_delay_s`]). After its delay a request is served in order of its
//! delayed start time, so a job keeps its place across rounds as under `fifo`.

use super::{DeviceCtx, Policy, RandomDelayParams, RequestPlan, SchedView, congestion_delay_s};
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::job::JobState;
use crate::rng::SeededRng;
use crate::time::Time;

/// Random start delays scaled by congestion.
#[derive(Debug)]
pub struct RandomDelay {
    params: RandomDelayParams,
    /// Per-job delayed start (per-job mode), the queue key of all its rounds; dropped when
    /// the job is removed.
    start: FastMap<JobId, f64>,
}

impl RandomDelay {
    /// The policy with the given knobs.
    pub fn new(params: RandomDelayParams) -> Self {
        RandomDelay {
            params,
            start: FastMap::default(),
        }
    }

    /// A delay uniform in [0, scale·Δ], capped at half the round's time to its deadline so
    /// a delayed round still has time to run.
    fn draw(&self, view: &SchedView<'_>, job: &JobState, rng: &mut SeededRng) -> f64 {
        let room = job
            .current
            .as_ref()
            .map_or(0.0, |r| r.request.deadline.since(view.now).max(0.0) / 2.0);
        let span = (self.params.delay_scale.max(0.0) * congestion_delay_s(view, job)).min(room);
        if span.is_finite() {
            rng.f64() * span
        } else {
            0.0
        }
    }
}

impl Policy for RandomDelay {
    fn name(&self) -> &'static str {
        "random-delay"
    }

    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        if !self.params.delay_per_round
            && let Some(s) = self.start.get(&job.id)
        {
            return *s;
        }
        job.current
            .as_ref()
            .map_or(f64::INFINITY, |r| r.not_before.secs())
    }

    fn on_request(
        &mut self,
        job: &JobState,
        view: &SchedView<'_>,
        _: f64,
        rng: &mut SeededRng,
    ) -> RequestPlan {
        if self.params.delay_per_round {
            let start = view.now + self.draw(view, job, rng);
            return RequestPlan {
                tier: None,
                not_before: Some(start),
            };
        }
        if self.start.contains_key(&job.id) {
            // Later rounds follow at once: only the job's start is shifted.
            return RequestPlan::default();
        }
        if !job.history.rounds.is_empty() {
            // A job restored after a restart has started already: no second delay.
            self.start.insert(job.id, job.registered_at.secs());
            return RequestPlan::default();
        }
        let start: Time = view.now + self.draw(view, job, rng);
        self.start.insert(job.id, start.secs());
        RequestPlan {
            tier: None,
            not_before: Some(start),
        }
    }

    fn on_job_removed(&mut self, job: &JobState) {
        self.start.remove(&job.id);
    }

    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        v.best_head(d)
    }
}
