//! One device's life: wait for a session, check in, serve a task or wait as told.
//!
//! The device future stays small while idle (a few timers and counters); everything a
//! task needs is built inside [`serve`], which is boxed so that its larger state only
//! exists while a task is in progress.

use super::{Shared, TaskTiming, emulated_duration};
use crate::availability::DeviceState;
use datasets::Samples;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::time::{Instant, sleep_until, timeout_at};
use venn_api::TaskPlan;
use venn_api::client::{ClientError, JobClient};
use venn_api::manager::TaskReport;
use venn_api::manager::{Assignment, CheckInReply};
use venn_core::rng::{SeededRng, derive_seed as mix};

/// Longest pause between failed check-ins.
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// Shortest pause between check-ins, whatever the manager says (no busy loops).
const MIN_RETRY: Duration = Duration::from_millis(10);
/// Slack for rounding between trace and wall time at a session's end.
const EPS: Duration = Duration::from_millis(1);

/// How a task ended for the device.
enum Outcome {
    /// The job accepted the update.
    Uploaded,
    /// The task was reported failed.
    Failed,
    /// The session ended first; the device is offline now.
    SessionEnded,
    /// The device vanished on purpose (`drop_fraction`) and must stay away for a while.
    Vanished,
}

/// Runs `fut` unless `end` comes first (`None` when it did).
async fn until<T>(end: Option<Instant>, fut: impl Future<Output = T>) -> Option<T> {
    match end {
        Some(e) => timeout_at(e, fut).await.ok(),
        None => Some(fut.await),
    }
}

/// Sleeps `wait`, but no later than `end`.
async fn sleep_capped(wait: Duration, end: Option<Instant>) {
    let at = Instant::now() + wait;
    sleep_until(end.map_or(at, |e| e.min(at))).await;
}

/// Runs an HTTP request once a slot is free (see `AgentConfig::max_inflight_http`).
async fn with_slot<T>(sh: &Shared, fut: impl Future<Output = T>) -> T {
    let _slot = sh
        .http_slots
        .acquire()
        .await
        .expect("the HTTP semaphore is never closed");
    fut.await
}

/// Calls the manager once a slot is free, giving up after the HTTP timeout (the manager
/// client itself has none, and a hung manager must not freeze the device forever).
async fn manager_call<T, E: std::fmt::Display>(
    sh: &Shared,
    fut: impl Future<Output = Result<T, E>>,
) -> Result<T, String> {
    let _slot = sh
        .http_slots
        .acquire()
        .await
        .expect("the HTTP semaphore is never closed");
    match tokio::time::timeout(sh.http_timeout, fut).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!("no answer within {:?}", sh.http_timeout)),
    }
}

/// Exponential backoff from 0.5 s to [`MAX_BACKOFF`], jittered so devices spread out.
fn backoff(failures: u32, rng: &mut SeededRng) -> Duration {
    let base = Duration::from_millis(500).saturating_mul(1 << failures.min(6));
    base.min(MAX_BACKOFF).mul_f64(rng.range_f64(0.5, 1.0))
}

/// The device loop; returns when the device will never be online again.
pub(super) async fn run(sh: Arc<Shared>, index: usize) {
    let id = sh.first_device_id + index as u64;
    let mut rng = SeededRng::new(mix(sh.seed, id));
    let jitter = sh.start_jitter.mul_f64(rng.f64());
    tokio::time::sleep(jitter).await;
    let mut checked_in = false;
    let mut failures = 0u32;
    loop {
        let now = Instant::now();
        let session_end = match sh.availability.state(index, sh.timeline.trace_at(now)) {
            DeviceState::Offline { next: None } => return,
            DeviceState::Offline { next: Some(t) } => match sh.timeline.wall_at(t) {
                Some(at) => {
                    sleep_until(at).await;
                    continue;
                }
                None => return,
            },
            DeviceState::Online { until } => sh.timeline.wall_at(until),
        };
        // Rounding between trace and wall time can leave a session open for a moment
        // past its wall end; a device must not check in as it leaves.
        if let Some(end) = session_end
            && end <= now + EPS
        {
            sleep_until(end + EPS).await;
            continue;
        }
        // The device knows when its session ends and says so: it is offered only jobs
        // whose task fits before then.
        let online_for = session_end.map(|end| end.saturating_duration_since(now).as_secs_f64());
        let reply = manager_call(
            &sh,
            sh.client.check_in_for(id, &sh.profiles[index], online_for),
        )
        .await;
        let reply = match reply {
            Ok(r) => r,
            Err(e) => {
                sh.stats.check_in_errors.fetch_add(1, Relaxed);
                failures += 1;
                let wait = backoff(failures, &mut rng);
                tracing::debug!(device = id, error = %e, ?wait, "check-in failed");
                sleep_capped(wait, session_end).await;
                continue;
            }
        };
        failures = 0;
        sh.stats.check_ins.fetch_add(1, Relaxed);
        if !checked_in {
            checked_in = true;
            sh.stats.devices_checked_in.fetch_add(1, Relaxed);
        }
        match reply {
            CheckInReply::Retry { retry_after_s } => {
                // The manager paces check-ins in wall time, so the wait is not compressed;
                // up to 10 % extra keeps devices that were told the same from re-aligning.
                let wait = Duration::from_secs_f64(retry_after_s.clamp(0.0, 86_400.0))
                    .max(MIN_RETRY)
                    .mul_f64(rng.range_f64(1.0, 1.1));
                sleep_capped(wait, session_end).await;
            }
            CheckInReply::Assigned { assignment } => {
                let vanish = rng.chance(sh.drop_fraction);
                let outcome =
                    Box::pin(serve(&sh, index, id, &assignment, session_end, vanish)).await;
                match outcome {
                    Outcome::Uploaded | Outcome::SessionEnded => {}
                    Outcome::Failed => sleep_capped(backoff(1, &mut rng), session_end).await,
                    Outcome::Vanished => {
                        // Gone until the session ends, or (always online) until the lease
                        // has released the task, so it never returns while holding it.
                        let lease =
                            Duration::from_secs_f64(assignment.lease_s.clamp(0.0, 86_400.0));
                        sleep_capped(lease, session_end).await;
                    }
                }
            }
        }
    }
}

/// Reports the task failed (best effort: the lease releases it anyway).
async fn fail(sh: &Shared, id: u64, token: &str) -> Outcome {
    sh.stats.failed.fetch_add(1, Relaxed);
    if let Err(e) = manager_call(sh, sh.client.report_task(token, TaskReport::Failed)).await {
        tracing::debug!(device = id, error = %e, "could not report a failed task");
    }
    Outcome::Failed
}

/// The session ended before the task could: leave without a word.
fn session_ended(sh: &Shared, id: u64, a: &Assignment) -> Outcome {
    sh.stats.dropped.fetch_add(1, Relaxed);
    sh.stats.dropped_session_end.fetch_add(1, Relaxed);
    tracing::debug!(
        device = id,
        job = a.job_id,
        round = a.round,
        "session ended mid-task"
    );
    Outcome::SessionEnded
}

/// What every step of one assignment needs to know about the device and its task.
struct Serving<'a> {
    sh: &'a Shared,
    index: usize,
    id: u64,
    a: &'a Assignment,
    session_end: Option<Instant>,
}

/// A local training that succeeded, with what its emulated duration follows from.
struct Trained {
    weights: Vec<u8>,
    samples: u64,
    loss: f64,
    compute: Duration,
    timing: TaskTiming,
}

/// Serves one assignment: ack, fetch, train, wait out the emulated duration, upload.
async fn serve(
    sh: &Shared,
    index: usize,
    id: u64,
    a: &Assignment,
    session_end: Option<Instant>,
    vanish: bool,
) -> Outcome {
    let started = Instant::now();
    sh.stats.assignments.fetch_add(1, Relaxed);
    let token = a.task_token.as_str();
    if let Err(e) = manager_call(sh, sh.client.report_task(token, TaskReport::Ack)).await {
        tracing::warn!(device = id, job = a.job_id, error = %e, "could not acknowledge a task");
        return fail(sh, id, token).await;
    }
    let s = Serving {
        sh,
        index,
        id,
        a,
        session_end,
    };
    let job = JobClient::new(sh.client.http(), &a.plan_url, token, sh.http_timeout);
    let (plan, global) = match s.fetch(&job).await {
        Ok(x) => x,
        Err(outcome) => return outcome,
    };
    if vanish {
        // Vanishing before training keeps the CPU for devices whose work counts; the
        // job sees the same thing either way: a download and then silence.
        sh.stats.dropped.fetch_add(1, Relaxed);
        tracing::debug!(
            device = id,
            job = a.job_id,
            round = a.round,
            "vanishing mid-task"
        );
        return Outcome::Vanished;
    }
    let trained = match s.train(&plan, global).await {
        Ok(t) => t,
        Err(outcome) => return outcome,
    };
    let emulated = match s.wait_out(started, &trained).await {
        Ok(d) => d,
        Err(outcome) => return outcome,
    };
    s.upload(&job, trained, emulated).await
}

impl Serving<'_> {
    fn token(&self) -> &str {
        self.a.task_token.as_str()
    }

    /// The plan and the global weights, checked against the assignment.
    async fn fetch(&self, job: &JobClient<'_>) -> Result<(TaskPlan, Vec<u8>), Outcome> {
        let (sh, id, a) = (self.sh, self.id, self.a);
        let fetched = until(self.session_end, async {
            let plan = with_slot(sh, job.plan()).await?;
            let weights = with_slot(sh, job.weights(weights_limit(a.model_size_bytes))).await?;
            Ok::<_, ClientError>((plan, weights))
        })
        .await;
        let (plan, global) = match fetched {
            None => return Err(session_ended(sh, id, a)),
            Some(Err(e)) => {
                tracing::warn!(device = id, job = a.job_id, round = a.round, error = %e, "could not fetch the task");
                return Err(fail(sh, id, self.token()).await);
            }
            Some(Ok(x)) => x,
        };
        if plan.job_id != a.job_id
            || plan.round != a.round
            || plan.weights_bytes != global.len() as u64
        {
            tracing::warn!(
                device = id,
                assigned = ?(a.job_id, a.round),
                plan = ?(plan.job_id, plan.round, plan.weights_bytes),
                weights = global.len(),
                "the plan does not match the assignment or the weights"
            );
            return Err(fail(sh, id, self.token()).await);
        }
        Ok((plan, global))
    }

    /// Trains the global weights on the device's data on a worker thread.
    async fn train(&self, plan: &TaskPlan, global: Vec<u8>) -> Result<Trained, Outcome> {
        let (sh, id) = (self.sh, self.id);
        let task = match sh.tasks.get(&plan.task, &plan.params) {
            Ok(t) => t,
            Err(e) => {
                tracing::warn!(device = id, task = %plan.task, error = %e, "cannot build the task");
                return Err(fail(sh, id, self.token()).await);
            }
        };
        // Waiting for a worker counts as time on the device; giving up at the session end
        // spares the CPU a training nobody will receive.
        let permit = match until(self.session_end, sh.train_pool.acquire()).await {
            None => return Err(session_ended(sh, id, self.a)),
            Some(p) => p.expect("the worker semaphore is never closed"),
        };
        let data = sh.data.clone();
        let writers: Vec<usize> = sh.partition.writers(self.index as u64).collect();
        let seed = mix(plan.seed, id);
        let round = plan.round;
        let down = global.len() as u64;
        let work = task.work();
        let joined = tokio::task::spawn_blocking(move || {
            let t = std::time::Instant::now();
            let r = if let [w] = writers[..] {
                task.train_round(&global, data.train[w].view(), seed, round)
            } else {
                let samples = Samples::from_writers(writers.iter().map(|&w| &data.train[w]));
                task.train_round(&global, samples.view(), seed, round)
            };
            (r, t.elapsed())
        })
        .await;
        drop(permit);
        let (result, compute) = match joined {
            Ok(x) => x,
            Err(e) => {
                tracing::error!(device = id, error = %e, "training panicked");
                return Err(fail(sh, id, self.token()).await);
            }
        };
        let update = match result {
            Ok(u) => u,
            Err(e) => {
                tracing::warn!(device = id, task = %plan.task, error = %e, "training failed");
                return Err(fail(sh, id, self.token()).await);
            }
        };
        sh.stats.trainings.fetch_add(1, Relaxed);
        sh.stats.samples_trained.fetch_add(update.samples, Relaxed);
        sh.stats
            .training_us
            .fetch_add(compute.as_micros() as u64, Relaxed);
        let bytes = down + update.weights.len() as u64;
        let timing = match work {
            Some(work) => TaskTiming::Work {
                work,
                samples: update.samples,
            },
            None => TaskTiming::Measured {
                compute,
                transfer_bytes: bytes,
            },
        };
        Ok(Trained {
            weights: update.weights,
            samples: update.samples,
            loss: update.loss,
            compute,
            timing,
        })
    }

    /// Waits until the task's emulated duration since `started` has passed, unless the
    /// session ends first; the emulated duration.
    async fn wait_out(&self, started: Instant, trained: &Trained) -> Result<Duration, Outcome> {
        let sh = self.sh;
        let emulated = emulated_duration(
            trained.timing,
            &sh.profiles[self.index],
            sh.timeline.compress,
        );
        let finish = (started + emulated).max(Instant::now());
        if let Some(end) = self.session_end
            && finish > end
        {
            sleep_until(end).await;
            return Err(session_ended(sh, self.id, self.a));
        }
        sleep_until(finish).await;
        Ok(emulated)
    }

    /// Uploads the update; a refused or failed upload reports the task failed.
    async fn upload(&self, job: &JobClient<'_>, trained: Trained, emulated: Duration) -> Outcome {
        let (sh, id, a) = (self.sh, self.id, self.a);
        tracing::debug!(
            device = id,
            job = a.job_id,
            round = a.round,
            samples = trained.samples,
            loss = trained.loss,
            compute_s = trained.compute.as_secs_f64(),
            emulated_s = emulated.as_secs_f64(),
            "uploading"
        );
        match with_slot(sh, job.upload(trained.weights, trained.samples)).await {
            Ok(()) => {
                sh.stats.updates_uploaded.fetch_add(1, Relaxed);
                Outcome::Uploaded
            }
            Err(e) => {
                if let Some(status) = e.status()
                    && (400..500).contains(&status)
                {
                    sh.stats.rejected.fetch_add(1, Relaxed);
                }
                // A straggler arriving after its round closed (401/409) is normal FL life, not
                // a fault worth a warning, and so is one whose job has finished and stopped
                // serving (connection refused); anything else is.
                if matches!(e.status(), Some(401 | 409)) {
                    tracing::debug!(device = id, job = a.job_id, round = a.round, error = %e, "late upload refused");
                } else if matches!(&e, ClientError::Http { source, .. } if source.is_connect()) {
                    tracing::info!(
                        device = id,
                        job = a.job_id,
                        round = a.round,
                        "job no longer serving (finished or stopped); update dropped"
                    );
                } else {
                    tracing::warn!(device = id, job = a.job_id, round = a.round, error = %e, "upload failed");
                }
                fail(sh, id, self.token()).await
            }
        }
    }
}

/// The most bytes of global weights a device downloads: twice the job's registered model
/// size plus 1 MiB of framing (the slack the job's own upload limit allows), or 1 GiB from
/// a manager that does not say the size.
fn weights_limit(model_size_bytes: u64) -> u64 {
    const MIB: u64 = 1 << 20;
    if model_size_bytes == 0 {
        1024 * MIB
    } else {
        model_size_bytes.saturating_mul(2).saturating_add(MIB)
    }
}
