//! `venn-lab sim`: an experiment on the simulator's virtual clock with real training.
//!
//! The experiment TOML is the one `venn-lab run` reads. Devices follow an availability
//! trace (the synthetic diurnal generator or a trace file), with capacity and eligibility
//! from the shipped FedScale/AI-Benchmark tables, exactly as `venn-sim` loads them. The
//! simulator's engine ([`venn_sim::engine`]) drives `venn-core` on the virtual clock:
//! check-ins, scheduling, dispatch noise, task durations (from the work done: the device's
//! samples × local epochs × the model's cost per sample + the model's bytes both ways, as
//! FedScale; or `workload_s × ms_per_sample / 78 + comm_s × 13736 / kbps` when a job sets
//! `workload_s`), drop-offs at session end
//! and round close are its, unchanged. Through its hooks ([`venn_sim::engine::SimHooks`])
//! this module learns which devices' results each successful round aggregated, and the
//! [`training`] pool trains exactly those devices, for real, on their FEMNIST writers
//! (device `d` owns train writers `(d × W + k) mod n`, `k < W`, as in `device-agent`;
//! with more devices than writers, writers are reused), aggregates with the task's
//! `aggregate` and evaluates on the job's held-out writers. Rows carry **virtual** seconds
//! since the start (`devices.start_s` on the trace's clock).
//!
//! Differences from a live run, by design: `max_minutes` bounds wall time spent training;
//! a job stops at its `rounds`, at `target_accuracy`, or (unfinished, as live) when a
//! round has aborted `max_attempts` times;
//! `devices.drop_fraction` and `compress` do not apply (drop-offs come from the trace);
//! `[admission]` is refused (the simulator's own admission runs are `venn-sim`'s).

pub mod input;
pub mod training;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use datasets::{Femnist, Located};
use device_agent::agent::AgentStats;
use fl_job::runner::RoundRow;
use fl_task::task::{FlTask, Registry};
use indicatif::{ProgressBar, ProgressStyle};
use venn_core::{PolicyRegistry, RoundOutcome};
use venn_sim::engine::{AfterClose, RoundClose, SimError, SimHooks, TaskResult, feasibility};

use crate::config::{LabConfig, LabJob};
use crate::error::LabError;
use crate::results::job_csv;
use crate::results::{Clock, DataUsed, JobOutcome, LabResult};
use training::{RoundWork, TrainJob, Trainer};

/// Kept with the other results (`results.rs`); re-exported here, where they are filled.
pub use crate::results::{JobTrainStats, VirtualStats};

/// The engine's hooks: collect each attempt's reporting devices, hand successful rounds
/// to the trainer, and stop a job at its target accuracy.
struct LabHooks<'t> {
    /// `None` for a schedule-only run.
    trainer: Option<&'t Trainer>,
    /// Each job's successful rounds as scheduled (accuracy filled in by training).
    rows: Vec<Vec<RoundRow>>,
    start_s: f64,
    pending: Vec<Vec<u64>>,
    attempts: Vec<u32>,
    target: Vec<Option<f64>>,
    /// Aborted attempts after which a round gives up (each job's `max_attempts`).
    max_attempts: Vec<u32>,
    /// Why a job was dropped unfinished, if it was.
    gave_up: Vec<Option<String>>,
}

impl SimHooks for LabHooks<'_> {
    fn on_result(&mut self, r: &TaskResult) {
        self.pending[r.job].push(r.device);
    }

    fn on_round_close(&mut self, c: &RoundClose<'_>) -> Result<AfterClose, SimError> {
        let j = c.job;
        let participants = std::mem::take(&mut self.pending[j]);
        if c.outcome == RoundOutcome::Abort {
            self.attempts[j] += 1;
            let aborted = self.attempts[j] - 1;
            if aborted >= self.max_attempts[j] {
                // As the live runner does: a round that cannot succeed ends the job, instead
                // of retrying to the horizon (which grew memory without bound).
                let r = c.record;
                self.gave_up[j] = Some(format!(
                    "round {} aborted {aborted} times (max_attempts); its last attempt had \
                     {} of {} devices assigned and {} results by its deadline",
                    c.rounds_done, r.assigned, r.demand, r.finished
                ));
                return Ok(AfterClose::GiveUp);
            }
            return Ok(AfterClose::Continue);
        }
        let round = c.rounds_done - 1;
        let row = RoundRow {
            participants: participants.len() as u32,
            stragglers: c.record.assigned.saturating_sub(participants.len() as u32),
            scheduling_delay_s: c.record.scheduling_delay(),
            response_collection_s: c.record.response_collection(),
            ..RoundRow::unevaluated(c.time_s - self.start_s, round, self.attempts[j])
        };
        self.attempts[j] = 1;
        self.rows[j].push(row.clone());
        let Some(trainer) = self.trainer else {
            return Ok(AfterClose::Continue);
        };
        trainer.submit(
            j,
            RoundWork {
                round,
                participants,
                row,
            },
        );
        // Only a job that stops at a target accuracy makes the engine wait for training.
        match self.target[j] {
            Some(t) if !c.last => match trainer.wait_accuracy(j, round) {
                Some(a) if a >= t => Ok(AfterClose::Finish),
                _ => Ok(AfterClose::Continue),
            },
            _ => Ok(AfterClose::Continue),
        }
    }
}

/// What a virtual-clock run needs besides its config.
pub struct VirtualOptions<'a> {
    /// Builds the config's policy (built-ins plus any custom ones).
    pub policies: &'a PolicyRegistry,
    /// Builds the jobs' tasks (built-ins plus any custom ones).
    pub tasks: &'a Registry,
    /// FEMNIST main set: the devices' train writers and the held-out test writers.
    pub data: Arc<Femnist>,
    /// The device tables (capacity, eligibility, specs) and where they were found.
    pub traces: &'a Located,
    /// Set to stop training early (Ctrl-C); partial results are written.
    pub cancel: &'a AtomicBool,
    /// Show a progress bar over virtual time.
    pub progress: bool,
    /// False: simulate the schedule only (JCT, rounds; no training, no accuracy) — to size
    /// an experiment before paying for its training.
    pub train: bool,
    /// Run even jobs the feasibility check finds cannot work (they abort their rounds
    /// until `max_attempts`); false refuses the run naming them.
    pub force: bool,
    /// Print every job's feasibility line (`job X: N of M devices eligible …`) to stderr.
    pub show_feasibility: bool,
}

/// A job as the trainer sees it: its task, its evaluation set and, when it trains and its
/// task wants one, the server's calibration set (refused when the data cannot supply it).
fn train_job(
    lj: &LabJob,
    task: Arc<dyn FlTask>,
    data: &Femnist,
    train: bool,
) -> Result<TrainJob, LabError> {
    let job = &lj.job;
    // A run without training needs no calibration set, nor data to hold one.
    let wanted = if train { task.calibration_samples() } else { 0 };
    let held = data
        .held_out(job.eval_samples, wanted, job.eval_seed)
        .map_err(|e| LabError::Setup(format!("job {}: params.{e}", job.name)))?;
    Ok(TrainJob {
        task,
        seed: job.seed,
        test: held.test,
        calibration: held.calibration,
    })
}

/// Runs `cfg` under its policy on the virtual clock and writes `jobs/*.csv`,
/// `accuracy.png`, `tta.csv` and `summary.json` into `out`. Training stops early when
/// `opts.cancel` is set or after `max_minutes` of wall time.
pub fn run_virtual(
    cfg: &LabConfig,
    out: &Path,
    opts: VirtualOptions<'_>,
) -> Result<LabResult, LabError> {
    let t0 = Instant::now();
    std::fs::create_dir_all(out.join("jobs"))
        .map_err(|e| LabError::Setup(format!("{}: {e}", out.display())))?;
    refuse_unsupported(cfg)?;
    let data = opts.data.clone();
    let (tasks, sim_input, sim_cfg) = input::prepare(cfg, opts.tasks, &data, &opts.traces.path)?;
    check_feasible(cfg, &sim_input, &sim_cfg, opts.show_feasibility, opts.force)?;
    let jobs = cfg
        .jobs
        .iter()
        .zip(tasks)
        .map(|(lj, task)| train_job(lj, task, &data, opts.train))
        .collect::<Result<Vec<_>, _>>()?;
    let data_used = DataUsed::new(&data, Some(opts.traces));
    let trainer = if opts.train {
        Some(Trainer::new(
            jobs,
            data,
            cfg.devices.writers_per_device,
            (cfg.sim.threads, cfg.sim.stack_clients),
        )?)
    } else {
        None
    };
    let schedule = simulate(cfg, &sim_input, &sim_cfg, opts.policies, trainer.as_ref())?;
    let threads = trainer.as_ref().map_or(0, Trainer::threads);
    let (trained, stopped_early) = train(cfg, trainer, &schedule, &opts, t0);
    let wall_s = t0.elapsed().as_secs_f64();
    let (outcomes, devices, mut stats) = collect(cfg, out, &schedule, trained)?;
    stats.threads = threads;
    stats.samples_per_s = stats.samples_trained as f64 / wall_s.max(1e-9);
    stats.peak_rss_mib = peak_rss_mib();
    let mut result = LabResult::new(
        cfg,
        cfg.policy.name(),
        outcomes,
        devices,
        wall_s,
        stopped_early,
    );
    result.clock = Clock::Virtual;
    result.data = data_used;
    result.simulation = Some(stats);
    result
        .write(out)
        .map_err(|e| LabError::Setup(format!("{}: {e}", out.display())))?;
    Ok(result)
}

/// Refuses what the virtual clock cannot run, and warns of what it ignores.
fn refuse_unsupported(cfg: &LabConfig) -> Result<(), LabError> {
    if cfg.admission.is_some() {
        return Err(LabError::Setup(
            "[admission]: venn-lab sim does not run admission control; remove the table, or \
             study admission with venn-sim --config scripts/sim/admission.toml"
                .into(),
        ));
    }
    if cfg.devices.drop_fraction > 0.0 {
        tracing::warn!(
            drop_fraction = cfg.devices.drop_fraction,
            "devices.drop_fraction does not apply on the virtual clock: devices drop off when their traced session ends"
        );
    }
    Ok(())
}

/// What the engine decided: its result, each job's successful rounds as scheduled, why a
/// job gave up, and the engine's wall time.
struct Schedule {
    sim: venn_sim::engine::SimResult,
    rows: Vec<Vec<RoundRow>>,
    gave_up: Vec<Option<String>>,
    engine_wall_s: f64,
    /// Virtual seconds from the start to the end of the simulation.
    virtual_end: f64,
}

/// Runs the engine over the whole horizon, handing each successful round to `trainer`.
fn simulate(
    cfg: &LabConfig,
    input: &venn_sim::engine::SimInput,
    sim_cfg: &venn_sim::engine::SimConfig,
    policies: &PolicyRegistry,
    trainer: Option<&Trainer>,
) -> Result<Schedule, LabError> {
    let n = cfg.jobs.len();
    let mut hooks = LabHooks {
        trainer,
        rows: vec![Vec::new(); n],
        start_s: cfg.devices.start_s,
        pending: vec![Vec::new(); n],
        attempts: vec![1; n],
        target: cfg.jobs.iter().map(|j| j.job.target_accuracy).collect(),
        max_attempts: cfg.jobs.iter().map(|j| j.job.max_attempts).collect(),
        gave_up: vec![None; n],
    };
    let engine_t = Instant::now();
    let sim = venn_sim::engine::run_with_hooks(input, sim_cfg, policies, &mut hooks, |_, _| {})
        .map_err(|e| LabError::Setup(format!("simulation: {e}")))?;
    let engine_wall_s = engine_t.elapsed().as_secs_f64();
    let virtual_end = (sim.summary.end_time_s - cfg.devices.start_s).max(0.0);
    tracing::info!(
        engine_wall_s,
        virtual_h = virtual_end / 3600.0,
        "schedule simulated; training"
    );
    Ok(Schedule {
        sim,
        rows: hooks.rows,
        gave_up: hooks.gave_up,
        engine_wall_s,
        virtual_end,
    })
}

/// Waits for the trainer (with a progress bar over virtual hours when asked), stopping it
/// on `cancel` or after `max_minutes`; each job's training and why it stopped early. A
/// schedule-only run (no trainer) gets its scheduled rows back, unevaluated.
fn train(
    cfg: &LabConfig,
    trainer: Option<Trainer>,
    schedule: &Schedule,
    opts: &VirtualOptions<'_>,
    t0: Instant,
) -> (Vec<training::JobTraining>, Option<String>) {
    let virtual_end = schedule.virtual_end;
    let bar = opts.progress.then(|| {
        let b = ProgressBar::new((virtual_end / 3600.0).ceil().max(1.0) as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} virtual h trained  {msg}",
            )
            .expect("valid template"),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    });
    let limit = Duration::from_secs_f64(cfg.max_minutes * 60.0);
    let mut stopped_early: Option<String> = None;
    let trained = match trainer {
        Some(trainer) => trainer.finish(|t| {
            if stopped_early.is_none() {
                if opts.cancel.load(Ordering::SeqCst) {
                    stopped_early = Some("cancelled".into());
                    t.cancel();
                } else if t0.elapsed() > limit {
                    stopped_early = Some("time limit".into());
                    t.cancel();
                }
            }
            if let Some(b) = &bar {
                let (done, total, front) = t.progress();
                b.set_position((front.unwrap_or(virtual_end) / 3600.0) as u64);
                let secs = t0.elapsed().as_secs_f64().max(1e-9);
                b.set_message(format!(
                    "{done}/{total} rounds, {:.0} samples/s",
                    t.samples() as f64 / secs
                ));
            }
        }),
        None => schedule
            .rows
            .iter()
            .map(|rows| training::JobTraining {
                rows: rows.clone(),
                ..Default::default()
            })
            .collect(),
    };
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    // A schedule-only run has no trainer to notice the flag: a Ctrl-C during it still
    // marks it, so a loop over seeds and policies stops after it.
    if stopped_early.is_none() && opts.cancel.load(Ordering::SeqCst) {
        stopped_early = Some("cancelled".into());
    }
    (trained, stopped_early)
}

/// Writes each job's CSV and gathers the outcomes, the device counters and the run's
/// statistics (threads, speed and memory are the caller's to fill in).
fn collect(
    cfg: &LabConfig,
    out: &Path,
    schedule: &Schedule,
    trained: Vec<training::JobTraining>,
) -> Result<(Vec<JobOutcome>, AgentStats, VirtualStats), LabError> {
    let sim = &schedule.sim;
    let mut outcomes = Vec::with_capacity(cfg.jobs.len());
    let mut stats = VirtualStats {
        virtual_h: schedule.virtual_end / 3600.0,
        engine_wall_s: schedule.engine_wall_s,
        results: sim.summary.results,
        stragglers: sim.summary.stragglers,
        tasks_failed: sim.summary.tasks_failed,
        rounds_succeeded: sim.summary.rounds_succeeded,
        rounds_aborted: sim.summary.rounds_aborted,
        ..VirtualStats::default()
    };
    let mut devices = AgentStats {
        check_ins: sim.summary.check_ins,
        assignments: sim.summary.assignments,
        dropped: sim.summary.tasks_failed,
        dropped_session_end: sim.summary.tasks_failed,
        ..AgentStats::default()
    };
    for (i, (lj, t)) in cfg.jobs.iter().zip(trained).enumerate() {
        let rec = &sim.jobs[i];
        write_rows(&job_csv(out, &lj.job.name), &t.rows)?;
        stats.samples_trained += t.samples;
        stats.train_thread_s += t.train_s;
        stats.eval_thread_s += t.eval_s;
        stats.jobs.push(JobTrainStats {
            name: lj.job.name.clone(),
            task: format!("{} {}", lj.job.task, lj.job.params),
            trainings: t.trainings,
            samples: t.samples,
            train_thread_s: t.train_s,
            samples_per_thread_s: t.samples as f64 / t.train_s.max(1e-9),
        });
        devices.trainings += t.trainings;
        devices.samples_trained += t.samples;
        devices.training_seconds += t.train_s;
        devices.updates_uploaded += t
            .rows
            .iter()
            .map(|r| u64::from(r.participants))
            .sum::<u64>();
        let complete = rec.finish_s.is_some() && t.error.is_none();
        let error = match (&t.error, rec.finish_s) {
            (Some(e), _) => Some(e.clone()),
            (None, None) if schedule.gave_up[i].is_some() => schedule.gave_up[i].clone(),
            (None, None) => Some(format!(
                "unfinished: {} of {} rounds by the {:.0} h horizon",
                rec.rounds, rec.rounds_target, cfg.sim.horizon_h
            )),
            (None, Some(_)) => None,
        };
        outcomes.push(JobOutcome {
            name: lj.job.name.clone(),
            arrival_s: lj.arrival_s,
            finished: complete,
            jct_s: complete.then_some(rec.jct_s),
            rounds: t.rows.len(),
            // A schedule-only run has no accuracy (NaN in its rows).
            final_accuracy: t.rows.last().map(|r| r.accuracy).filter(|a| a.is_finite()),
            history: t.rows,
            error,
        });
    }
    Ok((outcomes, devices, stats))
}

/// Every job's figures on the virtual clock, judged as every run judges them
/// ([`crate::feasible::judge`]).
fn check_feasible(
    cfg: &LabConfig,
    input: &venn_sim::engine::SimInput,
    sim_cfg: &venn_sim::engine::SimConfig,
    show: bool,
    force: bool,
) -> Result<(), LabError> {
    let names = cfg.jobs.iter().map(|lj| lj.job.name.clone());
    crate::feasible::judge(names.zip(feasibility(input, sim_cfg)), show, force)
}

/// Writes a job's rows as CSV (the format `venn-lab run` appends).
fn write_rows(path: &Path, rows: &[RoundRow]) -> Result<(), LabError> {
    let err = |e: &dyn std::fmt::Display| LabError::Setup(format!("{}: {e}", path.display()));
    let mut w = csv::Writer::from_path(path).map_err(|e| err(&e))?;
    for r in rows {
        w.serialize(r).map_err(|e| err(&e))?;
    }
    w.flush().map_err(|e| err(&e))
}

/// Peak resident set size of this process (`VmHWM`), MiB.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024.0)
}
