//! Rebuilding a manager's state from a durable store after a restart.
//!
//! The live manager persists jobs, rounds, tasks and check-in counts; on start it feeds
//! them back through these inputs. They bypass the policy's per-request decisions (a
//! restored round keeps no tier band) but keep every invariant of the normal inputs; the
//! policy hears of every restored round through [`crate::Policy::on_restore`].

use crate::error::CoreError;
use crate::ids::{DeviceId, JobId, RoundId};
use crate::job::{JobSpec, OpenRound, RoundRecord, RoundRequest, TaskRecord, TaskSample};
use crate::manager::ResourceManager;
use crate::profile::DeviceProfile;
use crate::time::Time;

/// A job's progress as persisted.
#[derive(Clone, Debug, Default)]
pub struct JobProgress {
    /// Successful rounds.
    pub rounds_done: u32,
    /// Number of the next round to submit.
    pub next_round: u32,
    /// Closed rounds, oldest first.
    pub rounds: Vec<RoundRecord>,
    /// Recent finished tasks (for tier matching).
    pub tasks: Vec<TaskSample>,
}

/// An open round as persisted.
#[derive(Clone, Debug)]
pub struct RestoredRound {
    /// Round number.
    pub round: RoundId,
    /// The request.
    pub request: RoundRequest,
    /// When it was submitted.
    pub submitted_at: Time,
    /// When its demand was met, if it was.
    pub fulfilled_at: Option<Time>,
    /// Its tasks.
    pub tasks: Vec<(DeviceId, TaskRecord)>,
}

impl ResourceManager {
    /// Re-registers a persisted job with its id, registration time and progress.
    pub fn restore_job(
        &mut self,
        id: JobId,
        spec: JobSpec,
        registered_at: Time,
        progress: JobProgress,
    ) -> Result<(), CoreError> {
        self.register_job_with_id(id, spec, registered_at)?;
        let j = self.job_mut(id).expect("just registered");
        j.rounds_done = progress.rounds_done;
        j.next_round = progress.next_round;
        j.last_demand = progress.rounds.last().map_or(0, |r| r.demand);
        j.history.rounds = progress.rounds;
        for t in progress.tasks {
            j.history.push_task(t);
        }
        Ok(())
    }

    /// Re-opens a persisted round of a restored job.
    pub fn restore_round(
        &mut self,
        job: JobId,
        r: RestoredRound,
        now: Time,
    ) -> Result<(), CoreError> {
        let assigned = r.tasks.len() as u32;
        if assigned > r.request.demand {
            return Err(CoreError::invalid(
                "tasks",
                "more tasks than the round's demand",
            ));
        }
        // The request's ticket, drawn as `submit_request` draws it (see `Policy::on_request`).
        let ticket = self.rng_f64();
        let j = self.job_mut(job).ok_or(CoreError::UnknownJob(job))?;
        if let Some(open) = &j.current {
            return Err(CoreError::RoundAlreadyOpen {
                job,
                round: open.round,
            });
        }
        let finished = r
            .tasks
            .iter()
            .filter(|(_, t)| t.state == crate::job::TaskState::Finished)
            .count() as u32;
        let failed = r
            .tasks
            .iter()
            .filter(|(_, t)| t.state == crate::job::TaskState::Failed)
            .count() as u32;
        j.last_demand = r.request.demand;
        j.next_round = j.next_round.max(r.round.0);
        j.current = Some(OpenRound {
            round: r.round,
            request: r.request,
            submitted_at: r.submitted_at,
            fulfilled_at: if assigned == r.request.demand {
                r.fulfilled_at.or(Some(now))
            } else {
                None
            },
            assigned,
            tasks: r.tasks.into_iter().collect(),
            finished,
            failed,
            key: 0.0,
            tier: None,
            not_before: r.submitted_at,
        });
        let open = assigned < r.request.demand;
        let group = j.group;
        if open {
            self.enqueue_restored(group, job);
        }
        self.notify_restored(job, ticket, now);
        self.mark_dirty();
        Ok(())
    }

    /// Counts `count` check-ins of `profile` at `at` in the supply estimate without
    /// placing anyone (persisted check-in history).
    pub fn observe_supply(&mut self, profile: &DeviceProfile, at: Time, count: u32) {
        self.observe(profile, at, count);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::{RoundOutcome, TaskState};
    use crate::manager::{Decision, ManagerConfig};
    use crate::policy::PolicyConfig;
    use crate::profile::Requirement;

    #[test]
    fn a_restored_manager_continues_the_open_round() {
        // Every policy, including those that keep per-job state of their own.
        for policy in ["venn", "chunked", "random-delay", "random-order"] {
            continues_the_open_round(policy);
        }
    }

    fn continues_the_open_round(policy: &str) {
        let mut a =
            ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named(policy))
                .unwrap();
        let dev = DeviceProfile::new(1.0, 1.0, 1.0);
        let spec = JobSpec::new("a", Requirement::any()).with_rounds(3);
        let job = a.register_job(spec.clone(), Time(0.0)).unwrap();
        let req = RoundRequest {
            demand: 3,
            deadline: Time(100.0),
            min_response_fraction: 1.0,
            close_at: None,
        };
        let r0 = a.submit_request(job, req, Time(0.0)).unwrap();
        let mut closed = None;
        for d in 0..3 {
            a.check_in(DeviceId(d), &dev, Time(1.0));
            closed = a
                .task_finished(job, r0, DeviceId(d), Time(5.0))
                .unwrap()
                .closed;
        }
        let rec = closed.expect("the third result closes the round");
        assert_eq!(rec.outcome, RoundOutcome::Success);
        let r1 = a.submit_request(job, req, Time(6.0)).unwrap();
        assert!(matches!(
            a.check_in(DeviceId(9), &dev, Time(7.0)),
            Decision::Assigned { .. }
        ));

        // What a store would have kept, fed into a fresh manager.
        let mut b =
            ResourceManager::with_policy(ManagerConfig::default(), &PolicyConfig::named(policy))
                .unwrap();
        b.observe_supply(&dev, Time(1.0), 3);
        b.observe_supply(&dev, Time(7.0), 1);
        let progress = JobProgress {
            rounds_done: 1,
            next_round: 1,
            rounds: vec![rec],
            tasks: vec![],
        };
        b.restore_job(job, spec, Time(0.0), progress).unwrap();
        let task = TaskRecord {
            assigned_at: Time(7.0),
            capacity_s: 40.0,
            state: TaskState::Assigned,
        };
        let restored = RestoredRound {
            round: r1,
            request: req,
            submitted_at: Time(6.0),
            fulfilled_at: None,
            tasks: vec![(DeviceId(9), task)],
        };
        b.restore_round(job, restored, Time(8.0)).unwrap();
        assert_eq!(b.job(job).unwrap().open_demand(), 2);
        assert_eq!(b.supply().classes()[0].in_window, 4);
        // The old task can still report, and new devices fill the rest of the demand.
        b.task_finished(job, r1, DeviceId(9), Time(9.0)).unwrap();
        assert_eq!(
            b.check_in(DeviceId(10), &dev, Time(9.0)),
            Decision::Assigned { job, round: r1 }
        );
        // Device 9 already served this round: it is not assigned twice.
        assert_eq!(b.check_in(DeviceId(9), &dev, Time(9.0)), Decision::NoTask);
        assert_eq!(
            b.check_in(DeviceId(11), &dev, Time(9.0)),
            Decision::Assigned { job, round: r1 }
        );
        assert_eq!(b.job(job).unwrap().open_demand(), 0);
        assert_eq!(b.job(job).unwrap().rounds_done, 1);
    }
}
