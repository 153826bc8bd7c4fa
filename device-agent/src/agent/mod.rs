//! The emulated device population: one cheap tokio task per device, all in one process.
//!
//! Each device loops: while its [`Availability`] says it is online it checks in with the
//! manager; when assigned it acknowledges, fetches the job's plan and global weights,
//! trains them *for real* with the task named in the plan (built from a shared
//! [`Registry`] and cached per name and parameters), waits until its emulated duration
//! has passed, and uploads the update. A device whose session ends before it would
//! finish drops off silently, as does a `drop_fraction` of assigned devices at random;
//! a device that hits an error reports the task failed.
//!
//! Training is CPU work on a shared worker pool ([`AgentConfig::workers`] permits around
//! `spawn_blocking`), so 10,000 devices do not oversubscribe a few cores; the devices
//! themselves only await timers and HTTP, and HTTP requests in flight are capped too
//! ([`AgentConfig::max_inflight_http`]) so a herd of check-ins cannot exhaust sockets.
//!
//! # Emulated time
//!
//! A device's task lasts, in trace seconds, what the work it does costs on that device
//! (venn-core's `TaskWork`, FedScale's model, the same rule as `venn-lab sim`'s virtual
//! clock): its local samples × local epochs × the model's cost per sample scaled by its
//! `ms_per_sample`, plus the model's bytes down and up over its bandwidth. A task that
//! cannot state its work (`FlTask::work` is `None`) lasts
//! `compute × ms_per_sample / 78 + bytes × 8 / (bandwidth_kbps × 1000)`, where `compute`
//! is the measured training time on this host (taken as the reference device,
//! 78 ms/sample) and `bytes` the weights downloaded plus the update uploaded. Divided by
//! the compression factor it gives the wall time from assignment to upload
//! ([`emulated_duration`]). Real training that takes longer than that is not hidden:
//! the upload then goes out as soon as training ends.
//!
//! Entry points: [`run_population`], or [`Agent`] to watch [`LiveStats`] while it runs.

mod device;
mod shard;
mod tasks;

pub use shard::Shard;
pub use tasks::TaskCache;

use crate::availability::{Availability, AvailabilityError, Timeline};
use datasets::Femnist;
use fl_task::task::Registry;
use serde::Serialize;
use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use thiserror::Error;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use venn_api::client::ManagerClient;
use venn_core::profile::REFERENCE_MS_PER_SAMPLE;
use venn_core::{DataPartition, DeviceProfile, TaskWork};

/// Why a population could not start.
#[derive(Debug, Error)]
pub enum AgentError {
    /// A configuration value out of range.
    #[error("invalid agent configuration: {0}")]
    Config(String),
    /// The availability schedule or timeline is unusable.
    #[error(transparent)]
    Availability(#[from] AvailabilityError),
    /// The FEMNIST data could not be found or read.
    #[error("FEMNIST data: {0}")]
    Data(#[from] datasets::LeafError),
}

/// What a population is and how it behaves.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    /// Manager base URL, e.g. `http://127.0.0.1:7070`.
    pub manager: String,
    /// One profile per device; the population has `profiles.len()` devices.
    pub profiles: Vec<DeviceProfile>,
    /// Id of device 0 at the manager (device `i` is `first_device_id + i`), so several
    /// agent processes can share one manager.
    pub first_device_id: u64,
    /// When each device is online, trace seconds.
    pub availability: Arc<Availability>,
    /// Trace time at which the run starts, seconds.
    pub start_s: f64,
    /// Trace seconds per wall second (1 = real time).
    pub compress: f64,
    /// Training data: device `i` owns train writers `(i × W + k) mod n`, `k < W`.
    pub data: Arc<Femnist>,
    /// Writers per device (`W` above, at least 1).
    pub writers_per_device: usize,
    /// Trainings that may run at once (0 = the number of cores).
    pub workers: usize,
    /// HTTP requests in flight at once, over all devices.
    pub max_inflight_http: usize,
    /// Probability that an assigned device vanishes mid-task (after downloading).
    pub drop_fraction: f64,
    /// Seed of every random choice (start jitter, retry jitter, drops, training seeds).
    pub seed: u64,
    /// Devices start at a uniform random offset in `[0, start_jitter)` so that a whole
    /// population does not check in in the same millisecond.
    pub start_jitter: Duration,
    /// Limit of one HTTP request to the manager or a job.
    pub http_timeout: Duration,
    /// Which slice of the population this agent emulates (the whole by default): the
    /// devices keep their whole-population ids, profiles and availability.
    pub shard: Shard,
}

impl AgentConfig {
    /// A population with one device per profile, always online, in real time, and the
    /// other knobs at their defaults.
    pub fn new(
        manager: impl Into<String>,
        profiles: Vec<DeviceProfile>,
        data: Arc<Femnist>,
    ) -> Self {
        AgentConfig {
            manager: manager.into(),
            profiles,
            first_device_id: 0,
            availability: Arc::new(Availability::AlwaysOnline),
            start_s: 0.0,
            compress: 1.0,
            data,
            writers_per_device: 1,
            workers: 0,
            max_inflight_http: 256,
            drop_fraction: 0.0,
            seed: 0,
            start_jitter: Duration::from_secs(1),
            http_timeout: Duration::from_secs(60),
            shard: Shard::WHOLE,
        }
    }

    fn validate(&self) -> Result<(), AgentError> {
        let bad = |m: &str| Err(AgentError::Config(m.to_string()));
        if !(0.0..=1.0).contains(&self.drop_fraction) {
            return bad("drop fraction must be in [0, 1]");
        }
        if self.writers_per_device == 0 {
            return bad("each device needs at least one writer");
        }
        if self.data.train.is_empty() && !self.profiles.is_empty() {
            return bad("the data set has no train writers");
        }
        if self.max_inflight_http == 0 {
            return bad("at least one HTTP request must be allowed in flight");
        }
        if let Some(n) = self.availability.devices()
            && n < self.profiles.len()
        {
            return Err(AgentError::Config(format!(
                "availability covers {n} devices but the population has {}",
                self.profiles.len()
            )));
        }
        Ok(())
    }
}

/// Loads the main FEMNIST writers from `dir` (or wherever [`datasets::locate`] finds
/// them) for sharing among all devices.
pub fn load_femnist(dir: Option<&Path>) -> Result<Arc<Femnist>, AgentError> {
    let data = Femnist::open(dir, datasets::WriterSet::Main)?;
    tracing::info!(writers = data.train.len(), "loaded FEMNIST");
    Ok(Arc::new(data))
}

/// What a task's device time follows from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum TaskTiming {
    /// The work done (the task states it: `FlTask::work`), on the device's local samples:
    /// venn-core's rule, the same as the virtual clock's.
    Work {
        /// The job's per-task work.
        work: TaskWork,
        /// The device's local samples.
        samples: u64,
    },
    /// A task that cannot state its work: the training time measured on this host (taken
    /// as the reference device's) and the bytes actually moved.
    Measured {
        /// Measured training time.
        compute: Duration,
        /// Bytes downloaded plus uploaded.
        transfer_bytes: u64,
    },
}

/// The wall time from assignment to upload of a task (see the module docs): the device
/// time of `timing` on `profile`, divided by `compress`.
pub fn emulated_duration(timing: TaskTiming, profile: &DeviceProfile, compress: f64) -> Duration {
    let device_s = match timing {
        TaskTiming::Work { work, samples } => profile.task_seconds(work.cost(samples)),
        TaskTiming::Measured {
            compute,
            transfer_bytes,
        } => {
            compute.as_secs_f64() * profile.ms_per_sample / REFERENCE_MS_PER_SAMPLE
                + transfer_bytes as f64 * 8.0 / (profile.bandwidth_kbps.max(1e-9) * 1000.0)
        }
    };
    let wall = device_s / compress;
    // Clamped so a degenerate profile cannot overflow `Duration`.
    Duration::from_secs_f64(if wall.is_finite() {
        wall.clamp(0.0, 1e9)
    } else {
        1e9
    })
}

/// Counters updated by the devices while they run.
#[derive(Debug, Default)]
pub struct LiveStats {
    check_ins: AtomicU64,
    devices_checked_in: AtomicU64,
    check_in_errors: AtomicU64,
    assignments: AtomicU64,
    updates_uploaded: AtomicU64,
    rejected: AtomicU64,
    dropped: AtomicU64,
    dropped_session_end: AtomicU64,
    failed: AtomicU64,
    trainings: AtomicU64,
    samples_trained: AtomicU64,
    training_us: AtomicU64,
}

impl LiveStats {
    /// A consistent-enough copy of the counters (each read on its own).
    pub fn snapshot(&self) -> AgentStats {
        AgentStats {
            check_ins: self.check_ins.load(Relaxed),
            devices_checked_in: self.devices_checked_in.load(Relaxed),
            check_in_errors: self.check_in_errors.load(Relaxed),
            assignments: self.assignments.load(Relaxed),
            updates_uploaded: self.updates_uploaded.load(Relaxed),
            rejected: self.rejected.load(Relaxed),
            dropped: self.dropped.load(Relaxed),
            dropped_session_end: self.dropped_session_end.load(Relaxed),
            failed: self.failed.load(Relaxed),
            trainings: self.trainings.load(Relaxed),
            samples_trained: self.samples_trained.load(Relaxed),
            training_seconds: self.training_us.load(Relaxed) as f64 / 1e6,
        }
    }
}

/// What a population did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct AgentStats {
    /// Check-ins the manager answered.
    pub check_ins: u64,
    /// Devices that checked in at least once.
    pub devices_checked_in: u64,
    /// Check-ins that failed (manager unreachable or erroring).
    pub check_in_errors: u64,
    /// Tasks assigned.
    pub assignments: u64,
    /// Updates the job accepted.
    pub updates_uploaded: u64,
    /// Updates the job rejected (also counted in `failed`).
    pub rejected: u64,
    /// Tasks abandoned silently: the random `drop_fraction` plus session ends.
    pub dropped: u64,
    /// Of `dropped`, those whose session ended first.
    pub dropped_session_end: u64,
    /// Tasks reported failed (errors, rejected uploads).
    pub failed: u64,
    /// Local trainings completed.
    pub trainings: u64,
    /// Samples trained on, summed over trainings.
    pub samples_trained: u64,
    /// Measured training seconds, summed over trainings.
    pub training_seconds: f64,
}

impl AgentStats {
    /// The counters of `self` and `other` together: several shards of one population,
    /// read back from their hosts, as one.
    pub fn add(&mut self, other: &AgentStats) {
        self.check_ins += other.check_ins;
        self.devices_checked_in += other.devices_checked_in;
        self.check_in_errors += other.check_in_errors;
        self.assignments += other.assignments;
        self.updates_uploaded += other.updates_uploaded;
        self.rejected += other.rejected;
        self.dropped += other.dropped;
        self.dropped_session_end += other.dropped_session_end;
        self.failed += other.failed;
        self.trainings += other.trainings;
        self.samples_trained += other.samples_trained;
        self.training_seconds += other.training_seconds;
    }
}

/// Everything the devices share, behind one `Arc`.
struct Shared {
    client: ManagerClient,
    profiles: Vec<DeviceProfile>,
    first_device_id: u64,
    availability: Arc<Availability>,
    timeline: Timeline,
    data: Arc<Femnist>,
    /// Which writers each device trains on (by its index in the population).
    partition: DataPartition,
    drop_fraction: f64,
    seed: u64,
    start_jitter: Duration,
    http_timeout: Duration,
    tasks: TaskCache,
    train_pool: Semaphore,
    http_slots: Semaphore,
    stats: Arc<LiveStats>,
}

/// A population ready to run; [`Agent::stats`] can be watched while [`Agent::run`] runs.
pub struct Agent {
    cfg: AgentConfig,
    registry: Registry,
    stats: Arc<LiveStats>,
}

impl Agent {
    /// Checks the configuration.
    pub fn new(cfg: AgentConfig, registry: Registry) -> Result<Self, AgentError> {
        cfg.validate()?;
        // Build the timeline once here so a bad factor fails before anything starts.
        Timeline::starting_now(cfg.start_s, cfg.compress)?;
        Ok(Agent {
            cfg,
            registry,
            stats: Arc::new(LiveStats::default()),
        })
    }

    /// The live counters.
    pub fn stats(&self) -> Arc<LiveStats> {
        self.stats.clone()
    }

    /// Runs every device until `shutdown` resolves (or until no device will ever be
    /// online again) and returns the final counters. Devices stop where they are: a task
    /// in progress is abandoned without a report, and its lease releases it.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> AgentStats {
        let cfg = self.cfg;
        let workers = if cfg.workers == 0 {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        } else {
            cfg.workers
        };
        let n = cfg.profiles.len();
        let shard = cfg.shard;
        let timeline =
            Timeline::starting_now(cfg.start_s, cfg.compress).expect("validated in Agent::new");
        let shared = Arc::new(Shared {
            client: ManagerClient::new(&cfg.manager),
            profiles: cfg.profiles,
            first_device_id: cfg.first_device_id,
            availability: cfg.availability,
            timeline,
            partition: DataPartition {
                writer_samples: cfg.data.train.iter().map(|w| w.len() as u64).collect(),
                writers_per_device: cfg.writers_per_device,
            },
            data: cfg.data,
            drop_fraction: cfg.drop_fraction,
            seed: cfg.seed,
            start_jitter: cfg.start_jitter,
            http_timeout: cfg.http_timeout,
            tasks: TaskCache::new(self.registry),
            train_pool: Semaphore::new(workers),
            http_slots: Semaphore::new(cfg.max_inflight_http),
            stats: self.stats.clone(),
        });
        tracing::info!(
            devices = shard.devices(n).count(),
            population = n,
            %shard,
            workers,
            compress = cfg.compress,
            "starting devices"
        );
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut set = JoinSet::new();
        for i in shard.devices(n) {
            let sh = shared.clone();
            let mut stop = stop_rx.clone();
            let device = async move {
                tokio::select! {
                    _ = device::run(sh, i) => {}
                    _ = stop.wait_for(|s| *s) => {}
                }
            };
            if i == shard.index {
                // What one idle device costs, besides the task header.
                tracing::debug!(bytes = std::mem::size_of_val(&device), "device future size");
            }
            set.spawn(device);
        }
        let all_done = async {
            while let Some(r) = set.join_next().await {
                if let Err(e) = r
                    && e.is_panic()
                {
                    tracing::error!(error = %e, "a device task panicked");
                }
            }
        };
        tokio::pin!(all_done);
        tokio::select! {
            _ = shutdown => {
                tracing::info!("stopping devices");
                let _ = stop_tx.send(true);
                all_done.await;
            }
            _ = &mut all_done => tracing::info!("no device will come online again"),
        }
        self.stats.snapshot()
    }
}

/// Runs a population until `shutdown` resolves; see [`Agent::run`].
pub async fn run_population(
    cfg: AgentConfig,
    registry: Registry,
    shutdown: impl Future<Output = ()>,
) -> Result<AgentStats, AgentError> {
    Ok(Agent::new(cfg, registry)?.run(shutdown).await)
}
