//! From an experiment TOML to the simulator's input: the availability trace of
//! `devices.count` devices, the device profiles from the shipped capacity and eligibility
//! tables, and the jobs as the engine runs them — loaded exactly as `venn-sim` loads them.
//! A job's tasks are timed from the work they do (its task's [`TaskWork`] over the devices'
//! FEMNIST writers) unless the job sets `workload_s`.

use std::path::Path;
use std::sync::Arc;

use datasets::Femnist;
use fl_task::task::{FlTask, Registry};
use venn_core::TaskWork;
use venn_sim::engine::{DataPartition, DeviceTable, SimConfig, SimInput, SimJob};
use venn_traces::{AvailabilityTrace, CheckInRow, DeviceCatalog, JobRow, SyntheticOptions};

use crate::config::{AvailabilitySource, LabConfig};
use crate::error::LabError;

/// [`prepare`]'s result: the jobs' tasks (config order), the simulator's input and settings.
pub type Prepared = (Vec<Arc<dyn FlTask>>, SimInput, SimConfig);

/// Each job's task built by `tasks`, and the simulator's input and settings for `cfg`
/// over `data`'s train writers and the device tables in `traces_dir`: what a run and
/// `venn-lab devices` share.
pub fn prepare(
    cfg: &LabConfig,
    tasks: &Registry,
    data: &Femnist,
    traces_dir: &Path,
) -> Result<Prepared, LabError> {
    let built = cfg
        .jobs
        .iter()
        .enumerate()
        .map(|(i, lj)| {
            tasks
                .build(&lj.job.task, &lj.job.params)
                .map_err(|e| LabError::Setup(format!("jobs[{i}] ({}): {e}", lj.job.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let work: Vec<Option<TaskWork>> = built.iter().map(|t| t.work()).collect();
    let input = sim_input(cfg, traces_dir, &work, cfg.devices.partition(data))?;
    Ok((built, input, sim_config(cfg)))
}

/// The simulator's input for `cfg`, with device tables from `traces_dir`. Jobs keep the
/// config's order (their index is the config's); arrivals are shifted by `devices.start_s`
/// onto the trace's clock. `work[i]` is job `i`'s task's work (`FlTask::work`), which times
/// its tasks over `partition` unless the job sets `workload_s`.
pub fn sim_input(
    cfg: &LabConfig,
    traces_dir: &Path,
    work: &[Option<TaskWork>],
    partition: DataPartition,
) -> Result<SimInput, LabError> {
    let setup = |what: &str, e: &dyn std::fmt::Display| LabError::Setup(format!("{what}: {e}"));
    let d = &cfg.devices;
    let trace = match &d.availability {
        AvailabilitySource::Always => {
            return Err(LabError::Setup(
                "devices.availability = \"always\" has no sessions to simulate: venn-lab sim \
                 needs \"synthetic\" or { trace = \"FILE\" }"
                    .into(),
            ));
        }
        AvailabilitySource::Synthetic => {
            let opts = SyntheticOptions {
                devices: u32::try_from(d.count)
                    .map_err(|_| LabError::Setup("devices.count is too large".into()))?,
                seed: cfg.seed,
                ..SyntheticOptions::default()
            };
            let rows = opts
                .rows()
                .map_err(|e| setup("synthetic availability", &e))?;
            AvailabilityTrace::from_rows(rows.collect())
        }
        AvailabilitySource::Trace(p) => {
            let t = AvailabilityTrace::load(p).map_err(|e| setup(&p.display().to_string(), &e))?;
            first_devices(t, d.count)
        }
    };
    if trace.is_empty() {
        return Err(LabError::Setup(
            "the availability trace has no check-ins".into(),
        ));
    }
    let catalog = DeviceCatalog::load(traces_dir)
        .map_err(|e| setup(&traces_dir.display().to_string(), &e))?;
    let devices = DeviceTable::new(&catalog).map_err(|e| setup("device tables", &e))?;
    let jobs = cfg
        .jobs
        .iter()
        .enumerate()
        .map(|(i, lj)| {
            let j = &lj.job;
            let demand = j.demand();
            let work = match lj.workload_s {
                Some(_) => None,
                None => work.get(i).copied().flatten(),
            };
            let nominal = work.map(|w| w.cost(partition.mean_samples()));
            SimJob {
                row: JobRow {
                    idx: i as u32,
                    arrival_s: d.start_s + lj.arrival_s,
                    config_id: 0,
                    demand,
                    rounds: j.rounds,
                    deadline_s: j.deadline_s,
                    // With work, the nominal task's (informational: the engine times
                    // each device's task from `work`).
                    workload_s: nominal
                        .map_or(lj.workload_s.unwrap_or(DEFAULT_WORKLOAD_S), |c| c.compute_s),
                    comm_s: nominal.map_or(lj.comm_s.unwrap_or(DEFAULT_COMM_S), |c| c.comm_s),
                    // The engine's deadline rule reads this fraction of the demand; the
                    // job's own fraction is of its target participants.
                    min_response_fraction: f64::from(j.needed()) / f64::from(demand),
                    spec_id: 0,
                    spec_name: String::new(),
                },
                requirement: j.requirement.clone(),
                close_at: Some(j.needed()),
                work,
            }
        })
        .collect();
    Ok(SimInput {
        trace,
        devices,
        jobs,
        workload_replicas: None,
        partition: Some(partition),
    })
}

/// A fixed task's compute seconds at the reference device when a job sets neither
/// `workload_s` nor a task that states its work (the Venn authors' job catalog).
pub const DEFAULT_WORKLOAD_S: f64 = 30.0;
/// A fixed task's transfer seconds at the reference bandwidth (the authors' job traces).
pub const DEFAULT_COMM_S: f64 = 10.0;

/// The rows of the `n` devices with the smallest ids.
fn first_devices(t: AvailabilityTrace, n: usize) -> AvailabilityTrace {
    let mut ids: Vec<u32> = t.rows().iter().map(|r| r.device).collect();
    ids.sort_unstable();
    ids.dedup();
    let Some(&last) = ids.get(n.saturating_sub(1)) else {
        return t;
    };
    let rows: Vec<CheckInRow> = t
        .into_rows()
        .into_iter()
        .filter(|r| r.device <= last)
        .collect();
    AvailabilityTrace::from_rows(rows)
}

/// The simulator's settings for `cfg` under its policy: the `[sim]` knobs, the seed, a
/// horizon `sim.horizon_h` after `devices.start_s`, and enough replays of the trace's
/// 5-day block to reach it.
pub fn sim_config(cfg: &LabConfig) -> SimConfig {
    let base = SimConfig::default();
    let v = &cfg.sim;
    let horizon = cfg.devices.start_s + v.horizon_h * 3600.0;
    SimConfig {
        policy: cfg.policy.clone(),
        seed: cfg.seed,
        grace_s: v.grace_s,
        dispatch_jitter_s: v.dispatch_jitter_s,
        comm_trips: v.comm_trips,
        one_assignment_per_checkin: v.one_assignment_per_checkin,
        horizon_s: Some(horizon),
        replicas: Some(((horizon / base.window_s).ceil() as u32).max(1)),
        ..base
    }
}
