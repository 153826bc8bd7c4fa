//! Eviction risk of a plan. A job is evicted at the end of a slot it runs in when the
//! usage of running jobs exceeds the capacity the slot offered, and under LIFO only jobs
//! admitted before it count. Their usage in a future slot is a sum of independent terms
//! (each committed plan runs that slot or not), whose mean and variance the price book
//! keeps; realised capacity strays from the forecast by an error the controller learns
//! from the slots it closes. The overflow probability is the normal tail of the
//! difference — rough for a handful of jobs, but monotone in what matters: how crowded
//! and how uncertain a slot is, and how much the job itself adds.

/// Smoothing of the capacity-error estimate: about the last 20 slots count.
const ERROR_WEIGHT: f64 = 0.05;

/// How far realised capacity strays from the forecast, as a running mean of the squared
/// relative error.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CapacityError {
    mean_sq: f64,
    samples: u64,
}

impl CapacityError {
    /// Records a closed slot's forecast and realised capacity.
    pub fn observe(&mut self, forecast: f64, realised: f64) {
        if !(forecast > 0.0 && realised.is_finite()) {
            return;
        }
        let rel = (realised / forecast - 1.0).powi(2);
        self.mean_sq = if self.samples == 0 {
            rel
        } else {
            (1.0 - ERROR_WEIGHT) * self.mean_sq + ERROR_WEIGHT * rel
        };
        self.samples += 1;
    }

    /// Relative standard deviation of realised capacity around the forecast.
    pub fn relative_sd(&self) -> f64 {
        self.mean_sq.sqrt()
    }
}

/// P(usage of earlier plans + `own` > realised capacity) in one slot, where earlier usage
/// has mean `mean` and variance `variance`, and capacity is `capacity` ± `capacity_sd`.
pub fn overflow(own: f64, mean: f64, variance: f64, capacity: f64, capacity_sd: f64) -> f64 {
    let margin = capacity - own - mean;
    let var = variance.max(0.0) + capacity_sd * capacity_sd;
    if margin.is_nan() || var.is_nan() || var.is_infinite() {
        // Nothing sensible is known about this slot: plan as if it overflowed.
        return 1.0;
    }
    if var <= 1e-12 {
        return if margin < -1e-9 { 1.0 } else { 0.0 };
    }
    0.5 * erfc(margin / (2.0 * var).sqrt())
}

/// Complementary error function (Numerical Recipes' Chebyshev fit, |error| < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let poly = -z * z - 1.265_512_23
        + t * (1.000_023_68
            + t * (0.374_091_96
                + t * (0.096_784_18
                    + t * (-0.186_288_06
                        + t * (0.278_868_07
                            + t * (-1.135_203_98
                                + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77))))))));
    let r = t * poly.exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn erfc_matches_reference_values() {
        for (x, want) in [
            (0.0, 1.0),
            (0.5, 0.479_500_122),
            (1.0, 0.157_299_207),
            (2.0, 0.004_677_735),
            (-1.0, 1.842_700_793),
        ] {
            assert!((erfc(x) - want).abs() < 2e-7, "erfc({x}) = {}", erfc(x));
        }
    }

    #[test]
    fn overflow_is_a_normal_tail_and_certain_without_variance() {
        // Mean 30, sd 30, own 50 against 100: P(Z > 20/30).
        let q = overflow(50.0, 30.0, 900.0, 100.0, 0.0);
        assert!((q - 0.252_492_5).abs() < 1e-6, "{q}");
        assert_eq!(overflow(50.0, 30.0, 0.0, 100.0, 0.0), 0.0);
        assert_eq!(overflow(80.0, 30.0, 0.0, 100.0, 0.0), 1.0);
        assert_eq!(overflow(80.0, 30.0, f64::NAN, 100.0, 0.0), 1.0);
        // Capacity noise alone makes a full slot a coin toss.
        let q = overflow(50.0, 50.0, 0.0, 100.0, 10.0);
        assert!((q - 0.5).abs() < 1e-6, "{q}");
    }

    #[test]
    fn capacity_error_learns_the_spread() {
        let mut e = CapacityError::default();
        assert_eq!(e.relative_sd(), 0.0);
        for i in 0..400u32 {
            e.observe(100.0, if i.is_multiple_of(2) { 90.0 } else { 110.0 });
        }
        assert!((e.relative_sd() - 0.1).abs() < 1e-9, "{}", e.relative_sd());
        e.observe(0.0, 5.0);
        e.observe(100.0, f64::NAN);
        assert!(
            (e.relative_sd() - 0.1).abs() < 1e-9,
            "bad inputs are ignored"
        );
    }
}
