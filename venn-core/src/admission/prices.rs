//! Posted prices per time slot. A slot's price rises exponentially with the expected
//! device usage already committed to it, relative to the *planned* capacity
//! C' = C·(1 − ε/10):
//!
//! p_t = p_min · (p_max / p_min)^(y_t / C'_t)
//!
//! where y_t is the expected usage of the plans admitted so far. This is the exponential
//! posted-price rule of online packing (Bartal, Gonen & Nisan, TARK 2003; Buchbinder &
//! Naor, "The design of competitive online algorithms via a primal–dual approach", 2009):
//! an empty slot costs p_min, a slot filled to C' costs p_max, so a job worth at most
//! p_max per unit of usage never buys past C', and the welfare lost to early cheap sales
//! is at most a factor O(log(p_max/p_min)). Prices depend only on plans admitted *before*
//! a job arrives, which is what makes them posted (and the mechanism truthful).
//!
//! Beside the expected usage y_t the book keeps its variance (committed plans run a slot
//! or not independently), from which the controller reads a plan's eviction risk.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Device supply the controller expects per slot (check-ins of eligible devices).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapacityForecast {
    /// The same capacity in every slot.
    Flat(f64),
    /// A repeating profile (e.g. one day of slots), indexed by absolute slot modulo length.
    Periodic(Vec<f64>),
}

impl CapacityForecast {
    /// Expected capacity of absolute slot `slot`.
    pub fn at(&self, slot: u64) -> f64 {
        match self {
            CapacityForecast::Flat(c) => *c,
            CapacityForecast::Periodic(v) if v.is_empty() => 0.0,
            CapacityForecast::Periodic(v) => v[(slot % v.len() as u64) as usize],
        }
    }
}

/// Committed expected usage (and its variance) per slot and the prices it implies.
#[derive(Clone, Debug)]
pub struct PriceBook {
    price_min: f64,
    price_max: f64,
    slack: f64,
    forecast: CapacityForecast,
    /// Absolute index of `committed[0]`.
    base: u64,
    /// (expected usage, variance of usage) per slot.
    committed: VecDeque<(f64, f64)>,
}

impl PriceBook {
    /// A book with nothing committed; `slack` is 1 − ε/10.
    pub fn new(price_min: f64, price_max: f64, slack: f64, forecast: CapacityForecast) -> Self {
        PriceBook {
            price_min,
            price_max,
            slack,
            forecast,
            base: 0,
            committed: VecDeque::new(),
        }
    }

    /// Replaces the capacity forecast (prices follow at once).
    pub fn set_forecast(&mut self, f: CapacityForecast) {
        self.forecast = f;
    }

    /// The capacity forecast.
    pub fn forecast(&self) -> &CapacityForecast {
        &self.forecast
    }

    /// Capacity plans may use in `slot`: C'.
    pub fn planned_capacity(&self, slot: u64) -> f64 {
        self.forecast.at(slot) * self.slack
    }

    /// Expected usage committed to `slot`.
    pub fn committed(&self, slot: u64) -> f64 {
        self.committed_with_variance(slot).0
    }

    /// Expected usage committed to `slot` and its variance.
    pub fn committed_with_variance(&self, slot: u64) -> (f64, f64) {
        slot.checked_sub(self.base)
            .and_then(|i| self.committed.get(i as usize))
            .copied()
            .unwrap_or((0.0, 0.0))
    }

    /// Posted price of one unit of usage in `slot` (infinite where no capacity is planned).
    pub fn price(&self, slot: u64) -> f64 {
        let c = self.planned_capacity(slot);
        if c <= 0.0 {
            return f64::INFINITY;
        }
        self.price_min * (self.price_max / self.price_min).powf(self.committed(slot) / c)
    }

    /// The price ceiling, also charged for usage beyond a plan's stated support.
    pub fn price_max(&self) -> f64 {
        self.price_max
    }

    /// Adds (or, negative, releases) expected usage `amount` with variance `variance` in
    /// `slot`; past slots are ignored.
    pub fn commit(&mut self, slot: u64, amount: f64, variance: f64) {
        let Some(i) = slot.checked_sub(self.base) else {
            return;
        };
        let i = i as usize;
        if self.committed.len() <= i {
            self.committed.resize(i + 1, (0.0, 0.0));
        }
        let (m, v) = self.committed[i];
        self.committed[i] = ((m + amount).max(0.0), (v + variance).max(0.0));
    }

    /// Forgets slots before `slot`.
    pub fn advance(&mut self, slot: u64) {
        while self.base < slot {
            self.committed.pop_front();
            self.base += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_rises_from_min_to_max_at_planned_capacity() {
        let mut b = PriceBook::new(0.01, 1.0, 0.95, CapacityForecast::Flat(100.0));
        assert!((b.price(3) - 0.01).abs() < 1e-12);
        b.commit(3, 47.5, 10.0);
        assert!(
            (b.price(3) - 0.1).abs() < 1e-9,
            "half of C' = 95: sqrt(100)·p_min"
        );
        b.commit(3, 47.5, 5.0);
        assert!((b.price(3) - 1.0).abs() < 1e-9);
        assert_eq!(b.committed_with_variance(3), (95.0, 15.0));
        assert!((b.price(4) - 0.01).abs() < 1e-12);
        b.commit(3, -200.0, -100.0);
        assert_eq!(b.committed_with_variance(3), (0.0, 0.0));
        b.advance(4);
        assert_eq!(b.committed(3), 0.0);
        b.commit(2, 5.0, 1.0);
        assert_eq!(b.committed(2), 0.0, "past slots take no commitments");
    }

    #[test]
    fn periodic_forecast_repeats_and_zero_capacity_is_unbuyable() {
        let b = PriceBook::new(0.1, 1.0, 1.0, CapacityForecast::Periodic(vec![0.0, 10.0]));
        assert_eq!(b.price(4), f64::INFINITY);
        assert!((b.price(5) - 0.1).abs() < 1e-12);
    }
}
