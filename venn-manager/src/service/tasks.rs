//! Tasks: outcomes reported by devices and jobs, and token checks for jobs.

use super::*;

impl Manager {
    /// A task's device (or its job) reports: acknowledged, finished or failed. Blocks
    /// the calling thread until the report is durable; async callers use
    /// [`Manager::report_task_acked`].
    pub fn report_task(&self, token: &str, state: TaskState) -> Result<(), ServiceError> {
        self.decide_report(token, state)?.wait()?;
        self.count_report(state);
        Ok(())
    }

    /// [`Manager::report_task`] for async callers: the task waits for the commit, not
    /// the thread.
    pub async fn report_task_acked(
        &self,
        token: &str,
        state: TaskState,
    ) -> Result<(), ServiceError> {
        self.decide_report(token, state)?.await?;
        self.count_report(state);
        Ok(())
    }

    /// Has the core take the report and queues the task row's update (the core keeps the
    /// report even if the write fails, as it did when the write came second in the lock).
    fn decide_report(&self, token: &str, state: TaskState) -> Result<Ticket, ServiceError> {
        let unknown = || ServiceError::not_found("unknown or already closed task token");
        let presented = PresentedTask::new(token).ok_or_else(unknown)?;
        let now = self.clock.now();
        let mut g = self.lock();
        let id = g.find_task(&presented).ok_or_else(unknown)?;
        let t = &g.tasks[&id];
        let t = (t.job, t.round, t.device);
        match state {
            TaskState::Acknowledged => g.core.task_acknowledged(t.0, t.1, t.2, now)?,
            TaskState::Finished => {
                g.core.task_finished(t.0, t.1, t.2, now)?;
            }
            TaskState::Failed => g.core.task_failed(t.0, t.1, t.2, now)?,
            TaskState::Assigned => {
                return Err(ServiceError::field(
                    "state",
                    "cannot report a task as assigned",
                ));
            }
        }
        if state != TaskState::Acknowledged {
            g.forget_task(id);
        }
        Ok(g.store.write(move |s| s.update_task(id, state, now)))
    }

    fn count_report(&self, state: TaskState) {
        match state {
            TaskState::Finished => self.metrics.tasks_finished.fetch_add(1, Relaxed),
            TaskState::Failed => self.metrics.tasks_failed.fetch_add(1, Relaxed),
            _ => 0,
        };
    }

    /// Checks a task token belongs to `job` (jobs verify updates with it).
    pub fn verify_task(&self, token: &str) -> Option<TaskOwner> {
        let presented = PresentedTask::new(token)?;
        let g = self.lock();
        let id = g.find_task(&presented)?;
        g.tasks.get(&id).map(|t| TaskOwner {
            job_id: t.job.0,
            round: t.round.0,
            device_id: t.device.0,
        })
    }
}
