//! The admission slot clock and capacity forecast: one rule for every driver.
//!
//! [`SlotClock`] owns the [`AdmissionController`] and the time rules around it, so the
//! simulator and the live manager admit, price and evict alike. In the style of
//! quinn-proto's connection it owns its timer: the driver feeds it device check-ins
//! ([`SlotClock::on_check_in`]), asks when the open slot ends
//! ([`SlotClock::poll_timeout`]) and, once that time has come, lets it close every slot
//! that ended ([`SlotClock::handle_timeout`]), acting on the evictions it returns.
//!
//! - **Realised capacity of a slot**: the check-ins counted in it, scaled up to the whole
//!   slot when the driver watched only part of it (`check-ins × slot_s / watched_s`: a
//!   manager restarted mid-slot). A slot watched for less than half its length, or ended
//!   before any supply was known (no prior and no check-in yet), is not judged: a restart
//!   late in a slot, or a manager started before its devices, evicts nobody.
//! - **Capacity** (what a closed slot is judged against, and the forecast prices are
//!   posted against until the next close): the mean realised capacity of the judged slots
//!   of the trailing window ([`AdmissionParams::capacity_window_s`], one day by default).
//!   With a prior ([`AdmissionParams::prior_per_slot`]) the window's slots not yet judged
//!   count at the prior; without one the mean is over the judged slots. FL jobs run for
//!   hours to days at an average rate, so a quiet night slot is no overload: a job makes
//!   up at noon what it loses at night.
//! - **Before any slot is judged** the forecast is the prior, or else the most check-ins
//!   seen in one slot so far: devices come in waves, and a rate extrapolated from a young
//!   manager's first seconds would over-admit.
//! - **Catch-up**: a driver that stalled closes at most one window of slots at once.
//!
//! Slot tallies can be persisted and restored ([`SlotClock::saved`],
//! [`SlotClock::restore`]), so a restarted manager keeps its capacity history.

use std::collections::{BTreeMap, VecDeque};

use serde::{Deserialize, Serialize};

use super::controller::{Admission, AdmissionController, AdmissionParams, Settlement};
use super::prices::CapacityForecast;
use super::statement::StatementOfWork;
use crate::error::CoreError;
use crate::ids::JobId;
use crate::time::Time;

/// What the clock knows of an open slot: check-ins counted, and seconds watched by an
/// earlier process (restored).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct SlotTally {
    check_ins: u64,
    watched_s: f64,
}

/// A slot the clock closed and judged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct JudgedSlot {
    /// The slot (index of `[slot × slot_s, (slot + 1) × slot_s)`).
    pub slot: u64,
    /// Its realised capacity, check-ins per slot.
    pub realised: f64,
    /// The capacity it was judged against (the window's mean with it).
    pub capacity: f64,
}

/// What [`SlotClock::handle_timeout`] did.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlotsClosed {
    /// The slots judged, in order.
    pub judged: Vec<JudgedSlot>,
    /// Jobs evicted, last admitted first; the driver removes them.
    pub evicted: Vec<Settlement>,
}

/// The admission controller on its slot clock (see the [module docs](self)).
#[derive(Clone, Debug)]
pub struct SlotClock {
    ctl: AdmissionController,
    slot_s: f64,
    /// Slots in the capacity window.
    window: u64,
    prior: Option<f64>,
    /// The earliest slot not yet closed.
    open_slot: u64,
    /// Tallies of slots not yet closed (restored ones included).
    open: BTreeMap<u64, SlotTally>,
    /// From when this clock watches (its driver's start).
    watching_from: Time,
    /// Whether supply is known: a prior, or any check-in counted or restored.
    supply_seen: bool,
    /// Most check-ins seen in one slot before any was judged (the warm-up forecast).
    peak: u64,
    /// Judged slots of the window: (slot, realised capacity), ascending.
    judged: VecDeque<(u64, f64)>,
}

impl SlotClock {
    /// A clock for a controller with `params`, watching from `now`.
    pub fn new(params: AdmissionParams, now: Time) -> Result<Self, CoreError> {
        let ctl = AdmissionController::new(params, CapacityForecast::Flat(0.0))?;
        let window = ((params.capacity_window_s / params.slot_s).round() as u64).max(1);
        let mut c = SlotClock {
            slot_s: params.slot_s,
            window,
            prior: params.prior_per_slot,
            open_slot: ctl.slot_of(now),
            open: BTreeMap::new(),
            watching_from: now,
            supply_seen: params.prior_per_slot.is_some(),
            peak: 0,
            judged: VecDeque::new(),
            ctl,
        };
        c.sync();
        Ok(c)
    }

    /// The controller.
    pub fn controller(&self) -> &AdmissionController {
        &self.ctl
    }

    /// The controller, to restore, finish or withdraw jobs. Submit through
    /// [`SlotClock::submit`], which posts prices against the current forecast first.
    pub fn controller_mut(&mut self) -> &mut AdmissionController {
        &mut self.ctl
    }

    /// Plans `sow` for `job` at `now` against the current forecast and admits or
    /// declines it ([`AdmissionController::submit`]).
    pub fn submit(
        &mut self,
        job: JobId,
        sow: &StatementOfWork,
        now: Time,
    ) -> Result<Admission, CoreError> {
        self.sync();
        self.ctl.submit(job, sow, now)
    }

    /// Counts a device check-in at `now` towards its slot. A clock stepped backwards
    /// counts into the open slot rather than a closed one.
    pub fn on_check_in(&mut self, now: Time) {
        let slot = self.ctl.slot_of(now).max(self.open_slot);
        let t = self.open.entry(slot).or_default();
        t.check_ins += 1;
        if self.judged.is_empty() {
            self.peak = self.peak.max(t.check_ins);
        }
        self.supply_seen = true;
    }

    /// When the open slot ends: call [`SlotClock::handle_timeout`] then (or later).
    pub fn poll_timeout(&self) -> Time {
        Time((self.open_slot + 1) as f64 * self.slot_s)
    }

    /// Closes every slot that ended by `now` (at most one capacity window of them):
    /// judges each watched one against the window's capacity and returns the jobs the
    /// controller evicts. Prices are then posted against the new capacity.
    pub fn handle_timeout(&mut self, now: Time) -> SlotsClosed {
        let current = self.ctl.slot_of(now);
        let mut out = SlotsClosed::default();
        if current > self.open_slot + self.window {
            self.open_slot = current - self.window;
            self.open = self.open.split_off(&self.open_slot);
        }
        while self.open_slot < current {
            let slot = self.open_slot;
            let mut tally = self.open.remove(&slot).unwrap_or_default();
            let start = slot as f64 * self.slot_s;
            let end = start + self.slot_s;
            tally.watched_s += (end - start.max(self.watching_from.secs())).max(0.0);
            self.open_slot = slot + 1;
            if tally.watched_s.min(self.slot_s) < 0.5 * self.slot_s || !self.supply_seen {
                continue;
            }
            let realised = tally.check_ins as f64 * self.slot_s / tally.watched_s.min(self.slot_s);
            self.judged.push_back((slot, realised));
            let capacity = self.capacity();
            // The controller learns its capacity error from the forecast these slots'
            // prices were posted against (still set) and the capacity judged now.
            out.evicted.extend(self.ctl.on_slot(Time(end), capacity));
            self.ctl.set_forecast(CapacityForecast::Flat(capacity));
            out.judged.push(JudgedSlot {
                slot,
                realised,
                capacity,
            });
        }
        self.sync();
        out
    }

    /// The capacity forecast now, check-ins per slot (see the [module docs](self)).
    pub fn forecast(&self) -> f64 {
        if self.judged.is_empty() {
            return self.prior.unwrap_or(self.peak as f64);
        }
        self.capacity()
    }

    /// The window's mean over the judged slots, the prior standing in for the rest.
    fn capacity(&self) -> f64 {
        let from = self.open_slot.saturating_sub(self.window);
        let in_window = self.judged.iter().filter(|(s, _)| *s >= from);
        let (n, sum) = in_window.fold((0u64, 0.0), |(n, sum), (_, c)| (n + 1, sum + c));
        match self.prior {
            Some(p) => (sum + p * (self.window - n.min(self.window)) as f64) / self.window as f64,
            None if n > 0 => sum / n as f64,
            None => self.peak as f64,
        }
    }

    /// Posts prices against the current forecast and forgets judged slots that left the
    /// window.
    fn sync(&mut self) {
        let from = self.open_slot.saturating_sub(self.window);
        while self.judged.front().is_some_and(|(s, _)| *s < from) {
            self.judged.pop_front();
        }
        let f = self.forecast();
        self.ctl.set_forecast(CapacityForecast::Flat(f));
    }

    /// The slot containing `t`.
    pub fn slot_of(&self, t: Time) -> u64 {
        self.ctl.slot_of(t)
    }

    /// Check-ins counted so far in `t`'s slot (if it is not closed).
    pub fn check_ins_in(&self, t: Time) -> u64 {
        self.open.get(&self.slot_of(t)).map_or(0, |s| s.check_ins)
    }

    /// What to persist so that a restarted driver keeps its history: the judged slots of
    /// the window (their realised capacity), and the open slots' tallies as watched until
    /// `now`.
    pub fn saved(&self, now: Time) -> Vec<SavedSlot> {
        let judged = self.judged.iter().map(|&(slot, c)| SavedSlot {
            slot,
            check_ins: c,
            watched_s: self.slot_s,
            judged: true,
        });
        let open = self.open.iter().map(|(&slot, t)| {
            let start = slot as f64 * self.slot_s;
            let end = now.secs().min(start + self.slot_s);
            let watched = (end - start.max(self.watching_from.secs())).max(0.0);
            SavedSlot {
                slot,
                check_ins: t.check_ins as f64,
                watched_s: t.watched_s + watched,
                judged: false,
            }
        });
        judged.chain(open).collect()
    }

    /// Restores persisted slots (from [`SlotClock::saved`]) into a fresh clock: judged
    /// ones within the window rejoin the capacity mean; open ones still open here add
    /// what the previous process counted and watched to this clock's tallies. An open
    /// slot that ended while the driver was down is not judged (this clock starts past
    /// it); it only tells that supply was seen.
    pub fn restore(&mut self, slots: impl IntoIterator<Item = SavedSlot>) {
        let from = self.open_slot.saturating_sub(self.window);
        let mut judged: Vec<(u64, f64)> = self.judged.drain(..).collect();
        for s in slots {
            if s.slot < from || !(s.check_ins.is_finite() && s.watched_s.is_finite()) {
                continue;
            }
            let count = s.check_ins.max(0.0);
            if s.judged && s.slot < self.open_slot {
                judged.push((s.slot, count));
            } else if !s.judged && s.slot >= self.open_slot {
                let open = self.open.entry(s.slot).or_default();
                open.check_ins += count.round() as u64;
                open.watched_s += s.watched_s.clamp(0.0, self.slot_s);
            }
            if judged.is_empty() {
                self.peak = self.peak.max(count.round() as u64);
            }
            self.supply_seen |= count > 0.0;
        }
        judged.sort_by_key(|j| j.0);
        judged.dedup_by_key(|j| j.0);
        self.judged = judged.into();
        self.sync();
    }
}

/// One slot as a driver persists it ([`SlotClock::saved`], [`SlotClock::restore`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SavedSlot {
    /// The slot.
    pub slot: u64,
    /// Judged: its realised capacity; open: the check-ins counted so far.
    pub check_ins: f64,
    /// Seconds of it watched.
    pub watched_s: f64,
    /// Whether it was judged (closed), or still open.
    pub judged: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(prior: Option<f64>) -> AdmissionParams {
        AdmissionParams {
            slot_s: 60.0,
            horizon_s: 3_600.0,
            epsilon: 0.0,
            capacity_window_s: 180.0,
            prior_per_slot: prior,
            ..AdmissionParams::default()
        }
    }

    fn check_ins(c: &mut SlotClock, at: f64, n: u64) {
        for _ in 0..n {
            c.on_check_in(Time(at));
        }
    }

    #[test]
    fn the_window_mean_with_a_prior_for_slots_not_yet_seen() {
        let mut c = SlotClock::new(params(Some(90.0)), Time(0.0)).unwrap();
        assert_eq!(c.forecast(), 90.0);
        assert_eq!(c.poll_timeout(), Time(60.0));
        check_ins(&mut c, 10.0, 30);
        // Not yet closed: the forecast stays until the clock closes the slot.
        assert!(c.handle_timeout(Time(59.0)).judged.is_empty());
        let out = c.handle_timeout(Time(60.0));
        assert_eq!(out.judged.len(), 1);
        // (30 + 2 × 90) / 3
        assert_eq!(out.judged[0].capacity, 70.0);
        assert_eq!(c.forecast(), 70.0);
        assert_eq!(c.poll_timeout(), Time(120.0));
        check_ins(&mut c, 61.0, 60);
        check_ins(&mut c, 150.0, 0);
        check_ins(&mut c, 190.0, 120);
        // Slots 1, 2 close at 200 s: (30 + 60 + 0) / 3, then slot 0 leaves the window.
        let out = c.handle_timeout(Time(200.0));
        let caps: Vec<f64> = out.judged.iter().map(|j| j.capacity).collect();
        assert_eq!(caps, vec![60.0, 30.0]);
        let out = c.handle_timeout(Time(240.0));
        assert_eq!(out.judged[0].capacity, 60.0, "(60 + 0 + 120) / 3");
    }

    #[test]
    fn without_a_prior_the_peak_slot_until_one_is_judged_then_the_judged_mean() {
        let mut c = SlotClock::new(params(None), Time(30.0)).unwrap();
        assert_eq!(c.forecast(), 0.0);
        check_ins(&mut c, 31.0, 40);
        assert_eq!(c.forecast(), 40.0);
        // Slot 0 was watched for 30 s of 60: judged, scaled to the whole slot.
        let out = c.handle_timeout(Time(60.0));
        assert_eq!(out.judged[0].realised, 80.0);
        assert_eq!(c.forecast(), 80.0);
        check_ins(&mut c, 70.0, 20);
        c.handle_timeout(Time(120.0));
        assert_eq!(c.forecast(), 50.0);
    }

    #[test]
    fn slots_watched_less_than_half_or_before_any_supply_are_not_judged() {
        let mut c = SlotClock::new(params(None), Time(40.0)).unwrap();
        check_ins(&mut c, 41.0, 10);
        assert!(c.handle_timeout(Time(60.0)).judged.is_empty());
        let mut c = SlotClock::new(params(None), Time(0.0)).unwrap();
        assert!(c.handle_timeout(Time(120.0)).judged.is_empty());
        check_ins(&mut c, 121.0, 5);
        assert_eq!(c.handle_timeout(Time(180.0)).judged.len(), 1);
    }

    #[test]
    fn a_stalled_driver_catches_up_on_one_window_at_most() {
        let mut c = SlotClock::new(params(Some(10.0)), Time(0.0)).unwrap();
        let out = c.handle_timeout(Time(6_000.0));
        assert_eq!(out.judged.len(), 3);
        assert_eq!(out.judged[0].slot, 97);
        assert_eq!(c.poll_timeout(), Time(6_060.0));
    }

    #[test]
    fn a_restored_clock_keeps_its_history_and_its_open_slot() {
        let mut a = SlotClock::new(params(None), Time(0.0)).unwrap();
        check_ins(&mut a, 1.0, 30);
        a.handle_timeout(Time(60.0));
        check_ins(&mut a, 61.0, 12);
        let saved = a.saved(Time(90.0));
        assert_eq!(saved.len(), 2);
        // Back at 90 s: 30 s of slot 1 were watched before, 30 s are watched now.
        let mut b = SlotClock::new(params(None), Time(90.0)).unwrap();
        b.restore(saved);
        assert_eq!(b.forecast(), 30.0);
        check_ins(&mut b, 100.0, 8);
        let out = b.handle_timeout(Time(120.0));
        assert_eq!(out.judged[0].realised, 20.0);
        assert_eq!(out.judged[0].capacity, 25.0);
    }

    #[test]
    fn a_short_slot_evicts_through_the_clock() {
        let mut c = SlotClock::new(params(Some(100.0)), Time(0.0)).unwrap();
        let sow = StatementOfWork {
            value: super::super::ValueFn::deadline(1_000.0, 600.0, 1_200.0),
            rounds: super::super::RoundsDist(vec![(10, 1.0)]),
            demand: 80,
            round_s: 60.0,
            max_wait_s: None,
        };
        assert!(matches!(
            c.submit(JobId(1), &sow, Time(0.0)).unwrap(),
            Admission::Admitted { .. }
        ));
        check_ins(&mut c, 10.0, 10);
        // (10 + 2 × 100) / 3 = 70 < 80 in use.
        let out = c.handle_timeout(Time(60.0));
        assert_eq!(out.evicted.len(), 1);
        assert_eq!(out.evicted[0].job, JobId(1));
    }
}
