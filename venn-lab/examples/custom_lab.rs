//! `venn-lab` with a custom FL task registered beside the built-ins: the
//! `softmax-fedavgm` task of `fl-job/examples/custom_task.rs`. Every subcommand and flag of
//! `venn-lab` works with it (`run`, `compare --seeds`, `sim --schedule-only`, `devices`,
//! `summarize`, …), because the command line lives in the library
//! (`venn_lab::commands::main_with`).
//!
//! `cargo run --release -p venn-lab --example custom_lab -- run scripts/experiments/custom.toml`
//!
//! Copy this file and `custom_task.rs` to start your own job: implement `FlTask`, register
//! it under a name here, and name that task in the experiment's TOML. (It shares the
//! workspace's release build of Burn: no second build.)

#[path = "../../fl-job/examples/custom_task.rs"]
mod custom_task;

use venn_lab::commands::{Lab, main_with};

fn main() -> anyhow::Result<()> {
    let mut lab = Lab::default();
    custom_task::register(&mut lab.tasks);
    main_with(lab)
}
