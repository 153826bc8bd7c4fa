//! The IRS integer program solved exactly on small instances (paper Appendix A), and a
//! driver that replays the same instance through any policy.
//!
//! An instance: jobs with an arrival time, a demand and a requirement; devices checking in
//! at known times with known profiles. Each device serves at most one job that has arrived
//! and admits it; a job completes when its demand-th device arrives; the objective is the
//! average completion time (JCT). [`solve`] finds the optimum by dynamic programming over
//! (next device, remaining demand vector) — exact, and fast while the product of
//! (demand + 1) over jobs times the number of devices stays below [`MAX_STATES`].
//! Assigning a device never delays any job, so "leave the device idle" is only considered
//! when no arrived job admits it.

use crate::hash::FastMap;
use crate::ids::DeviceId;
use crate::job::{JobSpec, RoundOutcome, RoundRequest};
use crate::manager::{Decision, ManagerConfig, ResourceManager};
use crate::policy::PolicyConfig;
use crate::profile::{DeviceProfile, Requirement};
use crate::supply::SupplyConfig;
use crate::time::Time;
use thiserror::Error;

/// Largest (devices × Π(demand+1)) the exact solver accepts.
pub const MAX_STATES: u64 = 20_000_000;

/// A job of an instance.
#[derive(Clone, Debug)]
pub struct InstanceJob {
    /// When it arrives (its request is open from then).
    pub arrival: f64,
    /// Devices it needs.
    pub demand: u32,
    /// Devices it can use.
    pub requirement: Requirement,
}

/// A device check-in of an instance.
#[derive(Clone, Debug)]
pub struct InstanceDevice {
    /// When it checks in.
    pub time: f64,
    /// What it offers.
    pub profile: DeviceProfile,
}

/// A small IRS instance.
#[derive(Clone, Debug, Default)]
pub struct Instance {
    /// The jobs.
    pub jobs: Vec<InstanceJob>,
    /// The check-ins, in time order.
    pub devices: Vec<InstanceDevice>,
}

/// Completion time of each job (`None`: never completed).
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    /// Per job, in instance order.
    pub completion: Vec<Option<f64>>,
}

impl Schedule {
    /// Average JCT (completion − arrival), if every job completed.
    pub fn avg_jct(&self, inst: &Instance) -> Option<f64> {
        let mut sum = 0.0;
        for (c, j) in self.completion.iter().zip(&inst.jobs) {
            sum += (*c)? - j.arrival;
        }
        Some(sum / inst.jobs.len().max(1) as f64)
    }
}

/// Why an instance could not be solved.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum OptimalError {
    /// The state space is too large for the exact solver.
    #[error("instance too large for the exact solver: {0} states (limit {MAX_STATES})")]
    TooLarge(u64),
    /// No assignment completes every job.
    #[error("no assignment completes every job")]
    Infeasible,
    /// Devices are not in time order.
    #[error("device check-ins must be sorted by time")]
    Unsorted,
}

struct Dp<'a> {
    inst: &'a Instance,
    eligible: Vec<Vec<usize>>,
    radix: Vec<u64>,
    memo: FastMap<(u32, u64), f64>,
}

impl Dp<'_> {
    fn rem(&self, key: u64, j: usize) -> u64 {
        (key / self.radix[j]) % (self.inst.jobs[j].demand as u64 + 1)
    }

    fn best(&mut self, i: usize, key: u64) -> f64 {
        if key == 0 {
            return 0.0;
        }
        if i == self.inst.devices.len() {
            return f64::INFINITY;
        }
        if let Some(&v) = self.memo.get(&(i as u32, key)) {
            return v;
        }
        let t = self.inst.devices[i].time;
        let mut best = f64::INFINITY;
        let mut any = false;
        for k in 0..self.eligible[i].len() {
            let j = self.eligible[i][k];
            let r = self.rem(key, j);
            if r == 0 {
                continue;
            }
            any = true;
            let done = if r == 1 { t } else { 0.0 };
            let v = done + self.best(i + 1, key - self.radix[j]);
            if v < best {
                best = v;
            }
        }
        if !any {
            best = self.best(i + 1, key);
        }
        self.memo.insert((i as u32, key), best);
        best
    }
}

/// The optimal schedule of a small instance.
pub fn solve(inst: &Instance) -> Result<Schedule, OptimalError> {
    if inst.devices.windows(2).any(|w| w[1].time < w[0].time) {
        return Err(OptimalError::Unsorted);
    }
    let mut radix = Vec::with_capacity(inst.jobs.len());
    let mut states: u64 = 1;
    for j in &inst.jobs {
        radix.push(states);
        states = states.saturating_mul(j.demand as u64 + 1);
    }
    let total = states.saturating_mul(inst.devices.len() as u64 + 1);
    if total > MAX_STATES {
        return Err(OptimalError::TooLarge(total));
    }
    let eligible = inst
        .devices
        .iter()
        .map(|d| {
            (0..inst.jobs.len())
                .filter(|&j| {
                    inst.jobs[j].arrival <= d.time && inst.jobs[j].requirement.admits(&d.profile)
                })
                .collect()
        })
        .collect();
    let start: u64 = inst
        .jobs
        .iter()
        .zip(&radix)
        .map(|(j, r)| j.demand as u64 * r)
        .sum();
    let mut dp = Dp {
        inst,
        eligible,
        radix,
        memo: FastMap::default(),
    };
    if !dp.best(0, start).is_finite() {
        return Err(OptimalError::Infeasible);
    }
    // Walk the memo to recover the completion times.
    let mut completion = vec![None; inst.jobs.len()];
    let mut key = start;
    for i in 0..inst.devices.len() {
        if key == 0 {
            break;
        }
        let target = dp.best(i, key);
        let t = inst.devices[i].time;
        let mut chosen = None;
        for k in 0..dp.eligible[i].len() {
            let j = dp.eligible[i][k];
            let r = dp.rem(key, j);
            if r == 0 {
                continue;
            }
            let done = if r == 1 { t } else { 0.0 };
            if done + dp.best(i + 1, key - dp.radix[j]) == target {
                chosen = Some((j, r));
                break;
            }
        }
        if let Some((j, r)) = chosen {
            key -= dp.radix[j];
            if r == 1 {
                completion[j] = Some(t);
            }
        }
    }
    Ok(Schedule { completion })
}

/// Replays the instance through the configured built-in policy: jobs register and submit one request
/// at arrival, devices check in at their times. With `warmup`, the device sequence is
/// first replayed once before time 0 with no jobs, so the supply estimator knows the
/// instance's check-in mix (the paper assumes known supply rates).
pub fn run_policy(
    inst: &Instance,
    policy: &PolicyConfig,
    seed: u64,
    warmup: bool,
) -> Result<Schedule, crate::CoreError> {
    let first = inst.devices.first().map_or(0.0, |d| d.time);
    let last = inst.devices.last().map_or(0.0, |d| d.time);
    let span = (last - first).max(1.0) + 1.0;
    let cfg = ManagerConfig {
        supply: SupplyConfig {
            window_s: 4.0 * span,
            buckets: 64,
            ..SupplyConfig::default()
        },
        seed,
        ..ManagerConfig::default()
    };
    let mut rm = ResourceManager::with_policy(cfg, policy)?;
    if warmup {
        for (i, d) in inst.devices.iter().enumerate() {
            rm.check_in(DeviceId(i as u64), &d.profile, Time(d.time - span));
        }
    }
    let mut order: Vec<usize> = (0..inst.jobs.len()).collect();
    order.sort_by(|&a, &b| inst.jobs[a].arrival.total_cmp(&inst.jobs[b].arrival));
    let mut ids = vec![None; inst.jobs.len()];
    let mut next = 0;
    let mut completion = vec![None; inst.jobs.len()];
    let deadline = Time(last + 10.0 * span);
    for (i, d) in inst.devices.iter().enumerate() {
        while next < order.len() && inst.jobs[order[next]].arrival <= d.time {
            let j = order[next];
            let now = Time(inst.jobs[j].arrival);
            let id = rm.register_job(
                JobSpec::new(format!("job{j}"), inst.jobs[j].requirement.clone()),
                now,
            )?;
            let req = RoundRequest {
                demand: inst.jobs[j].demand,
                deadline,
                min_response_fraction: 1.0,
                close_at: None,
            };
            rm.submit_request(id, req, now)?;
            ids[j] = Some(id);
            next += 1;
        }
        let now = Time(d.time);
        if let Decision::Assigned { job, round } =
            rm.check_in(DeviceId(1_000_000 + i as u64), &d.profile, now)
        {
            let fulfilled = rm
                .job(job)
                .and_then(|s| s.current.as_ref())
                .is_some_and(|r| r.fulfilled_at.is_some());
            if fulfilled {
                let j = ids
                    .iter()
                    .position(|x| *x == Some(job))
                    .expect("a job of this instance");
                completion[j] = Some(d.time);
                rm.close_round(job, round, RoundOutcome::Success, now)?;
                rm.job_finished(job, now)?;
            }
        }
    }
    Ok(Schedule { completion })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dev(t: f64, mem: f64) -> InstanceDevice {
        InstanceDevice {
            time: t,
            profile: DeviceProfile::new(1.0, mem, 1.0),
        }
    }

    #[test]
    fn solves_a_hand_checked_instance() {
        // Job 0 needs 2 big devices; job 1 needs 2 of any. Devices: small@1, big@2,
        // small@3, big@4. Optimum: job1 gets small@1 and small@3 (done at 3), job0 gets
        // the big ones (done at 4): average 3.5.
        let inst = Instance {
            jobs: vec![
                InstanceJob {
                    arrival: 0.0,
                    demand: 2,
                    requirement: Requirement::scores(0.0, 2.0, 0.0),
                },
                InstanceJob {
                    arrival: 0.0,
                    demand: 2,
                    requirement: Requirement::any(),
                },
            ],
            devices: vec![dev(1.0, 1.0), dev(2.0, 2.0), dev(3.0, 1.0), dev(4.0, 2.0)],
        };
        let s = solve(&inst).unwrap();
        assert_eq!(s.completion, vec![Some(4.0), Some(3.0)]);
        assert_eq!(s.avg_jct(&inst), Some(3.5));
    }

    #[test]
    fn reports_infeasible_and_too_large() {
        let inst = Instance {
            jobs: vec![InstanceJob {
                arrival: 0.0,
                demand: 3,
                requirement: Requirement::any(),
            }],
            devices: vec![dev(1.0, 1.0)],
        };
        assert_eq!(solve(&inst), Err(OptimalError::Infeasible));
        let big = Instance {
            jobs: (0..8)
                .map(|_| InstanceJob {
                    arrival: 0.0,
                    demand: 50,
                    requirement: Requirement::any(),
                })
                .collect(),
            devices: vec![dev(1.0, 1.0)],
        };
        assert!(matches!(solve(&big), Err(OptimalError::TooLarge(_))));
    }
}
