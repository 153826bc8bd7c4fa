//! How long a task takes on a device: the one place the engine (and a driver that must
//! agree with it, such as the differential test) turns a job and a device into a
//! [`TaskCost`] for [`DeviceProfile::task_seconds`](venn_core::DeviceProfile::task_seconds).
//!
//! Two ways, per job:
//! - **From the work done** ([`SimJob::work`] set and the input has a [`DataPartition`]):
//!   the device's local samples × epochs × the model's cost per sample, plus the model's
//!   bytes both ways — venn-core's [`TaskWork`], FedScale's model. A device holding more
//!   samples, or a job of a larger model, takes longer.
//! - **Fixed** (the authors' traces, or a job that sets `workload_s`): every task costs the
//!   row's `workload_s` of compute and `comm_trips × comm_s` of transfer at the reference
//!   device.

use venn_core::{DataPartition, TaskCost, TaskWork};

use super::config::SimConfig;
use super::setup::{SimInput, SimJob};

/// The job's work when its tasks are timed from it: its [`TaskWork`] and the partition.
fn work_of<'a>(input: &'a SimInput, job: &'a SimJob) -> Option<(&'a TaskWork, &'a DataPartition)> {
    Some((job.work.as_ref()?, input.partition.as_ref()?))
}

/// The reference-device cost of job `job`'s task on `device`; `None` for the nominal task
/// (a device with the mean local samples), which the core ranks and fits devices by.
pub fn task_cost(input: &SimInput, cfg: &SimConfig, job: usize, device: Option<u64>) -> TaskCost {
    let j = &input.jobs[job];
    match work_of(input, j) {
        Some((work, part)) => {
            work.cost(device.map_or_else(|| part.mean_samples(), |d| part.samples(d)))
        }
        None => TaskCost {
            compute_s: j.row.workload_s,
            comm_s: j.row.comm_s * cfg.comm_trips,
        },
    }
}
