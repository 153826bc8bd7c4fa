//! Request and response bodies of the manager's `/v1` API. The manager, the job runner,
//! the device agent and the lab all compile against these one definitions; the routes
//! they travel on are in [`crate::paths`].

use serde::{Deserialize, Serialize};
use venn_core::admission::{AdmissionPlan, StatementOfWork};
use venn_core::{DeviceProfile, Requirement, RoundOutcome, TaskCost};

/// `POST /v1/jobs`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RegisterJob {
    /// Job name.
    pub name: String,
    /// Devices the job can use.
    #[serde(default)]
    pub requirement: Requirement,
    /// Rounds the job will run.
    pub rounds: u32,
    /// Size of the model in bytes (what a device downloads and uploads).
    pub model_size_bytes: u64,
    /// Base URL where assigned devices fetch the job's plan and weights.
    pub plan_url: String,
    /// Nominal task cost on the reference device (ranks devices for tier matching).
    #[serde(default)]
    pub task_cost: Option<TaskCost>,
    /// What the job is worth and how much it needs, for admission control: required when
    /// the manager runs with admission control, ignored when it does not. JSON:
    /// `{"value": [[seconds, value], …], "rounds": [[rounds, probability], …],
    /// "demand": devices per round, "round_s": seconds per round, "max_wait_s": optional}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub statement: Option<StatementOfWork>,
}

/// Reply to a registration.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Registered {
    /// The job's id.
    pub job_id: u64,
    /// Bearer token for the job's own endpoints.
    pub token: String,
    /// With admission control: the plan the job was admitted with. No device is assigned
    /// to the job before `plan.launch_at` (seconds since the UNIX epoch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<AdmissionPlan>,
    /// The manager's clock when it registered the job, seconds since the UNIX epoch: the
    /// one timeline jobs on different hosts share, whatever their own clocks say.
    /// (`None` from a manager that predates it.)
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registered_at: Option<f64>,
}

/// `POST /v1/jobs/{id}/rounds`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitRound {
    /// Devices wanted.
    pub demand: u32,
    /// Seconds from now until the round's deadline.
    pub deadline_s: f64,
    /// Fraction of `demand` that makes the round a success.
    pub min_response_fraction: f64,
    /// Results that close the round as a success, for a job that over-commits its
    /// demand to reach a target count; default `ceil(min_response_fraction × demand)`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub close_at: Option<u32>,
}

/// Reply to a round submission.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Submitted {
    /// Round number.
    pub round: u32,
    /// Attempt of this round (retries after aborts count up).
    pub attempt: u32,
    /// Absolute deadline, seconds since the UNIX epoch.
    pub deadline: f64,
}

/// `GET /v1/jobs/{id}/rounds/{round}`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RoundStatus {
    /// Round number.
    pub round: u32,
    /// Where the round stands.
    pub state: RoundState,
    /// Devices wanted.
    pub demand: u32,
    /// Devices assigned.
    pub assigned: u32,
    /// Results reported.
    pub finished: u32,
    /// Tasks failed or expired.
    pub failed: u32,
    /// Submission time (epoch seconds).
    pub submitted_at: f64,
    /// When all devices were assigned.
    pub fulfilled_at: Option<f64>,
    /// When closed.
    pub closed_at: Option<f64>,
    /// How it closed.
    pub outcome: Option<RoundOutcome>,
    /// Scheduling delay so far or final (seconds): until the round had its devices (all it
    /// asked for, or, closed before that, the last one whose result it used).
    pub scheduling_delay_s: f64,
    /// Response collection (seconds): from then to the close; 0 while open.
    #[serde(default)]
    pub response_collection_s: f64,
}

/// `POST /v1/jobs/{id}/rounds/{round}/close`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CloseRound {
    /// Success or abort, as the job decided it (say, an abort of a round whose updates
    /// could not be aggregated). Give this or `results`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<RoundOutcome>,
    /// Instead of an outcome: the usable results the job holds. The manager judges the
    /// round by venn-core's close rule — a success at the request's `close_at` results,
    /// else the authors' rule with the devices it dispatched — and the reply's `outcome`
    /// says how it closed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub results: Option<u32>,
    /// What the round achieved, for the status page and `/v1/status`: optional. A job
    /// that evaluates after closing (so that evaluation does not count as response
    /// collection) repeats the close with the same outcome and its metrics: a repeated
    /// close of the round's latest attempt is accepted and only records the metrics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics: Option<RoundMetrics>,
}

/// A closed round's results as its job reports them: every field optional.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RoundMetrics {
    /// Test accuracy of the new global model, in [0, 1].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy: Option<f64>,
    /// Test loss of the new global model (finite, not negative).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
    /// Devices whose updates were aggregated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub participants: Option<u32>,
    /// Test samples the accuracy was measured on (the job's fixed evaluation set), so
    /// that readers can put a 95 % interval on it (`venn_core::stats::wilson`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eval_samples: Option<u32>,
}

/// `POST /v1/check-in`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckIn {
    /// The device's id.
    pub device_id: u64,
    /// What it offers.
    pub profile: DeviceProfile,
    /// Seconds it expects to stay online from now, if it knows: it takes the first
    /// offered job whose task fits in them (the manager's fit rule), or nothing. Absent:
    /// every offered job fits. At most [`MAX_ONLINE_FOR_S`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub online_for_s: Option<f64>,
}

/// Largest `online_for_s` a check-in may state: 30 days.
pub const MAX_ONLINE_FOR_S: f64 = 30.0 * 86_400.0;

/// Bounds on what a client controls, so that no request can make the manager hold
/// unbounded state or issue a lease that never runs out. A request past one is a 422
/// naming the field.
pub mod limits {
    /// Tags on a device profile or a job's requirement.
    pub const MAX_TAGS: usize = 32;
    /// Bytes of one tag.
    pub const MAX_TAG_BYTES: usize = 64;
    /// Devices one round may request.
    pub const MAX_DEMAND: u32 = 100_000;
    /// Seconds from submission to a round's deadline (a task's lease ends a grace period
    /// after it): one day.
    pub const MAX_DEADLINE_S: f64 = 86_400.0;
    /// Bytes of a job's name.
    pub const MAX_NAME_BYTES: usize = 256;
    /// Bytes of a job's `plan_url`.
    pub const MAX_URL_BYTES: usize = 2_048;
    /// Rounds a job may register for.
    pub const MAX_ROUNDS: u32 = 1_000_000;
}

/// An assignment handed to a device.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Assignment {
    /// The job.
    pub job_id: u64,
    /// Its round.
    pub round: u32,
    /// Where to fetch the plan and the weights.
    pub plan_url: String,
    /// Token proving the assignment (to the job and to `/v1/tasks`).
    pub task_token: String,
    /// Seconds the device has to report before its task is released.
    pub lease_s: f64,
    /// The job's registered model size, bytes (0 from managers that predate the field):
    /// devices refuse weights much larger than this.
    #[serde(default)]
    pub model_size_bytes: u64,
}

/// Reply to a check-in: an assignment, or when to come back.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum CheckInReply {
    /// Work to do.
    Assigned {
        /// The task.
        assignment: Assignment,
    },
    /// Nothing now.
    Retry {
        /// Seconds to wait before the next check-in (pace steering).
        retry_after_s: f64,
    },
}

/// Where a round stands, as `GET /v1/jobs/{id}/rounds/{round}` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RoundState {
    /// Devices are still wanted.
    Open,
    /// Every device was assigned; results are being collected.
    Fulfilled,
    /// Closed (success or abort).
    Closed,
}

/// `GET /v1/jobs/{id}`: a job as the manager sees it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JobStatus {
    /// The job's id.
    pub job_id: u64,
    /// Its name.
    pub name: String,
    /// Its job group (jobs with equal requirements share one).
    pub group: u32,
    /// Rounds it will run (`None`: until it says it finished).
    pub rounds: Option<u32>,
    /// Rounds closed successfully.
    pub rounds_done: u32,
    /// Where devices fetch its plan.
    pub plan_url: String,
    /// Model size in bytes.
    pub model_size_bytes: u64,
    /// The round it is collecting devices for, if any.
    pub open_round: Option<OpenRoundStatus>,
    /// With admission control: the plan it was admitted with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<AdmissionPlan>,
    /// With admission control: no device goes to it before `plan.launch_at`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<bool>,
}

/// The open round inside a [`JobStatus`].
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct OpenRoundStatus {
    /// Round number.
    pub round: u32,
    /// Devices wanted.
    pub demand: u32,
    /// Devices assigned.
    pub assigned: u32,
    /// Results reported.
    pub finished: u32,
    /// Tasks failed or expired.
    pub failed: u32,
    /// Seconds since it was submitted.
    pub waiting_s: f64,
}

/// `GET /v1/tasks/{token}`: who holds a task token (404 when unknown or closed).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct TaskOwner {
    /// The job the task belongs to.
    pub job_id: u64,
    /// Its round.
    pub round: u32,
    /// The device holding it.
    pub device_id: u64,
}

/// What a device or job reports about a task: the last path segment of
/// `POST /v1/tasks/{token}/{outcome}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskReport {
    /// The device fetched the plan and started.
    Ack,
    /// The job accepted the device's update.
    Finished,
    /// The device gave up (dropped off, failed to train or upload).
    Failed,
}

impl TaskReport {
    /// Every report, in path order.
    pub const ALL: [TaskReport; 3] = [TaskReport::Ack, TaskReport::Finished, TaskReport::Failed];

    /// Its path segment.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskReport::Ack => "ack",
            TaskReport::Finished => "finished",
            TaskReport::Failed => "failed",
        }
    }
}

impl std::str::FromStr for TaskReport {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        TaskReport::ALL
            .into_iter()
            .find(|r| r.as_str() == s)
            .ok_or_else(|| format!("unknown task outcome {s:?} (ack, finished, failed)"))
    }
}
