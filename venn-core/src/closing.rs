//! Who closes a round, and when: the core's round and lease timers, in quinn-proto's shape
//! ([`ResourceManager::poll_timeout`] says when the next round or task lease is due,
//! [`ResourceManager::handle_timeout`] expires and closes what is due), and the one place
//! the close rule ([`RoundRule`]) is applied. Drivers never build a `RoundRule`: the
//! simulator arms a timer at `poll_timeout` and calls `handle_timeout`; the live manager's
//! ticker does the same; a live job asks the manager to judge its round ([`ResourceManager::judge_round`])
//! and learns the outcome from the reply.
//!
//! Two modes ([`RoundClosing`], with the values these calls return, in `rules.rs`),
//! because in a live deployment the results go to the job, not to the manager: only the
//! job knows how many usable updates it holds.

use crate::error::CoreError;
use crate::ids::{JobId, RoundId};
use crate::job::{OpenRound, RoundOutcome, RoundRecord, TaskState};
use crate::manager::ResourceManager;
use crate::rules::{ClosedRound, ExpiredTask, RoundClosing, RoundRule, Timeouts};
use crate::time::Time;

impl ResourceManager {
    /// When the next open round or task lease falls due
    /// ([`ResourceManager::handle_timeout`] handles it at the first call from then on);
    /// `None` with nothing pending.
    pub fn poll_timeout(&self) -> Option<Time> {
        self.jobs()
            .filter_map(|j| j.current.as_ref())
            .flat_map(|r| [Some(self.due_at(r)), self.lease_due_at(r)])
            .flatten()
            .min_by(|a, b| a.secs().total_cmp(&b.secs()))
    }

    /// Handles what is due at `now`: first the tasks whose lease ran out (under
    /// [`RoundClosing::Job`]: failed), then every open round due (deadline, plus the grace
    /// under [`RoundClosing::Job`]), earliest first and by job id among equals — under
    /// [`RoundClosing::Core`] judged by the round's rule with the devices dispatched and
    /// the results reported, under [`RoundClosing::Job`] aborted.
    pub fn handle_timeout(&mut self, now: Time) -> Timeouts {
        let expired = self.expire_leases(now);
        let mut due: Vec<(Time, JobId, RoundId, RoundOutcome)> = self
            .jobs()
            .filter_map(|j| j.current.as_ref().map(|r| (j.id, r)))
            .filter(|(_, r)| self.due_at(r) <= now)
            .map(|(job, r)| {
                let outcome = match self.closing() {
                    RoundClosing::Core => judge(r, r.finished),
                    RoundClosing::Job { .. } => RoundOutcome::Abort,
                };
                (self.due_at(r), job, r.round, outcome)
            })
            .collect();
        due.sort_by(|a, b| a.0.secs().total_cmp(&b.0.secs()).then(a.1.cmp(&b.1)));
        let closed = due
            .into_iter()
            .map(|(_, job, round, outcome)| ClosedRound {
                job,
                record: self
                    .close_round(job, round, outcome, now)
                    .expect("a due round is open"),
            })
            .collect();
        Timeouts { expired, closed }
    }

    /// Fails every unreported task whose lease ran out by `now`, by job and device id.
    fn expire_leases(&mut self, now: Time) -> Vec<ExpiredTask> {
        let mut expired: Vec<ExpiredTask> = self
            .jobs()
            .filter_map(|j| j.current.as_ref().map(|r| (j.id, r)))
            .filter(|(_, r)| self.lease_due_at(r).is_some_and(|t| t <= now))
            .flat_map(|(job, r)| {
                r.tasks
                    .iter()
                    .filter(|(_, t)| unreported(t.state))
                    .map(move |(&device, _)| ExpiredTask {
                        job,
                        round: r.round,
                        device,
                    })
            })
            .collect();
        expired.sort_by_key(|e| (e.job, e.device));
        for e in &expired {
            self.task_failed(e.job, e.round, e.device, now)
                .expect("an unreported task of an open round");
        }
        expired
    }

    /// Closes `job`'s open round `round` now, judged by its rule with `results` usable
    /// results (a live job's count of the updates it accepted; `None`: the results
    /// reported to the core) and the devices dispatched: a success as soon as the rule's
    /// `close_at` are in, else the authors' rule at the deadline.
    pub fn judge_round(
        &mut self,
        job: JobId,
        round: RoundId,
        results: Option<u32>,
        now: Time,
    ) -> Result<RoundRecord, CoreError> {
        let r = self
            .job(job)
            .ok_or(CoreError::UnknownJob(job))?
            .round(round)
            .ok_or(CoreError::UnknownRound { job, round })?;
        let outcome = judge(r, results.unwrap_or(r.finished));
        self.close_round(job, round, outcome, now)
    }

    /// The result just counted in `r` closes it early (under [`RoundClosing::Core`]).
    pub(crate) fn closes_early(&self, r: &OpenRound) -> bool {
        self.closing() == RoundClosing::Core && RoundRule::of(&r.request).closes_early(r.finished)
    }

    /// When `r` falls due.
    fn due_at(&self, r: &OpenRound) -> Time {
        match self.closing() {
            RoundClosing::Core => r.request.deadline,
            RoundClosing::Job { grace_s, .. } => Time(r.request.deadline.secs() + grace_s),
        }
    }

    /// When the leases of `r`'s unreported tasks run out, if it has any and leases apply.
    fn lease_due_at(&self, r: &OpenRound) -> Option<Time> {
        match self.closing() {
            RoundClosing::Job { lease_grace_s, .. }
                if r.tasks.values().any(|t| unreported(t.state)) =>
            {
                Some(Time(r.request.deadline.secs() + lease_grace_s))
            }
            _ => None,
        }
    }
}

/// Assigned or acknowledged: the device still owes its result.
fn unreported(state: TaskState) -> bool {
    matches!(state, TaskState::Assigned | TaskState::Acknowledged)
}

/// The outcome of closing `r` with `results` usable results.
fn judge(r: &OpenRound, results: u32) -> RoundOutcome {
    RoundRule::of(&r.request).at_deadline(r.assigned, results)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        Decision, DeviceId, DeviceProfile, JobSpec, ManagerConfig, PolicyConfig, Requirement,
        RoundRequest,
    };

    fn manager(closing: RoundClosing) -> ResourceManager {
        let cfg = ManagerConfig {
            closing,
            ..ManagerConfig::default()
        };
        ResourceManager::with_policy(cfg, &PolicyConfig::named("fifo")).unwrap()
    }

    /// A job with one open round of `demand` devices due at 100 s, `assigned` of them
    /// dispatched.
    fn open(rm: &mut ResourceManager, demand: u32, assigned: u32) -> (JobId, RoundId) {
        let job = rm
            .register_job(JobSpec::new("j", Requirement::any()), Time(0.0))
            .unwrap();
        let req = RoundRequest::new(demand, Time(100.0), 0.8);
        let round = rm.submit_request(job, req, Time(0.0)).unwrap();
        let dev = DeviceProfile::new(4.0, 512.0, 10.0);
        for d in 0..u64::from(assigned) {
            let got = rm.check_in(DeviceId(d), &dev, Time(1.0));
            assert_eq!(got, Decision::Assigned { job, round });
        }
        (job, round)
    }

    #[test]
    fn the_core_closes_early_at_enough_results_and_judges_at_the_deadline() {
        let mut rm = manager(RoundClosing::Core);
        let (job, round) = open(&mut rm, 5, 5);
        assert_eq!(rm.poll_timeout(), Some(Time(100.0)));
        for d in 0..3 {
            let done = rm
                .task_finished(job, round, DeviceId(d), Time(10.0))
                .unwrap();
            assert!(done.closed.is_none(), "3 of the 4 needed");
        }
        let done = rm
            .task_finished(job, round, DeviceId(3), Time(12.0))
            .unwrap();
        let rec = done.closed.expect("the 4th result closes it");
        assert_eq!(
            (rec.outcome, rec.closed_at),
            (RoundOutcome::Success, Time(12.0))
        );
        assert_eq!(rm.poll_timeout(), None);

        // Next round: 2 of 5 return by the deadline, too few; nothing is due before it.
        let round = rm
            .submit_request(job, RoundRequest::new(5, Time(200.0), 0.8), Time(20.0))
            .unwrap();
        let dev = DeviceProfile::new(4.0, 512.0, 10.0);
        for d in 10..15 {
            rm.check_in(DeviceId(d), &dev, Time(21.0));
        }
        for d in 10..12 {
            rm.task_finished(job, round, DeviceId(d), Time(30.0))
                .unwrap();
        }
        assert!(rm.handle_timeout(Time(199.0)).closed.is_empty());
        let closed = rm.handle_timeout(Time(200.0)).closed;
        assert_eq!(closed.len(), 1);
        assert_eq!(closed[0].record.outcome, RoundOutcome::Abort);
        assert_eq!(rm.job(job).unwrap().rounds_done, 1);
    }

    #[test]
    fn at_the_deadline_the_authors_rule_judges_the_dispatched_and_returned() {
        // Demand 5 at 80 %: 4 dispatched is enough; 3 of them returned is not
        // (3 < 0.8 × 4), 4 would have closed it early.
        let mut rm = manager(RoundClosing::Core);
        let (job, round) = open(&mut rm, 5, 4);
        for d in 0..3 {
            rm.task_finished(job, round, DeviceId(d), Time(5.0))
                .unwrap();
        }
        let closed = rm.handle_timeout(Time(100.0)).closed;
        assert_eq!(closed[0].record.outcome, RoundOutcome::Abort);
        assert_eq!(closed[0].record.finished, 3);

        // Over-committed to close early at 5 of 5: 4 returned of 4 dispatched is a success
        // at the deadline (4 ≥ 0.8 × 5 dispatched, 4 ≥ 0.8 × 4 returned).
        let req = RoundRequest::new(5, Time(300.0), 0.8).closing_at(Some(5));
        let round = rm.submit_request(job, req, Time(200.0)).unwrap();
        let dev = DeviceProfile::new(4.0, 512.0, 10.0);
        for d in 20..24 {
            rm.check_in(DeviceId(d), &dev, Time(201.0));
        }
        for d in 20..24 {
            let done = rm
                .task_finished(job, round, DeviceId(d), Time(210.0))
                .unwrap();
            assert!(done.closed.is_none());
        }
        let closed = rm.handle_timeout(Time(300.0)).closed;
        assert_eq!(closed[0].record.outcome, RoundOutcome::Success);
    }

    #[test]
    fn a_job_closes_its_own_rounds_and_a_forgotten_one_is_aborted_after_the_grace() {
        let job_mode = RoundClosing::Job {
            grace_s: 30.0,
            lease_grace_s: 10.0,
        };
        let mut rm = manager(job_mode);
        let (job, round) = open(&mut rm, 5, 5);
        for d in 0..5 {
            let done = rm
                .task_finished(job, round, DeviceId(d), Time(10.0))
                .unwrap();
            assert!(done.closed.is_none(), "the job closes, not the core");
        }
        // The job accepted only 3 of the 5 updates: below close_at (4) and below 80 % of
        // the 5 dispatched.
        let rec = rm.judge_round(job, round, Some(3), Time(50.0)).unwrap();
        assert_eq!(rec.outcome, RoundOutcome::Abort);
        let round = rm
            .submit_request(job, RoundRequest::new(5, Time(100.0), 0.8), Time(50.0))
            .unwrap();
        assert_eq!(rm.poll_timeout(), Some(Time(130.0)), "no task, no lease");
        let dev = DeviceProfile::new(4.0, 512.0, 10.0);
        for d in 10..12 {
            rm.check_in(DeviceId(d), &dev, Time(60.0));
        }
        rm.task_finished(job, round, DeviceId(10), Time(70.0))
            .unwrap();
        // Device 11 never reports: its lease ends 10 s after the deadline.
        assert_eq!(rm.poll_timeout(), Some(Time(110.0)));
        let t = rm.handle_timeout(Time(110.0));
        let lost = ExpiredTask {
            job,
            round,
            device: DeviceId(11),
        };
        assert_eq!((t.expired, t.closed.len()), (vec![lost], 0));
        assert_eq!(rm.job(job).unwrap().round(round).unwrap().failed, 1);
        assert_eq!(rm.poll_timeout(), Some(Time(130.0)));
        assert!(rm.handle_timeout(Time(129.0)).closed.is_empty());
        let closed = rm.handle_timeout(Time(131.0)).closed;
        assert_eq!((closed[0].job, closed[0].record.round), (job, round));
        assert_eq!(closed[0].record.outcome, RoundOutcome::Abort);
    }

    #[test]
    fn an_over_committed_request_closes_at_its_own_count() {
        let mut rm = manager(RoundClosing::Job {
            grace_s: 0.0,
            lease_grace_s: 0.0,
        });
        let (job, round) = open(&mut rm, 5, 5);
        rm.close_round(job, round, RoundOutcome::Abort, Time(2.0))
            .unwrap();
        let req = RoundRequest::new(5, Time(100.0), 0.8).closing_at(Some(2));
        let round = rm.submit_request(job, req, Time(3.0)).unwrap();
        let rec = rm.judge_round(job, round, Some(2), Time(4.0)).unwrap();
        assert_eq!(rec.outcome, RoundOutcome::Success, "2 results close it");
    }
}
