//! `venn-lab sim`: an experiment on the simulator's virtual clock with real training.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;

use super::context::{Lab, load_config, load_data};
use super::seeds::over_seeds;
use super::signals::ctrl_c;
use crate::sim::VirtualOptions;

/// `venn-lab sim`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Experiment config (TOML), e.g. scripts/experiments/fig9.toml.
    config: PathBuf,
    /// Comma-separated policies; the first is the baseline (default: the config's).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
    /// Results folder (default: results/<name>-sim).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Training threads (default: the config's `[sim] threads`, 0 = one per core).
    #[arg(long)]
    threads: Option<usize>,
    /// Simulate the schedule only (JCT and rounds, no training or accuracy): sizes an
    /// experiment in a second before its training is paid for.
    #[arg(long)]
    schedule_only: bool,
    /// Run jobs the feasibility check finds cannot work (too few eligible devices, or
    /// a deadline no eligible device can meet); without it the run is refused, naming
    /// them. Every job's figures are printed before the first run either way.
    #[arg(long)]
    force: bool,
    /// Run every policy under this many seeds (replicate 0 is the config's seeds; the
    /// others derive theirs from it: availability, dispatch, initial weights, local
    /// shuffles) and report speed-ups and accuracies as means with 95 % intervals over
    /// seeds (summary.json, compare.txt, compare-seeds.csv, jct-seeds.png, compare-seeds.png); each
    /// seed's runs go to <out>/seed-<k>/<policy>.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: u64,
    /// The first replicate to run (with --seeds N: replicates K..K+N, into
    /// <out>/seed-<k>/<policy>): adds seeds to a folder an earlier invocation filled,
    /// then `venn-lab summarize <out>` summarises them all.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    first_seed: u64,
}

pub(super) async fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let mut cfg = load_config(&a.config, lab)?;
    if let Some(t) = a.threads {
        cfg.sim.threads = t;
    }
    let policies = if a.policies.is_empty() {
        vec![cfg.policy.name().to_string()]
    } else {
        a.policies
    };
    let out = a
        .out
        .unwrap_or_else(|| PathBuf::from("results").join(format!("{}-sim", cfg.name)));
    let data = load_data(&cfg)?;
    let traces = venn_traces::locate_traces(None).context("finding the device tables")?;
    traces.announce();
    let cancel = Arc::new(AtomicBool::new(false));
    let flag = cancel.clone();
    tokio::spawn(async move {
        ctrl_c().await;
        flag.store(true, Ordering::SeqCst);
    });
    let seeds = a.first_seed..a.first_seed + a.seeds;
    let mut first = true;
    over_seeds(&cfg, &policies, &out, seeds, async |cfg, dir| {
        let opts = VirtualOptions {
            policies: &lab.policies,
            tasks: &lab.tasks,
            data: data.clone(),
            traces: &traces,
            cancel: &cancel,
            progress: true,
            train: !a.schedule_only,
            force: a.force,
            show_feasibility: std::mem::take(&mut first),
        };
        Ok(tokio::task::block_in_place(|| {
            crate::run_virtual(&cfg, dir, opts)
        })?)
    })
    .await
}
