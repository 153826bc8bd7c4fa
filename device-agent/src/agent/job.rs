//! The device side of the job protocol: fetch the plan and the global weights, upload
//! the trained weights. Every request carries the task token the manager handed out,
//! which is how the job knows the device really holds an assignment.
//!
//! | request | reply |
//! |---|---|
//! | `GET {plan_url}/plan` | 200 JSON [`Plan`]; 401 bad token; 409 round closed |
//! | `GET {plan_url}/weights` | 200 global weights bytes |
//! | `POST {plan_url}/update` (+ `X-Samples`) | 204 accepted; 4xx rejected |

use fl_job::task::Plan;
use std::time::Duration;
use thiserror::Error;

/// Header carrying the task token.
pub const TOKEN_HEADER: &str = "X-Task-Token";
/// Header carrying the number of samples an update was trained on.
pub const SAMPLES_HEADER: &str = "X-Samples";

/// Why a job request failed.
#[derive(Debug, Error)]
pub enum JobError {
    /// Transport failure or an unreadable body.
    #[error("job unreachable: {0}")]
    Http(#[from] reqwest::Error),
    /// The job answered with an error status.
    #[error("job answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Response body.
        body: String,
    },
    /// The job's answer contradicts the assignment.
    #[error("job protocol: {0}")]
    Protocol(String),
}

/// One device's view of one job, for one task.
#[derive(Clone, Copy, Debug)]
pub struct JobClient<'a> {
    http: &'a reqwest::Client,
    base: &'a str,
    token: &'a str,
    timeout: Duration,
}

impl<'a> JobClient<'a> {
    /// A client of the job at `plan_url` holding task `token`.
    pub fn new(
        http: &'a reqwest::Client,
        plan_url: &'a str,
        token: &'a str,
        timeout: Duration,
    ) -> Self {
        JobClient {
            http,
            base: plan_url.trim_end_matches('/'),
            token,
            timeout,
        }
    }

    async fn ok(resp: reqwest::Response) -> Result<reqwest::Response, JobError> {
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        Err(JobError::Status { status, body })
    }

    async fn get(&self, what: &str) -> Result<reqwest::Response, JobError> {
        let resp = self
            .http
            .get(format!("{}/{what}", self.base))
            .header(TOKEN_HEADER, self.token)
            .timeout(self.timeout)
            .send()
            .await?;
        Self::ok(resp).await
    }

    /// `GET /plan`.
    pub async fn plan(&self) -> Result<Plan, JobError> {
        Ok(self.get("plan").await?.json().await?)
    }

    /// `GET /weights`.
    pub async fn weights(&self) -> Result<Vec<u8>, JobError> {
        Ok(self.get("weights").await?.bytes().await?.to_vec())
    }

    /// `POST /update`: the trained weights and the samples they were trained on.
    pub async fn upload(&self, weights: Vec<u8>, samples: u64) -> Result<(), JobError> {
        let resp = self
            .http
            .post(format!("{}/update", self.base))
            .header(TOKEN_HEADER, self.token)
            .header(SAMPLES_HEADER, samples.to_string())
            .header("content-type", "application/octet-stream")
            .timeout(self.timeout)
            .body(weights)
            .send()
            .await?;
        Self::ok(resp).await?;
        Ok(())
    }
}
