//! The manager's clock: wall-clock seconds since the UNIX epoch, or a manual clock that
//! tests move by hand. The core only ever sees the resulting `Time`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};
use venn_core::Time;

/// Where the manager reads the time.
#[derive(Clone, Debug)]
pub enum Clock {
    /// The system clock.
    System,
    /// A clock set by hand (f64 seconds stored as bits).
    Manual(Arc<AtomicU64>),
}

impl Clock {
    /// A manual clock starting at `t` seconds.
    pub fn manual(t: f64) -> Self {
        Clock::Manual(Arc::new(AtomicU64::new(t.to_bits())))
    }

    /// The current time.
    pub fn now(&self) -> Time {
        match self {
            Clock::System => Time(
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64()),
            ),
            Clock::Manual(t) => Time(f64::from_bits(t.load(Ordering::SeqCst))),
        }
    }

    /// Sets a manual clock to `t` seconds (no effect on the system clock): drivers that
    /// replay a virtual timeline set each event's time exactly.
    pub fn set(&self, t: f64) {
        if let Clock::Manual(c) = self {
            c.store(t.to_bits(), Ordering::SeqCst);
        }
    }

    /// Moves a manual clock forward by `dt` seconds (no effect on the system clock).
    pub fn advance(&self, dt: f64) {
        if let Clock::Manual(t) = self {
            let now = f64::from_bits(t.load(Ordering::SeqCst));
            t.store((now + dt).to_bits(), Ordering::SeqCst);
        }
    }
}
