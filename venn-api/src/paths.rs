//! Routes of the manager's `/v1` API: the templates the server mounts (axum's `{param}`
//! syntax) and the functions clients build concrete paths with, side by side so they
//! cannot drift apart. The job's routes are in [`crate::job`].

use crate::manager::TaskReport;

/// `POST` register a job.
pub const JOBS: &str = "/v1/jobs";
/// `GET` a job's status, `DELETE` cancel it.
pub const JOB: &str = "/v1/jobs/{id}";
/// `POST` the job completed.
pub const JOB_FINISH: &str = "/v1/jobs/{id}/finish";
/// `POST` submit a round request.
pub const ROUNDS: &str = "/v1/jobs/{id}/rounds";
/// `GET` a round's status.
pub const ROUND: &str = "/v1/jobs/{id}/rounds/{round}";
/// `POST` close a round.
pub const ROUND_CLOSE: &str = "/v1/jobs/{id}/rounds/{round}/close";
/// `POST` a device checks in.
pub const CHECK_IN: &str = "/v1/check-in";
/// `GET` who holds a task token.
pub const TASK: &str = "/v1/tasks/{token}";
/// `POST` a task's outcome ([`TaskReport`]).
pub const TASK_REPORT: &str = "/v1/tasks/{token}/{outcome}";
/// `GET` the manager's state (jobs, queues, groups, supply).
pub const STATUS: &str = "/v1/status";
/// `GET` Prometheus metrics.
pub const METRICS: &str = "/metrics";
/// `GET` liveness.
pub const HEALTHZ: &str = "/healthz";

/// [`JOB`] for one job.
pub fn job(id: u64) -> String {
    format!("/v1/jobs/{id}")
}

/// [`JOB_FINISH`] for one job.
pub fn job_finish(id: u64) -> String {
    format!("/v1/jobs/{id}/finish")
}

/// [`ROUNDS`] for one job.
pub fn rounds(id: u64) -> String {
    format!("/v1/jobs/{id}/rounds")
}

/// [`ROUND`] for one round.
pub fn round(id: u64, round: u32) -> String {
    format!("/v1/jobs/{id}/rounds/{round}")
}

/// [`ROUND_CLOSE`] for one round.
pub fn round_close(id: u64, round: u32) -> String {
    format!("/v1/jobs/{id}/rounds/{round}/close")
}

/// [`TASK`] for one token.
pub fn task(token: &str) -> String {
    format!("/v1/tasks/{token}")
}

/// [`TASK_REPORT`] for one token and outcome.
pub fn task_report(token: &str, outcome: TaskReport) -> String {
    format!("/v1/tasks/{token}/{}", outcome.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fills a route template's `{param}`s in order.
    fn fill(template: &str, args: &[&str]) -> String {
        let mut out = String::new();
        let mut rest = template;
        for a in args {
            let open = rest.find('{').expect("a parameter left");
            let close = rest[open..].find('}').expect("closed") + open;
            out.push_str(&rest[..open]);
            out.push_str(a);
            rest = &rest[close + 1..];
        }
        assert!(!rest.contains('{'), "unfilled parameter in {template}");
        out + rest
    }

    #[test]
    fn builders_match_templates() {
        assert_eq!(job(7), fill(JOB, &["7"]));
        assert_eq!(job_finish(7), fill(JOB_FINISH, &["7"]));
        assert_eq!(rounds(7), fill(ROUNDS, &["7"]));
        assert_eq!(round(7, 3), fill(ROUND, &["7", "3"]));
        assert_eq!(round_close(7, 3), fill(ROUND_CLOSE, &["7", "3"]));
        assert_eq!(task("t"), fill(TASK, &["t"]));
        for r in TaskReport::ALL {
            assert_eq!(task_report("t", r), fill(TASK_REPORT, &["t", r.as_str()]));
            assert_eq!(r.as_str().parse::<TaskReport>(), Ok(r));
        }
        assert!("done".parse::<TaskReport>().is_err());
    }
}
