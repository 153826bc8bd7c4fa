//! `venn-lab soak`: a live experiment under load while things break, and then a look in
//! the database for anything lost.
//!
//! Every part runs as its own process, as on separate hosts: a `venn-manager`, the
//! experiment's devices as `device-agent` shards, each FL job as an `fl-job run`
//! (command lines as `venn-lab k8s` and the multi-host test give them). Beside them this
//! process drives load (`driver`): emulated devices that check in as fast as they can, each
//! assignment acknowledged and reported finished, with every token the manager
//! acknowledged remembered. Jobs arrive again as they finish until the soak's duration
//! ends, so a longer soak is a longer experiment.
//!
//! At seeded random moments (`faults`): the manager is SIGKILLed and started again on
//! the same database (3 times by default), a device shard and a job process are SIGKILLed
//! while a round is open and started again, and the manager's disk — a tmpfs of a fixed
//! size (`disk`) — is filled to the last byte for a few seconds, then freed. A job process
//! that exits with an error is started again, as a supervisor (Kubernetes' Job) would;
//! the report lists every such restart with its cause.
//!
//! Afterwards (`verify`): the manager is killed a last time and its SQLite file is
//! checked — intact, every acknowledged assignment and result there, no round counted
//! twice, every job finished. The report prints the load's figures (check-ins/s, p50, p99),
//! each fault with the time until check-ins succeeded again, and every check.

mod disk;
pub mod driver;
mod faults;
mod procs;
mod report;
mod run;
pub mod verify;

pub use procs::Binaries;
pub use report::{FaultRecord, JobLine, SoakReport};
pub use run::run_soak;

use std::path::PathBuf;

use crate::LabConfig;

/// Why a soak could not run (a soak that ran and found a problem is a report whose
/// checks failed, not an error).
#[derive(Debug, thiserror::Error)]
pub enum SoakError {
    /// Starting something failed.
    #[error("{0}")]
    Setup(String),
    /// The manager did not answer.
    #[error("the manager at {url} did not come up within {seconds} s")]
    ManagerDown {
        /// Its base URL.
        url: String,
        /// How long we waited.
        seconds: f64,
    },
    /// The database could not be read afterwards.
    #[error("reading the manager's database: {0}")]
    Database(#[from] rusqlite::Error),
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SoakOptions {
    /// The binaries.
    pub bins: Binaries,
    /// Working folder: the database (on the quota disk), logs, job configs and CSVs.
    pub dir: PathBuf,
    /// The experiment: its devices become shards, its jobs `fl-job` processes.
    pub experiment: LabConfig,
    /// Seconds of load; jobs arrive again as they finish until then, and every fault
    /// happens within it.
    pub seconds: f64,
    /// How often the manager is SIGKILLed.
    pub manager_kills: u32,
    /// Load: requests in flight.
    pub connections: usize,
    /// Load: distinct device ids.
    pub load_devices: usize,
    /// Size of the manager's disk, MiB; 0: no quota disk and no disk-full phase.
    pub quota_mib: u64,
    /// How long the disk stays full, seconds.
    pub disk_full_s: f64,
    /// Seeds the moments of the faults.
    pub seed: u64,
    /// Show a progress bar.
    pub progress: bool,
}

/// The built-in experiment of `venn-lab soak`: two small ResNet-18 jobs on 16 devices in
/// two shards, each round a few training steps, so that the faults meet many rounds.
pub const DEFAULT_EXPERIMENT: &str = r#"
name = "soak"
policy = "venn"
seed = 5
[devices]
count = 16
availability = "always"
shards = 2
workers = 1
[[jobs]]
name = "alpha"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
rounds = 4
target_participants = 3
deadline_s = 30
eval_samples = 100
requirement = { min_os_version = 2 }
[[jobs]]
name = "beta"
task = "resnet18-femnist"
params = { width = 2, train = { max_steps = 2, batch_size = 10 } }
arrival_s = 1
rounds = 4
target_participants = 3
deadline_s = 30
eval_samples = 100
requirement = { min_os_version = 2 }
seed = 11
"#;
