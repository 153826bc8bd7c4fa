//! `venn-lab k8s`: an experiment rendered as Kubernetes objects (or Pods for podman).

use std::path::PathBuf;

use super::context::Lab;

/// `venn-lab k8s`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
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
pub(super) fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    use crate::k8s::{Engine, K8sOptions, list, podman_yaml, render};
    use anyhow::Context;
    let cfg = super::context::load_config(&a.config, lab)?;
    let text = std::fs::read_to_string(&a.config)
        .with_context(|| format!("reading {}", a.config.display()))?;
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
    let (text, how) = if a.podman {
        (podman_yaml(&items)?, "podman kube play --network NET")
    } else {
        (
            serde_json::to_string_pretty(&list(items))?,
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
pub(super) fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let _ = (a.config, a.out, a.image, a.shards, a.podman, &lab.policies);
    let _ = (a.shard_cpu, a.shard_memory, a.job_cpu, a.job_memory);
    anyhow::bail!(
        "this venn-lab was built without the `k8s` feature; rebuild it with \
         `cargo run --release --features k8s --bin venn-lab -- k8s …`"
    )
}
