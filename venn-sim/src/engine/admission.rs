//! The `[admission]` part of a run: statements of work for the trace's jobs, the
//! posted-price [`AdmissionController`](venn_core::admission::AdmissionController) from
//! `venn-core`, its slot clock and capacity forecast, and the welfare figures it produces.
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
use venn_core::admission::StatementOfWork;

use super::config::SimConfig;
use super::setup::SimInput;

pub use super::admission_settings::{AdmissionMode, AdmissionSim, Misreport};

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
