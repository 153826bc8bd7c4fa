//! `venn-sim admission-ic`: the empirical incentive check of posted-price admission.
//! For each seed, one truthful run; from it, target jobs are picked — `--targets`
//! admitted ones and `--declined-targets` declined ones, spread over the trace — and
//! each is rerun once per factor with only that job scaling its stated rounds
//! distribution by the factor. The job's utility (value at completion − payment) is
//! compared pairwise with its truthful utility. Writes `ic_cases.csv`, `ic.json` and
//! `ic.png` to `--out`.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use venn_sim::engine::SimResult;
use venn_sim::engine::admission::{AdmissionMode, Misreport};
use venn_sim::incentives::{IcCase, summarize, targets, utility};
use venn_sim::plot::{Series, line_chart};

use super::common::{InputArgs, Inputs, SimArgs, Task, run_all};

/// Options of `admission-ic`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Workload name or job CSV (see `run --help`).
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Scheduling policy the admitted jobs run under.
    #[arg(long, default_value = "venn")]
    pub policy: String,
    /// Number of seeds (0, 1, …); each seed redraws values, lengths and dispatch noise.
    #[arg(long, default_value_t = 6)]
    pub seeds: u64,
    /// Jobs admitted in the truthful run that misreport, per seed.
    #[arg(long, default_value_t = 6)]
    pub targets: usize,
    /// Jobs declined in the truthful run that misreport, per seed (could a lie get
    /// them in profitably?).
    #[arg(long, default_value_t = 2)]
    pub declined_targets: usize,
    /// Comma-separated factors a misreporting job scales its stated rounds by.
    #[arg(long, value_delimiter = ',', default_value = "0.5,0.75,1.5,2")]
    pub factors: Vec<f64>,
    /// Output directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub input: InputArgs,
    #[command(flatten)]
    pub sim: SimArgs,
}

/// Runs `admission-ic`.
pub fn run(args: Args) -> anyhow::Result<()> {
    if args.factors.iter().any(|f| !(f.is_finite() && *f > 0.0)) {
        anyhow::bail!("--factors must be positive numbers");
    }
    let inputs = Inputs::load(&args.input)?;
    let input = inputs.workload(&args.workload, None)?;
    let mut bases = Vec::new();
    for seed in 0..args.seeds {
        let mut base = args
            .sim
            .config(&args.input, seed)?
            .with_policy(&args.policy);
        let mut adm = base.admission.take().unwrap_or_default();
        adm.mode = AdmissionMode::PostedPrice;
        adm.misreport = None;
        base.admission = Some(adm);
        bases.push(base);
    }
    let truthful = run_all(
        bases
            .iter()
            .enumerate()
            .map(|(s, c)| Task {
                label: format!("seed {s} truthful"),
                input: &input,
                config: c.clone(),
            })
            .collect(),
        args.sim.threads(),
    )?;
    let picks: Vec<Vec<usize>> = truthful
        .iter()
        .map(|r| pick(r, args.targets, args.declined_targets))
        .collect();
    let mut tasks = Vec::new();
    for (s, base) in bases.iter().enumerate() {
        for &j in &picks[s] {
            for &factor in &args.factors {
                let mut c = base.clone();
                let job = input.jobs[j].row.idx;
                if let Some(a) = &mut c.admission {
                    a.misreport = Some(Misreport { job, factor });
                }
                tasks.push(Task {
                    label: format!("seed {s} job {job} ×{factor}"),
                    input: &input,
                    config: c,
                });
            }
        }
    }
    let results = run_all(tasks, args.sim.threads())?;
    let mut cases = Vec::new();
    let mut next = results.iter();
    for (s, truth) in truthful.iter().enumerate() {
        for &j in &picks[s] {
            for &factor in &args.factors {
                let r = next.next().expect("one result per task");
                cases.push(IcCase {
                    seed: s as u64,
                    job: truth.jobs[j].idx,
                    factor,
                    truthful: utility(&truth.jobs[j]),
                    misreport: utility(&r.jobs[j]),
                });
            }
        }
    }
    let truthful_summaries: Vec<_> = truthful
        .iter()
        .map(|r| r.summary.admission.clone())
        .collect();
    let rows = summarize(&cases);
    println!(
        "{:>7} {:>6} {:>14} {:>14} {:>12} {:>10} {:>8} {:>8} {:>12}",
        "factor",
        "pairs",
        "truthful U",
        "misreport U",
        "mean gain",
        "±95%",
        "gain %",
        "loss %",
        "max gain"
    );
    for r in &rows {
        println!(
            "{:>7.2} {:>6} {:>14.1} {:>14.1} {:>12.1} {:>10.1} {:>7.0}% {:>7.0}% {:>12.1}",
            r.factor,
            r.cases,
            r.mean_truthful,
            r.mean_misreport,
            r.mean_gain,
            r.ci95,
            100.0 * r.share_gain,
            100.0 * r.share_loss,
            r.max_gain
        );
    }
    for (s, a) in truthful_summaries.iter().enumerate() {
        if let Some(a) = a {
            println!(
                "seed {s} truthful: admitted {}/{}, evicted {}, completed {}, welfare {:.0}, revenue {:.0}, planned util {:.2}, device util {:.2}",
                a.admitted,
                a.submitted,
                a.evicted,
                a.completed,
                a.welfare,
                a.revenue,
                a.planned_utilisation,
                a.device_utilisation
            );
        }
    }
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let p = dir.join("ic_cases.csv");
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?,
        );
        writeln!(f, "seed,job,factor,truthful_utility,misreport_utility,gain")?;
        for c in &cases {
            writeln!(
                f,
                "{},{},{},{:.4},{:.4},{:.4}",
                c.seed,
                c.job,
                c.factor,
                c.truthful,
                c.misreport,
                c.gain()
            )?;
        }
        f.flush()?;
        let json = serde_json::json!({
            "workload": args.workload,
            "policy": args.policy,
            "seeds": args.seeds,
            "targets": picks
                .iter()
                .map(|p| p.iter().map(|&j| input.jobs[j].row.idx).collect::<Vec<_>>())
                .collect::<Vec<_>>(),
            "rows": rows,
            "truthful_runs": truthful_summaries,
        });
        std::fs::write(
            dir.join("ic.json"),
            serde_json::to_string_pretty(&json)? + "\n",
        )?;
        let mut pts: Vec<(f64, f64)> = rows.iter().map(|r| (r.factor, r.mean_misreport)).collect();
        if let Some(r) = rows.first() {
            pts.push((1.0, r.mean_truthful));
        }
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let gains: Vec<(f64, f64)> = {
            let mut g: Vec<(f64, f64)> = rows.iter().map(|r| (r.factor, r.mean_gain)).collect();
            g.push((1.0, 0.0));
            g.sort_by(|a, b| a.0.total_cmp(&b.0));
            g
        };
        line_chart(
            &dir.join("ic.png"),
            "Misreporting the length distribution",
            "reported rounds / true rounds",
            "mean utility of the reporting job",
            &[
                Series {
                    name: "mean utility".into(),
                    points: pts,
                },
                Series {
                    name: "mean gain over truthful".into(),
                    points: gains,
                },
            ],
        )?;
        tracing::info!(dir = %dir.display(), "wrote ic_cases.csv, ic.json, ic.png");
    }
    Ok(())
}

/// Positions of `admitted` jobs the truthful run admitted and `declined` it declined,
/// each spread evenly over the trace.
fn pick(truth: &SimResult, admitted: usize, declined: usize) -> Vec<usize> {
    let with = |outcome: &str| -> Vec<usize> {
        truth
            .jobs
            .iter()
            .enumerate()
            .filter(|(_, j)| {
                j.admission.as_deref() == Some(outcome)
                    || (outcome == "admitted" && j.admission.as_deref() == Some("evicted"))
            })
            .map(|(i, _)| i)
            .collect()
    };
    let mut out = Vec::new();
    for (pool, k) in [(with("admitted"), admitted), (with("declined"), declined)] {
        out.extend(targets(pool.len(), k).into_iter().map(|i| pool[i]));
    }
    out.sort_unstable();
    out
}
