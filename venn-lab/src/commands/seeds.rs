//! What `compare` and `sim` share: every policy under a range of seeds, each seed's
//! comparison and the summary over seeds, and the list of jobs that did not finish.

use std::ops::Range;
use std::path::Path;

use crate::{LabConfig, LabResult};

/// Runs every policy under the replicates `seeds`, one `run` per (seed, policy) in that
/// order, and reports each seed's comparison and, with several seeds, the summary over them.
/// Replicate 0 alone writes to `out/<policy>` (the layout before `--seeds`), anything else
/// to `out/seed-<k>/<policy>`. A cancelled run (Ctrl-C) ends the loop.
pub(super) async fn over_seeds(
    cfg: &LabConfig,
    policies: &[String],
    out: &Path,
    seeds: Range<u64>,
    mut run: impl AsyncFnMut(LabConfig, &Path) -> anyhow::Result<LabResult>,
) -> anyhow::Result<()> {
    let mut runs = Vec::new();
    let single = seeds == (0..1);
    'seeds: for k in seeds.clone() {
        let (seed_out, label) = if single {
            (out.to_path_buf(), String::new())
        } else {
            (
                out.join(format!("seed-{k}")),
                format!(" (seed {k}, {} to {})", seeds.start, seeds.end - 1),
            )
        };
        let mut results = Vec::new();
        for p in policies {
            eprintln!("== {p}{label}");
            let dir = seed_out.join(p);
            let replicate = LabConfig {
                policy: cfg.policy.with_name(p),
                ..cfg.replicate(k)
            };
            let r = run(replicate, &dir).await?;
            print!("{}", r.table());
            println!("results in {}", dir.display());
            let cancelled = r.cancelled();
            results.push(r);
            if cancelled {
                break 'seeds;
            }
        }
        if results.len() > 1 {
            print!("{}", crate::compare::write_comparison(&seed_out, &results)?);
            println!("comparison in {}", seed_out.display());
        }
        runs.push(results);
    }
    report_seeds(out, seeds, &runs)?;
    unfinished_jobs(runs.iter().flatten())
}

/// One line per job that did not finish (failed, gave up, unfinished at the horizon or
/// stopped), and an error, so the exit status is non-zero, when there is any.
pub(super) fn unfinished_jobs<'a>(
    runs: impl IntoIterator<Item = &'a LabResult>,
) -> anyhow::Result<()> {
    let mut n = 0;
    for r in runs {
        for j in r.jobs.iter().filter(|j| !j.finished) {
            n += 1;
            let why = j.error.as_deref().unwrap_or("did not finish");
            eprintln!("{} / {}: {why}", r.policy, j.name);
        }
    }
    if n > 0 {
        anyhow::bail!("{n} job run(s) did not finish (listed above); the results were written");
    }
    Ok(())
}

/// With several seeds, the summary over them (only complete seeds: a cancelled one would
/// bias the means).
fn report_seeds(out: &Path, seeds: Range<u64>, runs: &[Vec<LabResult>]) -> anyhow::Result<()> {
    if seeds.end - seeds.start < 2 {
        if seeds.start > 0 {
            println!(
                "seed {} added to {}; `venn-lab summarize {}` summarises every seed there",
                seeds.start,
                out.display(),
                out.display()
            );
        }
        return Ok(());
    }
    let width = runs.first().map_or(0, Vec::len);
    let (numbers, complete): (Vec<u64>, Vec<&[LabResult]>) = runs
        .iter()
        .zip(seeds.start..)
        .filter(|(r, _)| r.len() == width && !r.iter().any(LabResult::cancelled))
        .map(|(r, k)| (k, r.as_slice()))
        .unzip();
    if complete.is_empty() {
        return Ok(());
    }
    if complete.len() < runs.len() {
        eprintln!(
            "summary over {} complete seed(s) of {} (a cancelled seed is left out)",
            complete.len(),
            runs.len()
        );
    }
    print!(
        "\n{}",
        crate::seeds::write_seeds_numbered(out, &complete, &numbers)?
    );
    println!("summary over seeds in {}", out.display());
    Ok(())
}
