//! The two steps of a sweep on many machines (`venn-lab k8s sweep` renders them; see
//! [`crate::sweep`]): `venn-lab sweep-index` runs one index of the plan into the shared
//! results folder, `venn-lab sweep-gather` waits for all of them and summarises each
//! config as a local `venn-lab sim … --seeds N` would.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use anyhow::Context;

use super::context::{Lab, load_config, load_data};
use super::seeds::unfinished_jobs;
use crate::sim::VirtualOptions;
use crate::sweep::{SWEEP_GATHERED, SweepPlan};

/// How long an index or the gather waits for its mounted plan to be complete.
const MOUNT_PATIENCE: Duration = Duration::from_secs(120);

/// `venn-lab sweep-index`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct IndexArgs {
    /// The sweep's plan.json (its config files beside it).
    #[arg(long)]
    plan: PathBuf,
    /// Which index of the plan (a Kubernetes indexed Job sets JOB_COMPLETION_INDEX).
    #[arg(long, env = "JOB_COMPLETION_INDEX")]
    index: usize,
    /// The shared results folder.
    #[arg(long, default_value = "/results")]
    results: PathBuf,
    /// Training threads (default: the config's `[sim] threads`, 0 = one per core).
    #[arg(long)]
    threads: Option<usize>,
}

/// Runs index `index` unless its results are already there.
pub(super) fn run_index(a: IndexArgs, lab: &Lab) -> anyhow::Result<()> {
    let plan = SweepPlan::read_mounted(&a.plan, MOUNT_PATIENCE)?;
    let dir = plan.run_dir(&a.results, a.index);
    if !plan.missing(&a.results).contains(&a.index) {
        println!("index {}: done already ({})", a.index, dir.display());
        return Ok(());
    }
    let plan_dir = a.plan.parent().unwrap_or(std::path::Path::new("."));
    let mut cfg = plan.entry_config(plan_dir, a.index, |p| load_config(p, lab))?;
    if let Some(t) = a.threads {
        cfg.sim.threads = t;
    }
    let data = load_data(&cfg)?;
    let traces = venn_traces::locate_traces(None).context("finding the device tables")?;
    let cancel = AtomicBool::new(false);
    let opts = VirtualOptions {
        policies: &lab.policies,
        tasks: &lab.tasks,
        data,
        traces: &traces,
        cancel: &cancel,
        progress: false,
        train: !plan.schedule_only,
        force: false,
        show_feasibility: true,
    };
    let r = crate::run_virtual(&cfg, &dir, opts)?;
    print!("{}", r.table());
    println!("index {}: results in {}", a.index, dir.display());
    // Jobs that did not finish are part of the result (as in a local run, which lists
    // them); the index is done all the same, or a retry would redo the same run.
    if let Err(e) = unfinished_jobs([&r]) {
        eprintln!("{e}");
    }
    Ok(())
}

/// `venn-lab sweep-gather`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct GatherArgs {
    /// The sweep's plan.json.
    #[arg(long)]
    plan: PathBuf,
    /// The shared results folder.
    #[arg(long, default_value = "/results")]
    results: PathBuf,
    /// Give up when runs are still missing after this many seconds.
    #[arg(long, default_value_t = 7.0 * 86_400.0)]
    wait_s: f64,
    /// Seconds between looks at the results folder.
    #[arg(long, default_value_t = 5.0)]
    poll_s: f64,
}

/// Waits for every index, then summarises each config's folder.
pub(super) fn run_gather(a: GatherArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        a.wait_s.is_finite() && a.wait_s >= 0.0 && a.poll_s.is_finite() && a.poll_s > 0.0,
        "--wait-s and --poll-s must be non-negative numbers of seconds (--poll-s above 0)"
    );
    let plan = SweepPlan::read_mounted(&a.plan, MOUNT_PATIENCE)?;
    plan.wait_done(
        &a.results,
        Duration::from_secs_f64(a.wait_s),
        Duration::from_secs_f64(a.poll_s),
    )?;
    for c in &plan.configs {
        super::summarize::summarize(&a.results.join(&c.name), &plan.policies)?;
    }
    println!("{SWEEP_GATHERED}");
    Ok(())
}
