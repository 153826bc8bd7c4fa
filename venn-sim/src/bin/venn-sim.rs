//! The `venn-sim` command-line tool; see `venn-sim --help`.

#[path = "../cli/mod.rs"]
mod cli;

use clap::Parser;
use tracing_subscriber::EnvFilter;

fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    cli::run(cli::Cli::parse())
}
