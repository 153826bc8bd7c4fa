//! Running one experiment under one policy.

use crate::config::{AvailabilitySource, LabConfig};
use crate::error::LabError;
use crate::manager::LocalManager;
use crate::results::{DataUsed, JobOutcome, LabResult, job_csv};
use datasets::Femnist;
use device_agent::agent::{Agent, AgentConfig, AgentStats, Shard};
use device_agent::availability::{Availability, SessionOptions};
use device_agent::population;
use fl_job::runner::{RunOptions, run_job};
use fl_task::task::Registry;
use indicatif::{ProgressBar, ProgressStyle};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use venn_core::PolicyRegistry;
use venn_manager::Settings;

fn setup(e: impl std::fmt::Display) -> LabError {
    LabError::Setup(e.to_string())
}

/// How a run shows itself to the person who started it.
#[derive(Clone, Copy, Debug, Default)]
pub struct RunUi {
    /// Print the status page's URL at the start and show a progress bar.
    pub progress: bool,
    /// Once the run ends, keep the manager (and its status page) serving until `cancel`.
    pub keep: bool,
    /// Run jobs the feasibility check finds cannot work (`crate::feasible`); false
    /// refuses the run before anything starts, naming them.
    pub force: bool,
}

impl RunUi {
    /// Progress shown, manager stopped at the end: what `venn-lab` does by default.
    pub const ATTENDED: RunUi = RunUi {
        progress: true,
        keep: false,
        force: false,
    };
    /// Nothing shown (tests, scripts).
    pub const QUIET: RunUi = RunUi {
        progress: false,
        keep: false,
        force: false,
    };
}

/// Runs `cfg` under its policy (`cfg.policy`, built by `policies`: the built-in ones plus
/// any custom ones), writing into `out` (created). `data` is the loaded FEMNIST main set;
/// `registry` holds the tasks the jobs name (built-ins plus any custom ones). Stops early
/// on `cancel`.
pub async fn run_experiment(
    cfg: &LabConfig,
    policies: &PolicyRegistry,
    out: &Path,
    data: Arc<Femnist>,
    registry: Registry,
    cancel: impl std::future::Future<Output = ()>,
    ui: RunUi,
) -> Result<LabResult, LabError> {
    let progress = ui.progress;
    std::fs::create_dir_all(out.join("jobs")).map_err(setup)?;
    let d = &cfg.devices;
    let traces = venn_traces::locate_traces(None).map_err(setup)?;
    let profiles = population::from_traces(&traces.path, d.count).map_err(setup)?;
    crate::feasible::check_live(cfg, &profiles, &registry, &data, progress, ui.force)?;
    let settings = Settings {
        policy: cfg.policy.clone(),
        seed: cfg.seed,
        retry_after_s: 1.0,
        admission: cfg.admission,
        ..Settings::default()
    };
    let local = LocalManager::start_with_registry(settings, policies, &out.join("manager.db"))
        .await
        .map_err(setup)?;
    let (base, manager) = (local.url.clone(), local.manager.clone());
    if progress {
        eprintln!("status page: {base}/");
    }

    traces.announce();
    let (stop_agents_tx, agents) = start_agents(cfg, &base, profiles, &data, &registry)?;

    let t0 = Instant::now();
    let mut jobs = spawn_jobs(cfg, &registry, &data, &base, out, t0)?;
    let bar = progress.then(|| {
        let b = ProgressBar::new(cfg.jobs.len() as u64);
        b.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} jobs done  {msg}",
            )
            .expect("valid template"),
        );
        b.enable_steady_tick(Duration::from_millis(200));
        b
    });
    let mut outcomes = Vec::new();
    let limit = tokio::time::sleep(Duration::from_secs_f64(cfg.max_minutes * 60.0));
    tokio::pin!(limit);
    tokio::pin!(cancel);
    let mut stopped_early = None;
    while !jobs.is_empty() {
        tokio::select! {
            Some(done) = jobs.join_next() => {
                if let Ok((name, r)) = done {
                    match r {
                        Ok(rep) => outcomes.push(JobOutcome::from_report(rep)),
                        Err(e) => {
                            tracing::error!(job = %name, error = %e, "job failed");
                            let arrival = cfg.jobs.iter().find(|j| j.job.name == name).map_or(0.0, |j| j.arrival_s);
                            outcomes.push(JobOutcome::failed(&name, arrival, e.to_string()));
                        }
                    }
                }
                if let Some(b) = &bar {
                    b.inc(1);
                    b.set_message(format!("{} check-ins", manager.metrics.checkins.load(std::sync::atomic::Ordering::Relaxed)));
                }
            }
            _ = &mut limit => { stopped_early = Some("time limit"); break; }
            _ = &mut cancel => { stopped_early = Some("cancelled"); break; }
        }
    }
    jobs.abort_all();
    while jobs.join_next().await.is_some() {}
    if let Some(why) = stopped_early {
        // Jobs cut short still report how far they got.
        for lj in &cfg.jobs {
            if !outcomes.iter().any(|o| o.name == lj.job.name) {
                let csv = job_csv(out, &lj.job.name);
                outcomes.push(JobOutcome::unfinished(
                    &lj.job.name,
                    lj.arrival_s,
                    &csv,
                    why,
                ));
            }
        }
    }
    if let Some(b) = &bar {
        b.finish_and_clear();
    }
    let _ = stop_agents_tx.send(());
    let mut agent_stats = AgentStats::default();
    for a in agents {
        agent_stats.add(&a.await.map_err(setup)?);
    }
    let wall_s = t0.elapsed().as_secs_f64();
    let mut result = LabResult::new(
        cfg,
        cfg.policy.name(),
        outcomes,
        agent_stats,
        wall_s,
        stopped_early.map(str::to_string),
    );
    result.data = DataUsed::new(&data, Some(&traces));
    result.write(out).map_err(setup)?;
    if ui.keep && stopped_early != Some("cancelled") {
        // Results are written: the table now, the page until the user is done with it.
        print!("{}", result.table());
        eprintln!(
            "results in {}; the status page stays at {base}/ until Ctrl-C",
            out.display()
        );
        (&mut cancel).await;
    }
    local.stop().await;
    Ok(result)
}

/// The emulated device population, one agent per shard (as on that many hosts), checking
/// in at `base`; the sender that stops them and their tasks, which end with their counters.
fn start_agents(
    cfg: &LabConfig,
    base: &str,
    profiles: Vec<venn_core::DeviceProfile>,
    data: &Arc<Femnist>,
    registry: &Registry,
) -> Result<Agents, LabError> {
    let d = &cfg.devices;
    let availability = match &d.availability {
        AvailabilitySource::Always => Availability::AlwaysOnline,
        AvailabilitySource::Synthetic => Availability::synthetic(
            d.count,
            venn_traces::SyntheticOptions::default(),
            SessionOptions::default(),
        )
        .map_err(setup)?,
        AvailabilitySource::Trace(p) => {
            Availability::from_trace_file(p, d.count, SessionOptions::default()).map_err(setup)?
        }
    };
    let mut acfg = AgentConfig::new(base.to_string(), profiles, data.clone());
    acfg.availability = Arc::new(availability);
    acfg.compress = d.compress;
    acfg.start_s = d.start_s;
    acfg.writers_per_device = d.writers_per_device;
    acfg.drop_fraction = d.drop_fraction;
    acfg.seed = cfg.seed;
    // One agent per shard, as on that many hosts; together they train as many devices
    // at once as one agent with `workers` would.
    let workers = if d.workers == 0 {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    } else {
        d.workers
    };
    acfg.workers = workers.div_ceil(d.shards);
    let (stop_agents_tx, _) = tokio::sync::watch::channel(());
    let mut agents = Vec::new();
    for k in 0..d.shards {
        let mut shard = acfg.clone();
        shard.shard = Shard::new(k, d.shards).map_err(setup)?;
        let agent = Agent::new(shard, registry.clone()).map_err(setup)?;
        let mut stop = stop_agents_tx.subscribe();
        agents.push(tokio::spawn(agent.run(async move {
            let _ = stop.changed().await;
        })));
    }
    Ok((stop_agents_tx, agents))
}

/// Every job's runner, each starting at its arrival (seconds after `t0`) against the
/// manager at `base`, appending its rounds to its CSV in `out`.
fn spawn_jobs(
    cfg: &LabConfig,
    registry: &Registry,
    data: &Femnist,
    base: &str,
    out: &Path,
    t0: Instant,
) -> Result<JobSet, LabError> {
    let mut jobs = tokio::task::JoinSet::new();
    for lj in &cfg.jobs {
        let task = registry
            .build(&lj.job.task, &lj.job.params)
            .map_err(|e| setup(format!("job {}: {e}", lj.job.name)))?;
        let held_out = data
            .held_out(
                lj.job.eval_samples,
                task.calibration_samples(),
                lj.job.eval_seed,
            )
            .map_err(|e| setup(format!("job {}: params.{e}", lj.job.name)))?;
        let held_out = Arc::new(held_out);
        let opts = RunOptions {
            manager: base.to_string(),
            listen: "127.0.0.1:0".parse().expect("literal"),
            csv: Some(fresh_job_csv(out, &lj.job.name)),
            t0,
            operator_token: None,
            advertise: None,
            linger: None,
        };
        let (job, arrival) = (lj.job.clone(), lj.arrival_s);
        jobs.spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(arrival)).await;
            let name = job.name.clone();
            (name, run_job(job, task, held_out, opts).await)
        });
    }
    Ok(jobs)
}

/// The device agents' stop signal and their tasks, which end with their counters.
type Agents = (
    tokio::sync::watch::Sender<()>,
    Vec<tokio::task::JoinHandle<AgentStats>>,
);

/// The running jobs: each ends with its name and its report (or why it failed).
type JobSet = tokio::task::JoinSet<(String, Result<fl_job::runner::JobReport, fl_job::JobError>)>;

/// [`job_csv`], emptied of a previous run's rows.
fn fresh_job_csv(out: &Path, name: &str) -> PathBuf {
    let p = job_csv(out, name);
    let _ = std::fs::remove_file(&p);
    p
}
