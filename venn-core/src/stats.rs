//! The statistics every driver reports accuracy and speed-ups with, so that the simulator,
//! the live testbed, the status page and the experiment reports agree on one rule:
//!
//! - [`wilson`]: the 95 % Wilson score interval of an accuracy measured on `n` test
//!   samples (a binomial proportion). Preferred over the normal approximation because it
//!   stays inside [0, 1] and is honest at small `n` and at accuracies near 0 or 1.
//! - [`mean_interval`]: mean and 95 % Student-t interval of a handful of figures (one per
//!   seed), for speed-ups and accuracies averaged over seeds.
//! - [`TtaRule`]: time-to-accuracy that one lucky evaluation cannot fake: a job reaches a
//!   threshold at the first of `consecutive` evaluations in a row at or above it.
//!
//! Pure functions, no I/O: they belong with the core so that every driver uses the same.

use serde::{Deserialize, Serialize};

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.959_963_984_540_054;

/// A closed interval `[lo, hi]` around an estimate.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// The estimate (the observed proportion, or the mean).
    pub estimate: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

impl Interval {
    /// Half the width (for `estimate ± half_width` displays of symmetric intervals).
    pub fn half_width(&self) -> f64 {
        (self.hi - self.lo) / 2.0
    }

    /// Whether `x` lies inside.
    pub fn contains(&self, x: f64) -> bool {
        self.lo <= x && x <= self.hi
    }
}

/// The 95 % Wilson score interval of `accuracy` measured on `n` samples; `None` when
/// `n` is 0 or `accuracy` is not in [0, 1].
///
/// ```
/// let i = venn_core::stats::wilson(0.6, 2000).unwrap();
/// assert!((i.lo - 0.5784).abs() < 1e-3 && (i.hi - 0.6212).abs() < 1e-3);
/// ```
pub fn wilson(accuracy: f64, n: u64) -> Option<Interval> {
    if n == 0 || !(0.0..=1.0).contains(&accuracy) {
        return None;
    }
    let n = n as f64;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (accuracy + z2 / (2.0 * n)) / denom;
    let half = Z95 * (accuracy * (1.0 - accuracy) / n + z2 / (4.0 * n * n)).sqrt() / denom;
    Some(Interval {
        estimate: accuracy,
        lo: (centre - half).max(0.0),
        hi: (centre + half).min(1.0),
    })
}

/// Two-sided 97.5 % quantiles of Student's t for 1..=30 degrees of freedom.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// The t quantile for a 95 % interval with `df` degrees of freedom (the normal's beyond 30,
/// where the two differ by under 2 %).
pub fn t95(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        d if d <= T975.len() => T975[d - 1],
        _ => Z95,
    }
}

/// Mean of the finite values in `xs` and its 95 % Student-t interval (`mean ± t · s/√n`);
/// `None` with no finite value. With one value the interval is that value alone (there is
/// no spread to estimate); callers that need a width should say "one seed".
pub fn mean_interval(xs: &[f64]) -> Option<Interval> {
    let v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    let n = v.len();
    if n == 0 {
        return None;
    }
    let mean = v.iter().sum::<f64>() / n as f64;
    if n == 1 {
        return Some(Interval {
            estimate: mean,
            lo: mean,
            hi: mean,
        });
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
    let half = t95(n - 1) * (var / n as f64).sqrt();
    Some(Interval {
        estimate: mean,
        lo: mean - half,
        hi: mean + half,
    })
}

/// The time-to-accuracy rule: a job reaches `threshold` at the first evaluation of the
/// first run of [`TtaRule::consecutive`] evaluations in a row whose accuracy is at or above
/// it. With `consecutive = 1` this is the plain "first round at or above" rule; with 3 (the
/// default) a single lucky round among noisy ones does not count, while a model that
/// really got there is credited from the round it first did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TtaRule {
    /// Evaluations in a row that must all reach the threshold (at least 1).
    pub consecutive: usize,
}

impl Default for TtaRule {
    fn default() -> Self {
        TtaRule { consecutive: 3 }
    }
}

impl TtaRule {
    /// A rule needing `consecutive` evaluations in a row (0 is taken as 1).
    pub fn new(consecutive: usize) -> Self {
        TtaRule {
            consecutive: consecutive.max(1),
        }
    }

    /// The time of the first evaluation of the first qualifying run in `points`
    /// (`(time, accuracy)` in evaluation order); `None` if there is none. A run cut
    /// short by the end of the job does not qualify; a non-finite accuracy breaks a run.
    pub fn reached(
        &self,
        points: impl IntoIterator<Item = (f64, f64)>,
        threshold: f64,
    ) -> Option<f64> {
        let k = self.consecutive.max(1);
        let (mut run, mut start) = (0usize, 0.0f64);
        for (t, acc) in points {
            if acc.is_finite() && acc >= threshold {
                if run == 0 {
                    start = t;
                }
                run += 1;
                if run >= k {
                    return Some(start);
                }
            } else {
                run = 0;
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wilson_matches_published_values() {
        // Wilson (1927) / Newcombe (1998) Table I: 81 of 263 -> 0.2553, 0.3662.
        let i = wilson(81.0 / 263.0, 263).unwrap();
        assert!((i.lo - 0.2553).abs() < 5e-4, "{i:?}");
        assert!((i.hi - 0.3662).abs() < 5e-4, "{i:?}");
        // 0 of 10 -> [0, 0.2775] (Newcombe's case 5).
        let i = wilson(0.0, 10).unwrap();
        assert!(i.lo.abs() < 1e-12, "{i:?}");
        assert!((i.hi - 0.2775).abs() < 5e-4, "{i:?}");
        assert!(wilson(0.5, 0).is_none());
        assert!(wilson(1.2, 10).is_none());
    }

    #[test]
    fn wilson_narrows_with_more_samples() {
        let small = wilson(0.6, 330).unwrap();
        let big = wilson(0.6, 2000).unwrap();
        assert!(big.half_width() < small.half_width());
        // At 2,000 samples and 60 % the interval is about ±2.1 points.
        assert!((big.half_width() - 0.0214).abs() < 1e-3, "{big:?}");
    }

    #[test]
    fn mean_interval_uses_student_t() {
        let i = mean_interval(&[1.0, 2.0, 3.0]).unwrap();
        assert_eq!(i.estimate, 2.0);
        // s = 1, n = 3: half width 4.303 / sqrt(3).
        assert!((i.half_width() - 4.303 / 3f64.sqrt()).abs() < 1e-9);
        let one = mean_interval(&[1.5, f64::NAN]).unwrap();
        assert_eq!((one.lo, one.hi), (1.5, 1.5));
        assert!(mean_interval(&[]).is_none());
        assert_eq!(t95(100), Z95);
    }

    #[test]
    fn tta_needs_a_run_of_evaluations() {
        let pts = [
            (1.0, 0.2),
            (2.0, 0.7),
            (3.0, 0.3),
            (4.0, 0.65),
            (5.0, 0.6),
            (6.0, 0.62),
        ];
        assert_eq!(TtaRule::new(1).reached(pts, 0.6), Some(2.0));
        assert_eq!(TtaRule::new(3).reached(pts, 0.6), Some(4.0));
        assert_eq!(TtaRule::new(4).reached(pts, 0.6), None);
        // A NaN (not evaluated) breaks a run.
        let gap = [(1.0, 0.7), (2.0, f64::NAN), (3.0, 0.7), (4.0, 0.7)];
        assert_eq!(TtaRule::new(2).reached(gap, 0.6), Some(3.0));
        assert_eq!(TtaRule::new(0), TtaRule::new(1));
    }
}
