//! Whether each job can work at all on this input, decided before a run starts: enough
//! eligible devices, enough of them online within one deadline, and a device fast enough
//! to finish a task by the deadline. A driver prints every job's figures and refuses a job
//! that cannot work (issue 40: such a job once aborted every round to the horizon, or, live,
//! retried for the whole time limit, with no word of why).
//!
//! In the engine every check-in of the replayed block is its own client (the authors'
//! model: `client id = base_index × replicas + replica`), with the device profile of its
//! block slot; "devices" here are the trace's device ids, a device eligible when any of its
//! check-ins is.

use std::collections::HashSet;

use venn_core::TaskCost;

use super::config::{DEFAULT_REPLICAS, SimConfig};
use super::setup::SimInput;
use super::work::task_cost;

/// One job's supply and speed against what its rounds need.
#[derive(Clone, Debug, PartialEq)]
pub struct JobFeasibility {
    /// Trace devices with at least one check-in the job's requirement admits.
    pub eligible_devices: usize,
    /// Trace devices.
    pub devices: usize,
    /// Eligible check-ins per hour, over the trace's block (the job's supply when no other
    /// job competes for it); `None` where devices are not traced (a live population that is
    /// always online).
    pub eligible_per_hour: Option<f64>,
    /// Devices a round requests (target × over-commit).
    pub demand: u32,
    /// Results a round needs to succeed.
    pub needed: u32,
    /// The most eligible check-ins that start within any one `deadline_s` of the block: a
    /// round open that long can collect at most this many devices (`None`: not traced).
    pub peak_in_deadline: Option<usize>,
    /// Seconds of the fastest eligible check-in's task (`None`: no eligible check-in).
    pub fastest_task_s: Option<f64>,
    /// The round deadline.
    pub deadline_s: f64,
}

impl JobFeasibility {
    /// Why no round of this job can succeed, or `None` if one can.
    pub fn problem(&self) -> Option<String> {
        if self.eligible_devices == 0 {
            return Some("no device meets its requirement".into());
        }
        if self.eligible_devices < self.needed as usize {
            return Some(format!(
                "{} eligible devices, fewer than the {} results a round needs",
                self.eligible_devices, self.needed
            ));
        }
        if let Some(t) = self.fastest_task_s
            && t > self.deadline_s
        {
            return Some(format!(
                "its fastest eligible device needs {t:.2} s for a task, longer than the {} s \
                 deadline",
                self.deadline_s
            ));
        }
        let peak = self.peak_in_deadline?;
        (peak < self.needed as usize).then(|| {
            format!(
                "at most {peak} eligible devices check in within one {} s deadline; a round \
                 needs {} results",
                self.deadline_s, self.needed
            )
        })
    }

    /// One line for people: `N of M devices eligible (requests K, needs R results), …`.
    pub fn line(&self) -> String {
        let mut s = format!(
            "{} of {} devices eligible",
            self.eligible_devices, self.devices
        );
        if let Some(h) = self.eligible_per_hour {
            s += &format!(", {h:.0} eligible check-ins an hour");
        }
        s += &format!(
            " (requests {}, needs {} results); ",
            self.demand, self.needed
        );
        if let Some(p) = self.peak_in_deadline {
            s += &format!("at most {p} check in within its deadline; ");
        }
        let fastest = self
            .fastest_task_s
            .map_or("unknown".into(), |t| format!("{t:.2} s"));
        s + &format!(
            "fastest task {fastest} against its {} s deadline",
            self.deadline_s
        )
    }
}

/// Every job's [`JobFeasibility`], in job order.
pub fn feasibility(input: &SimInput, cfg: &SimConfig) -> Vec<JobFeasibility> {
    let block = input.trace.block(cfg.window_s);
    let replicas = cfg
        .replicas
        .or(input.workload_replicas)
        .unwrap_or(DEFAULT_REPLICAS);
    let devices: HashSet<u32> = block.iter().map(|r| r.device).collect();
    input
        .jobs
        .iter()
        .enumerate()
        .map(|(j, job)| {
            let mut eligible = HashSet::new();
            let mut starts = Vec::new();
            let mut fastest: Option<f64> = None;
            let fixed: Option<TaskCost> =
                job.work.is_none().then(|| task_cost(input, cfg, j, None));
            for (i, row) in block.iter().enumerate() {
                let profile = input.devices.profile(input.devices.slot(i as u32));
                if !job.requirement.admits(profile) {
                    continue;
                }
                eligible.insert(row.device);
                starts.push(row.start);
                let client = i as u64 * u64::from(replicas);
                let cost = fixed.unwrap_or_else(|| task_cost(input, cfg, j, Some(client)));
                let t = profile.task_seconds(cost);
                fastest = Some(fastest.map_or(t, |f| f.min(t)));
            }
            let needed = job.close_at.unwrap_or_else(|| {
                (f64::from(job.row.demand) * job.row.min_response_fraction).ceil() as u32
            });
            JobFeasibility {
                eligible_devices: eligible.len(),
                devices: devices.len(),
                eligible_per_hour: Some(starts.len() as f64 / (cfg.window_s / 3600.0)),
                demand: job.row.demand,
                needed,
                peak_in_deadline: Some(peak_within(&starts, job.row.deadline_s)),
                fastest_task_s: fastest,
                deadline_s: job.row.deadline_s,
            }
        })
        .collect()
}

/// The most of `starts` (ascending) inside any half-open window of `width` seconds.
fn peak_within(starts: &[f64], width: f64) -> usize {
    let (mut lo, mut best) = (0, 0);
    for hi in 0..starts.len() {
        while starts[hi] - starts[lo] >= width {
            lo += 1;
        }
        best = best.max(hi + 1 - lo);
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_counts_starts_in_the_busiest_window() {
        assert_eq!(peak_within(&[], 10.0), 0);
        assert_eq!(peak_within(&[0.0, 1.0, 2.0, 20.0, 21.0], 10.0), 3);
        assert_eq!(peak_within(&[0.0, 10.0, 20.0], 10.0), 1);
        assert_eq!(peak_within(&[0.0, 9.9, 20.0], 10.0), 2);
    }

    #[test]
    fn problems_name_what_is_missing() {
        let ok = JobFeasibility {
            eligible_devices: 50,
            devices: 80,
            eligible_per_hour: Some(12.0),
            demand: 13,
            needed: 8,
            peak_in_deadline: Some(20),
            fastest_task_s: Some(12.0),
            deadline_s: 300.0,
        };
        assert_eq!(ok.problem(), None);
        assert!(ok.line().starts_with("50 of 80 devices eligible"));
        let few = JobFeasibility {
            eligible_devices: 5,
            ..ok.clone()
        };
        assert!(few.problem().unwrap().contains("5 eligible devices"));
        let slow = JobFeasibility {
            fastest_task_s: Some(400.0),
            ..ok.clone()
        };
        assert!(slow.problem().unwrap().contains("400.00 s"));
        let sparse = JobFeasibility {
            peak_in_deadline: Some(3),
            ..ok.clone()
        };
        assert!(sparse.problem().unwrap().contains("at most 3"));
        let untraced = JobFeasibility {
            peak_in_deadline: None,
            eligible_per_hour: None,
            ..sparse
        };
        assert_eq!(
            untraced.problem(),
            None,
            "no supply-over-time rule without a trace"
        );
        assert!(!untraced.line().contains("check-ins an hour"));
        let none = JobFeasibility {
            eligible_devices: 0,
            fastest_task_s: None,
            ..ok
        };
        assert!(none.problem().unwrap().contains("no device"));
    }
}
