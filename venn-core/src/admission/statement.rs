//! A job's statement of work: what finishing is worth to it over time, how many rounds it
//! expects (a distribution, since FL jobs stop on convergence), and how many devices each
//! round needs. The admission controller plans against it; the job's real run may differ.

use serde::{Deserialize, Serialize};

use crate::error::CoreError;

/// Value of completing the job as a function of the time from its submission:
/// piecewise-linear through `(seconds, value)` points, constant before the first and after
/// the last point. Completing later is never worth more.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ValueFn(pub Vec<(f64, f64)>);

impl ValueFn {
    /// Value `v` up to `soft_s`, falling linearly to 0 at `hard_s`.
    pub fn deadline(v: f64, soft_s: f64, hard_s: f64) -> Self {
        ValueFn(vec![(soft_s, v), (hard_s, 0.0)])
    }

    /// Value of completing `t` seconds after submission.
    pub fn at(&self, t: f64) -> f64 {
        let p = &self.0;
        let Some(first) = p.first() else { return 0.0 };
        if t <= first.0 {
            return first.1;
        }
        for w in p.windows(2) {
            let ((t0, v0), (t1, v1)) = (w[0], w[1]);
            if t <= t1 {
                return v0 + (v1 - v0) * (t - t0) / (t1 - t0);
            }
        }
        p[p.len() - 1].1
    }

    /// The highest value (at or before the first point).
    pub fn max_value(&self) -> f64 {
        self.0.first().map_or(0.0, |p| p.1)
    }

    fn validate(&self) -> Result<(), CoreError> {
        let p = &self.0;
        if p.is_empty() {
            return Err(CoreError::invalid(
                "statement.value",
                "needs at least one point",
            ));
        }
        if p.len() > MAX_POINTS {
            return Err(CoreError::invalid(
                "statement.value",
                format!("at most {MAX_POINTS} points"),
            ));
        }
        if p.iter()
            .any(|(t, v)| !(t.is_finite() && v.is_finite() && *t >= 0.0 && *v >= 0.0))
        {
            return Err(CoreError::invalid(
                "statement.value",
                "points must be finite, non-negative (seconds, value) pairs",
            ));
        }
        for w in p.windows(2) {
            if w[1].0 <= w[0].0 {
                return Err(CoreError::invalid(
                    "statement.value",
                    "point times must increase strictly",
                ));
            }
            if w[1].1 > w[0].1 {
                return Err(CoreError::invalid(
                    "statement.value",
                    "values must not increase with completion time",
                ));
            }
        }
        Ok(())
    }
}

/// A distribution over the number of rounds: `(rounds, probability)` pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RoundsDist(pub Vec<(u32, f64)>);

impl RoundsDist {
    /// Exactly `r` rounds.
    pub fn exactly(r: u32) -> Self {
        RoundsDist(vec![(r, 1.0)])
    }

    /// Uniform over `lo..=hi` rounds.
    pub fn uniform(lo: u32, hi: u32) -> Self {
        let n = (hi.max(lo) - lo + 1) as f64;
        RoundsDist((lo..=hi.max(lo)).map(|r| (r, 1.0 / n)).collect())
    }

    /// The same distribution with every outcome multiplied by `f` (at least one round):
    /// how a job that misreports its length would state it.
    pub fn scaled(&self, f: f64) -> Self {
        RoundsDist(
            self.0
                .iter()
                .map(|(r, p)| (((*r as f64) * f).round().max(1.0) as u32, *p))
                .collect(),
        )
    }

    /// Expected rounds.
    pub fn mean(&self) -> f64 {
        self.0.iter().map(|(r, p)| *r as f64 * p).sum()
    }

    /// Draws an outcome given a uniform number `u` in [0, 1).
    pub fn sample(&self, u: f64) -> u32 {
        let mut acc = 0.0;
        for (r, p) in &self.0 {
            acc += p;
            if u < acc {
                return *r;
            }
        }
        self.0.last().map_or(1, |x| x.0)
    }

    fn validate(&self) -> Result<(), CoreError> {
        if self.0.is_empty() {
            return Err(CoreError::invalid(
                "statement.rounds",
                "needs at least one outcome",
            ));
        }
        if self.0.len() > MAX_POINTS {
            return Err(CoreError::invalid(
                "statement.rounds",
                format!("at most {MAX_POINTS} outcomes"),
            ));
        }
        if self
            .0
            .iter()
            .any(|(r, p)| *r == 0 || !(p.is_finite() && *p >= 0.0))
        {
            return Err(CoreError::invalid(
                "statement.rounds",
                "outcomes need at least 1 round and a non-negative probability",
            ));
        }
        let total: f64 = self.0.iter().map(|x| x.1).sum();
        if (total - 1.0).abs() > 1e-6 {
            return Err(CoreError::invalid(
                "statement.rounds",
                format!("probabilities sum to {total}, not 1"),
            ));
        }
        Ok(())
    }
}

/// Most points a value function and most outcomes a rounds distribution may have: one
/// limit for every driver (planning cost grows with both, under the live manager's lock).
pub const MAX_POINTS: usize = 64;

/// What a job tells the admission controller when it arrives.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatementOfWork {
    /// Value of completion over time since submission.
    pub value: ValueFn,
    /// Number of rounds, as a distribution.
    pub rounds: RoundsDist,
    /// Devices each round needs (the job's concurrency demand).
    pub demand: u32,
    /// Expected seconds per round.
    pub round_s: f64,
    /// The latest launch the job accepts, in seconds after submission (default: the
    /// controller's horizon).
    #[serde(default)]
    pub max_wait_s: Option<f64>,
}

impl StatementOfWork {
    /// Checks every field; the error names the field.
    pub fn validate(&self) -> Result<(), CoreError> {
        self.value.validate()?;
        self.rounds.validate()?;
        if self.demand == 0 {
            return Err(CoreError::invalid("statement.demand", "must be at least 1"));
        }
        if !(self.round_s.is_finite() && self.round_s > 0.0) {
            return Err(CoreError::invalid("statement.round_s", "must be positive"));
        }
        if let Some(w) = self.max_wait_s
            && !(w.is_finite() && w >= 0.0)
        {
            return Err(CoreError::invalid(
                "statement.max_wait_s",
                "must be a finite non-negative number",
            ));
        }
        Ok(())
    }

    /// The same statement with its rounds distribution scaled by `f` (a misreport).
    pub fn misreported(&self, f: f64) -> Self {
        StatementOfWork {
            rounds: self.rounds.scaled(f),
            ..self.clone()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_interpolates_and_clamps() {
        let v = ValueFn(vec![(100.0, 10.0), (200.0, 4.0), (300.0, 0.0)]);
        assert_eq!(v.at(0.0), 10.0);
        assert_eq!(v.at(150.0), 7.0);
        assert_eq!(v.at(250.0), 2.0);
        assert_eq!(v.at(1e9), 0.0);
    }

    #[test]
    fn bad_statements_name_the_field() {
        let ok = StatementOfWork {
            value: ValueFn::deadline(5.0, 10.0, 20.0),
            rounds: RoundsDist::uniform(2, 4),
            demand: 3,
            round_s: 60.0,
            max_wait_s: None,
        };
        ok.validate().unwrap();
        let field = |s: StatementOfWork| match s.validate() {
            Err(CoreError::Invalid { field, .. }) => field,
            other => panic!("expected an error, got {other:?}"),
        };
        let rising = StatementOfWork {
            value: ValueFn(vec![(1.0, 1.0), (2.0, 3.0)]),
            ..ok.clone()
        };
        assert_eq!(field(rising), "statement.value");
        let unsorted = StatementOfWork {
            value: ValueFn(vec![(2.0, 1.0), (1.0, 0.0)]),
            ..ok.clone()
        };
        assert_eq!(field(unsorted), "statement.value");
        let mass = StatementOfWork {
            rounds: RoundsDist(vec![(1, 0.5)]),
            ..ok.clone()
        };
        assert_eq!(field(mass), "statement.rounds");
        let zero = StatementOfWork {
            demand: 0,
            ..ok.clone()
        };
        assert_eq!(field(zero), "statement.demand");
        let slow = StatementOfWork {
            round_s: f64::NAN,
            ..ok
        };
        assert_eq!(field(slow), "statement.round_s");
    }

    #[test]
    fn sampling_follows_the_distribution() {
        let d = RoundsDist(vec![(1, 0.25), (5, 0.75)]);
        assert_eq!(d.sample(0.1), 1);
        assert_eq!(d.sample(0.3), 5);
        assert_eq!(d.mean(), 4.0);
        assert_eq!(d.scaled(0.5).0, vec![(1, 0.25), (3, 0.75)]);
    }
}
