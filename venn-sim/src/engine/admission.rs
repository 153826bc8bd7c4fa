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
//! Slots, realised capacity and the forecast are venn-core's [`SlotClock`] rule, the same
//! as the live manager's: the trailing one-day mean of check-ins per slot, with the
//! operator's prior (`controller.prior_per_slot`, by default the trace's mean) for the
//! slots of the first day not yet seen. Eligibility is not priced separately: one unit
//! of capacity is one device check-in, whatever jobs it could serve.
//!
//! [`SlotClock`]: venn_core::admission::SlotClock

use serde::{Deserialize, Serialize};
use venn_core::SeededRng;
use venn_core::admission::{AdmissionParams, RoundsDist, StatementOfWork, ValueFn};

use super::config::SimConfig;
use super::error::SimError;
use super::setup::SimInput;
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

/// A job's statement of work in a run with `[admission]`.
#[derive(Clone, Debug, PartialEq)]
pub struct JobStatement {
    /// What the job tells the controller.
    pub reported: StatementOfWork,
    /// Its true statement (value function and rounds distribution).
    pub truth: StatementOfWork,
    /// The rounds it really needs (drawn from the true distribution).
    pub real_rounds: u32,
}

/// Every job's statement for a run of `cfg` over `input`, in job order (empty without
/// `[admission]`). A live driver that replays the run submits the same statements.
pub fn job_statements(input: &SimInput, cfg: &SimConfig) -> Vec<JobStatement> {
    let Some(a) = &cfg.admission else {
        return Vec::new();
    };
    let rates = eligible_rates(input, cfg.window_s);
    input
        .jobs
        .iter()
        .map(|j| {
            let rate = rates.get(j.row.spec_id as usize).copied().unwrap_or(0.0);
            let (truth, real_rounds) = a.statement(&j.row, cfg.seed, rate);
            JobStatement {
                reported: a.reported(&j.row, &truth),
                truth,
                real_rounds,
            }
        })
        .collect()
}

/// The operator's prior capacity, check-ins per `slot_s`: the mean supply of the
/// replayed block of `window_s` seconds.
pub fn prior_per_slot(input: &SimInput, window_s: f64, slot_s: f64) -> f64 {
    input.trace.block(window_s).len() as f64 / window_s * slot_s
}

/// Check-ins per second of devices eligible for each spec id (index 0: all devices) in
/// the replayed block.
fn eligible_rates(input: &SimInput, window_s: f64) -> [f64; 9] {
    let mut n = [0u64; 9];
    let block = input.trace.block(window_s).len();
    n[0] = block as u64;
    for i in 0..block {
        let mask = input.devices.mask(input.devices.slot(i as u32));
        for (spec, c) in n.iter_mut().enumerate().skip(1) {
            if mask.contains(spec as u8) {
                *c += 1;
            }
        }
    }
    n.map(|c| c as f64 / window_s)
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
