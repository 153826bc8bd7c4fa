//! `venn-lab devices`: which devices each job of a config can use, without running it.

use std::path::PathBuf;

use anyhow::Context;

use super::context::{Lab, load_config, load_data};

/// `venn-lab devices`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Experiment config (TOML).
    config: PathBuf,
}

/// Every job's feasibility line, and why a job cannot work (then an error: exit non-zero).
pub(super) fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let cfg = load_config(&a.config, lab)?;
    let data = load_data(&cfg)?;
    let traces = venn_traces::locate_traces(None).context("finding the device tables")?;
    let (_, input, sim_cfg) = crate::sim::input::prepare(&cfg, &lab.tasks, &data, &traces.path)?;
    let mut bad = 0;
    for (lj, f) in cfg
        .jobs
        .iter()
        .zip(venn_sim::engine::feasibility(&input, &sim_cfg))
    {
        println!("job {}: {}", lj.job.name, f.line());
        if let Some(why) = f.problem() {
            bad += 1;
            println!("  cannot work: {why}");
        }
    }
    if bad > 0 {
        anyhow::bail!("{bad} job(s) cannot work on these devices");
    }
    Ok(())
}
