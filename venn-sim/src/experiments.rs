//! The paper's evaluation as library functions: breakdowns of per-job
//! results (Tables 2 and 3), the fair-share check of Fig. 14, and the
//! scheduler-overhead measurement of Fig. 10. The CLI runs the simulations
//! and prints or plots what these return.

use std::time::Instant;

use venn_core::{
    DeviceId, DeviceProfile, JobSpec, ManagerConfig, PolicyConfig, Requirement, ResourceManager,
    RoundRequest, Time,
};

use crate::engine::JobRecord;

/// Jobs' total-demand quartile (0 = smallest 25 %), by rank so ties split
/// deterministically by job order.
pub fn demand_quartiles(jobs: &[JobRecord]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by_key(|&i| (jobs[i].total_demand, i));
    let mut q = vec![0; jobs.len()];
    for (rank, &i) in order.iter().enumerate() {
        q[i] = rank * 4 / jobs.len().max(1);
    }
    q
}

/// Speed-up of `policy` over `base` within each of `n` job classes:
/// mean JCT of the class under `base` over its mean JCT under `policy`.
/// `class[i]` is job `i`'s class; both runs must list the same jobs in the
/// same order. Empty classes give NaN.
pub fn speedup_by_class(
    base: &[JobRecord],
    policy: &[JobRecord],
    class: &[usize],
    n: usize,
) -> Vec<f64> {
    let mut b = vec![0.0; n];
    let mut p = vec![0.0; n];
    for ((x, y), &c) in base.iter().zip(policy).zip(class) {
        debug_assert_eq!(x.idx, y.idx);
        b[c] += x.jct_s;
        p[c] += y.jct_s;
    }
    b.iter()
        .zip(&p)
        .map(|(b, p)| if *p > 0.0 { b / p } else { f64::NAN })
        .collect()
}

/// Share of finished jobs whose JCT is within their fair-share JCT
/// (`T_i = M·sd_i` as the core fixed it at their first request). Jobs without
/// an estimate are skipped; `None` when no job qualifies.
pub fn fair_share_met(jobs: &[JobRecord]) -> Option<f64> {
    let with: Vec<&JobRecord> = jobs
        .iter()
        .filter(|j| j.fair_share_jct_s.is_some())
        .collect();
    if with.is_empty() {
        return None;
    }
    let met = with
        .iter()
        .filter(|j| j.finished() && j.jct_s <= j.fair_share_jct_s.unwrap_or(0.0))
        .count();
    Some(met as f64 / with.len() as f64)
}

/// Scheduler latency at one size.
#[derive(Clone, Copy, Debug, serde::Serialize)]
pub struct Overhead {
    /// Registered jobs.
    pub jobs: usize,
    /// Distinct requirements (job groups).
    pub groups: usize,
    /// Mean seconds of one planning pass (IRS over all groups and cells).
    pub plan_s: f64,
    /// Mean seconds of one check-in decision on a clean plan.
    pub check_in_s: f64,
}

/// Measures `policy`'s planning and per-check-in decision latency with
/// `jobs` jobs spread over `groups` requirements, each with an open request,
/// and a device population of `device_kinds` distinct profiles.
pub fn measure_overhead(
    policy: &str,
    jobs: usize,
    groups: usize,
    device_kinds: usize,
    reps: usize,
) -> Result<Overhead, venn_core::CoreError> {
    let groups = groups.clamp(1, venn_core::MAX_GROUPS);
    let mut rm =
        ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named(policy))?;
    // Requirement g: cpu ≥ g mod 8, mem ≥ 100·(g / 8): distinct and overlapping.
    let req = |g: usize| Requirement::scores((g % 8) as f64, 100.0 * (g / 8) as f64, 0.0);
    let device = |k: usize| {
        DeviceProfile::new((k % 9) as f64, 100.0 * ((k / 9) % 9) as f64, 10.0).with_speed(
            40.0 + (k % 13) as f64 * 10.0,
            2000.0 + (k % 7) as f64 * 3000.0,
        )
    };
    let devices: Vec<DeviceProfile> = (0..device_kinds.max(1)).map(device).collect();
    // Warm the supply estimate so IRS sees every cell.
    for (k, d) in devices.iter().enumerate() {
        rm.check_in(DeviceId(k as u64), d, Time(0.0));
    }
    let mut t = 1.0;
    for j in 0..jobs {
        let id = rm.register_job(
            JobSpec::new(format!("j{j}"), req(j % groups)).with_rounds(100),
            Time(t),
        )?;
        rm.submit_request(
            id,
            RoundRequest {
                demand: 1_000_000,
                deadline: Time(1e12),
                min_response_fraction: 0.8,
                close_at: None,
            },
            Time(t),
        )?;
        t += 1e-3;
    }
    let started = Instant::now();
    for _ in 0..reps {
        rm.replan(Time(t));
    }
    let plan_s = started.elapsed().as_secs_f64() / reps.max(1) as f64;
    let n = reps * 20;
    let started = Instant::now();
    for i in 0..n {
        // Demand is huge, so assignments never fulfil a request and the plan stays clean.
        let k = i % devices.len();
        rm.check_in(DeviceId(1_000_000 + i as u64), &devices[k], Time(t));
    }
    let check_in_s = started.elapsed().as_secs_f64() / n.max(1) as f64;
    Ok(Overhead {
        jobs,
        groups,
        plan_s,
        check_in_s,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(idx: u32, total: u64, jct: f64, fair: Option<f64>) -> JobRecord {
        JobRecord {
            idx,
            config_id: 1,
            arrival_s: 0.0,
            finish_s: Some(jct),
            jct_s: jct,
            sched_delay_s: 0.0,
            response_collection_s: 0.0,
            rounds: 1,
            rounds_target: 1,
            aborted_rounds: 0,
            spec_id: 1,
            spec_name: String::new(),
            demand: 1,
            total_demand: total,
            fair_share_jct_s: fair,
            admission: None,
            launch_s: None,
            value: None,
            payment: None,
        }
    }

    #[test]
    fn quartiles_speedups_and_fair_share() {
        let base: Vec<_> = (0..8)
            .map(|i| rec(i, 100 - u64::from(i), 10.0, None))
            .collect();
        let q = demand_quartiles(&base);
        assert_eq!(q, vec![3, 3, 2, 2, 1, 1, 0, 0]);
        let pol: Vec<_> = (0..8)
            .map(|i| rec(i, 0, if i < 4 { 5.0 } else { 20.0 }, Some(12.0)))
            .collect();
        let s = speedup_by_class(&base, &pol, &q, 4);
        assert_eq!(s, vec![0.5, 0.5, 2.0, 2.0]);
        assert_eq!(fair_share_met(&pol), Some(0.5));
        assert_eq!(fair_share_met(&base), None);
    }

    #[test]
    fn overhead_is_measured() {
        let o = measure_overhead("venn", 20, 4, 50, 3).unwrap();
        assert!(o.plan_s > 0.0 && o.check_in_s > 0.0);
    }
}
