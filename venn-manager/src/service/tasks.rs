//! Tasks: outcomes reported by devices and jobs, and token checks for jobs.

use super::*;

impl Manager {
    /// A task's device (or its job) reports: acknowledged, finished or failed.
    pub fn report_task(&self, token: &str, state: TaskState) -> Result<(), ServiceError> {
        let unknown = || ServiceError::not_found("unknown or already closed task token");
        // Tasks are kept by their token's digest; a string of another form is no token.
        let key = tokens::digest(token).ok_or_else(unknown)?;
        let token = key.as_str();
        let now = self.clock.now();
        let mut g = self.lock();
        let t = g.tasks.get(token).cloned().ok_or_else(unknown)?;
        match state {
            TaskState::Acknowledged => g.core.task_acknowledged(t.job, t.round, t.device, now)?,
            TaskState::Finished => {
                g.core.task_finished(t.job, t.round, t.device, now)?;
            }
            TaskState::Failed => g.core.task_failed(t.job, t.round, t.device, now)?,
            TaskState::Assigned => {
                return Err(ServiceError::field(
                    "state",
                    "cannot report a task as assigned",
                ));
            }
        }
        g.store.update_task(token, state, now)?;
        if state != TaskState::Acknowledged {
            g.tasks.remove(token);
        }
        drop(g);
        match state {
            TaskState::Finished => self.metrics.tasks_finished.fetch_add(1, Relaxed),
            TaskState::Failed => self.metrics.tasks_failed.fetch_add(1, Relaxed),
            _ => 0,
        };
        Ok(())
    }

    /// Checks a task token belongs to `job` (jobs verify updates with it).
    pub fn verify_task(&self, token: &str) -> Option<TaskOwner> {
        let key = tokens::digest(token)?;
        let g = self.lock();
        g.tasks.get(&key).map(|t| TaskOwner {
            job_id: t.job.0,
            round: t.round.0,
            device_id: t.device.0,
        })
    }
}
