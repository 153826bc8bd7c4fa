//! # venn-lab — whole experiments, end to end
//!
//! One command that starts a manager, an emulated device population and FL jobs on
//! loopback, runs them to completion, and writes a results folder (per-job CSVs, an
//! accuracy-vs-time PNG, time-to-accuracy and JCT tables, a JSON summary); the same
//! under several policies side by side; and a load test of the manager.
//!
//! Everything runs in this process but talks real HTTP over loopback: the manager's API,
//! the jobs' plan/weights/update endpoints and the devices' check-ins are the same code
//! the standalone binaries (`venn-manager`, `fl-job`, `device-agent`) run.
//!
//! ## Layout
//! - [`config`]: the experiment TOML (`LabConfig`), with errors naming file and key.
//! - [`run`]: one experiment under one policy ([`run_experiment`]).
//! - [`results`]: per-job outcomes, the table, `tta.csv`, `summary.json`, `accuracy.png`.
//! - [`manager`]: the in-process manager every command starts ([`LocalManager`]).
//! - [`load`]: the check-in load generator (`venn-lab load`).

pub mod config;
pub mod load;
pub mod manager;
pub mod results;
pub mod run;

pub use config::{AvailabilitySource, ConfigError, DevicesConfig, LabConfig, LabJob};
pub use manager::LocalManager;
pub use results::{JobOutcome, LabResult, speedups};
pub use run::{LabError, run_experiment};
