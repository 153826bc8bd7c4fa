//! The discrete-event engine: replays check-ins and job traces through one
//! `venn-core` [`ResourceManager`](venn_core::ResourceManager) on a virtual
//! clock.
//!
//! # Semantics
//!
//! Defaults follow the paper and the authors' simulator (`SymbioticLab/Venn`,
//! `src/venn_event.py`, `venn_job.py`, `client.py`); every deviation is an
//! option of [`SimConfig`] or listed here.
//!
//! - **Check-ins.** Each row of the 5-day block is one check-in, replayed
//!   `replicas` times shifted by 5 days ([`venn_traces::Replay`]); the device
//!   stays online until its traced end plus `grace_s` (80 s). At check-in the
//!   device is offered to the policy (`check_in`), including devices eligible
//!   for no spec: they count in the supply estimate but match no job. With
//!   `one_assignment_per_checkin` (default, as the authors) a device takes at
//!   most one task; otherwise a device that returns a result while still
//!   online (even a straggler's) is offered again at once, and each such
//!   offer counts as a check-in in the supply estimate.
//! - **Task time** is the FedScale/Venn model,
//!   `workload × ms_per_sample/78 + comm_trips × comm × 13736/kbps`
//!   (`comm_trips` = 1 by default; the authors' client pays the transfer
//!   twice) — or, for a job with [`SimJob::work`] over a [`DataPartition`],
//!   from the work done: the device's samples × epochs × the model's cost per
//!   sample, plus the model's bytes both ways ([`work`]). The task starts `U(0, dispatch_jitter_s)` after the check-in (the
//!   authors' 0–2 s dispatch noise). A device that goes offline before the
//!   task ends loses its result; the core hears `task_failed` when it drops.
//! - **Offers.** The policy offers the device an ordered list of jobs
//!   (`srsf` and `random` the whole eligible list, the others one job); the
//!   device takes the first whose task fits before it goes offline, judged at
//!   the start of the task (after the dispatch noise) by `fit`: the *nominal*
//!   time `workload + comm_trips × comm` by default, as the authors' client.
//!   A device that takes nothing consumes no demand.
//! - **Rounds.** A job opens round 0 at its arrival and the next round the
//!   instant the previous one closes. A round closes as a success as soon as
//!   `ceil(min_response_fraction × demand)` results arrive. Otherwise it closes
//!   at its deadline (opened + `deadline_s`): a success if at least
//!   `fraction × demand` devices were dispatched and at least
//!   `fraction × min(dispatched, demand)` results arrived (the authors' rule),
//!   else an abort, retried at once under the same round number. Results of a
//!   closed attempt are stragglers and are dropped; a per-job attempt counter
//!   tags every event so stale ones are ignored. (The authors submit the
//!   request 0.1 s after the round opens; we submit at once.)
//! - **Jobs** finish after `rounds` successful rounds. JCT = finish −
//!   arrival; since rounds follow each other back to back it equals the sum
//!   over all round attempts of the scheduling delay (open → demand fully
//!   assigned, or → close if it never was) plus the response-collection time
//!   (fully assigned → close), as the core's `RoundRecord` defines them.
//! - **Horizon.** The run stops when every job has finished or at the horizon
//!   (default: the end of the replay, `replicas × 5 days`). A job still
//!   running then is *unfinished*: it enters [`Summary::avg_jct_s`] with JCT
//!   censored at the horizon (a lower bound, which penalises the policy that
//!   failed to finish it), and is left out of
//!   [`Summary::avg_jct_finished_s`].
//! - **Ties.** Events at equal times run in push order; heap events (results,
//!   deadlines, arrivals) run before a check-in at the same instant.
//!
//! - **Policies** are `venn-core`'s, except that `fifo` orders by job
//!   arrival as the authors' FIFO does ([`policies`]).
//! - **Admission** (optional, `[admission]`, [`admission`]): each arriving job
//!   states its work to `venn-core`'s posted-price controller, which admits it
//!   with a launch time (the job registers at once, held until then, and opens its
//!   first round at the launch, as a live job does) or declines it (it never runs).
//!   Slots, realised capacity and the forecast are venn-core's
//!   [`SlotClock`](venn_core::admission::SlotClock), the live manager's rule: a slot
//!   event at each [`poll_timeout`](venn_core::admission::SlotClock::poll_timeout);
//!   jobs the controller evicts leave the core at once. Declined and evicted
//!   jobs are left out of the JCT averages and reported in
//!   [`Summary::admission`].
//!
//! - **Hooks** ([`hooks`]): a driver may add work at every dispatch, returned result,
//!   round close and admission decision — `venn-lab sim` trains real models there,
//!   the differential test records them — and may end a job after a successful round,
//!   or drop it unfinished after an abort ([`AfterClose::GiveUp`], `venn-lab sim` at a
//!   job's `max_attempts`). The JCT-only simulator runs with [`NoHooks`].
//! - **Feasibility** ([`feasibility`](mod@feasibility)): before a run, per job, its eligible devices and
//!   check-ins within one deadline against what a round needs, and its fastest eligible
//!   task against the deadline — what a driver checks to refuse a job that cannot work;
//!   [`venn_cells`] (`cells.rs`): the supply of each Venn cell (check-ins by the set of job
//!   groups they qualify for).
//!
//! # Performance
//!
//! The heap holds small `Copy` events ([`events::Event`], 48 bytes); the
//! check-in stream is merged in without going through it. Device profiles are
//! prebuilt per (capacity row, eligibility set) so a check-in allocates
//! nothing. See `SIMULATOR.md` for measured throughput.

pub mod admission;
mod admission_settings;
pub mod cells;
pub mod config;
mod error;
pub mod events;
pub mod feasibility;
pub mod hooks;
pub mod policies;
pub mod result;
pub mod setup;
pub mod sim;
pub mod work;

pub use cells::{JobGroup, VennCell, VennCells, venn_cells};
pub use config::SimConfig;
pub use error::SimError;
pub use feasibility::{JobFeasibility, feasibility};
pub use hooks::{AdmissionEvent, AfterClose, Dispatch, NoHooks, RoundClose, SimHooks, TaskResult};
pub use result::{JobRecord, Perf, SimResult, Summary};
pub use setup::{DeviceTable, SimInput, SimJob};
pub use sim::{run, run_with_hooks, run_with_progress, run_with_registry};
pub use venn_core::DataPartition;
pub use work::task_cost;
