//! `venn-lab`: run local experiments against a live manager, and load-test it.

use anyhow::Context;
use clap::{Parser, Subcommand};
use device_agent::population;
use fl_job::task::Registry;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use venn_core::{PolicyConfig, PolicyRegistry};
use venn_lab::load::{self, LoadConfig};
use venn_lab::{self as lab, LabConfig, LocalManager};
use venn_manager::Settings;

/// Venn testbed laboratory: local end-to-end experiments and load tests.
#[derive(Parser, Debug)]
#[command(version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run one experiment: manager, devices and jobs on loopback; writes a results folder
    /// (per-job CSVs, accuracy.png, tta.csv, summary.json).
    Run {
        /// Experiment config (TOML), e.g. scripts/experiments/quick.toml.
        config: PathBuf,
        /// Override the config's scheduling policy.
        #[arg(long)]
        policy: Option<String>,
        /// Results folder (default: results/<name>/<policy>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Keep the manager and its status page (the URL printed at the start) up after
        /// the run, until Ctrl-C.
        #[arg(long)]
        keep: bool,
    },
    /// Run the same experiment under each policy and print the speed-ups over the first.
    Compare {
        /// Experiment config (TOML).
        config: PathBuf,
        /// Comma-separated policies; the first is the baseline.
        #[arg(long, default_value = "random,venn", value_delimiter = ',')]
        policies: Vec<String>,
        /// Results folder (default: results/<name>).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Run every policy under this many seeds (replicate 0 is the config's seeds; the
        /// others derive theirs from it) and report speed-ups and accuracies as means
        /// with 95 % intervals over seeds (summary.json, compare.txt, compare-seeds.png).
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
        seeds: u64,
        /// The first replicate to run (with --seeds N: replicates K..K+N, into
        /// <out>/seed-<k>/<policy>): adds seeds to a folder an earlier invocation filled,
        /// then `venn-lab summarize <out>` summarises them all.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
        first_seed: u64,
    },
    /// Run the experiment on the simulator's virtual clock with real training: thousands of
    /// trace-driven devices, accuracy against virtual time.
    ///
    /// The same TOML as `run`; devices need `availability = "synthetic"` or a trace file,
    /// and `[sim]` sets the horizon (`horizon_h`), training threads and session knobs.
    /// Writes jobs/*.csv (virtual seconds), accuracy.png, tta.csv and summary.json per
    /// policy; with several policies also compare.txt, compare.csv and compare/<job>.png.
    /// The same seed gives byte-identical CSVs whatever the thread count.
    Sim {
        /// Experiment config (TOML), e.g. scripts/experiments/fig9.toml.
        config: PathBuf,
        /// Comma-separated policies; the first is the baseline (default: the config's).
        #[arg(long, value_delimiter = ',')]
        policies: Vec<String>,
        /// Results folder (default: results/<name>-sim).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Training threads (default: the config's `[sim] threads`, 0 = one per core).
        #[arg(long)]
        threads: Option<usize>,
        /// Simulate the schedule only (JCT and rounds, no training or accuracy): sizes an
        /// experiment in a second before its training is paid for.
        #[arg(long)]
        schedule_only: bool,
        /// Run jobs the feasibility check finds cannot work (too few eligible devices, or
        /// a deadline no eligible device can meet); without it the run is refused, naming
        /// them. Every job's figures are printed before the first run either way.
        #[arg(long)]
        force: bool,
        /// Run every policy under this many seeds (replicate 0 is the config's seeds; the
        /// others derive theirs from it: availability, dispatch, initial weights, local
        /// shuffles) and report speed-ups and accuracies as means with 95 % intervals over
        /// seeds (summary.json, compare.txt, compare-seeds.csv, compare-seeds.png); each
        /// seed's runs go to <out>/seed-<k>/<policy>.
        #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
        seeds: u64,
        /// The first replicate to run (with --seeds N: replicates K..K+N, into
        /// <out>/seed-<k>/<policy>): adds seeds to a folder an earlier invocation filled,
        /// then `venn-lab summarize <out>` summarises them all.
        #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u64).range(0..=1000))]
        first_seed: u64,
    },
    /// What devices each job of a config can use, without running it: per job, the
    /// trace's devices its requirement admits, eligible check-ins an hour, the most that
    /// check in within one deadline against what a round requests and needs, and its
    /// fastest eligible device's task time; and whether it can work at all (the check
    /// `sim` runs first). Device requirements and the tables: docs/devices.md.
    Devices {
        /// Experiment config (TOML).
        config: PathBuf,
    },
    /// Redraw the comparison and the summary over seeds of a results folder from the
    /// summary.json each run wrote, without running anything: after a change to the
    /// tables or plots, or when seeds ran in separate invocations into one folder
    /// (`--seeds` runs write <out>/seed-<k>/<policy>, single runs <out>/<policy>).
    /// Rewrites each seed's compare.txt, compare.csv and compare/*.png and, with two or
    /// more complete seeds, the folder's summary.json, compare.txt, compare-seeds.csv and
    /// compare-seeds.png. A seed missing a policy, or with a cancelled run, is left out.
    Summarize {
        /// The results folder (`--out` of the runs).
        dir: PathBuf,
        /// Comma-separated policies; the first is the baseline (default: every policy
        /// found, random first, the rest by name).
        #[arg(long, value_delimiter = ',')]
        policies: Vec<String>,
    },
    /// Emulated check-ins over loopback against a manager: throughput and latency.
    ///
    /// Without --url, starts a manager in this process on a temporary database (so the
    /// figures include the server's share of the same cores).
    Load {
        /// Manager base URL (default: an in-process manager).
        #[arg(long)]
        url: Option<String>,
        /// Distinct emulated devices.
        #[arg(long, default_value_t = 10_000)]
        devices: usize,
        /// Concurrent requests in flight.
        #[arg(long, default_value_t = 64)]
        connections: usize,
        /// Seconds to run.
        #[arg(long, default_value_t = 10.0)]
        seconds: f64,
        /// Register jobs with open demand first, so check-ins turn into persisted assignments.
        #[arg(long)]
        busy: bool,
        /// Scheduling policy of the in-process manager.
        #[arg(long, default_value = "venn")]
        policy: String,
    },
    /// Render an experiment as Kubernetes objects (one JSON List for `kubectl apply -f`):
    /// the manager as a StatefulSet with a volume for its SQLite file and a Service, the
    /// devices as a StatefulSet whose pod K runs shard K/N, each FL job as a Job with its
    /// Service, the job configs as a ConfigMap, and a Job `venn-gather` that collects the
    /// results folder into its /results (`kubectl cp` it). Build the image from the
    /// Containerfile.
    ///
    /// With --podman: the same pods as bare Pods (and the manager's volume claim) in a
    /// multi-document YAML for `podman kube play --network NET`, where pods find each
    /// other by name; `podman cp venn-gather-gather:/results DIR` copies the results out.
    ///
    /// Needs the cargo feature `k8s` (`cargo run --release --features k8s --bin venn-lab`).
    K8s(K8sArgs),
    /// Collect an experiment that ran on several hosts (or in Kubernetes) over HTTP: each
    /// job's rounds from its GET /v1/results (run it with `fl-job run --linger-s`), each
    /// device shard's counters from its GET /v1/stats (`device-agent --stats-listen`), the
    /// policy from the manager. Waits until every job has ended, then writes the same
    /// results folder as `run`. Hosts' clocks need not agree: times are on the manager's.
    Gather {
        /// The experiment's config (TOML): its name and time-to-accuracy thresholds.
        config: PathBuf,
        /// The manager's base URL.
        #[arg(long, value_name = "URL")]
        manager: String,
        /// A job's base URL (its plan_url); repeat for each job.
        #[arg(long = "job", value_name = "URL", required = true)]
        jobs: Vec<String>,
        /// A device-agent shard's --stats-listen URL; repeat for each shard.
        #[arg(long = "devices", value_name = "URL")]
        devices: Vec<String>,
        /// Results folder (default: results/<name>/gathered).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Give up on jobs still running after this many seconds (their rounds so far
        /// are written, and the summary says it stopped early).
        #[arg(long, default_value_t = 3600.0, value_name = "SECS")]
        timeout_s: f64,
    },
    /// Hostile clients against a real venn-manager process on loopback: floods of invented
    /// profiles and long tags, oversized fields, registration squatting, slow headers and
    /// idle connections, each bounded, while an honest device checks in from another
    /// address. Prints per attack the answers, the honest device's p50/p99 latency and the
    /// manager's RSS and database growth; then SIGKILLs the manager, restarts it and checks
    /// what it had acknowledged.
    Attack {
        /// The venn-manager binary (default: the one beside this program).
        #[arg(long)]
        manager_bin: Option<PathBuf>,
        /// Multiplies every attack's request count (1: 150,000 invented profiles, …).
        #[arg(long, default_value_t = 1.0)]
        scale: f64,
        /// Concurrent attacking connections.
        #[arg(long, default_value_t = 32)]
        workers: usize,
    },
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        // Colour codes only for a terminal: logs redirected to a file stay plain text.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
    match Cli::parse().command {
        Command::Run {
            config,
            policy,
            out,
            keep,
        } => {
            let mut cfg = LabConfig::load(&config)?;
            if let Some(p) = policy {
                cfg.policy = cfg.policy.with_name(&p);
            }
            let out = out.unwrap_or_else(|| {
                PathBuf::from("results")
                    .join(&cfg.name)
                    .join(cfg.policy.name())
            });
            let data = load_data(&cfg)?;
            let r = lab::run_experiment(
                &cfg,
                &PolicyRegistry::builtin(),
                &out,
                data,
                Registry::with_builtins(),
                ctrl_c(),
                lab::RunUi {
                    keep,
                    ..lab::RunUi::ATTENDED
                },
            )
            .await?;
            if !keep {
                // With --keep the run printed them before waiting.
                print!("{}", r.table());
                println!("results in {}", out.display());
            }
            unfinished_jobs([&r])?;
        }
        Command::Compare {
            config,
            policies,
            out,
            seeds,
            first_seed,
        } => {
            let cfg = LabConfig::load(&config)?;
            let out = out.unwrap_or_else(|| PathBuf::from("results").join(&cfg.name));
            let data = load_data(&cfg)?;
            let seeds = first_seed..first_seed + seeds;
            over_seeds(&cfg, &policies, &out, seeds, async |cfg, dir| {
                let r = lab::run_experiment(
                    &cfg,
                    &PolicyRegistry::builtin(),
                    dir,
                    data.clone(),
                    Registry::with_builtins(),
                    ctrl_c(),
                    lab::RunUi::ATTENDED,
                )
                .await?;
                Ok(r)
            })
            .await?;
        }
        Command::Sim {
            config,
            policies,
            out,
            threads,
            schedule_only,
            force,
            seeds,
            first_seed,
        } => {
            let mut cfg = LabConfig::load(&config)?;
            if let Some(t) = threads {
                cfg.sim.threads = t;
            }
            let policies = if policies.is_empty() {
                vec![cfg.policy.name().to_string()]
            } else {
                policies
            };
            let out =
                out.unwrap_or_else(|| PathBuf::from("results").join(format!("{}-sim", cfg.name)));
            let data = load_data(&cfg)?;
            let traces = venn_traces::locate_traces(None).context("finding the device tables")?;
            traces.announce();
            let cancel = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = cancel.clone();
            tokio::spawn(async move {
                ctrl_c().await;
                flag.store(true, std::sync::atomic::Ordering::SeqCst);
            });
            let seeds = first_seed..first_seed + seeds;
            let mut first = true;
            over_seeds(&cfg, &policies, &out, seeds, async |cfg, dir| {
                let opts = lab::sim::VirtualOptions {
                    policies: &PolicyRegistry::builtin(),
                    tasks: &Registry::with_builtins(),
                    data: data.clone(),
                    traces: &traces,
                    cancel: &cancel,
                    progress: true,
                    train: !schedule_only,
                    force,
                    show_feasibility: std::mem::take(&mut first),
                };
                Ok(tokio::task::block_in_place(|| {
                    lab::run_virtual(&cfg, dir, opts)
                })?)
            })
            .await?;
        }
        Command::K8s(args) => k8s(args)?,
        Command::Devices { config } => devices(&config)?,
        Command::Summarize { dir, policies } => summarize(&dir, &policies)?,
        Command::Gather {
            config,
            manager,
            jobs,
            devices,
            out,
            timeout_s,
        } => {
            let cfg = LabConfig::load(&config)?;
            let out =
                out.unwrap_or_else(|| PathBuf::from("results").join(&cfg.name).join("gathered"));
            std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
            let hosts = lab::gather::Hosts {
                manager,
                jobs,
                devices,
            };
            let opts = lab::gather::GatherOptions {
                timeout: Duration::from_secs_f64(timeout_s.max(0.0)),
                progress: true,
                ..Default::default()
            };
            let r = lab::gather::gather(&cfg, &hosts, &out, opts).await?;
            print!("{}", r.table());
            println!("results in {}", out.display());
        }
        Command::Attack {
            manager_bin,
            scale,
            workers,
        } => {
            let manager_bin = match manager_bin {
                Some(p) => p,
                None => std::env::current_exe()?
                    .parent()
                    .context("locating this program's folder")?
                    .join("venn-manager"),
            };
            anyhow::ensure!(
                manager_bin.exists(),
                "{} not found: build it (cargo build --release --bin venn-manager) or pass --manager-bin",
                manager_bin.display()
            );
            anyhow::ensure!(scale > 0.0 && scale.is_finite(), "--scale must be positive");
            let dir = std::env::temp_dir().join(format!("venn-lab-attack-{}", std::process::id()));
            let summary = lab::attack::run_attacks(&lab::attack::AttackOptions {
                manager_bin,
                dir: dir.clone(),
                scale,
                workers,
            })
            .await?;
            print!("{}", summary.table());
            let _ = std::fs::remove_dir_all(&dir);
        }
        Command::Load {
            url,
            devices,
            connections,
            seconds,
            busy,
            policy,
        } => {
            let dir = std::env::temp_dir().join(format!("venn-lab-load-{}", std::process::id()));
            std::fs::create_dir_all(&dir)?;
            let local = match url {
                Some(_) => None,
                None => {
                    let settings = Settings {
                        policy: PolicyConfig::named(&policy),
                        ..Settings::default()
                    };
                    Some(
                        LocalManager::start(settings, &dir.join("manager.db"))
                            .await
                            .context("starting the in-process manager")?,
                    )
                }
            };
            let base =
                url.unwrap_or_else(|| local.as_ref().map(|l| l.url.clone()).unwrap_or_default());
            if busy {
                load::register_busy_jobs(&base).await?;
            }
            let profiles = population::synthetic(997);
            let report = load::run(LoadConfig {
                base,
                profiles,
                devices,
                connections,
                duration: Duration::from_secs_f64(seconds),
            })
            .await;
            println!("{}", serde_json::to_string_pretty(&report)?);
        }
    }
    Ok(())
}

/// Runs every policy under the replicates `seeds`, one `run` per (seed, policy) in that
/// order, and reports each seed's comparison and, with several seeds, the summary over them.
/// Replicate 0 alone writes to `out/<policy>` (the layout before `--seeds`), anything else
/// to `out/seed-<k>/<policy>`. A cancelled run (Ctrl-C) ends the loop.
async fn over_seeds(
    cfg: &LabConfig,
    policies: &[String],
    out: &std::path::Path,
    seeds: std::ops::Range<u64>,
    mut run: impl AsyncFnMut(LabConfig, &std::path::Path) -> anyhow::Result<lab::LabResult>,
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
            print!("{}", lab::compare::write_comparison(&seed_out, &results)?);
            println!("comparison in {}", seed_out.display());
        }
        runs.push(results);
    }
    report_seeds(out, seeds, &runs)?;
    unfinished_jobs(runs.iter().flatten())
}

/// One line per job that did not finish (failed, gave up, unfinished at the horizon or
/// stopped), and an error, so the exit status is non-zero, when there is any.
fn unfinished_jobs<'a>(runs: impl IntoIterator<Item = &'a lab::LabResult>) -> anyhow::Result<()> {
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

/// `venn-lab devices`: every job's feasibility line, and why a job cannot work.
fn devices(config: &std::path::Path) -> anyhow::Result<()> {
    let cfg = LabConfig::load(config)?;
    let data = load_data(&cfg)?;
    let traces = venn_traces::locate_traces(None).context("finding the device tables")?;
    let (_, input, sim_cfg) =
        lab::sim::input::prepare(&cfg, &Registry::with_builtins(), &data, &traces.path)?;
    let mut bad = 0;
    for (lj, f) in cfg
        .jobs
        .iter()
        .zip(venn_sim::engine::feasibility(&input, &sim_cfg))
    {
        println!("job {}: {}", lj.job.name, f.line());
        if let Some(why) = f.problem() {
            bad += 1;
            println!("  cannot work: {why}");
        }
    }
    if bad > 0 {
        anyhow::bail!("{bad} job(s) cannot work on these devices");
    }
    Ok(())
}

/// `venn-lab summarize`: each seed's comparison and the summary over seeds, redrawn from
/// the saved runs.
fn summarize(dir: &std::path::Path, policies: &[String]) -> anyhow::Result<()> {
    let saved = lab::saved::read_saved(dir, policies)?;
    for (seed, why) in &saved.skipped {
        eprintln!("left out {}: {why}", seed.display());
    }
    for seed in &saved.seeds {
        if seed.runs.len() > 1 {
            print!("{}", lab::compare::write_comparison(&seed.dir, &seed.runs)?);
            println!("comparison in {}", seed.dir.display());
        }
    }
    let complete: Vec<&[lab::LabResult]> = saved.seeds.iter().map(|s| s.runs.as_slice()).collect();
    let numbers: Vec<u64> = saved.seeds.iter().map(|s| s.number).collect();
    if saved.multi_seed && complete.len() >= 2 {
        print!(
            "\n{}",
            lab::seeds::write_seeds_numbered(dir, &complete, &numbers)?
        );
        println!(
            "summary over {} seed(s) in {}",
            complete.len(),
            dir.display()
        );
    } else if saved.multi_seed {
        eprintln!(
            "{} complete seed(s): a summary over seeds needs two",
            complete.len()
        );
    }
    Ok(())
}

/// With several seeds, the summary over them (only complete seeds: a cancelled one would
/// bias the means).
fn report_seeds(
    out: &std::path::Path,
    seeds: std::ops::Range<u64>,
    runs: &[Vec<lab::LabResult>],
) -> anyhow::Result<()> {
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
    let (numbers, complete): (Vec<u64>, Vec<&[lab::LabResult]>) = runs
        .iter()
        .zip(seeds.start..)
        .filter(|(r, _)| r.len() == width && !r.iter().any(lab::LabResult::cancelled))
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
        lab::seeds::write_seeds_numbered(out, &complete, &numbers)?
    );
    println!("summary over seeds in {}", out.display());
    Ok(())
}

/// `venn-lab k8s`'s arguments.
#[derive(clap::Args, Debug)]
struct K8sArgs {
    /// Experiment config (TOML), e.g. scripts/experiments/paper.toml.
    config: PathBuf,
    /// Write here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Container image with venn-manager, device-agent, fl-job and venn-lab.
    #[arg(long, default_value = "venn-testbed:latest")]
    image: String,
    /// Device-agent pods, each emulating one shard of the population (default: the
    /// config's `[devices] shards`).
    #[arg(long)]
    shards: Option<usize>,
    /// CPU request of each device shard (its devices train there).
    #[arg(long, default_value = "2")]
    shard_cpu: String,
    /// Memory request of each device shard.
    #[arg(long, default_value = "2Gi")]
    shard_memory: String,
    /// CPU request of each FL job.
    #[arg(long, default_value = "1")]
    job_cpu: String,
    /// Memory request of each FL job.
    #[arg(long, default_value = "1Gi")]
    job_memory: String,
    /// Render for `podman kube play` instead of Kubernetes (Pods, multi-document YAML).
    #[arg(long)]
    podman: bool,
}

#[cfg(feature = "k8s")]
fn k8s(a: K8sArgs) -> anyhow::Result<()> {
    let cfg = LabConfig::load(&a.config)?;
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("reading {}", a.config.display()))?;
    let opts = lab::k8s::K8sOptions {
        image: a.image,
        shards: a.shards.unwrap_or(cfg.devices.shards),
        config_text: Some(text),
        shard_cpu: a.shard_cpu,
        shard_memory: a.shard_memory,
        job_cpu: a.job_cpu,
        job_memory: a.job_memory,
        engine: if a.podman {
            lab::k8s::Engine::Podman
        } else {
            lab::k8s::Engine::Kubernetes
        },
        ..lab::k8s::K8sOptions::default()
    };
    let items = lab::k8s::render(&cfg, &opts)?;
    let (text, how) = if a.podman {
        (
            lab::k8s::podman_yaml(&items)?,
            "podman kube play --network NET",
        )
    } else {
        (
            serde_json::to_string_pretty(&lab::k8s::list(items))?,
            "kubectl apply -f",
        )
    };
    match a.out {
        Some(p) => {
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("wrote {} ({how} {})", p.display(), p.display());
        }
        None => println!("{text}"),
    }
    Ok(())
}

#[cfg(not(feature = "k8s"))]
fn k8s(a: K8sArgs) -> anyhow::Result<()> {
    let _ = (a.config, a.out, a.image, a.shards, a.podman);
    let _ = (a.shard_cpu, a.shard_memory, a.job_cpu, a.job_memory);
    anyhow::bail!(
        "this venn-lab was built without the `k8s` feature; rebuild it with \
         `cargo run --release --features k8s --bin venn-lab -- k8s …`"
    )
}

fn load_data(cfg: &LabConfig) -> anyhow::Result<Arc<datasets::Femnist>> {
    let data = datasets::Femnist::open(cfg.data.as_deref(), datasets::WriterSet::Main)
        .context("loading FEMNIST (the config's `data` key, or $VENN_DATA)")?;
    Ok(Arc::new(data))
}

/// Resolves at Ctrl-C (SIGINT) or, on Unix, SIGTERM (what `kill`, systemd and Kubernetes
/// send): either stops the run the same way, with its partial results written.
async fn ctrl_c() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    let _ = tokio::signal::ctrl_c().await;
    eprintln!("interrupted: stopping (a run still going writes its partial results)");
}
