//! `venn-lab`'s command line, as a library: [`main_with`] gives a program that registers
//! its own FL tasks (or policies) every subcommand and flag the `venn-lab` binary has
//! (`venn-lab/examples/custom_lab.rs` is such a program).
//!
//! One file per command, each its clap `Args` and `run`: `run.rs`, `compare.rs`, `sim.rs`,
//! `devices.rs`, `summarize.rs`, `load.rs`, `gather.rs`, `attack.rs`, `soak.rs`, `k8s.rs`, `sweep.rs`
//! (the in-pod steps of `k8s sweep`). Shared:
//! `context.rs` (the program's tasks and policies, [`Lab`]; loading the config and data),
//! `seeds.rs` (the loop over seeds and policies of `compare` and `sim`, and the list of jobs
//! that did not finish) and `signals.rs` (Ctrl-C and SIGTERM). Imports run one way: this
//! file → commands → shared.

mod attack;
mod compare;
mod context;
mod devices;
mod gather;
mod k8s;
mod load;
mod run;
mod seeds;
mod signals;
mod sim;
mod soak;
mod summarize;
mod sweep;

use anyhow::Context;
use clap::{Parser, Subcommand};

pub use context::Lab;

/// Venn testbed laboratory: local end-to-end experiments and load tests.
#[derive(Parser, Debug)]
#[command(name = "venn-lab", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one experiment: manager, devices and jobs on loopback; writes a results folder
    /// (per-job CSVs, accuracy.png, tta.csv, summary.json).
    Run(run::Args),
    /// Run the same experiment under each policy and print the speed-ups over the first.
    Compare(compare::Args),
    /// Run the experiment on the simulator's virtual clock with real training: thousands of
    /// trace-driven devices, accuracy against virtual time.
    ///
    /// The same TOML as `run`; devices need `availability = "synthetic"` or a trace file,
    /// and `[sim]` sets the horizon (`horizon_h`), training threads and session knobs.
    /// Writes jobs/*.csv (virtual seconds), accuracy.png, tta.csv and summary.json per
    /// policy; with several policies also compare.txt, compare.csv and compare/<job>.png.
    /// The same seed gives byte-identical CSVs whatever the thread count.
    Sim(sim::Args),
    /// What devices each job of a config can use, without running it: per job, the
    /// trace's devices its requirement admits, eligible check-ins an hour, the most that
    /// check in within one deadline against what a round requests and needs, and its
    /// fastest eligible device's task time; and whether it can work at all (the check
    /// `sim` runs first). Device requirements and the tables: docs/devices.md.
    Devices(devices::Args),
    /// Redraw the comparison and the summary over seeds of a results folder from the
    /// summary.json each run wrote, without running anything: after a change to the
    /// tables or plots, or when seeds ran in separate invocations into one folder
    /// (`--seeds` runs write <out>/seed-<k>/<policy>, single runs <out>/<policy>).
    /// Rewrites each seed's compare.txt, compare.csv and compare/*.png and, with two or
    /// more complete seeds, the folder's summary.json, compare.txt, compare-seeds.csv,
    /// jct-seeds.png and compare-seeds.png. A seed missing a policy, or with a cancelled run, is left out.
    Summarize(summarize::Args),
    /// Emulated check-ins over loopback against a manager: throughput and latency.
    ///
    /// Without --url, starts a manager in this process on a temporary database (so the
    /// figures include the server's share of the same cores).
    Load(load::Args),
    /// Render an experiment as Kubernetes objects (one JSON List for `kubectl apply -f`):
    /// the manager as a StatefulSet with a volume for its SQLite file and a Service, the
    /// devices as a StatefulSet whose pod K runs shard K/N, each FL job as a Job with its
    /// Service, the job configs as a ConfigMap, and a Job `venn-gather` that collects the
    /// results folder into its /results (`kubectl cp` it). Build the image from the
    /// Containerfile.
    ///
    /// With --podman: the same pods as bare Pods (and the manager's volume claim) in a
    /// multi-document YAML for `podman kube play --network NET`, where pods find each
    /// other by name; `podman cp venn-gather-gather:/results DIR` copies the results out.
    ///
    /// Needs the cargo feature `k8s` (`cargo run --release --features k8s --bin venn-lab`).
    K8s(Box<k8s::Args>),
    /// Collect an experiment that ran on several hosts (or in Kubernetes) over HTTP: each
    /// job's rounds from its GET /v1/results (run it with `fl-job run --linger-s`), each
    /// device shard's counters from its GET /v1/stats (`device-agent --stats-listen`), the
    /// policy from the manager. Waits until every job has ended, then writes the same
    /// results folder as `run`. Hosts' clocks need not agree: times are on the manager's.
    Gather(gather::Args),
    /// Hostile clients against a real venn-manager process on loopback: floods of invented
    /// profiles and long tags, oversized fields, registration squatting, slow headers and
    /// idle connections, each bounded, while an honest device checks in from another
    /// address. Prints per attack the answers, the honest device's p50/p99 latency and the
    /// manager's RSS and database growth; then SIGKILLs the manager, restarts it and checks
    /// what it had acknowledged.
    Attack(attack::Args),
    /// A soak with faults: a live experiment (venn-manager, device-agent shards and fl-job
    /// jobs, each its own process) under check-in load, while the manager is SIGKILLed and
    /// restarted (3 times by default), a device shard and a job are SIGKILLed mid-round and
    /// restarted, and the manager's disk (a tmpfs of --quota-mib, needs root) is filled to
    /// the last byte, all at seeded random moments. Afterwards it reads the manager's
    /// SQLite file and checks: intact, every assignment and result the manager
    /// acknowledged to a device there, no round counted twice, every job finished. Prints
    /// check-ins/s, p50/p99 latency and each fault's time to recover; exits non-zero if a
    /// check failed.
    Soak(soak::Args),
    /// One index of a sweep (`venn-lab k8s sweep`): runs the plan's (config, seed, policy)
    /// number INDEX into the shared results folder, unless it is there already.
    #[command(name = "sweep-index", hide = true)]
    SweepIndex(sweep::IndexArgs),
    /// A sweep's last step: waits until every index has its results, then summarises each
    /// config as `venn-lab summarize` does.
    #[command(name = "sweep-gather", hide = true)]
    SweepGather(sweep::GatherArgs),
}

/// Parses the process's arguments and runs the command with `lab`'s tasks and policies,
/// on a multi-threaded tokio runtime, with `tracing` logs on stderr (`RUST_LOG`, default
/// `warn`; plain text when stderr is not a terminal).
pub fn main_with(lab: Lab) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        // Colour codes only for a terminal: logs redirected to a file stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    let cli = Cli::parse();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(dispatch(cli.command, &lab))
}

async fn dispatch(command: Command, lab: &Lab) -> anyhow::Result<()> {
    match command {
        Command::Run(a) => run::run(a, lab).await,
        Command::Compare(a) => compare::run(a, lab).await,
        Command::Sim(a) => sim::run(a, lab).await,
        Command::Devices(a) => devices::run(a, lab),
        Command::Summarize(a) => summarize::run(a),
        Command::Load(a) => load::run(a).await,
        Command::K8s(a) => k8s::run(*a, lab),
        Command::Gather(a) => gather::run(a, lab).await,
        Command::Attack(a) => attack::run(a).await,
        Command::Soak(a) => soak::run(a, lab).await,
        Command::SweepIndex(a) => tokio::task::block_in_place(|| sweep::run_index(a, lab)),
        Command::SweepGather(a) => tokio::task::block_in_place(|| sweep::run_gather(a)),
    }
}
