//! The `[admission]` settings of a simulation ([`AdmissionSim`]) and how each job's
//! statement of work is drawn from them: a leaf beside `config.rs`, which holds them, and
//! `admission.rs`, which runs them (and re-exports them).

use serde::{Deserialize, Serialize};
use venn_core::SeededRng;
use venn_core::admission::{AdmissionParams, RoundsDist, StatementOfWork, ValueFn};
use venn_traces::JobRow;

use super::error::SimError;

/// How jobs are admitted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AdmissionMode {
    /// The posted-price controller decides.
    #[default]
    PostedPrice,
    /// Every job runs at once (the welfare baseline with the same value functions).
    AdmitAll,
}

/// One job misreporting its rounds distribution (scaled by `factor`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Misreport {
    /// Trace index of the job.
    pub job: u32,
    /// Factor applied to every stated outcome.
    pub factor: f64,
}

/// Settings of admission in a simulation (`[admission]` in the TOML config).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdmissionSim {
    /// Who decides admission.
    pub mode: AdmissionMode,
    /// The controller's settings.
    pub controller: AdmissionParams,
    /// Relative spread of each job's rounds distribution.
    pub rounds_spread: f64,
    /// Range of value per device-round (log-uniform).
    pub value_density: [f64; 2],
    /// Value stays flat for this many expected lengths.
    pub patience: f64,
    /// Share of its eligible supply a job expects when it states its seconds per round.
    pub supply_share: f64,
    /// One job that misreports (the incentive experiment).
    pub misreport: Option<Misreport>,
}

impl Default for AdmissionSim {
    fn default() -> Self {
        AdmissionSim {
            mode: AdmissionMode::PostedPrice,
            controller: AdmissionParams::default(),
            rounds_spread: 0.5,
            value_density: [0.05, 1.0],
            patience: 1.5,
            supply_share: 0.1,
            misreport: None,
        }
    }
}

impl AdmissionSim {
    /// Checks the settings; the message names the key.
    pub fn validate(&self) -> Result<(), SimError> {
        self.controller
            .validate()
            .map_err(|e| SimError::Config(e.to_string()))?;
        let bad = |what: &str| Err(SimError::Config(format!("admission.{what}")));
        if !(self.rounds_spread.is_finite() && (0.0..1.0).contains(&self.rounds_spread)) {
            return bad("rounds_spread must be in [0, 1)");
        }
        let [lo, hi] = self.value_density;
        if !(lo.is_finite() && hi.is_finite() && lo > 0.0 && hi >= lo) {
            return bad("value_density must be [lo, hi] with 0 < lo ≤ hi");
        }
        if !(self.patience.is_finite() && self.patience > 0.0) {
            return bad("patience must be positive");
        }
        if !(self.supply_share.is_finite() && self.supply_share > 0.0 && self.supply_share <= 1.0) {
            return bad("supply_share must be in (0, 1]");
        }
        if let Some(m) = self.misreport
            && !(m.factor.is_finite() && m.factor > 0.0)
        {
            return bad("misreport.factor must be positive");
        }
        Ok(())
    }

    /// The job's true statement and its real number of rounds, for run seed `seed`;
    /// `eligible_rate` is the check-in rate (per second) of devices the job may use.
    pub fn statement(&self, row: &JobRow, seed: u64, eligible_rate: f64) -> (StatementOfWork, u32) {
        let mut rng = SeededRng::new(
            seed ^ (u64::from(row.idx) + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xad31,
        );
        let r = f64::from(row.rounds);
        let (lo, hi) = (
            r * (1.0 - self.rounds_spread),
            r * (1.0 + self.rounds_spread),
        );
        let mut outcomes: Vec<(u32, f64)> = Vec::new();
        for k in 0..5 {
            let v = (lo + (hi - lo) * k as f64 / 4.0).round().max(1.0) as u32;
            match outcomes.iter_mut().find(|o| o.0 == v) {
                Some(o) => o.1 += 0.2,
                None => outcomes.push((v, 0.2)),
            }
        }
        let rounds = RoundsDist(outcomes);
        let real = rounds.sample(rng.f64());
        let [dlo, dhi] = self.value_density;
        let density = dlo * (dhi / dlo).powf(rng.f64());
        let wait = f64::from(row.demand) / (self.supply_share * eligible_rate).max(1e-9);
        let round_s = (wait + row.workload_s + row.comm_s).min(row.deadline_s);
        let expected_len = rounds.mean() * round_s;
        let worth = density * f64::from(row.demand) * rounds.mean();
        let soft = self.patience * expected_len;
        let sow = StatementOfWork {
            value: ValueFn::deadline(worth, soft, 2.0 * soft),
            rounds,
            demand: row.demand,
            round_s,
            max_wait_s: None,
        };
        (sow, real)
    }

    /// What the job tells the controller: the truth, or the misreport if it is the one.
    pub fn reported(&self, row: &JobRow, truth: &StatementOfWork) -> StatementOfWork {
        match self.misreport {
            Some(m) if m.job == row.idx => truth.misreported(m.factor),
            _ => truth.clone(),
        }
    }
}
