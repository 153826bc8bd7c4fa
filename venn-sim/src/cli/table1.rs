//! `venn-sim table1`: the paper's Table 1, speed-up in average JCT over the
//! baseline for five workloads, mean and standard deviation over seeds.

use std::collections::BTreeMap;

use super::common::{InputArgs, Inputs, SimArgs, Task, run_all};

/// The paper's Table 1 (speed-up over Random: FIFO, SRSF, Venn), for
/// side-by-side printing. Only the Even row is transcribed here.
pub const PAPER: &[(&str, [f64; 3])] = &[("even", [1.38, 1.69, 1.87])];

/// Options of `table1`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Number of seeds (0, 1, ..., N-1).
    #[arg(long, default_value_t = 5)]
    pub seeds: u64,
    /// Print `{"workload": {"policy": speedup}}` (seed means) on stdout.
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
    #[arg(long, value_delimiter = ',', default_value = "fifo,srsf,venn")]
    pub policies: Vec<String>,
    /// Speed-ups are over this policy, run with the same seed.
    #[arg(long, default_value = "random")]
    pub baseline: String,
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

/// Runs `table1`.
pub fn run(args: Args) -> anyhow::Result<()> {
    let inputs = Inputs::load(&args.input)?;
    let wl_inputs = args
        .workloads
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
    let mut keys = Vec::new();
    for (w, input) in args.workloads.iter().zip(&wl_inputs) {
        for seed in 0..args.seeds {
            for p in &all {
                tasks.push(Task {
                    label: format!("{w} {p} s{seed}"),
                    input,
                    config: args.sim.config(&args.input, seed)?.with_policy(p),
                });
                keys.push((w.clone(), p.clone(), seed));
            }
        }
    }
    let results = run_all(tasks, args.sim.threads())?;
    let mut jct: BTreeMap<(String, String, u64), f64> = BTreeMap::new();
    for (k, r) in keys.into_iter().zip(&results) {
        jct.insert(k, r.summary.avg_jct_s);
    }
    let mut json = serde_json::Map::new();
    if !args.json {
        println!(
            "speed-up in average JCT over {} (mean ± sd over {} seeds; paper in brackets)",
            args.baseline, args.seeds
        );
        print!("{:<8}", "workload");
        for p in &args.policies {
            print!(" {:>22}", p);
        }
        println!(" {:>16}", format!("{} avg JCT s", args.baseline));
    }
    for w in &args.workloads {
        let mut row = serde_json::Map::new();
        if !args.json {
            print!("{w:<8}");
        }
        for (pi, p) in args.policies.iter().enumerate() {
            let sp: Vec<f64> = (0..args.seeds)
                .map(|s| {
                    jct[&(w.clone(), args.baseline.clone(), s)] / jct[&(w.clone(), p.clone(), s)]
                })
                .collect();
            let (m, sd) = mean_sd(&sp);
            row.insert(p.clone(), serde_json::json!((m * 1000.0).round() / 1000.0));
            if !args.json {
                let paper = PAPER
                    .iter()
                    .find(|(n, _)| n == w)
                    .and_then(|(_, v)| match p.as_str() {
                        "fifo" => Some(v[0]),
                        "srsf" => Some(v[1]),
                        "venn" => Some(v[2]),
                        _ => None,
                    })
                    .filter(|_| pi < 3)
                    .map_or(String::new(), |x| format!("[{x:.2}]"));
                print!(" {:>15} {:>6}", format!("{m:.2}±{sd:.2}x"), paper);
            }
        }
        if !args.json {
            let b: Vec<f64> = (0..args.seeds)
                .map(|s| jct[&(w.clone(), args.baseline.clone(), s)])
                .collect();
            println!(" {:>16.0}", mean_sd(&b).0);
        }
        json.insert(w.clone(), serde_json::Value::Object(row));
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&serde_json::Value::Object(json))?
        );
    }
    Ok(())
}
