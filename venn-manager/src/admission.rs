//! Admission control on the wall clock: `venn-core`'s posted-price
//! [`AdmissionController`] fed by the live manager (switched on by
//! [`Settings::admission`](crate::settings::Settings::admission)).
//!
//! - **Forecast.** The capacity the controller prices against is the check-in rate of all
//!   devices in the supply estimator's window times the slot length
//!   ([`CapacityForecast::Flat`]; until a whole slot has been observed, the check-ins seen
//!   so far); the server's 1 s ticker refreshes it.
//! - **Realised capacity.** When the ticker sees a slot boundary it closes each slot that
//!   ended with [`AdmissionController::on_slot`]`(slot end, forecast)`: the supply
//!   estimator's smoothed rate, as the simulator judges against a trailing one-day mean,
//!   so a quiet night slot does not evict jobs whose usage is stated as a rate. Slots this
//!   process watched less than half of (it started late in them, or was down) and slots
//!   before any supply was seen are not judged. Check-ins are still counted per slot for
//!   `/v1/status`. The controller learns its capacity error from the forecast in force
//!   when each slot began against the one the slot is judged by, and widens plans'
//!   eviction risk by it.
//! - **Evictions** come back as [`Settlement`]s; the service removes those jobs from the
//!   core and marks them `evicted` in SQLite.
//! - **Bounds.** Planning a statement costs one pass over the horizon plus its longest
//!   outcome (prices and overflow risks), one sliding-window pass per distinct outcome
//!   length, and (launch slots in the horizon) × (outcomes × value points), under the
//!   manager's lock, so [`check_statement`] caps what one statement may ask for.
//!
//! The controller's running totals ([`AdmissionStats`]) count from this process's start;
//! admitted jobs themselves survive restarts (the service persists each [`AdmittedJob`]
//! and restores it).

use crate::error::ServiceError;
use serde::Serialize;
use std::collections::BTreeMap;
use venn_core::admission::{
    AdmissionController, AdmissionParams, AdmissionStats, AdmittedJob, CapacityForecast,
    Settlement, StatementOfWork,
};
use venn_core::{CoreError, ResourceManager, Time};

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

/// Expected device check-ins per slot: the check-in rate of every device in the supply
/// estimator's window times `slot_s` (0 before any device has checked in). Until a whole
/// slot has been observed it is the check-ins seen so far rather than a rate
/// extrapolated from the first seconds: devices come in waves, and over-admitting in a
/// young manager's first minutes would end in evictions.
pub fn supply_forecast(core: &ResourceManager, now: Time, slot_s: f64) -> f64 {
    let supply = core.supply();
    let seen: u64 = supply.classes().iter().map(|c| c.in_window).sum();
    let span = supply
        .effective_window(now)
        .max(slot_s.min(supply.config().window_s));
    seen as f64 / span * slot_s
}

/// The controller and the slot bookkeeping around it.
#[derive(Debug)]
pub struct AdmissionState {
    ctl: AdmissionController,
    /// The earliest slot not yet closed.
    open_slot: u64,
    /// Check-ins counted per slot not yet closed.
    seen: BTreeMap<u64, u64>,
    /// When this process started counting check-ins.
    observed_from: Time,
    /// The forecast last handed to the controller, check-ins per slot.
    forecast: f64,
    /// Whether any supply has been seen since start (slots before are not judged).
    supply_seen: bool,
    /// The forecast in force when each open slot began — what its plans were priced
    /// against — so the controller learns how far realised capacity strays from it.
    planned_with: BTreeMap<u64, f64>,
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
    /// A controller with `params`, its forecast taken from `core`'s supply estimate.
    pub fn new(
        params: AdmissionParams,
        core: &ResourceManager,
        now: Time,
    ) -> Result<Self, CoreError> {
        let forecast = supply_forecast(core, now, params.slot_s);
        let ctl = AdmissionController::new(params, CapacityForecast::Flat(forecast))?;
        Ok(AdmissionState {
            open_slot: ctl.slot_of(now),
            ctl,
            seen: BTreeMap::new(),
            observed_from: now,
            forecast,
            supply_seen: forecast > 0.0,
            planned_with: BTreeMap::new(),
        })
    }

    /// The controller.
    pub fn controller(&self) -> &AdmissionController {
        &self.ctl
    }

    /// The controller, to submit, restore, finish or withdraw jobs.
    pub fn controller_mut(&mut self) -> &mut AdmissionController {
        &mut self.ctl
    }

    /// Counts one device check-in at `now` towards its slot's realised capacity.
    pub fn count_check_in(&mut self, now: Time) {
        // A clock stepped backwards counts into the open slot rather than a closed one.
        let slot = self.ctl.slot_of(now).max(self.open_slot);
        *self.seen.entry(slot).or_default() += 1;
    }

    /// Re-reads the forecast from `core`'s supply estimate; returns it.
    pub fn refresh_forecast(&mut self, core: &ResourceManager, now: Time) -> f64 {
        self.forecast = supply_forecast(core, now, self.ctl.params().slot_s);
        self.supply_seen |= self.forecast > 0.0;
        self.ctl.set_forecast(CapacityForecast::Flat(self.forecast));
        let slot = self.ctl.slot_of(now).max(self.open_slot);
        self.planned_with.entry(slot).or_insert(self.forecast);
        self.forecast
    }

    /// Closes every slot that ended by `now` and returns the jobs evicted (last admitted
    /// first). A slot is judged against the smoothed supply (the forecast: the supply
    /// estimator's window rate × `slot_s`), the same trailing mean the simulator uses —
    /// a quiet slot at night is no overload for jobs whose stated usage is a rate over
    /// hours — and only if this process watched at least half of it and has seen any
    /// supply, so a restart late in a slot or before devices return evicts nobody.
    pub fn close_slots(&mut self, now: Time) -> Vec<Settlement> {
        let slot_s = self.ctl.params().slot_s;
        let current = self.ctl.slot_of(now);
        // A stalled process catches up on at most a day of slots.
        let day = (86_400.0 / slot_s).ceil() as u64;
        self.open_slot = self.open_slot.max(current.saturating_sub(day));
        let mut evicted = Vec::new();
        while self.open_slot < current {
            let slot = self.open_slot;
            self.seen.remove(&slot);
            let end = (slot + 1) as f64 * slot_s;
            let observed = end - (slot as f64 * slot_s).max(self.observed_from.secs());
            let planned = self.planned_with.remove(&slot).unwrap_or(self.forecast);
            if observed >= 0.5 * slot_s && self.supply_seen {
                // The slot is judged against today's smoothed supply; the error learnt
                // is between that and the forecast its plans were priced against.
                self.ctl.set_forecast(CapacityForecast::Flat(planned));
                let out = self.ctl.on_slot(Time(end), self.forecast);
                self.ctl.set_forecast(CapacityForecast::Flat(self.forecast));
                tracing::debug!(
                    slot,
                    capacity = self.forecast,
                    evicted = out.len(),
                    "admission slot closed"
                );
                evicted.extend(out);
            }
            self.open_slot = slot + 1;
        }
        // Slots skipped by a stalled process leave no forecasts behind.
        self.planned_with = self.planned_with.split_off(&self.open_slot);
        evicted
    }

    /// The admitted job `job`, if the controller holds it.
    pub fn admitted(&self, job: u64) -> Option<&AdmittedJob> {
        self.ctl.admitted(venn_core::JobId(job))
    }

    /// A report for `/v1/status`; `active` is the number of admitted jobs not ended.
    pub fn report(&self, now: Time, active: usize) -> AdmissionReport {
        let stats = self.ctl.stats();
        let slot = self.ctl.slot_of(now);
        AdmissionReport {
            params: self.ctl.params(),
            forecast_per_slot: self.forecast,
            slot,
            slot_check_ins: self.seen.get(&slot).copied().unwrap_or(0),
            active,
            stats,
            utilisation: stats.utilisation(),
            eviction_rate: stats.eviction_rate(),
        }
    }
}
