//! Admission control on the wall clock: `venn-core`'s posted-price
//! [`AdmissionController`](venn_core::admission::AdmissionController) on its
//! [`SlotClock`] — the simulator's rule for slots, realised capacity and the capacity
//! forecast — fed by the live manager (switched on by
//! [`Settings::admission`](crate::settings::Settings::admission)).
//!
//! - **Check-ins** are counted towards their slot as they arrive.
//! - **Slots.** The server's 1 s ticker calls [`AdmissionState::handle_timeout`] once the
//!   clock's [`poll_timeout`](SlotClock::poll_timeout) has passed: each slot that ended
//!   is judged against the trailing one-day mean of realised capacity (the prior,
//!   `--admission-prior`, standing in for slots not yet seen; without one the mean of the
//!   judged slots, and before any is judged the most check-ins seen in one slot). Slots
//!   this process watched less than half of, and slots before any supply was seen, are
//!   not judged.
//! - **Evictions** come back as [`Settlement`](venn_core::admission::Settlement)s; the service removes those jobs from the
//!   core and marks them `evicted` in SQLite.
//! - **Durability.** Judged slots and the open slot's tally are written to SQLite
//!   (`admission_slots`), so a restart keeps the capacity history; admitted jobs are
//!   persisted by the service and restored.
//! - **Bounds.** Planning a statement costs one pass over the horizon plus its longest
//!   outcome (prices and overflow risks), one sliding-window pass per distinct outcome
//!   length, and (launch slots in the horizon) × (outcomes × value points), under the
//!   manager's lock, so [`check_statement`] caps what one statement may ask for.
//!
//! The controller's running totals ([`AdmissionStats`]) count from this process's start.

use crate::error::ServiceError;
use serde::Serialize;
use venn_core::admission::{
    AdmissionParams, AdmissionStats, SavedSlot, SlotClock, StatementOfWork,
};
use venn_core::{CoreError, Time};

/// The manager's bound on a statement the core has validated (the core also caps value
/// points and outcomes, [`venn_core::admission::MAX_POINTS`], for every driver): its
/// longest outcome (rounds × `round_s`) must end within the planning horizon — the
/// controller keeps a price and a survival probability per slot of it, so an unbounded one
/// would let one request allocate without limit.
pub fn check_statement(
    sow: &StatementOfWork,
    params: &AdmissionParams,
) -> Result<(), ServiceError> {
    let longest = sow.rounds.0.iter().map(|o| o.0).max().unwrap_or(0);
    if longest as f64 * sow.round_s > params.horizon_s {
        return Err(ServiceError::field(
            "statement.rounds",
            format!(
                "the longest outcome, {longest} rounds × {} s, must end within the admission \
                 horizon of {} s",
                sow.round_s, params.horizon_s
            ),
        ));
    }
    Ok(())
}

/// The controller on venn-core's slot clock, as the manager holds it: the clock's own
/// methods (submit, check-ins, timeouts, the controller) through `Deref`, plus what the
/// manager adds (persistence, the status report).
#[derive(Debug)]
pub struct AdmissionState {
    clock: SlotClock,
}

impl std::ops::Deref for AdmissionState {
    type Target = SlotClock;
    fn deref(&self) -> &SlotClock {
        &self.clock
    }
}

impl std::ops::DerefMut for AdmissionState {
    fn deref_mut(&mut self) -> &mut SlotClock {
        &mut self.clock
    }
}

/// Admission control as `/v1/status` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct AdmissionReport {
    /// The settings.
    pub params: AdmissionParams,
    /// The capacity forecast prices are posted against, check-ins per slot.
    pub forecast_per_slot: f64,
    /// The slot being counted now.
    pub slot: u64,
    /// Check-ins counted in it so far.
    pub slot_check_ins: u64,
    /// Admitted jobs that have not ended (held or running).
    pub active: usize,
    /// Running totals since the manager started.
    #[serde(flatten)]
    pub stats: AdmissionStats,
    /// Used over offered capacity in closed slots.
    pub utilisation: f64,
    /// Evicted over admitted jobs.
    pub eviction_rate: f64,
}

impl AdmissionState {
    /// A controller with `params` watching from `now`, its capacity history restored
    /// from `saved` (what an earlier process wrote).
    pub fn new(
        params: AdmissionParams,
        now: Time,
        saved: Vec<SavedSlot>,
    ) -> Result<Self, CoreError> {
        let mut clock = SlotClock::new(params, now)?;
        clock.restore(saved);
        Ok(AdmissionState { clock })
    }

    /// The slots to persist now (judged ones of the window, open tallies) and the first
    /// slot worth keeping.
    pub fn to_persist(&self, now: Time) -> (Vec<SavedSlot>, u64) {
        let p = self.clock.controller().params();
        let window = (p.capacity_window_s / p.slot_s).round() as u64;
        (
            self.clock.saved(now),
            self.clock.slot_of(now).saturating_sub(window + 1),
        )
    }

    /// A report for `/v1/status`; `active` is the number of admitted jobs not ended.
    pub fn report(&self, now: Time, active: usize) -> AdmissionReport {
        let stats = self.controller().stats();
        AdmissionReport {
            params: self.controller().params(),
            forecast_per_slot: self.clock.forecast(),
            slot: self.clock.slot_of(now),
            slot_check_ins: self.clock.check_ins_in(now),
            active,
            stats,
            utilisation: stats.utilisation(),
            eviction_rate: stats.eviction_rate(),
        }
    }
}
