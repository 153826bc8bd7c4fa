//! `venn-lab soak`: a live experiment under load while the manager is SIGKILLed, a device
//! shard and a job are killed mid-round and the manager's disk fills; then its database
//! is checked for anything lost.

use std::path::PathBuf;

use anyhow::Context;

use super::context::{Lab, load_config};
use crate::soak::{Binaries, DEFAULT_EXPERIMENT, SoakOptions, run_soak};

/// `venn-lab soak`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// Experiment config (TOML) whose devices and jobs run under the faults; default: a
    /// built-in one (two small ResNet-18 jobs, 16 devices in two shards). Its jobs should
    /// require an OS version above 1: the load's devices (tagged `soak-load`) have 1.
    config: Option<PathBuf>,
    /// Seconds of load; jobs arrive again as they finish until then, and every fault
    /// happens within it (10 %–85 % of it). 40 fits CI; use 600 or more as a benchmark.
    #[arg(long, default_value_t = 40.0)]
    seconds: f64,
    /// How many times the manager is SIGKILLed and started again.
    #[arg(long, default_value_t = 3)]
    manager_kills: u32,
    /// Load: check-ins in flight at once.
    #[arg(long, default_value_t = 8)]
    connections: usize,
    /// Load: distinct emulated device ids.
    #[arg(long, default_value_t = 5_000)]
    load_devices: usize,
    /// Size of the tmpfs the manager's database lives on, MiB (mounting needs root); 0:
    /// no quota disk and no disk-full phase.
    #[arg(long, default_value_t = 256)]
    quota_mib: u64,
    /// Seconds the disk stays full before the soak frees it.
    #[arg(long, default_value_t = 3.0)]
    disk_full_s: f64,
    /// Seed of the faults' moments (which fault, when).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Folder with venn-manager, fl-job and device-agent (default: this program's).
    #[arg(long)]
    bin_dir: Option<PathBuf>,
    /// Working folder: logs of every process, job configs and CSVs (default: a
    /// temporary folder, removed when the soak passes).
    #[arg(long)]
    dir: Option<PathBuf>,
    /// Also write the report as JSON here.
    #[arg(long)]
    json: Option<PathBuf>,
}

pub(super) async fn run(a: Args, lab: &Lab) -> anyhow::Result<()> {
    let experiment = match &a.config {
        Some(p) => load_config(p, lab)?,
        None => crate::LabConfig::parse(DEFAULT_EXPERIMENT, std::path::Path::new("soak.toml"))?,
    };
    let bin_dir = match a.bin_dir {
        Some(d) => d,
        None => std::env::current_exe()?
            .parent()
            .context("locating this program's folder")?
            .to_path_buf(),
    };
    anyhow::ensure!(
        a.seconds > 0.0 && a.seconds.is_finite(),
        "--seconds must be positive"
    );
    let temporary = a.dir.is_none();
    let dir = a.dir.unwrap_or_else(|| {
        std::env::temp_dir().join(format!("venn-lab-soak-{}", std::process::id()))
    });
    let opts = SoakOptions {
        bins: Binaries::in_dir(&bin_dir)?,
        dir: dir.clone(),
        experiment,
        seconds: a.seconds,
        manager_kills: a.manager_kills,
        connections: a.connections,
        load_devices: a.load_devices,
        quota_mib: a.quota_mib,
        disk_full_s: a.disk_full_s,
        seed: a.seed,
        progress: true,
    };
    let report = run_soak(&opts).await?;
    print!("{}", report.table());
    if let Some(p) = &a.json {
        std::fs::write(p, serde_json::to_string_pretty(&report)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    if report.passed() && temporary {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        println!("logs in {}", dir.display());
    }
    anyhow::ensure!(
        report.passed(),
        "the soak found problems (FAIL lines above)"
    );
    Ok(())
}
