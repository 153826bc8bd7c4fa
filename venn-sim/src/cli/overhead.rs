//! `venn-sim overhead`: scheduler decision latency against the number of jobs
//! and job groups (paper Fig. 10), as a table, CSV and PNG.

use std::path::PathBuf;
use venn_core::PolicyKind;

use venn_plot::lines::{Series, line_chart};
use venn_sim::experiments::measure_overhead;

/// Options of `overhead`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Policy to measure.
    #[arg(long, default_value = "venn", value_parser = PolicyKind::names_parser())]
    pub policy: String,
    /// Job counts.
    #[arg(long, value_delimiter = ',', default_value = "10,50,100,200,500,1000")]
    pub jobs: Vec<usize>,
    /// Group counts (distinct requirements).
    #[arg(long, value_delimiter = ',', default_value = "1,4,16,64")]
    pub groups: Vec<usize>,
    /// Distinct device profiles checking in.
    #[arg(long, default_value_t = 1000)]
    pub device_kinds: usize,
    /// Planning passes timed per point (check-ins: 20× as many).
    #[arg(long, default_value_t = 20)]
    pub reps: usize,
    /// Output directory for overhead.csv and overhead.png.
    #[arg(long, default_value = "overhead-out")]
    pub out: PathBuf,
}

/// Runs `overhead`.
pub fn run(args: Args) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)?;
    let mut csv = String::from("policy,jobs,groups,plan_ms,check_in_us\n");
    let mut series = Vec::new();
    println!(
        "{:>6} {:>7} {:>12} {:>14}",
        "jobs", "groups", "plan ms", "check-in µs"
    );
    let bar = indicatif::ProgressBar::new((args.jobs.len() * args.groups.len()) as u64);
    for &g in &args.groups {
        let mut s = Series {
            name: format!("{g} groups"),
            points: Vec::new(),
        };
        for &j in &args.jobs {
            let o = measure_overhead(&args.policy, j, g, args.device_kinds, args.reps)?;
            bar.inc(1);
            bar.suspend(|| {
                println!(
                    "{:>6} {:>7} {:>12.3} {:>14.2}",
                    j,
                    o.groups,
                    o.plan_s * 1e3,
                    o.check_in_s * 1e6
                )
            });
            csv.push_str(&format!(
                "{},{j},{},{:.6},{:.4}\n",
                args.policy,
                o.groups,
                o.plan_s * 1e3,
                o.check_in_s * 1e6
            ));
            s.points.push((j as f64, o.plan_s * 1e3));
        }
        series.push(s);
    }
    bar.finish_and_clear();
    std::fs::write(args.out.join("overhead.csv"), csv)?;
    let png = args.out.join("overhead.png");
    line_chart(
        &png,
        "Scheduling overhead (Fig. 10)",
        "jobs",
        "planning latency (ms)",
        &series,
    )?;
    tracing::info!(png = %png.display(), "wrote overhead.csv and overhead.png");
    Ok(())
}
