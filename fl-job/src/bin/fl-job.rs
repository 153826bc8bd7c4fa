//! `fl-job`: run one live FL job against a manager, benchmark the models, and run the
//! centralized sanity experiment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use datasets::{Femnist, WriterSet};
use fl_job::bench::{bench_model, markdown};
use fl_job::centralized::{CentralizedConfig, Point, run_centralized};
use fl_task::{Backend, ModelKind, TrainConfig, weights};
use indicatif::{ProgressBar, ProgressStyle};
use venn_plot::accuracy::{Series, accuracy_png};

/// Models, training and FedAvg for the Venn FL testbed (FEMNIST, Burn).
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    /// Compute backend: flex (default CPU); ndarray, wgpu, cuda when built with that feature.
    #[arg(long, global = true, default_value = "flex")]
    backend: Backend,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Train and inference samples/s, weight size and (de)serialisation time per model.
    Bench(BenchArgs),
    /// Train on all writers' train data, test on their test data; write CSV + PNG.
    Centralized(CentralizedArgs),
    /// Run one FL job against a venn-manager: register, submit rounds, serve the plan and
    /// weights to assigned devices, aggregate, evaluate, append a CSV row per round.
    Run(RunArgs),
    /// One FedAvg job without a scheduler: each round a seeded draw of train writers trains
    /// locally, the updates are averaged (weighted by samples) and the result is scored on a
    /// fixed held-out set. Writes fedavg.json (participants, seeds, evaluation set, curve),
    /// fedavg.csv, init.f32 (the initial weights) for a PyTorch replay
    /// (fl-job/bench/fedavg_torch.py).
    Fedavg(FedavgArgs),
}

/// `fl-job bench`'s arguments.
#[derive(clap::Args)]
struct BenchArgs {
    /// Models to measure, e.g. resnet18:64 or mobilenet_v2:0.5.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "resnet18:64,resnet18:16,mobilenet_v2:1.0,mobilenet_v2:0.5"
    )]
    models: Vec<ModelKind>,
    /// Mini-batch size.
    #[arg(long, default_value_t = 20)]
    batch: usize,
    /// Seconds spent timing each of training and inference per model.
    #[arg(long, default_value_t = 8.0)]
    seconds: f64,
    /// Also write the run as JSON here (`BenchReport`, schema 1: backend, threads,
    /// batch_size, seconds, and rows with the model as its spec, e.g. resnet18:16).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Run the convolutions and BatchNorm on Burn's own ops instead of fl-job's CPU
    /// kernels, to measure what the kernels gain.
    #[arg(long)]
    burn_ops: bool,
}

/// `fl-job centralized`'s arguments.
#[derive(clap::Args)]
struct CentralizedArgs {
    /// The model, e.g. resnet18:16 or mobilenet_v2:0.5.
    #[arg(long, default_value = "mobilenet_v2:0.5")]
    model: ModelKind,
    /// FEMNIST directory or a data directory holding femnist/. Default: $VENN_DATA,
    /// else a downloaded set, else ../shared/data, else the subset built in.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Wall-time budget in minutes (checked after each evaluation).
    #[arg(long, default_value_t = 30.0)]
    budget_min: f64,
    /// Stop after this many epochs.
    #[arg(long, default_value_t = 10.0)]
    max_epochs: f64,
    /// Stop once test accuracy reaches this fraction (e.g. 0.85).
    #[arg(long)]
    stop_at: Option<f64>,
    /// SGD steps between test evaluations.
    #[arg(long, default_value_t = 500)]
    eval_every: usize,
    #[command(flatten)]
    sgd: SgdArgs,
    /// Shuffle seed.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Start from these weights (written by an earlier run's weights.bin) instead of a
    /// fresh model, e.g. to continue at a lower learning rate.
    #[arg(long)]
    init: Option<PathBuf>,
    /// Output directory for curve.csv, curve.png, summary.json and weights.bin.
    #[arg(long, default_value = "results/centralized")]
    out: PathBuf,
}

/// The SGD settings `centralized` and `fedavg` share.
#[derive(clap::Args, Debug)]
struct SgdArgs {
    /// Learning rate.
    #[arg(long, default_value_t = 0.05)]
    lr: f64,
    /// Momentum (no dampening, as PyTorch's SGD).
    #[arg(long, default_value_t = 0.9)]
    momentum: f64,
    /// Weight decay.
    #[arg(long, default_value_t = 0.0)]
    weight_decay: f64,
    /// Mini-batch size.
    #[arg(long, default_value_t = 20)]
    batch: usize,
}

impl SgdArgs {
    /// These settings over `TrainConfig`'s defaults.
    fn train_config(&self) -> TrainConfig {
        TrainConfig {
            lr: self.lr,
            momentum: self.momentum,
            weight_decay: self.weight_decay,
            batch_size: self.batch,
            ..Default::default()
        }
    }
}

/// `fl-job fedavg`'s arguments.
#[derive(clap::Args)]
struct FedavgArgs {
    /// The model, e.g. resnet18:4 or mobilenet_v2:0.25.
    #[arg(long, default_value = "resnet18:4")]
    model: ModelKind,
    /// FedAvg rounds.
    #[arg(long, default_value_t = 20)]
    rounds: u32,
    /// Train writers drawn per round (without replacement, by the seed).
    #[arg(long, default_value_t = 10)]
    participants: usize,
    #[command(flatten)]
    sgd: SgdArgs,
    /// Local epochs per round.
    #[arg(long, default_value_t = 1)]
    local_epochs: usize,
    /// Per-round learning-rate decay: round r (counted from 0) trains at lr × decay^r; 1
    /// keeps the rate constant. With BatchNorm, a decay (0.93 for MobileNet-V2) keeps late
    /// rounds from falling back on running statistics that do not fit the averaged
    /// weights (fl-job/TRAINING.md, "MobileNet-V2 under FedAvg").
    #[arg(long, default_value_t = 1.0)]
    lr_decay: f64,
    /// The run's seed: initial weights, participant draws, local shuffles.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Held-out test samples scored after every round (a fixed draw, the same for every
    /// seed).
    #[arg(long, default_value_t = 2000)]
    eval_samples: usize,
    /// Seed of the evaluation-set draw.
    #[arg(long, default_value_t = 0)]
    eval_seed: u64,
    /// Held-out samples (the ones after the evaluation set in its draw, never scored) on
    /// which the server re-estimates the BatchNorm statistics of the averaged weights after
    /// every round; 0 keeps FedAvg's averaged statistics (fl-job/TRAINING.md, "BatchNorm
    /// statistics re-estimated by the server").
    #[arg(long, default_value_t = 0)]
    bn_calibration: usize,
    /// FEMNIST directory. Default: as for `centralized`.
    #[arg(long)]
    data: Option<PathBuf>,
    /// Output directory for fedavg.json, fedavg.csv, init.f32 and init.json.
    #[arg(long, default_value = "results/fedavg")]
    out: PathBuf,
    /// Also write every round's global weights as round-N.f32 (the layout of init.f32), so
    /// that a replay can score our weights with its own evaluation
    /// (fl-job/bench/fedavg_torch.py --score-rounds).
    #[arg(long)]
    save_rounds: bool,
    /// Local trainings run side by side, each on one thread with its kernels serial
    /// (0 = one per rayon thread, `RAYON_NUM_THREADS`), and the evaluation set is scored in
    /// parts on them; 1 trains the participants one after another, each with its kernels
    /// over all threads. The weights are the same bytes (the mean evaluation loss may
    /// differ in its last bits).
    #[arg(long, default_value_t = 0)]
    lanes: usize,
    /// Train each round's participants as one computation (every layer grouped by client)
    /// instead of on lanes: the same updates bit for bit on the CPU kernels, for
    /// backends where a step's cost is per operation (a GPU). On the CPU kernels it is
    /// slower (fl-job/TRAINING.md, "Client-batched training"). Replaces the lanes for the
    /// training (`--lanes` then applies to the evaluation only).
    #[arg(long)]
    stack_clients: bool,
}

fn run_fedavg(a: FedavgArgs) -> anyhow::Result<()> {
    use fl_job::fedavg_run::{FedAvgConfig, rounds_csv, run_fedavg, tensors_blob};
    let femnist = Femnist::open(a.data.as_deref(), WriterSet::Main)?;
    let data_dir = femnist
        .source
        .as_ref()
        .map(|s| s.path.display().to_string())
        .unwrap_or_default();
    let cfg = FedAvgConfig {
        model: a.model,
        rounds: a.rounds,
        participants: a.participants,
        train: TrainConfig {
            local_epochs: a.local_epochs,
            lr_decay: a.lr_decay,
            ..a.sgd.train_config()
        },
        seed: a.seed,
        eval_samples: a.eval_samples,
        eval_seed: a.eval_seed,
        bn_calibration: a.bn_calibration,
        stack_clients: a.stack_clients,
        ..Default::default()
    };
    std::fs::create_dir_all(&a.out).with_context(|| format!("creating {}", a.out.display()))?;
    let bar = ProgressBar::new(u64::from(cfg.rounds)).with_style(ProgressStyle::with_template(
        "{bar:30} round {pos}/{len} [{elapsed}] {msg}",
    )?);
    let task = fl_task::task::BurnTask {
        name: "fedavg-run".into(),
        kind: cfg.model,
        train: cfg.train.clone(),
        eval_batch: cfg.eval_batch,
        bn_calibration: cfg.bn_calibration,
    };
    let mut saved: anyhow::Result<()> = Ok(());
    let (initial, report) = run_fedavg(&femnist, &data_dir, &cfg, a.lanes, |r, global| {
        if a.save_rounds && saved.is_ok() {
            saved = save_round(&task, global, &a.out.join(format!("round-{}.f32", r.round)));
        }
        tracing::info!(
            round = r.round,
            accuracy = format!("{:.4}", r.accuracy),
            loss = format!("{:.4}", r.loss),
            train_loss = format!("{:.4}", r.train_loss),
            "round"
        );
        bar.set_position(u64::from(r.round));
        bar.set_message(format!("acc {:.2} %", r.accuracy * 100.0));
    })?;
    bar.finish_and_clear();
    saved?;
    let write = |name: &str, bytes: &[u8]| {
        let path = a.out.join(name);
        std::fs::write(&path, bytes).with_context(|| format!("writing {}", path.display()))
    };
    let (blob, index) = tensors_blob(&initial);
    write("init.f32", &blob)?;
    write(
        "init.json",
        serde_json::to_string_pretty(&index)?.as_bytes(),
    )?;
    write(
        "fedavg.json",
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    write("fedavg.csv", rounds_csv(&report).as_bytes())?;
    let last = report.rounds.last().context("no round ran")?;
    println!(
        "{} seed {}: round {} accuracy {:.2} % in {:.1} s; {}",
        cfg.model,
        cfg.seed,
        last.round,
        last.accuracy * 100.0,
        report.wall_s,
        a.out.join("fedavg.json").display()
    );
    Ok(())
}

/// One round's global weights as a little-endian f32 blob in init.f32's layout.
fn save_round(task: &fl_task::task::BurnTask, global: &[u8], path: &Path) -> anyhow::Result<()> {
    use fl_task::task::FlTask;
    let (blob, _) = fl_job::fedavg_run::tensors_blob(&task.decode(global)?);
    std::fs::write(path, blob).with_context(|| format!("writing {}", path.display()))
}

/// `fl-job run`'s arguments.
#[derive(clap::Args)]
struct RunArgs {
    /// Job config (TOML: name, task, params, requirement, rounds, target_participants,
    /// overcommit, deadline_s, min_response_fraction, target_accuracy, seed).
    config: PathBuf,
    /// The task to run, overriding the config's `task` (see the registry's names).
    #[arg(long)]
    task: Option<String>,
    /// Manager base URL.
    #[arg(long, default_value = "http://127.0.0.1:7070")]
    manager: String,
    /// Address the job's device-facing server listens on.
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: std::net::SocketAddr,
    /// The URL devices reach this job at, registered as its plan_url (default:
    /// http:// + the --listen address). Needed when listening on 0.0.0.0 or behind a
    /// port mapping; the manager must allow its host (venn-manager --plan-host).
    #[arg(long, value_name = "URL")]
    advertise: Option<String>,
    /// The manager's operator token, if it was started with one (it then refuses
    /// registrations without it).
    #[arg(long, env = "VENN_OPERATOR_TOKEN", hide_env_values = true)]
    operator_token: Option<String>,
    /// Per-round CSV.
    #[arg(long, default_value = "results/job.csv")]
    csv: PathBuf,
    /// After the job ends, keep serving its results (GET /v1/results) until a collector
    /// such as `venn-lab gather` has read them, or for at most this many seconds; 0: exit
    /// at once. For a job on another host than the experimenter.
    #[arg(long, default_value_t = 0.0, value_name = "SECS")]
    linger_s: f64,
    /// Seconds to wait for the manager to come up (its /healthz to answer) before
    /// registering, for hosts or pods started in any order.
    #[arg(long, default_value_t = 60.0, value_name = "SECS")]
    wait_s: f64,
    /// FEMNIST directory (held-out test data for evaluation). Default: as for
    /// `centralized`.
    #[arg(long)]
    data: Option<PathBuf>,
}

fn run_live(a: RunArgs) -> anyhow::Result<()> {
    let RunArgs {
        config,
        task,
        manager,
        listen,
        advertise,
        operator_token,
        csv,
        data,
        linger_s,
        wait_s,
    } = a;
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("reading {}", config.display()))?;
    let mut cfg: fl_job::runner::JobConfig =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", config.display()))?;
    if let Some(t) = task {
        cfg.task = t;
    }
    cfg.validate()
        .map_err(|(k, why)| anyhow::anyhow!("{}: {k}: {why}", config.display()))?;
    let registry = fl_task::task::Registry::with_builtins();
    let t = registry.build(&cfg.task, &cfg.params)?;
    let femnist = Femnist::open(data.as_deref(), WriterSet::Main)?;
    let held_out = femnist
        .held_out(cfg.eval_samples, t.calibration_samples(), cfg.eval_seed)
        .map_err(|e| anyhow::anyhow!("{}: params.{e}", config.display()))?;
    let held_out = std::sync::Arc::new(held_out);
    let rt = tokio::runtime::Runtime::new()?;
    let opts = fl_job::runner::RunOptions {
        manager,
        listen,
        csv: Some(csv.clone()),
        t0: std::time::Instant::now(),
        operator_token,
        advertise,
        linger: (linger_s > 0.0).then(|| Duration::from_secs_f64(linger_s)),
    };
    let report = rt.block_on(async {
        wait_for_manager(&opts.manager, Duration::from_secs_f64(wait_s.max(0.0))).await?;
        fl_job::runner::run_job(cfg, t, held_out, opts)
            .await
            .map_err(anyhow::Error::from)
    })?;
    println!("{}", serde_json::to_string_pretty(&report)?);
    eprintln!("rounds in {}", csv.display());
    Ok(())
}

/// Polls the manager's `/healthz` until it answers or `patience` has passed.
async fn wait_for_manager(url: &str, patience: Duration) -> anyhow::Result<()> {
    let client = venn_api::client::ManagerClient::new(url);
    let until = std::time::Instant::now() + patience;
    loop {
        match client.healthz().await {
            Ok(()) => return Ok(()),
            Err(e) if std::time::Instant::now() >= until => {
                anyhow::bail!("the manager at {url} did not answer within {patience:?}: {e}")
            }
            Err(e) => {
                tracing::debug!(error = %e, "waiting for the manager");
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
}

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let cmd = match cli.cmd {
        Cmd::Run(a) => return run_live(a),
        Cmd::Fedavg(a) => {
            // The task's backend is the default (flex), as in every job and device.
            anyhow::ensure!(
                matches!(cli.backend, fl_task::Backend::Flex),
                "fedavg runs on the flex backend (the one jobs and devices use)"
            );
            return run_fedavg(a);
        }
        cmd => cmd,
    };
    let device = cli.backend.device();
    match cmd {
        Cmd::Bench(a) => run_bench(cli.backend, &device, a),
        Cmd::Centralized(a) => run_centralized_cmd(cli.backend, &device, a),
        Cmd::Run(_) | Cmd::Fedavg(_) => unreachable!("handled above"),
    }
}

/// `fl-job bench`: training and inference throughput per model, as a table (and JSON).
fn run_bench(
    backend: fl_task::Backend,
    device: &burn::tensor::Device,
    a: BenchArgs,
) -> anyhow::Result<()> {
    let BenchArgs {
        models,
        batch,
        seconds,
        json,
        burn_ops,
    } = a;
    fl_task::set_cpu_kernels(!burn_ops);
    // Only the flex backend has fl-job's kernels; the others always run Burn's ops.
    let ours = !burn_ops && matches!(backend, fl_task::Backend::Flex);
    let kernels = if ours { "fl-job" } else { "burn" };
    let bar = ProgressBar::new(models.len() as u64).with_style(ProgressStyle::with_template(
        "{bar:30} {pos}/{len} {msg} [{elapsed}]",
    )?);
    let mut rows = Vec::new();
    for kind in models {
        bar.set_message(kind.to_string());
        let row = bench_model(kind, batch, Duration::from_secs_f64(seconds), device)?;
        tracing::info!(?row, "measured");
        rows.push(row);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let isa = fl_task::model::kernel_isa();
    println!(
        "backend: {}, kernels: {kernels} ({isa}), batch {batch}, rayon threads: {}",
        backend,
        rayon_threads()
    );
    print!("{}", markdown(&rows));
    if let Some(path) = json {
        let report = fl_job::bench::BenchReport {
            schema: fl_job::bench::BENCH_SCHEMA,
            backend: backend.to_string(),
            kernels: kernels.into(),
            isa: isa.into(),
            threads: rayon_threads(),
            batch_size: batch,
            seconds,
            rows,
        };
        std::fs::write(&path, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `fl-job centralized`: one model on the pooled training writers, evaluated as it goes.
fn run_centralized_cmd(
    backend: fl_task::Backend,
    device: &burn::tensor::Device,
    a: CentralizedArgs,
) -> anyhow::Result<()> {
    let CentralizedArgs {
        model,
        data,
        budget_min,
        max_epochs,
        stop_at,
        eval_every,
        sgd,
        seed,
        init,
        out,
    } = a;
    let femnist = Femnist::open(data.as_deref(), WriterSet::Main)?;
    let stats = femnist.stats();
    tracing::info!(?stats, "loaded");
    let cfg = CentralizedConfig {
        model,
        train: TrainConfig {
            seed,
            ..sgd.train_config()
        },
        budget: Duration::from_secs_f64(budget_min * 60.0),
        max_epochs,
        eval_every,
        stop_at,
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let csv_path = out.join("curve.csv");
    let mut csv = csv::Writer::from_path(&csv_path)?;
    let bar = ProgressBar::new_spinner().with_style(ProgressStyle::with_template(
        "{spinner} step {pos} [{elapsed}] {msg}",
    )?);
    let mut csv_err = None;
    let initial = match &init {
        Some(path) => {
            let bytes =
                std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Some(weights::load(model, &bytes, device)?)
        }
        None => None,
    };
    let (trained, points) = run_centralized(
        &femnist,
        &cfg,
        initial,
        device,
        |s| bar.set_position(s as u64),
        |p: &Point| {
            tracing::info!(
                minutes = format!("{:.1}", p.wall_s / 60.0),
                epoch = format!("{:.2}", p.epoch),
                train_loss = format!("{:.3}", p.train_loss),
                test_acc = format!("{:.4}", p.test_accuracy),
                "eval"
            );
            bar.set_message(format!("test acc {:.2} %", p.test_accuracy * 100.0));
            if let Err(e) = csv.serialize(p).and_then(|_| Ok(csv.flush()?)) {
                csv_err.get_or_insert(e);
            }
        },
    )?;
    bar.finish_and_clear();
    if let Some(e) = csv_err {
        return Err(e).context("writing curve.csv");
    }
    let series = Series::new(
        model.to_string(),
        points
            .iter()
            .map(|p| (p.wall_s / 60.0, p.test_accuracy * 100.0))
            .collect(),
    );
    let title = format!("FEMNIST centralized, {model}");
    accuracy_png(&out.join("curve.png"), &title, &[series])?;
    std::fs::write(out.join("weights.bin"), weights::to_bytes(model, &trained)?)?;
    let last = points.last().context("no evaluation ran")?;
    let best = points.iter().map(|p| p.test_accuracy).fold(0.0, f64::max);
    let summary = serde_json::json!({
        "model": model.to_string(),
        "backend": backend.to_string(),
        "rayon_threads": rayon_threads(),
        "data": stats,
        "config": cfg,
        "init": init,
        "final": last,
        "best_test_accuracy": best,
    });
    std::fs::write(
        out.join("summary.json"),
        serde_json::to_string_pretty(&summary)?,
    )?;
    println!("{summary}");
    Ok(())
}

/// Threads the CPU backend may use (`RAYON_NUM_THREADS`, else all cores).
fn rayon_threads() -> usize {
    std::env::var("RAYON_NUM_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}
