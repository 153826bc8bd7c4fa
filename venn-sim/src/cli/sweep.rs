//! `venn-sim sweep`: the paper's sensitivity figures. `jobs` (Fig. 12):
//! speed-up over the baseline against the number of jobs; `tiers` (Fig. 13):
//! venn's speed-up against the number of tiers V; `epsilon` (Fig. 14): venn's
//! speed-up and the fraction of jobs that meet their fair-share JCT against ε.

use std::path::{Path, PathBuf};
use venn_core::PolicyKind;

use anyhow::bail;
use venn_core::PolicyArgs;
use venn_plot::lines::{Series, line_chart};
use venn_sim::engine::setup::load_workload;
use venn_sim::engine::{SimInput, SimResult};
use venn_sim::experiments::fair_share_met;
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
    let values = sweep_values(&args);
    if values.is_empty() {
        bail!("--values is empty");
    }
    let prepared = prepare_inputs(&args, &inputs, &values)?;
    let swept = swept_policies(&args);
    let plan = plan_runs(&args, &values, &prepared, &swept)?;
    let results = run_all(plan.tasks, args.sim.threads())?;
    let runs = SweepRuns {
        jobs_sweep: matches!(args.what, What::Jobs),
        index: plan.index,
        results: &results,
    };
    std::fs::create_dir_all(&args.out)?;
    let name = sweep_name(args.what);
    let table = tabulate(&args, &values, &swept, &runs);
    std::fs::write(args.out.join(format!("sweep_{name}.csv")), table.csv)?;
    let mut series = table.series;
    if matches!(args.what, What::Epsilon) {
        series.push(table.fair);
    }
    let png = args.out.join(format!("sweep_{name}.png"));
    draw_chart(&args, &png, &series)?;
    tracing::info!(png = %png.display(), "wrote plot and CSV");
    Ok(())
}

/// `--values`, or the paper's values for the swept parameter.
fn sweep_values(args: &Args) -> Vec<f64> {
    args.values.clone().unwrap_or_else(|| match args.what {
        What::Jobs => vec![10.0, 25.0, 50.0, 100.0],
        What::Tiers => vec![1.0, 2.0, 3.0, 4.0],
        What::Epsilon => vec![0.0, 0.5, 1.0, 2.0, 5.0],
    })
}

/// One prepared input per value for `jobs`, one shared otherwise.
fn prepare_inputs(args: &Args, inputs: &Inputs, values: &[f64]) -> anyhow::Result<Vec<SimInput>> {
    if matches!(args.what, What::Jobs) {
        return inputs_per_job_count(args, inputs, values);
    }
    let (jobs, replicas) = load_workload(&args.workload, &inputs.traces_dir, None)?;
    Ok(vec![SimInput::new(
        inputs.trace.clone(),
        &inputs.catalog,
        &jobs,
        replicas,
        inputs.scale,
    )?])
}

/// For `jobs`: per value, that many jobs generated from the workload's catalog weights.
fn inputs_per_job_count(
    args: &Args,
    inputs: &Inputs,
    values: &[f64],
) -> anyhow::Result<Vec<SimInput>> {
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
    let mut prepared = Vec::new();
    for &v in values {
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
    Ok(prepared)
}

/// The policies compared with the baseline: `--policies` for `jobs`, venn otherwise.
fn swept_policies(args: &Args) -> Vec<String> {
    match args.what {
        What::Jobs => args.policies.clone(),
        _ => vec!["venn".to_string()],
    }
}

/// Which run a result belongs to: value index, seed, and the swept policy's
/// index (`None`: the baseline).
type RunKey = (usize, u64, Option<usize>);

/// The runs to do, and each one's key in the same order.
struct RunPlan<'a> {
    tasks: Vec<Task<'a>>,
    index: Vec<RunKey>,
}

/// Runs: per value, per seed: the baseline, then the swept policies.
fn plan_runs<'a>(
    args: &Args,
    values: &[f64],
    prepared: &'a [SimInput],
    swept: &[String],
) -> anyhow::Result<RunPlan<'a>> {
    let mut plan = RunPlan {
        tasks: Vec::new(),
        index: Vec::new(),
    };
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
                plan.tasks.push(Task {
                    label: format!("{} {} s{seed}", fmt_v(v), args.baseline),
                    input,
                    config: args.sim.with_policy(&base, &args.baseline),
                });
                plan.index.push((vi, seed, None));
            }
            for (pi, p) in swept.iter().enumerate() {
                let mut c = args.sim.with_policy(&base, p);
                swept_policy_args(args.what, v).apply(&mut c.policy);
                plan.tasks.push(Task {
                    label: format!("{} {p} s{seed}", fmt_v(v)),
                    input,
                    config: c,
                });
                plan.index.push((vi, seed, Some(pi)));
            }
        }
    }
    Ok(plan)
}

/// The policy parameters that set the swept parameter to `v` (none for `jobs`,
/// which varies the input instead).
fn swept_policy_args(what: What, v: f64) -> PolicyArgs {
    match what {
        What::Tiers => PolicyArgs {
            tiers: Some(v.round().max(1.0) as u32),
            ..PolicyArgs::default()
        },
        What::Epsilon => PolicyArgs {
            epsilon: Some(v),
            ..PolicyArgs::default()
        },
        What::Jobs => PolicyArgs::default(),
    }
}

/// The finished runs, looked up by their [`RunKey`].
struct SweepRuns<'a> {
    /// Whether the baseline ran once per value (`jobs`) rather than once per seed.
    jobs_sweep: bool,
    index: Vec<RunKey>,
    results: &'a [SimResult],
}

impl SweepRuns<'_> {
    fn find(&self, vi: usize, seed: u64, pi: Option<usize>) -> &SimResult {
        let vi_base = if pi.is_none() && !self.jobs_sweep {
            0
        } else {
            vi
        };
        let k = self
            .index
            .iter()
            .position(|&(a, b, c)| a == vi_base && b == seed && c == pi)
            .expect("run exists");
        &self.results[k]
    }
}

/// The swept parameter's name in the table header and the file names.
fn sweep_name(what: What) -> &'static str {
    match what {
        What::Jobs => "jobs",
        What::Tiers => "tiers",
        What::Epsilon => "epsilon",
    }
}

/// Over seeds, one swept policy at one value.
struct PointStats {
    speedup_mean: f64,
    speedup_sd: f64,
    avg_jct_s: f64,
    /// NaN when no seed had a fair-share measure.
    fair_met: f64,
}

/// The figures of swept policy `pi` at value `vi`, over `seeds` seeds.
fn point_stats(runs: &SweepRuns<'_>, seeds: u64, vi: usize, pi: usize) -> PointStats {
    let sp: Vec<f64> = (0..seeds)
        .map(|s| {
            runs.find(vi, s, None).summary.avg_jct_s / runs.find(vi, s, Some(pi)).summary.avg_jct_s
        })
        .collect();
    let jct: Vec<f64> = (0..seeds)
        .map(|s| runs.find(vi, s, Some(pi)).summary.avg_jct_s)
        .collect();
    let met: Vec<f64> = (0..seeds)
        .filter_map(|s| fair_share_met(&runs.find(vi, s, Some(pi)).jobs))
        .collect();
    let (m, sd) = mean_sd(&sp);
    let fm = if met.is_empty() {
        f64::NAN
    } else {
        mean_sd(&met).0
    };
    PointStats {
        speedup_mean: m,
        speedup_sd: sd,
        avg_jct_s: mean_sd(&jct).0,
        fair_met: fm,
    }
}

/// What the sweep's table yields for the files: the CSV text and the chart's lines.
struct SweepTable {
    csv: String,
    /// Speed-up per swept policy.
    series: Vec<Series>,
    /// Fraction meeting the fair-share JCT (filled for `epsilon` only).
    fair: Series,
}

/// Prints the table on stdout and collects the CSV and chart series.
fn tabulate(args: &Args, values: &[f64], swept: &[String], runs: &SweepRuns<'_>) -> SweepTable {
    let mut table = SweepTable {
        csv: String::from("value,policy,speedup_mean,speedup_sd,avg_jct_s,fair_share_met\n"),
        series: swept
            .iter()
            .map(|p| Series {
                name: format!("{p} speed-up"),
                points: Vec::new(),
            })
            .collect(),
        fair: Series {
            name: "fraction meeting fair-share JCT".into(),
            points: Vec::new(),
        },
    };
    println!(
        "{:>8} {:<10} {:>14} {:>16} {:>10}",
        sweep_name(args.what),
        "policy",
        "speed-up",
        "avg JCT s",
        "fair met"
    );
    for (vi, &v) in values.iter().enumerate() {
        for (pi, p) in swept.iter().enumerate() {
            let PointStats {
                speedup_mean: m,
                speedup_sd: sd,
                avg_jct_s,
                fair_met: fm,
            } = point_stats(runs, args.seeds, vi, pi);
            println!(
                "{:>8} {:<10} {:>14} {:>16.0} {:>10.3}",
                fmt_v(v),
                p,
                format!("{m:.2}±{sd:.2}x"),
                avg_jct_s,
                fm
            );
            table
                .csv
                .push_str(&format!("{v},{p},{m:.4},{sd:.4},{avg_jct_s:.1},{fm:.4}\n"));
            table.series[pi].points.push((v, m));
            if matches!(args.what, What::Epsilon) && fm.is_finite() {
                table.fair.points.push((v, fm));
            }
        }
    }
    table
}

/// Draws the speed-up chart (and, for `epsilon`, the fair-share fraction) to `png`.
fn draw_chart(args: &Args, png: &Path, series: &[Series]) -> anyhow::Result<()> {
    let (title, xl) = match args.what {
        What::Jobs => ("Speed-up vs number of jobs (Fig. 12)", "jobs"),
        What::Tiers => ("Venn speed-up vs tiers V (Fig. 13)", "tiers V"),
        What::Epsilon => ("Venn vs fairness knob (Fig. 14)", "epsilon"),
    };
    let y_label = match args.what {
        What::Epsilon => format!("speed-up over {} / fraction of jobs", args.baseline),
        _ => format!("speed-up over {}", args.baseline),
    };
    line_chart(png, title, xl, &y_label, series)?;
    Ok(())
}

fn fmt_v(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v}")
    }
}
