//! The manager's domain logic, independent of HTTP: one `ResourceManager` from
//! `venn-core` driven on the wall clock, with every accepted input persisted to SQLite in
//! the same critical section, leases, the deadline sweeper, and restart recovery.
//!
//! With admission control on ([`Settings::admission`]) registration goes through the
//! [`AdmissionController`](venn_core::admission::AdmissionController) in the same critical
//! section: an admitted job is registered and held until its plan's launch, a declined
//! one is not registered at all; the ticker closes slots and evicts
//! ([`Manager::tick_admission`]); finishing a job settles it and cancelling withdraws it.

use crate::admission::{AdmissionReport, AdmissionState, check_statement};
use crate::clock::Clock;
use crate::dto::*;
use crate::error::AppError;
use crate::metrics::Metrics;
use crate::settings::Settings;
use crate::store::{Snapshot, Store, StoredJob, StoredTask};
use axum::http::StatusCode;
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;
use venn_core::admission::{Admission, AdmissionParams, Plan};
use venn_core::job::{TaskRecord, TaskSample, TaskState};
use venn_core::restore::{JobProgress, RestoredRound};
use venn_core::*;

/// Per-job data the core does not keep.
#[derive(Clone, Debug)]
struct JobMeta {
    token: String,
    plan_url: String,
    model_size_bytes: u64,
    /// Round number and attempt of the latest submitted round.
    last: Option<(u32, u32)>,
    /// The plan admission control admitted the job with, if it did.
    plan: Option<Plan>,
}

/// An outstanding task (assigned or acknowledged).
#[derive(Clone, Debug)]
struct TaskMeta {
    job: JobId,
    round: RoundId,
    device: DeviceId,
    lease_until: f64,
}

struct Inner {
    core: ResourceManager,
    store: Store,
    jobs: HashMap<u64, JobMeta>,
    tasks: HashMap<String, TaskMeta>,
    next_job_id: u64,
    checkin_buf: HashMap<(i64, String), u32>,
    /// Admission control, when switched on.
    admission: Option<AdmissionState>,
}

/// The live resource manager.
pub struct Manager {
    inner: Mutex<Inner>,
    clock: Clock,
    settings: Settings,
    /// Counters and histograms for `/metrics`.
    pub metrics: Metrics,
}

fn token() -> String {
    format!("{:032x}", rand::random::<u128>())
}

fn finite(field: &str, v: f64) -> Result<(), AppError> {
    if v.is_finite() {
        Ok(())
    } else {
        Err(AppError::field(field, "must be a finite number"))
    }
}

impl Manager {
    /// Opens the manager on the database at `db` (created if missing) and restores every
    /// active job, open round, outstanding task and the recent check-in history. The
    /// policy must be a built-in one.
    pub fn open(settings: Settings, db: &Path, clock: Clock) -> anyhow::Result<Manager> {
        Self::open_with_registry(settings, &PolicyRegistry::builtin(), db, clock)
    }

    /// [`Manager::open`], building the settings' policy with `registry` (which may hold
    /// custom policies).
    pub fn open_with_registry(
        settings: Settings,
        registry: &PolicyRegistry,
        db: &Path,
        clock: Clock,
    ) -> anyhow::Result<Manager> {
        if let Some(p) = &settings.admission {
            p.validate()?;
        }
        let store = Store::open(db)?;
        let policy = settings.policy.name();
        if let Some(p) = store.meta("policy")?
            && p != policy
        {
            tracing::warn!(stored = %p, requested = %policy, "policy changed since the last run");
        }
        store.set_meta("policy", policy)?;
        let cfg = ManagerConfig {
            supply: settings.supply,
            seed: settings.seed,
        };
        let core = ResourceManager::with_registry(cfg, &settings.policy, registry)?;
        let now = clock.now();
        let bucket_len = settings.supply.window_s / settings.supply.buckets as f64;
        let min_bucket = ((now.secs() - settings.supply.window_s) / bucket_len).floor() as i64;
        let snap = store.load(min_bucket)?;
        let mut inner = Inner {
            core,
            store,
            jobs: HashMap::new(),
            tasks: HashMap::new(),
            next_job_id: snap.max_job_id.map_or(0, |m| m + 1),
            checkin_buf: HashMap::new(),
            admission: None,
        };
        let restored = inner.restore(snap, bucket_len, settings.admission, now)?;
        tracing::info!(
            jobs = restored.0,
            open_rounds = restored.1,
            tasks = restored.2,
            admitted = restored.3,
            admission = settings.admission.is_some(),
            "state restored"
        );
        Ok(Manager {
            inner: Mutex::new(inner),
            clock,
            settings,
            metrics: Metrics::default(),
        })
    }

    /// The settings.
    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The clock.
    pub fn clock(&self) -> &Clock {
        &self.clock
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves the state as the last completed input left
        // it (every input validates before mutating), so keep serving.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Registers a job (`POST /v1/jobs`). With admission control off the statement of
    /// work is ignored. With it on the statement is required (422 naming `statement`
    /// otherwise, or the statement's bad field) and the controller decides: an admitted
    /// job is registered, held until its plan's launch, and answered with the plan; a
    /// declined job is not registered and gets a 409 with the reason and the quote.
    pub fn register_job(&self, mut req: RegisterJob) -> Result<Registered, AppError> {
        let statement = req.statement.take();
        if req.name.trim().is_empty() {
            return Err(AppError::field("name", "must not be empty"));
        }
        if req.rounds == 0 {
            return Err(AppError::field("rounds", "must be at least 1"));
        }
        if !(req.plan_url.starts_with("http://") || req.plan_url.starts_with("https://")) {
            return Err(AppError::field(
                "plan_url",
                "must be an http:// or https:// URL",
            ));
        }
        let statement = match (self.settings.admission.as_ref(), statement) {
            (None, s) => {
                if s.is_some() {
                    tracing::debug!(name = %req.name, "statement of work ignored: admission control is off");
                }
                None
            }
            (Some(_), None) => {
                return Err(AppError::field(
                    "statement",
                    "required while admission control is on: {value, rounds, demand, round_s}",
                ));
            }
            (Some(params), Some(s)) => {
                s.validate()?;
                check_statement(&s, params)?;
                Some(s)
            }
        };
        let now = self.clock.now();
        let mut spec = JobSpec::new(req.name, req.requirement).with_rounds(req.rounds);
        if let Some(c) = req.task_cost {
            spec = spec.with_task_cost(c);
        }
        let mut guard = self.lock();
        let g = &mut *guard;
        let id = JobId(g.next_job_id);
        g.core.register_job_with_id(id, spec.clone(), now)?;
        let admitted = match (g.admission.as_mut(), &statement) {
            (Some(adm), Some(sow)) => match adm.controller_mut().submit(id, sow, now) {
                Ok(Admission::Admitted { plan }) => {
                    if let Err(e) = g.core.hold_job(id, plan.launch_at) {
                        adm.controller_mut().withdraw(id, now);
                        let _ = g.core.remove_job(id, now);
                        return Err(e.into());
                    }
                    let a = adm.admitted(id.0).cloned().expect("just admitted");
                    Some(a)
                }
                Ok(Admission::Declined { quote, reason }) => {
                    let _ = g.core.remove_job(id, now);
                    tracing::info!(name = %spec.name, %reason, ?quote, "job declined by admission control");
                    return Err(AppError::declined(&reason, quote));
                }
                Err(e) => {
                    let _ = g.core.remove_job(id, now);
                    return Err(e.into());
                }
            },
            _ => None,
        };
        let stored = StoredJob {
            id: id.0,
            spec,
            token: token(),
            plan_url: req.plan_url,
            model_size_bytes: req.model_size_bytes,
            registered_at: now.secs(),
            state: "active".into(),
            rounds_done: 0,
            next_round: 0,
        };
        let saved = match (&admitted, &statement) {
            (Some(a), Some(sow)) => g.store.insert_admitted_job(&stored, a, sow),
            _ => g.store.insert_job(&stored),
        };
        if let Err(e) = saved {
            if let Some(adm) = g.admission.as_mut().filter(|_| admitted.is_some()) {
                // Counted as withdrawn in the controller's totals; its commitment is undone.
                adm.controller_mut().withdraw(id, now);
            }
            let _ = g.core.remove_job(id, now);
            return Err(e.into());
        }
        g.next_job_id += 1;
        let plan = admitted.map(|a| a.plan);
        let meta = JobMeta {
            token: stored.token.clone(),
            plan_url: stored.plan_url,
            model_size_bytes: stored.model_size_bytes,
            last: None,
            plan,
        };
        g.jobs.insert(id.0, meta);
        match plan {
            Some(p) => tracing::info!(
                job = id.0,
                name = %stored.spec.name,
                launch_at = p.launch_at.secs(),
                expected_value = p.expected_value,
                expected_price = p.expected_price,
                "job admitted and registered"
            ),
            None => tracing::info!(job = id.0, name = %stored.spec.name, "job registered"),
        }
        Ok(Registered {
            job_id: id.0,
            token: stored.token,
            plan,
        })
    }

    fn authorize(g: &Inner, job: u64, token: Option<&str>) -> Result<(), AppError> {
        let meta = g.jobs.get(&job).ok_or_else(|| g.missing(job))?;
        match token {
            Some(t) if t == meta.token => Ok(()),
            _ => Err(AppError::unauthorized("job token")),
        }
    }

    /// Submits the job's next round request.
    pub fn submit_round(
        &self,
        job: u64,
        token: Option<&str>,
        req: SubmitRound,
    ) -> Result<Submitted, AppError> {
        finite("deadline_s", req.deadline_s)?;
        if req.deadline_s <= 0.0 {
            return Err(AppError::field("deadline_s", "must be positive"));
        }
        finite("min_response_fraction", req.min_response_fraction)?;
        let now = self.clock.now();
        let mut g = self.lock();
        Self::authorize(&g, job, token)?;
        let request = RoundRequest {
            demand: req.demand,
            deadline: now + req.deadline_s,
            min_response_fraction: req.min_response_fraction,
        };
        let round = g.core.submit_request(JobId(job), request, now)?;
        let attempt = match g.jobs[&job].last {
            Some((r, a)) if r == round.0 => a + 1,
            _ => 0,
        };
        if let Err(e) = g.store.insert_round(job, round.0, attempt, &request, now) {
            let _ = g
                .core
                .close_round(JobId(job), round, RoundOutcome::Abort, now);
            return Err(e.into());
        }
        g.jobs.get_mut(&job).expect("authorized").last = Some((round.0, attempt));
        tracing::debug!(
            job,
            round = round.0,
            attempt,
            demand = req.demand,
            "round submitted"
        );
        Ok(Submitted {
            round: round.0,
            attempt,
            deadline: request.deadline.secs(),
        })
    }

    /// Status of a round: open or closed (latest attempt).
    pub fn round_status(&self, job: u64, round: u32) -> Result<RoundStatus, AppError> {
        let now = self.clock.now();
        let g = self.lock();
        let state = g.core.job(JobId(job)).ok_or_else(|| g.missing(job))?;
        if let Some(r) = state.round(RoundId(round)) {
            return Ok(RoundStatus {
                round,
                state: if r.fulfilled_at.is_some() {
                    "fulfilled"
                } else {
                    "open"
                }
                .into(),
                demand: r.request.demand,
                assigned: r.assigned,
                finished: r.finished,
                failed: r.failed,
                submitted_at: r.submitted_at.secs(),
                fulfilled_at: r.fulfilled_at.map(Time::secs),
                closed_at: None,
                outcome: None,
                scheduling_delay_s: r.fulfilled_at.unwrap_or(now).since(r.submitted_at),
            });
        }
        let rec = state
            .history
            .rounds
            .iter()
            .rev()
            .find(|r| r.round.0 == round)
            .ok_or_else(|| AppError::not_found(format!("job {job} has no round {round}")))?;
        Ok(RoundStatus {
            round,
            state: "closed".into(),
            demand: rec.demand,
            assigned: rec.assigned,
            finished: rec.finished,
            failed: rec.failed,
            submitted_at: rec.submitted_at.secs(),
            fulfilled_at: rec.fulfilled_at.map(Time::secs),
            closed_at: Some(rec.closed_at.secs()),
            outcome: Some(rec.outcome),
            scheduling_delay_s: rec.scheduling_delay(),
        })
    }

    /// Closes the job's open round.
    pub fn close_round(
        &self,
        job: u64,
        token: Option<&str>,
        round: u32,
        outcome: RoundOutcome,
    ) -> Result<RoundStatus, AppError> {
        let now = self.clock.now();
        {
            let mut g = self.lock();
            Self::authorize(&g, job, token)?;
            g.close(JobId(job), RoundId(round), outcome, now)?;
        }
        match outcome {
            RoundOutcome::Success => self.metrics.rounds_success.fetch_add(1, Relaxed),
            RoundOutcome::Abort => self.metrics.rounds_abort.fetch_add(1, Relaxed),
        };
        self.round_status(job, round)
    }

    /// Ends a job: `finished` after its rounds, or `removed` when cancelled.
    pub fn end_job(&self, job: u64, token: Option<&str>, finished: bool) -> Result<(), AppError> {
        let now = self.clock.now();
        let mut g = self.lock();
        Self::authorize(&g, job, token)?;
        let id = JobId(job);
        // The store first: if it fails, nothing has changed anywhere.
        g.store
            .end_job(job, if finished { "finished" } else { "removed" }, now)?;
        if finished {
            g.core.job_finished(id, now)?;
        } else {
            g.core.remove_job(id, now)?;
        }
        g.jobs.remove(&job);
        g.tasks.retain(|_, t| t.job != id);
        tracing::info!(job, finished, "job ended");
        if let Some(adm) = g.admission.as_mut() {
            let ctl = adm.controller_mut();
            let settled = if finished {
                ctl.finished(id, now)
            } else {
                ctl.withdraw(id, now)
            };
            if let Some(s) = settled {
                tracing::info!(
                    job,
                    value = s.value,
                    payment = s.payment,
                    "admitted job settled"
                );
            }
        }
        Ok(())
    }

    /// A device checks in.
    pub fn check_in(&self, req: CheckIn) -> Result<CheckInReply, AppError> {
        let p = &req.profile;
        for (f, v) in [
            ("profile.cpu_score", p.cpu_score),
            ("profile.mem_score", p.mem_score),
            ("profile.os_version", p.os_version),
            ("profile.ms_per_sample", p.ms_per_sample),
            ("profile.bandwidth_kbps", p.bandwidth_kbps),
        ] {
            finite(f, v)?;
        }
        if p.ms_per_sample <= 0.0 || p.bandwidth_kbps <= 0.0 {
            return Err(AppError::field(
                "profile",
                "ms_per_sample and bandwidth_kbps must be positive",
            ));
        }
        let now = self.clock.now();
        let bucket_len = self.settings.supply.window_s / self.settings.supply.buckets as f64;
        let bucket = (now.secs() / bucket_len).floor() as i64;
        let profile_key = serde_json::to_string(p).map_err(AppError::internal)?;
        self.metrics.checkins.fetch_add(1, Relaxed);
        let mut g = self.lock();
        if let Some(adm) = g.admission.as_mut() {
            adm.count_check_in(now);
        }
        let t0 = Instant::now();
        let decision = g.core.check_in(DeviceId(req.device_id), p, now);
        self.metrics.observe_decision(t0.elapsed().as_secs_f64());
        let Decision::Assigned { job, round } = decision else {
            *g.checkin_buf.entry((bucket, profile_key)).or_default() += 1;
            let busy = g.core.groups().open().is_empty();
            let wait = self.settings.retry_after_s * if busy { 2.0 } else { 1.0 };
            return Ok(CheckInReply::Retry {
                retry_after_s: wait,
            });
        };
        // The assignment must be durable before the device hears of it (below).
        *g.checkin_buf.entry((bucket, profile_key)).or_default() += 1;
        let state = g.core.job(job).expect("assigned to a live job");
        let r = state.current.as_ref().expect("assigned to an open round");
        let fulfilled = r.fulfilled_at.is_some();
        let deadline = r.request.deadline.secs();
        let capacity_s = p.task_seconds(state.spec.task_cost);
        let lease_until = deadline + self.settings.lease_grace_s;
        let meta = g.jobs.get(&job.0).expect("live job has meta").clone();
        let attempt = meta.last.map_or(0, |(_, a)| a);
        let task = StoredTask {
            token: token(),
            job_id: job.0,
            round: round.0,
            attempt,
            device_id: req.device_id,
            assigned_at: now.secs(),
            capacity_s,
            lease_until,
            state: TaskState::Assigned,
            reported_at: None,
        };
        if let Err(e) = g.store.insert_task(&task, fulfilled) {
            let _ = g.core.task_failed(job, round, DeviceId(req.device_id), now);
            return Err(e.into());
        }
        g.tasks.insert(
            task.token.clone(),
            TaskMeta {
                job,
                round,
                device: DeviceId(req.device_id),
                lease_until,
            },
        );
        drop(g);
        self.metrics.assignments.fetch_add(1, Relaxed);
        Ok(CheckInReply::Assigned {
            assignment: Assignment {
                job_id: job.0,
                round: round.0,
                plan_url: meta.plan_url,
                task_token: task.token,
                lease_s: lease_until - now.secs(),
            },
        })
    }

    /// A task's device (or its job) reports: acknowledged, finished or failed.
    pub fn report_task(&self, token: &str, state: TaskState) -> Result<(), AppError> {
        let now = self.clock.now();
        let mut g = self.lock();
        let t = g
            .tasks
            .get(token)
            .cloned()
            .ok_or_else(|| AppError::not_found("unknown or already closed task token"))?;
        match state {
            TaskState::Acknowledged => g.core.task_acknowledged(t.job, t.round, t.device, now)?,
            TaskState::Finished => {
                g.core.task_finished(t.job, t.round, t.device, now)?;
            }
            TaskState::Failed => g.core.task_failed(t.job, t.round, t.device, now)?,
            TaskState::Assigned => {
                return Err(AppError::field("state", "cannot report a task as assigned"));
            }
        }
        g.store.update_task(token, state, now)?;
        if state != TaskState::Acknowledged {
            g.tasks.remove(token);
        }
        drop(g);
        match state {
            TaskState::Finished => self.metrics.tasks_finished.fetch_add(1, Relaxed),
            TaskState::Failed => self.metrics.tasks_failed.fetch_add(1, Relaxed),
            _ => 0,
        };
        Ok(())
    }

    /// Checks a task token belongs to `job` (jobs verify updates with it).
    pub fn verify_task(&self, token: &str) -> Option<(u64, u32, u64)> {
        let g = self.lock();
        g.tasks.get(token).map(|t| (t.job.0, t.round.0, t.device.0))
    }

    /// Releases tasks whose lease ran out and aborts rounds left open well past their
    /// deadline (their job is presumed gone). Returns (tasks expired, rounds aborted).
    pub fn sweep(&self) -> Result<(usize, usize), AppError> {
        let now = self.clock.now();
        let mut g = self.lock();
        let expired: Vec<(String, TaskMeta)> = g
            .tasks
            .iter()
            .filter(|(_, t)| t.lease_until < now.secs())
            .map(|(k, t)| (k.clone(), t.clone()))
            .collect();
        for (token, t) in &expired {
            let _ = g.core.task_failed(t.job, t.round, t.device, now);
            g.store.update_task(token, TaskState::Failed, now)?;
            g.tasks.remove(token);
        }
        let late: Vec<(JobId, RoundId)> = g
            .core
            .jobs()
            .filter_map(|j| {
                j.current
                    .as_ref()
                    .map(|r| (j.id, r.round, r.request.deadline))
            })
            .filter(|(_, _, d)| d.secs() + self.settings.round_grace_s < now.secs())
            .map(|(j, r, _)| (j, r))
            .collect();
        for (job, round) in &late {
            g.close(*job, *round, RoundOutcome::Abort, now)?;
            tracing::warn!(
                job = job.0,
                round = round.0,
                "round left open past its deadline: aborted"
            );
        }
        drop(g);
        self.metrics
            .tasks_expired
            .fetch_add(expired.len() as u64, Relaxed);
        self.metrics
            .rounds_abort
            .fetch_add(late.len() as u64, Relaxed);
        Ok((expired.len(), late.len()))
    }

    /// Admission control's share of the 1 s ticker: refreshes the capacity forecast from
    /// the supply estimate, closes every slot that ended with the check-ins seen in it,
    /// and evicts what the controller evicts (removed from the core, `evicted` in the
    /// store; later calls about the job get 410). Returns the evicted job ids; does
    /// nothing with admission control off.
    pub fn tick_admission(&self) -> Result<Vec<u64>, AppError> {
        let now = self.clock.now();
        let mut guard = self.lock();
        let g = &mut *guard;
        let Some(adm) = g.admission.as_mut() else {
            return Ok(Vec::new());
        };
        adm.refresh_forecast(&g.core, now);
        let evicted = adm.close_slots(now);
        let mut first_err = None;
        for s in &evicted {
            if let Err(e) = g.evict(s.job, now) {
                first_err.get_or_insert(e);
            }
        }
        drop(guard);
        match first_err {
            Some(e) => Err(e),
            None => Ok(evicted.iter().map(|s| s.job.0).collect()),
        }
    }

    /// Admission control's state for `/v1/status` and `/metrics` (`None` when off).
    pub fn admission_report(&self) -> Option<AdmissionReport> {
        let now = self.clock.now();
        let g = self.lock();
        let active = g.jobs.values().filter(|m| m.plan.is_some()).count();
        g.admission.as_ref().map(|a| a.report(now, active))
    }

    /// The plan a live job was admitted with.
    pub fn admission_plan(&self, job: u64) -> Option<Plan> {
        self.lock().jobs.get(&job).and_then(|m| m.plan)
    }

    /// The error for a job that is not live: 410 if admission control evicted it, else 404.
    pub fn missing_job(&self, job: u64) -> AppError {
        self.lock().missing(job)
    }

    /// Writes buffered check-in counts to the store and prunes old buckets.
    pub fn flush_checkins(&self) -> Result<usize, AppError> {
        let now = self.clock.now();
        let mut g = self.lock();
        let rows: Vec<(i64, String, u32)> =
            g.checkin_buf.drain().map(|((b, p), c)| (b, p, c)).collect();
        g.store.add_checkins(&rows)?;
        let bucket_len = self.settings.supply.window_s / self.settings.supply.buckets as f64;
        let min_bucket = ((now.secs() - self.settings.supply.window_s) / bucket_len).floor() as i64;
        g.store.prune_checkins(min_bucket - 1)?;
        Ok(rows.len())
    }

    /// A read-only view for `/v1/status` and `/metrics`.
    pub fn with_core<R>(&self, f: impl FnOnce(&ResourceManager, Time) -> R) -> R {
        let now = self.clock.now();
        let g = self.lock();
        f(&g.core, now)
    }

    /// Model size and plan URL of a job.
    pub fn job_info(&self, job: u64) -> Option<(String, u64)> {
        let g = self.lock();
        g.jobs
            .get(&job)
            .map(|m| (m.plan_url.clone(), m.model_size_bytes))
    }
}

impl Inner {
    /// 410 for an evicted job, 404 for any other job that is not live.
    fn missing(&self, job: u64) -> AppError {
        match self.store.job_state(job) {
            Ok(Some((state, at))) if state == "evicted" => AppError::evicted(job, at),
            Ok(_) => AppError::not_found(format!("unknown job {job}")),
            Err(e) => e.into(),
        }
    }

    /// Removes a job the admission controller evicted (it already forgot the job).
    fn evict(&mut self, job: JobId, now: Time) -> Result<(), AppError> {
        tracing::warn!(
            job = job.0,
            "job evicted by admission control: realised capacity fell short (last admitted, first out)"
        );
        // Gone from the core whatever the store says: the controller already forgot it.
        let stored = self.store.end_job(job.0, "evicted", now);
        let _ = self.core.remove_job(job, now);
        self.jobs.remove(&job.0);
        self.tasks.retain(|_, t| t.job != job);
        stored?;
        Ok(())
    }

    fn close(
        &mut self,
        job: JobId,
        round: RoundId,
        outcome: RoundOutcome,
        now: Time,
    ) -> Result<(), AppError> {
        let rec = self.core.close_round(job, round, outcome, now)?;
        let state = self.core.job(job).expect("closed a live job's round");
        let progress = (state.rounds_done, state.next_round);
        let attempt = self
            .jobs
            .get(&job.0)
            .and_then(|m| m.last)
            .map_or(0, |(_, a)| a);
        self.store
            .close_round(job.0, round.0, attempt, outcome, now, progress)?;
        self.tasks
            .retain(|_, t| !(t.job == job && t.round == round));
        tracing::info!(
            job = job.0,
            round = round.0,
            ?outcome,
            sched_delay_s = rec.scheduling_delay(),
            collect_s = rec.response_collection(),
            "round closed"
        );
        Ok(())
    }

    fn restore(
        &mut self,
        mut snap: Snapshot,
        bucket_len: f64,
        admission: Option<AdmissionParams>,
        now: Time,
    ) -> anyhow::Result<(usize, usize, usize, usize)> {
        for (bucket, profile, count) in &snap.checkins {
            let p: DeviceProfile = serde_json::from_str(profile)?;
            self.core
                .observe_supply(&p, Time((*bucket as f64 + 0.5) * bucket_len), *count);
        }
        if let Some(params) = admission {
            self.admission = Some(AdmissionState::new(params, &self.core, now)?);
        }
        let mut open_rounds = 0;
        let mut outstanding = 0;
        let mut admitted = 0;
        for j in snap.jobs {
            let rounds: Vec<_> = snap.rounds.iter().filter(|r| r.job_id == j.id).collect();
            let tasks: Vec<&StoredTask> = snap.tasks.iter().filter(|t| t.job_id == j.id).collect();
            let closed = rounds
                .iter()
                .filter_map(|r| {
                    Some(RoundRecord {
                        round: RoundId(r.round),
                        demand: r.request.demand,
                        submitted_at: Time(r.submitted_at),
                        fulfilled_at: r.fulfilled_at.map(Time),
                        closed_at: Time(r.closed_at?),
                        assigned: r.counts.0,
                        finished: r.counts.1,
                        failed: r.counts.2,
                        outcome: r.outcome?,
                    })
                })
                .collect();
            let samples = tasks
                .iter()
                .filter(|t| t.state == TaskState::Finished)
                .filter_map(|t| {
                    Some(TaskSample {
                        capacity_s: t.capacity_s,
                        response_s: t.reported_at? - t.assigned_at,
                    })
                })
                .collect();
            let progress = JobProgress {
                rounds_done: j.rounds_done,
                next_round: j.next_round,
                rounds: closed,
                tasks: samples,
            };
            let id = JobId(j.id);
            self.core
                .restore_job(id, j.spec.clone(), Time(j.registered_at), progress)?;
            let last = rounds.last().map(|r| (r.round, r.attempt));
            if let Some(open) = rounds.iter().find(|r| r.closed_at.is_none()) {
                let mine: Vec<&&StoredTask> = tasks
                    .iter()
                    .filter(|t| t.round == open.round && t.attempt == open.attempt)
                    .collect();
                let restored = RestoredRound {
                    round: RoundId(open.round),
                    request: open.request,
                    submitted_at: Time(open.submitted_at),
                    fulfilled_at: open.fulfilled_at.map(Time),
                    tasks: mine
                        .iter()
                        .map(|t| {
                            (
                                DeviceId(t.device_id),
                                TaskRecord {
                                    assigned_at: Time(t.assigned_at),
                                    capacity_s: t.capacity_s,
                                    state: t.state,
                                },
                            )
                        })
                        .collect(),
                };
                self.core.restore_round(id, restored, now)?;
                open_rounds += 1;
                for t in mine
                    .iter()
                    .filter(|t| matches!(t.state, TaskState::Assigned | TaskState::Acknowledged))
                {
                    self.tasks.insert(
                        t.token.clone(),
                        TaskMeta {
                            job: id,
                            round: RoundId(t.round),
                            device: DeviceId(t.device_id),
                            lease_until: t.lease_until,
                        },
                    );
                    outstanding += 1;
                }
            }
            let plan = match (self.admission.as_mut(), snap.admissions.remove(&j.id)) {
                (Some(adm), Some(a)) => {
                    let plan = a.plan;
                    adm.controller_mut().restore(id, a, now)?;
                    self.core.hold_job(id, plan.launch_at)?;
                    admitted += 1;
                    Some(plan)
                }
                (None, Some(_)) => {
                    tracing::warn!(
                        job = j.id,
                        "admitted job restored with admission control off: it is no longer held"
                    );
                    None
                }
                (_, None) => None,
            };
            self.jobs.insert(
                j.id,
                JobMeta {
                    token: j.token,
                    plan_url: j.plan_url,
                    model_size_bytes: j.model_size_bytes,
                    last,
                    plan,
                },
            );
        }
        Ok((self.jobs.len(), open_rounds, outstanding, admitted))
    }
}

/// Maps a bearer header value to the token.
pub fn bearer(header: Option<&str>) -> Option<&str> {
    header
        .and_then(|h| h.strip_prefix("Bearer "))
        .map(str::trim)
}

/// 413 for oversized bodies (used by the API's body limit).
pub fn too_large(limit: usize) -> AppError {
    AppError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        format!("request body exceeds {limit} bytes"),
    )
}
