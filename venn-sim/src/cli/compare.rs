//! `venn-sim compare`: several policies on identical input, with speed-ups
//! over a baseline (default `random`).

use std::path::PathBuf;
use venn_core::PolicyKind;

use super::common::{Average, InputArgs, Inputs, SimArgs, Task, admission_line, run_all, secs};

/// Options of `compare`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload name or job CSV (see `run --help`).
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Comma-separated policies.
    #[arg(long, value_delimiter = ',', default_value = "random,fifo,srsf,venn", value_parser = PolicyKind::names_parser())]
    pub policies: Vec<String>,
    /// Speed-ups are this policy's average JCT over each policy's.
    #[arg(long, default_value = "random", value_parser = PolicyKind::names_parser())]
    pub baseline: String,
    /// Which average JCT the speed-ups compare.
    #[arg(long, value_enum, default_value_t = Average::Censored)]
    pub average: Average,
    /// Seed of the core's RNG and the dispatch noise.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Output directory: `<policy>.jobs.csv`, `<policy>.summary.json`, ...
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Runs `compare`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = Inputs::load(&args.input)?;
    let input = inputs.workload(&args.workload, None)?;
    let base = args.sim.config(&args.input, args.seed)?;
    let mut policies = args.policies.clone();
    if !policies.contains(&args.baseline) {
        policies.insert(0, args.baseline.clone());
    }
    let tasks = policies
        .iter()
        .map(|p| Task {
            label: format!("{} {p}", args.workload),
            input: &input,
            config: args.sim.with_policy(&base, p),
        })
        .collect();
    let results = run_all(tasks, args.sim.threads())?;
    let base_jct = policies
        .iter()
        .zip(&results)
        .find(|(p, _)| **p == args.baseline)
        .map(|(_, r)| args.average.of(r))
        .expect("baseline was added");
    println!(
        "{:<14} {:>14} {:>14} {:>14} {:>9} {:>10} {:>9}",
        "policy", "avg JCT s", "sched s", "collect s", "finished", "speed-up", "wall s"
    );
    for (p, r) in policies.iter().zip(&results) {
        let s = &r.summary;
        println!(
            "{:<14} {:>14} {:>14} {:>14} {:>9} {:>9.2}x {:>9.1}",
            p,
            secs(s.avg_jct_s),
            secs(s.avg_sched_delay_s),
            secs(s.avg_response_collection_s),
            format!("{}/{}", s.finished, s.jobs),
            base_jct / args.average.of(r),
            r.perf.wall_s
        );
        if let Some(dir) = &args.out {
            r.write_dir(dir, &format!("{p}."))?;
        }
    }
    for (p, r) in policies.iter().zip(&results) {
        if let Some(line) = admission_line(r) {
            println!("{p}: {line}");
        }
    }
    println!(
        "\nspeed-up = avg JCT ({:?}) of {} / that of the policy; avg JCT column: all jobs, unfinished ones up to the horizon.",
        args.average, args.baseline
    );
    Ok(())
}
