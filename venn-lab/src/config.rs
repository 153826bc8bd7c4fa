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

/// Where device availability comes from.
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum AvailabilitySource {
    /// Every device online throughout.
    Always,
    /// venn-sim's synthetic diurnal trace.
    Synthetic,
    /// A Venn-format availability CSV (or FedScale JSON) file.
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
}

fn always() -> AvailabilitySource {
    AvailabilitySource::Always
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
    /// FEMNIST directory (default: `VENN_DATA` or `../shared/data/femnist`).
    #[serde(default)]
    pub data: Option<PathBuf>,
    /// Accuracy thresholds reported as time-to-accuracy.
    #[serde(default)]
    pub tta_thresholds: Vec<f64>,
    /// The devices.
    pub devices: DevicesConfig,
    /// Admission control in the manager (`[admission]`, the controller's settings; off
    /// when absent). Jobs then need a `statement`; declined ones fail with the quote.
    #[serde(default)]
    pub admission: Option<venn_core::admission::AdmissionParams>,
    /// The jobs, each with `arrival_s` (seconds after the start).
    pub jobs: Vec<LabJob>,
}

/// A job of the experiment and when it starts.
#[derive(Debug, Clone, Deserialize)]
pub struct LabJob {
    /// Seconds after the experiment start.
    #[serde(default)]
    pub arrival_s: f64,
    /// The job.
    #[serde(flatten)]
    pub job: JobConfig,
}

impl LabConfig {
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
        Self::parse_with(&text, path, policies)
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
        if cfg.devices.count == 0 {
            return Err(bad("devices.count".into(), "must be at least 1".into()));
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
