//! The soak's load: emulated devices checking in as fast as `connections` workers can,
//! beside the experiment's own devices. Every assignment is acknowledged and then
//! reported finished; each token whose acknowledgement (or finished report) the manager
//! answered 2xx is remembered, so that the database can be checked for it afterwards.
//!
//! Load devices carry the tag [`LOAD_TAG`] and weak scores; the load jobs require the tag,
//! so experiment devices never serve them, and experiment jobs that require an OS version
//! above 1 never get a load device. Check-in outcomes are counted in 10 ms buckets of the
//! time each request started, from which the report reads the time to recover after
//! each fault.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use venn_api::client::{ClientError, JobSession, ManagerClient};
use venn_api::manager::{CheckInReply, RegisterJob, SubmitRound, TaskReport};
use venn_core::{DeviceProfile, Requirement};

/// The tag load devices carry and load jobs require.
pub const LOAD_TAG: &str = "soak-load";
/// Device ids of the load start here, far above any experiment's.
pub const FIRST_LOAD_DEVICE: u64 = 1 << 40;
/// Width of a bucket of check-in outcomes, ms.
const BUCKET_MS: u64 = 10;

/// A load device's profile: weak, tagged.
pub fn load_profile() -> DeviceProfile {
    DeviceProfile {
        cpu_score: 0.5,
        mem_score: 0.5,
        os_version: 1.0,
        ms_per_sample: 50.0,
        bandwidth_kbps: 10_000.0,
        tags: vec![LOAD_TAG.into()],
    }
}

/// Devices a load job's round asks for; [`keep_rounds_open`] closes a round once they are
/// all assigned and opens the next.
pub const LOAD_ROUND_DEMAND: u32 = 2_000;

/// The next round of a load job.
fn load_round() -> SubmitRound {
    SubmitRound {
        demand: LOAD_ROUND_DEMAND,
        deadline_s: 86_400.0,
        min_response_fraction: 0.5,
        close_at: None,
    }
}

/// Registers `n` load jobs, each with a round of [`LOAD_ROUND_DEMAND`] devices, requiring
/// [`LOAD_TAG`]: every load check-in becomes an assignment the manager persists.
pub async fn register_load_jobs(base: &str, n: usize) -> Result<Vec<JobSession>, ClientError> {
    let client = ManagerClient::new(base);
    let mut jobs = Vec::new();
    for i in 0..n {
        let requirement = Requirement {
            tags: vec![LOAD_TAG.into()],
            ..Requirement::any()
        };
        let job = client
            .register_job(&RegisterJob {
                name: format!("soak-load-{i}"),
                requirement,
                rounds: venn_api::manager::limits::MAX_ROUNDS,
                model_size_bytes: 1_000,
                plan_url: "http://127.0.0.1:9".into(),
                task_cost: None,
                statement: None,
            })
            .await?;
        job.submit_round(&load_round()).await?;
        jobs.push(job);
    }
    Ok(jobs)
}

/// Until [`Recorder::stop`]: every 200 ms, closes each load job's round once its demand is
/// assigned and opens the next, so the load keeps turning into assignments (and round
/// closes) however long it runs. Calls that fail (the manager is away) are tried again
/// on the next pass. Returns the rounds it closed.
pub async fn keep_rounds_open(jobs: Vec<JobSession>, rec: Arc<Recorder>) -> (Vec<JobSession>, u64) {
    let mut closed = 0;
    while !rec.stop.load(Relaxed) {
        for job in &jobs {
            let Ok(st) = job.client().job(job.job_id).await else {
                continue;
            };
            match st.open_round {
                None => {
                    let _ = job.submit_round(&load_round()).await;
                }
                Some(o) if o.assigned >= o.demand => {
                    if job
                        .close_round(o.round, venn_core::RoundOutcome::Success)
                        .await
                        .is_ok()
                    {
                        closed += 1;
                        let _ = job.submit_round(&load_round()).await;
                    }
                }
                Some(_) => {}
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    (jobs, closed)
}

/// What the load's workers share while they run.
pub struct Recorder {
    start: Instant,
    ok: Vec<AtomicU32>,
    failed: Vec<AtomicU32>,
    /// Answers with a 5xx status (check-ins and task reports).
    pub server_errors: AtomicU64,
    /// The first 5xx answer, as the client read it (status, code, message).
    pub first_server_error: Mutex<Option<String>>,
    pub(super) stop: AtomicBool,
}

impl Recorder {
    /// Buckets for `horizon` of load; outcomes later than that are not bucketed.
    pub fn new(horizon: Duration) -> Arc<Recorder> {
        let n = (horizon.as_millis() as u64 / BUCKET_MS + 1) as usize;
        Arc::new(Recorder {
            start: Instant::now(),
            ok: (0..n).map(|_| AtomicU32::new(0)).collect(),
            failed: (0..n).map(|_| AtomicU32::new(0)).collect(),
            server_errors: AtomicU64::new(0),
            first_server_error: Mutex::new(None),
            stop: AtomicBool::new(false),
        })
    }

    /// Seconds since the load started.
    pub fn now_s(&self) -> f64 {
        self.start.elapsed().as_secs_f64()
    }

    fn bucket(&self, at: Instant) -> usize {
        (at.duration_since(self.start).as_millis() as u64 / BUCKET_MS) as usize
    }

    fn note(&self, at: Instant, ok: bool) {
        let b = self.bucket(at);
        let v = if ok { &self.ok } else { &self.failed };
        if let Some(c) = v.get(b) {
            c.fetch_add(1, Relaxed);
        }
    }

    fn note_error(&self, e: &ClientError) {
        if e.status().is_some_and(|s| s >= 500) {
            self.server_errors.fetch_add(1, Relaxed);
            let mut first = self
                .first_server_error
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            first.get_or_insert_with(|| match e {
                ClientError::Api { status, error, .. } => format!(
                    "HTTP {status}, JSON error code {:?}: {}",
                    error.code, error.message
                ),
                other => format!("{other} (not the JSON error body)"),
            });
        }
    }

    /// Seconds from `from_s` (since the load started) to the start of the first check-in
    /// that succeeded after it, and whether any failed in between; `None` if none did.
    pub fn recovery_after(&self, from_s: f64) -> Option<(f64, bool)> {
        let first = (from_s * 1000.0) as u64 / BUCKET_MS;
        let mut saw_failure = false;
        for b in first as usize..self.ok.len() {
            saw_failure |= self.failed[b].load(Relaxed) > 0;
            if self.ok[b].load(Relaxed) > 0 && (saw_failure || b > first as usize) {
                return Some((
                    ((b as u64 * BUCKET_MS) as f64 / 1000.0 - from_s).max(0.0),
                    saw_failure,
                ));
            }
        }
        None
    }

    /// Asks the workers to stop after their current request.
    pub fn stop(&self) {
        self.stop.store(true, Relaxed);
    }
}

/// One worker's tallies.
#[derive(Default)]
pub struct WorkerTally {
    /// Successful check-in latencies, µs.
    pub latency_us: Vec<u32>,
    /// Check-ins answered 2xx.
    pub ok: u64,
    /// Check-ins that failed (no answer, or an error status).
    pub failed: u64,
    /// Assignments received.
    pub assigned: u64,
    /// Tokens (as their 128 bits) whose acknowledgement was answered 2xx.
    pub acked: Vec<String>,
    /// Tokens whose finished report was answered 2xx.
    pub finished: Vec<String>,
}

/// Runs `connections` workers against `base` until [`Recorder::stop`], device ids
/// cycling over `devices` from [`FIRST_LOAD_DEVICE`]; returns their tallies.
pub async fn run(
    base: String,
    connections: usize,
    devices: usize,
    rec: Arc<Recorder>,
) -> Vec<WorkerTally> {
    let client = ManagerClient::new(&base);
    let mut set = tokio::task::JoinSet::new();
    let stride = connections.max(1);
    for w in 0..stride {
        let (client, rec) = (client.clone(), rec.clone());
        set.spawn(worker(client, rec, w, stride, devices.max(1)));
    }
    let mut out = Vec::new();
    while let Some(r) = set.join_next().await {
        if let Ok(t) = r {
            out.push(t);
        }
    }
    out
}

async fn worker(
    client: ManagerClient,
    rec: Arc<Recorder>,
    w: usize,
    stride: usize,
    devices: usize,
) -> WorkerTally {
    let profile = load_profile();
    let mut t = WorkerTally::default();
    let mut k = w;
    while !rec.stop.load(Relaxed) {
        let device = FIRST_LOAD_DEVICE + (k % devices) as u64;
        k += stride;
        let t0 = Instant::now();
        match client.check_in(device, &profile).await {
            Ok(reply) => {
                t.latency_us
                    .push(t0.elapsed().as_micros().min(u32::MAX as u128) as u32);
                t.ok += 1;
                rec.note(t0, true);
                if let CheckInReply::Assigned { assignment } = reply {
                    t.assigned += 1;
                    complete(&client, &rec, &assignment.task_token, &mut t).await;
                }
            }
            Err(e) => {
                t.failed += 1;
                rec.note(t0, false);
                rec.note_error(&e);
                // A manager that is away refuses at once: do not spin on it.
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    t
}

/// Acknowledges the task, then reports it finished, remembering what was answered 2xx.
async fn complete(client: &ManagerClient, rec: &Recorder, token: &str, t: &mut WorkerTally) {
    match client.report_task(token, TaskReport::Ack).await {
        Ok(()) => t.acked.push(token.to_string()),
        Err(e) => {
            rec.note_error(&e);
            return;
        }
    }
    match client.report_task(token, TaskReport::Finished).await {
        Ok(()) => t.finished.push(token.to_string()),
        Err(e) => rec.note_error(&e),
    }
}
