//! Scheduling policies behind one trait, in the named steps of a scheduling framework:
//!
//! - **queue-sort** ([`Policy::queue_key`]): the order of open requests inside a job group;
//! - **filter** (the framework, [`SchedView::accepts`]): a device may only go to a job
//!   whose group admits it, with open demand, inside the job's tier band if it has one,
//!   not before the request's start delay or the job's hold, and never twice to the same
//!   round;
//! - **plan** ([`Policy::plan`]): re-planning when queues change (request arrival,
//!   fulfilment, close), never per check-in;
//! - **score/offer** ([`Policy::offer`], or [`Policy::select`] for a one-job offer): the
//!   ordered list of jobs offered to an arriving device;
//! - **accept** (the framework, [`SchedView::fits`]): the device takes the first offered
//!   job whose task fits before its session ends ([`crate::fit`]), or nothing;
//! - **reserve/bind** (the framework, in [`crate::ResourceManager::check_in`]);
//! - **lifecycle hooks**: [`Policy::on_request`] (a round request arrives),
//!   [`Policy::on_assigned`] (a device was bound to a job),
//!   [`Policy::on_job_removed`] (a job finished or was cancelled) and
//!   [`Policy::on_restore`] (an open round was restored after a manager restart), so a
//!   policy keeps its own per-job state.
//!
//! Policies are named by [`PolicyKind`] (the built-in ones), configured by
//! [`PolicyConfig`] (a name plus that policy's typed parameters, the value drivers embed)
//! and built by a [`PolicyRegistry`], which also holds custom policies.

#[cfg(feature = "clap")]
mod args;
mod baselines;
mod chunked;
mod config;
mod congestion;
pub mod irs;
mod random_delay;
mod registry;
mod tier;
mod venn;

#[cfg(feature = "clap")]
pub use args::PolicyArgs;

pub use baselines::{Fifo, FifoRequest, Random, RandomOrder, Srsf};
pub use chunked::Chunked;
pub use config::{
    ChunkedParams, CustomPolicy, IrsParams, NoParams, PolicyConfig, PolicyKind, RandomDelayParams,
    VennParams,
};
pub use congestion::{congestion_delay_s, overlapping_groups, supply_rate};
pub use random_delay::RandomDelay;
pub use registry::PolicyRegistry;
pub use tier::{TierParams, choose_tier};
pub use venn::Venn;

use crate::fit::FitRule;
use crate::groups::Groups;
use crate::groupset::{GroupIdx, GroupSet};
use crate::hash::FastMap;
use crate::ids::{DeviceId, JobId};
use crate::job::{JobState, TierBand};
use crate::profile::DeviceProfile;
use crate::rng::SeededRng;
use crate::supply::{ClassIdx, SupplyEstimator};
use crate::time::Time;

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
    /// When it expects to go offline, if it said so.
    pub online_until: Option<Time>,
    /// How it judges whether a task fits before then.
    pub fit: FitRule,
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

    /// The accept step: would the device take `job`'s task, i.e. does it fit before the
    /// device's session ends under its [`FitRule`]? A policy may use it to stop building
    /// an offer at the first job that fits (the device never looks further).
    pub fn fits(&self, job: JobId, dev: &DeviceCtx<'_>) -> bool {
        dev.online_until.is_none()
            || self.jobs.get(&job).is_some_and(|j| {
                dev.fit
                    .fits(j.spec.task_cost, dev.profile, self.now, dev.online_until)
            })
    }

    /// Every accepting job in the device's eligible groups, appended to `out` in queue
    /// order within each group.
    pub fn all_accepting(&self, dev: &DeviceCtx<'_>, out: &mut Vec<JobId>) {
        for g in dev.eligible.iter() {
            if let Some(group) = self.groups.get(g) {
                out.extend(
                    group
                        .queue
                        .iter()
                        .copied()
                        .filter(|&j| self.accepts(j, dev)),
                );
            }
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

/// A scheduling policy. See the module docs for the steps; register a custom one with
/// [`PolicyRegistry::register`].
pub trait Policy: Send + std::fmt::Debug {
    /// The name it is selected by.
    fn name(&self) -> &'static str;

    /// Queue-sort key of a job with an open round; smaller is served first.
    fn queue_key(&self, job: &JobState, view: &SchedView<'_>) -> f64;

    /// Called once per submitted round request, before it is queued and keyed: may
    /// restrict the request to a capacity tier or delay its start.
    ///
    /// `ticket` is a uniform draw in [0, 1) the framework makes from `rng` for every
    /// request, just before this call, whatever the policy (a random priority for policies
    /// that order requests at random); further draws come from `rng`.
    fn on_request(
        &mut self,
        _job: &JobState,
        _view: &SchedView<'_>,
        _ticket: f64,
        _rng: &mut SeededRng,
    ) -> RequestPlan {
        RequestPlan::default()
    }

    /// Called when a restarted manager re-opens a persisted round of `job`
    /// ([`crate::ResourceManager::restore_round`]) instead of [`Policy::on_request`]:
    /// the round keeps no tier band or start delay, but the policy may rebuild its own
    /// per-job state. `ticket` is the request's draw, as in `on_request`.
    fn on_restore(&mut self, _job: &JobState, _view: &SchedView<'_>, _ticket: f64) {}

    /// Called when `job` is removed (finished or cancelled), with its final state, so the
    /// policy can forget it.
    fn on_job_removed(&mut self, _job: &JobState) {}

    /// Re-plan after queues changed.
    fn plan(&mut self, _view: &SchedView<'_>) {}

    /// A one-job offer: the job the device is offered; `None` leaves it idle. Must return
    /// a job for which [`SchedView::accepts`] holds (the framework checks). If the job's
    /// task does not fit the device's session ([`SchedView::fits`]), the device takes
    /// nothing. Implement this or [`Policy::offer`]; the default offers nothing.
    fn select(
        &mut self,
        _view: &SchedView<'_>,
        _dev: &DeviceCtx<'_>,
        _rng: &mut SeededRng,
    ) -> Option<JobId> {
        None
    }

    /// The ordered offer: pushes onto `offer` (empty on entry) the jobs offered to the
    /// device, best first. The device takes the first that [`SchedView::accepts`] it and
    /// whose task fits its session ([`SchedView::fits`]), or nothing — and then no job's
    /// demand is consumed. The default offers [`Policy::select`]'s one job.
    fn offer(
        &mut self,
        view: &SchedView<'_>,
        dev: &DeviceCtx<'_>,
        rng: &mut SeededRng,
        offer: &mut Vec<JobId>,
    ) {
        if let Some(j) = self.select(view, dev, rng) {
            offer.push(j);
        }
    }

    /// Called after a device was bound to `job`'s open round (its state already counts
    /// the new task), e.g. to notice that the round's demand is now met.
    fn on_assigned(&mut self, _job: &JobState) {}

    /// The supply regions (Venn cells, by the set of groups their devices are eligible
    /// for) that the last plan gave to a job group, for status displays. Empty for
    /// policies that plan no regions.
    fn region_owners(&self) -> Vec<(GroupSet, GroupIdx)> {
        Vec::new()
    }
}
