//! The job's HTTP face for its assigned devices: the plan, the global weights, and the
//! upload of updates. Every call carries the manager-issued task token ([`TASK_TOKEN_HEADER`]),
//! which the job checks with the manager once per token and round. `GET /v1/results`
//! (no token: it is what the job would print) serves its rounds so far to a collector.

use super::report::JobResults;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{get, post};
use fl_task::task::FlTask;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tokio::sync::Notify;
use venn_api::client::JobSession;
use venn_api::job::{
    PLAN_PATH, RESULTS_PATH, SAMPLES_HEADER, TASK_TOKEN_HEADER, TaskPlan, UPDATE_PATH,
    WEIGHTS_CONTENT_TYPE, WEIGHTS_PATH,
};
use venn_api::manager::TaskReport;
use venn_api::{HttpError, codes};

/// The round the job is collecting for.
#[derive(Debug)]
pub struct OpenSlot {
    /// Round number.
    pub round: u32,
    /// Seed of the round's local shuffles.
    pub seed: u64,
    /// Accepted updates: (weights, samples).
    pub accepted: Vec<(Vec<u8>, u64)>,
    /// Tokens verified for this round → device id.
    pub verified: HashMap<String, u64>,
    /// Tokens whose update was accepted.
    pub uploaded: HashMap<String, u64>,
}

/// State shared by the handlers and the round loop.
pub struct JobShared {
    /// The task.
    pub task: Arc<dyn FlTask>,
    /// Task name and params, shipped in the plan.
    pub task_name: String,
    /// Task parameters.
    pub params: serde_json::Value,
    /// The manager handle, set once registered.
    pub api: OnceLock<JobSession>,
    /// Current global weights.
    pub global: Mutex<Arc<Vec<u8>>>,
    /// The open round, if any.
    pub slot: Mutex<Option<OpenSlot>>,
    /// Woken on every accepted update.
    pub notify: Notify,
    /// Woken when the round loop opens a slot.
    pub opened: Notify,
    /// A round submission is in flight: the manager may already be handing out its tasks.
    /// Set before the submit; cleared under the slot lock when the slot opens.
    pub submitting: AtomicBool,
    /// Slots taken (closed) so far, bumped under the slot lock: a token looked up before
    /// a close cannot be admitted into whatever opens after it (an aborted round is
    /// retried under the same round number).
    pub closed: AtomicU64,
    /// What `GET /v1/results` serves, updated by the round loop.
    pub results: Mutex<JobResults>,
    /// Given a permit each time results of an ended job are served (a lingering job
    /// waits for it before it exits).
    pub collected: Notify,
}

/// How long a device holding a live token waits for the job to open that token's round
/// while its submission is in flight. The manager hands out tasks as soon as a round is
/// submitted, before the job has its reply; without this grace the fastest devices would
/// be refused.
const OPEN_GRACE: Duration = Duration::from_secs(5);

fn round_closed(message: &'static str) -> HttpError {
    HttpError::conflict(codes::ROUND_CLOSED, message)
}

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

impl JobShared {
    /// The state of a job running `task` (registered as `task_name` with `params`) from
    /// the initial global weights `global`, before it registers as `name`.
    pub fn new(
        name: &str,
        task: Arc<dyn FlTask>,
        task_name: &str,
        params: serde_json::Value,
        global: Vec<u8>,
    ) -> Self {
        JobShared {
            task,
            task_name: task_name.into(),
            params,
            api: OnceLock::new(),
            global: Mutex::new(Arc::new(global)),
            slot: Mutex::new(None),
            notify: Notify::new(),
            opened: Notify::new(),
            submitting: AtomicBool::new(false),
            closed: AtomicU64::new(0),
            results: Mutex::new(JobResults::starting(name)),
            collected: Notify::new(),
        }
    }

    /// Changes the served results.
    pub fn update_results(&self, f: impl FnOnce(&mut JobResults)) {
        f(&mut self.results.lock().unwrap_or_else(|e| e.into_inner()));
    }

    fn lock_slot(&self) -> std::sync::MutexGuard<'_, Option<OpenSlot>> {
        self.slot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Checks the token belongs to this job's open round; returns (round, device).
    async fn verify(&self, h: &HeaderMap) -> Result<(u32, u64), HttpError> {
        let token = header(h, TASK_TOKEN_HEADER)
            .ok_or_else(|| HttpError::unauthorized(TASK_TOKEN_HEADER))?
            .to_string();
        if let Some(s) = self.lock_slot().as_ref()
            && let Some(d) = s.verified.get(&token)
        {
            return Ok((s.round, *d));
        }
        let api = self.api.get().ok_or_else(|| {
            HttpError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                codes::NOT_READY,
                "job not registered yet",
            )
        })?;
        let closed = self.closed.load(Ordering::SeqCst);
        let owner = api
            .client()
            .task_owner(&token)
            .await
            .map_err(HttpError::internal)?;
        match owner {
            Some(o) if o.job_id == api.job_id => {
                self.await_round(token, o.round, o.device_id, closed).await
            }
            Some(_) => Err(round_closed("the token belongs to another job")),
            None => Err(HttpError::unauthorized(
                "task token (unknown or already closed)",
            )),
        }
    }

    /// Records `token` as verified once `round` is the open slot. Refuses at once when a
    /// slot closed since the token was looked up (`closed` then), when another round is
    /// open, or when none is being submitted (a straggler of a closed round must not
    /// hold its upload here); and after [`OPEN_GRACE`].
    async fn await_round(
        &self,
        token: String,
        round: u32,
        device: u64,
        closed: u64,
    ) -> Result<(u32, u64), HttpError> {
        let deadline = tokio::time::Instant::now() + OPEN_GRACE;
        loop {
            // Created before the check so that an opening in between still wakes us.
            let opened = self.opened.notified();
            {
                let mut g = self.lock_slot();
                match g.as_mut() {
                    _ if self.closed.load(Ordering::SeqCst) != closed => {
                        return Err(round_closed("the round closed"));
                    }
                    Some(s) if s.round == round => {
                        s.verified.insert(token, device);
                        return Ok((round, device));
                    }
                    // Read under the slot lock: the round loop clears it under the same lock.
                    _ if !self.submitting.load(Ordering::SeqCst) => {
                        return Err(round_closed("the round closed"));
                    }
                    _ => {}
                }
            }
            if tokio::time::timeout_at(deadline, opened).await.is_err() {
                return Err(round_closed("the token's round is not open at the job"));
            }
        }
    }
}

async fn plan(
    State(s): State<Arc<JobShared>>,
    h: HeaderMap,
) -> Result<impl IntoResponse, HttpError> {
    let (round, _) = s.verify(&h).await?;
    let seed = s.lock_slot().as_ref().map_or(0, |o| o.seed);
    let weights_bytes = s.global.lock().unwrap_or_else(|e| e.into_inner()).len() as u64;
    let job_id = s.api.get().map_or(0, |a| a.job_id);
    Ok(axum::Json(TaskPlan {
        task: s.task_name.clone(),
        params: s.params.clone(),
        job_id,
        round,
        weights_bytes,
        seed,
    }))
}

async fn weights(
    State(s): State<Arc<JobShared>>,
    h: HeaderMap,
) -> Result<impl IntoResponse, HttpError> {
    s.verify(&h).await?;
    let w = s.global.lock().unwrap_or_else(|e| e.into_inner()).clone();
    Ok((
        [("content-type", WEIGHTS_CONTENT_TYPE)],
        Bytes::from(w.as_ref().clone()),
    ))
}

async fn update(
    State(s): State<Arc<JobShared>>,
    h: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, HttpError> {
    let (round, device) = s.verify(&h).await?;
    let token = header(&h, TASK_TOKEN_HEADER)
        .unwrap_or_default()
        .to_string();
    let samples: u64 = header(&h, SAMPLES_HEADER)
        .and_then(|v| v.parse().ok())
        .filter(|n| (1..=MAX_UPDATE_SAMPLES).contains(n))
        .ok_or_else(|| {
            HttpError::field(
                SAMPLES_HEADER,
                format!("must be an integer from 1 to {MAX_UPDATE_SAMPLES}"),
            )
        })?;
    if s.lock_slot()
        .as_ref()
        .is_some_and(|o| o.uploaded.contains_key(&token))
    {
        return Err(HttpError::conflict(
            codes::DUPLICATE,
            "this task already uploaded",
        ));
    }
    let task = s.task.clone();
    let bytes = body.to_vec();
    let checked = tokio::task::spawn_blocking(move || task.check_update(&bytes).map(|_| bytes))
        .await
        .map_err(HttpError::internal)?;
    let bytes = checked
        .map_err(|e| HttpError::new(StatusCode::BAD_REQUEST, codes::BAD_UPDATE, e.to_string()))?;
    {
        let mut g = s.lock_slot();
        match g.as_mut() {
            Some(o) if o.round == round && !o.uploaded.contains_key(&token) => {
                o.accepted.push((bytes, samples));
                o.uploaded.insert(token.clone(), device);
            }
            _ => {
                return Err(round_closed("the round closed before the upload"));
            }
        }
    }
    s.notify.notify_waiters();
    if let Some(api) = s.api.get()
        && let Err(e) = api.client().report_task(&token, TaskReport::Finished).await
    {
        tracing::debug!(error = %e, "could not report the task finished (round already closed)");
    }
    Ok(StatusCode::NO_CONTENT)
}

async fn results(State(s): State<Arc<JobShared>>) -> axum::Json<JobResults> {
    let r = s.results.lock().unwrap_or_else(|e| e.into_inner()).clone();
    if r.state.ended() {
        s.collected.notify_one();
    }
    axum::Json(r)
}

/// The most samples one update may claim. `X-Samples` is the update's FedAvg weight, so an
/// unbounded claim would let one device outweigh the rest of its round (a FEMNIST writer
/// has at most a few hundred samples; a million leaves room for any real client).
pub const MAX_UPDATE_SAMPLES: u64 = 1_000_000;

/// The job's router. `max_update_bytes` caps uploads (413 beyond).
pub fn router(shared: Arc<JobShared>, max_update_bytes: usize) -> Router {
    Router::new()
        .route(PLAN_PATH, get(plan))
        .route(WEIGHTS_PATH, get(weights))
        .route(UPDATE_PATH, post(update))
        .route(RESULTS_PATH, get(results))
        .layer(DefaultBodyLimit::max(max_update_bytes))
        .with_state(shared)
}
