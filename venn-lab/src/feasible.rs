//! The feasibility check before a run starts, live or on the virtual clock: every job's
//! line, and a refusal naming each job that cannot work. The rule for one job is
//! `venn_sim::engine::JobFeasibility::problem`, the same for both; what differs is what is
//! known. On the virtual clock the trace says when devices are online
//! (`venn_sim::engine::feasibility`); live ([`check_live`]), the emulated population is
//! weighed by eligibility and speed only, each task's time in wall seconds after
//! `devices.compress`.

use datasets::Femnist;
use fl_task::task::Registry;
use venn_core::DeviceProfile;
use venn_sim::engine::JobFeasibility;

use crate::config::LabConfig;
use crate::error::LabError;

/// Prints each job's line when `show`; unless `force`, an error naming every job whose
/// figures say it cannot work.
pub fn judge(
    jobs: impl IntoIterator<Item = (String, JobFeasibility)>,
    show: bool,
    force: bool,
) -> Result<(), LabError> {
    let mut refused = Vec::new();
    for (name, f) in jobs {
        if show {
            // One write per line: pods' logs interleave the pieces of a formatted
            // `eprintln!` with other processes' output.
            let line = format!("job {name}: {}\n", f.line());
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), line.as_bytes());
        }
        if let Some(why) = f.problem() {
            refused.push(format!("job {name}: {why}"));
        }
    }
    if refused.is_empty() || force {
        return Ok(());
    }
    Err(LabError::Setup(format!(
        "{} job(s) cannot work (--force runs them anyway):\n  {}",
        refused.len(),
        refused.join("\n  ")
    )))
}

/// The live check over the emulated population `profiles` (device `d` owning its writers
/// of `data` as the agents assign them). Jobs whose task cannot state its work are checked
/// for supply only.
pub fn check_live(
    cfg: &LabConfig,
    profiles: &[DeviceProfile],
    tasks: &Registry,
    data: &Femnist,
    show: bool,
    force: bool,
) -> Result<(), LabError> {
    let partition = cfg.devices.partition(data);
    let mut jobs = Vec::with_capacity(cfg.jobs.len());
    for (i, lj) in cfg.jobs.iter().enumerate() {
        let j = &lj.job;
        let work = tasks
            .build(&j.task, &j.params)
            .map_err(|e| LabError::Setup(format!("jobs[{i}] ({}): {e}", j.name)))?
            .work();
        let mut eligible = 0usize;
        let mut fastest: Option<f64> = None;
        for (d, p) in profiles.iter().enumerate() {
            if !j.requirement.admits(p) {
                continue;
            }
            eligible += 1;
            if let Some(w) = work {
                let wall =
                    p.task_seconds(w.cost(partition.samples(d as u64))) / cfg.devices.compress;
                fastest = Some(fastest.map_or(wall, |f: f64| f.min(wall)));
            }
        }
        let f = JobFeasibility {
            eligible_devices: eligible,
            devices: profiles.len(),
            eligible_per_hour: None,
            demand: j.demand(),
            needed: j.needed(),
            peak_in_deadline: None,
            fastest_task_s: fastest,
            deadline_s: j.deadline_s,
        };
        jobs.push((j.name.clone(), f));
    }
    judge(jobs, show, force)
}
