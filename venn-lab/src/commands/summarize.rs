//! `venn-lab summarize`: a results folder's comparisons and summary over seeds, redrawn.

use std::path::PathBuf;

use crate::LabResult;

/// `venn-lab summarize`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The results folder (`--out` of the runs).
    dir: PathBuf,
    /// Comma-separated policies; the first is the baseline (default: every policy
    /// found, random first, the rest by name).
    #[arg(long, value_delimiter = ',')]
    policies: Vec<String>,
}

/// Each seed's comparison and the summary over seeds, redrawn from the saved runs.
pub(super) fn run(a: Args) -> anyhow::Result<()> {
    summarize(&a.dir, &a.policies)
}

/// What `venn-lab summarize DIR --policies …` writes (and the sweep's gather step).
pub(super) fn summarize(dir: &std::path::Path, policies: &[String]) -> anyhow::Result<()> {
    let saved = crate::saved::read_saved(dir, policies)?;
    for (seed, why) in &saved.skipped {
        eprintln!("left out {}: {why}", seed.display());
    }
    for seed in &saved.seeds {
        if seed.runs.len() > 1 {
            print!(
                "{}",
                crate::compare::write_comparison(&seed.dir, &seed.runs)?
            );
            println!("comparison in {}", seed.dir.display());
        }
    }
    let complete: Vec<&[LabResult]> = saved.seeds.iter().map(|s| s.runs.as_slice()).collect();
    let numbers: Vec<u64> = saved.seeds.iter().map(|s| s.number).collect();
    if saved.multi_seed && complete.len() >= 2 {
        print!(
            "\n{}",
            crate::seeds::write_seeds_numbered(dir, &complete, &numbers)?
        );
        println!(
            "summary over {} seed(s) in {}",
            complete.len(),
            dir.display()
        );
    } else if saved.multi_seed {
        eprintln!(
            "{} complete seed(s): a summary over seeds needs two",
            complete.len()
        );
    }
    Ok(())
}
