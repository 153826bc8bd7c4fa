//! `venn-lab`: one command that starts a manager, an emulated device population and FL
//! jobs on loopback, runs them to completion, and writes a results folder (per-job CSVs,
//! an accuracy-vs-time PNG, time-to-accuracy and JCT tables, a JSON summary).
//!
//! Everything runs in this process but talks real HTTP over loopback: the manager's API,
//! the jobs' plan/weights/update endpoints and the devices' check-ins are the same code
//! the standalone binaries run.

mod config;
mod results;
mod run;

pub use config::{AvailabilitySource, ConfigError, DevicesConfig, LabConfig, LabJob};
pub use results::{JobOutcome, LabResult, speedups};
pub use run::{LabError, run_experiment};
