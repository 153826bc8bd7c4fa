//! An experiment's TOML: the manager's policy, the device population, and the jobs (mixing
//! tasks, device requirements, demands, rounds and deadlines). Errors name the file and
//! the key.

use fl_job::runner::JobConfig;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use thiserror::Error;
use venn_core::{PolicyConfig, PolicyRegistry};

/// Why a config cannot be used.
#[derive(Debug, Error)]
pub enum ConfigError {
    /// Unreadable file.
    #[error("{file}: {source}")]
    Io {
        /// The file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// TOML syntax or a wrong/unknown key (the message names key, line and column).
    #[error("{file}: {message}")]
    Parse {
        /// The file.
        file: PathBuf,
        /// toml's message.
        message: String,
    },
    /// A value out of range.
    #[error("{file}: {key}: {reason}")]
    Invalid {
        /// The file.
        file: PathBuf,
        /// Dotted key, e.g. `jobs[1].deadline_s`.
        key: String,
        /// Why.
        reason: String,
    },
}

fn default_compress() -> f64 {
    60.0
}
fn default_max_minutes() -> f64 {
    10.0
}
fn one() -> usize {
    1
}
fn default_tta_consecutive() -> usize {
    venn_core::stats::TtaRule::default().consecutive
}

/// Where device availability comes from.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum AvailabilitySource {
    /// Every device online throughout.
    Always,
    /// venn-sim's synthetic diurnal trace.
    Synthetic,
    /// A Venn-format availability CSV (or FedScale JSON) file; a relative path is relative
    /// to the config file's folder.
    Trace(PathBuf),
}

/// The emulated population.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DevicesConfig {
    /// Number of devices.
    pub count: usize,
    /// Availability source.
    #[serde(default = "always")]
    pub availability: AvailabilitySource,
    /// Trace seconds per wall second.
    #[serde(default = "default_compress")]
    pub compress: f64,
    /// Trace time at which the experiment starts (seconds; e.g. 0 = midnight).
    #[serde(default)]
    pub start_s: f64,
    /// Concurrent trainings (0 = cores).
    #[serde(default)]
    pub workers: usize,
    /// FEMNIST writers per device.
    #[serde(default = "one")]
    pub writers_per_device: usize,
    /// Probability an assigned device vanishes mid-task.
    #[serde(default)]
    pub drop_fraction: f64,
    /// Device-agent processes the population is split over (`device-agent --shard K/N`):
    /// the pods `venn-lab k8s` renders, and the agents `venn-lab run` starts in its
    /// process. The devices are the same however many carry them.
    #[serde(default = "one")]
    pub shards: usize,
}

fn always() -> AvailabilitySource {
    AvailabilitySource::Always
}

impl DevicesConfig {
    /// Which of `data`'s train writers each device owns ([`partition`]).
    pub fn partition(&self, data: &datasets::Femnist) -> venn_core::DataPartition {
        partition(data, self.writers_per_device)
    }
}

/// Which of `data`'s train writers each device owns (device `d`: writers `(d × W + k) mod
/// n`, `k < W`, `W = writers_per_device`), as the devices, the simulator and the
/// feasibility checks all see it.
pub fn partition(data: &datasets::Femnist, writers_per_device: usize) -> venn_core::DataPartition {
    venn_core::DataPartition {
        writer_samples: data.train.iter().map(|w| w.len() as u64).collect(),
        writers_per_device,
    }
}

/// A whole experiment.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LabConfig {
    /// Experiment name (results folder).
    pub name: String,
    /// Scheduling policy: `policy = "venn"` or a `[policy]` table with `name` and the
    /// policy's parameters (the name is overridden by `venn-lab compare`; the parameters
    /// are kept for the policy they belong to).
    #[serde(default)]
    pub policy: PolicyConfig,
    /// Seed for the manager, the devices and the jobs.
    #[serde(default)]
    pub seed: u64,
    /// Stop everything after this many minutes.
    #[serde(default = "default_max_minutes")]
    pub max_minutes: f64,
    /// FEMNIST directory (default: `VENN_DATA` or `../shared/data/femnist`); a relative
    /// path is relative to the config file's folder.
    #[serde(default)]
    pub data: Option<PathBuf>,
    /// Accuracy thresholds reported as time-to-accuracy.
    #[serde(default)]
    pub tta_thresholds: Vec<f64>,
    /// Evaluations in a row that must reach a threshold for the job to count as having
    /// reached it (time-to-accuracy is the first of them; `venn_core::stats::TtaRule`).
    /// 1 is the plain first-round rule, which one noisy round can fake.
    #[serde(default = "default_tta_consecutive")]
    pub tta_consecutive: usize,
    /// The devices.
    pub devices: DevicesConfig,
    /// Admission control in the manager (`[admission]`, the controller's settings; off
    /// when absent). Jobs then need a `statement`; declined ones fail with the quote.
    #[serde(default)]
    pub admission: Option<venn_core::admission::AdmissionParams>,
    /// Settings of the virtual-clock mode (`[sim]`, read by `venn-lab sim` only).
    #[serde(default)]
    pub sim: VirtualConfig,
    /// The jobs, each with `arrival_s` (seconds after the start).
    pub jobs: Vec<LabJob>,
}

fn default_horizon_h() -> f64 {
    72.0
}

/// What only `venn-lab sim` reads (`[sim]`): how long the virtual clock may run, how many
/// threads train, and the simulator's device-session knobs (defaults: the simulator's,
/// which follow the Venn authors).
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct VirtualConfig {
    /// Virtual hours after the start at which the run stops; jobs still running then are
    /// reported unfinished.
    pub horizon_h: f64,
    /// Training threads (0 = one per core). Results do not depend on it.
    pub threads: usize,
    /// Seconds a device stays online after its traced session ends (authors: 80).
    pub grace_s: f64,
    /// A task starts `U(0, dispatch_jitter_s)` after the check-in (authors: 2).
    pub dispatch_jitter_s: f64,
    /// Times a task pays the communication term (authors' client: 2, download and upload).
    pub comm_trips: f64,
    /// A device takes at most one task per check-in (authors: yes).
    pub one_assignment_per_checkin: bool,
    /// Train each successful round's participants as one computation, every layer grouped
    /// by client (`fl_task::train_stacked`), instead of one lane each. The same results
    /// bit for bit on the CPU kernels, where it is slower (`fl-job/TRAINING.md`,
    /// "Client-batched training"); meant for backends whose steps cost per operation.
    pub stack_clients: bool,
}

impl Default for VirtualConfig {
    fn default() -> Self {
        VirtualConfig {
            horizon_h: default_horizon_h(),
            threads: 0,
            grace_s: venn_traces::availability::DEFAULT_GRACE_S,
            dispatch_jitter_s: 2.0,
            comm_trips: 1.0,
            one_assignment_per_checkin: true,
            stack_clients: false,
        }
    }
}

/// A job of the experiment and when it starts: the [`JobConfig`] keys plus the three below,
/// all in one `[[jobs]]` table. Read through a table rather than `serde(flatten)`, which
/// lets unknown keys through: a typo (`deadlin`, `over_commit`) is an error naming it.
#[derive(Debug, Clone, Deserialize)]
#[serde(try_from = "toml::Table")]
pub struct LabJob {
    /// Seconds after the experiment start (default 0).
    pub arrival_s: f64,
    /// `venn-lab sim`: when set, every task's compute time on the reference device (78 ms
    /// per sample), seconds, whatever the model and the device's samples; a device's is
    /// `workload_s × its ms per sample / 78` (the Venn authors' job catalog has 30). Unset
    /// (the default), a task's time follows from the work it does: the device's samples ×
    /// local epochs × the model's cost per sample, plus the model's bytes both ways
    /// (`venn_core::TaskWork`); tasks that cannot state their work fall back to 30.
    pub workload_s: Option<f64>,
    /// `venn-lab sim`, with `workload_s`: a task's transfer time at the reference bandwidth
    /// (13,736 kbit/s), seconds (default 10, the authors' job traces).
    pub comm_s: Option<f64>,
    /// The job.
    pub job: JobConfig,
}

impl TryFrom<toml::Table> for LabJob {
    type Error = String;

    fn try_from(mut t: toml::Table) -> Result<Self, String> {
        let mut seconds = |key: &str| match t.remove(key) {
            None => Ok(None),
            Some(toml::Value::Float(x)) => Ok(Some(x)),
            Some(toml::Value::Integer(i)) => Ok(Some(i as f64)),
            Some(other) => Err(format!(
                "{key}: expected a number of seconds, found {}",
                other.type_str()
            )),
        };
        let arrival_s = seconds("arrival_s")?.unwrap_or(0.0);
        let workload_s = seconds("workload_s")?;
        let comm_s = seconds("comm_s")?;
        // `JobConfig` denies unknown fields, and now sees every key but the three above.
        let job = JobConfig::deserialize(toml::Value::Table(t)).map_err(|e| {
            let e = e.to_string();
            if e.contains("unknown field") {
                format!("{e}, or the run's own `arrival_s`, `workload_s`, `comm_s`")
            } else {
                e
            }
        })?;
        Ok(LabJob {
            arrival_s,
            workload_s,
            comm_s,
            job,
        })
    }
}

impl LabConfig {
    /// The time-to-accuracy rule (`tta_consecutive` evaluations in a row).
    pub fn tta_rule(&self) -> venn_core::stats::TtaRule {
        venn_core::stats::TtaRule::new(self.tta_consecutive)
    }

    /// The same experiment with its randomness replaced for replicate `k` of a multi-seed
    /// run: `k = 0` is the config as written; every other `k` derives the experiment's and
    /// each job's seed from theirs and `k` (device availability, dispatch, initial
    /// weights, local shuffles all change). The evaluation sets (`eval_seed`) stay, so
    /// every replicate is measured on the same samples.
    pub fn replicate(&self, k: u64) -> LabConfig {
        let mut cfg = self.clone();
        if k > 0 {
            cfg.seed = venn_core::rng::derive_seed(self.seed, k);
            for j in &mut cfg.jobs {
                j.job.seed = venn_core::rng::derive_seed(j.job.seed, k);
            }
        }
        cfg
    }

    /// Reads and checks `path` (its policy must be a built-in one).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        Self::load_with(path, &PolicyRegistry::builtin())
    }

    /// Reads and checks `path`, whose policy `policies` must know.
    pub fn load_with(path: &Path, policies: &PolicyRegistry) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Io {
            file: path.into(),
            source,
        })?;
        let mut cfg = Self::parse_with(&text, path, policies)?;
        cfg.resolve_paths(path.parent().unwrap_or(Path::new("")));
        Ok(cfg)
    }

    /// Makes the config's relative paths (`data`, an availability `trace` file) relative to
    /// `dir`, the config file's folder, so that a config and its files move together and a
    /// run finds them from any working directory.
    pub fn resolve_paths(&mut self, dir: &Path) {
        let fix = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = dir.join(&*p);
            }
        };
        if let Some(d) = &mut self.data {
            fix(d);
        }
        if let AvailabilitySource::Trace(p) = &mut self.devices.availability {
            fix(p);
        }
    }

    /// Parses and checks TOML text (`path` only names the source in errors; the policy
    /// must be a built-in one).
    pub fn parse(text: &str, path: &Path) -> Result<Self, ConfigError> {
        Self::parse_with(text, path, &PolicyRegistry::builtin())
    }

    /// [`LabConfig::parse`] for a policy `policies` knows.
    pub fn parse_with(
        text: &str,
        path: &Path,
        policies: &PolicyRegistry,
    ) -> Result<Self, ConfigError> {
        let cfg: LabConfig = toml::from_str(text).map_err(|e| ConfigError::Parse {
            file: path.into(),
            message: e.to_string(),
        })?;
        let bad = |key: String, reason: String| ConfigError::Invalid {
            file: path.into(),
            key,
            reason,
        };
        if cfg.jobs.is_empty() {
            return Err(bad("jobs".into(), "at least one job is needed".into()));
        }
        if cfg.tta_consecutive == 0 {
            return Err(bad("tta_consecutive".into(), "must be at least 1".into()));
        }
        if let Some(a) = cfg
            .tta_thresholds
            .iter()
            .find(|a| !(0.0..=1.0).contains(*a))
        {
            return Err(bad(
                "tta_thresholds".into(),
                format!("{a} is not an accuracy in [0, 1]"),
            ));
        }
        if cfg.devices.count == 0 {
            return Err(bad("devices.count".into(), "must be at least 1".into()));
        }
        if !(1..=cfg.devices.count).contains(&cfg.devices.shards) {
            return Err(bad(
                "devices.shards".into(),
                format!("must be from 1 to devices.count ({})", cfg.devices.count),
            ));
        }
        if !(cfg.devices.compress.is_finite() && cfg.devices.compress > 0.0) {
            return Err(bad("devices.compress".into(), "must be positive".into()));
        }
        if !(0.0..=1.0).contains(&cfg.devices.drop_fraction) {
            return Err(bad(
                "devices.drop_fraction".into(),
                "must be in [0, 1]".into(),
            ));
        }
        let v = &cfg.sim;
        if !(v.horizon_h.is_finite() && v.horizon_h > 0.0) {
            return Err(bad("sim.horizon_h".into(), "must be positive".into()));
        }
        for (key, x) in [
            ("sim.grace_s", v.grace_s),
            ("sim.dispatch_jitter_s", v.dispatch_jitter_s),
            ("sim.comm_trips", v.comm_trips),
        ] {
            if !(x.is_finite() && x >= 0.0) {
                return Err(bad(key.into(), "must be a finite number ≥ 0".into()));
            }
        }
        if !(cfg.max_minutes.is_finite() && cfg.max_minutes > 0.0) {
            return Err(bad("max_minutes".into(), "must be positive".into()));
        }
        if let Err(e) = policies.validate(&cfg.policy) {
            return Err(bad("policy".into(), e.to_string()));
        }
        if let Some(a) = &cfg.admission
            && let Err(venn_core::CoreError::Invalid { field, reason }) = a.validate()
        {
            return Err(bad(field.to_string(), reason));
        }
        let mut names = std::collections::HashSet::new();
        for (i, j) in cfg.jobs.iter().enumerate() {
            if cfg.admission.is_some() && j.job.statement.is_none() {
                return Err(bad(
                    format!("jobs[{i}].statement"),
                    "admission control is on, so every job needs a statement of work".into(),
                ));
            }
            j.job
                .validate()
                .map_err(|(k, why)| bad(format!("jobs[{i}].{k}"), why))?;
            if !(j.arrival_s.is_finite() && j.arrival_s >= 0.0) {
                return Err(bad(format!("jobs[{i}].arrival_s"), "must be ≥ 0".into()));
            }
            for (key, v) in [("workload_s", j.workload_s), ("comm_s", j.comm_s)] {
                if let Some(v) = v
                    && !(v.is_finite() && v >= 0.0)
                {
                    return Err(bad(format!("jobs[{i}].{key}"), "must be ≥ 0".into()));
                }
            }
            if j.comm_s.is_some() && j.workload_s.is_none() {
                return Err(bad(
                    format!("jobs[{i}].comm_s"),
                    "applies only with workload_s (a fixed task time); without both, a task's \
                     time follows from the model's bytes and work"
                        .into(),
                ));
            }
            if !names.insert(j.job.name.clone()) {
                return Err(bad(
                    format!("jobs[{i}].name"),
                    format!("duplicate job name {:?}", j.job.name),
                ));
            }
        }
        Ok(cfg)
    }
}
