//! Runs a `venn-lab` experiment with a custom FL task registered beside the built-ins:
//! the `softmax-fedavgm` task of `fl-job/examples/custom_task.rs`.
//!
//! `cargo run --release -p venn-lab --example custom_lab -- scripts/experiments/custom.toml`
//!
//! Copy this file and `custom_task.rs` to start your own job: implement `FlTask`, register
//! it under a name, and name that task in the experiment's TOML.

#[path = "../../fl-job/examples/custom_task.rs"]
mod custom_task;

use anyhow::Context;
use fl_job::task::Registry;
use std::path::PathBuf;
use std::sync::Arc;
use venn_lab::{LabConfig, run_experiment};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().with_env_filter("error").init();
    let path = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "scripts/experiments/custom.toml".into()),
    );
    let cfg = LabConfig::load(&path)?;
    let mut registry = Registry::with_builtins();
    custom_task::register(&mut registry);
    let data = datasets::Femnist::open(cfg.data.as_deref(), datasets::WriterSet::Main)
        .context("loading FEMNIST")?;
    let data = Arc::new(data);
    let out = PathBuf::from("results")
        .join(&cfg.name)
        .join(cfg.policy.name());
    let r = run_experiment(
        &cfg,
        &venn_core::PolicyRegistry::builtin(),
        &out,
        data,
        registry,
        async {
            let _ = tokio::signal::ctrl_c().await;
        },
        venn_lab::RunUi::ATTENDED,
    )
    .await?;
    print!("{}", r.table());
    println!("results in {}", out.display());
    Ok(())
}
