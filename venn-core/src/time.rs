//! Virtual or wall-clock time as seen by the core: seconds since an arbitrary epoch,
//! always passed in by the driver (the core never reads a clock).

use serde::{Deserialize, Serialize};
use std::ops::{Add, Sub};

/// A point in time, in seconds since the driver's epoch.
///
/// The simulator passes virtual seconds; the live manager passes seconds since it
/// started (or since the UNIX epoch). The core only ever compares and subtracts times.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Time(pub f64);

impl Time {
    /// The epoch.
    pub const ZERO: Time = Time(0.0);

    /// Seconds since the epoch.
    pub fn secs(self) -> f64 {
        self.0
    }

    /// Seconds elapsed from `earlier` to `self` (negative if `earlier` is later).
    pub fn since(self, earlier: Time) -> f64 {
        self.0 - earlier.0
    }

    /// The later of two times.
    pub fn max(self, other: Time) -> Time {
        if other.0 > self.0 { other } else { self }
    }
}

impl Add<f64> for Time {
    type Output = Time;
    fn add(self, rhs: f64) -> Time {
        Time(self.0 + rhs)
    }
}

impl Sub<f64> for Time {
    type Output = Time;
    fn sub(self, rhs: f64) -> Time {
        Time(self.0 - rhs)
    }
}

impl std::fmt::Display for Time {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:.3}s", self.0)
    }
}
