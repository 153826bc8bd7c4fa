//! `venn-lab attack`: hostile clients against a real venn-manager process.

use std::path::PathBuf;

use anyhow::Context;

use crate::attack::{AttackOptions, run_attacks};

/// `venn-lab attack`'s arguments.
#[derive(clap::Args, Debug)]
pub(super) struct Args {
    /// The venn-manager binary (default: the one beside this program).
    #[arg(long)]
    manager_bin: Option<PathBuf>,
    /// Multiplies every attack's request count (1: 150,000 invented profiles, …).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// Concurrent attacking connections.
    #[arg(long, default_value_t = 32)]
    workers: usize,
}

pub(super) async fn run(a: Args) -> anyhow::Result<()> {
    let manager_bin = match a.manager_bin {
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
    anyhow::ensure!(
        a.scale > 0.0 && a.scale.is_finite(),
        "--scale must be positive"
    );
    let dir = std::env::temp_dir().join(format!("venn-lab-attack-{}", std::process::id()));
    let summary = run_attacks(&AttackOptions {
        manager_bin,
        dir: dir.clone(),
        scale: a.scale,
        workers: a.workers,
    })
    .await?;
    print!("{}", summary.table());
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
