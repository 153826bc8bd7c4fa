//! Command-line front end of the `venn-sim` binary.
//!
//! Compiled into the binary only (via `#[path]`), so it may use `anyhow`.
//! Each subcommand lives in its own module with an `Args` struct and a `run`
//! function. Progress bars and logs go to stderr, tables and `--json` to stdout.

pub mod admission_ic;
pub mod breakdown;
pub mod common;
pub mod compare;
pub mod gen_trace;
pub mod overhead;
pub mod run;
pub mod sweep;
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
    /// The paper's Tables 2-4: speed-up by demand percentile, by spec, and on
    /// the biased workloads.
    Breakdown(breakdown::Args),
    /// Sensitivity sweeps over jobs, tiers or epsilon (Figs. 12-14), with PNG plots.
    Sweep(sweep::Args),
    /// Scheduler decision latency against jobs and groups (Fig. 10), with a PNG plot.
    Overhead(overhead::Args),
    /// Posted-price admission: does a job gain by misreporting its length
    /// distribution? Paired runs over seeds and jobs, with CSV, JSON and a PNG plot.
    AdmissionIc(admission_ic::Args),
}

/// Runs the parsed command line.
pub fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::GenTrace(args) => gen_trace::run(args),
        Command::Run(args) => run::run(args),
        Command::Compare(args) => compare::run(args),
        Command::Table1(args) => table1::run(args),
        Command::Breakdown(args) => breakdown::run(args),
        Command::Sweep(args) => sweep::run(args),
        Command::Overhead(args) => overhead::run(args),
        Command::AdmissionIc(args) => admission_ic::run(args),
    }
}
