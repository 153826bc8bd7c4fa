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
//!
//! **`venn` and `irs` run through [`FastTiers`]**, a wrapper around the core's
//! `Venn` policy that makes the same tier decisions with the same random draws
//! but without sorting the 4096-sample history three times per request
//! (`venn_core::policy::choose_tier`), which was about 70 % of a `venn` run.

use venn_core::policy::{DeviceCtx, Policy, SchedView, TierParams, Venn};
use venn_core::{
    JobId, JobState, ManagerConfig, PolicyParams, ResourceManager, SeededRng, TierBand,
};

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

/// The core's `Venn` policy with an exact, cheaper tier choice.
///
/// `choose_tier` needs three order statistics (the tier bounds and two 95th
/// percentiles), which `select_nth_unstable` finds without a full sort, in a
/// reused buffer. It also returns early, *after* the same random draw, when
/// the restriction test `V + g·c < c + 1` cannot hold for any `g ≥ 0`
/// (`c + 1 ≤ V`), which is the common case under load (scheduling delay
/// dominates, so `c` is small).
#[derive(Debug)]
pub struct FastTiers {
    inner: Venn,
    tiers: TierParams,
    scratch: Vec<f64>,
}

impl FastTiers {
    /// Wraps `Venn::new(params)`.
    pub fn new(params: PolicyParams) -> Self {
        FastTiers {
            inner: Venn::new(params),
            tiers: params.tiers,
            scratch: Vec::new(),
        }
    }
}

/// The `k`-th smallest value (0-based) of `v`, reordering `v`.
fn nth(v: &mut [f64], k: usize) -> f64 {
    *v.select_nth_unstable_by(k, f64::total_cmp).1
}

/// Index of the 95th percentile as `venn_core`'s tier matching takes it.
fn p95_index(n: usize) -> usize {
    ((n as f64 * 0.95).ceil() as usize).clamp(1, n) - 1
}

/// Same result and random draws as `venn_core::policy::choose_tier`.
pub fn choose_tier_fast(
    job: &JobState,
    p: TierParams,
    rng: &mut SeededRng,
    scratch: &mut Vec<f64>,
) -> Option<TierBand> {
    let v = p.v as usize;
    if v <= 1 {
        return None;
    }
    let c = job.history.collection_to_delay_ratio()?;
    let samples = &job.history.tasks;
    let n = samples.len();
    if n < v * p.min_samples_per_tier {
        return None;
    }
    scratch.clear();
    scratch.extend(samples.iter().map(|s| s.capacity_s));
    let bound = |k: usize, scratch: &mut Vec<f64>| -> f64 {
        if k == 0 {
            f64::NEG_INFINITY
        } else if k == v {
            f64::INFINITY
        } else {
            nth(scratch, k * n / v)
        }
    };
    let u = rng.below(v as u64) as usize;
    if c.is_finite() && c + 1.0 <= p.v as f64 {
        return None;
    }
    let band = TierBand {
        tier: u as u32,
        lo_s: bound(u, scratch),
        hi_s: bound(u + 1, scratch),
    };
    scratch.clear();
    scratch.extend(
        samples
            .iter()
            .filter(|s| band.contains(s.capacity_s))
            .map(|s| s.response_s),
    );
    let m = scratch.len();
    if m < p.min_samples_per_tier {
        return None;
    }
    let tier95 = nth(scratch, p95_index(m));
    scratch.clear();
    scratch.extend(samples.iter().map(|s| s.response_s));
    let untiered = nth(scratch, p95_index(n));
    if untiered <= 0.0 {
        return None;
    }
    let g = tier95 / untiered;
    let restrict = if c.is_infinite() {
        g < 1.0
    } else {
        p.v as f64 + g * c < c + 1.0
    };
    restrict.then_some(band)
}

impl Policy for FastTiers {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    fn queue_key(&self, job: &JobState, view: &SchedView<'_>) -> f64 {
        self.inner.queue_key(job, view)
    }

    fn on_request(
        &mut self,
        job: &JobState,
        _: &SchedView<'_>,
        rng: &mut SeededRng,
    ) -> Option<TierBand> {
        choose_tier_fast(job, self.tiers, rng, &mut self.scratch)
    }

    fn plan(&mut self, view: &SchedView<'_>) {
        self.inner.plan(view)
    }

    fn select(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        rng: &mut SeededRng,
    ) -> Option<JobId> {
        self.inner.select(view, dev, rng)
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
        "fifo-request" => Ok(ResourceManager::with_policy(cfg, "fifo-request", params)?),
        "venn" => Ok(ResourceManager::new(cfg, Box::new(FastTiers::new(params)))),
        "irs" => Ok(ResourceManager::new(
            cfg,
            Box::new(FastTiers::new(PolicyParams {
                tiers: TierParams::disabled(),
                ..params
            })),
        )),
        other => ResourceManager::with_policy(cfg, other, params).map_err(|e| {
            SimError::Config(format!(
                "{e}; venn-sim accepts {}",
                SIM_POLICY_NAMES.join(", ")
            ))
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use venn_core::job::{JobHistory, TaskSample};
    use venn_core::policy::choose_tier;
    use venn_core::{GroupIdx, JobSpec, Requirement, RoundId, RoundOutcome, RoundRecord, Time};

    fn job(sd: f64, rc: f64, caps: &[(f64, f64)]) -> JobState {
        let mut h = JobHistory::default();
        h.rounds.push(RoundRecord {
            round: RoundId(0),
            demand: 10,
            submitted_at: Time(0.0),
            fulfilled_at: Some(Time(sd)),
            closed_at: Time(sd + rc),
            assigned: 10,
            finished: 10,
            failed: 0,
            outcome: RoundOutcome::Success,
        });
        for &(capacity_s, response_s) in caps {
            h.tasks.push_back(TaskSample {
                capacity_s,
                response_s,
            });
        }
        JobState {
            id: JobId(1),
            spec: JobSpec::new("j", Requirement::any()),
            group: GroupIdx(0),
            registered_at: Time(0.0),
            next_round: 1,
            rounds_done: 1,
            current: None,
            history: h,
            fair_share_jct: None,
            last_demand: 10,
        }
    }

    #[test]
    fn fast_tier_choice_equals_the_core() {
        let mut draw = SeededRng::new(42);
        let mut scratch = Vec::new();
        for case in 0..300 {
            let n = 1 + draw.below(300) as usize;
            let caps: Vec<(f64, f64)> = (0..n)
                .map(|_| {
                    let c = 10.0 + (draw.below(20) as f64) * 7.0;
                    (c, c * (0.5 + draw.f64()))
                })
                .collect();
            let (sd, rc) = match case % 3 {
                0 => (10.0, 1000.0),
                1 => (1000.0, 10.0),
                _ => (0.0, 50.0),
            };
            let j = job(sd, rc, &caps);
            for v in [1, 2, 3, 4] {
                let p = TierParams {
                    v,
                    min_samples_per_tier: 5,
                };
                let (mut a, mut b) = (SeededRng::new(case), SeededRng::new(case));
                for _ in 0..5 {
                    assert_eq!(
                        choose_tier(&j, p, &mut a),
                        choose_tier_fast(&j, p, &mut b, &mut scratch),
                        "case {case} v {v}"
                    );
                }
                assert_eq!(a.below(1 << 40), b.below(1 << 40), "rng streams diverged");
            }
        }
    }
}
