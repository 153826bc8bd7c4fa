//! Command-line front end of the `venn-sim` binary.
//!
//! Compiled into the binary only (via `#[path]`), so it may use `anyhow`.
//! Each subcommand lives in its own module with an `Args` struct and a `run`
//! function; add `run`, `compare`, `table1`, `breakdown`, `sweep` and
//! `overhead` the same way.

pub mod common;
pub mod gen_trace;
pub mod run;

use clap::{Parser, Subcommand};

/// Event-driven simulator for Venn, a resource manager that shares
/// ephemeral edge devices among concurrent federated-learning jobs.
#[derive(Debug, Parser)]
#[command(name = "venn-sim", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Generate a synthetic device-availability trace in the Venn CSV form
    /// (`,ID,start,end`), standing in for the FedScale trace.
    GenTrace(gen_trace::Args),
    /// Simulate one policy on one workload: per-job CSV, JSON summary, table.
    Run(run::Args),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::GenTrace(args) => gen_trace::run(args),
        Command::Run(args) => run::run(args),
    }
}
