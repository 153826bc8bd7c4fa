//! The live run's feasibility check, before the manager starts: per job, the emulated
//! devices its requirement admits against the results a round needs, and its fastest
//! eligible device's task (in wall seconds, after `devices.compress`) against its
//! deadline. The virtual clock's check, which also weighs when devices are online, is
//! `venn_sim::engine::feasibility`.

use datasets::Femnist;
use fl_job::task::Registry;
use venn_core::{DataPartition, DeviceProfile};

use crate::config::LabConfig;
use crate::error::LabError;

/// Every job's line (printed when `show`), and an error naming each job that cannot work
/// unless `force`. Jobs whose task cannot state its work are checked for supply only.
pub fn check_live(
    cfg: &LabConfig,
    profiles: &[DeviceProfile],
    tasks: &Registry,
    data: &Femnist,
    show: bool,
    force: bool,
) -> Result<(), LabError> {
    let partition = DataPartition {
        writer_samples: data.train.iter().map(|w| w.len() as u64).collect(),
        writers_per_device: cfg.devices.writers_per_device,
    };
    let mut refused = Vec::new();
    for (i, lj) in cfg.jobs.iter().enumerate() {
        let j = &lj.job;
        let task = tasks
            .build(&j.task, &j.params)
            .map_err(|e| LabError::Setup(format!("jobs[{i}] ({}): {e}", j.name)))?;
        let work = task.work();
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
        let fastest_text = fastest.map_or("unknown".into(), |t| format!("{t:.2} s"));
        if show {
            eprintln!(
                "job {}: {eligible} of {} devices eligible (requests {}, needs {} results); \
                 fastest task {fastest_text} against its {} s deadline",
                j.name,
                profiles.len(),
                j.demand(),
                j.needed(),
                j.deadline_s
            );
        }
        let why = if eligible == 0 {
            Some("no device meets its requirement".to_string())
        } else if eligible < j.needed() as usize {
            Some(format!(
                "{eligible} eligible devices, fewer than the {} results a round needs",
                j.needed()
            ))
        } else {
            fastest.filter(|t| *t > j.deadline_s).map(|t| {
                format!(
                    "its fastest eligible device needs {t:.2} s for a task, longer than the {} s \
                     deadline",
                    j.deadline_s
                )
            })
        };
        if let Some(why) = why {
            refused.push(format!("job {}: {why}", j.name));
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
