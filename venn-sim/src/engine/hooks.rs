//! The engine's extension point: [`SimHooks`], called when a task is dispatched, when a
//! result returns, when a round closes and when admission control decides about a job.
//!
//! A driver that adds work to the simulation — `venn-lab sim` trains the jobs' real models
//! on the devices that reported — implements the trait and runs the engine with
//! [`run_with_hooks`](super::run_with_hooks). The engine is generic over the hooks, so the
//! JCT-only simulator runs with [`NoHooks`], whose empty methods compile away: it pays
//! nothing for the extension point.
//!
//! Hooks see the engine's own identities: `job` is the index into
//! [`SimInput::jobs`](super::SimInput::jobs) (arrival order), `round` the core's round
//! number (an aborted round is retried under the same number), `attempt` the engine's
//! per-job attempt counter (distinct for every retry).

use venn_core::{RoundOutcome, RoundRecord};

use super::error::SimError;

/// A task handed to a device.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Dispatch {
    /// Job index.
    pub job: usize,
    /// Round number.
    pub round: u32,
    /// Attempt of that round.
    pub attempt: u32,
    /// The device (the trace's client id).
    pub device: u64,
    /// When the device checked in.
    pub check_in_s: f64,
    /// When the task starts (check-in plus dispatch noise).
    pub start_s: f64,
    /// When it ends: the result arrives then, or the device drops off then.
    pub end_s: f64,
    /// Whether the result will arrive (false: the device goes offline first).
    pub returns: bool,
}

/// A result that reached its job while the round was open (stragglers are not reported).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TaskResult {
    /// Job index.
    pub job: usize,
    /// Round number.
    pub round: u32,
    /// Attempt of that round.
    pub attempt: u32,
    /// The device.
    pub device: u64,
    /// When it arrived.
    pub time_s: f64,
}

/// A round attempt that just closed.
#[derive(Clone, Copy, Debug)]
pub struct RoundClose<'a> {
    /// Job index.
    pub job: usize,
    /// Round number.
    pub round: u32,
    /// Attempt of that round.
    pub attempt: u32,
    /// Success or abort (an aborted round is retried at once).
    pub outcome: RoundOutcome,
    /// When it closed.
    pub time_s: f64,
    /// The core's record: demand, assignments, results, scheduling delay.
    pub record: &'a RoundRecord,
    /// Successful rounds of the job so far, this one included.
    pub rounds_done: u32,
    /// True when this success completes the job's planned rounds.
    pub last: bool,
}

/// What admission control decided about a job (runs with `[admission]` only).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum AdmissionEvent {
    /// Admitted on arrival; no device serves it before `launch_s`.
    Admitted {
        /// Job index.
        job: usize,
        /// When it arrived.
        time_s: f64,
        /// When its plan launches it.
        launch_s: f64,
    },
    /// Declined on arrival.
    Declined {
        /// Job index.
        job: usize,
        /// When it arrived.
        time_s: f64,
    },
    /// Evicted when a slot closed short of capacity.
    Evicted {
        /// Job index.
        job: usize,
        /// When the slot closed.
        time_s: f64,
    },
}

/// What the job does after a round attempt closes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AfterClose {
    /// Open the next round, or retry an aborted one (unless the planned rounds are done).
    #[default]
    Continue,
    /// After a success: the job is complete now, e.g. because it reached its target
    /// accuracy.
    Finish,
    /// After an abort: the job stops here, unfinished and no longer scheduled, e.g. because
    /// the round used up its attempts. Bounds the work (and memory) of a round that can
    /// never succeed.
    GiveUp,
}

/// Work a driver adds to the engine. Every method has an empty default.
pub trait SimHooks {
    /// A device was assigned a task.
    #[inline]
    fn on_dispatch(&mut self, dispatch: &Dispatch) {
        let _ = dispatch;
    }

    /// A result arrived while its round was open.
    #[inline]
    fn on_result(&mut self, result: &TaskResult) {
        let _ = result;
    }

    /// A round attempt closed. Returning [`AfterClose::Finish`] after a success ends the
    /// job there, [`AfterClose::GiveUp`] after an abort drops it unfinished; an error stops
    /// the run.
    #[inline]
    fn on_round_close(&mut self, close: &RoundClose<'_>) -> Result<AfterClose, SimError> {
        let _ = close;
        Ok(AfterClose::Continue)
    }

    /// Admission control admitted, declined or evicted a job.
    #[inline]
    fn on_admission(&mut self, event: &AdmissionEvent) {
        let _ = event;
    }
}

/// No hooks: the JCT-only simulator.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoHooks;

impl SimHooks for NoHooks {}
