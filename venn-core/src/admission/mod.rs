//! Truthful posted-price admission with LIFO eviction, after Babaioff, Lempel, Lucier,
//! Menache, Slivkins & Wong, "Truthful Online Scheduling of Cloud Workloads under
//! Uncertainty" (WWW 2022, arXiv:2203.01213).
//!
//! A job may arrive with a [`StatementOfWork`]: a value function of its completion time,
//! its per-round device demand and seconds per round, and a *distribution* over its number
//! of rounds. Time is cut into slots; a running job uses `demand · slot_s / round_s`
//! device check-ins per slot. The controller keeps posted prices per slot
//! ([`prices`]: exponential in the expected usage already committed, against the reduced
//! capacity C' = C(1 − ε/10)), evaluates every launch slot within the job's wait, and
//! admits the job with the plan that maximises expected value minus expected price — or
//! declines it with that best plan as a quote when its utility is not positive. Both are
//! net of the plan's eviction risk ([`AdmissionPlan::eviction_risk`]), which the controller reads
//! from what earlier plans may still use in the job's slots and from how far realised
//! capacity has strayed from the forecast: an evicted job earns nothing and pays nothing.
//!
//! Admitted jobs pay, per slot they actually use, the price posted for that slot when they
//! were admitted (past the longest outcome they stated, the price ceiling). When the
//! realised usage of running jobs exceeds the realised capacity, the most recently
//! admitted running jobs are evicted (last in, first out) and refunded.
//!
//! Why misreporting does not pay: prices are fixed before a job arrives, a job pays for
//! the usage it really has, and LIFO means only earlier jobs can push it out — so its
//! report changes nothing but which plan is chosen for it, and the truthful report picks
//! the plan with the best expected utility for its true distribution, eviction risk
//! included (the risk is estimated, so this holds as far as the estimate is right). `venn-sim admission-ic` checks this empirically.
//!
//! The controller is sans-IO like the rest of the core. Drivers hold it inside a
//! [`SlotClock`], the one rule for slot boundaries, realised capacity and the capacity
//! forecast: the simulator and the HTTP manager feed it statements, device check-ins,
//! slot timeouts ([`SlotClock::poll_timeout`] / [`SlotClock::handle_timeout`]) and job
//! completions.

mod controller;
pub mod prices;
mod risk;
mod slots;
mod statement;

pub use controller::{
    Admission, AdmissionController, AdmissionParams, AdmissionPlan, AdmissionStats, AdmittedJob,
    Settlement,
};
pub use prices::{CapacityForecast, PriceBook};
pub use slots::{JudgedSlot, SavedSlot, SlotClock, SlotsClosed};
pub use statement::{MAX_POINTS, RoundsDist, StatementOfWork, ValueFn};
