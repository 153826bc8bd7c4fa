//! Congestion as the `random-delay` and `chunked` policies measure it: how long the open
//! demand that competes with a job for devices would take to serve at the rate those
//! devices check in. This is the "congestion" of the random-delays scheduling results,
//! measured in seconds of eligible supply instead of rounds of a network.

use super::SchedView;
use crate::groupset::{GroupIdx, GroupSet};
use crate::job::JobState;
use crate::supply::SupplyEstimator;
use crate::time::Time;

/// Groups that share at least one device class with group `g` (`g` included): the jobs
/// whose requests compete with `g`'s for the same devices.
pub fn overlapping_groups(supply: &SupplyEstimator, g: GroupIdx) -> GroupSet {
    let mut set = GroupSet::default();
    set.insert(g);
    for c in supply.classes() {
        if c.groups.contains(g) {
            set = set.or(&c.groups);
        }
    }
    set
}

/// Check-ins per second of devices that at least one group of `set` admits.
pub fn supply_rate(supply: &SupplyEstimator, set: &GroupSet, now: Time) -> f64 {
    let n: u64 = supply
        .classes()
        .iter()
        .filter(|c| c.groups.intersects(set))
        .map(|c| c.in_window)
        .sum();
    n as f64 / supply.effective_window(now)
}

/// Δ for `job`: the open demand queued in groups overlapping the job's (its own request
/// included) over the check-in rate of the devices the job may use, in seconds. Zero
/// while no supply has been seen, so a cold start delays nobody.
pub fn congestion_delay_s(view: &SchedView<'_>, job: &JobState) -> f64 {
    let rate = view.supply.group_rate(job.group, view.now);
    if rate <= 0.0 {
        return 0.0;
    }
    let competing = overlapping_groups(view.supply, job.group);
    let mut demand = 0.0;
    for g in competing.iter() {
        if let Some(group) = view.groups.get(g) {
            for j in &group.queue {
                if *j != job.id {
                    demand += view.jobs.get(j).map_or(0, |s| s.open_demand()) as f64;
                }
            }
        }
    }
    demand += job.open_demand() as f64;
    demand / rate
}
