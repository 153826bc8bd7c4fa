//! Command-line front end of the `venn-sim` binary.
//!
//! Compiled into the binary only (via `#[path]`), so it may use `anyhow`.
//! Each subcommand lives in its own module with an `Args` struct and a `run`
//! function; add `run`, `compare`, `table1`, `breakdown`, `sweep` and
//! `overhead` the same way.

pub mod common;
pub mod compare;
pub mod gen_trace;
pub mod run;
pub mod table1;

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
    /// Several policies on identical input, with speed-ups over a baseline.
    Compare(compare::Args),
    /// The paper's Table 1: speed-up over random for five workloads, over seeds.
    Table1(table1::Args),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::GenTrace(args) => gen_trace::run(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Table1(args) => table1::run(args),
    }
}
