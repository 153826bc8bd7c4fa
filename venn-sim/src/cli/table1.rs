//! `venn-sim table1`: the paper's Table 1, speed-up in average JCT over the
//! baseline for five workloads, mean and standard deviation over seeds.

use std::collections::BTreeMap;
use venn_core::PolicyKind;

use venn_sim::engine::{SimInput, SimResult};

use super::common::{Average, InputArgs, Inputs, SimArgs, Task, run_all, secs};

/// The paper's Table 1 (speed-up over Random: FIFO, SRSF, Venn), for
/// side-by-side printing. Only the Even row is transcribed here.
pub const PAPER: &[(&str, [f64; 3])] = &[("even", [1.38, 1.69, 1.87])];

/// Options of `table1`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of seeds (0, 1, ..., N-1).
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Print `{"workload": {"policy": speedup}}` (seed means, over the first
    /// baseline, with `--average`) on stdout instead of the tables.
    #[arg(long)]
    pub json: bool,
    /// Comma-separated workloads.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "even,small,large,high,low"
    )]
    pub workloads: Vec<String>,
    /// Comma-separated policies.
    #[arg(long, value_delimiter = ',', default_value = "fifo,srsf,venn", value_parser = PolicyKind::names_parser())]
    pub policies: Vec<String>,
    /// Baselines, run with the same seeds; speed-ups are over each in turn.
    /// The first one feeds `--json`.
    #[arg(long, value_delimiter = ',', default_value = "random", value_parser = PolicyKind::names_parser())]
    pub baselines: Vec<String>,
    /// Which average JCT the JSON speed-ups compare (the tables show both).
    #[arg(long, value_enum, default_value_t = Average::Censored)]
    pub average: Average,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Mean and sample standard deviation.
pub fn mean_sd(v: &[f64]) -> (f64, f64) {
    let n = v.len() as f64;
    if v.is_empty() {
        return (f64::NAN, f64::NAN);
    }
    let m = v.iter().sum::<f64>() / n;
    let var = if v.len() > 1 {
        v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (n - 1.0)
    } else {
        0.0
    };
    (m, var.sqrt())
}

fn paper(w: &str, p: &str) -> String {
    PAPER
        .iter()
        .find(|(n, _)| *n == w)
        .and_then(|(_, v)| match p {
            "fifo" => Some(v[0]),
            "srsf" => Some(v[1]),
            "venn" => Some(v[2]),
            _ => None,
        })
        .map_or(String::new(), |x| format!("[{x:.2}]"))
}

/// Runs `table1`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.baselines.is_empty() {
        anyhow::bail!("--baselines is empty");
    }
    let inputs = Inputs::load(&args.input)?;
    let wl_inputs = args
        .workloads
        .iter()
        .map(|w| inputs.workload(w, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let all = policies_to_run(&args);
    let (tasks, keys) = plan_runs(&args, &wl_inputs, &all)?;
    let results = run_all(tasks, args.sim.threads())?;
    let mut runs = Runs {
        seeds: args.seeds,
        by_key: BTreeMap::new(),
    };
    // In run order, so a workload listed twice keeps its last runs.
    runs.by_key.extend(keys.into_iter().zip(&results));
    if args.json {
        println!("{}", speedups_json(&args, &runs)?);
        return Ok(());
    }
    print_speedup_tables(&args, &runs);
    print_jct_table(&args, &runs, &all);
    Ok(())
}

/// The baselines, then the policies that are not among them.
fn policies_to_run(args: &Args) -> Vec<String> {
    let mut all = args.baselines.clone();
    all.extend(
        args.policies
            .iter()
            .filter(|p| !all.contains(p))
            .cloned()
            .collect::<Vec<_>>(),
    );
    all
}

/// Which run a result belongs to: workload, policy, seed.
type RunKey = (String, String, u64);

/// One run per workload, seed and policy, with each run's key in the same order.
fn plan_runs<'a>(
    args: &Args,
    wl_inputs: &'a [SimInput],
    all: &[String],
) -> anyhow::Result<(Vec<Task<'a>>, Vec<RunKey>)> {
    let mut tasks = Vec::new();
    let mut keys = Vec::new();
    for (w, input) in args.workloads.iter().zip(wl_inputs) {
        for seed in 0..args.seeds {
            for p in all {
                tasks.push(Task {
                    label: format!("{w} {p} s{seed}"),
                    input,
                    config: args
                        .sim
                        .with_policy(&args.sim.config(&args.input, seed)?, p),
                });
                keys.push((w.clone(), p.clone(), seed));
            }
        }
    }
    Ok((tasks, keys))
}

/// The finished runs by workload, policy and seed.
struct Runs<'a> {
    seeds: u64,
    by_key: BTreeMap<RunKey, &'a SimResult>,
}

impl Runs<'_> {
    fn get(&self, w: &str, p: &str, s: u64) -> &SimResult {
        self.by_key[&(w.to_string(), p.to_string(), s)]
    }

    /// Per seed, `base`'s average JCT over `p`'s on workload `w`.
    fn speedups(&self, w: &str, base: &str, p: &str, avg: Average) -> Vec<f64> {
        (0..self.seeds)
            .map(|s| avg.of(self.get(w, base, s)) / avg.of(self.get(w, p, s)))
            .collect()
    }
}

/// `{"workload": {"policy": speedup}}`: seed means over the first baseline.
fn speedups_json(args: &Args, runs: &Runs<'_>) -> anyhow::Result<String> {
    let mut json = serde_json::Map::new();
    for w in &args.workloads {
        let mut row = serde_json::Map::new();
        for p in &args.policies {
            let (m, _) = mean_sd(&runs.speedups(w, &args.baselines[0], p, args.average));
            row.insert(p.clone(), serde_json::json!((m * 1000.0).round() / 1000.0));
        }
        json.insert(w.clone(), serde_json::Value::Object(row));
    }
    Ok(serde_json::to_string(&serde_json::Value::Object(json))?)
}

/// Per baseline and kind of average, the speed-up table with the paper's figures.
fn print_speedup_tables(args: &Args, runs: &Runs<'_>) {
    for base in &args.baselines {
        for avg in [Average::Censored, Average::Finished] {
            println!(
                "\nspeed-up over {base}, average JCT {:?} (mean ± sd over {} seeds; paper in brackets)",
                avg, args.seeds
            );
            print!("{:<8}", "workload");
            for p in &args.policies {
                print!(" {:>22}", p);
            }
            println!(" {:>20}", format!("{base} avg JCT s"));
            for w in &args.workloads {
                print_speedup_row(args, runs, w, base, avg);
            }
        }
    }
}

fn print_speedup_row(args: &Args, runs: &Runs<'_>, w: &str, base: &str, avg: Average) {
    print!("{w:<8}");
    for p in &args.policies {
        let (m, sd) = mean_sd(&runs.speedups(w, base, p, avg));
        let pp = if base == "random" {
            paper(w, p)
        } else {
            String::new()
        };
        // A finished-only average is undefined when no job finished.
        let cell = if m.is_finite() && m > 0.0 {
            format!("{m:.2}±{sd:.2}x")
        } else {
            "n/a".to_string()
        };
        print!(" {:>15} {:>6}", cell, pp);
    }
    let b: Vec<f64> = (0..args.seeds)
        .map(|s| avg.of(runs.get(w, base, s)))
        .collect();
    println!(" {:>20.0}", mean_sd(&b).0);
}

/// Average JCT and jobs finished per workload and policy, over seeds.
fn print_jct_table(args: &Args, runs: &Runs<'_>, all: &[String]) {
    println!(
        "\naverage JCT in seconds (mean over seeds; censored: unfinished jobs up to the horizon; finished jobs / all in brackets)"
    );
    print!("{:<8}", "workload");
    for p in all {
        print!(" {:>26}", p);
    }
    println!();
    for w in &args.workloads {
        print!("{w:<8}");
        for p in all {
            let c: Vec<f64> = (0..args.seeds)
                .map(|s| runs.get(w, p, s).summary.avg_jct_s)
                .collect();
            let f: Vec<f64> = (0..args.seeds)
                .map(|s| runs.get(w, p, s).summary.finished as f64)
                .collect();
            print!(
                " {:>26}",
                format!(
                    "{} [{:.1}/{}]",
                    secs(mean_sd(&c).0),
                    mean_sd(&f).0,
                    runs.get(w, p, 0).summary.jobs
                )
            );
        }
        println!();
    }
}
