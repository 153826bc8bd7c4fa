//! # venn-core — the sans-IO scheduling core of the Venn FL testbed
//!
//! Many federated-learning jobs share one population of ephemeral, heterogeneous devices.
//! Jobs submit per-round requests (demand, eligibility, deadline); devices check in; the
//! [`ResourceManager`] assigns each device to at most one job. The same code runs inside
//! the event-driven simulator (`venn-sim`, virtual clock) and the live HTTP manager
//! (`venn-manager`, wall clock): it performs no I/O, reads no clock (time is an argument,
//! [`Time`]) and owns its randomness ([`SeededRng`]).
//!
//! ## Layout
//! - [`time`], [`ids`], [`rng`], [`hash`]: small value types.
//! - [`profile`]: [`DeviceProfile`] (what a device offers) and [`Requirement`] (what a job
//!   needs); equal requirements form one job group. The rule for a task's time on a device
//!   (`DeviceProfile::task_seconds` of a [`TaskCost`]), and [`TaskWork`]: a task's cost from
//!   the work it does (samples × epochs × the model's cost per sample, bytes both ways).
//! - [`partition`]: [`DataPartition`], which training writers (and so how many samples)
//!   each device holds.
//! - [`groupset`]: the bitset of groups that admits a device — its Venn-diagram cell.
//! - [`supply`]: check-in counts per device class over a sliding window (|S_j| as rates).
//! - [`groups`]: job groups and their queues of open requests.
//! - [`job`]: job specs, open rounds, history (rounds, task response times).
//! - [`manager`]: the state machine: inputs (register, request, check-in, task events,
//!   close) → [`Decision`]s.
//! - [`rules`]: when a round closes and how ([`rules::RoundRule`]: early at enough
//!   results, else the authors' rule at the deadline).
//! - [`closing`]: who applies that rule, and when — the core's round timers
//!   ([`ResourceManager::poll_timeout`] / [`ResourceManager::handle_timeout`]), the early
//!   close on enough results, and [`ResourceManager::judge_round`] for a live job that holds
//!   its results ([`RoundClosing`]).
//! - [`fit`]: the device's acceptance rule ([`FitRule`]): it takes the first offered job
//!   whose task fits before its session ends.
//! - [`policy`]: the [`Policy`] trait and the policies ([`PolicyKind`]): `venn` (IRS +
//!   tier matching + fairness ε), `irs` (venn without tiers), `random`, `random-order`,
//!   `fifo`, `fifo-request`, `srsf`, `random-delay` (congestion-scaled random start delays)
//!   and `chunked` (jobs run in chunks that fit the eligible supply); [`PolicyConfig`]
//!   (a policy's name and typed parameters, as drivers embed it) and [`PolicyRegistry`]
//!   (built-in and custom policies by name). With the `clap` feature, `PolicyArgs` is
//!   the command-line flags of the policies' parameters.
//! - [`restore`]: re-feeding persisted jobs, rounds and check-ins after a restart.
//! - [`admission`]: posted-price admission of jobs with statements of work, LIFO eviction,
//!   on one slot clock for every driver ([`admission::SlotClock`]: slot boundaries as a
//!   timer, realised capacity, the trailing-window capacity forecast).
//! - [`stats`]: Wilson intervals of accuracies, Student-t intervals over seeds, and the
//!   time-to-accuracy rule ([`stats::TtaRule`]) every driver reports with.
//! - [`optimal`]: an exact solver for small IRS instances (the yardstick) and a driver
//!   that replays such an instance through any policy.
//!
//! ## One round, from request to aggregation
//! A job registers ([`ResourceManager::register_job`]) and submits a round request
//! ([`ResourceManager::submit_request`]); the request joins its group's queue and the plan
//! is marked dirty. The next device check-in ([`ResourceManager::check_in`]) re-plans once
//! (IRS assigns each Venn cell to a group), then maps the device's cell to a group and the
//! group's head job. When the demand is met the request leaves the queue. Devices report
//! ([`ResourceManager::task_finished`]) or fail; the round closes when enough results are
//! in (the core's close rule) or when it falls due (the driver calls
//! [`ResourceManager::handle_timeout`] at [`ResourceManager::poll_timeout`]); the job
//! aggregates and submits the next round.
//!
//! ```
//! use venn_core::*;
//! let mut rm = ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named("venn")).unwrap();
//! let job = rm.register_job(JobSpec::new("keyboard", Requirement::any()), Time(0.0)).unwrap();
//! let round = rm.submit_request(job, RoundRequest::new(1, Time(600.0), 1.0), Time(0.0)).unwrap();
//! let d = rm.check_in(DeviceId(7), &DeviceProfile::new(4.0, 512.0, 10.0), Time(1.0));
//! assert_eq!(d, Decision::Assigned { job, round });
//! assert_eq!(rm.poll_timeout(), Some(Time(600.0)));
//! let done = rm.task_finished(job, round, DeviceId(7), Time(30.0)).unwrap();
//! assert_eq!(done.closed.unwrap().outcome, RoundOutcome::Success);
//! assert_eq!(rm.poll_timeout(), None);
//! ```

pub mod admission;
pub mod closing;
pub mod error;
pub mod fit;
pub mod groups;
pub mod groupset;
pub mod hash;
pub mod ids;
pub mod job;
pub mod manager;
pub mod optimal;
pub mod partition;
pub mod policy;
pub mod profile;
pub mod restore;
pub mod rng;
pub mod rules;
pub mod stats;
pub mod supply;
pub mod time;

pub use error::CoreError;
pub use fit::FitRule;
pub use groupset::{GroupIdx, GroupSet, MAX_GROUPS};
pub use ids::{DeviceId, JobId, RoundId};
pub use job::{JobSpec, JobState, RoundOutcome, RoundRecord, RoundRequest, TierBand};
pub use manager::{Counters, Decision, ManagerConfig, ResourceManager};
pub use partition::DataPartition;
#[cfg(feature = "clap")]
pub use policy::PolicyArgs;
pub use policy::{Policy, PolicyConfig, PolicyKind, PolicyRegistry, TierParams};
pub use profile::{DeviceProfile, Requirement, TaskCost, TaskWork};
pub use rng::SeededRng;
pub use rules::{ClosedRound, ExpiredTask, RoundClosing, TaskDone, Timeouts};
pub use supply::{DeviceClass, SupplyConfig, SupplyEstimator};
pub use time::Time;
