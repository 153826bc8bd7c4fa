//! `venn-lab load`: emulated check-ins against a manager, throughput and latency.

use std::time::Duration;

use anyhow::Context;
use device_agent::population;
use venn_core::PolicyConfig;
use venn_manager::Settings;

use crate::LocalManager;
use crate::load::{self, LoadConfig};

/// `venn-lab load`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
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
}

pub(super) async fn run(a: Args) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("venn-lab-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let local = match a.url {
        Some(_) => None,
        None => {
            let settings = Settings {
                policy: PolicyConfig::named(&a.policy),
                ..Settings::default()
            };
            Some(
                LocalManager::start(settings, &dir.join("manager.db"))
                    .await
                    .context("starting the in-process manager")?,
            )
        }
    };
    let base = a
        .url
        .unwrap_or_else(|| local.as_ref().map(|l| l.url.clone()).unwrap_or_default());
    if a.busy {
        load::register_busy_jobs(&base).await?;
    }
    let report = load::run(LoadConfig {
        base,
        profiles: population::synthetic(997),
        devices: a.devices,
        connections: a.connections,
        duration: Duration::from_secs_f64(a.seconds),
    })
    .await;
    println!("{}", serde_json::to_string_pretty(&report)?);
    Ok(())
}
