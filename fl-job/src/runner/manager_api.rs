//! The job's side of the manager's `/v1` API.

use crate::error::FlError;
use venn_core::RoundOutcome;
use venn_core::admission::Plan;
use venn_manager::dto::{CloseRound, RegisterJob, Registered, RoundStatus, SubmitRound, Submitted};

/// A registered job's handle on the manager.
#[derive(Clone, Debug)]
pub struct ManagerApi {
    http: reqwest::Client,
    base: String,
    /// Job id.
    pub job_id: u64,
    token: String,
}

fn net(e: reqwest::Error) -> FlError {
    FlError::Manager(e.to_string())
}

async fn ok(r: reqwest::Response) -> Result<reqwest::Response, FlError> {
    if r.status().is_success() {
        return Ok(r);
    }
    let status = r.status();
    let body = r.text().await.unwrap_or_default();
    Err(FlError::Manager(format!("{status}: {body}")))
}

/// Sends a request and decodes a JSON success body.
async fn call<T: serde::de::DeserializeOwned>(req: reqwest::RequestBuilder) -> Result<T, FlError> {
    ok(req.send().await.map_err(net)?)
        .await?
        .json()
        .await
        .map_err(net)
}

impl ManagerApi {
    /// Registers the job; with admission control on, also returns the plan it was
    /// admitted with (a declined job is an error carrying the manager's quote).
    pub async fn register(
        http: reqwest::Client,
        base: &str,
        req: &RegisterJob,
    ) -> Result<(Self, Option<Plan>), FlError> {
        let base = base.trim_end_matches('/').to_string();
        let r: Registered = call(http.post(format!("{base}/v1/jobs")).json(req)).await?;
        Ok((
            ManagerApi {
                http,
                base,
                job_id: r.job_id,
                token: r.token,
            },
            r.plan,
        ))
    }

    /// Submits the next round.
    pub async fn submit(&self, req: &SubmitRound) -> Result<Submitted, FlError> {
        let url = format!("{}/v1/jobs/{}/rounds", self.base, self.job_id);
        call(self.http.post(url).bearer_auth(&self.token).json(req)).await
    }

    /// Closes a round.
    pub async fn close(&self, round: u32, outcome: RoundOutcome) -> Result<RoundStatus, FlError> {
        let url = format!("{}/v1/jobs/{}/rounds/{round}/close", self.base, self.job_id);
        call(
            self.http
                .post(url)
                .bearer_auth(&self.token)
                .json(&CloseRound { outcome }),
        )
        .await
    }

    /// Marks the job finished.
    pub async fn finish(&self) -> Result<(), FlError> {
        let url = format!("{}/v1/jobs/{}/finish", self.base, self.job_id);
        ok(self
            .http
            .post(url)
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(net)?)
        .await?;
        Ok(())
    }

    /// Who holds a task token: (job, round, device), or `None` if unknown or closed.
    pub async fn task_owner(&self, token: &str) -> Result<Option<(u64, u32, u64)>, FlError> {
        let r = self
            .http
            .get(format!("{}/v1/tasks/{token}", self.base))
            .send()
            .await
            .map_err(net)?;
        if r.status() == reqwest::StatusCode::NOT_FOUND {
            return Ok(None);
        }
        let v: serde_json::Value = ok(r).await?.json().await.map_err(net)?;
        let get = |k: &str| v[k].as_u64();
        Ok(match (get("job_id"), get("round"), get("device_id")) {
            (Some(j), Some(r), Some(d)) => Some((j, r as u32, d)),
            _ => None,
        })
    }

    /// Reports a task finished (the job accepted its update).
    pub async fn task_finished(&self, token: &str) -> Result<(), FlError> {
        ok(self
            .http
            .post(format!("{}/v1/tasks/{token}/finished", self.base))
            .send()
            .await
            .map_err(net)?)
        .await?;
        Ok(())
    }
}
