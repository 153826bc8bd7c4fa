//! `venn-lab run`: one experiment live on loopback.

use std::path::PathBuf;

use super::context::{Lab, load_config, load_data};
use super::seeds::unfinished_jobs;
use super::signals::ctrl_c;
use crate::RunUi;

/// `venn-lab run`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Experiment config (TOML), e.g. scripts/experiments/quick.toml.
    config: PathBuf,
    /// Override the config's scheduling policy.
    #[arg(long)]
    policy: Option<String>,
    /// Results folder (default: results/<name>/<policy>).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Keep the manager and its status page (the URL printed at the start) up after
    /// the run, until Ctrl-C.
    #[arg(long)]
    keep: bool,
    /// Run jobs the feasibility check finds cannot work (fewer eligible devices than a
    /// round needs, or a deadline no eligible device can meet); without it the run is
    /// refused before anything starts, naming them.
    #[arg(long)]
    force: bool,
}

pub(super) async fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let mut cfg = load_config(&a.config, lab)?;
    if let Some(p) = a.policy {
        cfg.policy = cfg.policy.with_name(&p);
    }
    let out = a.out.unwrap_or_else(|| {
        PathBuf::from("results")
            .join(&cfg.name)
            .join(cfg.policy.name())
    });
    let data = load_data(&cfg)?;
    let r = crate::run_experiment(
        &cfg,
        &lab.policies,
        &out,
        data,
        lab.tasks.clone(),
        ctrl_c(),
        RunUi {
            keep: a.keep,
            force: a.force,
            ..RunUi::ATTENDED
        },
    )
    .await?;
    if !a.keep {
        // With --keep the run printed them before waiting.
        print!("{}", r.table());
        println!("results in {}", out.display());
    }
    unfinished_jobs([&r])
}
