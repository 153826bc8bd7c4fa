//! `venn-lab k8s`: an experiment rendered as Kubernetes objects (or Pods for podman), and
//! `venn-lab k8s sweep`: a sweep of simulator runs as an indexed Job.

use std::path::PathBuf;

use super::context::Lab;

/// `venn-lab k8s`'s arguments: a live experiment, or `sweep`.
#[derive(clap::Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub(super) struct Args {
    #[command(subcommand)]
    sweep: Option<Sub>,
    /// Experiment config (TOML), e.g. scripts/experiments/paper.toml.
    #[arg(required = true)]
    config: Option<PathBuf>,
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

/// `venn-lab k8s`'s subcommands.
#[derive(clap::Subcommand, Debug)]
enum Sub {
    /// Render a sweep of `venn-lab sim` runs — every config under every policy and seed —
    /// as one Kubernetes indexed Job (index K runs one (config, seed, policy) into its own
    /// folder of a shared results volume; a failed index is retried alone; applied again,
    /// it resumes where it stopped) and a gather Job that summarises each config into
    /// /results/<name> as `venn-lab sim CONFIG --policies … --seeds N` would. With
    /// --podman, the same indices as bare Pods for `podman kube play`.
    Sweep(SweepArgs),
}

/// `venn-lab k8s sweep`'s arguments.
#[derive(clap::Args, Debug)]
struct SweepArgs {
    /// Experiment configs (TOML), each summarised into a folder of its `name`.
    #[arg(required = true)]
    configs: Vec<PathBuf>,
    /// Comma-separated policies; the first is the baseline.
    #[arg(long, value_delimiter = ',', required = true)]
    policies: Vec<String>,
    /// Seeds (replicates 0..N, as `venn-lab sim --seeds N` runs them).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=100))]
    seeds: u64,
    /// Simulate the schedules only (no training, no accuracy).
    #[arg(long)]
    schedule_only: bool,
    /// Indices running at once.
    #[arg(long, default_value_t = 4)]
    parallelism: usize,
    /// Retries of a failed index (`backoffLimitPerIndex`), the others untouched.
    #[arg(long, default_value_t = 2)]
    retries: i32,
    /// CPU request of each index (default: the largest `[sim] threads` of the configs,
    /// 2 where that is 0 = one per core).
    #[arg(long)]
    cpu: Option<String>,
    /// Memory request of each index (fig9 — 20 jobs, 5,000 devices, trained — peaked at
    /// 356 MB RSS).
    #[arg(long, default_value = "512Mi")]
    memory: String,
    /// Memory limit of each index.
    #[arg(long, default_value = "1Gi")]
    memory_limit: String,
    /// Size of the shared results volume.
    #[arg(long, default_value = "1Gi")]
    storage: String,
    /// Container image with venn-lab.
    #[arg(long, default_value = "venn-testbed:latest")]
    image: String,
    /// Render for `podman kube play` (bare Pods) instead of Kubernetes.
    #[arg(long)]
    podman: bool,
    /// Write here instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[cfg(feature = "k8s")]
pub(super) fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    use crate::k8s::{Engine, K8sOptions, render};
    use anyhow::Context;
    if let Some(Sub::Sweep(s)) = a.sweep {
        return sweep(s, lab);
    }
    let config = a.config.context("a config (or `sweep`)")?;
    let cfg = super::context::load_config(&config, lab)?;
    let text = std::fs::read_to_string(&config)
        .with_context(|| format!("reading {}", config.display()))?;
    let opts = K8sOptions {
        image: a.image,
        shards: a.shards.unwrap_or(cfg.devices.shards),
        config_text: Some(text),
        shard_cpu: a.shard_cpu,
        shard_memory: a.shard_memory,
        job_cpu: a.job_cpu,
        job_memory: a.job_memory,
        engine: if a.podman {
            Engine::Podman
        } else {
            Engine::Kubernetes
        },
        ..K8sOptions::default()
    };
    let items = render(&cfg, &opts)?;
    write_items(items, a.podman, a.out)
}

/// The objects as JSON (`kubectl apply -f`) or podman's YAML, to `out` or standard output.
#[cfg(feature = "k8s")]
fn write_items(
    items: Vec<serde_json::Value>,
    podman: bool,
    out: Option<PathBuf>,
) -> anyhow::Result<()> {
    use crate::k8s::{list, podman_yaml};
    use anyhow::Context;
    let (text, how) = if podman {
        (podman_yaml(&items)?, "podman kube play --network NET")
    } else {
        (
            serde_json::to_string_pretty(&list(items))?,
            "kubectl apply -f",
        )
    };
    match out {
        Some(p) => {
            std::fs::write(&p, text).with_context(|| format!("writing {}", p.display()))?;
            eprintln!("wrote {} ({how} {})", p.display(), p.display());
        }
        None => println!("{text}"),
    }
    Ok(())
}

/// `venn-lab k8s sweep`: the plan of every (config, seed, policy), rendered.
#[cfg(feature = "k8s")]
fn sweep(a: SweepArgs, lab: &Lab) -> anyhow::Result<()> {
    use crate::k8s::{Engine, SweepOptions, render_sweep};
    use crate::sweep::{SweepConfig, SweepPlan};
    use anyhow::Context;
    let mut configs = Vec::new();
    let mut texts = Vec::new();
    let mut threads = 0;
    for path in &a.configs {
        let cfg = super::context::load_config(path, lab)?;
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        for p in &a.policies {
            anyhow::ensure!(
                lab.policies.names().iter().any(|n| n == p),
                "unknown policy {p:?} (known: {})",
                lab.policies.names().join(", ")
            );
        }
        threads = threads.max(cfg.sim.threads);
        let file = format!("{}.toml", crate::k8s::dns_label(&cfg.name));
        configs.push(SweepConfig {
            name: cfg.name.clone(),
            file: file.clone(),
        });
        texts.push((file, text));
    }
    let plan = SweepPlan::new(configs, a.policies, a.seeds, a.schedule_only)?;
    let opts = SweepOptions {
        image: a.image,
        parallelism: a.parallelism,
        retries_per_index: a.retries,
        cpu: a.cpu.unwrap_or_else(|| {
            if threads == 0 {
                "2".into()
            } else {
                threads.to_string()
            }
        }),
        memory: a.memory,
        memory_limit: a.memory_limit,
        storage: a.storage,
        engine: if a.podman {
            Engine::Podman
        } else {
            Engine::Kubernetes
        },
    };
    let name = plan.configs[0].name.clone();
    eprintln!(
        "{} indices ({} config(s) × {} seed(s) × {} policies)",
        plan.entries.len(),
        plan.configs.len(),
        plan.seeds,
        plan.policies.len()
    );
    let items = render_sweep(&name, &plan, &texts, &opts)?;
    write_items(items, a.podman, a.out)
}

#[cfg(not(feature = "k8s"))]
pub(super) fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let _ = (
        a.sweep,
        a.config,
        a.out,
        a.image,
        a.shards,
        a.podman,
        &lab.policies,
    );
    let _ = (a.shard_cpu, a.shard_memory, a.job_cpu, a.job_memory);
    anyhow::bail!(
        "this venn-lab was built without the `k8s` feature; rebuild it with \
         `cargo run --release --features k8s --bin venn-lab -- k8s …`"
    )
}
