//! The incentive check for posted-price admission: does a job gain by misreporting the
//! distribution of its length? Paired comparisons of one job's realised utility (value
//! at completion minus payment; 0 if declined or evicted) when it reports the truth and
//! when it reports every outcome scaled by a factor, all else (seed, trace, other jobs,
//! its real number of rounds) equal. The CLI (`venn-sim admission-ic`) runs the
//! simulations; this module picks the jobs and summarises the pairs.

use serde::{Deserialize, Serialize};

use crate::engine::JobRecord;

/// A job's realised utility in a run with admission (0 without admission figures).
pub fn utility(rec: &JobRecord) -> f64 {
    rec.value.unwrap_or(0.0) - rec.payment.unwrap_or(0.0)
}

/// `k` job positions spread evenly over `n` jobs.
pub fn targets(n: usize, k: usize) -> Vec<usize> {
    let k = k.min(n);
    (0..k).map(|i| i * n / k.max(1)).collect()
}

/// One paired comparison.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IcCase {
    /// Run seed.
    pub seed: u64,
    /// Trace index of the job.
    pub job: u32,
    /// Factor its report was scaled by.
    pub factor: f64,
    /// Utility when it told the truth.
    pub truthful: f64,
    /// Utility when it misreported.
    pub misreport: f64,
}

impl IcCase {
    /// Misreport minus truthful utility.
    pub fn gain(&self) -> f64 {
        self.misreport - self.truthful
    }
}

/// Summary of the cases of one factor.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct IcRow {
    /// Report factor.
    pub factor: f64,
    /// Number of pairs.
    pub cases: usize,
    /// Mean truthful utility.
    pub mean_truthful: f64,
    /// Mean utility under the misreport.
    pub mean_misreport: f64,
    /// Mean gain (misreport − truthful).
    pub mean_gain: f64,
    /// Half-width of the 95 % confidence interval of the mean gain (normal approx.).
    pub ci95: f64,
    /// Share of pairs where misreporting gained.
    pub share_gain: f64,
    /// Share of pairs where misreporting lost.
    pub share_loss: f64,
    /// Largest single gain.
    pub max_gain: f64,
}

/// One row per factor, in the order factors first appear.
pub fn summarize(cases: &[IcCase]) -> Vec<IcRow> {
    let mut factors: Vec<f64> = Vec::new();
    for c in cases {
        if !factors.contains(&c.factor) {
            factors.push(c.factor);
        }
    }
    factors
        .into_iter()
        .map(|f| {
            let cs: Vec<&IcCase> = cases.iter().filter(|c| c.factor == f).collect();
            let n = cs.len() as f64;
            let mean = |g: &dyn Fn(&IcCase) -> f64| cs.iter().map(|c| g(c)).sum::<f64>() / n;
            let mean_gain = mean(&|c| c.gain());
            let var = if cs.len() > 1 {
                cs.iter()
                    .map(|c| (c.gain() - mean_gain).powi(2))
                    .sum::<f64>()
                    / (n - 1.0)
            } else {
                0.0
            };
            let eps = 1e-9 * (1.0 + mean(&|c| c.truthful.abs()));
            IcRow {
                factor: f,
                cases: cs.len(),
                mean_truthful: mean(&|c| c.truthful),
                mean_misreport: mean(&|c| c.misreport),
                mean_gain,
                ci95: 1.96 * (var / n).sqrt(),
                share_gain: cs.iter().filter(|c| c.gain() > eps).count() as f64 / n,
                share_loss: cs.iter().filter(|c| c.gain() < -eps).count() as f64 / n,
                max_gain: cs
                    .iter()
                    .map(|c| c.gain())
                    .fold(f64::NEG_INFINITY, f64::max),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_spread_and_clamp() {
        assert_eq!(targets(50, 5), vec![0, 10, 20, 30, 40]);
        assert_eq!(targets(3, 5), vec![0, 1, 2]);
    }

    #[test]
    fn misreporting_the_length_does_not_pay_in_the_mechanism_alone() {
        use venn_core::admission::AdmissionParams;
        let inst = slot_model::Instance::default();
        let params = AdmissionParams::default();
        let mut cases = Vec::new();
        for seed in 0..30 {
            let truth = slot_model::utilities(params, &inst, seed, None);
            assert_eq!(
                truth,
                slot_model::utilities(params, &inst, seed, Some((5, 1.0))),
                "a factor of 1 is the truth"
            );
            for j in targets(inst.jobs, 4) {
                for factor in [0.5, 0.9, 1.05, 1.1, 2.0] {
                    let lie = slot_model::utilities(params, &inst, seed, Some((j, factor)));
                    cases.push(IcCase {
                        seed,
                        job: j as u32,
                        factor,
                        truthful: truth[j],
                        misreport: lie[j],
                    });
                }
            }
        }
        for row in summarize(&cases) {
            // Large lies must lose outright; small ones must at least not gain beyond noise.
            let bound = if (0.8..1.25).contains(&row.factor) {
                row.ci95
            } else {
                0.0
            };
            assert!(
                row.mean_gain < bound,
                "misreporting ×{} paid: {row:?}",
                row.factor
            );
        }
    }

    #[test]
    fn summary_pairs_by_factor() {
        let c = |factor, truthful, misreport| IcCase {
            seed: 0,
            job: 1,
            factor,
            truthful,
            misreport,
        };
        let rows = summarize(&[c(0.5, 10.0, 8.0), c(0.5, 4.0, 6.0), c(2.0, 1.0, 1.0)]);
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].factor, 0.5);
        assert_eq!(rows[0].cases, 2);
        assert_eq!(rows[0].mean_gain, 0.0);
        assert_eq!(rows[0].share_gain, 0.5);
        assert_eq!(rows[0].share_loss, 0.5);
        assert_eq!(rows[0].max_gain, 2.0);
        assert!((rows[0].ci95 - 1.96 * (8.0f64 / 2.0).sqrt()).abs() < 1e-9);
        assert_eq!(rows[1].share_gain, 0.0);
        assert_eq!(rows[1].share_loss, 0.0);
    }
}

/// The mechanism on its own, without the device scheduler: jobs arrive over slots,
/// state their work to an
/// [`AdmissionController`](venn_core::admission::AdmissionController), and — once
/// launched — run at exactly their stated rate (one round per `round_s`) for their
/// *real* number of rounds, drawn from their true distribution; realised capacity is
/// the forecast with ±10 % noise per slot. Here the true distribution really is the
/// job's length distribution, which the full engine can only approximate (there a job's
/// speed emerges from the scheduler).
pub mod slot_model {
    use venn_core::admission::{
        Admission, AdmissionController, AdmissionParams, CapacityForecast, RoundsDist,
        StatementOfWork, ValueFn,
    };
    use venn_core::{JobId, SeededRng, Time};

    /// Size of one synthetic instance.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub struct Instance {
        /// Jobs per instance.
        pub jobs: usize,
        /// Jobs arrive uniformly over this many slots.
        pub arrival_slots: u32,
        /// Capacity per slot (device check-ins).
        pub capacity: f64,
    }

    impl Default for Instance {
        fn default() -> Self {
            Instance {
                jobs: 40,
                arrival_slots: 200,
                capacity: 100.0,
            }
        }
    }

    struct Job {
        arrival: f64,
        truth: StatementOfWork,
        real_rounds: u32,
    }

    fn jobs(inst: &Instance, seed: u64, slot_s: f64) -> Vec<Job> {
        let mut rng = SeededRng::new(seed ^ 0x51_0e_d0);
        let mut v: Vec<Job> = (0..inst.jobs)
            .map(|_| {
                let arrival = rng.f64() * f64::from(inst.arrival_slots) * slot_s;
                let demand = 5 + rng.below(36) as u32;
                let r = 5.0 + 55.0 * rng.f64();
                let rounds = RoundsDist(
                    (0..5)
                        .map(|k| (((r * (0.5 + 0.25 * k as f64)).round() as u32).max(1), 0.2))
                        .collect(),
                );
                let real_rounds = rounds.sample(rng.f64());
                let density = 0.05 * 20f64.powf(rng.f64());
                let len = rounds.mean() * slot_s;
                let worth = density * f64::from(demand) * rounds.mean();
                let patience = 1.0 + 2.0 * rng.f64();
                Job {
                    arrival,
                    truth: StatementOfWork {
                        value: ValueFn::deadline(worth, patience * len, 2.0 * patience * len),
                        rounds,
                        demand,
                        round_s: slot_s,
                        max_wait_s: None,
                    },
                    real_rounds,
                }
            })
            .collect();
        v.sort_by(|a, b| a.arrival.total_cmp(&b.arrival));
        v
    }

    /// Completes, in time order, the running jobs done by `t`.
    fn finish_until(
        ctl: &mut AdmissionController,
        running: &mut Vec<(f64, usize)>,
        utility: &mut [f64],
        t: f64,
    ) {
        running.sort_by(|a, b| a.0.total_cmp(&b.0));
        let n = running.partition_point(|&(done, _)| done <= t);
        for (done, j) in running.drain(..n) {
            if let Some(st) = ctl.finished(JobId(j as u64), Time(done)) {
                utility[j] = st.value - st.payment;
            }
        }
    }

    /// Runs one instance; job `misreport.0` (position in arrival order) scales its
    /// stated rounds by `misreport.1`. Returns every job's realised utility (value at
    /// completion − payment; 0 if declined or evicted, who are refunded).
    pub fn utilities(
        params: AdmissionParams,
        inst: &Instance,
        seed: u64,
        misreport: Option<(usize, f64)>,
    ) -> Vec<f64> {
        let slot_s = params.slot_s;
        let jobs = jobs(inst, seed, slot_s);
        let mut noise = SeededRng::new(seed ^ 0xca9a);
        let mut ctl = AdmissionController::new(params, CapacityForecast::Flat(inst.capacity))
            .expect("valid parameters");
        let mut utility = vec![0.0; jobs.len()];
        // (completion time, job) of admitted jobs still running or waiting to launch.
        let mut running: Vec<(f64, usize)> = Vec::new();
        let mut next = 0;
        let mut slot = 0u64;
        while next < jobs.len() || !running.is_empty() {
            let end = (slot + 1) as f64 * slot_s;
            while next < jobs.len() && jobs[next].arrival < end {
                let j = &jobs[next];
                finish_until(&mut ctl, &mut running, &mut utility, j.arrival);
                let stated = match misreport {
                    Some((m, f)) if m == next => j.truth.misreported(f),
                    _ => j.truth.clone(),
                };
                let now = Time(j.arrival);
                if let Ok(Admission::Admitted { plan }) =
                    ctl.submit(JobId(next as u64), &stated, now)
                {
                    let done = plan.launch_at.secs() + f64::from(j.real_rounds) * j.truth.round_s;
                    running.push((done, next));
                }
                next += 1;
            }
            finish_until(&mut ctl, &mut running, &mut utility, end);
            let capacity = inst.capacity * (0.9 + 0.2 * noise.f64());
            for st in ctl.on_slot(Time(end), capacity) {
                running.retain(|&(_, j)| j as u64 != st.job.0);
            }
            slot += 1;
        }
        utility
    }
}
