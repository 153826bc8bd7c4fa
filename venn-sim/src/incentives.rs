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
