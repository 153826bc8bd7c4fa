//! The baselines, as the Venn authors define them (SymbioticLab/Venn, `src/baseline.py`):
//!
//! - `random` (`RandomScheduler`; Meta's and Apple's managers): the device is offered every
//!   eligible job with open demand in a uniformly random order and takes the first whose
//!   task fits its session;
//! - `random-order` (`RandomOrderScheduler`, the paper's "Random"): each round request draws
//!   a random priority; a job whose request has started getting devices keeps being offered
//!   first until that request's demand is met (rounds are filled one at a time, not
//!   interleaved), then the others by priority; one job per offer;
//! - `fifo` (`FIFOScheduler`): job arrival order, a job keeps its place across rounds; one
//!   job per offer;
//! - `fifo-request` (`FIFOReqScheduler`): arrival order of the current round request, so
//!   every new or retried round goes to the back; one job per offer;
//! - `srsf` (`SmallReqScheduler`): every eligible job with open demand, ordered by each
//!   job's remaining demand *as of the last round request to arrive* (the order is only
//!   recomputed then), ties by the order of the jobs' first requests; the device takes the
//!   first that fits.

use super::{DeviceCtx, Policy, RequestPlan, SchedView};
use crate::hash::FastMap;
use crate::ids::JobId;
use crate::job::JobState;
use crate::rng::SeededRng;
use std::collections::BTreeSet;

/// Every eligible job, in a uniformly random order per check-in.
#[derive(Debug, Default, Clone, Copy)]
pub struct Random;

/// A random priority per round request (the framework's per-request ticket, see
/// [`Policy::on_request`]), with started requests served first.
#[derive(Debug, Default, Clone)]
pub struct RandomOrder {
    /// Priority of each job's current request, dropped when the job is removed.
    priority: FastMap<JobId, f64>,
    /// Jobs offered a device since their current request's demand was last met, served
    /// before every other job, smallest id first (the authors keep a Python set of small
    /// integers, which iterates in about that order).
    running: BTreeSet<JobId>,
}

/// First come, first served by job arrival.
#[derive(Debug, Default, Clone, Copy)]
pub struct Fifo;

/// First come, first served by round-request arrival.
#[derive(Debug, Default, Clone, Copy)]
pub struct FifoRequest;

/// Smallest remaining demand first, as of the last round request to arrive.
#[derive(Debug, Default, Clone)]
pub struct Srsf {
    /// Each queued job's remaining demand when the last request arrived.
    remaining: FastMap<JobId, u32>,
    /// Order of each job's first request (the tie-break).
    first_request: FastMap<JobId, u32>,
    next_first: u32,
}

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
    fn offer(
        &mut self,
        v: &SchedView<'_>,
        d: &DeviceCtx<'_>,
        rng: &mut SeededRng,
        offer: &mut Vec<JobId>,
    ) {
        // The device takes the first job of a uniformly shuffled list that fits: that is a
        // uniform draw among the jobs that accept and fit it. Drawn by rejection from the
        // eligible queues first (one draw almost always suffices, and nothing is collected
        // per check-in); after a few misses, the full shuffle.
        let total: usize = d
            .eligible
            .iter()
            .filter_map(|g| v.groups.get(g))
            .map(|g| g.queue.len())
            .sum();
        if total == 0 {
            return;
        }
        for _ in 0..REJECTION_TRIES {
            let mut pick = rng.below(total as u64) as usize;
            for g in d.eligible.iter() {
                let Some(q) = v.groups.get(g).map(|g| &g.queue) else {
                    continue;
                };
                if pick < q.len() {
                    let j = q[pick];
                    if v.accepts(j, d) && v.fits(j, d) {
                        offer.push(j);
                        return;
                    }
                    break;
                }
                pick -= q.len();
            }
        }
        v.all_accepting(d, offer);
        // A Fisher-Yates shuffle drawn only as far as the first job that fits: the device
        // never looks past it, so the rest of the order need not be drawn.
        let n = offer.len();
        for i in 0..n {
            let k = i + rng.below((n - i) as u64) as usize;
            offer.swap(i, k);
            if v.fits(offer[i], d) {
                offer.truncate(i + 1);
                return;
            }
        }
    }
}

/// Rejection draws `random` makes before it shuffles the whole eligible list.
const REJECTION_TRIES: usize = 4;

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
        self.running.remove(&job.id);
    }
    fn on_assigned(&mut self, job: &JobState) {
        if job.open_demand() == 0 {
            self.running.remove(&job.id);
        }
    }
    fn select(&mut self, v: &SchedView<'_>, d: &DeviceCtx<'_>, _: &mut SeededRng) -> Option<JobId> {
        let started = self.running.iter().copied().find(|&j| {
            v.jobs
                .get(&j)
                .is_some_and(|s| d.eligible.contains(s.group) && v.accepts(j, d))
        });
        if started.is_some() {
            return started;
        }
        let j = v.best_head(d)?;
        self.running.insert(j);
        Some(j)
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

impl Srsf {
    /// A request of `job` arrived (or was restored): note its first request's order and
    /// re-rank every job.
    fn request_arrived(&mut self, job: &JobState, view: &SchedView<'_>) {
        self.first_request.entry(job.id).or_insert_with(|| {
            self.next_first += 1;
            self.next_first - 1
        });
        self.snapshot(view);
    }

    /// Re-reads every queued job's remaining demand (the authors' `_cal_job_scores`).
    fn snapshot(&mut self, view: &SchedView<'_>) {
        self.remaining.clear();
        for (id, j) in view.jobs {
            let open = j.open_demand();
            if j.current.is_some() && open > 0 {
                self.remaining.insert(*id, open);
            }
        }
    }
}

/// Tie-break orders above this share a key's fractional part (never reached: it would
/// take a million jobs).
const MAX_TIE_ORDER: f64 = (1u64 << 20) as f64;

impl Policy for Srsf {
    fn name(&self) -> &'static str {
        "srsf"
    }
    fn queue_key(&self, job: &JobState, _: &SchedView<'_>) -> f64 {
        let Some(&rem) = self.remaining.get(&job.id) else {
            return f64::INFINITY;
        };
        // Remaining demand, ties by first-request order in the fraction (exact in an f64:
        // 32 integer bits + 20 fraction bits).
        let order = self.first_request.get(&job.id).copied().unwrap_or(0);
        f64::from(rem) + f64::from(order).min(MAX_TIE_ORDER - 1.0) / MAX_TIE_ORDER
    }
    fn on_request(
        &mut self,
        job: &JobState,
        view: &SchedView<'_>,
        _: f64,
        _: &mut SeededRng,
    ) -> RequestPlan {
        self.request_arrived(job, view);
        RequestPlan::default()
    }
    fn on_restore(&mut self, job: &JobState, view: &SchedView<'_>, _: f64) {
        self.request_arrived(job, view);
    }
    fn on_job_removed(&mut self, job: &JobState) {
        self.remaining.remove(&job.id);
        self.first_request.remove(&job.id);
    }
    fn offer(
        &mut self,
        v: &SchedView<'_>,
        d: &DeviceCtx<'_>,
        _: &mut SeededRng,
        offer: &mut Vec<JobId>,
    ) {
        // The head of the offer is the best queue head; when it fits (nearly always), the
        // device never looks further and the rest of the list need not be built.
        if let Some(j) = v.best_head(d)
            && v.fits(j, d)
        {
            offer.push(j);
            return;
        }
        v.all_accepting(d, offer);
        let mut keyed: Vec<(f64, JobId)> = offer.iter().map(|&j| (v.key(j), j)).collect();
        keyed.sort_unstable_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        offer.clear();
        offer.extend(keyed.into_iter().map(|k| k.1));
    }
}
