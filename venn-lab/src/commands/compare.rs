//! `venn-lab compare`: the same live experiment under each policy, over seeds.

use std::path::PathBuf;

use super::context::{Lab, load_config, load_data};
use super::seeds::over_seeds;
use super::signals::ctrl_c;
use crate::RunUi;

/// `venn-lab compare`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Experiment config (TOML).
    config: PathBuf,
    /// Comma-separated policies; the first is the baseline.
    #[arg(long, default_value = "random,venn", value_delimiter = ',')]
    policies: Vec<String>,
    /// Results folder (default: results/<name>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Run every policy under this many seeds (replicate 0 is the config's seeds; the
    /// others derive theirs from it) and report speed-ups and accuracies as means
    /// with 95 % intervals over seeds (summary.json, compare.txt, jct-seeds.png,
    /// compare-seeds.png).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: u64,
    /// The first replicate to run (with --seeds N: replicates K..K+N, into
    /// <out>/seed-<k>/<policy>): adds seeds to a folder an earlier invocation filled,
    /// then `venn-lab summarize <out>` summarises them all.
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
    first_seed: u64,
    /// Run jobs the feasibility check finds cannot work; without it the comparison is
    /// refused before anything starts, naming them.
    #[arg(long)]
    force: bool,
}

pub(super) async fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let cfg = load_config(&a.config, lab)?;
    let out = a
        .out
        .unwrap_or_else(|| PathBuf::from("results").join(&cfg.name));
    let data = load_data(&cfg)?;
    let seeds = a.first_seed..a.first_seed + a.seeds;
    over_seeds(&cfg, &a.policies, &out, seeds, async |cfg, dir| {
        let r = crate::run_experiment(
            &cfg,
            &lab.policies,
            dir,
            data.clone(),
            lab.tasks.clone(),
            ctrl_c(),
            RunUi {
                force: a.force,
                ..RunUi::ATTENDED
            },
        )
        .await?;
        Ok(r)
    })
    .await
}
