//! `venn-sim admission-ic`: the empirical incentive check of posted-price admission.
//! A misreporting job scales every outcome of its stated rounds distribution by a
//! factor; its realised utility (value at completion − payment) is compared pairwise
//! with its utility when truthful, all else equal. Two models:
//! - `--model slots` (default): the mechanism alone ([`slot_model`]): many synthetic
//!   instances in which a launched job runs at its stated rate for its real rounds, so
//!   the "truth" really is the job's length distribution;
//! - `--model engine`: the full simulator on a trace workload. Per seed one truthful
//!   run; `--targets` jobs it admitted and `--declined-targets` it declined are rerun
//!   once per factor. Here a job's speed emerges from the device scheduler, so its
//!   stated distribution is only a model of its length.
//!
//! Writes `ic_cases.csv`, `ic.json` and `ic.png` to `--out`.

use std::io::Write;
use std::path::PathBuf;
use venn_core::PolicyKind;

use anyhow::Context;
use venn_plot::lines::{Series, line_chart};
use venn_sim::engine::SimResult;
use venn_sim::engine::admission::{AdmissionMode, Misreport};
use venn_sim::incentives::slot_model::{self, Instance};
use venn_sim::incentives::{IcCase, summarize, targets, utility};

use super::common::{InputArgs, Inputs, SimArgs, Task, run_all};

/// Which world the check runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Model {
    /// The admission mechanism alone on synthetic instances (fast, exact truths).
    Slots,
    /// The full simulator on a trace workload.
    Engine,
}

/// Options of `admission-ic`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The mechanism alone (`slots`) or the whole simulator (`engine`).
    #[arg(long, value_enum, default_value_t = Model::Slots)]
    pub model: Model,
    /// `slots`: synthetic instances (40 jobs over 200 slots of capacity 100 each).
    #[arg(long, default_value_t = 500)]
    pub instances: u64,
    /// Workload name or job CSV (see `run --help`).
    #[arg(long, default_value = "even")]
    pub workload: String,
    /// Scheduling policy the admitted jobs run under.
    #[arg(long, default_value = "venn", value_parser = PolicyKind::names_parser())]
    pub policy: String,
    /// `engine`: number of seeds (0, 1, …); each redraws values, lengths and dispatch noise.
    #[arg(long, default_value_t = 6)]
    pub seeds: u64,
    /// Jobs that misreport per seed or instance (`engine`: among those the truthful run
    /// admitted; `slots`: spread over arrival order).
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
    let (cases, extra) = match args.model {
        Model::Slots => slot_cases(&args)?,
        Model::Engine => engine_cases(&args)?,
    };
    report(&args, &cases, extra)
}

/// Paired cases in the mechanism-only model.
fn slot_cases(args: &Args) -> anyhow::Result<(Vec<IcCase>, serde_json::Value)> {
    let base = args.sim.config(&args.input, 0)?;
    let params = base.admission.map(|a| a.controller).unwrap_or_default();
    let inst = Instance::default();
    let picks = targets(inst.jobs, args.targets);
    let bar = indicatif::ProgressBar::new(args.instances);
    let mut cases = Vec::new();
    for seed in 0..args.instances {
        let truth = slot_model::utilities(params, &inst, seed, None);
        for &j in &picks {
            for &f in &args.factors {
                let lie = slot_model::utilities(params, &inst, seed, Some((j, f)));
                cases.push(IcCase {
                    seed,
                    job: j as u32,
                    factor: f,
                    truthful: truth[j],
                    misreport: lie[j],
                });
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let extra = serde_json::json!({
        "model": "slots",
        "instances": args.instances,
        "jobs_per_instance": inst.jobs,
        "arrival_slots": inst.arrival_slots,
        "capacity_per_slot": inst.capacity,
        "controller": params,
    });
    Ok((cases, extra))
}

/// Paired cases in the full simulator.
fn engine_cases(args: &Args) -> anyhow::Result<(Vec<IcCase>, serde_json::Value)> {
    let inputs = Inputs::load(&args.input)?;
    let input = inputs.workload(&args.workload, None)?;
    let mut bases = Vec::new();
    for seed in 0..args.seeds {
        let mut base = args
            .sim
            .with_policy(&args.sim.config(&args.input, seed)?, &args.policy);
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
    let extra = serde_json::json!({
        "model": "engine",
        "workload": args.workload,
        "policy": args.policy,
        "seeds": args.seeds,
        "targets": picks
            .iter()
            .map(|p| p.iter().map(|&j| input.jobs[j].row.idx).collect::<Vec<_>>())
            .collect::<Vec<_>>(),
        "truthful_runs": truthful_summaries,
    });
    Ok((cases, extra))
}

/// Prints the table and writes the files.
fn report(args: &Args, cases: &[IcCase], extra: serde_json::Value) -> anyhow::Result<()> {
    let rows = summarize(cases);
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
    if let Some(dir) = &args.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let p = dir.join("ic_cases.csv");
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(&p).with_context(|| format!("creating {}", p.display()))?,
        );
        writeln!(f, "seed,job,factor,truthful_utility,misreport_utility,gain")?;
        for c in cases {
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
        let mut json = extra;
        json["rows"] = serde_json::to_value(&rows)?;
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
