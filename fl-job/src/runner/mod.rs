//! One live FL job against a `venn-manager`: register, then per round (`rounds.rs`)
//! submit a request (over-committed), serve the plan and global weights to assigned
//! devices (`server.rs`), accept updates, aggregate at `min_response_fraction × target`
//! results or at the deadline, have the manager judge the round by venn-core's close rule
//! (an abort is retried), evaluate on held-out data, and append a CSV row (`report.rs`). The
//! rows so far are also served at `GET /v1/results`; with [`RunOptions::linger`] the job
//! keeps serving them after it ends until a collector has read them.

mod config;
mod report;
mod rounds;
mod server;

pub use config::JobConfig;
pub use report::{JobReport, JobResults, JobState, RoundRow};
pub use server::{JobShared, MAX_UPDATE_SAMPLES, OpenSlot, router};

use crate::error::JobError;
use datasets::HeldOut;
use fl_task::task::{FlTask, ServerState};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use venn_api::client::ManagerClient;
use venn_api::manager::RegisterJob;
use venn_core::TaskCost;

/// Where the job runs and reports.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// Manager base URL.
    pub manager: String,
    /// Address the job's device-facing server binds (port 0: any).
    pub listen: SocketAddr,
    /// Per-round CSV (appended; header written when new).
    pub csv: Option<PathBuf>,
    /// Experiment start, for the CSV's wall-time column.
    pub t0: Instant,
    /// The manager's operator token, when it requires one to register jobs.
    pub operator_token: Option<String>,
    /// The base URL devices reach the job's server at (its `plan_url`), when not
    /// `http://` + the bound address: another host's name or address, a port mapping. A
    /// job bound to an unspecified address (`0.0.0.0`, `[::]`) needs one.
    pub advertise: Option<String>,
    /// After the job ends, keep serving `GET /v1/results` until they have been read once
    /// or this much time has passed (a job on another host is collected over HTTP);
    /// `None`: stop serving at once.
    pub linger: Option<Duration>,
}

impl RunOptions {
    /// A job reaching the manager at `manager`, listening on any loopback port, writing
    /// no CSV, with the experiment starting now.
    pub fn new(manager: &str) -> Self {
        RunOptions {
            manager: manager.into(),
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            csv: None,
            t0: Instant::now(),
            operator_token: None,
            advertise: None,
            linger: None,
        }
    }
}

/// The `plan_url` a job bound at `addr` registers: `advertise`, or the bound address.
pub fn plan_url(addr: SocketAddr, advertise: Option<&str>) -> Result<String, JobError> {
    match advertise {
        Some(a) if a.starts_with("http://") || a.starts_with("https://") => {
            Ok(a.trim_end_matches('/').to_string())
        }
        Some(a) => Err(JobError::config(format!(
            "advertised URL {a:?} must start with http:// or https://"
        ))),
        None if addr.ip().is_unspecified() => Err(JobError::config(format!(
            "the job listens on {addr}, which devices cannot dial: pass the URL they reach \
             it at (fl-job run --advertise http://HOST:{})",
            addr.port()
        ))),
        None => Ok(format!("http://{addr}")),
    }
}

fn epoch_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Runs the job to completion (its rounds, or the target accuracy).
pub async fn run_job(
    cfg: JobConfig,
    task: Arc<dyn FlTask>,
    held_out: Arc<HeldOut>,
    opts: RunOptions,
) -> Result<JobReport, JobError> {
    cfg.validate()
        .map_err(|(k, why)| JobError::config(format!("{k}: {why}")))?;
    let seed = cfg.seed;
    let init_task = task.clone();
    let global = tokio::task::spawn_blocking(move || init_task.init(seed))
        .await
        .map_err(|e| JobError::config(e.to_string()))??;
    let model_bytes = global.len();
    let shared = Arc::new(JobShared::new(
        &cfg.name,
        task.clone(),
        &cfg.task,
        cfg.params.clone(),
        global,
    ));
    let listener = tokio::net::TcpListener::bind(opts.listen)
        .await
        .map_err(|e| JobError::Server(format!("bind {}: {e}", opts.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| JobError::Server(e.to_string()))?;
    let app = router(shared.clone(), model_bytes * 2 + (1 << 20));
    let server = tokio::spawn(async move { axum::serve(listener, app).await });
    let http = reqwest::Client::new();
    let reg = RegisterJob {
        name: cfg.name.clone(),
        requirement: cfg.requirement.clone(),
        rounds: cfg.rounds,
        model_size_bytes: model_bytes as u64,
        plan_url: plan_url(addr, opts.advertise.as_deref())?,
        task_cost: Some(TaskCost::default()),
        statement: cfg.statement.clone(),
    };
    let api = ManagerClient::with_http(http, &opts.manager)
        .with_operator_token(opts.operator_token.clone())
        .register_job(&reg)
        .await?;
    let plan = api.plan;
    let _ = shared.api.set(api.clone());
    tracing::info!(job = api.job_id, name = %cfg.name, task = %cfg.task, %addr, "job registered");
    if let Some(plan) = plan {
        wait_for_launch(&cfg.name, &plan).await;
    }
    let registered = opts.t0.elapsed().as_secs_f64();
    shared.update_results(|r| {
        r.state = JobState::Running;
        r.job_id = Some(api.job_id);
        r.registered_at = api.registered_at;
        r.registered_s = Some(registered);
    });
    let mut report = JobReport::new(&cfg.name, api.job_id, registered, opts.csv.clone())?;
    let mut server_state = ServerState::default();
    let rounds = rounds::Rounds {
        cfg: &cfg,
        task: &task,
        held_out: &held_out,
        shared: &shared,
        api: &api,
        opts: &opts,
    };
    let mut result = rounds.run(&mut report, &mut server_state).await;
    if result.is_ok() {
        result = api.finish().await.map_err(JobError::from);
    }
    match &result {
        Ok(()) => {
            report.finished_s = Some(opts.t0.elapsed().as_secs_f64());
            tracing::info!(job = api.job_id, jct_s = report.jct_s(), "job finished");
        }
        Err(e) => tracing::warn!(job = api.job_id, error = %e, "job failed"),
    }
    shared.update_results(|r| match &result {
        Ok(()) => {
            r.state = JobState::Finished;
            r.finished_s = report.finished_s;
        }
        Err(e) => {
            r.state = JobState::Failed;
            r.error = Some(e.to_string());
        }
    });
    if let Some(linger) = opts.linger
        && tokio::time::timeout(linger, shared.collected.notified())
            .await
            .is_err()
    {
        tracing::warn!(
            job = api.job_id,
            linger_s = linger.as_secs_f64(),
            "nobody collected the results"
        );
    }
    server.abort();
    result.map(|()| report)
}

/// Sleeps until an admitted job's planned launch: the manager assigns it no device
/// before then, so a round submitted earlier would only burn its deadline.
async fn wait_for_launch(name: &str, plan: &venn_core::admission::AdmissionPlan) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let wait = plan.launch_at.secs() - now;
    tracing::info!(
        job = name,
        launch_in_s = format!("{:.0}", wait.max(0.0)),
        expected_value = plan.expected_value,
        expected_price = plan.expected_price,
        "admitted"
    );
    if wait > 0.0 {
        tokio::time::sleep(std::time::Duration::from_secs_f64(wait)).await;
    }
}

#[cfg(test)]
mod plan_url_tests {
    use super::plan_url;

    #[test]
    fn the_plan_url_is_the_advertised_one_or_a_dialable_bound_address() {
        let bound = "127.0.0.1:9100".parse().unwrap();
        assert_eq!(plan_url(bound, None).unwrap(), "http://127.0.0.1:9100");
        let any = "0.0.0.0:9100".parse().unwrap();
        let e = plan_url(any, None).unwrap_err().to_string();
        assert!(e.contains("--advertise"), "{e}");
        assert_eq!(
            plan_url(any, Some("http://jobs.lab:9100/")).unwrap(),
            "http://jobs.lab:9100"
        );
        assert!(plan_url(any, Some("jobs.lab:9100")).is_err());
    }
}
