//! The resource-manager state machine: explicit inputs in, decisions out.
//!
//! Inputs are method calls carrying the current time: job registered / removed / finished,
//! round request submitted, device check-in, task acknowledged / finished / failed, round
//! closed. The manager owns the groups, queues, supply estimate and per-job history; the
//! policy decides. Nothing here blocks, sleeps, reads a clock or does I/O, so the
//! simulator (virtual clock) and the HTTP manager (wall clock) drive the very same code.
//!
//! Planning is lazy: any input that changes a queue marks the plan dirty, and the next
//! check-in re-plans once before deciding. A check-in on a clean plan is a lookup.

use crate::error::CoreError;
use crate::fit::FitRule;
use crate::groups::Groups;
use crate::groupset::{GroupIdx, GroupSet};
use crate::hash::FastMap;
use crate::ids::{DeviceId, JobId, RoundId};
use crate::job::{
    JobSpec, JobState, OpenRound, RoundOutcome, RoundRecord, RoundRequest, TaskRecord, TaskSample,
    TaskState,
};
use crate::policy::{DeviceCtx, Policy, PolicyConfig, PolicyRegistry, SchedView};
use crate::profile::DeviceProfile;
use crate::rng::SeededRng;
use crate::rules::{RoundClosing, TaskDone};
use crate::supply::{DeviceClass, SupplyConfig, SupplyEstimator};
use crate::time::Time;
use serde::{Deserialize, Serialize};

/// Settings of a resource manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ManagerConfig {
    /// Supply-estimator window.
    pub supply: SupplyConfig,
    /// Seed of the manager's random number generator.
    pub seed: u64,
    /// How a device judges whether an offered job fits before its session ends
    /// ([`crate::fit`]; the authors' nominal-time rule by default).
    #[serde(default)]
    pub fit: FitRule,
    /// Who closes rounds: the core, on enough results and at the deadline (the
    /// simulator), or the job, with the core aborting rounds left open past a grace (the
    /// live manager). See [`crate::closing`].
    #[serde(default)]
    pub closing: RoundClosing,
}

/// What a checked-in device should do.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum Decision {
    /// Work on this job's round.
    Assigned {
        /// The job.
        job: JobId,
        /// Its round.
        round: RoundId,
    },
    /// Nothing to do now.
    NoTask,
}

/// Running totals, for metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counters {
    /// Check-ins seen.
    pub check_ins: u64,
    /// Devices assigned.
    pub assignments: u64,
    /// Planning passes run.
    pub plans: u64,
    /// Rounds closed as a success.
    pub rounds_succeeded: u64,
    /// Rounds closed as an abort.
    pub rounds_aborted: u64,
    /// Check-ins offered jobs of which none fitted the device's session.
    #[serde(default)]
    pub offers_declined: u64,
}

/// The scheduling state machine.
#[derive(Debug)]
pub struct ResourceManager {
    jobs: FastMap<JobId, JobState>,
    groups: Groups,
    supply: SupplyEstimator,
    policy: Box<dyn Policy>,
    rng: SeededRng,
    next_job: u64,
    dirty: bool,
    counters: Counters,
    fit: FitRule,
    closing: RoundClosing,
    /// The offer buffer, reused across check-ins.
    offer: Vec<JobId>,
    /// The class the last check-in was counted in.
    last_class: Option<crate::supply::ClassIdx>,
}

impl ResourceManager {
    /// A manager running `policy`.
    pub fn new(cfg: ManagerConfig, policy: Box<dyn Policy>) -> Self {
        ResourceManager {
            jobs: FastMap::default(),
            groups: Groups::default(),
            supply: SupplyEstimator::new(cfg.supply),
            policy,
            rng: SeededRng::new(cfg.seed),
            next_job: 0,
            dirty: true,
            counters: Counters::default(),
            fit: cfg.fit,
            closing: cfg.closing,
            offer: Vec::new(),
            last_class: None,
        }
    }

    /// A manager running the configured built-in policy.
    pub fn with_policy(cfg: ManagerConfig, policy: &PolicyConfig) -> Result<Self, CoreError> {
        Self::with_registry(cfg, policy, &PolicyRegistry::builtin())
    }

    /// A manager running the configured policy, built by `registry` (which may hold custom
    /// policies); an unknown name is an error listing the registry's names.
    pub fn with_registry(
        cfg: ManagerConfig,
        policy: &PolicyConfig,
        registry: &PolicyRegistry,
    ) -> Result<Self, CoreError> {
        Ok(Self::new(cfg, registry.build(policy)?))
    }

    // ---- inputs -------------------------------------------------------------------

    /// Registers a job under a fresh id.
    pub fn register_job(&mut self, spec: JobSpec, now: Time) -> Result<JobId, CoreError> {
        let id = JobId(self.next_job);
        self.register_job_with_id(id, spec, now)?;
        Ok(id)
    }

    /// Registers a job under a given id (drivers that persist ids, e.g. after a restart).
    pub fn register_job_with_id(
        &mut self,
        id: JobId,
        mut spec: JobSpec,
        now: Time,
    ) -> Result<(), CoreError> {
        if self.jobs.contains_key(&id) {
            return Err(CoreError::DuplicateJob(id));
        }
        spec.requirement
            .validate()
            .map_err(|(f, why)| CoreError::invalid(f, why))?;
        if spec.rounds == Some(0) {
            return Err(CoreError::invalid("rounds", "must be at least 1"));
        }
        for (name, v) in [
            ("task_cost.compute_s", spec.task_cost.compute_s),
            ("task_cost.comm_s", spec.task_cost.comm_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Err(CoreError::invalid(
                    name,
                    "must be a finite non-negative number",
                ));
            }
        }
        spec.requirement.normalize();
        let (group, new_group) = self.groups.join(&spec.requirement, id)?;
        if new_group {
            self.supply.set_group(group, Some(&spec.requirement));
        }
        self.jobs.insert(
            id,
            JobState {
                id,
                spec,
                group,
                registered_at: now,
                next_round: 0,
                rounds_done: 0,
                current: None,
                history: Default::default(),
                fair_share_jct: None,
                last_demand: 0,
                hold_until: now,
            },
        );
        self.next_job = self.next_job.max(id.0 + 1);
        self.dirty = true;
        Ok(())
    }

    /// Removes a job (cancelled, or its driver gave up); returns its final state.
    pub fn remove_job(&mut self, job: JobId, _now: Time) -> Result<JobState, CoreError> {
        let state = self.jobs.remove(&job).ok_or(CoreError::UnknownJob(job))?;
        if self.groups.leave(state.group, job) {
            self.supply.set_group(state.group, None);
        }
        self.policy.on_job_removed(&state);
        self.dirty = true;
        Ok(state)
    }

    /// Keeps every device away from `job` until `until` (an admitted job's launch time).
    pub fn hold_job(&mut self, job: JobId, until: Time) -> Result<(), CoreError> {
        let j = self.jobs.get_mut(&job).ok_or(CoreError::UnknownJob(job))?;
        if !until.secs().is_finite() {
            return Err(CoreError::invalid("hold_until", "must be a finite time"));
        }
        j.hold_until = until;
        self.dirty = true;
        Ok(())
    }

    /// A job completed all its rounds; same as removal, kept apart for the record.
    pub fn job_finished(&mut self, job: JobId, now: Time) -> Result<JobState, CoreError> {
        self.remove_job(job, now)
    }

    /// Submits the next round's request of `job`.
    pub fn submit_request(
        &mut self,
        job: JobId,
        req: RoundRequest,
        now: Time,
    ) -> Result<RoundId, CoreError> {
        if req.demand == 0 {
            return Err(CoreError::invalid("demand", "must be at least 1"));
        }
        if !(req.min_response_fraction > 0.0 && req.min_response_fraction <= 1.0) {
            return Err(CoreError::invalid(
                "min_response_fraction",
                "must be in (0, 1]",
            ));
        }
        if !req.deadline.secs().is_finite() || req.deadline.secs() <= now.secs() {
            return Err(CoreError::invalid(
                "deadline",
                "must be a finite time after now",
            ));
        }
        let m = self.jobs.len();
        let j = self.jobs.get_mut(&job).ok_or(CoreError::UnknownJob(job))?;
        if let Some(r) = &j.current {
            return Err(CoreError::RoundAlreadyOpen {
                job,
                round: r.round,
            });
        }
        if j.fair_share_jct.is_none() {
            let rate = self.supply.group_rate(j.group, now);
            if rate > 0.0 {
                let rounds = j.spec.rounds.unwrap_or(1) as f64;
                let per_round =
                    req.demand as f64 / rate + j.spec.task_cost.compute_s + j.spec.task_cost.comm_s;
                j.fair_share_jct = Some(m as f64 * rounds * per_round);
            }
        }
        let round = RoundId(j.next_round);
        j.last_demand = req.demand;
        // One draw per request whatever the policy, so the stream stays the same for all.
        let ticket = self.rng.f64();
        j.current = Some(OpenRound {
            round,
            request: req,
            submitted_at: now,
            fulfilled_at: None,
            assigned: 0,
            tasks: FastMap::default(),
            finished: 0,
            failed: 0,
            key: 0.0,
            tier: None,
            not_before: now,
        });
        let group = j.group;
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        let state = &self.jobs[&job];
        let plan = self.policy.on_request(state, &view, ticket, &mut self.rng);
        let open = self
            .jobs
            .get_mut(&job)
            .and_then(|j| j.current.as_mut())
            .expect("just opened");
        open.tier = plan.tier;
        if let Some(t) = plan.not_before {
            open.not_before = t.max(now);
        }
        self.rekey(job, now);
        self.groups.enqueue(group, job);
        self.dirty = true;
        Ok(round)
    }

    /// A device checks in at `now` without saying when it leaves: returns where it should
    /// work, if anywhere (the first job offered, since every job fits).
    pub fn check_in(&mut self, device: DeviceId, profile: &DeviceProfile, now: Time) -> Decision {
        self.check_in_until(device, profile, now, None)
    }

    /// A device checks in at `now` and expects to stay online until `online_until`: the
    /// policy offers it an ordered list of jobs and it takes the first whose task fits
    /// before then under the manager's [`FitRule`], or nothing (no demand is consumed).
    pub fn check_in_until(
        &mut self,
        device: DeviceId,
        profile: &DeviceProfile,
        now: Time,
        online_until: Option<Time>,
    ) -> Decision {
        self.counters.check_ins += 1;
        if self.supply.advance(now) {
            self.dirty = true;
        }
        let groups = &self.groups;
        let class = self.supply.class_of(profile, |p| groups.admitting(p));
        self.supply.record(class, now);
        self.last_class = Some(class);
        let eligible = self.supply.classes()[class as usize]
            .groups
            .and(&self.groups.open());
        if eligible.is_empty() {
            return Decision::NoTask;
        }
        if self.dirty {
            self.replan(now);
        }
        let dev = DeviceCtx {
            device,
            profile,
            class,
            eligible,
            online_until,
            fit: self.fit,
        };
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        self.offer.clear();
        self.policy
            .offer(&view, &dev, &mut self.rng, &mut self.offer);
        let mut taken = None;
        for &job in &self.offer {
            if !view.accepts(job, &dev) {
                debug_assert!(
                    false,
                    "policy {} offered {job}, which the filter rejects",
                    self.policy.name()
                );
                continue;
            }
            if view.fits(job, &dev) {
                taken = Some(job);
                break;
            }
        }
        let Some(job) = taken else {
            if !self.offer.is_empty() {
                self.counters.offers_declined += 1;
            }
            return Decision::NoTask;
        };
        let round = self.bind(job, device, profile, now);
        if let Some(state) = self.jobs.get(&job) {
            self.policy.on_assigned(state);
        }
        Decision::Assigned { job, round }
    }

    /// The device confirmed it started its task.
    pub fn task_acknowledged(
        &mut self,
        job: JobId,
        round: RoundId,
        device: DeviceId,
        _now: Time,
    ) -> Result<(), CoreError> {
        let t = self.task_mut(job, round, device)?;
        t.state = TaskState::Acknowledged;
        Ok(())
    }

    /// The device reported its result: its response time, and the round's record if the
    /// result closed it (under [`RoundClosing::Core`], once the rule's `close_at` results
    /// are in).
    pub fn task_finished(
        &mut self,
        job: JobId,
        round: RoundId,
        device: DeviceId,
        now: Time,
    ) -> Result<TaskDone, CoreError> {
        let t = self.task_mut(job, round, device)?;
        t.state = TaskState::Finished;
        let sample = TaskSample {
            capacity_s: t.capacity_s,
            response_s: now.since(t.assigned_at).max(0.0),
        };
        let j = self.jobs.get_mut(&job).expect("task_mut checked the job");
        j.current
            .as_mut()
            .expect("task_mut checked the round")
            .finished += 1;
        j.history.push_task(sample);
        let r = self.jobs[&job].current.as_ref().expect("still open");
        let closed = if self.closes_early(r) {
            Some(self.close_round(job, round, RoundOutcome::Success, now)?)
        } else {
            None
        };
        Ok(TaskDone {
            response_s: sample.response_s,
            closed,
        })
    }

    /// The device failed or dropped out of its task.
    pub fn task_failed(
        &mut self,
        job: JobId,
        round: RoundId,
        device: DeviceId,
        _now: Time,
    ) -> Result<(), CoreError> {
        let t = self.task_mut(job, round, device)?;
        t.state = TaskState::Failed;
        let j = self.jobs.get_mut(&job).expect("task_mut checked the job");
        j.current
            .as_mut()
            .expect("task_mut checked the round")
            .failed += 1;
        Ok(())
    }

    /// Closes the open round of `job` with the outcome its driver chose (an abort, say, of
    /// a round whose updates could not be aggregated); rounds judged by the close rule
    /// close through [`ResourceManager::handle_timeout`], [`ResourceManager::task_finished`]
    /// or [`ResourceManager::judge_round`]. An abort keeps the round number for the retry.
    pub fn close_round(
        &mut self,
        job: JobId,
        round: RoundId,
        outcome: RoundOutcome,
        now: Time,
    ) -> Result<RoundRecord, CoreError> {
        let j = self.jobs.get_mut(&job).ok_or(CoreError::UnknownJob(job))?;
        if j.round(round).is_none() {
            return Err(CoreError::UnknownRound { job, round });
        }
        let r = j.current.take().expect("checked above");
        let rec = RoundRecord {
            round,
            demand: r.request.demand,
            submitted_at: r.submitted_at,
            fulfilled_at: r.fulfilled_at,
            scheduled_at: RoundRecord::scheduled_at(r.fulfilled_at, r.tasks.values()),
            closed_at: now,
            assigned: r.assigned,
            finished: r.finished,
            failed: r.failed,
            outcome,
        };
        j.history.push_round(rec);
        match outcome {
            RoundOutcome::Success => {
                j.rounds_done += 1;
                j.next_round += 1;
                self.counters.rounds_succeeded += 1;
            }
            RoundOutcome::Abort => self.counters.rounds_aborted += 1,
        }
        let g = j.group;
        self.groups.dequeue(g, job);
        self.dirty = true;
        Ok(rec)
    }

    // ---- queries ------------------------------------------------------------------

    /// Who closes rounds ([`ManagerConfig::closing`]).
    pub fn closing(&self) -> RoundClosing {
        self.closing
    }

    /// A registered job.
    pub fn job(&self, id: JobId) -> Option<&JobState> {
        self.jobs.get(&id)
    }

    /// All registered jobs (in no particular order).
    pub fn jobs(&self) -> impl Iterator<Item = &JobState> {
        self.jobs.values()
    }

    /// Job groups and their queues.
    pub fn groups(&self) -> &Groups {
        &self.groups
    }

    /// The supply estimator (classes, cells, rates).
    pub fn supply(&self) -> &SupplyEstimator {
        &self.supply
    }

    /// Keys the hash of device profiles (see [`SupplyEstimator::set_hash_key`]): a live
    /// driver passes a random key so that clients cannot flood one hash bucket.
    pub fn set_profile_hash_key(&mut self, key: u64) {
        self.supply.set_hash_key(key);
    }

    /// Bounds the device classes distinct profiles make (see
    /// [`SupplyEstimator::set_class_cap`]): a live driver's profiles come from anonymous
    /// clients.
    pub fn set_class_cap(&mut self, cap: Option<usize>) {
        self.supply.set_class_cap(cap);
    }

    /// The class the last check-in was counted in: its own profile's, or the one it was
    /// folded into past the class cap (valid until the next input).
    pub fn last_check_in_class(&self) -> Option<&DeviceClass> {
        self.supply.classes().get(self.last_class? as usize)
    }

    /// The supply regions the policy's last plan gave to a job group (Venn's cell
    /// owners); empty for policies that plan no regions.
    pub fn region_owners(&self) -> Vec<(GroupSet, GroupIdx)> {
        self.policy.region_owners()
    }

    /// The policy's name.
    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    /// Running totals.
    pub fn counters(&self) -> Counters {
        self.counters
    }

    /// Forces a planning pass now (benchmarks and status pages; check-ins plan lazily).
    pub fn replan(&mut self, now: Time) {
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        let mut keys: Vec<(JobId, f64)> = Vec::new();
        for (_, g) in self.groups.iter() {
            for j in &g.queue {
                keys.push((*j, self.policy.queue_key(&self.jobs[j], &view)));
            }
        }
        for (j, k) in keys {
            if let Some(r) = self.jobs.get_mut(&j).and_then(|s| s.current.as_mut()) {
                r.key = k;
            }
        }
        let jobs = &self.jobs;
        for q in self.groups.queues_mut() {
            q.sort_by(|a, b| queue_order(jobs, *a, *b));
        }
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        self.policy.plan(&view);
        self.counters.plans += 1;
        self.dirty = false;
    }

    // ---- internals ----------------------------------------------------------------

    pub(crate) fn job_mut(&mut self, id: JobId) -> Option<&mut JobState> {
        self.jobs.get_mut(&id)
    }

    pub(crate) fn rng_f64(&mut self) -> f64 {
        self.rng.f64()
    }

    /// Tells the policy that `job`'s open round was restored (see [`Policy::on_restore`]).
    pub(crate) fn notify_restored(&mut self, job: JobId, ticket: f64, now: Time) {
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        if let Some(state) = self.jobs.get(&job) {
            self.policy.on_restore(state, &view, ticket);
        }
    }

    pub(crate) fn mark_dirty(&mut self) {
        self.dirty = true;
    }

    pub(crate) fn enqueue_restored(&mut self, group: crate::groupset::GroupIdx, job: JobId) {
        self.groups.enqueue(group, job);
    }

    pub(crate) fn observe(&mut self, profile: &DeviceProfile, at: Time, count: u32) {
        if self.supply.advance(at) {
            self.dirty = true;
        }
        let groups = &self.groups;
        let class = self.supply.class_of(profile, |p| groups.admitting(p));
        self.supply.record_n(class, at, count);
    }

    /// Recomputes the queue key of `job`'s open round.
    fn rekey(&mut self, job: JobId, now: Time) {
        let view = SchedView {
            jobs: &self.jobs,
            groups: &self.groups,
            supply: &self.supply,
            now,
        };
        let key = self.policy.queue_key(&self.jobs[&job], &view);
        if let Some(r) = self.jobs.get_mut(&job).and_then(|j| j.current.as_mut()) {
            r.key = key;
        }
    }

    /// Reserve and bind: record the task, shrink the open demand, keep the queue sorted.
    fn bind(
        &mut self,
        job: JobId,
        device: DeviceId,
        profile: &DeviceProfile,
        now: Time,
    ) -> RoundId {
        self.counters.assignments += 1;
        let j = self.jobs.get_mut(&job).expect("selected job exists");
        let capacity_s = profile.task_seconds(j.spec.task_cost);
        let group = j.group;
        let r = j.current.as_mut().expect("selected job has an open round");
        r.assigned += 1;
        r.tasks.insert(
            device,
            TaskRecord {
                assigned_at: now,
                capacity_s,
                state: TaskState::Assigned,
            },
        );
        let round = r.round;
        if r.open_demand() == 0 {
            r.fulfilled_at = Some(now);
            self.groups.dequeue(group, job);
            self.dirty = true;
            return round;
        }
        // The job's key may have shrunk (remaining demand): move it forward if needed.
        self.rekey(job, now);
        let jobs = &self.jobs;
        let q = &mut self.groups.get_mut(group).queue;
        if let Some(mut i) = q.iter().position(|x| *x == job) {
            while i > 0 && queue_order(jobs, q[i], q[i - 1]).is_lt() {
                q.swap(i, i - 1);
                i -= 1;
            }
        }
        round
    }

    fn task_mut(
        &mut self,
        job: JobId,
        round: RoundId,
        device: DeviceId,
    ) -> Result<&mut TaskRecord, CoreError> {
        let j = self.jobs.get_mut(&job).ok_or(CoreError::UnknownJob(job))?;
        let r = j
            .current
            .as_mut()
            .filter(|r| r.round == round)
            .ok_or(CoreError::UnknownRound { job, round })?;
        let t = r
            .tasks
            .get_mut(&device)
            .ok_or(CoreError::UnknownTask { job, round, device })?;
        match t.state {
            TaskState::Finished => Err(CoreError::TaskClosed {
                job,
                round,
                device,
                state: "finished",
            }),
            TaskState::Failed => Err(CoreError::TaskClosed {
                job,
                round,
                device,
                state: "failed",
            }),
            _ => Ok(t),
        }
    }
}

/// Queue order: key, then request time, then job id (deterministic).
fn queue_order(jobs: &FastMap<JobId, JobState>, a: JobId, b: JobId) -> std::cmp::Ordering {
    let k = |j: JobId| {
        jobs.get(&j)
            .and_then(|s| s.current.as_ref())
            .map_or((f64::INFINITY, f64::INFINITY), |r| {
                (r.key, r.submitted_at.secs())
            })
    };
    let (ka, kb) = (k(a), k(b));
    ka.0.total_cmp(&kb.0)
        .then(ka.1.total_cmp(&kb.1))
        .then(a.cmp(&b))
}
