//! `venn-lab gather`: collect an experiment that ran on several hosts, over HTTP.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;

use super::context::{Lab, load_config};
use crate::gather::{GatherOptions, Hosts};

/// `venn-lab gather`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
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
}

pub(super) async fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let cfg = load_config(&a.config, lab)?;
    let out = a
        .out
        .unwrap_or_else(|| PathBuf::from("results").join(&cfg.name).join("gathered"));
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let hosts = Hosts {
        manager: a.manager,
        jobs: a.jobs,
        devices: a.devices,
    };
    let opts = GatherOptions {
        timeout: Duration::from_secs_f64(a.timeout_s.max(0.0)),
        progress: true,
        ..Default::default()
    };
    let r = crate::gather::gather(&cfg, &hosts, &out, opts).await?;
    print!("{}", r.table());
    println!("results in {}", out.display());
    Ok(())
}
