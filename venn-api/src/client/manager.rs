//! Clients of the manager's `/v1` API: [`ManagerClient`] for anonymous calls (devices,
//! task checks, status) and [`JobSession`] for a registered job's own endpoints (bearer
//! token).

use super::{ClientError, call, send};
use crate::manager::{
    CheckIn, CheckInReply, CloseRound, JobStatus, RegisterJob, Registered, RoundMetrics,
    RoundStatus, SubmitRound, Submitted, TaskOwner, TaskReport,
};
use crate::paths;
use std::time::{Duration, Instant};
use venn_core::admission::AdmissionPlan;
use venn_core::{DeviceProfile, RoundOutcome};

const PEER: &str = "manager";

/// Client of one manager (cheap to clone; clones share the connection pool).
#[derive(Clone, Debug)]
pub struct ManagerClient {
    http: reqwest::Client,
    base: String,
    /// Sent as the bearer of job registrations, for a manager that requires one.
    operator_token: Option<String>,
}

impl ManagerClient {
    /// A client of the manager at `base` (e.g. `http://127.0.0.1:7070`) with a pool sized
    /// for many concurrent devices.
    pub fn new(base: &str) -> Self {
        let http = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .tcp_nodelay(true)
            .build()
            .unwrap_or_default();
        Self::with_http(http, base)
    }

    /// A client sharing an existing HTTP client.
    pub fn with_http(http: reqwest::Client, base: &str) -> Self {
        ManagerClient {
            http,
            base: base.trim_end_matches('/').to_string(),
            operator_token: None,
        }
    }

    /// Registers jobs with `token` as the bearer: a manager started with
    /// `--operator-token` refuses registrations without it (401).
    pub fn with_operator_token(mut self, token: Option<String>) -> Self {
        self.operator_token = token;
        self
    }

    /// The manager's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// The underlying HTTP client (shared connection pool).
    pub fn http(&self) -> &reqwest::Client {
        &self.http
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `POST /v1/jobs`: registers a job. With admission control on, the reply carries
    /// the plan it was admitted with; a declined job is a [`ClientError`] whose
    /// [`quote`](ClientError::quote) is the best plan there was.
    /// Retried as a [`JobSession`]'s calls are, for [`DEFAULT_RETRY_FOR`]: a job started
    /// while the manager restarts waits for it (a registration whose reply was lost
    /// leaves a job that the manager's idle-job reaper ends).
    pub async fn register_job(&self, req: &RegisterJob) -> Result<JobSession, ClientError> {
        let r: Registered = retrying(DEFAULT_RETRY_FOR, 0, "register_job", || {
            let mut post = self.http.post(self.url(paths::JOBS)).json(req);
            if let Some(t) = &self.operator_token {
                post = post.bearer_auth(t);
            }
            call(PEER, post)
        })
        .await?;
        Ok(JobSession {
            client: self.clone(),
            retry_for: DEFAULT_RETRY_FOR,
            job_id: r.job_id,
            token: r.token,
            plan: r.plan,
            registered_at: r.registered_at,
        })
    }

    /// `GET /v1/jobs/{id}`.
    pub async fn job(&self, id: u64) -> Result<JobStatus, ClientError> {
        call(PEER, self.http.get(self.url(&paths::job(id)))).await
    }

    /// `GET /v1/jobs/{id}/rounds/{round}`.
    pub async fn round(&self, id: u64, round: u32) -> Result<RoundStatus, ClientError> {
        call(PEER, self.http.get(self.url(&paths::round(id, round)))).await
    }

    /// `POST /v1/check-in` from a device that does not say when it leaves.
    pub async fn check_in(
        &self,
        device_id: u64,
        profile: &DeviceProfile,
    ) -> Result<CheckInReply, ClientError> {
        self.check_in_for(device_id, profile, None).await
    }

    /// `POST /v1/check-in` from a device that expects to stay online `online_for_s` more
    /// seconds (it is offered only jobs whose task fits, see [`CheckIn::online_for_s`]).
    pub async fn check_in_for(
        &self,
        device_id: u64,
        profile: &DeviceProfile,
        online_for_s: Option<f64>,
    ) -> Result<CheckInReply, ClientError> {
        let body = CheckIn {
            device_id,
            profile: profile.clone(),
            online_for_s,
        };
        call(PEER, self.http.post(self.url(paths::CHECK_IN)).json(&body)).await
    }

    /// `POST /v1/tasks/{token}/{ack|finished|failed}`.
    pub async fn report_task(&self, token: &str, outcome: TaskReport) -> Result<(), ClientError> {
        send(
            PEER,
            self.http
                .post(self.url(&paths::task_report(token, outcome))),
        )
        .await?;
        Ok(())
    }

    /// `GET /v1/tasks/{token}`: who holds a task token, or `None` if it is unknown or its
    /// round closed.
    pub async fn task_owner(&self, token: &str) -> Result<Option<TaskOwner>, ClientError> {
        match call(PEER, self.http.get(self.url(&paths::task(token)))).await {
            Ok(o) => Ok(Some(o)),
            Err(e) if e.status() == Some(404) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /v1/status` as JSON.
    pub async fn status(&self) -> Result<serde_json::Value, ClientError> {
        call(PEER, self.http.get(self.url(paths::STATUS))).await
    }

    /// `GET /healthz`: `Ok` while the manager serves.
    pub async fn healthz(&self) -> Result<(), ClientError> {
        send(PEER, self.http.get(self.url(paths::HEALTHZ))).await?;
        Ok(())
    }
}

/// `call()` again, with backoff, while it fails transiently and `retry_for` lasts.
async fn retrying<T, F, Fut>(
    retry_for: Duration,
    job: u64,
    what: &str,
    call: F,
) -> Result<T, ClientError>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<T, ClientError>>,
{
    let t0 = Instant::now();
    let mut wait = Duration::from_millis(100);
    loop {
        match call().await {
            Err(e) if e.is_transient() && t0.elapsed() + wait < retry_for => {
                tracing::info!(job, call = what, error = %e, "manager unavailable; retrying");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            r => return r,
        }
    }
}

/// How long a [`JobSession`] keeps retrying a call the manager could not answer, by
/// default: a manager restart takes a second or two, a full disk as long as its operator.
pub const DEFAULT_RETRY_FOR: Duration = Duration::from_secs(120);

/// A registered job's handle on the manager: its id, token and admission plan. Its calls
/// are retried, with backoff, while the manager cannot answer them
/// ([`ClientError::is_transient`], for up to [`JobSession::with_retry_for`]); each is safe
/// to repeat: the manager answers a repeated round submission with the round it opened,
/// and a repeated close with the closed round's status.
#[derive(Clone, Debug)]
pub struct JobSession {
    client: ManagerClient,
    /// How long a call is retried while the manager cannot answer it.
    retry_for: Duration,
    /// The job's id.
    pub job_id: u64,
    token: String,
    /// With admission control: the plan the job was admitted with (no device goes to it
    /// before `plan.launch_at`).
    pub plan: Option<AdmissionPlan>,
    /// The manager's clock at registration, UNIX seconds ([`Registered::registered_at`]).
    pub registered_at: Option<f64>,
}

impl JobSession {
    /// The manager client it was registered through.
    pub fn client(&self) -> &ManagerClient {
        &self.client
    }

    fn authed(&self, req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        req.bearer_auth(&self.token)
    }

    /// Retries calls the manager could not answer for `retry_for` (zero: never).
    pub fn with_retry_for(mut self, retry_for: Duration) -> Self {
        self.retry_for = retry_for;
        self
    }

    /// `call()` again while it fails transiently ([`retrying`]).
    async fn retrying<T, F, Fut>(&self, what: &str, call: F) -> Result<T, ClientError>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<T, ClientError>>,
    {
        retrying(self.retry_for, self.job_id, what, call).await
    }

    /// `POST /v1/jobs/{id}/rounds`: submits the next round.
    pub async fn submit_round(&self, req: &SubmitRound) -> Result<Submitted, ClientError> {
        let url = self.client.url(&paths::rounds(self.job_id));
        self.retrying("submit_round", || {
            call(PEER, self.authed(self.client.http.post(&url)).json(req))
        })
        .await
    }

    /// `POST /v1/jobs/{id}/rounds/{round}/close`.
    pub async fn close_round(
        &self,
        round: u32,
        outcome: RoundOutcome,
    ) -> Result<RoundStatus, ClientError> {
        self.close_round_with(round, outcome, None).await
    }

    /// [`JobSession::close_round`] with the round's metrics; repeated for a round already
    /// closed with `outcome`, it records the metrics only (a job that evaluates after the
    /// close reports them so).
    pub async fn close_round_with(
        &self,
        round: u32,
        outcome: RoundOutcome,
        metrics: Option<RoundMetrics>,
    ) -> Result<RoundStatus, ClientError> {
        self.post_close(
            round,
            &CloseRound {
                outcome: Some(outcome),
                results: None,
                metrics,
            },
        )
        .await
    }

    /// `POST /v1/jobs/{id}/rounds/{round}/close` with the usable results the job holds:
    /// the manager judges the round by venn-core's close rule, and the reply's `outcome`
    /// says how it closed.
    pub async fn close_round_judged(
        &self,
        round: u32,
        results: u32,
    ) -> Result<RoundStatus, ClientError> {
        self.post_close(
            round,
            &CloseRound {
                outcome: None,
                results: Some(results),
                metrics: None,
            },
        )
        .await
    }

    async fn post_close(&self, round: u32, body: &CloseRound) -> Result<RoundStatus, ClientError> {
        let url = self.client.url(&paths::round_close(self.job_id, round));
        self.retrying("close_round", || {
            call(PEER, self.authed(self.client.http.post(&url)).json(body))
        })
        .await
    }

    /// `POST /v1/jobs/{id}/finish`: the job completed. A retry the manager no longer
    /// knows the job for (404, 410) is taken as done: the first try finished it.
    pub async fn finish(&self) -> Result<(), ClientError> {
        let url = self.client.url(&paths::job_finish(self.job_id));
        let tries = std::sync::atomic::AtomicU32::new(0);
        self.retrying("finish", || async {
            let retry = tries.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0;
            match send(PEER, self.authed(self.client.http.post(&url))).await {
                Err(e) if retry && matches!(e.status(), Some(404 | 410)) => Ok(()),
                r => r.map(|_| ()),
            }
        })
        .await
    }

    /// `DELETE /v1/jobs/{id}`: cancels the job.
    pub async fn cancel(&self) -> Result<(), ClientError> {
        let url = self.client.url(&paths::job(self.job_id));
        send(PEER, self.authed(self.client.http.delete(url))).await?;
        Ok(())
    }
}
