//! The `[admission]` part of a run: statements of work for the trace's jobs, the
//! posted-price [`AdmissionController`] from `venn-core`, its slot clock and capacity
//! forecast, and the welfare figures it produces.
//!
//! Each job gets a statement built from its trace row with a seeded generator that
//! depends only on the run's seed and the job, so every policy and every misreport sees
//! the same jobs:
//! - **rounds**: five equally likely outcomes spread evenly over `[R(1−s), R(1+s)]`,
//!   `R` the trace's rounds and `s = rounds_spread`; the job's *real* number of rounds is
//!   drawn from that distribution (the same draw whatever the job reports);
//! - **demand** is the trace's; **round_s** is how long a round takes when the job gets
//!   `supply_share` of the check-ins of the devices it is eligible for, plus its nominal
//!   task time (`demand / (share × eligible rate) + workload + comm`), at most its
//!   deadline — so a job's stated usage never exceeds what its devices can give;
//! - **value**: `density × demand × E[rounds]`, the density log-uniform in
//!   `value_density`; flat until `patience ×` the expected length, then falling linearly
//!   to 0 at twice that.
//!
//! Capacity is the trailing one-day mean of check-ins per slot (the operator's prior, the
//! trace's mean, fills the slots of the first day not yet seen): FL jobs run for hours to days at an
//! average rate, so the diurnal swing inside a day is not an overload — a job makes up
//! at noon what it loses at night. The same figure is the forecast for every future slot
//! and the realised capacity the controller evicts against. Eligibility is not priced
//! separately: one unit of capacity is one device check-in, whatever jobs it could serve.

use serde::{Deserialize, Serialize};
use venn_core::SeededRng;
use venn_core::admission::{
    AdmissionController, AdmissionParams, AdmissionStats, CapacityForecast, RoundsDist,
    StatementOfWork, ValueFn,
};

use super::error::SimError;
use venn_traces::JobRow;

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

/// The controller plus its slot clock and capacity estimate, for one run.
#[derive(Debug)]
pub struct AdmissionRun {
    /// The controller.
    pub ctl: AdmissionController,
    /// Check-ins seen in the current slot.
    pub slot_check_ins: u64,
    /// Check-ins of the last day's slots (a ring).
    day: Vec<f64>,
    slots_seen: usize,
    prior: f64,
}

impl AdmissionRun {
    /// A fresh run; `prior_per_slot` is the capacity assumed before a slot is seen.
    pub fn new(cfg: &AdmissionSim, prior_per_slot: f64) -> Result<Self, SimError> {
        let per_day = ((86_400.0 / cfg.controller.slot_s).round() as usize).max(1);
        let ctl = AdmissionController::new(cfg.controller, CapacityForecast::Flat(prior_per_slot))
            .map_err(|e| SimError::Config(e.to_string()))?;
        Ok(AdmissionRun {
            ctl,
            slot_check_ins: 0,
            day: vec![0.0; per_day],
            slots_seen: 0,
            prior: prior_per_slot,
        })
    }

    /// Trailing one-day mean of check-ins per slot; during the first day the prior
    /// stands in for the slots not yet seen, so a night start is not mistaken for the
    /// day's supply.
    pub fn capacity(&self) -> f64 {
        let len = self.day.len();
        let n = self.slots_seen.min(len);
        let seen: f64 = self.day.iter().take(n).sum();
        (seen + self.prior * (len - n) as f64) / len as f64
    }

    /// Closes the slot that ends at `now`: updates the capacity estimate and the forecast
    /// and returns the jobs the controller evicts.
    pub fn close_slot(&mut self, now: f64) -> Vec<venn_core::admission::Settlement> {
        let len = self.day.len();
        self.day[self.slots_seen % len] = self.slot_check_ins as f64;
        self.slot_check_ins = 0;
        self.slots_seen += 1;
        let cap = self.capacity();
        let evicted = self.ctl.on_slot(venn_core::Time(now), cap);
        self.ctl.set_forecast(CapacityForecast::Flat(cap));
        evicted
    }

    /// The controller's totals.
    pub fn stats(&self) -> AdmissionStats {
        self.ctl.stats()
    }
}

/// Admission figures of one run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AdmissionSummary {
    /// Who decided.
    pub mode: AdmissionMode,
    /// Jobs that arrived.
    pub submitted: u64,
    /// Jobs admitted.
    pub admitted: u64,
    /// Jobs declined.
    pub declined: u64,
    /// Admitted jobs evicted.
    pub evicted: u64,
    /// Admitted jobs that completed by the horizon.
    pub completed: u64,
    /// Total value of completed jobs at their completion times (welfare).
    pub welfare: f64,
    /// Total payments.
    pub revenue: f64,
    /// Evicted over admitted jobs.
    pub eviction_rate: f64,
    /// The controller's utilisation: planned usage of running jobs over realised
    /// capacity (posted-price only).
    pub planned_utilisation: f64,
    /// Device utilisation: assigned check-ins over all check-ins.
    pub device_utilisation: f64,
}
