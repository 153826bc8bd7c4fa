//! When a round closes, and how: one rule for the simulator and the live job runner.
//!
//! A round closes as a success as soon as [`RoundRule::close_at`] results are in
//! (`ceil(fraction × demand)` unless the job over-commits and names its own count).
//! Otherwise it closes at its deadline, and the Venn authors' rule decides
//! (SymbioticLab/Venn, `GoogleJob.close_round`): a success if at least `fraction × demand`
//! devices were dispatched and at least `fraction × min(dispatched, demand)` of them
//! returned (and at least one did), else an abort that the job retries.
//!
//! Who applies the rule is [`RoundClosing`]'s choice (the core, or the job that holds the
//! results); the timers and the judging are `closing.rs`, and the values they return are
//! here.

use crate::ids::{DeviceId, JobId, RoundId};
use crate::job::{RoundOutcome, RoundRecord, RoundRequest};
use serde::{Deserialize, Serialize};

/// The close rule of one round request.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RoundRule {
    /// Devices requested.
    pub demand: u32,
    /// Minimum share of the demand that must respond, in (0, 1].
    pub min_response_fraction: f64,
    /// Results that close the round early as a success.
    pub close_at: u32,
}

impl RoundRule {
    /// The rule of a request for `demand` devices of which `fraction` must respond:
    /// closes early at `ceil(fraction × demand)` results (at least 1).
    pub fn new(demand: u32, min_response_fraction: f64) -> Self {
        RoundRule {
            demand,
            min_response_fraction,
            close_at: ((f64::from(demand) * min_response_fraction).ceil() as u32).max(1),
        }
    }

    /// The rule a round request is judged by (its over-commit count, if it names one).
    pub fn of(req: &RoundRequest) -> Self {
        let rule = RoundRule::new(req.demand, req.min_response_fraction);
        match req.close_at {
            Some(n) => rule.closing_at(n),
            None => rule,
        }
    }

    /// Closes early at `results` results instead (a job that over-commits its demand to
    /// reach a target count).
    pub fn closing_at(mut self, results: u32) -> Self {
        self.close_at = results.max(1);
        self
    }

    /// The fewest devices that could make the round a success, whichever way it closes:
    /// its early-close count, or the `fraction × demand` dispatched that the deadline rule
    /// asks for. A driver refusing rounds its supply cannot serve compares this.
    pub fn fewest_devices(&self) -> u32 {
        let at_deadline = (f64::from(self.demand) * self.min_response_fraction).ceil() as u32;
        self.close_at.min(at_deadline.max(1))
    }

    /// Do `results` results close the round before its deadline?
    pub fn closes_early(&self, results: u32) -> bool {
        results >= self.close_at
    }

    /// The outcome at the deadline, with `dispatched` devices assigned and `results`
    /// returned (the authors' rule).
    pub fn at_deadline(&self, dispatched: u32, results: u32) -> RoundOutcome {
        let frac = self.min_response_fraction;
        let dispatched_ok = f64::from(dispatched) >= f64::from(self.demand) * frac;
        let returned_ok = f64::from(results) >= f64::from(dispatched.min(self.demand)) * frac;
        if results > 0 && (self.closes_early(results) || (dispatched_ok && returned_ok)) {
            RoundOutcome::Success
        } else {
            RoundOutcome::Abort
        }
    }
}

impl RoundRequest {
    /// The fewest devices that could make this round a success
    /// ([`RoundRule::fewest_devices`]). Here rather than in `job.rs`, beside the rule it
    /// asks, so that the request's module does not depend on the rules'.
    pub fn fewest_devices(&self) -> u32 {
        RoundRule::of(self).fewest_devices()
    }
}

/// Who closes rounds ([`ManagerConfig::closing`](crate::ManagerConfig)).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum RoundClosing {
    /// The core closes every round: as a success from
    /// [`crate::ResourceManager::task_finished`] once its rule's `close_at` results are in, else
    /// at its deadline from [`crate::ResourceManager::handle_timeout`] by the authors' rule (a
    /// success if enough devices were dispatched and enough of them returned). The
    /// simulator: every result reaches the core.
    #[default]
    Core,
    /// The job closes its rounds: it holds the results, so it asks
    /// [`crate::ResourceManager::judge_round`] with its count of usable ones. A task not reported
    /// `lease_grace_s` after its round's deadline has lost its lease (failed), and a round
    /// still open `grace_s` after its deadline is aborted, both by
    /// [`crate::ResourceManager::handle_timeout`]: its job is presumed gone, and nobody could
    /// aggregate its results. The live manager.
    Job {
        /// Seconds past the deadline before an open round is aborted.
        grace_s: f64,
        /// Seconds past the round's deadline before an unreported task's lease runs out.
        lease_grace_s: f64,
    },
}

/// A round the core closed, and whose.
#[derive(Clone, Copy, Debug)]
pub struct ClosedRound {
    /// The job.
    pub job: JobId,
    /// The round as recorded in the job's history (its outcome included).
    pub record: RoundRecord,
}

/// A task whose lease ran out before it reported: failed by the core
/// ([`RoundClosing::Job`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExpiredTask {
    /// The job.
    pub job: JobId,
    /// Its round.
    pub round: RoundId,
    /// The device that held the task.
    pub device: DeviceId,
}

/// What [`crate::ResourceManager::handle_timeout`] did: leases expired first, then rounds closed.
#[derive(Clone, Debug, Default)]
pub struct Timeouts {
    /// Tasks failed for an expired lease.
    pub expired: Vec<ExpiredTask>,
    /// Rounds closed, earliest due first.
    pub closed: Vec<ClosedRound>,
}

/// What a reported result did ([`crate::ResourceManager::task_finished`]).
#[derive(Clone, Copy, Debug)]
pub struct TaskDone {
    /// Seconds from the device's assignment to its result.
    pub response_s: f64,
    /// The round, if this result closed it (a success under [`RoundClosing::Core`]).
    pub closed: Option<RoundRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn early_close_at_the_rounded_up_share() {
        let r = RoundRule::new(4, 0.5);
        assert_eq!(r.close_at, 2);
        assert!(!r.closes_early(1) && r.closes_early(2));
        assert_eq!(RoundRule::new(10, 0.8).close_at, 8);
        assert_eq!(RoundRule::new(1, 0.01).close_at, 1);
        assert_eq!(RoundRule::new(10, 0.8).closing_at(3).close_at, 3);
    }

    #[test]
    fn the_authors_deadline_rule() {
        let r = RoundRule::new(10, 0.8);
        // 8 dispatched, 7 returned: 7 ≥ 0.8 × 8 — a success with fewer than close_at.
        assert_eq!(r.at_deadline(8, 7), RoundOutcome::Success);
        // Too few dispatched.
        assert_eq!(r.at_deadline(7, 7), RoundOutcome::Abort);
        // Enough dispatched, too few returned.
        assert_eq!(r.at_deadline(10, 7), RoundOutcome::Abort);
        // Nothing returned is never a success.
        assert_eq!(
            RoundRule::new(1, 0.01).at_deadline(0, 0),
            RoundOutcome::Abort
        );
        // Over-dispatched rounds judge returns against the demand.
        assert_eq!(r.at_deadline(20, 8), RoundOutcome::Success);
    }
}
