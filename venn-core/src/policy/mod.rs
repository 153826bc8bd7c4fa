//! Scheduling policies behind one trait, in the named steps of a scheduling framework:
//!
//! - **queue-sort** ([`Policy::queue_key`]): the order of open requests inside a job group;
//! - **filter** (the framework, [`SchedView::accepts`]): a device may only go to a job
//!   whose group admits it, with open demand, inside the job's tier band if it has one,
//!   not before the request's start delay or the job's hold, and never twice to the same
//!   round;
//! - **plan** ([`Policy::plan`]): re-planning when queues change (request arrival,
//!   fulfilment, close), never per check-in;
//! - **score/select** ([`Policy::select`]): the job an arriving device goes to;
//! - **reserve/bind** (the framework, in [`crate::ResourceManager::check_in`]).
//!
//! Policies are chosen by name with [`by_name`].

mod baselines;
mod chunked;
mod congestion;
pub mod irs;
mod random_delay;
mod tier;
mod venn;

pub use baselines::{Fifo, FifoRequest, Random, RandomOrder, Srsf};
pub use chunked::Chunked;
pub use congestion::{congestion_delay_s, overlapping_groups, supply_rate};
pub use random_delay::RandomDelay;
pub use tier::{TierParams, choose_tier};
pub use venn::Venn;

use crate::error::CoreError;
use crate::groups::Groups;
use crate::groupset::{GroupIdx, GroupSet};
use crate::hash::FastMap;
use crate::ids::{DeviceId, JobId};
use crate::job::{JobState, TierBand};
use crate::profile::DeviceProfile;
use crate::rng::SeededRng;
use crate::supply::{ClassIdx, SupplyEstimator};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// Read-only view of the manager's state handed to policies.
pub struct SchedView<'a> {
    /// All registered jobs.
    pub jobs: &'a FastMap<JobId, JobState>,
    /// Job groups and their queues.
    pub groups: &'a Groups,
    /// Check-in history per device class.
    pub supply: &'a SupplyEstimator,
    /// The current time.
    pub now: Time,
}

/// The device being placed.
pub struct DeviceCtx<'a> {
    /// Its id.
    pub device: DeviceId,
    /// Its profile.
    pub profile: &'a DeviceProfile,
    /// Its class in the supply estimator.
    pub class: ClassIdx,
    /// Groups that admit it and have open demand (never empty when a policy is asked).
    pub eligible: GroupSet,
}

impl SchedView<'_> {
    /// The filter step: may `job` take this device? (Open demand and tier band.)
    pub fn accepts(&self, job: JobId, dev: &DeviceCtx<'_>) -> bool {
        let Some(j) = self.jobs.get(&job) else {
            return false;
        };
        let Some(r) = &j.current else { return false };
        if r.open_demand() == 0
            || r.tasks.contains_key(&dev.device)
            || self.now < r.not_before
            || self.now < j.hold_until
        {
            return false;
        }
        match &r.tier {
            None => true,
            Some(band) => band.contains(dev.profile.task_seconds(j.spec.task_cost)),
        }
    }

    /// The first job in group `g`'s queue that accepts the device.
    pub fn first_fit(&self, g: GroupIdx, dev: &DeviceCtx<'_>) -> Option<JobId> {
        let group = self.groups.get(g)?;
        group.queue.iter().copied().find(|&j| self.accepts(j, dev))
    }

    /// Queue key of a queued job (its open round's key).
    pub fn key(&self, job: JobId) -> f64 {
        self.jobs
            .get(&job)
            .and_then(|j| j.current.as_ref())
            .map_or(f64::INFINITY, |r| r.key)
    }

    /// Across all eligible groups, the accepting job with the smallest queue key
    /// (ties: earliest request, then smallest id).
    pub fn best_head(&self, dev: &DeviceCtx<'_>) -> Option<JobId> {
        let mut best: Option<(f64, f64, JobId)> = None;
        for g in dev.eligible.iter() {
            if let Some(j) = self.first_fit(g, dev) {
                let k = (self.key(j), self.submitted(j), j);
                if best.is_none_or(|b| (k.0, k.1, k.2) < (b.0, b.1, b.2)) {
                    best = Some(k);
                }
            }
        }
        best.map(|b| b.2)
    }

    fn submitted(&self, job: JobId) -> f64 {
        self.jobs
            .get(&job)
            .and_then(|j| j.current.as_ref())
            .map_or(f64::INFINITY, |r| r.submitted_at.secs())
    }

    /// A uniformly random accepting job among all eligible groups' queues.
    pub fn random_job(&self, dev: &DeviceCtx<'_>, rng: &mut SeededRng) -> Option<JobId> {
        let total: usize = dev
            .eligible
            .iter()
            .filter_map(|g| self.groups.get(g))
            .map(|g| g.queue.len())
            .sum();
        if total == 0 {
            return None;
        }
        let mut pick = rng.below(total as u64) as usize;
        for g in dev.eligible.iter() {
            let q = &self.groups.get(g)?.queue;
            if pick < q.len() {
                let j = q[pick];
                if self.accepts(j, dev) {
                    return Some(j);
                }
                break;
            }
            pick -= q.len();
        }
        // The drawn job refused the device (tier band): fall back to any accepting job.
        dev.eligible.iter().find_map(|g| self.first_fit(g, dev))
    }

    /// Number of registered jobs (M in the fair-share JCT).
    pub fn active_jobs(&self) -> usize {
        self.jobs.len()
    }
}

/// What a policy decides for a new round request before it is queued.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RequestPlan {
    /// Restrict the request to this capacity tier.
    pub tier: Option<TierBand>,
    /// Assign no device to the request before this time (a start delay).
    pub not_before: Option<Time>,
}

/// A scheduling policy. See the module docs for the steps.
pub trait Policy: Send + std::fmt::Debug {
    /// The name it is selected by.
    fn name(&self) -> &'static str;

    /// Queue-sort key of a job with an open round; smaller is served first.
    fn queue_key(&self, job: &JobState, view: &SchedView<'_>) -> f64;

    /// Called once per submitted round request, before it is queued and keyed: may
    /// restrict the request to a capacity tier or delay its start.
    fn on_request(
        &mut self,
        _job: &JobState,
        _view: &SchedView<'_>,
        _rng: &mut SeededRng,
    ) -> RequestPlan {
        RequestPlan::default()
    }

    /// Re-plan after queues changed.
    fn plan(&mut self, _view: &SchedView<'_>) {}

    /// The job the device goes to; `None` leaves it idle. Must return a job for which
    /// [`SchedView::accepts`] holds (the framework checks).
    fn select(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        rng: &mut SeededRng,
    ) -> Option<JobId>;
}

/// Tunables of the policies that have any.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PolicyParams {
    /// Tier matching (Algorithm 2) settings for `venn`.
    pub tiers: TierParams,
    /// Fairness knob ε for `venn` (0 = plain IRS).
    pub epsilon: f64,
    /// `random-delay` and `chunked`: delays are uniform in [0, scale·Δ], Δ the congestion
    /// (open demand over eligible supply rate, in seconds).
    pub delay_scale: f64,
    /// `random-delay`: draw a new delay for every round request (true) or once per job,
    /// shifting its whole schedule as in Leighton–Maggs–Rao (false).
    pub delay_per_round: bool,
    /// `chunked`: let devices the running chunk cannot use go to later chunks.
    pub chunk_backfill: bool,
}

impl Default for PolicyParams {
    fn default() -> Self {
        PolicyParams {
            tiers: TierParams::default(),
            epsilon: 0.0,
            delay_scale: 1.0,
            delay_per_round: false,
            chunk_backfill: false,
        }
    }
}

/// Names accepted by [`by_name`].
pub const POLICY_NAMES: &[&str] = &[
    "random",
    "random-order",
    "fifo",
    "fifo-request",
    "srsf",
    "venn",
    "random-delay",
    "chunked",
];

/// Builds a policy from its name.
pub fn by_name(name: &str, params: PolicyParams) -> Result<Box<dyn Policy>, CoreError> {
    Ok(match name {
        "random" => Box::new(Random),
        "random-order" => Box::new(RandomOrder),
        "fifo" => Box::new(Fifo),
        "fifo-request" => Box::new(FifoRequest),
        "srsf" => Box::new(Srsf),
        "venn" => Box::new(Venn::new(params)),
        "random-delay" => Box::new(RandomDelay::new(params)),
        "chunked" => Box::new(Chunked::new(params)),
        "irs" => Box::new(Venn::new(PolicyParams {
            tiers: TierParams::disabled(),
            ..params
        })),
        other => {
            return Err(CoreError::UnknownPolicy(
                other.to_string(),
                POLICY_NAMES.join(", ") + ", irs",
            ));
        }
    })
}
