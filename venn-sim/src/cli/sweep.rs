//! `venn-sim sweep`: the paper's sensitivity figures. `jobs` (Fig. 12):
//! speed-up over the baseline against the number of jobs; `tiers` (Fig. 13):
//! venn's speed-up against the number of tiers V; `epsilon` (Fig. 14): venn's
//! speed-up and the fraction of jobs that meet their fair-share JCT against ε.

use std::path::PathBuf;
use venn_core::PolicyKind;

use anyhow::bail;
use venn_core::PolicyArgs;
use venn_sim::engine::setup::load_workload;
use venn_sim::engine::{SimInput, SimResult};
use venn_sim::experiments::fair_share_met;
use venn_sim::plot::{Series, line_chart};
use venn_traces::{JobCatalog, JobGenOptions, SpecTable, WorkloadConfigs, generate_jobs};

use super::common::{InputArgs, Inputs, SimArgs, Task, run_all};
use super::table1::mean_sd;

/// Which sweep.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum What {
    /// Number of jobs (Fig. 12).
    Jobs,
    /// Number of tiers V (Fig. 13).
    Tiers,
    /// Fairness knob ε (Fig. 14).
    Epsilon,
}

/// Options of `sweep`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The swept parameter.
    #[arg(long, value_enum)]
    pub what: What,
    /// Values to sweep (default: jobs 10,25,50,100; tiers 1,2,3,4;
    /// epsilon 0,0.5,1,2,5).
    #[arg(long, value_delimiter = ',')]
    pub values: Option<Vec<f64>>,
    /// Workload (its catalog weights generate the jobs for `--what jobs`).
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Number of seeds.
    #[arg(long, default_value_t = 3)]
    pub seeds: u64,
    /// Policies for `--what jobs` (others sweep venn).
    #[arg(long, value_delimiter = ',', default_value = "fifo,srsf,venn", value_parser = PolicyKind::names_parser())]
    pub policies: Vec<String>,
    /// Speed-ups are over this policy.
    #[arg(long, default_value = "random", value_parser = PolicyKind::names_parser())]
    pub baseline: String,
    /// Output directory for the CSV and PNG.
    #[arg(long, default_value = "sweep-out")]
    pub out: PathBuf,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Runs `sweep`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = Inputs::load(&args.input)?;
    let values = args.values.clone().unwrap_or_else(|| match args.what {
        What::Jobs => vec![10.0, 25.0, 50.0, 100.0],
        What::Tiers => vec![1.0, 2.0, 3.0, 4.0],
        What::Epsilon => vec![0.0, 0.5, 1.0, 2.0, 5.0],
    });
    if values.is_empty() {
        bail!("--values is empty");
    }
    // One prepared input per value for `jobs`, one shared otherwise.
    let mut prepared: Vec<SimInput> = Vec::new();
    match args.what {
        What::Jobs => {
            let dir = &inputs.traces_dir;
            let specs = SpecTable::load(&dir.join("venn_eligibility_specs.csv"))?;
            let catalog = JobCatalog::load(&dir.join("venn_job_catalog.csv"))?;
            let configs = WorkloadConfigs::load(&dir.join("venn_workload_configs.csv"))?;
            let Some(wl) = configs.get(&args.workload) else {
                bail!(
                    "--what jobs needs a named workload from the configs, not `{}`",
                    args.workload
                );
            };
            for &v in &values {
                let opts = JobGenOptions {
                    num_jobs: v.round().max(1.0) as usize,
                    ..JobGenOptions::default()
                };
                let jobs = generate_jobs(&catalog, wl, &specs, &opts)?;
                prepared.push(SimInput::new(
                    inputs.trace.clone(),
                    &inputs.catalog,
                    &jobs.jobs,
                    Some(wl.num_week),
                    inputs.scale,
                )?);
            }
        }
        _ => {
            let (jobs, replicas) = load_workload(&args.workload, &inputs.traces_dir, None)?;
            prepared.push(SimInput::new(
                inputs.trace.clone(),
                &inputs.catalog,
                &jobs,
                replicas,
                inputs.scale,
            )?);
        }
    }
    // Runs: per value, per seed: the baseline, then the swept policies.
    let swept: Vec<String> = match args.what {
        What::Jobs => args.policies.clone(),
        _ => vec!["venn".to_string()],
    };
    let mut tasks = Vec::new();
    let mut index = Vec::new();
    for (vi, &v) in values.iter().enumerate() {
        let input = &prepared[if matches!(args.what, What::Jobs) {
            vi
        } else {
            0
        }];
        for seed in 0..args.seeds {
            let base = args.sim.config(&args.input, seed)?;
            // The baseline does not depend on tiers or ε: run it once per seed.
            if vi == 0 || matches!(args.what, What::Jobs) {
                tasks.push(Task {
                    label: format!("{} {} s{seed}", fmt_v(v), args.baseline),
                    input,
                    config: args.sim.with_policy(&base, &args.baseline),
                });
                index.push((vi, seed, None));
            }
            for (pi, p) in swept.iter().enumerate() {
                let mut c = args.sim.with_policy(&base, p);
                let swept = match args.what {
                    What::Tiers => PolicyArgs {
                        tiers: Some(v.round().max(1.0) as u32),
                        ..PolicyArgs::default()
                    },
                    What::Epsilon => PolicyArgs {
                        epsilon: Some(v),
                        ..PolicyArgs::default()
                    },
                    What::Jobs => PolicyArgs::default(),
                };
                swept.apply(&mut c.policy);
                tasks.push(Task {
                    label: format!("{} {p} s{seed}", fmt_v(v)),
                    input,
                    config: c,
                });
                index.push((vi, seed, Some(pi)));
            }
        }
    }
    let results = run_all(tasks, args.sim.threads())?;
    let find = |vi: usize, seed: u64, pi: Option<usize>| -> &SimResult {
        let vi_base = if pi.is_none() && !matches!(args.what, What::Jobs) {
            0
        } else {
            vi
        };
        let k = index
            .iter()
            .position(|&(a, b, c)| a == vi_base && b == seed && c == pi)
            .expect("run exists");
        &results[k]
    };
    std::fs::create_dir_all(&args.out)?;
    let name = match args.what {
        What::Jobs => "jobs",
        What::Tiers => "tiers",
        What::Epsilon => "epsilon",
    };
    let mut csv = String::from("value,policy,speedup_mean,speedup_sd,avg_jct_s,fair_share_met\n");
    let mut series: Vec<Series> = swept
        .iter()
        .map(|p| Series {
            name: format!("{p} speed-up"),
            points: Vec::new(),
        })
        .collect();
    let mut fair = Series {
        name: "fraction meeting fair-share JCT".into(),
        points: Vec::new(),
    };
    println!(
        "{:>8} {:<10} {:>14} {:>16} {:>10}",
        name, "policy", "speed-up", "avg JCT s", "fair met"
    );
    for (vi, &v) in values.iter().enumerate() {
        for (pi, p) in swept.iter().enumerate() {
            let sp: Vec<f64> = (0..args.seeds)
                .map(|s| {
                    find(vi, s, None).summary.avg_jct_s / find(vi, s, Some(pi)).summary.avg_jct_s
                })
                .collect();
            let jct: Vec<f64> = (0..args.seeds)
                .map(|s| find(vi, s, Some(pi)).summary.avg_jct_s)
                .collect();
            let met: Vec<f64> = (0..args.seeds)
                .filter_map(|s| fair_share_met(&find(vi, s, Some(pi)).jobs))
                .collect();
            let (m, sd) = mean_sd(&sp);
            let fm = if met.is_empty() {
                f64::NAN
            } else {
                mean_sd(&met).0
            };
            println!(
                "{:>8} {:<10} {:>14} {:>16.0} {:>10.3}",
                fmt_v(v),
                p,
                format!("{m:.2}±{sd:.2}x"),
                mean_sd(&jct).0,
                fm
            );
            csv.push_str(&format!(
                "{v},{p},{m:.4},{sd:.4},{:.1},{fm:.4}\n",
                mean_sd(&jct).0
            ));
            series[pi].points.push((v, m));
            if matches!(args.what, What::Epsilon) && fm.is_finite() {
                fair.points.push((v, fm));
            }
        }
    }
    std::fs::write(args.out.join(format!("sweep_{name}.csv")), csv)?;
    let (title, xl) = match args.what {
        What::Jobs => ("Speed-up vs number of jobs (Fig. 12)", "jobs"),
        What::Tiers => ("Venn speed-up vs tiers V (Fig. 13)", "tiers V"),
        What::Epsilon => ("Venn vs fairness knob (Fig. 14)", "epsilon"),
    };
    if matches!(args.what, What::Epsilon) {
        series.push(fair);
    }
    let png = args.out.join(format!("sweep_{name}.png"));
    let y_label = match args.what {
        What::Epsilon => format!("speed-up over {} / fraction of jobs", args.baseline),
        _ => format!("speed-up over {}", args.baseline),
    };
    line_chart(&png, title, xl, &y_label, &series)?;
    tracing::info!(png = %png.display(), "wrote plot and CSV");
    Ok(())
}

fn fmt_v(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
