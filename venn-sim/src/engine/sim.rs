//! The event loop: merges the pre-sorted check-in stream with the event heap
//! and drives one `venn-core` [`ResourceManager`].
//!
//! Per-job state is a fixed array of small structs indexed by job; devices
//! have no state of their own beyond the in-flight task carried in its
//! `TaskEnd` event, so the hot loop never allocates (the core allocates per
//! round, not per check-in).

use std::time::Instant;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use venn_core::{
    Decision, DeviceId, JobId, JobSpec, PolicyRegistry, ResourceManager, RoundId, RoundOutcome,
    RoundRecord, RoundRequest, TaskCost, Time,
};

use super::admission::{
    AdmissionMode, AdmissionSummary, JobStatement, job_statements, prior_per_slot,
};
use super::config::{DEFAULT_REPLICAS, SimConfig};
use super::error::SimError;
use super::events::{EventKind, EventQueue};
use super::hooks::{
    AdmissionEvent, AfterClose, Dispatch, NoHooks, RoundClose, SimHooks, TaskResult,
};
use super::result::{JobRecord, Perf, SimResult, Summary};
use super::setup::SimInput;
use venn_core::admission::{Admission, SlotClock};
use venn_traces::ReplayOptions;

/// How often (in check-ins) the progress callback is called.
pub const PROGRESS_EVERY: u64 = 1 << 16;

/// The engine's view of one job.
#[derive(Clone, Copy, Debug)]
struct JobRun {
    /// Round attempts opened so far; tags events of the current attempt.
    attempt: u32,
    round: u32,
    open: bool,
    rounds_done: u32,
    aborted: u32,
    sched_delay: f64,
    response_collection: f64,
    finish: Option<f64>,
    fair_share: Option<f64>,
    cost: TaskCost,
    /// Successful rounds that complete the job (the trace's, or the real draw from
    /// its statement of work under admission).
    target: u32,
    admission: Admit,
    launch: Option<f64>,
    value: Option<f64>,
    payment: Option<f64>,
}

impl JobRun {
    fn new() -> Self {
        JobRun {
            attempt: 0,
            round: 0,
            open: false,
            rounds_done: 0,
            aborted: 0,
            sched_delay: 0.0,
            response_collection: 0.0,
            finish: None,
            fair_share: None,
            cost: TaskCost::default(),
            target: 0,
            admission: Admit::Off,
            launch: None,
            value: None,
            payment: None,
        }
    }
}

/// Where a job stands with admission control.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Admit {
    /// Admission is off.
    #[default]
    Off,
    Admitted,
    Declined,
    Evicted,
}

struct Engine<'a, H: SimHooks> {
    input: &'a SimInput,
    hooks: &'a mut H,
    cfg: &'a SimConfig,
    rm: ResourceManager,
    queue: EventQueue,
    runs: Vec<JobRun>,
    rng: ChaCha8Rng,
    finished: usize,
    /// Jobs dropped unfinished ([`AfterClose::GiveUp`]).
    given_up: usize,
    s: Summary,
    /// Admission control on venn-core's slot clock (with `[admission]`).
    adm: Option<SlotClock>,
    /// Statements of work by job (admission only; empty without it).
    statements: Vec<JobStatement>,
    /// When the pending [`EventKind::RoundTimer`] fires: the core's
    /// `poll_timeout` when it was armed (`None`: no timer pending).
    armed: Option<f64>,
}

/// Runs one simulation; see the [module docs](super) for the semantics.
pub fn run(input: &SimInput, cfg: &SimConfig) -> Result<SimResult, SimError> {
    run_with_progress(input, cfg, |_, _| {})
}

/// Like [`run`], calling `progress(check_ins_done, check_ins_total)` every
/// [`PROGRESS_EVERY`] check-ins.
pub fn run_with_progress(
    input: &SimInput,
    cfg: &SimConfig,
    progress: impl FnMut(u64, u64),
) -> Result<SimResult, SimError> {
    run_with_registry(input, cfg, &PolicyRegistry::builtin(), progress)
}

/// Like [`run_with_progress`], building the configured policy with `registry`, which may
/// hold custom policies ([`PolicyRegistry::register`]).
pub fn run_with_registry(
    input: &SimInput,
    cfg: &SimConfig,
    registry: &PolicyRegistry,
    progress: impl FnMut(u64, u64),
) -> Result<SimResult, SimError> {
    run_with_hooks(input, cfg, registry, &mut NoHooks, progress)
}

/// Like [`run_with_registry`], calling `hooks` at every dispatch, returned result and
/// round close ([`SimHooks`]).
pub fn run_with_hooks<H: SimHooks>(
    input: &SimInput,
    cfg: &SimConfig,
    registry: &PolicyRegistry,
    hooks: &mut H,
    mut progress: impl FnMut(u64, u64),
) -> Result<SimResult, SimError> {
    cfg.validate()?;
    let replicas = cfg
        .replicas
        .or(input.workload_replicas)
        .unwrap_or(DEFAULT_REPLICAS);
    let horizon = cfg.horizon_s.unwrap_or(f64::from(replicas) * cfg.window_s);
    let rm = super::policies::manager(&cfg.policy, cfg.manager(), registry)?;
    let mut e = Engine {
        input,
        hooks,
        cfg,
        rm,
        queue: EventQueue::with_capacity(1 << 16),
        runs: vec![JobRun::new(); input.jobs.len()],
        rng: ChaCha8Rng::seed_from_u64(cfg.seed ^ 0x5eed_d15b_a7c4),
        finished: 0,
        given_up: 0,
        s: Summary {
            policy: cfg.policy.name().to_string(),
            seed: cfg.seed,
            jobs: input.jobs.len(),
            horizon_s: horizon,
            ..Summary::default()
        },
        adm: None,
        statements: job_statements(input, cfg),
        armed: None,
    };
    for (i, j) in input.jobs.iter().enumerate() {
        e.runs[i].cost = super::work::task_cost(input, cfg, i, None);
        e.runs[i].target = j.row.rounds;
        if let Some(st) = e.statements.get(i) {
            e.runs[i].target = st.real_rounds;
        }
        e.queue
            .push(j.row.arrival_s, EventKind::Arrival { job: i as u32 });
    }
    if let Some(a) = &cfg.admission {
        let mut params = a.controller;
        // The operator's prior before any slot is observed: by default the trace's mean.
        params.prior_per_slot =
            params
                .prior_per_slot
                .or(Some(prior_per_slot(input, cfg.window_s, params.slot_s)));
        let clock =
            SlotClock::new(params, Time(0.0)).map_err(|e| SimError::Config(e.to_string()))?;
        e.queue.push(clock.poll_timeout().secs(), EventKind::Slot);
        e.adm = Some(clock);
    }
    let mut replay = input.trace.replay(ReplayOptions {
        grace_s: cfg.grace_s,
        window_s: cfg.window_s,
        replicas,
    });
    let total = replay.len() as u64;
    let mut next = replay.next();
    let started = Instant::now();
    let mut now = 0.0;
    loop {
        if e.finished + e.given_up == e.runs.len() {
            break;
        }
        let te = e.queue.peek_time();
        let tc = next.as_ref().map(|c| c.start_s);
        // Heap events win ties: a result due at the instant of a check-in is
        // counted before the check-in is offered.
        let from_heap = match (te, tc) {
            (Some(a), Some(b)) => a <= b,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (None, None) => break,
        };
        let t = if from_heap { te } else { tc }.expect("one stream is non-empty");
        if t > horizon {
            break;
        }
        now = t;
        e.s.events += 1;
        if from_heap {
            let ev = e.queue.pop().expect("peeked");
            e.handle(ev.time, ev.kind)?;
        } else {
            let c = next.expect("peeked");
            next = replay.next();
            let slot = input.devices.slot(c.base_index);
            e.check_in(c.client_id, slot, c.start_s, c.online_until_s);
            if e.s.check_ins.is_multiple_of(PROGRESS_EVERY) {
                progress(e.s.check_ins, total);
            }
        }
    }
    progress(e.s.check_ins, total);
    let wall = started.elapsed().as_secs_f64();
    e.s.end_time_s = now;
    e.s.plans = e.rm.counters().plans;
    Ok(e.finish(horizon, wall))
}

impl<H: SimHooks> Engine<'_, H> {
    fn check_in(&mut self, device: u64, slot: u32, now: f64, online_until: f64) {
        self.s.check_ins += 1;
        if let Some(a) = &mut self.adm {
            a.on_check_in(Time(now));
        }
        let profile = self.input.devices.profile(slot);
        // The dispatch noise is drawn first: the device judges whether an offered task
        // fits when the assignment reaches it (the authors' ASSIGN event), so the core
        // sees the session end less the noise.
        let jitter = if self.cfg.dispatch_jitter_s > 0.0 {
            self.rng.random::<f64>() * self.cfg.dispatch_jitter_s
        } else {
            0.0
        };
        let Decision::Assigned { job, round } = self.rm.check_in_until(
            DeviceId(device),
            profile,
            Time(now),
            Some(Time(online_until - jitter)),
        ) else {
            return;
        };
        self.s.assignments += 1;
        let j = job.0 as usize;
        let run = &mut self.runs[j];
        debug_assert!(run.open && run.round == round.0);
        let start = now + jitter;
        let cost = match self.input.jobs[j].work {
            Some(_) => super::work::task_cost(self.input, self.cfg, j, Some(device)),
            None => run.cost,
        };
        let end = start + profile.task_seconds(cost);
        let ok = end <= online_until;
        self.hooks.on_dispatch(&Dispatch {
            job: j,
            round: round.0,
            attempt: run.attempt,
            device,
            check_in_s: now,
            start_s: start,
            end_s: if ok { end } else { online_until },
            returns: ok,
        });
        self.queue.push(
            if ok { end } else { online_until },
            EventKind::TaskEnd {
                job: j as u32,
                attempt: run.attempt,
                ok,
                slot,
                device,
                online_until,
            },
        );
    }

    fn handle(&mut self, now: f64, kind: EventKind) -> Result<(), SimError> {
        match kind {
            EventKind::Arrival { job } => self.arrive(job as usize, now)?,
            EventKind::Launch { job } => {
                if self.runs[job as usize].admission == Admit::Admitted {
                    self.runs[job as usize].launch = Some(now);
                    self.open_round(job as usize, now)?;
                }
            }
            EventKind::Slot => self.close_slot(now)?,
            EventKind::RoundTimer => {
                if self.armed != Some(now) {
                    return Ok(()); // an earlier timer was armed since
                }
                self.armed = None;
                // The core closes what fell due, by its close rule (the authors' rule at
                // the deadline).
                for closed in self.rm.handle_timeout(Time(now)).closed {
                    self.round_closed(closed.job.0 as usize, now, closed.record)?;
                }
                self.arm_timer();
            }
            EventKind::TaskEnd {
                job,
                attempt,
                ok,
                slot,
                device,
                online_until,
            } => {
                let j = job as usize;
                let run = &self.runs[j];
                let current = run.open && run.attempt == attempt;
                let (core, round) = (JobId(j as u64), RoundId(run.round));
                if ok {
                    if current {
                        let done =
                            self.rm
                                .task_finished(core, round, DeviceId(device), Time(now))?;
                        self.s.results += 1;
                        self.hooks.on_result(&TaskResult {
                            job: j,
                            round: round.0,
                            attempt,
                            device,
                            time_s: now,
                        });
                        // Enough results: the core closed the round as a success.
                        if let Some(rec) = done.closed {
                            self.round_closed(j, now, rec)?;
                        }
                    } else {
                        self.s.stragglers += 1;
                    }
                    if !self.cfg.one_assignment_per_checkin && now < online_until {
                        self.check_in(device, slot, now, online_until);
                    }
                } else {
                    self.s.tasks_failed += 1;
                    if current {
                        self.rm
                            .task_failed(core, round, DeviceId(device), Time(now))?;
                    }
                }
            }
        }
        Ok(())
    }

    /// A job arrives: with admission it states its work first. An admitted job registers
    /// at once, held until its plan's launch, and opens its first round then — as a live
    /// job does with the manager.
    fn arrive(&mut self, j: usize, now: f64) -> Result<(), SimError> {
        let (Some(a), Some(cfg)) = (&mut self.adm, &self.cfg.admission) else {
            return self.launch(j, now);
        };
        self.runs[j].admission = Admit::Admitted;
        if cfg.mode == AdmissionMode::AdmitAll {
            return self.launch(j, now);
        }
        let sow = &self
            .statements
            .get(j)
            .expect("built with admission")
            .reported;
        let decision = a
            .submit(JobId(j as u64), sow, Time(now))
            .map_err(|e| SimError::Config(format!("job {}: {e}", self.input.jobs[j].row.idx)))?;
        match decision {
            Admission::Admitted { plan } => {
                let launch_s = plan.launch_at.secs();
                self.hooks.on_admission(&AdmissionEvent::Admitted {
                    job: j,
                    time_s: now,
                    launch_s,
                });
                if launch_s > now {
                    self.register(j, now)?;
                    self.rm.hold_job(JobId(j as u64), plan.launch_at)?;
                    self.queue
                        .push(launch_s, EventKind::Launch { job: j as u32 });
                    Ok(())
                } else {
                    self.launch(j, now)
                }
            }
            Admission::Declined { .. } => {
                self.hooks.on_admission(&AdmissionEvent::Declined {
                    job: j,
                    time_s: now,
                });
                self.runs[j].admission = Admit::Declined;
                self.finished += 1;
                Ok(())
            }
        }
    }

    /// The job registers with the core.
    fn register(&mut self, j: usize, now: f64) -> Result<(), SimError> {
        let row = &self.input.jobs[j].row;
        let spec = JobSpec::new(
            format!("job{}", row.idx),
            self.input.jobs[j].requirement.clone(),
        )
        .with_rounds(self.runs[j].target)
        .with_task_cost(self.runs[j].cost);
        self.rm
            .register_job_with_id(JobId(j as u64), spec, Time(now))?;
        Ok(())
    }

    /// The job registers with the core and opens its first round.
    fn launch(&mut self, j: usize, now: f64) -> Result<(), SimError> {
        self.register(j, now)?;
        self.runs[j].launch = Some(now);
        self.open_round(j, now)
    }

    /// An admission slot ends: evict what the controller evicts, schedule the next slot.
    fn close_slot(&mut self, now: f64) -> Result<(), SimError> {
        let Some(a) = &mut self.adm else {
            return Ok(());
        };
        let closed = a.handle_timeout(Time(now));
        let next = a.poll_timeout().secs();
        for st in closed.evicted {
            let j = st.job.0 as usize;
            self.hooks.on_admission(&AdmissionEvent::Evicted {
                job: j,
                time_s: now,
            });
            let run = &mut self.runs[j];
            run.admission = Admit::Evicted;
            run.open = false;
            // Stale deadlines and results of the evicted job are ignored from now on.
            run.attempt += 1;
            run.value = Some(0.0);
            run.payment = Some(st.payment);
            self.finished += 1;
            if self.rm.job(st.job).is_some() {
                self.rm.remove_job(st.job, Time(now))?;
            }
        }
        if self.finished < self.runs.len() {
            self.queue.push(next, EventKind::Slot);
        }
        Ok(())
    }

    /// Value and payment of a job that completed at `now`.
    fn settle(&mut self, j: usize, now: f64) {
        let Some(value_fn) = self.statements.get(j).map(|st| &st.truth.value) else {
            return;
        };
        let arrival = self.input.jobs[j].row.arrival_s;
        let settled = self
            .adm
            .as_mut()
            .and_then(|a| a.controller_mut().finished(JobId(j as u64), Time(now)));
        let run = &mut self.runs[j];
        match settled {
            Some(st) => {
                run.value = Some(st.value);
                run.payment = Some(st.payment);
            }
            None => {
                run.value = Some(value_fn.at(now - arrival));
                run.payment = Some(0.0);
            }
        }
    }

    fn open_round(&mut self, j: usize, now: f64) -> Result<(), SimError> {
        let row = &self.input.jobs[j].row;
        let deadline = now + row.deadline_s;
        let request = RoundRequest::new(row.demand, Time(deadline), row.min_response_fraction)
            .closing_at(self.input.jobs[j].close_at);
        let round = self
            .rm
            .submit_request(JobId(j as u64), request, Time(now))?;
        let run = &mut self.runs[j];
        run.attempt += 1;
        run.round = round.0;
        run.open = true;
        self.arm_timer();
        Ok(())
    }

    /// Pushes a [`EventKind::RoundTimer`] at the core's `poll_timeout` unless one at or
    /// before it is pending.
    fn arm_timer(&mut self) {
        let Some(due) = self.rm.poll_timeout() else {
            return;
        };
        if self.armed.is_none_or(|t| due.secs() < t) {
            self.queue.push(due.secs(), EventKind::RoundTimer);
            self.armed = Some(due.secs());
        }
    }

    /// The core closed job `j`'s round at `now` (`rec`): the engine's bookkeeping, the
    /// hooks, and the next round or the job's end.
    fn round_closed(&mut self, j: usize, now: f64, rec: RoundRecord) -> Result<(), SimError> {
        let core = JobId(j as u64);
        let outcome = rec.outcome;
        let run = &mut self.runs[j];
        run.open = false;
        run.sched_delay += rec.scheduling_delay();
        run.response_collection += rec.response_collection();
        let rounds_done = run.rounds_done + u32::from(outcome == RoundOutcome::Success);
        let last = outcome == RoundOutcome::Success && rounds_done >= run.target;
        let after = self.hooks.on_round_close(&RoundClose {
            job: j,
            round: run.round,
            attempt: run.attempt,
            outcome,
            time_s: now,
            record: &rec,
            rounds_done,
            last,
        })?;
        let run = &mut self.runs[j];
        match outcome {
            RoundOutcome::Success => {
                self.s.rounds_succeeded += 1;
                run.rounds_done += 1;
                if run.rounds_done >= run.target || after == AfterClose::Finish {
                    run.finish = Some(now);
                    let state = self.rm.job_finished(core, Time(now))?;
                    self.runs[j].fair_share = state.fair_share_jct;
                    self.finished += 1;
                    self.settle(j, now);
                    return Ok(());
                }
            }
            RoundOutcome::Abort => {
                self.s.rounds_aborted += 1;
                run.aborted += 1;
                if after == AfterClose::GiveUp {
                    self.rm.remove_job(core, Time(now))?;
                    self.given_up += 1;
                    return Ok(());
                }
            }
        }
        self.open_round(j, now)
    }

    fn finish(mut self, horizon: f64, wall: f64) -> SimResult {
        // Admitted jobs still running at the end pay for the slots they used, for no value.
        if let Some(a) = &mut self.adm {
            let end = Time(self.s.end_time_s);
            for (j, run) in self.runs.iter_mut().enumerate() {
                if run.admission == Admit::Admitted && run.finish.is_none() {
                    run.value = Some(0.0);
                    run.payment = a
                        .controller_mut()
                        .withdraw(JobId(j as u64), end)
                        .map(|st| st.payment);
                }
            }
        }
        let mut jobs = Vec::with_capacity(self.runs.len());
        let (mut n, mut sum_all, mut sum_fin, mut sum_sd, mut sum_rc) =
            (0usize, 0.0, 0.0, 0.0, 0.0);
        for (j, run) in self.runs.iter().enumerate() {
            let row = &self.input.jobs[j].row;
            let fair = run
                .fair_share
                .or_else(|| self.rm.job(JobId(j as u64)).and_then(|s| s.fair_share_jct));
            let jct = match run.finish {
                Some(f) => f - row.arrival_s,
                None => (horizon - row.arrival_s).max(0.0),
            };
            let ran = !matches!(run.admission, Admit::Declined | Admit::Evicted);
            if row.arrival_s <= horizon && ran {
                n += 1;
                sum_all += jct;
                sum_sd += run.sched_delay;
                sum_rc += run.response_collection;
            }
            if run.finish.is_some() {
                sum_fin += jct;
                self.s.finished += 1;
            } else if ran {
                self.s.unfinished += 1;
            }
            jobs.push(JobRecord {
                idx: row.idx,
                config_id: row.config_id,
                arrival_s: row.arrival_s,
                finish_s: run.finish,
                jct_s: jct,
                sched_delay_s: run.sched_delay,
                response_collection_s: run.response_collection,
                rounds: run.rounds_done,
                rounds_target: run.target,
                aborted_rounds: run.aborted,
                spec_id: row.spec_id,
                spec_name: row.spec_name.clone(),
                demand: row.demand,
                total_demand: u64::from(row.demand) * u64::from(run.target),
                fair_share_jct_s: fair,
                admission: match run.admission {
                    Admit::Off => None,
                    Admit::Admitted => Some("admitted".into()),
                    Admit::Declined => Some("declined".into()),
                    Admit::Evicted => Some("evicted".into()),
                },
                launch_s: run.launch,
                value: self.statements.get(j).map(|_| run.value.unwrap_or(0.0)),
                payment: self.statements.get(j).map(|_| run.payment.unwrap_or(0.0)),
            });
        }
        if let Some(cfg) = &self.cfg.admission {
            let count = |a: Admit| self.runs.iter().filter(|r| r.admission == a).count() as u64;
            let (admitted, declined, evicted) = (
                count(Admit::Admitted) + count(Admit::Evicted),
                count(Admit::Declined),
                count(Admit::Evicted),
            );
            let stats = self
                .adm
                .as_ref()
                .map(|a| a.controller().stats())
                .unwrap_or_default();
            self.s.admission = Some(AdmissionSummary {
                mode: cfg.mode,
                submitted: self.runs.len() as u64,
                admitted,
                declined,
                evicted,
                completed: self.runs.iter().filter(|r| r.finish.is_some()).count() as u64,
                welfare: self.runs.iter().filter_map(|r| r.value).sum(),
                revenue: self.runs.iter().filter_map(|r| r.payment).sum(),
                eviction_rate: if admitted > 0 {
                    evicted as f64 / admitted as f64
                } else {
                    0.0
                },
                planned_utilisation: stats.utilisation(),
                device_utilisation: if self.s.check_ins > 0 {
                    self.s.assignments as f64 / self.s.check_ins as f64
                } else {
                    0.0
                },
            });
        }
        let mean = |s: f64, k: usize| if k == 0 { 0.0 } else { s / k as f64 };
        self.s.avg_jct_s = mean(sum_all, n);
        self.s.avg_jct_finished_s = mean(sum_fin, self.s.finished);
        self.s.avg_sched_delay_s = mean(sum_sd, n);
        self.s.avg_response_collection_s = mean(sum_rc, n);
        let per_s = |x: u64| if wall > 0.0 { x as f64 / wall } else { 0.0 };
        SimResult {
            jobs,
            perf: Perf {
                wall_s: wall,
                events_per_s: per_s(self.s.events),
                check_ins_per_s: per_s(self.s.check_ins),
            },
            summary: self.s,
        }
    }
}
