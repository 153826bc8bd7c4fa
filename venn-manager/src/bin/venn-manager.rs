//! `venn-manager`: the live resource manager's command line.

use anyhow::Context;
use clap::Parser;
use std::path::PathBuf;
use std::sync::Arc;
use venn_core::{PolicyParams, SupplyConfig, TierParams};
use venn_manager::{Clock, Manager, Settings, server};

/// Serve the Venn resource manager: FL jobs register and submit round requests; devices
/// check in and are assigned to jobs by the chosen scheduling policy. State lives in a
/// SQLite file, so restarting on the same --db resumes every job and round.
#[derive(Parser, Debug)]
#[command(version)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:7070")]
    listen: String,
    /// SQLite database file (created if missing).
    #[arg(long, default_value = "venn-manager.db")]
    db: PathBuf,
    /// Scheduling policy: random, random-order, fifo, srsf, venn, irs.
    #[arg(long, default_value = "venn")]
    policy: String,
    /// Tier count V for venn's device matching (1 disables it).
    #[arg(long, default_value_t = 2)]
    tiers: u32,
    /// Fairness knob epsilon for venn (0 = plain IRS).
    #[arg(long, default_value_t = 0.0)]
    epsilon: f64,
    /// Supply-estimator window in seconds.
    #[arg(long, default_value_t = 86400.0)]
    supply_window_s: f64,
    /// Seconds an idle device waits before checking in again.
    #[arg(long, default_value_t = 5.0)]
    retry_after_s: f64,
    /// Seed of the scheduler's random generator.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let a = Args::parse();
    let settings = Settings {
        policy: a.policy,
        params: PolicyParams {
            tiers: TierParams {
                v: a.tiers,
                ..TierParams::default()
            },
            epsilon: a.epsilon,
            ..PolicyParams::default()
        },
        supply: SupplyConfig {
            window_s: a.supply_window_s,
            ..SupplyConfig::default()
        },
        seed: a.seed,
        retry_after_s: a.retry_after_s,
        ..Settings::default()
    };
    let manager = Arc::new(
        Manager::open(settings, &a.db, Clock::System)
            .with_context(|| format!("opening {}", a.db.display()))?,
    );
    let listener = tokio::net::TcpListener::bind(&a.listen)
        .await
        .with_context(|| format!("binding {}", a.listen))?;
    tracing::info!(addr = %listener.local_addr()?, db = %a.db.display(), "venn-manager listening");
    server::serve(listener, manager, server::shutdown_signal()).await?;
    Ok(())
}
