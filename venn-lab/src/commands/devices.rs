//! `venn-lab devices`: which devices each job of a config can use, and the supply of each
//! Venn cell (the check-ins that qualify for exactly one set of job groups), without
//! running it.

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
    print!(
        "{}",
        cells_table(&cfg, &venn_sim::engine::venn_cells(&input, &sim_cfg))
    );
    if bad > 0 {
        anyhow::bail!("{bad} job(s) cannot work on these devices");
    }
    Ok(())
}

/// The groups (jobs that admit the same check-ins) and each cell's devices and check-ins
/// an hour, as a table.
fn cells_table(cfg: &crate::LabConfig, v: &venn_sim::engine::VennCells) -> String {
    let label = |g: usize| format!("G{}", g + 1);
    let mut s = String::from("\njob groups (jobs that admit the same check-ins):\n");
    for (g, group) in v.groups.iter().enumerate() {
        let names: Vec<&str> = group
            .jobs
            .iter()
            .map(|&j| cfg.jobs[j].job.name.as_str())
            .collect();
        s += &format!("  {}: {}\n", label(g), names.join(", "));
    }
    s += "Venn cells (check-ins by the groups they qualify for), most supply first:\n";
    s += &format!("  {:<28} {:>8} {:>14}\n", "cell", "devices", "check-ins/h");
    for c in &v.cells {
        let cell = if c.groups.is_empty() {
            "(no job)".to_string()
        } else {
            c.groups
                .iter()
                .map(|&g| label(g))
                .collect::<Vec<_>>()
                .join("+")
        };
        s += &format!("  {cell:<28} {:>8} {:>14.1}\n", c.devices, c.per_hour);
    }
    s
}
