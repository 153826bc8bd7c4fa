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
//! `venn-lab sim` runs the same experiment file at a scale where schedulers differ: the
//! simulator's engine schedules thousands of trace-driven devices on a virtual clock and
//! the jobs' models really train on the devices that reported (see [`sim`]).
//!
//! ## Layout
//! - [`commands`]: the command line as a library, one file per command
//!   ([`commands::main_with`]: a program with its own FL tasks gets every subcommand).
//! - [`error`]: [`LabError`], why an experiment could not run.
//! - [`config`]: the experiment TOML (`LabConfig`), with errors naming file and key.
//! - [`run`]: one experiment under one policy ([`run_experiment`]); [`feasible`]: the
//!   check before it starts that every job can get its devices and meet its deadline.
//! - [`results`]: per-job outcomes, the table, `tta.csv`, `summary.json`, `accuracy.png`.
//! - [`manager`]: the in-process manager every command starts ([`LocalManager`]).
//! - [`load`]: the check-in load generator (`venn-lab load`).
//! - [`sim`]: the same experiment on the simulator's virtual clock with real training
//!   (`venn-lab sim`): the engine's hooks, the device population from traces, and the
//!   training pool.
//! - [`compare`]: several policies' results side by side (table, CSV, a plot per job).
//! - [`by_model`]: the same comparison per model (does a policy change a model's accuracy,
//!   how soon do its jobs get there), table, CSV and plot.
//! - [`seeds`]: several seeds of that comparison: speed-ups and accuracies as means with
//!   95 % intervals over seeds (`--seeds N`).
//! - [`saved`]: results folders read back from their `summary.json`s, to redraw a
//!   comparison or a summary over seeds without running again (`venn-lab summarize`).
//! - [`attack`]: hostile clients against a `venn-manager` process (`venn-lab attack`).
//! - `k8s` (cargo feature `k8s`): an experiment as Kubernetes objects, or as Pods for
//!   `podman kube play` (`venn-lab k8s`).
//! - [`sweep`]: configs × policies × seeds as numbered indices for many machines, their
//!   shared results folder and the gather that summarises it (`venn-lab k8s sweep`).
//! - [`soak`]: a live experiment under load while its manager, a device shard and a job
//!   are SIGKILLed and the manager's disk fills, then its database checked for anything
//!   lost (`venn-lab soak`).
//! - [`gather`]: an experiment that ran on other hosts, collected over HTTP into the same
//!   results folder (`venn-lab gather`).

pub mod attack;
pub mod by_model;
pub mod commands;
pub mod compare;
pub mod config;
pub mod error;
pub mod feasible;
pub mod gather;
#[cfg(feature = "k8s")]
pub mod k8s;
pub mod load;
pub mod manager;
pub mod results;
pub mod run;
pub mod saved;
pub mod seeds;
pub mod sim;
pub mod soak;
pub mod sweep;

pub use config::{
    AvailabilitySource, ConfigError, DevicesConfig, LabConfig, LabJob, VirtualConfig,
};
pub use error::LabError;
pub use manager::LocalManager;
pub use results::{Clock, JobOutcome, LabResult};
pub use run::{RunUi, run_experiment};
pub use sim::run_virtual;
