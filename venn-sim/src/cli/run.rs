//! `venn-sim run`: one policy on one workload; writes the per-job CSV, the
//! JSON summary and timing, and prints a table.

use std::path::PathBuf;
use venn_core::PolicyKind;

use super::common::{InputArgs, Inputs, SimArgs, Task, admission_line, run_all, secs};

/// Options of `run`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload: even, small, large, high, low, seed2, a biased one
    /// (general, comp_heavy, mem_heavy, res_intensive) or a job CSV path.
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Policy (default: the config's policy, venn without --config).
    #[arg(long, value_parser = PolicyKind::names_parser())]
    pub policy: Option<String>,
    /// Seed of the core's RNG and the dispatch noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory for jobs.csv, summary.json and perf.json.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Runs `run`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = Inputs::load(&args.input)?;
    let input = inputs.workload(&args.workload, None)?;
    let base = args.sim.config(&args.input, args.seed)?;
    let cfg = match &args.policy {
        Some(p) => args.sim.with_policy(&base, p),
        None => base,
    };
    let mut results = run_all(
        vec![Task {
            label: format!("{} {}", args.workload, cfg.policy),
            input: &input,
            config: cfg,
        }],
        1,
    )?;
    let r = results.pop().expect("one run");
    if let Some(dir) = &args.out {
        r.write_dir(dir, "")?;
        tracing::info!(dir = %dir.display(), "wrote jobs.csv, summary.json, perf.json");
    }
    println!(
        "{:>4} {:>6} {:>8} {:>6} {:>14} {:>14} {:>14} {:>7} {:>6}",
        "job", "spec", "demand", "rounds", "JCT s", "sched s", "collect s", "aborts", "done"
    );
    for j in &r.jobs {
        println!(
            "{:>4} {:>6} {:>8} {:>6} {:>14} {:>14} {:>14} {:>7} {:>6}",
            j.idx,
            j.spec_id,
            j.demand,
            j.rounds,
            secs(j.jct_s),
            secs(j.sched_delay_s),
            secs(j.response_collection_s),
            j.aborted_rounds,
            if j.finished() { "yes" } else { "no" }
        );
    }
    let s = &r.summary;
    println!(
        "\n{} on {}: avg JCT {} s ({} finished, {} unfinished; finished-only avg {} s); \
         avg sched delay {} s, avg response collection {} s",
        s.policy,
        args.workload,
        secs(s.avg_jct_s),
        s.finished,
        s.unfinished,
        secs(s.avg_jct_finished_s),
        secs(s.avg_sched_delay_s),
        secs(s.avg_response_collection_s)
    );
    println!(
        "{} check-ins, {} assignments, {} results, {} lost, {} stragglers, {} rounds ok, {} aborted; \
         {} plans; {} events in {:.2} s ({:.2} M events/s)",
        s.check_ins,
        s.assignments,
        s.results,
        s.tasks_failed,
        s.stragglers,
        s.rounds_succeeded,
        s.rounds_aborted,
        s.plans,
        s.events,
        r.perf.wall_s,
        r.perf.events_per_s / 1e6
    );
    if let Some(line) = admission_line(&r) {
        println!("{line}");
    }
    Ok(())
}
