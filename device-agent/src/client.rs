//! A thin HTTP client of the manager's `/v1` device endpoints.

use thiserror::Error;
use venn_core::DeviceProfile;
use venn_manager::dto::{CheckIn, CheckInReply};

/// Why a call to the manager failed.
#[derive(Debug, Error)]
pub enum ClientError {
    /// Transport failure (connection refused, reset, timeout).
    #[error("manager unreachable: {0}")]
    Http(#[from] reqwest::Error),
    /// The manager answered with an error status.
    #[error("manager answered {status}: {body}")]
    Status {
        /// HTTP status.
        status: u16,
        /// Response body (a JSON error).
        body: String,
    },
}

/// Client of one manager.
#[derive(Clone, Debug)]
pub struct ManagerClient {
    http: reqwest::Client,
    base: String,
}

impl ManagerClient {
    /// A client of the manager at `base` (e.g. `http://127.0.0.1:7070`).
    pub fn new(base: impl Into<String>) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .tcp_nodelay(true)
            .build()
            .expect("a plain HTTP client builds");
        ManagerClient {
            http,
            base: base.into().trim_end_matches('/').to_string(),
        }
    }

    async fn ok(resp: reqwest::Response) -> Result<reqwest::Response, ClientError> {
        if resp.status().is_success() {
            return Ok(resp);
        }
        let status = resp.status().as_u16();
        let body = resp.text().await.unwrap_or_default();
        Err(ClientError::Status { status, body })
    }

    /// `POST /v1/check-in`.
    pub async fn check_in(
        &self,
        device_id: u64,
        profile: &DeviceProfile,
    ) -> Result<CheckInReply, ClientError> {
        let body = CheckIn {
            device_id,
            profile: profile.clone(),
        };
        let resp = self
            .http
            .post(format!("{}/v1/check-in", self.base))
            .json(&body)
            .send()
            .await?;
        Ok(Self::ok(resp).await?.json().await?)
    }

    /// `POST /v1/tasks/{token}/{ack|finished|failed}`.
    pub async fn report(&self, task_token: &str, outcome: &str) -> Result<(), ClientError> {
        let resp = self
            .http
            .post(format!("{}/v1/tasks/{task_token}/{outcome}", self.base))
            .send()
            .await?;
        Self::ok(resp).await?;
        Ok(())
    }

    /// The underlying HTTP client (shared connection pool).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The manager's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }
}
