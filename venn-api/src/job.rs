//! The job↔device protocol: what an assigned device fetches from a job and uploads to
//! it. Every request carries the manager-issued task token in [`TASK_TOKEN_HEADER`], which
//! is how the job knows the device really holds an assignment.
//!
//! | request | reply |
//! |---|---|
//! | `GET {plan_url}`[`PLAN_PATH`] | 200 JSON [`TaskPlan`]; 401 bad token; 409 round closed |
//! | `GET {plan_url}`[`WEIGHTS_PATH`] | 200 the global weights, `application/octet-stream` |
//! | `POST {plan_url}`[`UPDATE_PATH`] (+ [`SAMPLES_HEADER`]) | 204 accepted; 4xx rejected |
//! | `GET {plan_url}`[`RESULTS_PATH`] (no token) | 200 JSON: the job's rounds so far |
//!
//! The results route is for collectors (`venn-lab gather`), not devices: a job on another
//! host is read back over HTTP, as a device population's counters are at
//! [`AGENT_STATS_PATH`] on `device-agent --stats-listen`.
//!
//! Errors are the protocol's JSON error body ([`crate::ErrorBody`]).

use serde::{Deserialize, Serialize};

/// Header carrying the task token on every job request.
pub const TASK_TOKEN_HEADER: &str = "x-task-token";
/// Header carrying the number of samples an update was trained on (FedAvg's weight).
pub const SAMPLES_HEADER: &str = "x-samples";
/// Route of the training plan.
pub const PLAN_PATH: &str = "/plan";
/// Route of the global weights.
pub const WEIGHTS_PATH: &str = "/weights";
/// Route of the update upload.
pub const UPDATE_PATH: &str = "/update";
/// Route of the job's results (its rounds so far, and whether it ended).
pub const RESULTS_PATH: &str = "/v1/results";
/// Route of a device-agent's counters (`device-agent --stats-listen`).
pub const AGENT_STATS_PATH: &str = "/v1/stats";
/// Content type of weight bytes, both ways.
pub const WEIGHTS_CONTENT_TYPE: &str = "application/octet-stream";

/// What a device needs to train one task of one round: which task to build, with which
/// parameters, and the round's seed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPlan {
    /// Task name in the task registry (the device builds the same task).
    pub task: String,
    /// Task parameters (passed to the registry's factory).
    pub params: serde_json::Value,
    /// Job id at the manager.
    pub job_id: u64,
    /// Round number.
    pub round: u32,
    /// Size of the global weights in bytes.
    pub weights_bytes: u64,
    /// Seed of this round's local shuffles.
    pub seed: u64,
}
