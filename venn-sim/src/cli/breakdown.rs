//! `venn-sim breakdown`: the paper's Tables 2 and 3 (speed-up over the
//! baseline by total-demand quartile and by spec, on one workload) and
//! Table 4 (speed-up on the biased workloads).

use super::common::{InputArgs, Inputs, SimArgs, Task, run_all};
use super::table1::mean_sd;
use venn_core::PolicyKind;
use venn_sim::engine::setup::BIASED_WORKLOADS;
use venn_sim::experiments::{demand_quartiles, speedup_by_class};

/// Options of `breakdown`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload for Tables 2 and 3.
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Number of seeds.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Comma-separated policies.
    #[arg(long, value_delimiter = ',', default_value = "fifo,srsf,venn", value_parser = PolicyKind::names_parser())]
    pub policies: Vec<String>,
    /// Speed-ups are over this policy.
    #[arg(long, default_value = "random", value_parser = PolicyKind::names_parser())]
    pub baseline: String,
    /// Skip Table 4 (the biased workloads).
    #[arg(long)]
    pub no_biased: bool,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Runs `breakdown`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = Inputs::load(&args.input)?;
    let mut workloads = vec![args.workload.clone()];
    if !args.no_biased {
        workloads.extend(BIASED_WORKLOADS.iter().map(|s| s.to_string()));
    }
    let prepared = workloads
        .iter()
        .map(|w| inputs.workload(w, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let mut all = vec![args.baseline.clone()];
    all.extend(
        args.policies
            .iter()
            .filter(|p| **p != args.baseline)
            .cloned(),
    );
    let mut tasks = Vec::new();
    for (w, input) in workloads.iter().zip(&prepared) {
        for seed in 0..args.seeds {
            for p in &all {
                tasks.push(Task {
                    label: format!("{w} {p} s{seed}"),
                    input,
                    config: args
                        .sim
                        .with_policy(&args.sim.config(&args.input, seed)?, p),
                });
            }
        }
    }
    let results = run_all(tasks, args.sim.threads())?;
    let np = all.len();
    let per_wl = args.seeds as usize * np;
    let get = |wi: usize, seed: usize, pi: usize| &results[wi * per_wl + seed * np + pi];

    // Tables 2 and 3 on the first workload.
    let specs: Vec<(u8, String)> = {
        let mut v: Vec<(u8, String)> = get(0, 0, 0)
            .jobs
            .iter()
            .map(|j| (j.spec_id, j.spec_name.clone()))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let table = |title: &str,
                 classes: &[String],
                 class_of: &dyn Fn(&[venn_sim::engine::JobRecord]) -> Vec<usize>| {
        println!(
            "\n{title} ({}, speed-up over {}, mean over {} seeds)",
            args.workload, args.baseline, args.seeds
        );
        print!("{:<20}", "");
        for p in &all[1..] {
            print!(" {:>14}", p);
        }
        println!();
        for (ci, cname) in classes.iter().enumerate() {
            print!("{cname:<20}");
            for pi in 1..np {
                let v: Vec<f64> = (0..args.seeds as usize)
                    .map(|s| {
                        let base = &get(0, s, 0).jobs;
                        let class = class_of(base);
                        speedup_by_class(base, &get(0, s, pi).jobs, &class, classes.len())[ci]
                    })
                    .collect();
                let (m, sd) = mean_sd(&v);
                print!(" {:>14}", format!("{m:.2}±{sd:.2}x"));
            }
            println!();
        }
    };
    let quart: Vec<String> = ["0-25%", "25-50%", "50-75%", "75-100%"]
        .iter()
        .map(|s| format!("demand {s}"))
        .collect();
    table(
        "Table 2: by total-demand percentile",
        &quart,
        &demand_quartiles,
    );
    let spec_names: Vec<String> = specs.iter().map(|(id, n)| format!("{id} {n}")).collect();
    let spec_ids: Vec<u8> = specs.iter().map(|(id, _)| *id).collect();
    table("Table 3: by eligibility spec", &spec_names, &|jobs| {
        jobs.iter()
            .map(|j| spec_ids.iter().position(|s| *s == j.spec_id).unwrap_or(0))
            .collect()
    });

    if !args.no_biased {
        println!(
            "\nTable 4: biased workloads (speed-up over {}, mean ± sd over {} seeds)",
            args.baseline, args.seeds
        );
        print!("{:<14}", "workload");
        for p in &all[1..] {
            print!(" {:>14}", p);
        }
        println!();
        for (wi, w) in workloads.iter().enumerate().skip(1) {
            print!("{w:<14}");
            for pi in 1..np {
                let v: Vec<f64> = (0..args.seeds as usize)
                    .map(|s| get(wi, s, 0).summary.avg_jct_s / get(wi, s, pi).summary.avg_jct_s)
                    .collect();
                let (m, sd) = mean_sd(&v);
                print!(" {:>14}", format!("{m:.2}±{sd:.2}x"));
            }
            println!();
        }
    }
    Ok(())
}
